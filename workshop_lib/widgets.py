"""The notebooks' input widgets, each with its headless default read from the environment.

A notebook cell makes its widget here in one line (``path = widgets.deploy_path(workshop)``) and
reads ``path.value`` in the next cell. Each widget starts at its environment variable's value when
that is set (``ENV``: unattended runs, nbmake and CI choose through it), else at what the participant
chose last (``keep_choice``: kept across Run All and kernel restarts, in ``outputs.json``), else at
the config's or the step's default. ipywidgets is imported only when a widget is made.
"""

from __future__ import annotations

import os
from typing import Any, TypeAlias

from .deploy_paths import NAMES as DEPLOY_PATHS
from .evaluation.throughput import DEFAULT_P95_MS
from .steps.context import Workshop, keep_choice
from .steps.invoke import builder_default
from .steps.scale import scaling_target as measured_target

# Each widget's environment variable: its value there wins over any kept choice.
ENV = {
    "deploy_path": "WORKSHOP_DEPLOY_PATH",
    "reset_rehearsal": "WORKSHOP_RESET_REHEARSAL",
    "endpoint_ttl_hours": "WORKSHOP_ENDPOINT_TTL_HOURS",
    "codebuild_role_arn": "WORKSHOP_CODEBUILD_ROLE_ARN",
    "follow_dlc_tag": "WORKSHOP_FOLLOW_DLC_TAG",
    "builder_state": "WORKSHOP_BUILDER_STATE",
    "builder_question": "WORKSHOP_BUILDER_QUESTION",
    "builder_options": "WORKSHOP_BUILDER_OPTIONS",
    "capture_percent": "WORKSHOP_CAPTURE_PERCENT",
    "bench_limit": "WORKSHOP_BENCH_LIMIT",
    "bench_study_limit": "WORKSHOP_BENCH_STUDY_LIMIT",
    "delete_bucket": "WORKSHOP_DELETE_BUCKET",
    "scaling_target": "WORKSHOP_SCALING_TARGET",
    "throughput_p95_ms": "WORKSHOP_THROUGHPUT_P95_MS",
}
BENCH_LIMIT, BENCH_STUDY_LIMIT = (
    3,
    2,
)  # notebook 06's defaults: a few tasks (one held out for calibration), a couple studied
_WIDE = {"description_width": "initial"}

Widget: TypeAlias = Any  # an ipywidgets widget: ipywidgets ships no type annotations


def _env(key: str, default: str) -> str:
    return os.environ.get(ENV[key], default)


def _yes(key: str) -> bool:
    return _env(key, "").strip().lower() in ("1", "yes", "true")


def _kept(workshop: Workshop, key: str, widget: Widget) -> Widget:
    return keep_choice(workshop, key, widget, env=ENV[key])


def column(*made: Widget) -> Widget:
    """The widgets one under the other (what a cell shows)."""
    import ipywidgets

    return ipywidgets.VBox(list(made))


# ---- 00_setup ---------------------------------------------------------------------------


def deploy_path(workshop: Workshop) -> Widget:
    """What the later notebooks deploy: one of the deploy paths (``deploy_paths``)."""
    import ipywidgets

    made = ipywidgets.Dropdown(
        options=DEPLOY_PATHS, value=_env("deploy_path", workshop.config.deploy_path), description="Deploy path"
    )
    return _kept(workshop, "deploy_path", made)


def reset_rehearsal() -> Widget:
    """Whether notebook 00 starts the local rehearsal over (not kept: a reset is asked for each time)."""
    import ipywidgets

    return ipywidgets.Checkbox(
        value=_env("reset_rehearsal", "") == "1",
        indent=False,
        description="start the rehearsal over (local mode: stops its emulator and endpoints)",
        layout=ipywidgets.Layout(width="auto"),
    )


def endpoint_ttl(workshop: Workshop) -> Widget:
    """Hours each endpoint lives before its deadline deletes it (0: no deadline)."""
    import ipywidgets

    made = ipywidgets.BoundedFloatText(
        value=float(_env("endpoint_ttl_hours", workshop.config.endpoint_ttl_hours)),
        min=0,
        max=168,
        step=0.5,
        description="Endpoint deadline (hours)",
        style=_WIDE,
    )
    return _kept(workshop, "endpoint_ttl_hours", made)


def codebuild_role(workshop: Workshop) -> Widget:
    """An administrator's CodeBuild role ARN, or empty for notebook 00 to create the workshop's own."""
    import ipywidgets

    made = ipywidgets.Text(
        value=_env("codebuild_role_arn", workshop.config.codebuild_role_arn or ""),
        placeholder="arn:aws:iam::<account>:role/<name>, or empty to create it",
        description="CodeBuild role",
        layout=ipywidgets.Layout(width="90%"),
        style=_WIDE,
    )
    return _kept(workshop, "codebuild_role_arn", made)


# ---- 02, 04, 05, 06, 07 ---------------------------------------------------------------------


def follow_dlc_tag() -> Widget:
    """Notebook 02: follow the DLC's floating tag where the pinned digest is missing ("no" unless told)."""
    import ipywidgets

    return ipywidgets.Dropdown(
        options=["no", "yes"],
        value="yes" if _yes("follow_dlc_tag") else "no",
        description="Follow the DLC's floating tag where the pinned digest is missing",
        style=_WIDE,
        layout=ipywidgets.Layout(width="auto"),
    )


def capture_percent(workshop: Workshop) -> Widget:
    """Notebook 04: the share of each decision endpoint's invocations data capture records (0: none)."""
    import ipywidgets

    made = ipywidgets.BoundedIntText(
        value=int(_env("capture_percent", workshop.config.capture_percent)),
        min=0,
        max=100,
        description="Data capture (% of invocations)",
        style=_WIDE,
    )
    return _kept(workshop, "capture_percent", made)


def decision_builder(workshop: Workshop) -> Widget:
    """Notebook 05's builder: state, question and options (``steps.builder_request`` reads what was typed)."""
    import ipywidgets

    state = ipywidgets.Textarea(
        value=_env("builder_state", builder_default("state")),
        description="State",
        layout=ipywidgets.Layout(width="95%", height="110px"),
    )
    question = ipywidgets.Text(
        value=_env("builder_question", builder_default("question")),
        description="Question",
        layout=ipywidgets.Layout(width="95%"),
    )
    options = ipywidgets.Textarea(
        value=_env("builder_options", builder_default("options")),
        description="Options",
        layout=ipywidgets.Layout(width="95%"),
    )
    for key, made in (("builder_state", state), ("builder_question", question), ("builder_options", options)):
        _kept(workshop, key, made)
    return column(state, question, options)


def bench_limits(workshop: Workshop) -> tuple[Widget, Widget]:
    """Notebook 06: how many tasks to run, and how many of them to study closely."""
    import ipywidgets

    limit = ipywidgets.IntSlider(value=int(_env("bench_limit", str(BENCH_LIMIT))), min=2, max=72, description="Tasks")
    study_limit = ipywidgets.IntSlider(
        value=int(_env("bench_study_limit", str(BENCH_STUDY_LIMIT))), min=1, max=72, description="Studied"
    )
    return _kept(workshop, "bench_limit", limit), _kept(workshop, "bench_study_limit", study_limit)


def throughput_p95(workshop: Workshop) -> Widget:
    """Notebook 06: the p95 (milliseconds) a sustainable rate must keep (default: 07's latency alarm, 2 s)."""
    import ipywidgets

    made = ipywidgets.BoundedFloatText(
        value=float(_env("throughput_p95_ms", str(DEFAULT_P95_MS))),
        min=1,
        max=600_000,
        step=100,
        description="p95 to keep (ms)",
        style=_WIDE,
    )
    return _kept(workshop, "throughput_p95_ms", made)


def scaling_target(workshop: Workshop) -> Widget:
    """Notebook 07: the invocations per instance per minute auto scaling tracks (default: 70 % of the
    sustainable rate notebook 06 measured, or of one instance's pace one decision at a time)."""
    import ipywidgets

    made = ipywidgets.BoundedFloatText(
        value=float(_env("scaling_target", str(measured_target(workshop)))),
        min=0.1,
        max=100_000,
        step=1,
        description="Auto scaling target (invocations per instance per minute)",
        style=_WIDE,
        layout=ipywidgets.Layout(width="auto"),
    )
    return _kept(workshop, "scaling_target", made)


def delete_bucket(bucket: str) -> Widget:
    """Notebook 08: whether to delete ``bucket`` too (not kept: deleting is asked for each time)."""
    import ipywidgets

    return ipywidgets.Checkbox(
        value=_env("delete_bucket", "") == "1",
        indent=False,
        description=f"also delete the bucket {bucket}",
        layout=ipywidgets.Layout(width="auto"),
    )


__all__ = [
    "ENV",
    "bench_limits",
    "capture_percent",
    "codebuild_role",
    "column",
    "decision_builder",
    "delete_bucket",
    "deploy_path",
    "endpoint_ttl",
    "follow_dlc_tag",
    "keep_choice",
    "reset_rehearsal",
    "scaling_target",
    "throughput_p95",
]

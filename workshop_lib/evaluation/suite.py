"""The whole benchmark in one call: decision readout, then the opt-in studies.

Order of the phases (each one a sequential pass unless noted):

1. the decision readout over all tasks (``concurrency`` clients; 1 = as the blog);
2. ``bias``: the same tasks with the options reversed (the order test);
3. ``debias``: the order-debiased readout (the adapter's ``rotations`` mode, ``served.run_mode``),
   for the original and the reversed order;
4. ``baseline``: the generation baseline through the chat schema (last, because a
   chat request resets the adapter's cached prefix), and/or the letter-probability baseline:
   the decision prompt sent to the standard endpoint (``standard``) for its first token's
   ``top_logprobs`` (logprobs.py);
5. ``calibrate``: computed from the decision readout, no extra requests.

The studies run on the first ``study_limit`` tasks (all by default), so a quick run
can keep them small.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..client import EndpointClient
from .baseline import MAX_TOKENS, run_generation_baseline
from .bias import run_order_test
from .logprobs import TOP_LOGPROBS, run_logprobs_baseline
from .report_view import ReportView
from .runner import run_decisions, run_systemone
from .served import run_mode
from .tasks import Task, resolve_tasks, select

BASELINES = ("generation", "logprobs")


def baselines(baseline: bool | str | Iterable[str] | None) -> tuple[str, ...]:
    """Which baselines ``baseline`` asks for: False/None (none), True (generation), a name or several."""
    if not baseline:
        return ()
    names = ("generation",) if baseline is True else (baseline,) if isinstance(baseline, str) else tuple(baseline)
    unknown = [n for n in names if n not in BASELINES]
    if unknown:
        raise ValueError(f"unknown baseline {unknown[0]!r}; use {' or '.join(BASELINES)}")
    return tuple(n for n in BASELINES if n in names)


def run_benchmark(
    client: EndpointClient,
    tasks: str | Path | Sequence[Task] | None = None,
    *,
    limit: int | None = None,
    concurrency: int = 1,
    baseline: bool | str | Iterable[str] | None = False,
    standard: EndpointClient | None = None,
    top_logprobs: int = TOP_LOGPROBS,
    bias: bool = False,
    debias: bool = False,
    calibrate: bool = False,
    study_limit: int | None = None,
    order: str = "reversed",
    max_tokens: int = MAX_TOKENS,
    label: str = "decision",
    compare_with: dict[str, Any] | None = None,
    title: str = "Decision benchmark",
    progress: bool = True,
    schema: str = "decision",
) -> ReportView:
    """Run the benchmark against ``client`` (any ``EndpointClient``) and return its ``ReportView``.

    ``tasks``: a JSONL path, a list of ``Task`` or None for the packaged set; ``limit`` keeps
    that many, spread across families. ``compare_with``: ``report.load_comparison(path)``.
    ``schema``: "decision" (the project's schema) or "systemone" (the same tasks as Jev questions);
    the studies (baseline, order, calibration) always use the decision schema.
    ``baseline``: True or "generation" (chat, parse the reply), "logprobs" (letter probabilities from
    ``standard``, a client for the standard endpoint: llama-server), or both as a list.
    """
    wanted = baselines(baseline)
    if "logprobs" in wanted and standard is None:
        raise ValueError(
            "the logprobs baseline asks the standard endpoint (llama-server): pass standard= a client "
            "for it (workshop bench --standard-url, or the workshop's standard endpoint)"
        )
    chosen, source = resolve_tasks(tasks, limit)
    studied = select(chosen, study_limit)
    if schema not in ("decision", "systemone"):
        raise ValueError(f"schema must be 'decision' or 'systemone', not {schema!r}")
    main = run_systemone if schema == "systemone" else run_decisions
    runs = {"decision": main(client, chosen, concurrency=concurrency, progress=progress, label=label)}
    if bias or debias:
        runs["decision_reversed"] = run_order_test(client, studied, order=order, progress=progress, label=label)
    if debias:
        for key, shown in (("debiased", "original"), ("debiased_reversed", order)):
            runs[key] = run_mode(
                client, studied, "rotations", order=shown, temperature=None, progress=progress, label="debiased"
            )
    if "generation" in wanted:
        runs["generation"] = run_generation_baseline(client, studied, max_tokens=max_tokens, progress=progress)
    if "logprobs" in wanted:
        assert standard is not None  # refused above
        runs["logprobs"] = run_logprobs_baseline(standard, studied, top_logprobs=top_logprobs, progress=progress)
    notes = []
    if len(studied) < len(chosen) and (bias or debias or wanted):
        notes.append(f"baseline / order studies on {len(studied)} of the {len(chosen)} tasks")
    return ReportView(
        runs=runs, title=title, tasks_source=source, calibrate=calibrate, compare_with=compare_with, notes=notes
    )


def run_notebook_benchmark(
    client: EndpointClient,
    tasks: str | Path | Sequence[Task] | None = None,
    limit: int | None = None,
    *,
    baseline: bool | str | Iterable[str] | None = True,
    standard: EndpointClient | None = None,
    bias: bool = True,
    debias: bool = True,
    calibrate: bool = True,
    **options: Any,
) -> ReportView:
    """Notebook 06's one call: every study switched on; ``report.plot()`` draws the figures,
    ``report.to_markdown()`` (or just showing ``report``) gives the tables, ``report.save(dir)`` writes them.
    With ``standard`` (a client for the standard endpoint) the letter-probability baseline runs as well."""
    if baseline is True:
        baseline = ("generation", "logprobs") if standard is not None else ("generation",)
    return run_benchmark(
        client,
        tasks,
        limit=limit,
        baseline=baseline,
        standard=standard,
        bias=bias,
        debias=debias,
        calibrate=calibrate,
        **options,
    )


__all__ = ["BASELINES", "baselines", "run_benchmark", "run_notebook_benchmark"]

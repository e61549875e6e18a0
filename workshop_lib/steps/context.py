"""What every step shares: the ``Workshop`` (config, its mode and the clients the mode supplies, the
outputs one notebook records for the next), the small result types the notebooks show, and which
endpoint the decision steps call.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from ..aws import build_projects, images
from ..aws.policies import CODEBUILD_ROLE_NAME
from ..aws.requests_sent import RequestRecorder, SentRequest, requests_html, requests_text
from ..aws.session import Clients
from ..config import WorkshopConfig, default_path
from ..deploy_paths import DEFAULT_DECISION, DEPLOY_PATHS, deploy_path
from ..display import install_error_handler, row
from ..errors import StepError, StepNotRun
from ..local import rehearsal
from ..local.modes import LocalMode, mode_for
from ..models import EMBEDDED_MODEL, PINNED_MODEL, ModelSpec

P = ParamSpec("P")
R = TypeVar("R")

BOTO3_FLOOR = (1, 43, 1)  # first boto3 whose SageMaker model knows InstancePools

# What each step that creates something creates, spelled as notebook 08 names it.
# tests/notebooks checks that 07 mentions every name of every creating step 00-06 call.
CREATES: dict[str, tuple[str, ...]] = {
    "setup": ("config.bucket", "steps.stop_local("),
    "package_model": ("config.s3_uri()", "BUILD_PROJECTS"),
    "build_decision_image": ("config.ecr_repository", "BUILD_PROJECTS", "config.s3_uri()"),
    **{path.deploy_step: (f"config.{path.endpoint_field}", "steps.delete_deadline_role(") for path in DEPLOY_PATHS},
    "extend_deadline": ("steps.delete_endpoints(",),  # moves a deadline, which goes with its endpoint
    "ensure_codebuild_role": ("steps.delete_codebuild_role(",),
    "put_alarms": ("steps.delete_alarms(",),  # the alarms and the dashboard
    "update_endpoint": ("steps.delete_endpoints(",),  # the version's config and model go with the endpoint
    "calibrated_package": ("config.s3_uri()",),  # under the model folder, with notebook 01's package
    "autoscale": ("steps.remove_autoscaling(",),  # the scalable target and its policy
    "run_transform": ("steps.delete_transform_output(",),  # batch-input/ and batch-output/ (the job record stays)
    # the zero endpoint carries the workshop's tag; its component, scaling and alarm go before it
    "deploy_scale_to_zero": ("steps.tagged_endpoints(", "steps.delete_deadline_role("),
}
# Steps that only read, invoke or print.
READ_ONLY = frozenset(
    {
        "show_config",
        "check_environment",
        "check_quotas",
        "verify_package",
        "resolve_dlc",
        "llama_settings",
        "client",
        "route_client",  # a client; the bearer token it mints is not stored in AWS
        "decision_image",
        "refuse_mutable_tag",
        "placement",
        "decision_endpoint",
        "show_decision",
        "show_outcome",
        "parse_options",
        "audit_permissions",
        "show_decisions",
        "check_outcome",
        "short_errors",
        "deadline_text",
        "check_dlc_pins",  # check_dlc_pins records notebook 02's choice in outputs.json only
        "set_endpoint_ttl",
        "set_capture_percent",  # save notebook 00's and 04's choices in the config file, nothing in AWS
        "decision_client",
        "standard_client",
        "which_endpoint",
        "openai_base_url",
        "builder_request",
        "builder_default",
        "alarm_states",
        "endpoint_status",
        "update_package",
        "audit_trail",  # audit_trail writes a local file only
        "keep_choice",  # writes the widget's value to outputs.json, nothing in AWS
        "record_rate",
        "record_throughput",
        "scaling_target",  # 06's rates in outputs.json, and the target 07 derives
        "show_scale_to_zero",  # moves the zero endpoint's copies to 0 and back to 1: creates nothing
    }
)


class Text(str):
    """A step's message: a plain string that a notebook shows without quotes.

    ``problem`` is set when the step ran but did not reach its outcome (``check_outcome`` reports it).
    """

    problem: str

    def __new__(cls, text: str = "", *, problem: str = "") -> Text:
        made = super().__new__(cls, text)
        made.problem = problem
        return made

    @property
    def ok(self) -> bool:
        return not self.problem

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str | None:
        return _html(self, str(self))


def _html(result: object, text: str) -> str | None:
    """A result with the requests its step sent, as HTML: the text, then the requests folded. None (the
    notebook shows the plain text) when the step sent none."""
    sent = getattr(result, "requests", ())
    return requests_html(sent, text) if sent else None


def shows_requests(step: Callable[Concatenate[Workshop, P], R]) -> Callable[Concatenate[Workshop, P], R]:
    """A step that sends AWS requests returns, on its result's ``requests``, the ones it sent (botocore's
    validated parameters, secrets masked), which the notebook shows folded under the result's text. A step
    that fails raises its error carrying the requests it sent before it failed (``requests``, and a note
    listing them, which the notebook's error line and the command line print): a refusal or a validation
    error is when they need reading."""

    @functools.wraps(step)
    def run(workshop: Workshop, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with workshop.requests.recording() as sent:
            try:
                result = step(workshop, *args, **kwargs)
            except Exception as exc:
                if sent:
                    _carry(exc, tuple(sent))
                raise
        try:
            shown: Any = result  # whatever type the step returns may carry them
            shown.requests = tuple(sent)
        except AttributeError:  # a result that takes no attribute (None, a tuple): shown as it is
            pass
        return result

    return run


def _carry(exc: Exception, sent: tuple[SentRequest, ...]) -> None:
    """``exc`` with the requests ``sent`` as its ``requests`` and as one note; a step around another one, which
    saw more of them, replaces the inner step's note."""
    note = "AWS requests sent before it failed:\n" + requests_text(sent)
    earlier = getattr(exc, "requests_note", None)
    carrier: Any = exc  # attributes no exception class declares (``__notes__`` is 3.11's)
    try:
        carrier.__notes__ = [*(n for n in getattr(exc, "__notes__", []) if n != earlier), note]
        carrier.requests, carrier.requests_note = sent, note
    except AttributeError:  # an exception that takes no attribute: raised as it is
        pass


class Shown:
    """Results display as their short text in a notebook (and in print); ``ok`` says whether the
    step reached its outcome (``check_outcome`` reads it)."""

    def lines(self) -> list[str]:
        raise NotImplementedError

    @property
    def ok(self) -> bool:
        return True

    def __str__(self) -> str:
        return "\n".join(self.lines())

    __repr__ = __str__

    def _repr_html_(self) -> str | None:
        return _html(self, str(self))


@dataclass(repr=False)
class Checks(Shown):
    """Rows of checks, each passed, failed or skipped (None), with what was found: notebook 00's
    environment checks and every notebook's closing check."""

    rows: list[tuple[str, bool | None, str]]  # (check, passed / None = skipped, detail)

    @property
    def ok(self) -> bool:
        return all(passed is not False for _, passed, _ in self.rows)

    @property
    def summary(self) -> str:
        failed = [name for name, passed, _ in self.rows if passed is False]
        skipped = sum(passed is None for _, passed, _ in self.rows)
        return (
            f"failed: {', '.join(failed)}"
            if failed
            else f"{len(self.rows) - skipped} checks passed" + (f", {skipped} skipped" if skipped else "")
        )

    def lines(self) -> list[str]:
        mark = {True: "ok  ", False: "FAIL", None: "skip"}
        return [row(f"{mark[passed]} {name:<14} ", detail) for name, passed, detail in self.rows]


# What the recorded outputs are, as a participant reads them in "no ... recorded yet".
RECORDED = {
    "decision_image_cpu": "CPU decision image",
    "decision_image_gpu": "GPU decision image",
    "dlc_cpu": "pinned CPU DLC",
    "dlc_cuda": "pinned GPU DLC",
}
# Error codes that mean "it is not there" (as opposed to "you may not look").
GONE_CODES = frozenset(
    {
        "404",
        "NoSuchKey",
        "NoSuchBucket",
        "NotFound",
        "NoSuchEntity",
        "ImageNotFoundException",
        "RepositoryNotFoundException",
    }
)


# ---- clients and saved outputs -------------------------------------------------------------


class Workshop:
    """One participant's workshop: the config, the clients for its mode (``clients``), and the
    outputs one notebook records for the next (``outputs.json`` beside the config file). Every
    step takes it first; the notebooks make one with ``Workshop.load()``."""

    def __init__(self, config: WorkshopConfig, path: str | Path | None = None):
        self.config = config
        self.path = Path(path) if path is not None else default_path()
        # Local mode's emulator and endpoint processes, recorded in local/ next to the config file.
        self.rehearsal = rehearsal.Rehearsal(rehearsal.local_dir(self.path))
        self.mode = mode_for(config.mode, self.rehearsal)  # chosen once: what supplies clients, builds, hosting
        self._clients: Clients | None = None
        self.requests = RequestRecorder()  # every client's sent requests, for the steps to show (shows_requests)

    @classmethod
    def load(cls, path: str | Path | None = None) -> Workshop:
        """The saved config (environment over file, see ``config``) at ``path`` or the default place."""
        return cls(WorkshopConfig.load(path), path)

    def __repr__(self) -> str:
        return f"Workshop({self.config.mode}, {self.config.region}, {self.path})"

    @property
    def clients(self) -> Clients:
        """The mode's clients for the config's region, made once; in local mode for the emulator notebook 00
        started (StepNotRun naming 00 when none runs)."""
        if self._clients is None or self._clients.region != self.config.region:
            if self.mode.name == "local":
                assert isinstance(self.mode, LocalMode)
                self.mode.emulator_url  # before any client is made: say which notebook starts it
            self._clients = Clients(self.mode, self.config.region, self.requests)
        return self._clients

    @property
    def local(self) -> bool:
        """Whether this workshop rehearses locally (its mode is ``LocalMode``)."""
        return self.mode.name == "local"

    def forget_clients(self) -> None:
        """Drop the clients and the emulator's URL (after the emulator they reach was stopped or replaced)."""
        self._clients = None
        self.mode.forget()

    def nothing_to_clean(self) -> Text | None:
        """Local mode with no emulator running: what the rehearsal made in it ended with it, so a cleanup
        step has nothing to delete (it says so instead of starting an empty emulator). None otherwise."""
        if self.config.mode != "local" or self.rehearsal.emulator_url():
            return None
        return Text(
            "nothing to clean: the local rehearsal is not running, and the emulated AWS resources ended "
            "with it (08_cleanup already ran, or it stopped by itself)"
        )

    def save(self, config: WorkshopConfig) -> Path:
        """Take ``config`` as this workshop's and write it where the next notebook reads it."""
        if config.mode != self.mode.name:
            self.mode = mode_for(config.mode, self.rehearsal)
            self._clients = None
        self.config = config
        return config.save(self.path)

    @property
    def outputs_path(self) -> Path:
        return self.path.parent / "outputs.json"

    def folder(self, name: str) -> Path:
        """Where this workshop keeps files of kind ``name`` (``bench``, ...): beside its config file, so a run
        with its own config (nbmake's, the demo's) writes nothing into a participant's ``.workshop/``."""
        return self.path.parent / name

    def outputs(self) -> dict[str, Any]:
        try:
            recorded: dict[str, Any] = json.loads(self.outputs_path.read_text())
            return recorded
        except (OSError, ValueError):
            return {}

    def remember(self, **values: Any) -> None:
        data = self.outputs()
        data.update(values)
        self.outputs_path.parent.mkdir(parents=True, exist_ok=True)
        self.outputs_path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")

    def forget(self, *keys: str) -> None:
        data = self.outputs()
        if any(key in data for key in keys):
            for key in keys:
                data.pop(key, None)
            self.outputs_path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")

    def recall(self, key: str, first: str, *, check: bool = False) -> Any:
        """The value notebook ``first`` recorded under ``key``; StepNotRun if there is none.

        With ``check`` a recorded S3 object or ECR image is looked up first (``check_recorded``).
        """
        value = self.outputs().get(key)
        if not value:
            if self.config.mode == "local":
                self.clients  # no emulator: notebook 00 comes before ``first``, and this says so
            raise StepNotRun(first, f"no {RECORDED.get(key, key.replace('_', ' '))} recorded yet")
        if check:
            self.check_recorded(key, value, first)
        return value

    def check_recorded(self, key: str, value: str | None, first: str) -> None:
        """When ``value`` is what notebook ``first`` recorded under ``key`` (an S3 object or ECR image URI),
        check it still exists: one a cleanup or a reset removed is forgotten and reported as StepNotRun
        instead of handed to the next step. A value the caller chose is left to the caller."""
        if not value or self.outputs().get(key) != value or self._still_there(value):
            return
        self.forget(key)
        raise StepNotRun(first, f"{short(value)} is gone (08_cleanup or a reset removed it)")

    def _still_there(self, value: str) -> bool:
        """Whether a recorded S3 object or ECR image still exists; True for anything else, and when the
        look-up itself fails or is refused (the step that uses the value then shows why)."""
        try:
            if value.startswith("s3://"):
                bucket, key = build_projects.parse_s3_uri(value)
                self.clients.s3.head_object(Bucket=bucket, Key=key)
            elif "@sha256:" in value and ".dkr.ecr." in value:
                ref = images.parse_image_uri(value)
                self.clients.ecr.describe_images(
                    repositoryName=ref.repository,
                    imageIds=[{"imageDigest": ref.digest}],
                    **({"registryId": ref.account} if ref.account else {}),
                )
        except ClientError as exc:
            return _error_code(exc) not in GONE_CODES
        except (BotoCoreError, ValueError):
            return True
        return True


def cleanup_step(step: Callable[Concatenate[Workshop, P], R]) -> Callable[Concatenate[Workshop, P], R | Text]:
    """A cleanup step (notebook 08): in local mode with no emulator running it returns the workshop's
    ``nothing_to_clean`` line instead of running, so 07 can be run twice or after the rehearsal ended."""

    @functools.wraps(step)
    def run(workshop: Workshop, /, *args: P.args, **kwargs: P.kwargs) -> R | Text:
        gone = workshop.nothing_to_clean()
        return gone if gone is not None else step(workshop, *args, **kwargs)

    return run


def require_bucket(workshop: Workshop) -> str:
    """The config's bucket, checked to exist (08_cleanup may have deleted it); StepNotRun names 00."""
    config = workshop.config
    config.require("bucket")
    try:
        workshop.clients.s3.head_bucket(Bucket=config.bucket)
    except ClientError as exc:
        if _error_code(exc) in GONE_CODES:
            raise StepNotRun("00_setup", f"the bucket s3://{config.bucket} does not exist") from None
    return config.bucket


def require_codebuild_role(workshop: Workshop) -> str:
    """The config's CodeBuild role, checked to exist when it is the one notebook 00 creates (and 07
    deletes); a role an administrator gave by ARN is taken as given. StepNotRun names 00."""
    config = workshop.config
    config.require("codebuild_role_arn")
    arn = config.codebuild_role_arn
    if arn.endswith(f":role/{CODEBUILD_ROLE_NAME}"):
        try:
            workshop.clients.get("iam").get_role(RoleName=CODEBUILD_ROLE_NAME)
        except ClientError as exc:
            if _error_code(exc) in GONE_CODES:
                raise StepNotRun(
                    "00_setup", f"the CodeBuild role {arn} in the config does not exist (08_cleanup deletes it)"
                ) from None
    return arn


def model_spec(workshop: Workshop) -> ModelSpec:
    return EMBEDDED_MODEL if workshop.config.mode == "local" else PINNED_MODEL


def on_path(config: WorkshopConfig, kind: str) -> bool:
    """Local rehearsal runs every path; on AWS only what the chosen deploy path needs (and pays for)."""
    return config.mode == "local" or config.deploy_path == kind


def decision_endpoint(workshop: Workshop) -> str:
    """The decision endpoint notebooks 05 to 07 call: the deploy path's, or on a path without one (the
    standard path, rehearsed locally) the default decision path's."""
    config = workshop.config
    path = deploy_path(config.deploy_path)
    if not path.decision:
        if config.mode == "aws":
            raise StepError(
                f"the deploy path is {path.name!r} (notebook 00), which has no decision endpoint: go on "
                f"to 08_cleanup, or choose {' or '.join(p.name for p in DEPLOY_PATHS if p.decision)} in "
                "00 and run 03 and 04"
            )
        path = DEFAULT_DECISION
    return config.endpoint_name(path)


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def endpoint_missing(exc: ClientError) -> bool:
    """Whether SageMaker's refusal says the endpoint (or its config, or model) does not exist: a
    ValidationException saying so, where other services answer 404."""
    error = exc.response.get("Error", {})
    return error.get("Code") == "ValidationException" and "Could not find" in str(error.get("Message", ""))


def short(uri: str) -> str:
    """``uri`` with its image digest cut to 12 characters, for reading."""
    return re.sub(r"(sha256:[0-9a-f]{12})[0-9a-f]{52}", r"\1…", uri)


def keep_choice(workshop: Workshop, key: str, widget: Any, *, env: str | None = None) -> Any:
    """Let a notebook widget keep what the participant chose across Run All and kernel restarts.

    The cell that builds a widget runs again on Run All and would start it over at its default; kept,
    the widget starts at the value last chosen (``outputs.json``, under ``choices``) unless ``env`` is
    set in the environment (unattended runs choose through it), and each change is written at once.
    Returns the widget.
    """
    kept = workshop.outputs().get("choices", {})
    if key in kept and not (env and os.environ.get(env, "").strip()):
        options = getattr(widget, "options", None)
        if options is None or kept[key] in [o[1] if isinstance(o, tuple) else o for o in options]:
            widget.value = kept[key]

    def changed(change: Mapping[str, Any]) -> None:
        workshop.remember(choices={**workshop.outputs().get("choices", {}), key: change["new"]})

    widget.observe(changed, names="value")
    return widget


def short_errors() -> None:
    """In a notebook: expected mistakes (a missing earlier step, bad input, no quota, a refused
    request) print one line saying what to do; real bugs keep their traceback (``display``)."""
    install_error_handler()

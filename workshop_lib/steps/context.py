"""What every step shares: the ``Workshop`` (config, the clients for its mode, the outputs one
notebook records for the next) and the small result types the notebooks show.
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

from .. import aws, builds, endpoints, permissions, rehearsal
from ..config import WorkshopConfig, default_path
from ..errors import WorkshopError
from ..models import EMBEDDED_MODEL, ModelSpec, PINNED_MODEL

BOTO3_FLOOR = (1, 43, 1)  # first boto3 whose SageMaker model knows InstancePools

# What each step that creates something creates, spelled as notebook 07 names it.
# tests/notebooks checks that 07 mentions every name of every creating step 00-06 call.
CREATES: dict[str, tuple[str, ...]] = {
    "setup": ("config.bucket", "steps.stop_local("),
    "package_model": ("config.s3_uri()", "builds.MODEL_PACKAGE_PROJECT"),
    "deploy_standard": ("config.standard_endpoint_name",),
    "build_decision_image": ("config.ecr_repository", "builds.IMAGE_BUILD_PROJECT", "config.s3_uri()"),
    "deploy_decision_cpu": ("config.cpu_endpoint_name",),
    "deploy_decision_gpu": ("config.gpu_endpoint_name",),
    "ensure_codebuild_role": ("steps.delete_codebuild_role(",),
}
# Steps that only read, invoke or print.
READ_ONLY = frozenset({
    "show_config", "check_environment", "verify_package", "resolve_dlc", "llama_settings", "client",
    "decision_image", "refuse_mutable_tag", "placement", "decision_endpoint", "show_decision",
    "show_outcome", "parse_options", "audit_permissions", "show_decisions", "check_outcome", "short_errors",
})


class StepError(WorkshopError, RuntimeError):
    """A step cannot run yet; the message says which notebook or setting comes first."""


class Text(str):
    """A step's message: a plain string that a notebook shows without quotes.

    ``problem`` is set when the step ran but did not reach its outcome (``check_outcome`` reports it).
    """

    def __new__(cls, text: str = "", *, problem: str = ""):
        made = super().__new__(cls, text)
        made.problem = problem
        return made

    @property
    def ok(self) -> bool:
        return not self.problem

    def __repr__(self) -> str:
        return str(self)


class _Shown:
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


# ---- clients and saved outputs -------------------------------------------------------------


CALL_LOG = "aws-calls.jsonl"  # in the local rehearsal's folder, across the notebooks' kernels


class Clients:
    """boto3 clients for the config's mode (the real region, or the local emulator), and the two
    things only AWS can do: running builds (``builds``) and hosting endpoints (``hosting``), which
    local mode hands to ``stand_ins``."""

    def __init__(self, config: WorkshopConfig, endpoint_url: str | None = None,
                 local: rehearsal.Rehearsal | None = None):
        self.config = config
        self._made: dict[str, object] = {}
        self.endpoint_url = endpoint_url
        # Local mode records every call, so the rehearsal can check the IAM policies against them.
        self.calls = permissions.CallLog(local.home / CALL_LOG) if endpoint_url else None
        if endpoint_url:
            from .. import stand_ins

            self.builds = stand_ins.EmulatedCodeBuild(self.s3, self.ecr, self.calls, local)
            self.hosting = stand_ins.LocalHosting(self.s3, self.calls, local)
            with self.acting_as(None):  # AWS's own registry content, not anyone's call
                rehearsal.seed_dlc(self.ecr, config.region)
        else:
            self.builds, self.hosting = builds.CodeBuildRunner(), endpoints.SageMakerHosting()

    def acting_as(self, principal: str | None):
        """Record the block's calls as another principal's (local mode; a no-op on AWS)."""
        return self.calls.acting_as(principal) if self.calls else contextlib.nullcontext()

    def get(self, service: str):
        if service not in self._made:
            if self.endpoint_url:
                self._made[service] = rehearsal.client(service, self.config.region, self.endpoint_url)
                self.calls.attach(self._made[service])
            else:
                self._made[service] = aws.client(service, self.config.region)
        return self._made[service]

    sm = property(lambda self: self.get("sagemaker"))
    s3 = property(lambda self: self.get("s3"))
    ecr = property(lambda self: self.get("ecr"))
    codebuild = property(lambda self: self.get("codebuild"))
    logs = property(lambda self: self.get("logs"))
    sts = property(lambda self: self.get("sts"))


class Workshop:
    """One participant's workshop: the config, the clients for its mode (``clients``), and the
    outputs one notebook records for the next (``outputs.json`` beside the config file). Every
    step takes it first; the notebooks make one with ``Workshop.load()``."""

    def __init__(self, config: WorkshopConfig, path: str | Path | None = None):
        self.config = config
        self.path = Path(path) if path is not None else default_path()
        # Local mode's emulator and endpoint processes, recorded in local/ next to the config file.
        self.rehearsal = rehearsal.Rehearsal(rehearsal.local_dir(self.path))
        self._clients: Clients | None = None

    @classmethod
    def load(cls, path: str | Path | None = None) -> Workshop:
        """The saved config (environment over file, see ``config``) at ``path`` or the default place."""
        return cls(WorkshopConfig.load(path), path)

    def __repr__(self) -> str:
        return f"Workshop({self.config.mode}, {self.config.region}, {self.path})"

    @property
    def clients(self) -> Clients:
        """The clients for the config's mode; in local mode for the running emulator (00 starts it)."""
        url = None
        if self.config.mode == "local":
            url = self.rehearsal.emulator_url()
            if not url:
                raise StepError("the local AWS emulator is not running (07_cleanup stops it, and it ends by "
                                f"itself after {rehearsal.KEEP_ALIVE_S // 3600} h): run 00_setup again, then the "
                                "notebooks in order")
        made = self._clients
        if made is None or (made.config.mode, made.config.region, made.endpoint_url) != \
                (self.config.mode, self.config.region, url):
            self._clients = Clients(self.config, url, self.rehearsal)
        return self._clients

    def forget_clients(self) -> None:
        """Drop the clients (after the emulator they reach was stopped)."""
        self._clients = None

    def save(self, config: WorkshopConfig) -> Path:
        """Take ``config`` as this workshop's and write it where the next notebook reads it."""
        self.config = config
        return config.save(self.path)

    @property
    def outputs_path(self) -> Path:
        return self.path.parent / "outputs.json"

    def outputs(self) -> dict:
        try:
            return json.loads(self.outputs_path.read_text())
        except (OSError, ValueError):
            return {}

    def remember(self, **values) -> None:
        data = self.outputs()
        data.update(values)
        self.outputs_path.parent.mkdir(parents=True, exist_ok=True)
        self.outputs_path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")

    def recall(self, key: str, first: str):
        value = self.outputs().get(key)
        if not value:
            raise StepError(f"no {key.replace('_', ' ')} recorded yet: run {first} first")
        return value


def model_spec(workshop: Workshop) -> ModelSpec:
    return EMBEDDED_MODEL if workshop.config.mode == "local" else PINNED_MODEL


def _on_path(config: WorkshopConfig, kind: str) -> bool:
    """Local rehearsal runs every path; on AWS only what the chosen deploy path needs (and pays for)."""
    return config.mode == "local" or config.deploy_path == kind


def _short(uri: str) -> str:
    return re.sub(r"(sha256:[0-9a-f]{12})[0-9a-f]{52}", r"\1…", uri)

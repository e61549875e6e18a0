"""The workshop's one configuration object, and the checks that keep it usable.

``WorkshopConfig.load()`` reads, in this order of precedence:

1. ``WORKSHOP_*`` environment variables (what a CI job or a shell sets on purpose);
2. the JSON file notebook 00 writes (``.workshop/config.json``, or ``$WORKSHOP_CONFIG``);
3. ambient defaults: ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, then, inside SageMaker
   Studio, the region and execution role of the Studio session;
4. built-in defaults (and, in local mode, placeholders the local emulator accepts).

The mode is ``local`` when ``WORKSHOP_MODE=local`` (or the file says so), or when no
AWS credentials are configured at all; otherwise ``aws``. Credentials that are configured but
fail (a missing profile, an expired SSO session) are an error naming the profile, never a
quiet switch to local.

Each setting is declared once, in ``WorkshopConfig``: its default, the environment variable that sets
it, what it is for and the check its value passes. The checks raise ``InvalidInput`` (a ``ValueError``)
whose message names the setting and what to put there instead; name patterns are read from
botocore's service models, so they follow the real API.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError

from . import name_rules
from .deploy_paths import DECISION_CPU, DECISION_GPU, DEPLOY_PATHS, STANDARD, DeployPath
from .deploy_paths import NAMES as DEPLOY_PATH_NAMES
from .deploy_paths import deploy_path as path_called
from .errors import InvalidInput

# Re-exported (the ``as`` marks them so): aws/ and the command line check names with the config's rules.
from .name_checks import check_bucket_name as check_bucket_name
from .name_checks import check_endpoint_name as check_endpoint_name
from .name_checks import check_resource_name as check_resource_name
from .name_checks import check_role_arn as check_role_arn

MODES = ("aws", "local")

# Only used in local mode, where the emulator accepts any account and bucket.
LOCAL_REGION = "us-east-1"
LOCAL_BUCKET = "decision-workshop-local"
LOCAL_ROLE_ARN = "arn:aws:iam::123456789012:role/decision-workshop-local"

# The published sample's names, never the workshop's (the deploy paths' own are in deploy_paths): a blog
# reader's account may hold these.
SAMPLE_NAMES = frozenset({"semif-llamacpp-dlc", "llamacpp-gguf", "llamacpp-standard", "semif-decision-workflows"})
# The folder under the prefix that holds model.tar.gz: the CodeBuild role may write only there, and the
# SageMaker role reads only under the prefix (policies.MODEL_FOLDER is the same folder).
MODEL_FOLDER = "model"

_STUDIO_METADATA = Path("/opt/ml/metadata/resource-metadata.json")

# The workshop's ECR repository: its name contains "sagemaker", the pattern AmazonSageMakerFullAccess
# allows ECR writes on.
DEFAULT_ECR_REPOSITORY = "sagemaker-decision-workshop"
# Every endpoint the workshop creates is deleted by a schedule after this many hours (spend_guard);
# "0" turns the deadline off. Notebook 00 saves the choice; `workshop extend` moves one deadline.
DEFAULT_ENDPOINT_TTL_HOURS = "4"
MAX_ENDPOINT_TTL_HOURS = 168


# ---- what a setting's value must be, and the errors it raises -------------------------------------


class BucketNotFound(InvalidInput):
    """The workshop bucket does not exist; notebook 00 catches it to create the bucket."""


_REGION = re.compile(r"[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d+")


def check_region(region: str) -> str:
    if not _REGION.fullmatch(region or ""):
        raise InvalidInput(
            f"region {region!r} does not look like an AWS region (e.g. us-east-1); "
            f"set {ENV_VARS['region']} or AWS_REGION"
        )
    return region


_KMS_KEY_ARN = re.compile(r"arn:(aws|aws-cn|aws-us-gov):kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]{1,128}")


def check_kms_key_arn(arn: str) -> str:
    """A KMS key's ARN (IAM grants name the key, not an alias), or InvalidInput naming the setting."""
    if not _KMS_KEY_ARN.fullmatch(arn or ""):
        raise InvalidInput(
            f"kms_key_arn {arn!r} is not a KMS key ARN like arn:aws:kms:<region>:<account>:key/<key-id> "
            "(an alias will not do: the policies grant the key itself); set WORKSHOP_KMS_KEY_ARN, or "
            "leave it empty for AWS's own keys"
        )
    return arn


_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(?:/[A-Za-z0-9][A-Za-z0-9._-]*)*")


def check_prefix(prefix: str) -> str:
    """The workshop's S3 folder: plain path segments. It ends up in IAM resource ARNs, where ``*``, ``?``
    and ``$`` would widen the grant (a prefix of ``*`` would cover the whole bucket)."""
    cleaned = (prefix or "").strip("/")
    if not (cleaned and len(cleaned) <= 200 and _PREFIX.fullmatch(cleaned) and ".." not in cleaned):
        raise InvalidInput(
            f"prefix {prefix!r} is not a plain S3 folder: use letters, digits and . _ - in segments separated "
            f"by /, e.g. 'decision-workshop' (set {ENV_VARS['prefix']}); no wildcards, it scopes the IAM policies"
        )
    return prefix


def check_ecr_repository_name(name: str) -> str:
    if not name_rules.is_ecr_repository(name):
        raise InvalidInput(
            f"ECR repository name {name!r} is not valid: use lower-case letters, digits and . _ - / "
            f"(2 to 256 characters), e.g. {DEFAULT_ECR_REPOSITORY!r}"
        )
    return name


def check_ttl_hours(value: str | float) -> float:
    """Hours an endpoint lives before its deadline deletes it: 0 (no deadline) or 0.25 to 168."""
    try:
        hours = float(value)
    except (TypeError, ValueError):
        hours = -1.0
    if hours != 0 and not 0.25 <= hours <= MAX_ENDPOINT_TTL_HOURS:
        raise InvalidInput(
            f"endpoint_ttl_hours {value!r} is not a number of hours between 0.25 and {MAX_ENDPOINT_TTL_HOURS} "
            f"(or 0 for no deadline); set {ENV_VARS['endpoint_ttl_hours']}, e.g. {DEFAULT_ENDPOINT_TTL_HOURS}"
        )
    return hours


def check_capture_percent(value: str | int) -> int:
    """The share of a decision endpoint's invocations SageMaker's data capture records: 0 (none) to 100."""
    text = str(value).strip()
    if not text.isdigit() or not 0 <= int(text) <= 100:
        raise InvalidInput(
            f"capture_percent {value!r} is not a whole percentage between 0 and 100 (0: capture "
            f"nothing); set {ENV_VARS['capture_percent']}, e.g. 100"
        )
    return int(text)


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise InvalidInput(f"mode {mode!r} is not one of {', '.join(MODES)}; set {ENV_VARS['mode']}=aws or =local")
    return mode


def check_deploy_path(path: str) -> str:
    if path not in DEPLOY_PATH_NAMES:
        raise InvalidInput(
            f"deploy path {path!r} is not one of {', '.join(DEPLOY_PATH_NAMES)}; set {ENV_VARS['deploy_path']}"
        )
    return path


def setting(
    default: str,
    env: str,
    doc: str,
    check: Callable[[str], object] | None = None,
    *,
    when_set: bool = False,
    flag: str | None = None,
    choices: tuple[str, ...] | None = None,
) -> str:
    """One setting of ``WorkshopConfig``, declared once: its default, the environment variable that sets
    it, what it is for, and the check its value passes (``when_set``: an empty value is not checked,
    ``require`` asks for it where a step needs it). ``flag``: the command-line flag that overrides it for one
    run (``cli`` makes it from this declaration, with ``choices`` where the value is one of a few)."""
    return field(
        default=default,
        metadata={"env": env, "doc": doc, "check": check, "when_set": when_set, "flag": flag, "choices": choices},
    )


def endpoint_setting(path: DeployPath) -> str:
    """The setting naming the endpoint of deploy path ``path``, from its row."""
    what = f"{path.endpoint_field} ({path.endpoint_env})"
    return setting(
        path.default_endpoint,
        path.endpoint_env,
        f"name of the {path.label} endpoint",
        lambda name: check_endpoint_name(name, what),
    )


@dataclass(frozen=True)
class WorkshopConfig:
    """Every value is a string, as in the config file; ``problems()`` runs each setting's check."""

    region: str = setting(
        "",
        "WORKSHOP_REGION",
        "AWS region of every resource the workshop creates",
        check_region,
        when_set=True,
        flag="--region",
    )
    bucket: str = setting(
        "",
        "WORKSHOP_BUCKET",
        "S3 bucket for the model package, the builds' sources and captures",
        check_bucket_name,
        when_set=True,
        flag="--bucket",
    )
    prefix: str = setting(
        "decision-workshop",
        "WORKSHOP_PREFIX",
        "folder in the bucket the workshop and its IAM policies are scoped to",
        check_prefix,
        flag="--prefix",
    )
    sagemaker_role_arn: str = setting(
        "",
        "WORKSHOP_ROLE_ARN",
        "execution role the endpoints run as",
        lambda arn: check_role_arn(arn, "SageMaker execution role"),
        when_set=True,
        flag="--role-arn",
    )
    codebuild_role_arn: str = setting(
        "",
        "WORKSHOP_CODEBUILD_ROLE_ARN",
        "service role the CodeBuild projects run as",
        lambda arn: check_role_arn(arn, "CodeBuild service role"),
        when_set=True,
        flag="--codebuild-role-arn",
    )
    # One per row of deploy_paths; a deploy command's --name sets the one of the path it deploys.
    standard_endpoint_name: str = endpoint_setting(STANDARD)
    cpu_endpoint_name: str = endpoint_setting(DECISION_CPU)
    gpu_endpoint_name: str = endpoint_setting(DECISION_GPU)
    ecr_repository: str = setting(
        DEFAULT_ECR_REPOSITORY,
        "WORKSHOP_ECR_REPOSITORY",
        "ECR repository of the decision image",
        check_ecr_repository_name,
        flag="--repository",
    )
    mode: str = setting(
        "aws", "WORKSHOP_MODE", "aws, or local for the local rehearsal", check_mode, flag="--mode", choices=MODES
    )
    deploy_path: str = setting(
        STANDARD.name,
        "WORKSHOP_DEPLOY_PATH",
        "what the later notebooks deploy, and the endpoint a command means by default",
        check_deploy_path,
        flag="--deploy-path",
        choices=DEPLOY_PATH_NAMES,
    )
    endpoint_ttl_hours: str = setting(
        DEFAULT_ENDPOINT_TTL_HOURS,
        "WORKSHOP_ENDPOINT_TTL_HOURS",
        "hours each endpoint lives before its deadline deletes it, 0.25-168, or 0 for no deadline",
        check_ttl_hours,
        flag="--endpoint-ttl-hours",
    )
    capture_percent: str = setting(
        "100",
        "WORKSHOP_CAPTURE_PERCENT",
        "share of a decision endpoint's invocations data capture records (0: off)",
        check_capture_percent,
    )
    kms_key_arn: str = setting(
        "",
        "WORKSHOP_KMS_KEY_ARN",
        "an organisation's KMS key for the bucket, captured requests, transform output and "
        "endpoint volumes (empty: AWS's own keys)",
        check_kms_key_arn,
        when_set=True,
    )

    # ---- loading and saving -------------------------------------------------

    @classmethod
    def load(cls, path: str | Path | None = None, env: Mapping[str, str] | None = None) -> WorkshopConfig:
        """Environment over file over ambient/Studio defaults; see the module docstring."""
        env = os.environ if env is None else env
        file = Path(path) if path is not None else default_path(env)
        values: dict[str, str] = {}
        if file.is_file():
            values.update(_read_file(file))
        for name, var in ENV_VARS.items():
            if env.get(var, "").strip():
                values[name] = env[var].strip()

        values["mode"] = values.get("mode", "").lower() or ("aws" if has_aws_credentials() else "local")
        if not values.get("region"):
            values["region"] = (env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "").strip()
        if values["mode"] == "aws" and (not values.get("region") or not values.get("sagemaker_role_arn")):
            for name, value in studio_defaults().items():
                if not values.get(name):
                    values[name] = value
        if values["mode"] == "local":
            values["region"] = values.get("region") or LOCAL_REGION
            values["bucket"] = values.get("bucket") or LOCAL_BUCKET
            values["sagemaker_role_arn"] = values.get("sagemaker_role_arn") or LOCAL_ROLE_ARN
        return cls(**{k: v for k, v in values.items() if v != ""})

    def save(self, path: str | Path | None = None) -> Path:
        """Write the config as JSON (the file later ``load()`` calls read); returns the path."""
        file = Path(path) if path is not None else default_path()
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n")
        return file

    def replace(self, **changes: Any) -> WorkshopConfig:
        return replace(self, **changes)

    # ---- derived values -------------------------------------------------------

    def s3_uri(self, *parts: str) -> str:
        """``s3://<bucket>/<prefix>/<parts...>``."""
        self.require("bucket")
        keys = [self.prefix.strip("/")] + [p.strip("/") for p in parts]
        return "s3://" + "/".join([self.bucket] + [k for k in keys if k])

    @property
    def model_data_url(self) -> str:
        return self.s3_uri(MODEL_FOLDER, "model.tar.gz")

    @property
    def model_folder_uri(self) -> str:
        """``s3://<bucket>/<prefix>/model/``: the only place the workshop's model packages may live."""
        return self.s3_uri(MODEL_FOLDER) + "/"

    def check_model_uri(self, uri: str, what: str = "model S3 URI") -> str:
        """Raise InvalidInput unless ``uri`` is under ``model_folder_uri``.

        The CodeBuild role writes only there and the SageMaker role reads only under the prefix, so a
        URI elsewhere would fail late (after a 3 GB download, or when the endpoint starts).
        """
        allowed = self.model_folder_uri
        given = (uri or "").strip()
        if given == allowed.rstrip("/") or (given.startswith(allowed) and ".." not in given.split("/")):
            return uri
        raise InvalidInput(
            f"{what} {uri!r} is outside the workshop's model folder {allowed}: the CodeBuild role may write, and "
            f"the SageMaker role read, only there. Use {allowed} (the default), or copy an existing package "
            f"there (aws s3 cp <your model.tar.gz> {allowed}model.tar.gz), or change the bucket and prefix in "
            f"notebook 00 ({ENV_VARS['bucket']}, {ENV_VARS['prefix']})"
        )

    @property
    def ttl_hours(self) -> float:
        """``endpoint_ttl_hours`` as a number (0: no deadline); ``check()`` reports a bad value."""
        return check_ttl_hours(self.endpoint_ttl_hours)

    def endpoint_name(self, deploy_path: str | DeployPath | None = None) -> str:
        """The endpoint name of ``deploy_path`` (a row or its name; default: the config's deploy path)."""
        path = deploy_path if isinstance(deploy_path, DeployPath) else path_called(deploy_path or self.deploy_path)
        name: str = getattr(self, path.endpoint_field)
        return name

    def path_of(self, endpoint_name: str) -> DeployPath | None:
        """The deploy path whose endpoint is called ``endpoint_name``, or None."""
        return next((p for p in DEPLOY_PATHS if self.endpoint_name(p) == endpoint_name), None)

    def endpoint_names(self) -> list[str]:
        """Every deploy path's endpoint name, in the table's order."""
        return [self.endpoint_name(p) for p in DEPLOY_PATHS]

    # ---- checks -----------------------------------------------------------------

    def require(self, *names: str) -> WorkshopConfig:
        """Raise InvalidInput naming the environment variable for each empty field."""
        missing = [n for n in names if not getattr(self, n)]
        if missing:
            hints = ", ".join(f"{n} (set {ENV_VARS[n]})" for n in missing)
            raise InvalidInput(
                f"the workshop config has no {hints}; set them, or run notebook 00 which saves them to {default_path()}"
            )
        return self

    def problems(self) -> list[InvalidInput]:
        """Every offline check that fails, as exceptions (empty list: all good)."""
        found: list[InvalidInput] = []
        for f in fields(self):
            value, check = getattr(self, f.name), f.metadata["check"]
            if check is None or (f.metadata["when_set"] and not value):
                continue
            try:
                check(value)
            except InvalidInput as exc:
                found.append(exc)
        return found

    def check(self) -> WorkshopConfig:
        """Raise the one problem found, or an InvalidInput listing all of them."""
        found = self.problems()
        if len(found) == 1:
            raise found[0]
        if found:
            raise InvalidInput("the workshop config has problems:\n" + "\n".join(f"- {p}" for p in found))
        return self


# field name -> the environment variable that sets it
ENV_VARS = {f.name: f.metadata["env"] for f in fields(WorkshopConfig)}


# ---- loading helpers -----------------------------------------------------------


def repo_root() -> Path:
    """The checkout holding this package, or the working directory for an installed copy."""
    here = Path(__file__).resolve().parents[1]
    return here if (here / "pyproject.toml").is_file() else Path.cwd()


def default_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    override = env.get("WORKSHOP_CONFIG", "").strip()
    return Path(override) if override else repo_root() / ".workshop" / "config.json"


def _read_file(file: Path) -> dict[str, str]:
    try:
        data = json.loads(file.read_text())
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{file} is not valid JSON ({exc}); fix it or delete it and run notebook 00 again") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{file} must hold a JSON object; delete it and run notebook 00 again")
    known = {f.name for f in fields(WorkshopConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise InvalidInput(f"{file} has unknown keys {unknown}; known keys are {sorted(known)}")
    bad = sorted(k for k, v in data.items() if not isinstance(v, str))
    if bad:
        raise InvalidInput(f"{file}: {bad} must be strings")
    return data


def has_aws_credentials() -> bool:
    """True when boto3's credential chain finds credentials (env, profile, SSO, instance role),
    False when it finds none. A chain that fails (a missing profile, a broken credential_process,
    an unreadable config) raises ``InvalidInput`` naming the profile: a participant who meant
    to use AWS must not find themselves rehearsing locally without being told."""
    import boto3

    profile = os.environ.get("AWS_PROFILE") or os.environ.get("AWS_DEFAULT_PROFILE") or "default"
    try:
        return boto3.session.Session().get_credentials() is not None
    except BotoCoreError as exc:
        raise InvalidInput(
            f"the AWS credentials of profile {profile!r} cannot be read ({exc}); fix or refresh that profile "
            f"(e.g. `aws sso login --profile {profile}`), pick another with AWS_PROFILE, or set "
            f"{ENV_VARS['mode']}=local to rehearse without AWS"
        ) from None


def in_sagemaker_studio() -> bool:
    return _STUDIO_METADATA.is_file()


def studio_defaults() -> dict[str, str]:
    """Region and execution role from the SageMaker session, when running inside SageMaker.

    The ``sagemaker`` package is optional; outside SageMaker (or without it) this
    returns ``{}``. ``get_execution_role`` raises outside SageMaker, hence the guard.
    """
    if not in_sagemaker_studio():
        return {}
    try:  # SageMaker Python SDK v3
        from sagemaker.core.helper.session_helper import Session, get_execution_role
    except Exception:
        try:  # v2
            from sagemaker import Session, get_execution_role
        except Exception:
            return {}
    found: dict[str, str] = {}
    try:
        found["region"] = Session().boto_region_name or ""
    except Exception:
        pass
    try:
        found["sagemaker_role_arn"] = get_execution_role() or ""
    except Exception:
        pass
    return {k: v for k, v in found.items() if v}

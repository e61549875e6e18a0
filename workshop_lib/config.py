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

The checks raise typed exceptions whose message says what to change. Name patterns
are read from botocore's SageMaker service model, so they follow the real API.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Mapping

from botocore.exceptions import BotoCoreError

from .config_checks import (ConfigError, CredentialsBroken, DEFAULT_ECR_REPOSITORY, DEFAULT_ENDPOINT_TTL_HOURS,
                            ENV_VARS, MissingSetting, OutsideWorkshopPrefix, check_bucket_name,
                            check_capture_percent, check_ecr_repository_name, check_prefix, check_region,
                            check_resource_name, check_role_arn, check_ttl_hours)

MODES = ("aws", "local")
DEPLOY_PATHS = ("standard", "decision-cpu", "decision-gpu")

# Only used in local mode, where the emulator accepts any account and bucket.
LOCAL_REGION = "us-east-1"
LOCAL_BUCKET = "decision-workshop-local"
LOCAL_ROLE_ARN = "arn:aws:iam::123456789012:role/decision-workshop-local"

# The workshop's own names, never the published sample's (REFERENCE.md §15: a blog reader's account may
# hold semif-llamacpp-dlc, llamacpp-gguf, llamacpp-standard and semif-decision-workflows).
DEFAULT_ENDPOINT_NAMES = {"standard": "decision-workshop-standard", "decision-cpu": "decision-workshop-cpu",
                          "decision-gpu": "decision-workshop-gpu"}
SAMPLE_NAMES = frozenset({"semif-llamacpp-dlc", "llamacpp-gguf", "llamacpp-standard", "semif-decision-workflows"})
# The folder under the prefix that holds model.tar.gz: the CodeBuild role may write only there, and the
# SageMaker role reads only under the prefix (policies.MODEL_FOLDER is the same folder).
MODEL_FOLDER = "model"

_STUDIO_METADATA = Path("/opt/ml/metadata/resource-metadata.json")




@dataclass(frozen=True)
class WorkshopConfig:
    region: str = ""
    bucket: str = ""
    prefix: str = "decision-workshop"
    sagemaker_role_arn: str = ""
    codebuild_role_arn: str = ""
    standard_endpoint_name: str = DEFAULT_ENDPOINT_NAMES["standard"]
    cpu_endpoint_name: str = DEFAULT_ENDPOINT_NAMES["decision-cpu"]
    gpu_endpoint_name: str = DEFAULT_ENDPOINT_NAMES["decision-gpu"]
    ecr_repository: str = DEFAULT_ECR_REPOSITORY
    mode: str = "aws"
    deploy_path: str = "standard"
    endpoint_ttl_hours: str = DEFAULT_ENDPOINT_TTL_HOURS  # a string, as every value of the config file
    capture_percent: str = "100"  # decision endpoints' data capture: share of invocations recorded, 0 = off

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

    def replace(self, **changes) -> WorkshopConfig:
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
        """Raise OutsideWorkshopPrefix unless ``uri`` is under ``model_folder_uri``.

        The CodeBuild role writes only there and the SageMaker role reads only under the prefix, so a
        URI elsewhere would fail late (after a 3 GB download, or when the endpoint starts).
        """
        allowed = self.model_folder_uri
        given = (uri or "").strip()
        if given == allowed.rstrip("/") or given.startswith(allowed) and ".." not in given.split("/"):
            return uri
        raise OutsideWorkshopPrefix(
            f"{what} {uri!r} is outside the workshop's model folder {allowed}: the CodeBuild role may write, and "
            f"the SageMaker role read, only there. Use {allowed} (the default), or copy an existing package "
            f"there (aws s3 cp <your model.tar.gz> {allowed}model.tar.gz), or change the bucket and prefix in "
            f"notebook 00 ({ENV_VARS['bucket']}, {ENV_VARS['prefix']})")

    @property
    def ttl_hours(self) -> float:
        """``endpoint_ttl_hours`` as a number (0: no deadline); ``check()`` reports a bad value."""
        return check_ttl_hours(self.endpoint_ttl_hours)

    def endpoint_name(self, deploy_path: str | None = None) -> str:
        path = deploy_path or self.deploy_path
        names = {"standard": self.standard_endpoint_name, "decision-cpu": self.cpu_endpoint_name,
                 "decision-gpu": self.gpu_endpoint_name}
        if path not in names:
            raise ConfigError(f"deploy path {path!r} is not one of {', '.join(DEPLOY_PATHS)}")
        return names[path]

    # ---- checks -----------------------------------------------------------------

    def require(self, *names: str) -> WorkshopConfig:
        """Raise MissingSetting naming the environment variable for each empty field."""
        missing = [n for n in names if not getattr(self, n)]
        if missing:
            hints = ", ".join(f"{n} (set {ENV_VARS[n]})" for n in missing)
            raise MissingSetting(
                f"the workshop config has no {hints}; set them, or run notebook 00 which saves them to "
                f"{default_path()}"
            )
        return self

    def problems(self) -> list[ConfigError]:
        """Every offline check that fails, as exceptions (empty list: all good)."""
        found: list[ConfigError] = []

        def run(check, *args):
            try:
                check(*args)
            except ConfigError as exc:
                found.append(exc)

        if self.mode not in MODES:
            found.append(ConfigError(f"mode {self.mode!r} is not one of {', '.join(MODES)}; "
                                     f"set {ENV_VARS['mode']}=aws or =local"))
        if self.deploy_path not in DEPLOY_PATHS:
            found.append(ConfigError(f"deploy path {self.deploy_path!r} is not one of {', '.join(DEPLOY_PATHS)}; "
                                     f"set {ENV_VARS['deploy_path']}"))
        if self.region:
            run(check_region, self.region)
        if self.bucket:
            run(check_bucket_name, self.bucket)
        if self.sagemaker_role_arn:
            run(check_role_arn, self.sagemaker_role_arn, "SageMaker execution role")
        if self.codebuild_role_arn:
            run(check_role_arn, self.codebuild_role_arn, "CodeBuild service role")
        for name in ("standard_endpoint_name", "cpu_endpoint_name", "gpu_endpoint_name"):
            run(check_resource_name, getattr(self, name), "endpoint")
        run(check_ecr_repository_name, self.ecr_repository)
        run(check_prefix, self.prefix)
        run(check_ttl_hours, self.endpoint_ttl_hours)
        run(check_capture_percent, self.capture_percent)
        return found

    def check(self) -> WorkshopConfig:
        """Raise the one problem found, or a ConfigError listing all of them."""
        found = self.problems()
        if len(found) == 1:
            raise found[0]
        if found:
            raise ConfigError("the workshop config has problems:\n" + "\n".join(f"- {p}" for p in found), found)
        return self


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
        raise ConfigError(f"{file} is not valid JSON ({exc}); fix it or delete it and run notebook 00 again") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{file} must hold a JSON object; delete it and run notebook 00 again")
    known = {f.name for f in fields(WorkshopConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{file} has unknown keys {unknown}; known keys are {sorted(known)}")
    bad = sorted(k for k, v in data.items() if not isinstance(v, str))
    if bad:
        raise ConfigError(f"{file}: {bad} must be strings")
    return data


def has_aws_credentials() -> bool:
    """True when boto3's credential chain finds credentials (env, profile, SSO, instance role),
    False when it finds none. A chain that fails (a missing profile, a broken credential_process,
    an unreadable config) raises ``CredentialsBroken`` naming the profile: a participant who meant
    to use AWS must not find themselves rehearsing locally without being told."""
    import boto3

    profile = os.environ.get("AWS_PROFILE") or os.environ.get("AWS_DEFAULT_PROFILE") or "default"
    try:
        return boto3.session.Session().get_credentials() is not None
    except BotoCoreError as exc:
        raise CredentialsBroken(
            f"the AWS credentials of profile {profile!r} cannot be read ({exc}); fix or refresh that profile "
            f"(e.g. `aws sso login --profile {profile}`), pick another with AWS_PROFILE, or set "
            f"{ENV_VARS['mode']}=local to rehearse without AWS") from None


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
    except Exception:  # noqa: BLE001
        try:  # v2
            from sagemaker import Session, get_execution_role
        except Exception:  # noqa: BLE001
            return {}
    found: dict[str, str] = {}
    try:
        found["region"] = Session().boto_region_name or ""
    except Exception:  # noqa: BLE001
        pass
    try:
        found["sagemaker_role_arn"] = get_execution_role() or ""
    except Exception:  # noqa: BLE001
        pass
    return {k: v for k, v in found.items() if v}


# ---- checks ------------------------------------------------------------------------


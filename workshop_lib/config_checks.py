"""The checks a setting passes before anything is sent, and the errors they raise: regions, role ARNs,
resource and bucket names (with SageMaker's and S3's own patterns), the workshop prefix, the ECR
repository name, the endpoint deadline, and whether a bucket is in the endpoint's region. Each error
names the setting and what to put there instead. ``config`` checks a ``WorkshopConfig`` with them.
"""

from __future__ import annotations

import re
from functools import lru_cache

from botocore.exceptions import ClientError

from .errors import WorkshopError
from . import names


# The workshop's ECR repository: its name contains "sagemaker", the pattern AmazonSageMakerFullAccess
# allows ECR writes on.
DEFAULT_ECR_REPOSITORY = "sagemaker-decision-workshop"
# Every endpoint the workshop creates is deleted by a schedule after this many hours (spend_guard);
# "0" turns the deadline off. Notebook 00 saves the choice; `workshop extend` moves one deadline.
DEFAULT_ENDPOINT_TTL_HOURS = "4"
MAX_ENDPOINT_TTL_HOURS = 168

# field name -> environment variable that sets it
ENV_VARS = {
    "region": "WORKSHOP_REGION",
    "bucket": "WORKSHOP_BUCKET",
    "prefix": "WORKSHOP_PREFIX",
    "sagemaker_role_arn": "WORKSHOP_ROLE_ARN",
    "codebuild_role_arn": "WORKSHOP_CODEBUILD_ROLE_ARN",
    "standard_endpoint_name": "WORKSHOP_STANDARD_ENDPOINT",
    "cpu_endpoint_name": "WORKSHOP_CPU_ENDPOINT",
    "gpu_endpoint_name": "WORKSHOP_GPU_ENDPOINT",
    "ecr_repository": "WORKSHOP_ECR_REPOSITORY",
    "mode": "WORKSHOP_MODE",
    "deploy_path": "WORKSHOP_DEPLOY_PATH",
    "endpoint_ttl_hours": "WORKSHOP_ENDPOINT_TTL_HOURS",
    "capture_percent": "WORKSHOP_CAPTURE_PERCENT",
}


class ConfigError(WorkshopError, ValueError):
    """A configuration value the workshop cannot use."""
    def __init__(self, message: str, problems: list[ConfigError] | None = None):
        super().__init__(message)
        self.problems = problems or [self]


class MissingSetting(ConfigError):
    pass


class InvalidRegion(ConfigError):
    pass


class InvalidRoleArn(ConfigError):
    pass


class InvalidResourceName(ConfigError):
    pass


class InvalidBucketName(ConfigError):
    pass


class BucketNotFound(ConfigError):
    pass


class CredentialsBroken(ConfigError):
    """AWS credentials are configured but cannot be read; the mode is never guessed around it."""


class BucketRegionMismatch(ConfigError):
    pass


class OutsideWorkshopPrefix(ConfigError):
    """An S3 URI the workshop's roles may not write or read: outside ``s3://<bucket>/<prefix>/model/``."""


_REGION = re.compile(r"[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d+")


def check_region(region: str) -> str:
    if not _REGION.fullmatch(region or ""):
        raise InvalidRegion(
            f"region {region!r} does not look like an AWS region (e.g. us-east-1); "
            f"set {ENV_VARS['region']} or AWS_REGION"
        )
    return region


@lru_cache(maxsize=None)
def _sagemaker_constraints(shape_path: tuple[str, ...]) -> tuple[re.Pattern, int]:
    """(compiled pattern, max length) of a SageMaker request member, read from botocore."""
    pattern, max_len = names.service_rule("sagemaker", *shape_path)
    return pattern, max_len or 63


_NAME_SHAPES = {
    "endpoint": ("CreateEndpoint", "EndpointName"),
    "endpoint config": ("CreateEndpointConfig", "EndpointConfigName"),
    "model": ("CreateModel", "ModelName"),
    "transform job": ("CreateTransformJob", "TransformJobName"),
}


def suggest_name(name: str, max_len: int = 63) -> str:
    """A name SageMaker accepts that stays close to ``name`` (underscores, dots, spaces -> hyphens)."""
    cleaned = re.sub(r"[^a-zA-Z0-9-]+", "-", name)
    cleaned = re.sub(r"-{2,}", "-", cleaned).strip("-")
    return cleaned[:max_len].rstrip("-") or "workshop"


def check_resource_name(name: str, kind: str = "endpoint") -> str:
    """Raise InvalidResourceName unless SageMaker accepts ``name`` for this kind of resource."""
    if kind not in _NAME_SHAPES:
        raise ValueError(f"kind must be one of {sorted(_NAME_SHAPES)}")
    pattern, max_len = _sagemaker_constraints(_NAME_SHAPES[kind])
    if not name:
        raise InvalidResourceName(f"the {kind} name is empty; pass a name such as 'decision-workshop'")
    if len(name) > max_len:
        raise InvalidResourceName(
            f"{kind} name {name!r} has {len(name)} characters; SageMaker allows at most {max_len} "
            f"(try {suggest_name(name, max_len)!r})"
        )
    if not pattern.fullmatch(name):
        raise InvalidResourceName(
            f"{kind} name {name!r} is not accepted by SageMaker: use letters, digits and hyphens, "
            f"starting and ending with a letter or digit (try {suggest_name(name, max_len)!r})"
        )
    return name


_ASSUMED_ROLE = re.compile(r"arn:(aws[a-z\-]*):sts::(\d{12}):assumed-role/([^/]+)/.+")


def check_role_arn(arn: str, what: str = "SageMaker execution role") -> str:
    """Raise InvalidRoleArn unless ``arn`` is an IAM role ARN (the pattern SageMaker enforces)."""
    arn = arn or ""
    pattern, max_len = _sagemaker_constraints(("CreateModel", "ExecutionRoleArn"))
    if pattern.fullmatch(arn) and len(arn) <= max_len:
        return arn
    assumed = _ASSUMED_ROLE.fullmatch(arn)
    if assumed:
        partition, account, role = assumed.groups()
        hint = (f"this is an STS session ARN, not the role; use the role's ARN, probably "
                f"'arn:{partition}:iam::{account}:role/{role}' (check its path in the IAM console)")
    elif ":user/" in arn:
        hint = "this is an IAM user, not a role; create or pick a role that SageMaker can assume"
    elif not arn:
        hint = "it is empty"
    else:
        hint = "expected arn:aws:iam::<12-digit account>:role/<name>"
    raise InvalidRoleArn(f"{what} ARN {arn!r} is not valid: {hint}")


_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_IP_ADDRESS = re.compile(r"\d{1,3}(\.\d{1,3}){3}")
_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def check_bucket_name(bucket: str) -> str:
    """Raise InvalidBucketName unless ``bucket`` follows the S3 general-purpose bucket rules."""
    bucket = bucket or ""
    problem = None
    if not 3 <= len(bucket) <= 63:
        problem = f"it has {len(bucket)} characters; use 3 to 63"
    elif bucket != bucket.lower():
        problem = "it has upper-case letters; use lower case"
    elif not _BUCKET.fullmatch(bucket):
        problem = "use lower-case letters, digits, hyphens and dots, starting and ending with a letter or digit"
    elif ".." in bucket or ".-" in bucket or "-." in bucket:
        problem = "dots must not be next to another dot or a hyphen"
    elif _IP_ADDRESS.fullmatch(bucket):
        problem = "it must not look like an IP address"
    elif bucket.startswith(_RESERVED_PREFIXES) or bucket.endswith(_RESERVED_SUFFIXES):
        problem = ("it uses a prefix or suffix S3 reserves (amzn-s3-demo- is for documentation examples); "
                   "pick your own, e.g. 'decision-workshop-<account id>-<region>'")
    if problem:
        raise InvalidBucketName(f"bucket name {bucket!r} is not valid: {problem}")
    return bucket


_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(?:/[A-Za-z0-9][A-Za-z0-9._-]*)*")


def check_prefix(prefix: str) -> str:
    """The workshop's S3 folder: plain path segments. It ends up in IAM resource ARNs, where ``*``, ``?``
    and ``$`` would widen the grant (a prefix of ``*`` would cover the whole bucket)."""
    cleaned = (prefix or "").strip("/")
    if not (cleaned and len(cleaned) <= 200 and _PREFIX.fullmatch(cleaned) and ".." not in cleaned):
        raise ConfigError(
            f"prefix {prefix!r} is not a plain S3 folder: use letters, digits and . _ - in segments separated "
            f"by /, e.g. 'decision-workshop' (set {ENV_VARS['prefix']}); no wildcards, it scopes the IAM policies")
    return prefix


def check_ecr_repository_name(name: str) -> str:
    if not names.is_ecr_repository(name):
        raise ConfigError(
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
        raise ConfigError(
            f"endpoint_ttl_hours {value!r} is not a number of hours between 0.25 and {MAX_ENDPOINT_TTL_HOURS} "
            f"(or 0 for no deadline); set {ENV_VARS['endpoint_ttl_hours']}, e.g. {DEFAULT_ENDPOINT_TTL_HOURS}")
    return hours


def check_capture_percent(value: str | int) -> int:
    """The share of a decision endpoint's invocations SageMaker's data capture records: 0 (none) to 100."""
    text = str(value).strip()
    if not text.isdigit() or not 0 <= int(text) <= 100:
        raise ConfigError(f"capture_percent {value!r} is not a whole percentage between 0 and 100 (0: capture "
                          f"nothing); set {ENV_VARS['capture_percent']}, e.g. 100")
    return int(text)


def bucket_region(s3_client, bucket: str) -> str:
    """The region a bucket lives in (HEAD bucket answers with it even when access is denied)."""
    try:
        response = s3_client.head_bucket(Bucket=bucket)
        headers = response["ResponseMetadata"]["HTTPHeaders"]
    except ClientError as exc:
        headers = exc.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("404", "NoSuchBucket", "NotFound"):
            raise BucketNotFound(
                f"bucket {bucket!r} does not exist; create it in the endpoint's region "
                f"(aws s3 mb s3://{bucket} --region <region>) or set {ENV_VARS['bucket']}"
            ) from None
        if "x-amz-bucket-region" not in headers:
            raise
    region = headers.get("x-amz-bucket-region")
    if not region:
        location = s3_client.get_bucket_location(Bucket=bucket).get("LocationConstraint")
        region = {None: "us-east-1", "": "us-east-1", "EU": "eu-west-1"}.get(location, location)
    return region


def check_bucket_region(s3_client, bucket: str, region: str) -> str:
    """Raise BucketRegionMismatch unless the bucket is in ``region`` (the endpoint's region)."""
    found = bucket_region(s3_client, bucket)
    if found != region:
        raise BucketRegionMismatch(
            f"bucket {bucket!r} is in {found} but the endpoint region is {region}; SageMaker reads model "
            f"data only from its own region. Use a bucket in {region} (set {ENV_VARS['bucket']}) "
            f"or deploy in {found} (set {ENV_VARS['region']}={found})"
        )
    return found

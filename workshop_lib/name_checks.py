"""The checks of the names AWS gives the workshop's resources: SageMaker names, role ARNs, buckets.

Each raises ``InvalidInput`` whose message names what was wrong and what to use instead; the patterns
and lengths come from botocore's service models (``name_rules.service_rule``), so they follow the real API.
The config checks its settings with them, and the command line its ``--name`` flags.
"""

from __future__ import annotations

import re
from functools import cache

from . import name_rules
from .errors import InvalidInput


@cache
def sagemaker_rule(shape_path: tuple[str, ...]) -> tuple[re.Pattern[str], int]:
    """(compiled pattern, max length) of a SageMaker request member, read from botocore."""
    pattern, max_len = name_rules.service_rule("sagemaker", *shape_path)
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
    """Raise InvalidInput unless SageMaker accepts ``name`` for this kind of resource."""
    if kind not in _NAME_SHAPES:
        raise ValueError(f"kind must be one of {sorted(_NAME_SHAPES)}")
    pattern, max_len = sagemaker_rule(_NAME_SHAPES[kind])
    if not name:
        raise InvalidInput(f"the {kind} name is empty; pass a name such as 'decision-workshop'")
    if len(name) > max_len:
        raise InvalidInput(
            f"{kind} name {name!r} has {len(name)} characters; SageMaker allows at most {max_len} "
            f"(try {suggest_name(name, max_len)!r})"
        )
    if not pattern.fullmatch(name):
        raise InvalidInput(
            f"{kind} name {name!r} is not accepted by SageMaker: use letters, digits and hyphens, "
            f"starting and ending with a letter or digit (try {suggest_name(name, max_len)!r})"
        )
    return name


def check_endpoint_name(name: str, what: str = "endpoint name") -> str:
    """``check_resource_name`` for an endpoint, in lower case: SageMaker writes an endpoint's ARN in lower case
    and IAM compares ARNs as written, so a name with capitals slips past grants that name it (the scaling and
    Batch Transform ones). ``what`` names the setting or flag the name came from."""
    check_resource_name(name, "endpoint")
    if name != name.lower():
        raise InvalidInput(
            f"{what} {name!r} has capital letters; the workshop's IAM grants match the lower-case ARN "
            f"SageMaker gives the endpoint, so use lower case: {name.lower()!r}"
        )
    return name


_ASSUMED_ROLE = re.compile(r"arn:(aws[a-z\-]*):sts::(\d{12}):assumed-role/([^/]+)/.+")


def check_role_arn(arn: str, what: str = "SageMaker execution role") -> str:
    """Raise InvalidInput unless ``arn`` is an IAM role ARN (the pattern SageMaker enforces)."""
    arn = arn or ""
    pattern, max_len = sagemaker_rule(("CreateModel", "ExecutionRoleArn"))
    if pattern.fullmatch(arn) and len(arn) <= max_len:
        return arn
    assumed = _ASSUMED_ROLE.fullmatch(arn)
    if assumed:
        partition, account, role = assumed.groups()
        hint = (
            f"this is an STS session ARN, not the role; use the role's ARN, probably "
            f"'arn:{partition}:iam::{account}:role/{role}' (check its path in the IAM console)"
        )
    elif ":user/" in arn:
        hint = "this is an IAM user, not a role; create or pick a role that SageMaker can assume"
    elif not arn:
        hint = "it is empty"
    else:
        hint = "expected arn:aws:iam::<12-digit account>:role/<name>"
    raise InvalidInput(f"{what} ARN {arn!r} is not valid: {hint}")


_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_IP_ADDRESS = re.compile(r"\d{1,3}(\.\d{1,3}){3}")
_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def check_bucket_name(bucket: str) -> str:
    """Raise InvalidInput unless ``bucket`` follows the S3 general-purpose bucket rules."""
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
        problem = (
            "it uses a prefix or suffix S3 reserves (amzn-s3-demo- is for documentation examples); "
            "pick your own, e.g. 'decision-workshop-<account id>-<region>'"
        )
    if problem:
        raise InvalidInput(f"bucket name {bucket!r} is not valid: {problem}")
    return bucket

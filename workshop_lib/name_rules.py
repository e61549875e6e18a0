"""What counts as a valid name, tag, role ARN or S3 URI: the one place these rules live.

Where an AWS service model states the rule (a member's ``pattern`` and ``max``), it is read from
botocore, so it follows the real API; the hand-written rules cover only what the models leave out
(S3 URIs, bucket-name subtleties, ECR image tags, resource tags). The workshop's own tags live
here too, so every resource is tagged, and found again, the same way. The functions here answer yes or no, or take a
value apart; each caller raises its own error, whose message says what to change in its context
(a config value, a build parameter, a deploy flag).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import botocore.session

_session = botocore.session.get_session()


def service_model(service: str) -> Any:
    """botocore's model of one service (its operations by name)."""
    return _session.get_service_model(service)


def operation_model(service: str, operation: str) -> Any:
    """botocore's model of one operation: its members, their patterns and limits."""
    return service_model(service).operation_model(operation)


@cache
def service_rule(service: str, operation: str, *members: str) -> tuple[re.Pattern[str], int | None]:
    """(compiled pattern, max length or None) of a request member, read from botocore's model."""
    shape = operation_model(service, operation).input_shape
    for member in members:
        shape = shape.members[member]
    return re.compile(shape.metadata["pattern"]), shape.metadata.get("max")


def _fits(value: str | None, rule: tuple[re.Pattern[str], int | None], min_len: int = 1) -> bool:
    pattern, max_len = rule
    value = value or ""
    return min_len <= len(value) <= (max_len or len(value)) and pattern.fullmatch(value) is not None


def is_ecr_repository(name: str | None) -> bool:
    return _fits(name, service_rule("ecr", "CreateRepository", "repositoryName"), min_len=2)


def is_codebuild_project(name: str | None) -> bool:
    return _fits(name, service_rule("codebuild", "CreateProject", "name"), min_len=2)


def is_role_arn(arn: str | None) -> bool:
    """An IAM role ARN as SageMaker and CodeBuild take it (SageMaker's model states the pattern)."""
    return _fits(arn, service_rule("sagemaker", "CreateModel", "ExecutionRoleArn"), min_len=20)


_ROLE_ACCOUNT = re.compile(r"arn:aws[a-z-]*:iam::(\d{12}):role/.+")


def role_account(arn: str | None) -> str | None:
    """The 12-digit account of an IAM role ARN, or None."""
    match = _ROLE_ACCOUNT.fullmatch(arn or "")
    return match[1] if match else None


# Docker's reference grammar for a tag (the ECR model gives none): 1-128 characters.
IMAGE_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
# Docker's grammar for a repository path inside a registry.
IMAGE_REPOSITORY = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*")


def is_image_tag(tag: str | None) -> bool:
    return IMAGE_TAG.fullmatch(tag or "") is not None


# S3 URIs: the service models take buckets and keys apart, never as one URI.
_S3_URI = re.compile(r"s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/(.*))?", re.DOTALL)


def split_s3_uri(uri: str | None) -> tuple[str, str] | None:
    """``s3://bucket/key`` -> (bucket, key), the key possibly empty; None if it is not one."""
    match = _S3_URI.fullmatch(uri or "")
    return (match[1], match[2] or "") if match else None


def is_s3_tarball(uri: str | None) -> bool:
    """One ``s3://bucket/<key>.tar.gz`` object, as SageMaker's ModelDataUrl expects for a model archive."""
    parts = split_s3_uri(uri)
    return parts is not None and parts[1].endswith(".tar.gz") and len(parts[1]) > len(".tar.gz")


# Resource tags. SageMaker's model states the pattern with Unicode classes Python's re lacks, so the
# rule is written out: letters, digits, spaces and _ . : / = + - @.
TAG_WORKSHOP = "workshop"
TAG_CREATED_BY = "created-by"
WORKSHOP_TAGS = {TAG_WORKSHOP: "decision-workshop", TAG_CREATED_BY: "workshop_lib"}
_TAG_TEXT = re.compile(r"[\w\s.:/=+\-@]*")


def is_tag_key(key: str | None) -> bool:
    key = key or ""
    return 1 <= len(key) <= 128 and not key.lower().startswith("aws:") and _TAG_TEXT.fullmatch(key) is not None


def is_tag_value(value: str | None) -> bool:
    value = value or ""
    return len(value) <= 256 and _TAG_TEXT.fullmatch(value) is not None


def tag_list(tags: dict[str, str], key: str = "Key", value: str = "Value") -> list[dict[str, Any]]:
    """``{k: v}`` as the list of pairs AWS APIs take (SageMaker, S3 and ECR spell it Key/Value,
    CodeBuild key/value)."""
    return [{key: k, value: v} for k, v in tags.items()]

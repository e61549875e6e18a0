"""What the workshop's IAM documents are about: the names they grant on (``Scope``), taken from a config.

``scope`` checks every name it takes (region, bucket, prefix, repository, endpoints, projects) so that no
document is ever widened by a name with a wildcard or a separator in it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import name_rules
from ..config import (
    WorkshopConfig,
    check_bucket_name,
    check_ecr_repository_name,
    check_prefix,
    check_region,
    check_resource_name,
)
from ..errors import InvalidInput
from .arns import partition
from .build_projects import BUILD_PROJECTS, ECR_REPOSITORY, SOURCE_PREFIX
from .images import DLC_ARM64_REPOSITORY, DLC_REPOSITORY, dlc_account

# Folders under the workshop prefix: the model package (``WorkshopConfig.model_data_url``) and the
# only keys Batch Transform may write (the endpoint role reads the prefix but cannot overwrite the model).
MODEL_FOLDER = "model"
BATCH_OUTPUT_FOLDER = "batch-output"
CAPTURE_FOLDER = "capture"  # decision endpoints' data capture (capture.CAPTURE_FOLDER): the role's one write


@dataclass(frozen=True)
class Scope:
    """The names the policies grant access to, taken from the config and the library's constants."""

    region: str
    account: str
    bucket: str
    prefix: str
    ecr_repository: str = ECR_REPOSITORY
    codebuild_projects: tuple[str, ...] = BUILD_PROJECTS
    endpoint_names: tuple[str, ...] = ()
    source_prefix: str = ""
    dlc_repositories: tuple[str, ...] = (DLC_REPOSITORY, DLC_ARM64_REPOSITORY)  # endpoints may run either
    build_base_repositories: tuple[str, ...] = (DLC_REPOSITORY,)  # image builds are linux/amd64 only
    batch_transform: bool = True  # notebook 07 runs a transform job with the execution role
    codebuild_role_arn: str | None = None
    sagemaker_role_arn: str | None = None
    kms_key_arn: str | None = None  # an organisation's key (encryption.py); None: AWS's own keys

    @property
    def partition(self) -> str:
        return partition(self.region)

    @property
    def dlc_account(self) -> str:
        return dlc_account(self.region)

    def key_pattern(self, *folders: str) -> str:
        """``<prefix>/<folders...>/*`` (or ``*`` under an empty prefix)."""
        parts = [p.strip("/") for p in (self.prefix, *folders) if p.strip("/")]
        return "/".join(parts + ["*"])

    @property
    def source_key_pattern(self) -> str:
        return f"{self.source_prefix.strip('/')}/*"


def account_of(config: WorkshopConfig) -> str | None:
    """The account id in the config's role ARNs (both roles live in the workshop's account)."""
    accounts = (name_rules.role_account(arn) for arn in (config.codebuild_role_arn, config.sagemaker_role_arn))
    return next((account for account in accounts if account), None)


def scope(
    config: WorkshopConfig,
    account_id: str | None = None,
    *,
    batch_transform: bool = True,
    codebuild_projects: Sequence[str] = BUILD_PROJECTS,
    source_prefix: str | None = None,
) -> Scope:
    """The workshop's resource names from ``config``; the account from ``account_id`` or a role ARN.

    ``source_prefix`` is where the CodeBuild source zip goes; by default
    ``<prefix>/codebuild-source``, as the notebooks' steps upload it.
    """
    account = account_id or account_of(config)
    if not account or not re.fullmatch(r"\d{12}", account):
        raise InvalidInput(
            f"no AWS account id to scope the policies to (got {account!r}): pass account_id='123456789012' "
            "or set WORKSHOP_ROLE_ARN / WORKSHOP_CODEBUILD_ROLE_ARN to the roles' ARNs"
        )
    config.require("region", "bucket")
    check_region(config.region)
    check_bucket_name(config.bucket)
    check_prefix(config.prefix)
    check_ecr_repository_name(config.ecr_repository)
    for name in (config.standard_endpoint_name, config.cpu_endpoint_name, config.gpu_endpoint_name):
        check_resource_name(name, "endpoint")
    for project in codebuild_projects:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{1,254}", project):
            raise InvalidInput(f"CodeBuild project name {project!r} is not a plain name; it would widen the policy")
    prefix = config.prefix.strip("/")
    if source_prefix is None:
        source_prefix = f"{prefix}/{SOURCE_PREFIX}" if prefix else SOURCE_PREFIX
    if not source_prefix.strip("/"):
        raise InvalidInput("source_prefix must name a folder; the build role would otherwise read the whole bucket")
    names = tuple(
        dict.fromkeys(
            n for n in (config.standard_endpoint_name, config.cpu_endpoint_name, config.gpu_endpoint_name) if n
        )
    )
    return Scope(
        region=config.region,
        account=account,
        bucket=config.bucket,
        prefix=prefix,
        ecr_repository=config.ecr_repository,
        codebuild_projects=tuple(codebuild_projects),
        endpoint_names=names,
        source_prefix=source_prefix.strip("/"),
        batch_transform=batch_transform,
        codebuild_role_arn=config.codebuild_role_arn or None,
        sagemaker_role_arn=config.sagemaker_role_arn or None,
        kms_key_arn=config.kms_key_arn or None,
    )


def deadline_scope(config: WorkshopConfig, account_id: str) -> Scope:
    """The names the deadlines' role needs (region, account, endpoint names) and nothing else, so a deploy
    from the sample's flags alone, without a workshop bucket, still gets its deadline."""
    if config.bucket:
        return scope(config, account_id)
    config.require("region")
    check_region(config.region)
    names_ = tuple(
        dict.fromkeys(
            n for n in (config.standard_endpoint_name, config.cpu_endpoint_name, config.gpu_endpoint_name) if n
        )
    )
    for name in names_:
        check_resource_name(name, "endpoint")
    return Scope(region=config.region, account=account_id, bucket="", prefix="", endpoint_names=names_)


def as_scope(config_or_scope: WorkshopConfig | Scope, account_id: str | None, **options: Any) -> Scope:
    """A ``Scope`` as given, or made from a config by ``scope``: what every document's builder accepts."""
    if isinstance(config_or_scope, Scope):
        return config_or_scope
    return scope(config_or_scope, account_id, **options)

"""The rules of a real AWS account that the emulator (moto) does not enforce, enforced in the local rehearsal.

moto accepts an inline policy of any size, a role with a boundary policy that does not exist, a call to a
bucket another account owns whatever ``ExpectedBucketOwner`` says, and deletes an auto-scaled endpoint
without asking the caller to deregister its scaling. A real account refuses each of these, so the rehearsal
does too: every emulator client the workshop makes runs ``Strict.check`` before a request is sent (a refusal
is the ClientError AWS returns), ``Strict.facts`` gives the permission audit what IAM reads from the account
(the bucket's owner, the resource's tags, the scaling a deletion removes), and ``Strict.after`` does what
AWS does as a side effect of a call. Each rule names its source in ``RULES``.

The rules read the emulator's state through clients of their own, which nothing records or checks.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from botocore import xform_name
from botocore.exceptions import ClientError

from ..aws import statements

# rule -> (what AWS enforces, where it is documented)
RULES: dict[str, tuple[str, str]] = {
    "inline-policies-per-role": (
        "all inline policies of one role together at most 10,240 characters, whitespace not counted",
        "IAM user guide, IAM and AWS STS quotas: 'Role policy size'",
    ),
    "managed-policy-size": (
        "one customer managed policy at most 6,144 characters, whitespace not counted",
        "IAM user guide, IAM and AWS STS quotas: 'Managed policy size'",
    ),
    "managed-policies-per-role": (
        "at most 10 managed policies attached to one role (the default quota)",
        "IAM user guide, IAM and AWS STS quotas: 'Managed policies attached to an IAM role'",
    ),
    "trust-policy-size": (
        "a role's trust policy at most 2,048 characters, whitespace not counted",
        "IAM user guide, IAM and AWS STS quotas: 'Role trust policy length'",
    ),
    "boundary-must-exist": (
        "a permissions boundary names an existing managed policy",
        "IAM API reference, CreateRole / PutRolePermissionsBoundary: NoSuchEntity",
    ),
    "expected-bucket-owner": (
        "a request whose ExpectedBucketOwner is not the bucket's owner fails with 403 Access Denied",
        "S3 user guide, 'Verifying bucket ownership with bucket owner condition'",
    ),
    "bucket-owner-in-iam": (
        "IAM sees the bucket's owner as s3:ResourceAccount; a bucket of another account does not match a "
        "grant conditioned on the caller's own",
        "S3 user guide, 'Verifying bucket ownership'; IAM condition key s3:ResourceAccount",
    ),
    "bucket-key-in-iam": (
        "writing an object to a bucket whose default encryption is SSE-KMS needs kms:GenerateDataKey on its key, "
        "reading one kms:Decrypt, as S3 calls KMS for the caller",
        "S3 user guide, 'Using server-side encryption with AWS KMS keys (SSE-KMS)': permissions",
    ),
    "delete-scaled-endpoint": (
        "deleting an endpoint whose variant is registered with Application Auto Scaling needs "
        "application-autoscaling:DeregisterScalableTarget from the caller, and deregisters it",
        "SageMaker developer guide, 'Delete endpoints configured for auto scaling'",
    ),
    "resource-tags-in-iam": (
        "IAM sees a SageMaker endpoint's, endpoint config's or model's tags as aws:ResourceTag/<key>",
        "IAM user guide, 'Controlling access to AWS resources using tags'",
    ),
}

ROLE_POLICY_MAX_CHARS = 10240
MANAGED_POLICY_MAX_CHARS = 6144
MANAGED_POLICIES_PER_ROLE = 10
TRUST_POLICY_MAX_CHARS = 2048


def iam_length(document: str | Mapping[str, Any]) -> int:
    """A policy's length as IAM counts it against its quotas: without whitespace."""
    text = document if isinstance(document, str) else json.dumps(document)
    return len(re.sub(r"\s", "", text))


def refusal(operation: str, code: str, message: str, status: int = 400) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}, operation
    )


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _document(text: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(urllib.parse.unquote(text)) if isinstance(text, str) else dict(text)
    return document


class Strict:
    """The rules above for one emulator; ``reader(service, region)`` gives an unrecorded client of it."""

    def __init__(self, reader: Callable[[str, str], Any], account: str):
        self.reader = reader
        self.account = account

    # ---- facts IAM reads from the account ----------------------------------------------------------

    def bucket_owner(self, bucket: str, region: str) -> str | None:
        """The bucket's owner account: this one when it holds the bucket (or nobody does yet), else None
        (another account, which the emulator does not name)."""
        s3 = self.reader("s3", region)
        if any(b["Name"] == bucket for b in s3.list_buckets().get("Buckets", [])):
            return self.account
        try:
            s3.head_bucket(Bucket=bucket)
        except ClientError:
            return self.account  # no such bucket: whoever creates it owns it
        return None

    def bucket_key(self, bucket: str, region: str) -> str | None:
        """The KMS key of the bucket's default encryption (SSE-KMS), or None."""
        try:
            rules = self.reader("s3", region).get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"][
                "Rules"
            ]
        except ClientError:
            return None
        for rule in rules:
            default = rule.get("ApplyServerSideEncryptionByDefault") or {}
            if default.get("SSEAlgorithm") == "aws:kms" and default.get("KMSMasterKeyID"):
                key: str = default["KMSMasterKeyID"]
                return key
        return None

    def resource_tags(self, kind: str, name: str, region: str) -> dict[str, str]:
        """A SageMaker endpoint's, endpoint config's or model's tags; {} when there is no such resource."""
        sm = self.reader("sagemaker", region)
        try:
            arn = getattr(sm, f"describe_{xform_name(kind)}")(**{f"{kind}Name": name})[f"{kind}Arn"]
        except ClientError:
            return {}
        return {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn).get("Tags", [])}

    def scaled_variants(self, endpoint: str, region: str) -> list[str]:
        """The endpoint's variants registered with Application Auto Scaling (their ResourceIds)."""
        targets = (
            self.reader("application-autoscaling", region)
            .describe_scalable_targets(ServiceNamespace="sagemaker")
            .get("ScalableTargets", [])
        )
        return [t["ResourceId"] for t in targets if t["ResourceId"].startswith(f"endpoint/{endpoint}/variant/")]

    def facts(self, service: str, operation: str, params: Mapping[str, Any], region: str) -> dict[str, Any]:
        """What IAM reads from the account for this call, beyond the request (``iam_needs.needed`` uses it)."""
        if service == "s3" and params.get("Bucket") and operation != "CreateBucket":
            owner = self.bucket_owner(params["Bucket"], region)
            key = self.bucket_key(params["Bucket"], region) if owner else None
            return {"bucket_owner": owner, **({"bucket_key": key} if key else {})}
        tagged = re.fullmatch(r"(Describe|Delete)(Endpoint|EndpointConfig|Model)", operation)
        if service == "sagemaker" and tagged:
            kind = tagged[2]
            tags = self.resource_tags(kind, params.get(f"{kind}Name", ""), region)
            facts: dict[str, object] = {"resource_tags": tags}
            if operation == "DeleteEndpoint":
                facts["scaled_variants"] = self.scaled_variants(params.get("EndpointName", ""), region)
            return facts
        return {}

    # ---- refusals -------------------------------------------------------------------------------------

    def check(
        self,
        service: str,
        operation: str,
        params: Mapping[str, Any],
        region: str,
        facts: Mapping[str, Any] | None = None,
    ) -> ClientError | None:
        """The refusal AWS would answer this request with, by the rules above; None if it goes through."""
        facts = facts or {}
        if service == "iam":
            return self._iam(operation, params)
        expected = params.get("ExpectedBucketOwner") if service == "s3" else None
        if expected and "bucket_owner" in facts and facts["bucket_owner"] != expected:
            return refusal(operation, "AccessDenied", "Access Denied", 403)
        return None

    def _iam(self, operation: str, params: Mapping[str, Any]) -> ClientError | None:
        iam = self.reader("iam", "us-east-1")
        role = params.get("RoleName", "")
        if operation == "PutRolePolicy":
            others = [
                iam_length(iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"])
                for name in self._inline_names(iam, role)
                if name != params.get("PolicyName")
            ]
            total = sum(others) + iam_length(params.get("PolicyDocument", ""))
            if total > ROLE_POLICY_MAX_CHARS:
                return refusal(
                    operation,
                    "LimitExceeded",
                    f"Maximum policy size of {ROLE_POLICY_MAX_CHARS} bytes exceeded for role {role}",
                    409,
                )
        managed = operation in ("CreatePolicy", "CreatePolicyVersion")
        if managed and iam_length(params.get("PolicyDocument", "")) > MANAGED_POLICY_MAX_CHARS:
            return refusal(
                operation, "LimitExceeded", f"Cannot exceed quota for PolicySize: {MANAGED_POLICY_MAX_CHARS}", 409
            )
        if operation == "AttachRolePolicy":
            attached = iam.list_attached_role_policies(RoleName=role).get("AttachedPolicies", [])
            if (
                params.get("PolicyArn") not in {p["PolicyArn"] for p in attached}
                and len(attached) >= MANAGED_POLICIES_PER_ROLE
            ):
                return refusal(
                    operation,
                    "LimitExceeded",
                    f"Cannot exceed quota for PoliciesPerRole: {MANAGED_POLICIES_PER_ROLE}",
                    409,
                )
        if operation in ("CreateRole", "UpdateAssumeRolePolicy"):
            trust = params.get("AssumeRolePolicyDocument", params.get("PolicyDocument", ""))
            if iam_length(trust) > TRUST_POLICY_MAX_CHARS:
                return refusal(
                    operation, "LimitExceeded", f"Cannot exceed quota for ACLSizePerRole: {TRUST_POLICY_MAX_CHARS}", 409
                )
        if operation in ("CreateRole", "PutRolePermissionsBoundary") and params.get("PermissionsBoundary"):
            try:
                iam.get_policy(PolicyArn=params["PermissionsBoundary"])
            except ClientError as exc:
                if _code(exc) != "NoSuchEntity":
                    raise
                return refusal(
                    operation,
                    "NoSuchEntity",
                    f"Scope ARN: {params['PermissionsBoundary']} does not exist or is not attachable.",
                    404,
                )
        return None

    @staticmethod
    def _inline_names(iam: Any, role: str) -> list[str]:
        try:
            names: list[str] = iam.list_role_policies(RoleName=role).get("PolicyNames", [])
            return names
        except ClientError as exc:
            if _code(exc) == "NoSuchEntity":
                return []
            raise

    # ---- side effects ---------------------------------------------------------------------------------

    def after(self, service: str, operation: str, params: Mapping[str, Any], region: str) -> None:
        """What AWS does by itself once this call succeeded."""
        if service == "sagemaker" and operation == "DeleteEndpoint":
            scaling = self.reader("application-autoscaling", region)
            for resource in self.scaled_variants(params.get("EndpointName", ""), region):
                # Deregistering a target deletes its scaling policies too (Application Auto Scaling API reference).
                for policy in scaling.describe_scaling_policies(ServiceNamespace="sagemaker", ResourceId=resource).get(
                    "ScalingPolicies", []
                ):
                    scaling.delete_scaling_policy(
                        PolicyName=policy["PolicyName"],
                        ServiceNamespace="sagemaker",
                        ResourceId=resource,
                        ScalableDimension=policy["ScalableDimension"],
                    )
                scaling.deregister_scalable_target(
                    ServiceNamespace="sagemaker", ResourceId=resource, ScalableDimension=statements.SCALED_DIMENSION
                )

    # ---- what a role may do, read from the account ----------------------------------------------------------

    def role_documents(self, role: str) -> tuple[list[dict[str, Any]], dict[str, Any] | None] | None:
        """A role's permission documents (inline and attached) and its boundary's, as IAM holds them; None
        when the account has no such role."""
        iam = self.reader("iam", "us-east-1")
        try:
            found = iam.get_role(RoleName=role)["Role"]
        except ClientError as exc:
            if _code(exc) == "NoSuchEntity":
                return None
            raise
        documents = [
            _document(iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"])
            for name in self._inline_names(iam, role)
        ]
        documents += [
            self._managed(iam, p["PolicyArn"])
            for p in iam.list_attached_role_policies(RoleName=role).get("AttachedPolicies", [])
        ]
        boundary = (found.get("PermissionsBoundary") or {}).get("PermissionsBoundaryArn")
        return documents, (self._managed(iam, boundary) if boundary else None)

    @staticmethod
    def _managed(iam: Any, arn: str) -> dict[str, Any]:
        version = iam.get_policy(PolicyArn=arn)["Policy"]["DefaultVersionId"]
        return _document(iam.get_policy_version(PolicyArn=arn, VersionId=version)["PolicyVersion"]["Document"])


__all__ = ["RULES", "Strict", "iam_length", "refusal"]

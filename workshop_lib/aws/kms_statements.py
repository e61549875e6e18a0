"""An organisation's KMS key in the workshop's documents (``WorkshopConfig.kms_key_arn``; ``encryption``).

With no key configured the documents carry no KMS statement at all: AWS's own keys need none.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .policy_scope import Scope
from .statements import allow


def s3_service(region: str) -> str:
    """The name S3 calls KMS by in ``region`` (the ``kms:ViaService`` condition's value)."""
    return f"s3.{region}.amazonaws.com" + (".cn" if region.startswith("cn-") else "")


def key_statements(s: Scope, sid: str, via_s3: Iterable[str] = (), direct: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The organisation's key, when one is configured: ``via_s3`` actions only as S3 uses it for the bucket's
    objects, ``direct`` ones (SageMaker's volume and captures) on the key itself, a grant only for an AWS
    resource. Nothing without a key."""
    if not s.kms_key_arn:
        return []
    out = []
    if via_s3:
        out.append(
            allow(sid + "ViaS3", via_s3, [s.kms_key_arn], {"StringEquals": {"kms:ViaService": s3_service(s.region)}})
        )
    direct = list(direct)
    grants = [a for a in direct if a == "kms:CreateGrant"]
    if grants:
        out.append(allow(sid + "Grants", grants, [s.kms_key_arn], {"Bool": {"kms:GrantIsForAWSResource": True}}))
    if set(direct) - set(grants):
        out.append(allow(sid, set(direct) - set(grants), [s.kms_key_arn]))
    return out

"""An organisation's own KMS key (``WorkshopConfig.kms_key_arn``), where the workshop stores or processes data.

Unset, AWS's own keys encrypt everything, as before. Set, the key encrypts:

* every object in the bucket, as its default encryption (SSE-KMS with a bucket key), which an administrator
  sets with the bucket's other settings (``bucket_commands``): the model package, the build sources, the
  captured requests and the Batch Transform output, whoever writes them;
* the captured requests' files (``DataCaptureConfig.KmsKeyId``) and the transform job's output
  (``TransformOutput.KmsKeyId``), as SageMaker writes them;
* the endpoint's storage volume (``CreateEndpointConfig.KmsKeyId``), except on instance types with local NVMe
  storage, which a hardware module encrypts and for which SageMaker refuses a key (the GPU pools' types).

Each principal that writes or reads those objects then needs the key (``policies``), and the key's own policy
must let them use it: that is the key administrator's, and the workshop says so.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any, TypeVar

from . import calls
from .endpoints import DeployPlan
from .inference_components import ZeroPlan

BUCKET_ENCRYPTION_FILE = "bucket-encryption.json"
# Instance families with local NVMe instance storage: SageMaker refuses a KmsKeyId on their endpoint configs.
_LOCAL_STORAGE = re.compile(r"ml\.(g4dn|g5|g6|g6e|gr6|p3dn|p4d|p4de|p5|p5e|p5en|[a-z]+\d[a-z]*d[a-z]*)\.")


def has_local_storage(instance_type: str) -> bool:
    """Whether the type's volume is local NVMe storage (g4dn, g5, g6, c5d, m6id, ...)."""
    return bool(_LOCAL_STORAGE.match(instance_type))


def bucket_encryption(key_arn: str) -> dict[str, Any]:
    """The bucket's default encryption: SSE-KMS with ``key_arn`` and an S3 bucket key (fewer KMS calls)."""
    document = {
        "Rules": [
            {
                "ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key_arn},
                "BucketKeyEnabled": True,
            }
        ]
    }
    calls.validate("s3", "PutBucketEncryption", {"Bucket": "b", "ServerSideEncryptionConfiguration": document})
    return document


def _instance_types(variant: dict[str, Any]) -> Iterable[str]:
    if variant.get("InstanceType"):
        yield variant["InstanceType"]
    for pool in variant.get("InstancePools") or ():
        yield pool["InstanceType"]


# an endpoint's plan, or a scale-to-zero endpoint's (both carry endpoint_config and notes)
PlanT = TypeVar("PlanT", DeployPlan, ZeroPlan)


def encrypted_plan(plan: PlanT, key_arn: str) -> PlanT:
    """``plan`` (``endpoints.DeployPlan``) with ``key_arn`` on its captured requests and, where SageMaker accepts
    one, on its storage volume; a note says what the key covers."""
    config = dict(plan.endpoint_config)
    local = sorted({t for v in config["ProductionVariants"] for t in _instance_types(v) if has_local_storage(t)})
    if local:
        note = (
            f"the KMS key encrypts the captured requests; the storage volume is {', '.join(local)}'s local NVMe "
            "storage, which its hardware encrypts (SageMaker takes no key there)"
        )
    else:
        config["KmsKeyId"] = key_arn
        note = "the KMS key encrypts the storage volume and the captured requests"
    if config.get("DataCaptureConfig"):
        config["DataCaptureConfig"] = {**config["DataCaptureConfig"], "KmsKeyId": key_arn}
    calls.validate("sagemaker", "CreateEndpointConfig", config)
    return dataclasses.replace(plan, endpoint_config=config, notes=(*plan.notes, note))


def encrypted_transform(request: dict[str, Any], key_arn: str) -> dict[str, Any]:
    """A CreateTransformJob request whose output ``key_arn`` encrypts."""
    request = {**request, "TransformOutput": {**request["TransformOutput"], "KmsKeyId": key_arn}}
    return calls.validate("sagemaker", "CreateTransformJob", request)


__all__ = ["BUCKET_ENCRYPTION_FILE", "bucket_encryption", "encrypted_plan", "encrypted_transform", "has_local_storage"]

"""Where a bucket lives: the S3 calls that check the workshop's bucket against the endpoint's region
(SageMaker reads model data only from its own region)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from ..config import ENV_VARS, BucketNotFound
from ..errors import InvalidInput


def expect_owner(s3_client: Any, account: Callable[[], str]) -> None:
    """Every request of ``s3_client`` that names a bucket states ``account()`` as the bucket's expected owner,
    so S3 refuses it (403) when another account owns a bucket of that name: names are global, and a
    predictable one can be created first by anyone (S3 guide, "Verifying bucket ownership")."""

    def add(params: dict[str, Any], model: Any, **_: Any) -> None:
        if params.get("Bucket") and "ExpectedBucketOwner" in model.input_shape.members:
            params.setdefault("ExpectedBucketOwner", account())

    s3_client.meta.events.register_first("before-parameter-build.s3", add)


def bucket_region(s3_client: Any, bucket: str) -> str:
    """The region of a bucket this account owns. A 403 is never taken to mean "ours": with the owner stated
    (``expect_owner``) it means another account holds the name, or this role may not read the bucket."""
    try:
        response = s3_client.head_bucket(Bucket=bucket)
        headers = response["ResponseMetadata"]["HTTPHeaders"]
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("404", "NoSuchBucket", "NotFound"):
            raise BucketNotFound(
                f"bucket {bucket!r} does not exist; create it in the endpoint's region "
                f"(aws s3 mb s3://{bucket} --region <region>) or set {ENV_VARS['bucket']}"
            ) from None
        if code in ("403", "AccessDenied", "Forbidden"):
            raise InvalidInput(
                f"bucket {bucket!r} exists but this account does not own it, or may not read it (403): bucket "
                f"names are global, so another account may have created it first. Choose another name "
                f"({ENV_VARS['bucket']}=<name>) and run notebook 00 again; nothing was written to it"
            ) from None
        raise
    region: str = headers.get("x-amz-bucket-region")
    if not region:
        location = s3_client.get_bucket_location(Bucket=bucket).get("LocationConstraint")
        region = {None: "us-east-1", "": "us-east-1", "EU": "eu-west-1"}.get(location, location)
    return region


def check_bucket_region(s3_client: Any, bucket: str, region: str) -> str:
    """Raise InvalidInput unless the bucket is in ``region`` (the endpoint's region)."""
    found = bucket_region(s3_client, bucket)
    if found != region:
        raise InvalidInput(
            f"bucket {bucket!r} is in {found} but the endpoint region is {region}; SageMaker reads model "
            f"data only from its own region. Use a bucket in {region} (set {ENV_VARS['bucket']}) "
            f"or deploy in {found} (set {ENV_VARS['region']}={found})"
        )
    return found

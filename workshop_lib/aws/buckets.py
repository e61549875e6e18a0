"""Where a bucket lives: the S3 calls that check the workshop's bucket against the endpoint's region
(SageMaker reads model data only from its own region)."""

from __future__ import annotations

from botocore.exceptions import ClientError

from ..config import ENV_VARS, BucketNotFound
from ..errors import InvalidInput


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
    """Raise InvalidInput unless the bucket is in ``region`` (the endpoint's region)."""
    found = bucket_region(s3_client, bucket)
    if found != region:
        raise InvalidInput(
            f"bucket {bucket!r} is in {found} but the endpoint region is {region}; SageMaker reads model "
            f"data only from its own region. Use a bucket in {region} (set {ENV_VARS['bucket']}) "
            f"or deploy in {found} (set {ENV_VARS['region']}={found})"
        )
    return found

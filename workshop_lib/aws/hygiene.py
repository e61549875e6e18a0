"""What a reviewer expects of the resources the workshop leaves in an account: logs that expire, captured
requests that expire, and a bucket that refuses plain HTTP.

* Log groups: CloudWatch keeps a new group's events forever unless told otherwise. The workshop creates its
  endpoints' and builds' groups itself, before SageMaker or CodeBuild would, with ``LOG_RETENTION_DAYS``.
* The bucket: a policy that denies every request not made over TLS, and a lifecycle rule that expires the
  captured requests (personal data, possibly) after ``CAPTURE_EXPIRY_DAYS`` and the parts of uploads that never
  completed. Both are the administrator's to apply (``bucket_commands``): either call could also open or empty
  the whole bucket, which is more than the operator's grants on the workshop's prefix, so the operator has
  neither (parliament's resource-policy privilege escalation check says why).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from . import calls, encryption
from .arns import s3_bucket_arn
from .policy_scope import CAPTURE_FOLDER

LOG_RETENTION_DAYS = 14
CAPTURE_EXPIRY_DAYS = 30
INCOMPLETE_UPLOAD_DAYS = 7
REFUSED = frozenset({"AccessDenied", "AccessDeniedException"})
BUCKET_POLICY_FILE, LIFECYCLE_FILE = "bucket-policy.json", "bucket-lifecycle.json"


def retention_request(group: str, days: int = LOG_RETENTION_DAYS) -> dict[str, Any]:
    return calls.validate("logs", "PutRetentionPolicy", {"logGroupName": group, "retentionInDays": days})


def tls_only_policy(bucket: str, region: str) -> dict[str, Any]:
    """A bucket policy that denies any request made without TLS (S3 guide: "aws:SecureTransport")."""
    bucket_arn = s3_bucket_arn(bucket, region)
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "TlsOnly",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": [bucket_arn, f"{bucket_arn}/*"],
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            }
        ],
    }


def lifecycle(prefix: str) -> dict[str, Any]:
    """Captured requests expire after ``CAPTURE_EXPIRY_DAYS``; unfinished multipart uploads are aborted."""
    capture = "/".join(p for p in (prefix.strip("/"), CAPTURE_FOLDER) if p) + "/"
    return {
        "Rules": [
            {
                "ID": "expire-captured-requests",
                "Status": "Enabled",
                "Filter": {"Prefix": capture},
                "Expiration": {"Days": CAPTURE_EXPIRY_DAYS},
            },
            {
                "ID": "abort-incomplete-uploads",
                "Status": "Enabled",
                "Filter": {"Prefix": ""},
                "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": INCOMPLETE_UPLOAD_DAYS},
            },
        ]
    }


def write_bucket_documents(
    folder: str | Path, bucket: str, prefix: str, region: str, kms_key_arn: str = ""
) -> dict[str, Path]:
    """The bucket's policy and lifecycle (and, with an organisation's key, its default encryption) as files
    beside the IAM documents, each checked by botocore."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    documents = {BUCKET_POLICY_FILE: tls_only_policy(bucket, region), LIFECYCLE_FILE: lifecycle(prefix)}
    if kms_key_arn:
        documents[encryption.BUCKET_ENCRYPTION_FILE] = encryption.bucket_encryption(kms_key_arn)
    calls.validate("s3", "PutBucketPolicy", {"Bucket": bucket, "Policy": json.dumps(documents[BUCKET_POLICY_FILE])})
    calls.validate(
        "s3", "PutBucketLifecycleConfiguration", {"Bucket": bucket, "LifecycleConfiguration": documents[LIFECYCLE_FILE]}
    )
    written = {}
    for name, document in documents.items():
        written[name] = folder / name
        written[name].write_text(json.dumps(document, indent=2) + "\n")
    return written


def bucket_commands(folder: str | Path, bucket: str, account: str, *, encrypted: bool = False) -> list[list[str]]:
    """The administrator's lines for the bucket notebook 00 created (once it exists); ``encrypted``: with the
    default encryption by the organisation's key (``encryption``)."""
    folder = Path(folder).resolve()
    owner = ["--expected-bucket-owner", account]
    commands = [
        [
            "aws",
            "s3api",
            "put-bucket-policy",
            "--bucket",
            bucket,
            "--policy",
            f"file://{folder / BUCKET_POLICY_FILE}",
            *owner,
        ],
        [
            "aws",
            "s3api",
            "put-bucket-lifecycle-configuration",
            "--bucket",
            bucket,
            "--lifecycle-configuration",
            f"file://{folder / LIFECYCLE_FILE}",
            *owner,
        ],
    ]
    if encrypted:
        commands.append(
            [
                "aws",
                "s3api",
                "put-bucket-encryption",
                "--bucket",
                bucket,
                "--server-side-encryption-configuration",
                f"file://{folder / encryption.BUCKET_ENCRYPTION_FILE}",
                *owner,
            ]
        )
    return commands


def keep_logs(logs_client: Any, group: str, days: int = LOG_RETENTION_DAYS) -> str:
    """Create ``group`` if missing and set its retention; "" when done, else a note saying why not."""
    try:
        try:
            logs_client.create_log_group(logGroupName=group)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceAlreadyExistsException":
                raise
        logs_client.put_retention_policy(**retention_request(group, days))
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") not in REFUSED:
            raise
        return f"log group {group} keeps its events without a retention ({error.get('Code')}: {error.get('Message')})"
    return ""


__all__ = [
    "BUCKET_POLICY_FILE",
    "CAPTURE_EXPIRY_DAYS",
    "LIFECYCLE_FILE",
    "LOG_RETENTION_DAYS",
    "bucket_commands",
    "keep_logs",
    "lifecycle",
    "retention_request",
    "tls_only_policy",
    "write_bucket_documents",
]

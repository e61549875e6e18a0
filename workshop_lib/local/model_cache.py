"""The models local endpoints serve, fetched from the emulator's S3 and unpacked as SageMaker fills
``/opt/ml/model``: once per object version, in the rehearsal's ``models/`` folder."""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path
from typing import Any

from .. import name_rules
from ..errors import InvalidInput
from ..packaging import MAX_EXTRACT_BYTES, MAX_EXTRACT_MEMBERS, extract_model


def download_and_extract(
    home: Path, s3_client: Any, model_data_url: str, *, max_bytes: int | None = None, max_members: int | None = None
) -> Path:
    """Fetch model.tar.gz from emulated S3 once per object version and unpack it like /opt/ml/model.

    The cache folder is named by a digest of the URL and the object's ETag, so nothing S3 returns
    becomes part of a path; extraction keeps packaging.extract_model's limits.
    """
    max_bytes = MAX_EXTRACT_BYTES if max_bytes is None else max_bytes
    max_members = MAX_EXTRACT_MEMBERS if max_members is None else max_members
    bucket, key = name_rules.split_s3_uri(model_data_url) or ("", "")
    head = s3_client.head_object(Bucket=bucket, Key=key)
    version = hashlib.sha256(f"{model_data_url}\n{head['ETag']}".encode()).hexdigest()[:32]
    target = home / "models" / version
    model_dir = target / "model"
    if (target / ".complete").is_file():
        return model_dir
    if head.get("ContentLength", 0) > max_bytes:
        raise InvalidInput(
            f"{model_data_url} is {head['ContentLength']:,} bytes, more than the {max_bytes:,} bytes a model "
            "may unpack to here; nothing was downloaded"
        )
    target.mkdir(parents=True, exist_ok=True)
    tarball = target / "model.tar.gz"
    s3_client.download_file(bucket, key, str(tarball))
    with tarfile.open(tarball, "r:gz"):
        pass  # fails early with a clear tarfile error if the object is not a tarball
    try:
        extract_model(tarball, model_dir, max_bytes=max_bytes, max_members=max_members)
    finally:
        tarball.unlink()
    (target / ".complete").write_text(model_data_url + "\n")
    return model_dir

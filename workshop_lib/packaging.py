"""Model packaging: ``model.tar.gz`` with the GGUF at its root and ``model-manifest.json``.

The manifest records where every file came from (repo, revision) and its size
and sha256; the adapter refuses to serve a GGUF that does not match it. The
CodeBuild buildspec writes the same format for the pinned model; this module
writes it locally for the embedded one.

Manifest format (version 1)::

    {"format": 1,
     "model": {"name", "repo", "revision", "file", "quantization", "license"},
     "files": [{"path", "role", "repo", "revision", "size", "sha256"}, ...],
     "tools": {...}, "build": {"id", "time", "where"}}
"""

from __future__ import annotations

import datetime
import hashlib
import json
import platform
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

from .errors import WorkshopError
from .models import ModelSpec

MANIFEST_NAME = "model-manifest.json"
MANIFEST_FORMAT = 1


class ChecksumMismatch(WorkshopError, RuntimeError):
    """A file differs from the pinned size or sha256: nothing is packaged."""


def sha256_of(path: str | Path, chunk: int = 8 * 1024 * 1024) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def build_manifest(spec: ModelSpec, measured: dict[str, tuple[int, str]], *, build_id: str,
                   where: str, tools: dict | None = None, now: datetime.datetime | None = None) -> dict:
    """The manifest for ``spec`` given each file's measured (size, sha256). Pure."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    files = []
    for f in spec.files:
        size, digest = measured[f.path]
        files.append({"path": f.path, "role": f.role, "repo": f.repo, "revision": f.revision,
                      "size": size, "sha256": digest})
    return {
        "format": MANIFEST_FORMAT,
        "model": {"name": spec.name, "repo": spec.gguf.repo, "revision": spec.gguf.revision,
                  "file": spec.gguf.path, "quantization": spec.quantization, "license": spec.license},
        "files": files,
        "tools": dict(tools or {}),
        "build": {"id": build_id, "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "where": where},
    }


def verify_pins(spec: ModelSpec, measured: dict[str, tuple[int, str]]) -> None:
    """Raise ChecksumMismatch if a measured file differs from a pinned size or sha256."""
    for f in spec.files:
        if f.path not in measured:
            raise ChecksumMismatch(f"{f.path} was not found; nothing was packaged")
        size, digest = measured[f.path]
        if f.size is not None and size != f.size:
            raise ChecksumMismatch(
                f"{f.path}: {size} bytes, but {f.repo}@{f.revision[:12]} pins {f.size} bytes; nothing was packaged")
        if f.sha256 is not None and digest != f.sha256:
            raise ChecksumMismatch(
                f"{f.path}: sha256 {digest}, but the pin is {f.sha256}; nothing was packaged")


@dataclass(frozen=True)
class LocalPackage:
    tarball: Path
    manifest_path: Path
    manifest: dict


def package_local(spec: ModelSpec, sources: dict[str, Path], out_dir: str | Path) -> LocalPackage:
    """Check the files against their pins, then write model.tar.gz and the manifest to out_dir."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    measured = {name: (Path(p).stat().st_size, sha256_of(p)) for name, p in sources.items()}
    verify_pins(spec, measured)
    manifest = build_manifest(
        spec, measured, build_id=f"local-{datetime.datetime.now():%Y%m%d%H%M%S}", where="local",
        tools={"python": platform.python_version(), "packager": "workshop_lib.packaging"},
    )
    manifest_path = out_dir / MANIFEST_NAME
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    tarball = out_dir / "model.tar.gz"
    # Level 1: GGUF weights barely compress, so spend little time trying.
    with tarfile.open(tarball, "w:gz", compresslevel=1) as tar:
        for f in spec.files:
            tar.add(sources[f.path], arcname=f.path)
        tar.add(manifest_path, arcname=MANIFEST_NAME)
    return LocalPackage(tarball, manifest_path, manifest)


def extract_model(tarball: str | Path, model_dir: str | Path) -> Path:
    """Unpack model.tar.gz the way SageMaker fills /opt/ml/model."""
    model_dir = Path(model_dir)
    if model_dir.exists():
        shutil.rmtree(model_dir)
    model_dir.mkdir(parents=True)
    with tarfile.open(tarball, "r:gz") as tar:
        tar.extractall(model_dir, filter="data")
    return model_dir

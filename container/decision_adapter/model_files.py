"""Finding the GGUF in the model directory and checking it against the manifest.

The search order is the DLC entrypoint's: ``SM_LLAMA_CPP_MODEL`` if set, else the
alphabetically first ``*.gguf`` in the model directory, else the first
``*/*.gguf``. When ``model-manifest.json`` sits in the model directory, every
file it lists must have the recorded size and sha256 before anything is served.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

MANIFEST_NAME = "model-manifest.json"


class ModelFilesError(RuntimeError):
    """The model directory cannot be served as it is."""


@dataclass(frozen=True)
class ModelFiles:
    gguf: Path
    size: int
    sha256: str
    manifest: dict | None = field(default=None, compare=False)

    @property
    def source(self) -> dict:
        """The manifest's description of the model (repo, revision, ...), or {}."""
        return dict((self.manifest or {}).get("model") or {})


def find_gguf(model_dir: str | Path, model_file: str | None = None) -> Path:
    model_dir = Path(model_dir)
    if model_file:
        candidate = Path(model_file)
        if not candidate.is_absolute():
            candidate = model_dir / candidate
        if not candidate.is_file():
            raise ModelFilesError(
                f"SM_LLAMA_CPP_MODEL points at {candidate}, which is not a file; "
                f"fix the path or unset it to use the first *.gguf in {model_dir}"
            )
        return candidate
    if not model_dir.is_dir():
        raise ModelFilesError(
            f"model directory {model_dir} does not exist; set SM_MODEL_DIR or pass ModelDataUrl "
            "so SageMaker extracts the model there"
        )
    for pattern in ("*.gguf", "*/*.gguf"):
        found = sorted(p for p in model_dir.glob(pattern) if p.is_file())
        if found:
            return found[0]
    raise ModelFilesError(
        f"no *.gguf file in {model_dir} or its subfolders; put the GGUF at the root of model.tar.gz"
    )


def sha256_of(path: str | Path, chunk: int = 8 * 1024 * 1024) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def read_manifest(model_dir: str | Path) -> dict | None:
    path = Path(model_dir) / MANIFEST_NAME
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFilesError(f"{path} is not valid JSON ({exc}); rebuild the model package") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        raise ModelFilesError(f"{path} has no 'files' list; rebuild the model package")
    return manifest


def verify_manifest(model_dir: Path, manifest: dict, gguf: Path) -> None:
    """Check size and sha256 of every file the manifest lists; the GGUF must be listed."""
    listed = {entry.get("path"): entry for entry in manifest["files"] if isinstance(entry, dict)}
    gguf_key = _listed_name(model_dir, gguf)
    if gguf_key not in listed:
        raise ModelFilesError(
            f"{gguf_key} is not listed in {MANIFEST_NAME} (it lists {sorted(listed)}); "
            "serve the packaged GGUF or rebuild the package"
        )
    for rel, entry in sorted(listed.items()):
        path = model_dir / rel
        if not path.is_file():
            raise ModelFilesError(f"{rel} is listed in {MANIFEST_NAME} but missing from {model_dir}")
        size = path.stat().st_size
        if entry.get("size") is not None and size != entry["size"]:
            raise ModelFilesError(
                f"{rel}: size {size} bytes does not match the manifest's {entry['size']} bytes "
                "(truncated or replaced file); re-extract model.tar.gz"
            )
        expected = str(entry.get("sha256", "")).lower()
        actual = sha256_of(path)
        if expected != actual:
            raise ModelFilesError(
                f"{rel}: sha256 mismatch: expected {expected or '(none recorded)'}, actual {actual}; "
                "the file differs from the packaged one, re-extract or rebuild model.tar.gz"
            )


def _listed_name(model_dir: Path, gguf: Path) -> str:
    try:
        return gguf.relative_to(model_dir).as_posix()
    except ValueError:
        return gguf.name


def check_gguf_header(path: Path) -> None:
    with open(path, "rb") as handle:
        magic = handle.read(4)
    if magic != b"GGUF":
        raise ModelFilesError(
            f"{path.name} is not a valid GGUF file (it does not start with the GGUF header; truncated or "
            "corrupt?); re-extract model.tar.gz or rebuild the model package")


def locate_model(model_dir: str | Path, model_file: str | None = None) -> ModelFiles:
    """Find the GGUF, verify it against the manifest if one exists, return its identity."""
    model_dir = Path(model_dir)
    gguf = find_gguf(model_dir, model_file)
    check_gguf_header(gguf)
    manifest = read_manifest(model_dir) if model_dir.is_dir() else None
    if manifest is not None:
        verify_manifest(model_dir, manifest, gguf)
        key = _listed_name(model_dir, gguf)
        entry = next(e for e in manifest["files"] if e.get("path") == key)
        digest = entry.get("sha256") or sha256_of(gguf)
    else:
        digest = sha256_of(gguf)
    return ModelFiles(gguf=gguf, size=os.path.getsize(gguf), sha256=digest, manifest=manifest)

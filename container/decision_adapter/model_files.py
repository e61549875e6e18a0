"""Finding the GGUF in the model directory and checking it against the manifest.

The search order is the DLC entrypoint's: ``SM_LLAMA_CPP_MODEL`` if set, else the
alphabetically first ``*.gguf`` in the model directory, else the first
``*/*.gguf``. Whatever is loaded must lie inside the model directory once symlinks
are resolved.

When ``model-manifest.json`` sits in the model directory it is read in either of the contract's
two shapes (``decision_contract.manifest``: the workshop's, every file with size and sha256; the
published sample's, the GGUF's sha256 only), every entry checked against its rules before any
listed file is opened, and the GGUF about to be loaded must be one of the files it verifies.

``calibration.json`` (served_calibration.py) is looked for next to the GGUF, then at the top of the
model directory; when the manifest lists it, its size and sha256 are checked like every listed
file's (``calibration_listed``), and a manifest that lists it while it is missing stops the start.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decision_contract import manifest as contract
from decision_contract.manifest import (
    CALIBRATION_NAME,
    MANIFEST_NAME,
    SAMPLE_SHAPE,
    TOKENIZER_DIR,
    WORKSHOP_SHAPE,
    ListedFile,
    Manifest,
    ManifestError,
    sha256_of,
)

log = logging.getLogger(__name__)

__all__ = [
    "CALIBRATION_NAME",
    "MANIFEST_NAME",
    "SAMPLE_SHAPE",
    "WORKSHOP_SHAPE",
    "ListedFile",
    "Manifest",
    "ModelFiles",
    "ModelFilesError",
    "find_gguf",
    "locate_model",
    "parse_manifest",
    "read_manifest",
    "sha256_of",
    "verify_manifest",
]


class ModelFilesError(RuntimeError):
    """The model directory cannot be served as it is."""


@dataclass(frozen=True)
class ModelFiles:
    gguf: Path
    size: int
    sha256: str
    manifest: dict[str, Any] | None = field(default=None, compare=False)  # the manifest's JSON as read, if any
    entry: dict[str, object] = field(default_factory=dict, compare=False)  # the verified entry of the GGUF loaded
    shape: str | None = None  # which manifest shape was read (None: no manifest)
    summary: str = ""  # one line: what was verified
    calibration: Path | None = None  # calibration.json, if the model directory holds one
    calibration_listed: bool = False  # whether the manifest lists it (then its sha256 was verified)

    @property
    def source(self) -> dict[str, object]:
        """Where the loaded GGUF comes from (repo, revision, ...), or {} without a manifest."""
        if self.manifest is None:
            return {}
        if self.shape == SAMPLE_SHAPE:
            return {k: v for k, v in (self.manifest.get("gguf") or {}).items() if k != "sha256"}
        return dict(self.manifest.get("model") or {})


# ---- finding the GGUF ---------------------------------------------------------------------------


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
    raise ModelFilesError(f"no *.gguf file in {model_dir} or its subfolders; put the GGUF at the root of model.tar.gz")


def _resolve_inside(root: Path, path: Path, what: str) -> Path:
    """``path`` with every symlink resolved; refused unless it stays inside ``root`` (already resolved)."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop, an unreadable component
        raise ModelFilesError(f"{what}: {path} cannot be resolved ({exc}); re-extract model.tar.gz") from None
    if real == root or not real.is_relative_to(root):
        raise ModelFilesError(
            f"{what}: {path} resolves to {real}, outside the model directory {root}; the adapter serves "
            "only files inside it (no symlink may lead out): put the file in the model directory"
        )
    return real


def _loaded_gguf(model_dir: Path, model_file: str | None) -> Path:
    """The GGUF to load, resolved and checked to be a regular file inside ``model_dir``."""
    found = find_gguf(model_dir, model_file)
    what = "SM_LLAMA_CPP_MODEL" if model_file else "the GGUF found"
    real = _resolve_inside(model_dir.resolve(), found, what)
    if not stat.S_ISREG(real.stat().st_mode):
        raise ModelFilesError(f"{what}: {found} is not a regular file; point SM_LLAMA_CPP_MODEL at the GGUF")
    return real


# ---- reading the manifest -----------------------------------------------------------------------


def parse_manifest(raw: object) -> Manifest:
    """The contract's rules (``decision_contract.manifest.parse``), refused as this room's error."""
    try:
        return contract.parse(raw)
    except ManifestError as exc:
        raise ModelFilesError(str(exc)) from None


def read_manifest(model_dir: str | Path) -> Manifest | None:
    path = Path(model_dir) / MANIFEST_NAME
    if not path.exists():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFilesError(f"{path} is not valid JSON ({exc}); rebuild the model package") from None
    return parse_manifest(raw)


# ---- verifying ----------------------------------------------------------------------------------


def _tokenizer_files(root: Path) -> list[str]:
    folder = root / TOKENIZER_DIR
    if not folder.is_dir():
        return []
    return sorted(p.relative_to(root).as_posix() for p in folder.rglob("*") if p.is_file())


def verify_manifest(model_dir: str | Path, manifest: Manifest, gguf: Path) -> tuple[ListedFile, str, str]:
    """Check the listed files (the GGUF must be one); return the GGUF's entry, its sha256 and a summary line.

    ``gguf`` is the resolved path of the file about to be loaded. Every listed path is resolved and
    checked to stay inside the directory before any file is opened; sizes are compared before
    anything is hashed.
    """
    root = Path(model_dir).resolve()
    located = [
        (entry, _resolve_inside(root, root / entry.path, f"{MANIFEST_NAME} {entry.label}")) for entry in manifest.files
    ]
    loaded = [entry for entry, real in located if real == gguf]
    if not loaded:
        raise ModelFilesError(
            f"{gguf.relative_to(root).as_posix()} (the GGUF to be served) is not listed in {MANIFEST_NAME} "
            f"(it lists {[e.path for e in manifest.files]}); serve the packaged GGUF or rebuild the package"
        )
    gguf_rel = gguf.relative_to(root).as_posix()
    entry = next((e for e in loaded if e.path == gguf_rel), loaded[0])
    for listed, real in located:
        if not real.exists():
            raise ModelFilesError(f"{listed.path} is listed in {MANIFEST_NAME} but missing from {model_dir}")
        if not stat.S_ISREG(real.stat().st_mode):
            raise ModelFilesError(f"{MANIFEST_NAME} {listed.label}: {listed.path} is not a regular file")
        size = real.stat().st_size
        if listed.size is not None and size != listed.size:
            raise ModelFilesError(
                f"{listed.path}: size {size} bytes does not match the manifest's {listed.size} bytes "
                "(truncated or replaced file); re-extract model.tar.gz"
            )
    digests: dict[Path, str] = {}
    for listed, real in located:
        actual = digests.get(real) or sha256_of(real)
        digests[real] = actual
        if listed.sha256 != actual:
            raise ModelFilesError(
                f"{listed.path}: sha256 mismatch: expected {listed.sha256}, actual {actual}; "
                "the file differs from the packaged one, re-extract or rebuild model.tar.gz"
            )
    if manifest.shape == SAMPLE_SHAPE:
        tokenizer = _tokenizer_files(root)
        origin = manifest.tokenizer or {}
        where = f" from {origin.get('repo')}@{str(origin.get('revision'))[:12]}" if origin.get("repo") else ""
        summary = (
            f"manifest: published sample's shape, GGUF sha256 verified; tokenizer files not listed with "
            f"digests ({len(tokenizer)} under {TOKENIZER_DIR}/{where} not covered; the adapter reads its "
            "tokenizer from the GGUF)"
        )
    else:
        summary = f"manifest: workshop shape, {len(manifest.files)} files verified (size and sha256)"
    return entry, digests[gguf], summary


def check_gguf_header(path: Path) -> None:
    with open(path, "rb") as handle:
        magic = handle.read(4)
    if magic != b"GGUF":
        raise ModelFilesError(
            f"{path.name} is not a valid GGUF file (it does not start with the GGUF header; truncated or "
            "corrupt?); re-extract model.tar.gz or rebuild the model package"
        )


def locate_model(model_dir: str | Path, model_file: str | None = None) -> ModelFiles:
    """Find the GGUF, verify it against the manifest if one exists, return the identity of the file loaded."""
    model_dir = Path(model_dir)
    gguf = _loaded_gguf(model_dir, model_file)
    root = model_dir.resolve()
    manifest = read_manifest(root)
    if manifest is None:
        check_gguf_header(gguf)
        summary = f"manifest: none ({MANIFEST_NAME} absent), {gguf.name} served unverified"
        files = ModelFiles(gguf=gguf, size=gguf.stat().st_size, sha256=sha256_of(gguf), summary=summary)
    else:
        entry, digest, summary = verify_manifest(root, manifest, gguf)
        check_gguf_header(gguf)
        files = ModelFiles(
            gguf=gguf,
            size=gguf.stat().st_size,
            sha256=digest,
            manifest=manifest.raw,
            entry=entry.describe(),
            shape=manifest.shape,
            summary=summary,
        )
    calibration, listed = find_calibration(root, gguf, manifest)
    if calibration is not None:
        files = dataclasses.replace(files, calibration=calibration, calibration_listed=listed)
        if manifest is not None and not listed:
            log.warning("%s is not listed in %s: served unverified", calibration.relative_to(root), MANIFEST_NAME)
    log.info("%s", files.summary)
    return files


def find_calibration(root: Path, gguf: Path, manifest: Manifest | None) -> tuple[Path | None, bool]:
    """calibration.json next to the GGUF, else at the top of the directory; and whether the manifest lists it
    (a listed file was verified by ``verify_manifest``)."""
    for folder in dict.fromkeys((gguf.parent, root)):
        candidate = folder / CALIBRATION_NAME
        if candidate.is_file():
            path = _resolve_inside(root, candidate, CALIBRATION_NAME)
            listed = manifest is not None and any(
                _resolve_inside(root, root / e.path, f"{MANIFEST_NAME} {e.label}") == path for e in manifest.files
            )
            return path, listed
    return None, False

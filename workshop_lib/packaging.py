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

A served calibration (``calibration.json``, written by ``workshop calibrate``) may go into the
package next to the GGUF: it is listed like every other file (``role: "calibration"``, size and
sha256, no repo or revision), so the adapter verifies it before it applies it, and it is refused
here when it was fitted for another GGUF (``check_calibration``).

The published sample's packages use another shape, read here too: ``{"gguf": {"repo",
"revision", "file", "sha256"}, "tokenizer": {"repo", "revision"}}`` (GGUF at the root,
tokenizer files under ``tokenizer/``, no sizes, no per-file digests for the tokenizer).

The format and the rules a manifest follows whichever side reads it are the contract's
(``decision_contract.manifest``, which the adapter reads them with too): ``parse_manifest`` applies them.
``extract_model`` unpacks under a cap on bytes and members, checked before anything is written.
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
from typing import Any

from decision_contract import calibration as calibration_contract
from decision_contract import manifest as manifest_contract
from decision_contract.manifest import (
    CALIBRATION_NAME,
    MANIFEST_NAME,
    SAMPLE_SHAPE,
    WORKSHOP_SHAPE,
    ListedFile,
    Manifest,
    ManifestError,
    calibration_entry,
    sha256_of,
)

from .errors import InvalidInput
from .models import ModelSpec

MANIFEST_FORMAT = manifest_contract.FORMAT
_MAX_CALIBRATION_BYTES = 1024 * 1024

__all__ = [
    "CALIBRATION_NAME",
    "MANIFEST_NAME",
    "SAMPLE_SHAPE",
    "WORKSHOP_SHAPE",
    "ListedFile",
    "LocalPackage",
    "Manifest",
    "ManifestInvalid",
    "build_manifest",
    "calibration_entry",
    "check_calibration",
    "extract_model",
    "package_local",
    "parse_manifest",
    "sha256_of",
    "verify_pins",
]


def check_calibration(data: bytes, gguf_sha256: str, where: str = CALIBRATION_NAME) -> dict[str, Any]:
    """The calibration document in ``data``, checked to be fitted for the GGUF with ``gguf_sha256``. Pure."""
    if len(data) > _MAX_CALIBRATION_BYTES:
        raise InvalidInput(f"{where} is {len(data):,} bytes; a calibration file is a few kB")
    try:
        doc: dict[str, Any] = json.loads(data.decode("utf-8"))  # parse() below refuses any other shape
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"{where} is not JSON ({exc}); write it with `workshop calibrate`") from None
    try:
        fitted = calibration_contract.parse(doc, where).gguf_sha256
    except calibration_contract.CalibrationError as exc:
        raise InvalidInput(f"{exc}; the adapter would refuse to start") from None
    if fitted != gguf_sha256.lower():
        raise InvalidInput(
            f"{where} was fitted for the GGUF with sha256 {fitted}, but the package's GGUF has sha256 "
            f"{gguf_sha256.lower()}; the adapter would refuse to start. Fit it again against an endpoint serving "
            "this model (`workshop calibrate`), or package without it"
        )
    return doc


def build_manifest(
    spec: ModelSpec,
    measured: dict[str, tuple[int, str]],
    *,
    build_id: str,
    where: str,
    tools: dict[str, Any] | None = None,
    now: datetime.datetime | None = None,
    calibration: tuple[int, str] | None = None,
) -> dict[str, Any]:
    """The manifest for ``spec`` given each file's measured (size, sha256), and the calibration file's
    (size, sha256) when one is packaged. Pure."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    files = []
    for f in spec.files:
        size, digest = measured[f.path]
        files.append(
            {"path": f.path, "role": f.role, "repo": f.repo, "revision": f.revision, "size": size, "sha256": digest}
        )
    if calibration is not None:
        files.append(calibration_entry(*calibration))
    return {
        "format": MANIFEST_FORMAT,
        "model": {
            "name": spec.name,
            "repo": spec.gguf.repo,
            "revision": spec.gguf.revision,
            "file": spec.gguf.path,
            "quantization": spec.quantization,
            "license": spec.license,
        },
        "files": files,
        "tools": dict(tools or {}),
        "build": {"id": build_id, "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "where": where},
    }


def verify_pins(spec: ModelSpec, measured: dict[str, tuple[int, str]]) -> None:
    """Raise InvalidInput if a measured file differs from a pinned size or sha256."""
    for f in spec.files:
        if f.path not in measured:
            raise InvalidInput(f"{f.path} was not found; nothing was packaged")
        size, digest = measured[f.path]
        if f.size is not None and size != f.size:
            raise InvalidInput(
                f"{f.path}: {size} bytes, but {f.repo}@{f.revision[:12]} pins {f.size} bytes; nothing was packaged"
            )
        if f.sha256 is not None and digest != f.sha256:
            raise InvalidInput(f"{f.path}: sha256 {digest}, but the pin is {f.sha256}; nothing was packaged")


@dataclass(frozen=True)
class LocalPackage:
    tarball: Path
    manifest_path: Path
    manifest: dict[str, Any]


def package_local(
    spec: ModelSpec, sources: dict[str, Path], out_dir: str | Path, *, calibration: str | Path | None = None
) -> LocalPackage:
    """Check the files against their pins, then write model.tar.gz and the manifest to out_dir; with
    ``calibration`` (a calibration.json fitted for this GGUF) also that file, next to the GGUF."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if spec.gguf.path == CALIBRATION_NAME or any(f.path == CALIBRATION_NAME for f in spec.files):
        raise InvalidInput(f"{spec.name} already has a file named {CALIBRATION_NAME}")
    measured = {name: (Path(p).stat().st_size, sha256_of(p)) for name, p in sources.items()}
    verify_pins(spec, measured)
    calibrated = None
    if calibration is not None:
        data = Path(calibration).read_bytes()
        check_calibration(data, measured[spec.gguf.path][1], str(calibration))
        calibrated = (len(data), hashlib.sha256(data).hexdigest())
    manifest = build_manifest(
        spec,
        measured,
        build_id=f"local-{datetime.datetime.now():%Y%m%d%H%M%S}",
        where="local",
        tools={"python": platform.python_version(), "packager": "workshop_lib.packaging"},
        calibration=calibrated,
    )
    manifest_path = out_dir / MANIFEST_NAME
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    tarball = out_dir / "model.tar.gz"
    # Level 1: GGUF weights barely compress, so spend little time trying.
    with tarfile.open(tarball, "w:gz", compresslevel=1) as tar:
        for f in spec.files:
            tar.add(sources[f.path], arcname=f.path)
        if calibration is not None:
            tar.add(calibration, arcname=CALIBRATION_NAME)
        tar.add(manifest_path, arcname=MANIFEST_NAME)
    return LocalPackage(tarball, manifest_path, manifest)


# ---- reading a manifest: the contract's rules, as this room's error ---------------------------


class ManifestInvalid(InvalidInput):
    """A manifest breaks a rule (shape, duplicate path, path leaving the directory); nothing is trusted."""


def parse_manifest(manifest: object) -> Manifest:
    """The manifest's entries, each checked against the contract's rules, in either shape. Pure."""
    try:
        return manifest_contract.parse(manifest)
    except ManifestError as exc:
        raise ManifestInvalid(str(exc)) from None


# ---- extracting with limits ---------------------------------------------------------------------

MAX_EXTRACT_BYTES = 16 * 1024**3  # well above the pinned model (about 3 GB) and its tokenizer
MAX_EXTRACT_MEMBERS = 10_000
_MAX_INNER_MANIFEST = 1024 * 1024


def _announced_sizes(manifest: object) -> dict[str, set[int]]:
    """Sizes by path from a manifest's 'files' list, as far as it is readable (the adapter judges the rest)."""
    sizes: dict[str, set[int]] = {}
    files = manifest.get("files") if isinstance(manifest, dict) else None
    for entry in files if isinstance(files, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("path"), str) and type(entry.get("size")) is int:
            sizes.setdefault(entry["path"], set()).add(entry["size"])
    return sizes


def _scan(
    tar: tarfile.TarFile, model_dir: Path, max_bytes: int, max_members: int
) -> tuple[list[tarfile.TarInfo], object]:
    """Every member's header, checked against the limits and tarfile's 'data' filter; the inner manifest."""
    members: list[tarfile.TarInfo] = []
    total, inner = 0, None
    while (member := tar.next()) is not None:
        if len(members) >= max_members:
            raise InvalidInput(
                f"model.tar.gz holds more than {max_members:,} members; nothing was "
                "extracted (pass max_members= to allow more)"
            )
        try:
            tarfile.data_filter(member, str(model_dir))
        except tarfile.FilterError as exc:
            raise InvalidInput(
                f"model.tar.gz member {member.name!r} is refused ({exc}); nothing was extracted"
            ) from None
        if member.isreg():
            total += member.size
            if total > max_bytes:
                raise InvalidInput(
                    f"model.tar.gz would unpack to more than {max_bytes:,} bytes (member {member.name!r} "
                    f"alone announces {member.size:,}); nothing was extracted (pass max_bytes= to allow more)"
                )
            if member.name == MANIFEST_NAME and member.size <= _MAX_INNER_MANIFEST:
                handle = tar.extractfile(member)  # a regular member's: never None
                try:
                    inner = json.loads(handle.read()) if handle is not None else None
                except (UnicodeDecodeError, json.JSONDecodeError):
                    inner = None  # the adapter refuses it with its own message
        members.append(member)
    return members, inner


def extract_model(
    tarball: str | Path,
    model_dir: str | Path,
    *,
    max_bytes: int = MAX_EXTRACT_BYTES,
    max_members: int = MAX_EXTRACT_MEMBERS,
    manifest: dict[str, Any] | None = None,
) -> Path:
    """Unpack model.tar.gz the way SageMaker fills /opt/ml/model, within limits.

    Every header is read first: more than ``max_members`` members, more than ``max_bytes`` of file
    data, a member the 'data' filter refuses (absolute, '..', links leading out, devices), or a file
    whose size differs from what the manifest announces (``manifest``, else the one inside the
    tarball) is refused before anything is written and before an existing ``model_dir`` is removed.
    """
    model_dir = Path(model_dir)
    with tarfile.open(tarball, "r:gz") as tar:
        members, inner = _scan(tar, model_dir, max_bytes, max_members)
        announced = _announced_sizes(manifest if manifest is not None else inner)
        for member in members:
            sizes = announced.get(member.name)
            if member.isreg() and sizes and sizes != {member.size}:
                raise InvalidInput(
                    f"model.tar.gz member {member.name!r} is {member.size:,} bytes, but {MANIFEST_NAME} "
                    f"announces {', '.join(f'{s:,}' for s in sorted(sizes))}; nothing was extracted: "
                    "package the model again"
                )
        if model_dir.exists():
            shutil.rmtree(model_dir)
        model_dir.mkdir(parents=True)
        try:
            for member in members:
                tar.extract(member, model_dir, filter="data")
        except BaseException:
            shutil.rmtree(model_dir, ignore_errors=True)
            raise
    return model_dir

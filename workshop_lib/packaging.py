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

``parse_manifest`` holds the rules a manifest must follow whichever side reads it (the
adapter keeps the same rules in its own room): one entry per path, plain relative paths
that stay inside the model directory, sizes non-negative integers, sha256 64 hex digits.
``extract_model`` unpacks under a cap on bytes and members, checked before anything is written.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import platform
import re
import shutil
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .errors import WorkshopError
from .models import ModelSpec

MANIFEST_NAME = "model-manifest.json"
MANIFEST_FORMAT = 1
CALIBRATION_NAME = "calibration.json"  # at the archive root, next to the GGUF, where the adapter looks
CALIBRATION_ROLE = "calibration"
_MAX_CALIBRATION_BYTES = 1024 * 1024


class ChecksumMismatch(WorkshopError, RuntimeError):
    """A file differs from the pinned size or sha256: nothing is packaged."""


def sha256_of(path: str | Path, chunk: int = 8 * 1024 * 1024) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


class CalibrationRefused(WorkshopError, ValueError):
    """A calibration file that cannot go into this package (unreadable, or fitted for another GGUF)."""


def check_calibration(data: bytes, gguf_sha256: str, where: str = CALIBRATION_NAME) -> dict:
    """The calibration document in ``data``, checked to be fitted for the GGUF with ``gguf_sha256``. Pure."""
    if len(data) > _MAX_CALIBRATION_BYTES:
        raise CalibrationRefused(f"{where} is {len(data):,} bytes; a calibration file is a few kB")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CalibrationRefused(f"{where} is not JSON ({exc}); write it with `workshop calibrate`") from None
    fit_for = doc.get("fit_for") if isinstance(doc, dict) else None
    fitted = fit_for.get("gguf_sha256") if isinstance(fit_for, dict) else None
    if not isinstance(fitted, str) or not _SHA256.fullmatch(fitted):
        raise CalibrationRefused(f"{where} has no fit_for.gguf_sha256; write it with `workshop calibrate`")
    if fitted.lower() != gguf_sha256.lower():
        raise CalibrationRefused(
            f"{where} was fitted for the GGUF with sha256 {fitted.lower()}, but the package's GGUF has sha256 "
            f"{gguf_sha256.lower()}; the adapter would refuse to start. Fit it again against an endpoint serving "
            "this model (`workshop calibrate`), or package without it")
    return doc


def calibration_entry(size: int, sha256: str) -> dict:
    """The manifest's entry of a packaged calibration file."""
    return {"path": CALIBRATION_NAME, "role": CALIBRATION_ROLE, "size": size, "sha256": sha256}


def build_manifest(spec: ModelSpec, measured: dict[str, tuple[int, str]], *, build_id: str,
                   where: str, tools: dict | None = None, now: datetime.datetime | None = None,
                   calibration: tuple[int, str] | None = None) -> dict:
    """The manifest for ``spec`` given each file's measured (size, sha256), and the calibration file's
    (size, sha256) when one is packaged. Pure."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    files = []
    for f in spec.files:
        size, digest = measured[f.path]
        files.append({"path": f.path, "role": f.role, "repo": f.repo, "revision": f.revision,
                      "size": size, "sha256": digest})
    if calibration is not None:
        files.append(calibration_entry(*calibration))
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


def package_local(spec: ModelSpec, sources: dict[str, Path], out_dir: str | Path, *,
                  calibration: str | Path | None = None) -> LocalPackage:
    """Check the files against their pins, then write model.tar.gz and the manifest to out_dir; with
    ``calibration`` (a calibration.json fitted for this GGUF) also that file, next to the GGUF."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if spec.gguf.path == CALIBRATION_NAME or any(f.path == CALIBRATION_NAME for f in spec.files):
        raise CalibrationRefused(f"{spec.name} already has a file named {CALIBRATION_NAME}")
    measured = {name: (Path(p).stat().st_size, sha256_of(p)) for name, p in sources.items()}
    verify_pins(spec, measured)
    calibrated = None
    if calibration is not None:
        data = Path(calibration).read_bytes()
        check_calibration(data, measured[spec.gguf.path][1], str(calibration))
        calibrated = (len(data), hashlib.sha256(data).hexdigest())
    manifest = build_manifest(
        spec, measured, build_id=f"local-{datetime.datetime.now():%Y%m%d%H%M%S}", where="local",
        tools={"python": platform.python_version(), "packager": "workshop_lib.packaging"}, calibration=calibrated,
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


# ---- reading a manifest: the rules both sides follow ------------------------------------------

WORKSHOP_SHAPE = "workshop"
SAMPLE_SHAPE = "published sample"
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


class ManifestInvalid(WorkshopError, ValueError):
    """A manifest breaks a rule (shape, duplicate path, path leaving the directory); nothing is trusted."""


@dataclass(frozen=True)
class ListedFile:
    """One file a manifest vouches for; ``size`` is None where the shape records none."""

    path: str
    sha256: str
    size: int | None = None
    repo: str | None = None
    revision: str | None = None
    role: str | None = None
    label: str = ""


@dataclass(frozen=True)
class ManifestView:
    shape: str
    files: tuple[ListedFile, ...]
    gguf: ListedFile  # the workshop's: the entry of model.file (else the one with role gguf); the sample's: gguf
    tokenizer: dict | None = None  # the sample's {"repo", "revision"}
    raw: dict = field(default_factory=dict, compare=False)

    def describe(self) -> str:
        if self.shape == SAMPLE_SHAPE:
            return ("the published sample's shape: the GGUF's sha256 is recorded; its tokenizer files are not "
                    "listed with digests (the adapter reads the tokenizer from the GGUF)")
        return f"the workshop's shape: {len(self.files)} files listed with size and sha256"


def _plain_path(value, label: str) -> str:
    if not isinstance(value, str) or not value:
        raise ManifestInvalid(f"{MANIFEST_NAME} {label}: the path must be a non-empty string, not {value!r}")
    if "\x00" in value or "\\" in value:
        raise ManifestInvalid(f"{MANIFEST_NAME} {label}: the path {value!r} holds a NUL or a backslash")
    pure = PurePosixPath(value)
    if pure.is_absolute():
        raise ManifestInvalid(f"{MANIFEST_NAME} {label}: the path {value!r} is absolute; paths are relative "
                              "to the model directory")
    if ".." in pure.parts:
        raise ManifestInvalid(f"{MANIFEST_NAME} {label}: the path {value!r} leaves the model directory ('..')")
    if pure.as_posix() != value:
        raise ManifestInvalid(f"{MANIFEST_NAME} {label}: the path {value!r} is not written plainly "
                              f"(write {pure.as_posix()!r})")
    return value


def _sha256(value, label: str) -> str:
    if not isinstance(value, str) or not _SHA256.fullmatch(value):
        raise ManifestInvalid(f"{MANIFEST_NAME} {label}: sha256 must be 64 hexadecimal digits, not {value!r}")
    return value.lower()


def _text(entry: dict, key: str, label: str) -> str | None:
    value = entry.get(key)
    if value is not None and not isinstance(value, str):
        raise ManifestInvalid(f"{MANIFEST_NAME} {label}: {key!r} must be a string, not {value!r}")
    return value


def _workshop_files(files: list) -> tuple[ListedFile, ...]:
    out: list[ListedFile] = []
    seen: dict[str, str] = {}
    for index, entry in enumerate(files):
        label = f"files[{index}]"
        if not isinstance(entry, dict):
            raise ManifestInvalid(f"{MANIFEST_NAME} {label} is not an object ({entry!r})")
        path = _plain_path(entry.get("path"), label)
        if path in seen:
            raise ManifestInvalid(f"{MANIFEST_NAME} lists {path!r} twice ({seen[path]} and {label}); one entry "
                                  "per file, or which one holds is ambiguous")
        seen[path] = label
        label = f"{label} ({path!r})"
        size = entry.get("size")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ManifestInvalid(f"{MANIFEST_NAME} {label}: size must be a non-negative integer (bytes), "
                                  f"not {size!r}")
        out.append(ListedFile(path, _sha256(entry.get("sha256"), label), size, _text(entry, "repo", label),
                              _text(entry, "revision", label), _text(entry, "role", label), label))
    if not out:
        raise ManifestInvalid(f"{MANIFEST_NAME} has an empty 'files' list")
    return tuple(out)


def parse_manifest(manifest) -> ManifestView:
    """The manifest's entries, each checked against the rules above, in either shape. Pure."""
    if not isinstance(manifest, dict):
        raise ManifestInvalid(f"{MANIFEST_NAME} is not a JSON object")
    if "files" in manifest and "gguf" in manifest:
        raise ManifestInvalid(f"{MANIFEST_NAME} has both a 'files' list (the workshop's shape) and a 'gguf' "
                              "object (the published sample's); which one holds is ambiguous")
    if "gguf" in manifest:
        gguf = manifest["gguf"]
        if not isinstance(gguf, dict):
            raise ManifestInvalid(f"{MANIFEST_NAME} 'gguf' is not an object ({gguf!r})")
        path = _plain_path(gguf.get("file"), "gguf.file")
        label = f"gguf ({path!r})"
        entry = ListedFile(path, _sha256(gguf.get("sha256"), label), None, _text(gguf, "repo", label),
                           _text(gguf, "revision", label), "gguf", label)
        tokenizer = manifest.get("tokenizer")
        if tokenizer is not None:
            if not isinstance(tokenizer, dict):
                raise ManifestInvalid(f"{MANIFEST_NAME} 'tokenizer' is not an object ({tokenizer!r})")
            for key in ("repo", "revision"):
                _text(tokenizer, key, "tokenizer")
        return ManifestView(SAMPLE_SHAPE, (entry,), entry, tokenizer, manifest)
    if not isinstance(manifest.get("files"), list):
        raise ManifestInvalid(f"{MANIFEST_NAME} has neither a 'files' list (the workshop's shape) nor a 'gguf' "
                              "object (the published sample's)")
    files = _workshop_files(manifest["files"])
    model = manifest.get("model") if isinstance(manifest.get("model"), dict) else {}
    named = model.get("file")
    gguf = next((f for f in files if f.path == named), None) if named else None
    gguf = gguf or next((f for f in files if f.role == "gguf"), None) or files[0]
    return ManifestView(WORKSHOP_SHAPE, files, gguf, None, manifest)


# ---- extracting with limits ---------------------------------------------------------------------

MAX_EXTRACT_BYTES = 16 * 1024 ** 3  # well above the pinned model (about 3 GB) and its tokenizer
MAX_EXTRACT_MEMBERS = 10_000
_MAX_INNER_MANIFEST = 1024 * 1024


class ExtractionRefused(WorkshopError, RuntimeError):
    """model.tar.gz holds more than the limits allow, or not what its manifest announces; nothing is written."""


def _announced_sizes(manifest) -> dict[str, set[int]]:
    """Sizes by path from a manifest's 'files' list, as far as it is readable (the adapter judges the rest)."""
    sizes: dict[str, set[int]] = {}
    files = manifest.get("files") if isinstance(manifest, dict) else None
    for entry in files if isinstance(files, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("path"), str) and type(entry.get("size")) is int:
            sizes.setdefault(entry["path"], set()).add(entry["size"])
    return sizes


def _scan(tar: tarfile.TarFile, model_dir: Path, max_bytes: int, max_members: int) -> tuple[list, dict | None]:
    """Every member's header, checked against the limits and tarfile's 'data' filter; the inner manifest."""
    members, total, inner = [], 0, None
    while (member := tar.next()) is not None:
        if len(members) >= max_members:
            raise ExtractionRefused(f"model.tar.gz holds more than {max_members:,} members; nothing was "
                                    "extracted (pass max_members= to allow more)")
        try:
            tarfile.data_filter(member, str(model_dir))
        except tarfile.FilterError as exc:
            raise ExtractionRefused(f"model.tar.gz member {member.name!r} is refused ({exc}); nothing was "
                                    "extracted") from None
        if member.isreg():
            total += member.size
            if total > max_bytes:
                raise ExtractionRefused(
                    f"model.tar.gz would unpack to more than {max_bytes:,} bytes (member {member.name!r} "
                    f"alone announces {member.size:,}); nothing was extracted (pass max_bytes= to allow more)")
            if member.name == MANIFEST_NAME and member.size <= _MAX_INNER_MANIFEST:
                try:
                    inner = json.loads(tar.extractfile(member).read())
                except (UnicodeDecodeError, json.JSONDecodeError):
                    inner = None  # the adapter refuses it with its own message
        members.append(member)
    return members, inner


def extract_model(tarball: str | Path, model_dir: str | Path, *, max_bytes: int = MAX_EXTRACT_BYTES,
                  max_members: int = MAX_EXTRACT_MEMBERS, manifest: dict | None = None) -> Path:
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
                raise ExtractionRefused(
                    f"model.tar.gz member {member.name!r} is {member.size:,} bytes, but {MANIFEST_NAME} "
                    f"announces {', '.join(f'{s:,}' for s in sorted(sizes))}; nothing was extracted: "
                    "package the model again")
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

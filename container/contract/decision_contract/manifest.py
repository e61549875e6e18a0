"""``model-manifest.json``: what a model package vouches for, in either of its two shapes.

* the workshop's (``format`` 1)::

    {"format": 1,
     "model": {"name", "repo", "revision", "file", "quantization", "license"},
     "files": [{"path", "role", "repo", "revision", "size", "sha256"}, ...],
     "tools": {...}, "build": {"id", "time", "where"}}

  every file listed with its size and sha256; a packaged ``calibration.json`` is one of them
  (``role: "calibration"``, no repo or revision);
* the published sample's: ``{"gguf": {"repo", "revision", "file", "sha256"}, "tokenizer": {"repo",
  "revision"}}``, the GGUF at the root and the tokenizer files under ``tokenizer/``, which carry no
  digest there.

The rules every entry follows, whichever room reads it: one entry per path; a plain relative path
that stays inside the model directory (no ``..``, no leading ``/``, no backslash or NUL, written as
its normal form); a size that is a non-negative integer; a sha256 of 64 hex digits. ``parse`` checks
them all before anything on disk is opened, and is pure.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

MANIFEST_NAME = "model-manifest.json"
FORMAT = 1
CALIBRATION_NAME = "calibration.json"  # next to the GGUF (or at the top of the model directory)
CALIBRATION_ROLE = "calibration"
TOKENIZER_DIR = "tokenizer"  # where the published sample puts its tokenizer files
WORKSHOP_SHAPE = "workshop"
SAMPLE_SHAPE = "published sample"

_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
_REBUILD = "rebuild the model package"


class ManifestError(ValueError):
    """A manifest breaks a rule; nothing it lists is trusted. The message names the entry."""


@dataclass(frozen=True)
class ListedFile:
    """One file the manifest vouches for; ``size`` is None where the shape records none."""

    path: str
    sha256: str  # lower case
    size: int | None = None
    repo: str | None = None
    revision: str | None = None
    role: str | None = None
    label: str = ""  # how messages name the entry, e.g. "files[2] ('m.gguf')"

    def describe(self) -> dict[str, Any]:
        out = {
            "path": self.path,
            "size": self.size,
            "sha256": self.sha256,
            "repo": self.repo,
            "revision": self.revision,
        }
        return {k: v for k, v in out.items() if v is not None}


@dataclass(frozen=True)
class Manifest:
    shape: str  # WORKSHOP_SHAPE or SAMPLE_SHAPE
    files: tuple[ListedFile, ...]
    gguf: ListedFile  # the workshop's: the entry of model.file (else role gguf, else the first); the sample's: gguf
    source: dict[str, Any]  # where the model comes from: repo, revision, file (and name etc. in the workshop's shape)
    tokenizer: dict[str, Any] | None = None  # the sample's {"repo", "revision"}
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def describe(self) -> str:
        if self.shape == SAMPLE_SHAPE:
            return (
                "the published sample's shape: the GGUF's sha256 is recorded; its tokenizer files are not "
                "listed with digests (the adapter reads the tokenizer from the GGUF)"
            )
        return f"the workshop's shape: {len(self.files)} files listed with size and sha256"


def sha256_of(path: str | Path, chunk: int = 8 * 1024 * 1024) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def calibration_entry(size: int, sha256: str) -> dict[str, Any]:
    """The workshop manifest's entry of a packaged calibration file."""
    return {"path": CALIBRATION_NAME, "role": CALIBRATION_ROLE, "size": size, "sha256": sha256}


def _refuse(label: str, what: str) -> ManifestError:
    return ManifestError(f"{MANIFEST_NAME} {label}: {what}")


def relative_path(value: object, label: str) -> str:
    """A manifest path as given, refused unless it is a plain relative path inside the directory."""
    if not isinstance(value, str) or not value:
        raise _refuse(label, f"the path must be a non-empty string, not {value!r}; {_REBUILD}")
    if "\x00" in value or "\\" in value:
        raise _refuse(label, f"the path {value!r} holds a NUL or a backslash; write it with '/' separators")
    pure = PurePosixPath(value)
    if pure.is_absolute():
        raise _refuse(label, f"the path {value!r} is absolute; manifest paths are relative to the model directory")
    if ".." in pure.parts:
        raise _refuse(
            label, f"the path {value!r} leaves the model directory ('..'); manifest paths name files inside it"
        )
    if pure.as_posix() != value:
        raise _refuse(label, f"the path {value!r} is not written plainly; write it as {pure.as_posix()!r}")
    return value


def _digest(value: object, label: str) -> str:
    if not isinstance(value, str) or not _SHA256.fullmatch(value):
        raise _refuse(label, f"sha256 must be 64 hexadecimal digits, not {value!r}; {_REBUILD}")
    return value.lower()


def _text(entry: dict[str, Any], key: str, label: str) -> str | None:
    value = entry.get(key)
    if value is not None and not isinstance(value, str):
        raise _refuse(label, f"{key!r} must be a string, not {value!r}")
    return value


def _workshop_files(files: list[Any]) -> tuple[ListedFile, ...]:
    out: list[ListedFile] = []
    seen: dict[str, str] = {}
    for index, entry in enumerate(files):
        label = f"files[{index}]"
        if not isinstance(entry, dict):
            raise ManifestError(f"{MANIFEST_NAME} {label} is not an object ({entry!r}); {_REBUILD}")
        path = relative_path(entry.get("path"), label)
        if path in seen:
            raise ManifestError(
                f"{MANIFEST_NAME} lists {path!r} twice ({seen[path]} and {label}); one entry per "
                f"file, or which one holds is ambiguous: {_REBUILD}"
            )
        seen[path] = label
        label = f"{label} ({path!r})"
        size = entry.get("size")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise _refuse(label, f"size must be a non-negative integer (bytes), not {size!r}; {_REBUILD}")
        out.append(
            ListedFile(
                path,
                _digest(entry.get("sha256"), label),
                size,
                _text(entry, "repo", label),
                _text(entry, "revision", label),
                _text(entry, "role", label),
                label,
            )
        )
    if not out:
        raise ManifestError(f"{MANIFEST_NAME} has an empty 'files' list; {_REBUILD}")
    return tuple(out)


def _sample(manifest: dict[str, Any]) -> Manifest:
    gguf = manifest["gguf"]
    if not isinstance(gguf, dict):
        raise ManifestError(f"{MANIFEST_NAME} 'gguf' is not an object ({gguf!r}); {_REBUILD}")
    path = relative_path(gguf.get("file"), "gguf.file")
    label = f"gguf ({path!r})"
    entry = ListedFile(
        path,
        _digest(gguf.get("sha256"), label),
        None,
        _text(gguf, "repo", label),
        _text(gguf, "revision", label),
        "gguf",
        label,
    )
    tokenizer = manifest.get("tokenizer")
    if tokenizer is not None:
        if not isinstance(tokenizer, dict):
            raise ManifestError(f"{MANIFEST_NAME} 'tokenizer' is not an object ({tokenizer!r}); {_REBUILD}")
        for key in ("repo", "revision"):
            _text(tokenizer, key, "tokenizer")
    source = {k: v for k, v in (("repo", entry.repo), ("revision", entry.revision), ("file", path)) if v}
    return Manifest(SAMPLE_SHAPE, (entry,), entry, source, tokenizer, manifest)


def parse(manifest: object) -> Manifest:
    """The manifest's entries, every one checked against the rules; nothing on disk is touched."""
    if not isinstance(manifest, dict):
        raise ManifestError(f"{MANIFEST_NAME} is not a JSON object; {_REBUILD}")
    if "files" in manifest and "gguf" in manifest:
        raise ManifestError(
            f"{MANIFEST_NAME} has both a 'files' list (the workshop's shape) and a 'gguf' object (the published "
            f"sample's); which one holds is ambiguous: {_REBUILD}"
        )
    if "gguf" in manifest:
        return _sample(manifest)
    if not isinstance(manifest.get("files"), list):
        raise ManifestError(
            f"{MANIFEST_NAME} has neither a 'files' list (the workshop's shape) nor a 'gguf' object (the "
            f"published sample's); {_REBUILD}"
        )
    files = _workshop_files(manifest["files"])
    model = manifest.get("model")
    if not isinstance(model, dict):
        model = {}
    named = model.get("file")
    gguf = next((f for f in files if f.path == named), None) if named else None
    gguf = gguf or next((f for f in files if f.role == "gguf"), None) or files[0]
    return Manifest(WORKSHOP_SHAPE, files, gguf, dict(model), None, manifest)

"""Unpacking model.tar.gz within limits (packaging.extract_model), and the rehearsal's download cache.

The tarballs are crafted here: a member whose header announces gigabytes behind a few bytes of data
(a tarball of a few hundred bytes that would write 2 GiB), many tiny members, sizes that differ from
the manifest's, and members tarfile's 'data' filter refuses. Each refusal must come before anything
is written, so an existing model directory survives it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from workshop_lib.errors import InvalidInput
from workshop_lib.local.model_cache import download_and_extract
from workshop_lib.packaging import MANIFEST_NAME, MAX_EXTRACT_BYTES, extract_model

GIB = 1024**3


def _tarball(
    path: Path,
    members: list[tuple[str, bytes]],
    *,
    lie: dict[str, int] | None = None,
    kind: dict[str, bytes] | None = None,
) -> Path:
    """A gzipped tar of ``members``; ``lie`` gives a member a header size its data does not have (the
    stream ends after the header: nothing past it is needed to refuse); ``kind`` sets a member's type."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if kind and name in kind:
                info.type = kind[name]
                info.linkname = "/etc/passwd"
                info.size = 0
                tar.addfile(info)
            elif lie and name in lie:
                info.size = lie[name]
                raw.write(info.tobuf(tarfile.PAX_FORMAT))
                raw.write(data)
                break
            else:
                tar.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(raw.getvalue(), compresslevel=1))
    return path


def _manifest(**sizes: int) -> bytes:
    return json.dumps(
        {"files": [{"path": p.replace("_", "."), "size": s, "sha256": "0" * 64} for p, s in sizes.items()]}
    ).encode()


@pytest.fixture
def existing(tmp_path) -> Path:
    """A model directory from an earlier extraction: a refusal must leave it as it was."""
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "old.gguf").write_bytes(b"GGUF old")
    return model_dir


def _untouched(model_dir: Path) -> bool:
    return sorted(p.name for p in model_dir.iterdir()) == ["old.gguf"]


def test_a_small_tarball_announcing_2_gib_is_refused_before_writing(tmp_path, existing):
    tarball = _tarball(tmp_path / "bomb.tar.gz", [("m.gguf", b"\0" * 512)], lie={"m.gguf": 2 * GIB})
    assert tarball.stat().st_size < 2 * 1024 * 1024
    with pytest.raises(
        InvalidInput,
        match=r"more than 1,073,741,824 bytes \(member 'm\.gguf' alone "
        r"announces 2,147,483,648\); nothing was extracted",
    ):
        extract_model(tarball, existing, max_bytes=GIB)
    assert _untouched(existing)


def test_the_default_cap_sits_above_the_pinned_model_and_is_enforced(tmp_path, existing):
    from workshop_lib.models import PINNED_MODEL

    assert 4 * PINNED_MODEL.gguf.size <= MAX_EXTRACT_BYTES
    tarball = _tarball(tmp_path / "bomb.tar.gz", [("m.gguf", b"")], lie={"m.gguf": MAX_EXTRACT_BYTES + 1})
    with pytest.raises(InvalidInput, match="pass max_bytes= to allow more"):
        extract_model(tarball, existing)
    assert _untouched(existing)


def test_the_cap_counts_every_member_together(tmp_path, existing):
    tarball = _tarball(tmp_path / "many.tar.gz", [(f"part{i}.bin", b"x" * 400) for i in range(5)])
    with pytest.raises(InvalidInput, match="more than 1,500 bytes"):
        extract_model(tarball, existing, max_bytes=1500)
    assert _untouched(existing)
    assert sorted(p.name for p in extract_model(tarball, existing, max_bytes=2000).iterdir()) == [
        f"part{i}.bin" for i in range(5)
    ]


def test_too_many_members_are_refused(tmp_path, existing):
    tarball = _tarball(tmp_path / "many.tar.gz", [(f"f{i}", b"") for i in range(11)])
    with pytest.raises(InvalidInput, match="more than 10 members"):
        extract_model(tarball, existing, max_members=10)
    assert _untouched(existing)


def test_a_size_other_than_the_manifest_announces_is_refused_even_when_the_manifest_comes_last(tmp_path, existing):
    # package_local writes the GGUF first and the manifest last: all headers are read before any write.
    tarball = _tarball(tmp_path / "m.tar.gz", [("m.gguf", b"GGUF" + b"\0" * 60), (MANIFEST_NAME, _manifest(m_gguf=10))])
    with pytest.raises(InvalidInput, match=r"'m\.gguf' is 64 bytes, but model-manifest\.json announces 10"):
        extract_model(tarball, existing)
    assert _untouched(existing)


def test_a_manifest_passed_in_is_checked_instead_of_the_inner_one(tmp_path, existing):
    tarball = _tarball(tmp_path / "m.tar.gz", [("m.gguf", b"GGUF" + b"\0" * 60), (MANIFEST_NAME, _manifest(m_gguf=64))])
    with pytest.raises(InvalidInput, match="announces 65"):
        extract_model(tarball, existing, manifest=json.loads(_manifest(m_gguf=65)))
    assert _untouched(existing)
    assert (extract_model(tarball, existing) / "m.gguf").stat().st_size == 64  # the inner one agrees


@pytest.mark.parametrize(
    "members, kind, needle",
    [
        ([("../escape.txt", b"x")], None, r"'\.\./escape\.txt' is refused"),
        ([("link", b"")], {"link": tarfile.SYMTYPE}, r"'link' is refused"),
        ([("dev", b"")], {"dev": tarfile.CHRTYPE}, r"'dev' is refused"),
    ],
    ids=["dotdot", "symlink-out", "device"],
)
def test_members_the_data_filter_refuses_stop_everything_before_writing(tmp_path, existing, members, kind, needle):
    tarball = _tarball(tmp_path / "m.tar.gz", [("ok.txt", b"fine"), *members], kind=kind)
    with pytest.raises(InvalidInput, match=needle):
        extract_model(tarball, existing)
    assert _untouched(existing) and not (tmp_path / "escape.txt").exists()


def test_an_absolute_member_name_lands_inside_the_model_directory(tmp_path, existing):
    # tarfile's 'data' filter strips the leading '/' instead of refusing: the file stays inside.
    model_dir = extract_model(_tarball(tmp_path / "m.tar.gz", [("/abs-test-file.txt", b"x")]), existing)
    assert (model_dir / "abs-test-file.txt").read_bytes() == b"x" and not Path("/abs-test-file.txt").exists()


# ---- the rehearsal's cache: no remote value in a path ------------------------------------------------


class HostileS3Fake:
    """Stands in for an S3 endpoint that answers with hostile values (moto returns honest ETags)."""

    def __init__(self, tarball: Path, etag: str, length: int | None = None):
        self.tarball, self.etag = tarball, etag
        self.length = tarball.stat().st_size if length is None else length
        self.downloads = 0

    def head_object(self, Bucket, Key):
        return {"ETag": self.etag, "ContentLength": self.length}

    def download_file(self, bucket, key, filename):
        self.downloads += 1
        Path(filename).write_bytes(self.tarball.read_bytes())


URL = "s3://bucket/decision-workshop/model/model.tar.gz"


def test_the_cache_folder_is_a_digest_of_url_and_etag_never_the_etag(tmp_path):
    tarball = _tarball(tmp_path / "m.tar.gz", [("m.gguf", b"GGUF" + b"\0" * 12)])
    home = tmp_path / "home"
    etag = '"../../../outside"'
    s3 = HostileS3Fake(tarball, etag)
    model_dir = download_and_extract(home, s3, URL)
    expected = hashlib.sha256(f"{URL}\n{etag}".encode()).hexdigest()[:32]
    assert model_dir == home / "models" / expected / "model" and (model_dir / "m.gguf").is_file()
    assert not (tmp_path / "outside").exists() and sorted(p.name for p in (home / "models").iterdir()) == [expected]
    assert download_and_extract(home, s3, URL) == model_dir and s3.downloads == 1  # cached
    s3.etag = '"v2"'  # a new object version is fetched again, into its own folder
    assert download_and_extract(home, s3, URL) != model_dir and s3.downloads == 2


def test_the_rehearsal_keeps_the_limits(tmp_path):
    tarball = _tarball(tmp_path / "m.tar.gz", [("m.gguf", b"")], lie={"m.gguf": 2 * GIB})
    home = tmp_path / "home"
    with pytest.raises(InvalidInput, match="nothing was extracted"):
        download_and_extract(home, HostileS3Fake(tarball, '"a"'), URL, max_bytes=GIB)
    folder = next((home / "models").iterdir())
    assert sorted(p.name for p in folder.iterdir()) == []  # no tarball left, no .complete, no model
    too_big = HostileS3Fake(tarball, '"b"', length=GIB + 1)
    with pytest.raises(InvalidInput, match="nothing was downloaded"):
        download_and_extract(home, too_big, URL, max_bytes=GIB)
    assert too_big.downloads == 0

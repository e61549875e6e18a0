"""decision_adapter.model_files: finding the GGUF, its header, and the manifest's sizes and digests.

The packaged model directory is viewed through hard links (tests.support.model_dir_view): only the
manifest, or a GGUF cut short, is a file of the test's own; the 98 MB GGUF is never copied. The
manifest rules (one entry per path, paths inside the directory, well-formed entries, the file loaded
is the file verified) run on small files of the tests' own.
"""

import hashlib
import json
import logging
import os
import shutil

import pytest

from decision_adapter import model_files
from decision_adapter.model_files import ModelFilesError, find_gguf, locate_model
from tests.support import model_dir_view, partial_copy


def test_first_gguf_alphabetically_then_subfolders(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.gguf").write_bytes(b"x")
    assert find_gguf(tmp_path).name == "a.gguf"
    (tmp_path / "b.gguf").write_bytes(b"x")
    (tmp_path / "c.gguf").write_bytes(b"x")
    assert find_gguf(tmp_path).name == "b.gguf"  # root beats subfolders
    assert find_gguf(tmp_path, "c.gguf").name == "c.gguf"  # SM_LLAMA_CPP_MODEL wins


@pytest.mark.parametrize(
    "setup, needle",
    [
        (lambda d: None, "no \\*.gguf"),
        (lambda d: shutil.rmtree(d), "does not exist"),
    ],
)
def test_missing_model_is_explained(tmp_path, setup, needle):
    setup(tmp_path)
    with pytest.raises(ModelFilesError, match=needle):
        find_gguf(tmp_path)


def test_explicit_model_must_exist(tmp_path):
    with pytest.raises(ModelFilesError, match="SM_LLAMA_CPP_MODEL"):
        find_gguf(tmp_path, "nope.gguf")


def test_manifest_verifies_size_and_digest(model_dir, tmp_path):
    copy = model_dir_view(model_dir, tmp_path / "m")
    ok = locate_model(copy)
    manifest = json.loads((copy / "model-manifest.json").read_text())
    assert ok.sha256 == manifest["files"][0]["sha256"] and ok.manifest is not None

    manifest["files"][0]["sha256"] = "0" * 64
    (copy / "model-manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ModelFilesError) as raised:
        locate_model(copy)
    message = str(raised.value)
    assert ok.gguf.name in message and "0" * 64 in message and ok.sha256 in message


def test_truncated_gguf_is_caught_by_size(model_dir, tmp_path):
    copy = model_dir_view(model_dir, tmp_path / "m")
    partial_copy(next(model_dir.glob("*.gguf")), copy / next(copy.glob("*.gguf")).name, 1000)
    with pytest.raises(ModelFilesError, match="size 1000 bytes"):
        locate_model(copy)


def test_gguf_not_in_manifest_is_refused(model_dir, tmp_path):
    copy = model_dir_view(model_dir, tmp_path / "m")
    (copy / "AAA.gguf").write_bytes(b"GGUF")  # sorts before SmolLM2...
    with pytest.raises(ModelFilesError, match="not listed"):
        locate_model(copy)


# ---- a manifest that cannot be bent (issue #25) ---------------------------------------------------
# Small files of the tests' own stand in for the GGUF: the checks run before llama.cpp sees a byte.

GGUF = b"GGUF" + bytes(range(256)) * 8
OTHER = b"GGUF" + b"tampered" * 100


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _entry(path: str, data: bytes, **extra) -> dict:
    return {
        "path": path,
        "role": "gguf",
        "repo": "test/repo",
        "revision": "r1",
        "size": len(data),
        "sha256": _sha(data),
        **extra,
    }


def _model_dir(root, files: dict, manifest) -> object:
    root.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    if manifest is not None:
        text = manifest if isinstance(manifest, str) else json.dumps(manifest)
        (root / "model-manifest.json").write_text(text)
    return root


@pytest.fixture
def nothing_opened(monkeypatch):
    """Fails the test if a listed file is hashed or a GGUF header read (the refusal must come first)."""
    touched = []
    monkeypatch.setattr(model_files, "sha256_of", lambda path, *a, **k: touched.append(("hash", path)))
    monkeypatch.setattr(model_files, "check_gguf_header", lambda path: touched.append(("header", path)))
    return touched


def test_workshop_shape_is_verified_and_said(tmp_path, caplog):
    d = _model_dir(
        tmp_path / "m",
        {"m.gguf": GGUF, "tok.json": b"{}"},
        {
            "model": {"repo": "test/repo", "revision": "r1", "file": "m.gguf"},
            "files": [_entry("m.gguf", GGUF), _entry("tok.json", b"{}", role="tokenizer")],
        },
    )
    with caplog.at_level(logging.INFO, logger="decision_adapter.model_files"):
        got = locate_model(d)
    assert got.shape == model_files.WORKSHOP_SHAPE and got.sha256 == _sha(GGUF) and got.size == len(GGUF)
    assert got.entry == {
        "path": "m.gguf",
        "size": len(GGUF),
        "sha256": _sha(GGUF),
        "repo": "test/repo",
        "revision": "r1",
    }
    assert "manifest: workshop shape, 2 files verified" in caplog.text


def test_two_entries_for_one_path_are_refused_whichever_comes_first(tmp_path, nothing_opened):
    # The issue's case: the first entry (the pinned digest) is what the client read, the last what was served.
    for order in ([_entry("m.gguf", GGUF), _entry("m.gguf", OTHER)], [_entry("m.gguf", OTHER), _entry("m.gguf", GGUF)]):
        d = _model_dir(tmp_path / f"m{len(nothing_opened)}-{order[0]['size']}", {"m.gguf": OTHER}, {"files": order})
        with pytest.raises(ModelFilesError, match=r"lists 'm\.gguf' twice \(files\[0\] and files\[1\]\)"):
            locate_model(d)
    assert nothing_opened == []


def test_sm_llama_cpp_model_outside_the_directory_is_refused_despite_a_same_named_listed_file(tmp_path):
    d = _model_dir(tmp_path / "m", {"m.gguf": GGUF}, {"files": [_entry("m.gguf", GGUF)]})
    outside = _model_dir(tmp_path / "elsewhere", {"m.gguf": OTHER}, None) / "m.gguf"
    assert locate_model(d).sha256 == _sha(GGUF)
    with pytest.raises(ModelFilesError, match=r"SM_LLAMA_CPP_MODEL: .*outside the model directory"):
        locate_model(d, str(outside))
    with pytest.raises(ModelFilesError, match="outside the model directory"):
        locate_model(d, "../elsewhere/m.gguf")


def test_the_loaded_file_is_matched_by_its_relative_path_not_its_base_name(tmp_path):
    d = _model_dir(tmp_path / "m", {"a/m.gguf": GGUF, "b/m.gguf": OTHER}, {"files": [_entry("a/m.gguf", GGUF)]})
    assert locate_model(d).gguf == (d / "a" / "m.gguf").resolve()  # the first */*.gguf, listed
    with pytest.raises(ModelFilesError, match=r"b/m\.gguf \(the GGUF to be served\) is not listed"):
        locate_model(d, "b/m.gguf")
    with pytest.raises(ModelFilesError, match=r"b/m\.gguf \(the GGUF to be served\) is not listed"):
        locate_model(d, str(d / "b" / "m.gguf"))  # absolute, inside: still not the file verified


@pytest.mark.parametrize(
    "bad_path, needle",
    [
        ("../../etc/passwd", r"files\[1\]: the path '\.\./\.\./etc/passwd' leaves the model directory"),
        ("/etc/passwd", r"files\[1\]: the path '/etc/passwd' is absolute"),
        ("sub/../../x", r"files\[1\]: .* leaves the model directory"),
        ("./m.gguf", r"files\[1\]: the path '\./m\.gguf' is not written plainly"),
        ("a//b", r"files\[1\]: the path 'a//b' is not written plainly"),
        ("a\\..\\b", r"files\[1\]: .*backslash"),
    ],
    ids=["dotdot", "absolute", "dotdot-inside", "dot", "double-slash", "backslash"],
)
def test_paths_that_leave_or_blur_the_directory_are_refused_before_anything_is_opened(
    tmp_path, nothing_opened, bad_path, needle
):
    d = _model_dir(tmp_path / "m", {"m.gguf": GGUF}, {"files": [_entry("m.gguf", GGUF), _entry(bad_path, b"x")]})
    with pytest.raises(ModelFilesError, match=needle):
        locate_model(d)
    assert nothing_opened == []


def test_a_symlink_leading_out_of_the_directory_is_refused_before_anything_is_opened(tmp_path, nothing_opened):
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"not for the adapter")
    d = _model_dir(
        tmp_path / "m", {"m.gguf": GGUF}, {"files": [_entry("m.gguf", GGUF), _entry("notes.txt", secret.read_bytes())]}
    )
    (d / "notes.txt").symlink_to(secret)
    with pytest.raises(ModelFilesError, match=r"files\[1\] \('notes\.txt'\): .*secret\.txt, outside the model"):
        locate_model(d)
    # A folder link leads out just as well.
    (d / "notes.txt").unlink()
    (tmp_path / "outside").mkdir()
    (d / "sub").symlink_to(tmp_path / "outside", target_is_directory=True)
    manifest = {"files": [_entry("m.gguf", GGUF), _entry("sub/x.json", b"{}")]}
    (tmp_path / "outside" / "x.json").write_bytes(b"{}")
    (d / "model-manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ModelFilesError, match=r"files\[1\] \('sub/x\.json'\): .*outside the model directory"):
        locate_model(d)
    assert nothing_opened == []


def test_the_gguf_itself_may_not_be_a_symlink_leading_out(tmp_path):
    real = _model_dir(tmp_path / "store", {"m.gguf": GGUF}, None) / "m.gguf"
    d = _model_dir(tmp_path / "m", {}, {"files": [_entry("m.gguf", GGUF)]})
    (d / "m.gguf").symlink_to(real)
    with pytest.raises(ModelFilesError, match=r"the GGUF found: .*outside the model directory"):
        locate_model(d)
    (d / "model-manifest.json").unlink()  # without a manifest too: only files inside are served
    with pytest.raises(ModelFilesError, match="outside the model directory"):
        locate_model(d)


def test_a_symlink_inside_the_directory_is_followed_and_the_real_file_reported(tmp_path):
    d = _model_dir(tmp_path / "m", {"weights/m.gguf": GGUF}, {"files": [_entry("weights/m.gguf", GGUF)]})
    (d / "current.gguf").symlink_to("weights/m.gguf")
    got = locate_model(d)
    assert got.gguf == (d / "weights" / "m.gguf").resolve() and got.entry["path"] == "weights/m.gguf"


def test_a_wrong_size_is_refused_before_hashing(tmp_path, nothing_opened):
    d = _model_dir(tmp_path / "m", {"m.gguf": GGUF}, {"files": [_entry("m.gguf", GGUF, size=len(GGUF) + 1)]})
    with pytest.raises(
        ModelFilesError,
        match=rf"m\.gguf: size {len(GGUF)} bytes does not match the manifest's "
        rf"{len(GGUF) + 1} bytes",
    ):
        locate_model(d)
    assert nothing_opened == []


@pytest.mark.parametrize(
    "bad, needle",
    [
        ("just a string", r"files\[1\] is not an object"),
        ({"path": 7, "size": 1, "sha256": "0" * 64}, r"files\[1\]: the path must be a non-empty string, not 7"),
        ({"path": "", "size": 1, "sha256": "0" * 64}, r"files\[1\]: the path must be a non-empty string"),
        ({"path": "t.json", "size": -1, "sha256": "0" * 64}, r"files\[1\] \('t\.json'\): size must be a non-negative"),
        ({"path": "t.json", "size": "12", "sha256": "0" * 64}, r"files\[1\] \('t\.json'\): size must be"),
        ({"path": "t.json", "size": True, "sha256": "0" * 64}, r"files\[1\] \('t\.json'\): size must be"),
        ({"path": "t.json", "sha256": "0" * 64}, r"files\[1\] \('t\.json'\): size must be .*not None"),
        ({"path": "t.json", "size": 1, "sha256": "abc"}, r"files\[1\] \('t\.json'\): sha256 must be 64 hex"),
        ({"path": "t.json", "size": 1, "sha256": "g" * 64}, r"files\[1\] \('t\.json'\): sha256 must be 64 hex"),
        ({"path": "t.json", "size": 1, "sha256": "0" * 64, "repo": 5}, r"files\[1\] \('t\.json'\): 'repo' must be"),
    ],
    ids=[
        "not-object",
        "path-int",
        "path-empty",
        "size-negative",
        "size-string",
        "size-bool",
        "size-missing",
        "sha-short",
        "sha-not-hex",
        "repo-int",
    ],
)
def test_malformed_entries_are_refused_naming_the_entry(tmp_path, nothing_opened, bad, needle):
    d = _model_dir(tmp_path / "m", {"m.gguf": GGUF}, {"files": [_entry("m.gguf", GGUF), bad]})
    with pytest.raises(ModelFilesError, match=needle):
        locate_model(d)
    assert nothing_opened == []


@pytest.mark.parametrize(
    "manifest, needle",
    [
        ("[1, 2]", "is not a JSON object"),
        ({"files": "m.gguf"}, "neither a 'files' list"),
        ({"files": []}, "empty 'files' list"),
        ({"files": [_entry("m.gguf", GGUF)], "gguf": {"file": "m.gguf", "sha256": _sha(GGUF)}}, "both a 'files' list"),
        ({"gguf": "m.gguf"}, "'gguf' is not an object"),
        ({"gguf": {"file": "../m.gguf", "sha256": _sha(GGUF)}}, r"gguf\.file: the path '\.\./m\.gguf' leaves"),
        ({"gguf": {"file": "m.gguf"}}, r"gguf \('m\.gguf'\): sha256 must be 64 hex"),
    ],
    ids=[
        "not-object",
        "files-not-list",
        "files-empty",
        "both-shapes",
        "gguf-not-object",
        "gguf-dotdot",
        "gguf-no-digest",
    ],
)
def test_malformed_manifests_are_refused(tmp_path, nothing_opened, manifest, needle):
    d = _model_dir(tmp_path / "m", {"m.gguf": GGUF}, manifest)
    with pytest.raises(ModelFilesError, match=needle):
        locate_model(d)
    assert nothing_opened == []


# ---- the published sample's shape (issue #24) -----------------------------------------------------


def _sample(gguf_file="m.gguf", digest=None, **extra) -> dict:
    return {
        "gguf": {"repo": "sample/repo", "revision": "s1", "file": gguf_file, "sha256": digest or _sha(GGUF)},
        "tokenizer": {"repo": "sample/tok", "revision": "t1"},
        **extra,
    }


def test_the_sample_shape_verifies_the_gguf_and_says_the_tokenizer_is_not_covered(tmp_path, caplog):
    d = _model_dir(
        tmp_path / "m",
        {"m.gguf": GGUF, "tokenizer/tokenizer.json": b"{}", "tokenizer/chat_template.jinja": b"x"},
        _sample(),
    )
    with caplog.at_level(logging.INFO, logger="decision_adapter.model_files"):
        got = locate_model(d)
    assert got.shape == model_files.SAMPLE_SHAPE and got.sha256 == _sha(GGUF)
    assert got.entry == {"path": "m.gguf", "sha256": _sha(GGUF), "repo": "sample/repo", "revision": "s1"}
    assert got.source == {"repo": "sample/repo", "revision": "s1", "file": "m.gguf"}
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("manifest:"))
    assert line.startswith(
        "manifest: published sample's shape, GGUF sha256 verified; tokenizer files not listed with digests"
    )
    assert "2 under tokenizer/ from sample/tok@t1 not covered" in line


def test_the_sample_shape_refuses_a_tampered_digest_and_an_unlisted_gguf(tmp_path):
    d = _model_dir(tmp_path / "m", {"m.gguf": GGUF, "x.gguf": OTHER}, _sample(digest="ab" * 32))
    with pytest.raises(ModelFilesError, match=rf"m\.gguf: sha256 mismatch: expected {'ab' * 32}, actual {_sha(GGUF)}"):
        locate_model(d, "m.gguf")
    (d / "model-manifest.json").write_text(json.dumps(_sample()))
    assert locate_model(d, "m.gguf").sha256 == _sha(GGUF)
    with pytest.raises(ModelFilesError, match=r"x\.gguf \(the GGUF to be served\) is not listed"):
        locate_model(d, "x.gguf")


def test_the_model_dir_view_holds_no_link_leading_out(model_dir, tmp_path):
    view = model_dir_view(model_dir, tmp_path / "m")
    assert not any(p.is_symlink() for p in view.iterdir())
    assert os.path.samefile(next(view.glob("*.gguf")), next(model_dir.glob("*.gguf")))  # not a copy

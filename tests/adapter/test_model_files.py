"""decision_adapter.model_files: finding the GGUF, its header, and the manifest's sizes and digests.

The packaged model directory is viewed through symlinks (tests.support.model_dir_view): only the
manifest, or a GGUF cut short, is a file of the test's own; the 98 MB GGUF is never copied.
"""

import json
import shutil

import pytest

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


@pytest.mark.parametrize("setup, needle", [
    (lambda d: None, "no \\*.gguf"),
    (lambda d: shutil.rmtree(d), "does not exist"),
])
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

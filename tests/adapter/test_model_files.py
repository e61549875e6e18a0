import json
import shutil

import pytest

from decision_adapter.model_files import ModelFilesError, find_gguf, locate_model


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
    copy = tmp_path / "m"
    shutil.copytree(model_dir, copy)
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
    copy = tmp_path / "m"
    shutil.copytree(model_dir, copy)
    gguf = next(copy.glob("*.gguf"))
    with open(gguf, "r+b") as handle:
        handle.truncate(1000)
    with pytest.raises(ModelFilesError, match="size 1000 bytes"):
        locate_model(copy)


def test_gguf_not_in_manifest_is_refused(model_dir, tmp_path):
    copy = tmp_path / "m"
    shutil.copytree(model_dir, copy)
    (copy / "AAA.gguf").write_bytes(b"GGUF")  # sorts before SmolLM2...
    with pytest.raises(ModelFilesError, match="not listed"):
        locate_model(copy)

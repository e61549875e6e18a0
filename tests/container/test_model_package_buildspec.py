"""buildspec/model-package.yml run locally: real curl (file:// hub), real script, fake `aws`.

The hub is a folder laid out like huggingface.co's resolve URLs, so curl fetches
exactly ``<repo>/resolve/<revision>/<file>``; a file under another revision is
simply not found. Only the upload goes to a fake (see tests/support/buildspec.py).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import importlib.util
import json
import sys
import tarfile
from pathlib import Path

import pytest

from tests.support.buildspec import REPO_ROOT, make_fake_hub, run_buildspec
from workshop_lib.aws.build_projects import model_package_env
from workshop_lib.models import ModelFile, ModelSpec, TokenizerSource
from workshop_lib.packaging import build_manifest, extract_model

BUILDSPEC = REPO_ROOT / "buildspec" / "model-package.yml"
GGUF = b"GGUF" + bytes(range(256)) * 40
TOKENIZER = {
    "tokenizer.json": b'{"model": "fake"}',
    "tokenizer_config.json": b"{}",
    "chat_template.jinja": b"{{ messages }}",
}
S3_PREFIX = "s3://workshop-bucket/models/fake"


def fake_spec(*, size: int | None = len(GGUF), sha256: str | None = None, tokenizer: bool = True) -> ModelSpec:
    return ModelSpec(
        name="Fake 1B Q4_K_M",
        gguf=ModelFile(
            path="fake-1b-Q4_K_M.gguf",
            repo="acme/fake-1b-GGUF",
            revision="a" * 40,
            role="gguf",
            size=size,
            sha256=sha256 or hashlib.sha256(GGUF).hexdigest(),
        ),
        tokenizer=TokenizerSource("acme/fake-1b", "b" * 40) if tokenizer else None,
        license="apache-2.0",
        quantization="Q4_K_M",
    )


def with_found_tokenizer(spec: ModelSpec) -> ModelSpec:
    """The spec as packaged: the tokenizer files the patterns found, by name (sorted)."""
    return dataclasses.replace(
        spec,
        extra_files=tuple(
            ModelFile(path=name, repo="acme/fake-1b", revision="b" * 40, role="tokenizer") for name in sorted(TOKENIZER)
        ),
    )


@pytest.fixture
def hub(tmp_path) -> str:
    files = {
        ("acme/fake-1b-GGUF", "a" * 40, "fake-1b-Q4_K_M.gguf"): GGUF,
        # the same name under another revision must never be fetched
        ("acme/fake-1b-GGUF", "main", "fake-1b-Q4_K_M.gguf"): b"not the pinned revision",
    }
    files.update({("acme/fake-1b", "b" * 40, name): data for name, data in TOKENIZER.items()})
    # files the patterns do not take, and a tokenizer file that exists only at another revision
    files.update(
        {
            ("acme/fake-1b", "b" * 40, "model.safetensors"): b"weights",
            ("acme/fake-1b", "b" * 40, "README.md"): b"# card",
            ("acme/fake-1b", "main", "special_tokens_map.json"): b"{}",
        }
    )
    return make_fake_hub(tmp_path / "hub", files)


def run(spec: ModelSpec, hub: str, tmp_path: Path, **overrides):
    env = {**model_package_env(spec, S3_PREFIX), "HF_ENDPOINT": hub, **overrides}
    return run_buildspec(BUILDSPEC, env, tmp_path)


def measured(spec: ModelSpec) -> dict[str, tuple[int, str]]:
    data = {spec.gguf.path: GGUF, **TOKENIZER}
    return {f.path: (len(data[f.path]), hashlib.sha256(data[f.path]).hexdigest()) for f in spec.files}


def test_manifest_equals_build_manifest(hub, tmp_path):
    spec = fake_spec()
    dlc = {"cpu": "763104351884.dkr.ecr.us-east-1.amazonaws.com/llama-cpp@sha256:" + "1" * 64}
    result = run(spec, hub, tmp_path, LLAMA_CPP_DLC=json.dumps(dlc))
    assert result.returncode == 0, result.stderr
    manifest = json.loads(result.s3_object(f"{S3_PREFIX}/model-manifest.json").read_text())
    when = datetime.datetime.strptime(manifest["build"]["time"], "%Y-%m-%dT%H:%M:%SZ")
    found = with_found_tokenizer(spec)  # every *.json / *.jinja at the pinned revision, nothing else
    expected = build_manifest(
        found,
        measured(found),
        build_id="decision-workshop-test:00000000-0000-0000-0000-000000000000",
        where="codebuild",
        tools=manifest["tools"],
        now=when,
    )
    assert manifest == expected
    assert {"packager", "python", "curl"} <= set(manifest["tools"])
    assert manifest["tools"]["llama_cpp_dlc"] == dlc  # the digests the package is prepared for


def test_the_library_passes_the_regions_pinned_dlc_digests():
    from workshop_lib.aws.images import pinned_dlc_uri

    env = model_package_env(fake_spec(), S3_PREFIX, {v: pinned_dlc_uri("eu-west-1", v) for v in ("cpu", "cuda")})
    assert json.loads(env["LLAMA_CPP_DLC"]) == {
        "cpu": pinned_dlc_uri("eu-west-1", "cpu"),
        "cuda": pinned_dlc_uri("eu-west-1", "cuda"),
    }
    assert env["TOKENIZER_PATTERNS"] == "*.json *.jinja *.model *.txt"


def test_no_tokenizer_file_matching_the_patterns_fails(hub, tmp_path):
    result = run(fake_spec(), hub, tmp_path, TOKENIZER_PATTERNS="*.model")
    assert result.returncode != 0 and "matches *.model; nothing was packaged" in result.stderr
    assert result.calls == []


def test_a_file_name_from_the_listing_that_is_not_plain_is_refused(tmp_path):
    hub = make_fake_hub(
        tmp_path / "hub",
        {
            ("acme/fake-1b-GGUF", "a" * 40, "fake-1b-Q4_K_M.gguf"): GGUF,
            ("acme/fake-1b", "b" * 40, "tokenizer.json"): b"{}",
        },
    )
    listing = tmp_path / "hub" / "api" / "models" / "acme" / "fake-1b" / "tree" / ("b" * 40)
    listing.write_text(json.dumps([{"type": "file", "path": "../../evil.json"}]))
    result = run(fake_spec(), hub, tmp_path)
    assert result.returncode != 0 and "refusing the file name" in result.stderr
    assert result.calls == []


def test_tarball_has_gguf_at_root_and_passes_the_adapters_check(hub, tmp_path, monkeypatch):
    result = run(fake_spec(), hub, tmp_path)
    assert result.returncode == 0, result.stderr
    tarball = result.s3_object(f"{S3_PREFIX}/model.tar.gz")
    with tarfile.open(tarball) as tar:
        assert tar.getnames() == ["fake-1b-Q4_K_M.gguf", *sorted(TOKENIZER), "model-manifest.json"]
    model_dir = extract_model(tarball, tmp_path / "opt-ml-model")
    assert (model_dir / "fake-1b-Q4_K_M.gguf").read_bytes() == GGUF

    # The adapter's own check (stdlib only), loaded from its file: the container refuses what it rejects.
    loader = importlib.util.spec_from_file_location(
        "adapter_model_files", REPO_ROOT / "container" / "decision_adapter" / "model_files.py"
    )
    model_files = importlib.util.module_from_spec(loader)
    monkeypatch.setitem(sys.modules, loader.name, model_files)
    loader.loader.exec_module(model_files)
    located = model_files.locate_model(model_dir)
    assert located.sha256 == hashlib.sha256(GGUF).hexdigest()
    assert located.source["revision"] == "a" * 40


def test_uploads_both_files_and_exports_the_model_data_url(hub, tmp_path):
    result = run(fake_spec(), hub, tmp_path)
    assert result.returncode == 0, result.stderr
    uploads = [call[-1] for call in result.calls if call[:3] == ["aws", "s3", "cp"]]
    assert uploads == [f"{S3_PREFIX}/model.tar.gz", f"{S3_PREFIX}/model-manifest.json"]
    assert result.exported == {"MODEL_DATA_URL": f"{S3_PREFIX}/model.tar.gz"}


def test_sha256_mismatch_fails_and_uploads_nothing(hub, tmp_path):
    result = run(fake_spec(sha256="0" * 64), hub, tmp_path)
    assert result.returncode != 0
    assert "sha256" in result.stderr and "nothing was packaged" in result.stderr
    assert result.calls == []
    assert not list((tmp_path / "src" / "model-package").glob("model.tar.gz*"))


def test_size_mismatch_fails_and_uploads_nothing(hub, tmp_path):
    result = run(fake_spec(size=len(GGUF) + 1), hub, tmp_path)
    assert result.returncode != 0
    assert f"{len(GGUF)} bytes" in result.stderr
    assert result.calls == []


def test_missing_file_at_the_pinned_revision_fails(hub, tmp_path):
    result = run(fake_spec(), hub, tmp_path, GGUF_REVISION="c" * 40)
    assert result.returncode != 0
    assert "could not download" in result.stderr and "resolve/" + "c" * 40 in result.stderr
    assert result.calls == []


def test_without_tokenizer_files(hub, tmp_path):
    spec = fake_spec(tokenizer=False)
    result = run(spec, hub, tmp_path)
    assert result.returncode == 0, result.stderr
    manifest = json.loads(result.s3_object(f"{S3_PREFIX}/model-manifest.json").read_text())
    assert [f["path"] for f in manifest["files"]] == [spec.gguf.path]
    assert manifest["files"][0]["size"] == len(GGUF)


def test_refuses_to_run_without_model_s3_uri(hub, tmp_path):
    env = {**model_package_env(fake_spec(), S3_PREFIX), "HF_ENDPOINT": hub}
    del env["MODEL_S3_URI"]  # the buildspec's placeholder stays
    result = run_buildspec(BUILDSPEC, env, tmp_path)
    assert result.returncode != 0
    assert "MODEL_S3_URI" in result.stderr
    assert result.calls == []
    assert not (tmp_path / "src" / "model-package").exists()

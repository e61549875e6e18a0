"""A calibration file in the model package: next to the GGUF in model.tar.gz, listed in the manifest with its
size and sha256 (local packaging and the CodeBuild buildspec alike), refused when fitted for another GGUF."""

from __future__ import annotations

import hashlib
import json
import tarfile

import pytest

from decision_contract.calibration import HELDOUT_KEYS
from tests.support.buildspec import REPO_ROOT, make_fake_hub, run_buildspec
from workshop_lib.aws.build_projects import model_package_env
from workshop_lib.errors import InvalidInput
from workshop_lib.models import ModelFile, ModelSpec
from workshop_lib.packaging import check_calibration, extract_model, package_local, parse_manifest

GGUF = b"GGUF" + bytes(range(256)) * 4
GGUF_SHA = hashlib.sha256(GGUF).hexdigest()


def spec() -> ModelSpec:
    return ModelSpec(
        name="tiny",
        gguf=ModelFile(
            path="tiny.gguf", repo="acme/tiny-GGUF", revision="1" * 40, role="gguf", size=len(GGUF), sha256=GGUF_SHA
        ),
    )


def calibration(sha256: str = GGUF_SHA) -> bytes:
    doc = {
        "format": "decision-calibration/1",
        "fit_for": {"gguf_sha256": sha256, "prompt_version": "decision-prompt/1"},
        "order": "as_given",
        "profiles": {
            "choice/2": {
                "temperature": 2.0,
                "kept": True,
                "fit_n": 3,
                "heldout_n": 5,
                "heldout": dict.fromkeys(HELDOUT_KEYS, 0.5),
            }
        },
        "data": {"tasks": "t", "fit_n": 3, "heldout_n": 5},
        "created": "2026-01-01T00:00:00Z",
    }
    return json.dumps(doc).encode()


def test_local_packaging_puts_the_file_next_to_the_gguf_and_lists_it(tmp_path):
    (tmp_path / "tiny.gguf").write_bytes(GGUF)
    (tmp_path / "calibration.json").write_bytes(data := calibration())
    package = package_local(
        spec(), {"tiny.gguf": tmp_path / "tiny.gguf"}, tmp_path / "out", calibration=tmp_path / "calibration.json"
    )
    with tarfile.open(package.tarball) as tar:
        assert tar.getnames() == ["tiny.gguf", "calibration.json", "model-manifest.json"]
    entry = package.manifest["files"][-1]
    assert entry == {
        "path": "calibration.json",
        "role": "calibration",
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    # the manifest reads back (the contract's rules, as the adapter reads it), and the GGUF stays the model
    parsed = parse_manifest(package.manifest)
    assert [f.path for f in parsed.files] == ["tiny.gguf", "calibration.json"]
    assert parsed.gguf.path == "tiny.gguf"
    model_dir = extract_model(package.tarball, tmp_path / "model")
    assert (model_dir / "calibration.json").read_bytes() == data


def test_without_a_calibration_nothing_changes(tmp_path):
    (tmp_path / "tiny.gguf").write_bytes(GGUF)
    package = package_local(spec(), {"tiny.gguf": tmp_path / "tiny.gguf"}, tmp_path / "out")
    assert [f["path"] for f in package.manifest["files"]] == ["tiny.gguf"]


def test_a_calibration_fitted_for_another_gguf_is_refused_before_packaging(tmp_path):
    (tmp_path / "tiny.gguf").write_bytes(GGUF)
    (tmp_path / "calibration.json").write_bytes(calibration("cd" * 32))
    with pytest.raises(InvalidInput, match="cd" * 32):
        package_local(
            spec(), {"tiny.gguf": tmp_path / "tiny.gguf"}, tmp_path / "out", calibration=tmp_path / "calibration.json"
        )
    assert not (tmp_path / "out" / "model.tar.gz").exists()


@pytest.mark.parametrize("data", [b"not json", b"{}", b'{"fit_for": {"gguf_sha256": "short"}}'])
def test_a_file_that_is_not_a_calibration_is_refused(data):
    with pytest.raises(InvalidInput):
        check_calibration(data, GGUF_SHA)


def _build(tmp_path, data: bytes):
    hub = make_fake_hub(tmp_path / "hub", {("acme/tiny-GGUF", "1" * 40, "tiny.gguf"): GGUF})
    uri = "s3://workshop-bucket/decision-workshop/codebuild-source/calibration-1.json"
    source = tmp_path / "s3" / uri[len("s3://") :]
    source.parent.mkdir(parents=True)
    source.write_bytes(data)
    env = {**model_package_env(spec(), "s3://workshop-bucket/models/tiny", calibration_s3_uri=uri), "HF_ENDPOINT": hub}
    return run_buildspec(REPO_ROOT / "buildspec" / "model-package.yml", env, tmp_path)


def test_the_codebuild_buildspec_packages_and_lists_the_file(tmp_path):
    result = _build(tmp_path, data := calibration())
    assert result.returncode == 0, result.stderr
    with tarfile.open(result.s3_object("s3://workshop-bucket/models/tiny/model.tar.gz")) as tar:
        assert tar.getnames() == ["tiny.gguf", "calibration.json", "model-manifest.json"]
    manifest = json.loads(result.s3_object("s3://workshop-bucket/models/tiny/model-manifest.json").read_text())
    assert manifest["files"][-1] == {
        "path": "calibration.json",
        "role": "calibration",
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    parse_manifest(manifest)


def test_the_buildspec_refuses_a_file_fitted_for_another_gguf_and_uploads_nothing(tmp_path):
    result = _build(tmp_path, calibration("cd" * 32))
    assert result.returncode != 0
    assert "cd" * 32 in result.stderr
    assert not result.s3_object("s3://workshop-bucket/models/tiny/model.tar.gz").exists()


@pytest.mark.slow  # starts the rehearsal's emulator
def test_the_packaging_step_carries_the_file_in_local_rehearsal(tmp_path, monkeypatch):
    """steps.package_model(calibration=) as notebook 01 would call it: the file goes beside the build source,
    the (emulated) build packages it next to the embedded GGUF, and the uploaded manifest lists it."""
    from workshop_lib import steps
    from workshop_lib.config import ENV_VARS
    from workshop_lib.local import permissions, rehearsal
    from workshop_lib.models import EMBEDDED_MODEL

    for name in ENV_VARS.values():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(permissions.PERSONA_ENV, raising=False)
    monkeypatch.setenv("WORKSHOP_MODE", "local")
    monkeypatch.setenv("WORKSHOP_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.setenv("WORKSHOP_LOCAL_DIR", str(tmp_path / "local"))
    (tmp_path / "calibration.json").write_bytes(data := calibration(EMBEDDED_MODEL.gguf.sha256))
    ws = steps.Workshop.load()
    try:
        steps.setup(ws, "decision-cpu", reset=True)
        steps.ensure_codebuild_role(ws)
        packaged = steps.package_model(ws, calibration=tmp_path / "calibration.json", progress=False)
        listed = {f["path"]: f for f in packaged.manifest["files"]}
        assert listed["calibration.json"]["sha256"] == hashlib.sha256(data).hexdigest()
        assert "the calibration file" in str(packaged)
        with pytest.raises(InvalidInput):  # fitted for the pinned 4B model, not the embedded one
            (tmp_path / "other.json").write_bytes(calibration("cd" * 32))
            steps.package_model(ws, calibration=tmp_path / "other.json", progress=False)
    finally:
        ws.rehearsal.stop_all()
        rehearsal.default().stop_all()

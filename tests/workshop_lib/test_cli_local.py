"""The command line in local mode: the same commands, run in one process against the emulator and
real adapter processes, from setup to stop-local, leave nothing running.
"""

from __future__ import annotations

import json

import pytest

from workshop_lib.cli import main
from workshop_lib.config import ENV_VARS, WorkshopConfig
from workshop_lib.local import rehearsal

pytestmark = pytest.mark.slow


@pytest.fixture
def local_mode(tmp_path, monkeypatch):
    """WORKSHOP_MODE=local with its own config, outputs and process registry; everything stopped afterwards."""
    for name in ENV_VARS.values():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WORKSHOP_MODE", "local")
    monkeypatch.setenv("WORKSHOP_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.setenv("WORKSHOP_LOCAL_DIR", str(tmp_path / "local"))
    yield tmp_path
    rehearsal.default().stop_all()


def _run(capsys, *argv) -> str:
    assert main(list(argv)) == 0, capsys.readouterr()
    return capsys.readouterr().out


def test_the_commands_rehearse_the_workshop_and_leave_nothing_running(local_mode, capsys):
    out = _run(capsys, "setup", "--deploy-path", "decision-cpu")
    assert "started a fresh rehearsal" in out and rehearsal.default().emulator_url()
    assert WorkshopConfig.load().deploy_path == "decision-cpu"  # saved where the notebooks read it
    out = _run(capsys, "codebuild-role")
    assert ":role/decision-workshop-codebuild" in WorkshopConfig.load().codebuild_role_arn
    out = _run(capsys, "package-model")
    outputs = json.loads((local_mode / "outputs.json").read_text())
    assert outputs["model_data_url"].endswith("model.tar.gz") and outputs["model_data_url"] in out
    assert "verified:" in _run(capsys, "verify-package")
    out = _run(capsys, "build-image")
    assert json.loads((local_mode / "outputs.json").read_text())["decision_image_cpu"] in out

    dry = json.loads(_run(capsys, "deploy", "--threads", "2", "--dry-run"))  # what deploy sends, from the outputs
    assert dry["CreateModel"]["PrimaryContainer"]["ModelDataUrl"] == outputs["model_data_url"]
    out = _run(capsys, "deploy", "--threads", "2")
    config = WorkshopConfig.load()
    assert f"endpoint {config.cpu_endpoint_name}: InService" in out and "local endpoint: http://" in out
    assert "SM_LLAMA_CPP_THREADS=2" in out
    assert rehearsal.READOUT_WHY in out  # the local adapter serves cloze on the embedded model, and says why

    out = _run(capsys, "invoke")
    assert "ticket-88231: top " in out  # the README's support-route example, on the local adapter
    to_label = local_mode / "to-label.jsonl"  # the stand-in captured it, as SageMaker would have
    assert "1 captured invocation of" in _run(capsys, "captured", "--out", str(to_label))
    [task] = [json.loads(line) for line in to_label.read_text().splitlines()]
    assert task["id"] == "ticket-88231" and task["expected"] is None and task["provenance"]["capture"]["request_id"]
    assert config.cpu_endpoint_name in _run(capsys, "running")

    out = _run(capsys, "cleanup", "--name", config.cpu_endpoint_name)
    assert "local endpoint process: stopped" in out
    assert _run(capsys, "running").strip() == "no workshop endpoints found"
    out = _run(capsys, "delete-builds")
    assert f"ECR repository {config.ecr_repository} (and its images): deleted" in out
    assert "deleted" in _run(capsys, "delete-codebuild-role")
    assert "objects deleted" in _run(capsys, "delete-artifacts")
    audit = _run(capsys, "audit")  # every call the commands made, held against the generated policies
    assert "permissions checked against its policy" in audit and "DENIED" not in audit
    out = _run(capsys, "stop-local")
    assert "AWS emulator" in out
    assert not [p.what for p in rehearsal.default().status() if p.running]
    assert rehearsal.default().emulator_url() is None
    assert main(["running"]) == 0  # the emulator is gone, and with it everything that could bill: one line
    assert "the local rehearsal is not running" in capsys.readouterr().out

"""The Workshop every step takes: its saved config, the outputs notebooks pass on, its clients."""

from __future__ import annotations

import json

import pytest

from workshop_lib.aws import codebuild, hosting, session
from workshop_lib.config import WorkshopConfig
from workshop_lib.local import modes, rehearsal, stand_ins
from workshop_lib.steps import StepError, StepNotRun, Workshop


def test_outputs_live_next_to_its_config_file_and_reach_a_later_workshop(tmp_path):
    first = Workshop(WorkshopConfig(mode="aws", region="eu-west-1"), tmp_path / "one" / "config.json")
    first.remember(model_data_url="s3://b/m/model.tar.gz")
    first.remember(dlc_cpu="x@sha256:1")
    assert json.loads((tmp_path / "one" / "outputs.json").read_text()) == {
        "dlc_cpu": "x@sha256:1",
        "model_data_url": "s3://b/m/model.tar.gz",
    }
    later = Workshop(WorkshopConfig(mode="aws", region="eu-west-1"), tmp_path / "one" / "config.json")
    assert later.recall("model_data_url", "01_package_model") == "s3://b/m/model.tar.gz"
    other = Workshop(WorkshopConfig(mode="aws", region="eu-west-1"), tmp_path / "two" / "config.json")
    with pytest.raises(
        StepNotRun, match="^no model data url recorded yet: run notebook 01_package_model first$"
    ) as raised:
        other.recall("model_data_url", "01_package_model")
    assert raised.value.notebook == "01_package_model" and isinstance(raised.value, StepError)


def test_save_makes_the_config_the_workshops_and_writes_it_where_load_reads(tmp_path, monkeypatch):
    monkeypatch.delenv("WORKSHOP_BUCKET", raising=False)
    path = tmp_path / "config.json"
    workshop = Workshop(WorkshopConfig(mode="aws", region="eu-west-1"), path)
    workshop.save(workshop.config.replace(bucket="amzn-s3-demo-bucket"))
    assert workshop.config.bucket == "amzn-s3-demo-bucket"
    assert Workshop.load(path).config.bucket == "amzn-s3-demo-bucket"


def test_aws_mode_waits_for_codebuild_and_sagemaker(tmp_path, monkeypatch):
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        monkeypatch.setenv(name, value)  # clients are made, never used: nothing reaches AWS
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    workshop = Workshop(WorkshopConfig(mode="aws", region="eu-west-1"), tmp_path / "config.json")
    assert isinstance(workshop.mode, session.AwsMode) and not workshop.local
    c = workshop.clients
    assert type(c.builds) is codebuild.CodeBuildRunner and type(c.hosting) is hosting.SageMakerHosting
    assert c.sm.meta.region_name == "eu-west-1" and c.calls is None
    assert workshop.clients is c  # made once
    workshop.save(workshop.config.replace(region="us-west-2"))
    assert workshop.clients is not c and workshop.clients.sm.meta.region_name == "us-west-2"


def test_local_mode_without_the_emulator_says_to_run_setup(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKSHOP_LOCAL_DIR", str(tmp_path / "local"))  # an empty registry: nothing runs
    workshop = Workshop(WorkshopConfig(mode="local"), tmp_path / "config.json")
    with pytest.raises(StepNotRun, match="^the local AWS emulator is not running .*: run notebook 00_setup first$"):
        workshop.clients
    assert "nothing to clean" in workshop.nothing_to_clean()


def _emulator_found_at(monkeypatch, url: str) -> list[str]:
    """Make the registry report ``url`` as the running emulator without starting one; returns the look-ups."""
    looked: list[str] = []

    def emulator_url(self):
        looked.append(str(self.home))
        return url

    monkeypatch.setattr(rehearsal.Rehearsal, "emulator_url", emulator_url)
    return looked


def test_local_mode_hands_builds_and_hosting_to_the_stand_ins(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKSHOP_LOCAL_DIR", str(tmp_path / "local"))
    _emulator_found_at(monkeypatch, "http://127.0.0.1:9")  # nothing is sent there
    workshop = Workshop(WorkshopConfig(mode="local"), tmp_path / "config.json")
    assert isinstance(workshop.mode, modes.LocalMode) and workshop.local
    c = workshop.clients
    assert isinstance(c.builds, stand_ins.EmulatedCodeBuild) and isinstance(c.hosting, stand_ins.LocalHosting)
    assert c.sm.meta.endpoint_url == "http://127.0.0.1:9" and c.calls is workshop.mode.calls
    workshop.forget_clients()
    assert workshop.clients is not c


def test_the_mode_looks_for_the_emulator_once_and_makes_no_call_to_build_its_clients(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKSHOP_LOCAL_DIR", str(tmp_path / "local"))
    looked = _emulator_found_at(monkeypatch, "http://127.0.0.1:9")
    sent = []
    monkeypatch.setattr(stand_ins, "seed_dlc", lambda *a, **k: sent.append(a))
    workshop = Workshop(WorkshopConfig(mode="local"), tmp_path / "config.json")
    assert looked == []  # loading chooses the mode; it looks for nothing
    for _ in range(5):
        workshop.clients.sm, workshop.clients.s3, workshop.clients.hosting, workshop.clients.builds
    assert len(looked) == 1 and sent == []  # one look-up for every access; nothing seeded behind the steps' back
    workshop.forget_clients()  # 07 stopped the emulator: the next access looks again
    workshop.clients.sm
    assert len(looked) == 2


def test_each_workshop_keeps_its_rehearsal_next_to_its_config(tmp_path, monkeypatch):
    monkeypatch.delenv("WORKSHOP_LOCAL_DIR", raising=False)
    one = Workshop(WorkshopConfig(mode="local"), tmp_path / "one" / "config.json")
    two = Workshop(WorkshopConfig(mode="local"), tmp_path / "two" / "config.json")
    assert one.rehearsal.home == tmp_path / "one" / "local" and two.rehearsal.home == tmp_path / "two" / "local"
    monkeypatch.setenv("WORKSHOP_LOCAL_DIR", str(tmp_path / "chosen"))
    assert (
        Workshop(WorkshopConfig(mode="local"), tmp_path / "one" / "config.json").rehearsal.home == tmp_path / "chosen"
    )


def test_notebook_05_says_which_endpoint_it_calls(tmp_path):
    from workshop_lib import steps

    gpu = Workshop(WorkshopConfig(mode="aws", region="eu-west-1", deploy_path="decision-gpu"), tmp_path / "c.json")
    assert steps.which_endpoint(gpu) == (
        f"calling the GPU decision endpoint (ordered GPU instance pools): {gpu.config.gpu_endpoint_name} in "
        "eu-west-1; the deploy path is 'decision-gpu' (notebook 00)"
    )
    cpu = Workshop(WorkshopConfig(mode="local", deploy_path="decision-cpu"), tmp_path / "c.json")
    assert steps.which_endpoint(cpu).startswith(
        f"calling the CPU decision endpoint (one CPU instance type): {cpu.config.cpu_endpoint_name}, served by a "
        "local adapter process;"
    )
    assert "standing in on the CPU" in steps.which_endpoint(cpu, cpu.config.gpu_endpoint_name)

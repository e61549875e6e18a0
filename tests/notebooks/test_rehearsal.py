"""Local rehearsal for real: the emulator and adapter processes, across processes, and stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support import recorded_groups
from workshop_lib import steps
from workshop_lib.aws import endpoints
from workshop_lib.aws.images import parse_image_uri
from workshop_lib.client import ChatResult
from workshop_lib.config import WorkshopConfig
from workshop_lib.local import dlc_server, rehearsal, stand_ins


@pytest.fixture
def local_mode(tmp_path, monkeypatch):
    """Local mode with its own config, outputs and process registry; everything stopped afterwards."""
    monkeypatch.setenv("WORKSHOP_MODE", "local")
    monkeypatch.setenv("WORKSHOP_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.setenv("WORKSHOP_LOCAL_DIR", str(tmp_path / "local"))
    for name in ("WORKSHOP_REGION", "WORKSHOP_BUCKET", "WORKSHOP_DEPLOY_PATH"):
        monkeypatch.delenv(name, raising=False)
    yield tmp_path
    rehearsal.default().stop_all()


def test_llama_settings_say_what_each_variable_becomes():
    lines = steps.llama_settings(
        {
            "SM_LLAMA_CPP_CTX_SIZE": "4096",
            "SM_LLAMA_CPP_NO_MMAP": "true",
            "SM_LLAMA_CPP_FLASH_ATTN": "false",
            "DECISION_ADAPTER_MAX_QUEUE": "4",
        }
    )
    assert "SM_LLAMA_CPP_CTX_SIZE=4096  ->  llama-server --ctx-size 4096" in lines
    assert "SM_LLAMA_CPP_NO_MMAP=true  ->  llama-server --no-mmap" in lines
    assert "SM_LLAMA_CPP_FLASH_ATTN=false  ->  llama-server dropped" in lines
    assert "DECISION_ADAPTER_MAX_QUEUE=4  (adapter setting)" in lines


def test_widget_options_text_becomes_options():
    assert steps.parse_options("yes: Yes, refund\n\nno\n") == [
        {"id": "yes", "text": "Yes, refund"},
        {"id": "no", "text": "no"},
    ]


IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/x@sha256:" + "a" * 64
ROLE = "arn:aws:iam::123456789012:role/r"


def test_the_emulator_gets_a_type_it_knows_and_the_request_stays_valid():
    plan = endpoints.decision_cpu_plan(
        "e", image=parse_image_uri(IMAGE), role_arn=ROLE, model_data_url="s3://bkt/m/model.tar.gz"
    )
    hosting = stand_ins.LocalHosting(s3=None)
    sent = hosting.adapt(plan)
    assert sent.endpoint_config["ProductionVariants"][0]["InstanceType"] == "ml.c5.9xlarge"
    assert plan.endpoint_config["ProductionVariants"][0]["InstanceType"] == "ml.c6i.8xlarge"
    url, notes = hosting.served("e")
    assert url is None and sent.model == plan.model and "ml.c6i.8xlarge" in notes[0]
    assert not any("Not exercised" in n for n in notes)  # the decision image on a CPU: all of it runs here


def test_pools_reach_the_emulator_as_the_first_pool_and_are_kept_as_validated(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKSHOP_LOCAL_DIR", str(tmp_path))
    plan = endpoints.decision_gpu_plan(
        "g", image=parse_image_uri(IMAGE), role_arn=ROLE, model_data_url="s3://bkt/m/model.tar.gz"
    )
    hosting = stand_ins.LocalHosting(s3=None)
    variant = hosting.adapt(plan).endpoint_config["ProductionVariants"][0]
    assert "InstancePools" not in variant and variant["InstanceType"] == "ml.g4dn.2xlarge"
    kept = json.loads((tmp_path / "g.requests.json").read_text())
    assert kept["CreateEndpointConfig"] == plan.endpoint_config  # what AWS would get, unchanged
    assert "InstancePools" in plan.endpoint_config["ProductionVariants"][0]
    assert "GPU placement" in hosting.served("g")[1][-1]


@pytest.mark.slow
def test_an_emulator_started_by_another_process_is_found_and_stopped(local_mode):
    started = subprocess.run(
        [
            sys.executable,
            "-c",
            "from workshop_lib.local import rehearsal; print(rehearsal.default().ensure_emulator())",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
        check=True,
    )
    url = started.stdout.strip()
    assert rehearsal.default().emulator_url() == url  # the first process has exited; the emulator lives on
    assert rehearsal.default().ensure_emulator() == url  # reused, not restarted
    [pgid] = recorded_groups(rehearsal.default().registry_path())
    assert rehearsal.default().stop_all() == ["AWS emulator"]
    assert not rehearsal.group_alive(pgid)
    assert rehearsal.default().stop_all() == []
    assert rehearsal.default().format_status() == "no local rehearsal processes are running"


@pytest.mark.slow
def test_on_aws_the_answer_itself_says_whether_llama_server_wrote_it():
    workshop = steps.Workshop(WorkshopConfig(mode="aws"))
    written = {"system_fingerprint": "b10433-abc", "timings": {"prompt_n": 9, "predicted_n": 3}}
    checks = steps.check_outcome(workshop, "02", answer=ChatResult("Two words.", raw=written))
    assert checks.ok and "build b10433-abc" in str(checks)
    checks = steps.check_outcome(workshop, "02", answer=ChatResult("Two words.", raw={"choices": []}))
    assert not checks.ok and "system_fingerprint" in str(checks)  # shown, not raised: on AWS the reader decides


def deployed_standard(workshop):
    """Notebooks 00 to 02 on the standard path: its endpoint deployed and asked notebook 02's question."""
    steps.setup(workshop, deploy_path="standard")
    steps.ensure_codebuild_role(workshop)
    steps.package_model(workshop, progress=False)
    standard = steps.deploy_standard(workshop, progress=False)
    reply = steps.client(workshop, workshop.config.standard_endpoint_name).chat(
        [{"role": "user", "content": "In one sentence: what is a decision model?"}], max_tokens=24
    )
    return standard, reply


@pytest.mark.slow
@pytest.mark.skipif(bool(dlc_server.missing()), reason=dlc_server.missing() or "-")
def test_the_standard_endpoint_is_llama_server_behind_nginx_and_notebook_02_checks_it(local_mode):
    workshop = steps.Workshop.load()
    standard, reply = deployed_standard(workshop)
    name = workshop.config.standard_endpoint_name
    assert standard.ok and standard.url
    assert any("served by llama-server behind nginx" in n for n in standard.notes)
    assert standard.notes[-1] == f"Not exercised locally: {dlc_server.NOT_REPRODUCED}."
    entry = json.loads(rehearsal.default().registry_path().read_text())["endpoints"][name]
    assert entry["served_by"] == rehearsal.LLAMA_SERVER and entry["environment"]["SM_LLAMA_CPP_THREADS"] == "2"
    assert "DECISION_ADAPTER_REQUEST_TIMEOUT" not in entry["environment"]  # an adapter setting: not llama-server's
    assert "llama-server behind nginx" in steps.which_endpoint(workshop, name)
    checks = steps.check_outcome(workshop, "02", endpoint=standard, answer=reply)
    assert checks.ok and "llama-server b" in str(checks) and "/health through nginx" in str(checks)
    # The check can fail: an answer without llama-server's build in it stops a local run.
    forged = ChatResult(reply.content, raw={k: v for k, v in reply.raw.items() if k != "system_fingerprint"})
    with pytest.raises(steps.StepError, match="system_fingerprint"):
        steps.check_outcome(workshop, "02", endpoint=standard, answer=forged)
    assert "local endpoint process: stopped" in steps.delete_endpoint(workshop, name)
    assert not rehearsal.group_alive(entry["pgid"])


@pytest.mark.slow
def test_without_llama_server_the_adapter_stands_in_and_says_why(local_mode, monkeypatch):
    monkeypatch.setenv(dlc_server.SERVER_ENV, str(local_mode / "no-such-llama-server"))
    workshop = steps.Workshop.load()
    standard, reply = deployed_standard(workshop)
    assert standard.ok and any("served by the decision adapter" in n for n in standard.notes)
    assert standard.notes[-1].startswith("Not exercised locally: the DLC's llama-server (WORKSHOP_LLAMA_SERVER=")
    checks = steps.check_outcome(workshop, "02", endpoint=standard, answer=reply)
    assert checks.ok and "the decision adapter stood in for llama-server" in str(checks)


@pytest.mark.slow
def test_running_setup_again_keeps_the_rehearsal_unless_asked_to_reset(local_mode):
    workshop = steps.Workshop.load()
    first = steps.setup(workshop)
    url = rehearsal.default().emulator_url()
    assert any(n.startswith("started a fresh rehearsal") for n in first.notes) and first.ok
    kept = f"{first.config.prefix}/model/kept"  # inside what the operator policy lets the participant write
    workshop.clients.s3.put_object(Bucket=first.config.bucket, Key=kept, Body=b"x")
    again = steps.setup(workshop)
    assert rehearsal.default().emulator_url() == url and any(
        n.startswith("kept the running rehearsal") for n in again.notes
    )
    assert workshop.clients.s3.head_object(Bucket=again.config.bucket, Key=kept)  # nothing lost
    reset = steps.setup(steps.Workshop.load(), reset=True)
    assert rehearsal.default().emulator_url() != url
    assert any("stopped the previous one (AWS emulator)" in n for n in reset.notes)


def test_aws_mode_steps_call_the_library_the_same_way(tmp_path, monkeypatch):
    """The aws branches against moto in-process (a fake AWS; it knows neither ml.c6i nor pools)."""
    from moto import mock_aws

    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "WORKSHOP_BUCKET", "WORKSHOP_DEPLOY_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("WORKSHOP_MODE", "aws")
    monkeypatch.setenv("WORKSHOP_REGION", "eu-west-1")
    monkeypatch.setenv("WORKSHOP_ROLE_ARN", "arn:aws:iam::123456789012:role/sagemaker-workshop")
    monkeypatch.setenv("WORKSHOP_CONFIG", str(tmp_path / "config.json"))
    with mock_aws():
        workshop = steps.Workshop.load()
        checks = steps.check_environment(workshop)
        assert dict((n, p) for n, p, _ in checks.rows)["credentials"] is True
        first = steps.setup(workshop)
        config = first.config
        # named so that AmazonSageMakerFullAccess, Studio's usual role, may create and use it
        assert config.bucket == "sagemaker-decision-workshop-123456789012-eu-west-1" and "created bucket" in str(first)
        assert "exists in eu-west-1" in str(steps.setup(steps.Workshop.load()))
        c = workshop.clients
        stand_ins.seed_dlc(c.ecr)  # moto's ECR has no DLC: put stand-ins where AWS has it
        c.s3.put_object(Bucket=config.bucket, Key="decision-workshop/model/model.tar.gz", Body=b"x")
        workshop.remember(model_data_url=config.model_data_url)
        standard = steps.deploy_standard(workshop, instance_type="ml.c5.2xlarge", progress=False)
        assert standard.status == "InService" and standard.url is None
        assert standard.plan.image_uri.startswith("763104351884.dkr.ecr.eu-west-1.amazonaws.com/llama-cpp@sha256:")
        assert steps.running_endpoints(workshop).startswith("endpoint")
        assert f"endpoint {config.standard_endpoint_name}: deleted" in steps.delete_endpoint(
            workshop, config.standard_endpoint_name
        )
        assert steps.running_endpoints(workshop) == "no workshop endpoints found"
        assert "1 objects deleted" in steps.delete_artifacts(workshop, config.s3_uri())
        assert steps.stop_local(workshop) == "aws mode: no local processes were started"

"""The command line: every command's help, dry runs, refusals, and a moto-backed round trip."""

import json

import pytest
from moto import mock_aws

from workshop_lib.cli import build_parser, main

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/semif-llamacpp-dlc@sha256:" + "a" * 64
MODEL = "s3://amzn-s3-demo-semif-artifacts/semif-llamacpp/model.tar.gz"
ROLE = "arn:aws:iam::123456789012:role/workshop-sagemaker"
DEPLOY = ["--region", "us-east-1", "--image-uri", IMAGE, "--model-data-url", MODEL, "--role-arn", ROLE]


def _commands():
    parser = build_parser()
    return sorted(parser._subparsers._group_actions[0].choices)


@pytest.mark.parametrize("command", _commands())
def test_every_command_has_readable_help(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert f"python -m workshop_lib {command}" in text and len(text.splitlines()) > 3


def test_the_sample_scripts_flags_are_all_here():
    parser = build_parser()
    choices = parser._subparsers._group_actions[0].choices
    flags = {name: {o for a in sub._actions for o in a.option_strings} for name, sub in choices.items()}
    assert {"--region", "--bucket", "--codebuild-role-arn", "--model-s3-uri"} <= flags["package-model"]
    assert {"--image-uri", "--model-data-url", "--role-arn", "--instance-type", "--name"} <= flags["deploy-standard"]
    assert {"--instance-type", "--threads", "--instance-pool", "--gpu-layers", "--provision-timeout",
            "--name"} <= flags["deploy"]
    assert {"--dockerfile", "--image-tag", "--bucket", "--codebuild-role-arn"} <= flags["build-image"]
    assert {"--region", "--name"} <= flags["cleanup"]
    assert {"--endpoint-name"} <= flags["invoke"] and {"--endpoint-name"} <= flags["invoke-standard"]


def test_gpu_pool_dry_run_keeps_the_given_order(capsys):
    code = main(["deploy", *DEPLOY, "--instance-pool", "ml.g6e.xlarge", "--instance-pool", "ml.g4dn.2xlarge",
                 "--gpu-layers=-1", "--provision-timeout", "900", "--dry-run"])
    assert code == 0
    plan = json.loads(capsys.readouterr().out)
    variant = plan["CreateEndpointConfig"]["ProductionVariants"][0]
    assert variant["InstancePools"] == [{"InstanceType": "ml.g6e.xlarge", "Priority": 1},
                                        {"InstanceType": "ml.g4dn.2xlarge", "Priority": 2}]
    assert variant["VariantInstanceProvisionTimeoutInSeconds"] == 900 and "InstanceType" not in variant
    assert plan["CreateModel"]["PrimaryContainer"]["Environment"]["SM_LLAMA_CPP_N_GPU_LAYERS"] == "999"


def test_cpu_dry_run_sets_threads_and_no_offload(capsys):
    assert main(["deploy", *DEPLOY, "--instance-type", "ml.c6i.8xlarge", "--threads", "32", "--dry-run"]) == 0
    env = json.loads(capsys.readouterr().out)["CreateModel"]["PrimaryContainer"]["Environment"]
    assert env["SM_LLAMA_CPP_THREADS"] == "32" and env["SM_LLAMA_CPP_N_GPU_LAYERS"] == "0"


def test_the_sample_deploy_flags_and_defaults(capsys):
    """deploy_endpoint.py's GPU form, verbatim: pools in order, -1 layers, the sample's 900 s timeouts."""
    assert main(["deploy", *DEPLOY, "--instance-pool", "ml.g6e.xlarge", "--instance-pool", "ml.g6.2xlarge",
                 "--instance-pool", "ml.g5.2xlarge", "--instance-pool", "ml.g4dn.2xlarge", "--gpu-layers=-1",
                 "--provision-timeout", "1200", "--name", "semif-decision-workflows", "--dry-run"]) == 0
    plan = json.loads(capsys.readouterr().out)
    variant = plan["CreateEndpointConfig"]["ProductionVariants"][0]
    assert [p["InstanceType"] for p in variant["InstancePools"]] == [
        "ml.g6e.xlarge", "ml.g6.2xlarge", "ml.g5.2xlarge", "ml.g4dn.2xlarge"]
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 900
    assert variant["ModelDataDownloadTimeoutInSeconds"] == 900
    env = plan["CreateModel"]["PrimaryContainer"]["Environment"]
    assert env["SM_LLAMA_CPP_N_GPU_LAYERS"] == "999" and "SM_LLAMA_CPP_CTX_SIZE" not in env  # the adapter's 8192


def test_gpu_layers_default_to_the_samples_zero(capsys):
    assert main(["deploy", *DEPLOY, "--instance-pool", "ml.g6e.xlarge", "--dry-run"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["CreateModel"]["PrimaryContainer"]["Environment"]["SM_LLAMA_CPP_N_GPU_LAYERS"] == "0"
    assert "--gpu-layers=-1" in out.err  # said once, where the participant sees it


def test_one_gpu_instance_type_is_the_samples_fixed_gpu_form(capsys):
    assert main(["deploy", *DEPLOY, "--instance-type", "ml.g6e.xlarge", "--gpu-layers=-1", "--dry-run"]) == 0
    variant = json.loads(capsys.readouterr().out)["CreateEndpointConfig"]["ProductionVariants"][0]
    assert variant["InstancePools"] == [{"InstanceType": "ml.g6e.xlarge", "Priority": 1}]
    assert variant["InferenceAmiVersion"].startswith("al2023-ami-sagemaker-inference-gpu")


def test_placement_is_one_of_instance_type_or_pools(capsys):
    with pytest.raises(SystemExit) as done:
        main(["deploy", *DEPLOY, "--instance-type", "ml.c6i.8xlarge", "--instance-pool", "ml.g6e.xlarge"])
    assert done.value.code == 2 and "not allowed with" in capsys.readouterr().err


def test_gpu_layers_on_a_cpu_type_are_refused(capsys):
    with pytest.raises(SystemExit) as done:
        main(["deploy", *DEPLOY, "--instance-type", "ml.c6i.8xlarge", "--gpu-layers=-1", "--dry-run"])
    assert "needs a GPU instance" in str(done.value.code)


@pytest.mark.parametrize("argv, needle", [
    (["deploy", *DEPLOY[:3], IMAGE.split("@")[0] + ":latest", *DEPLOY[4:], "--dry-run"], "Pin it by digest"),
    (["deploy", *DEPLOY, "--provision-timeout", "100", "--instance-pool", "ml.g6e.xlarge", "--gpu-layers=-1",
      "--dry-run"], "300"),
    (["deploy", *DEPLOY, *sum([["--instance-pool", t] for t in ["ml.g6e.xlarge", "ml.g6.2xlarge", "ml.g5.2xlarge",
                                                               "ml.g4dn.2xlarge", "ml.g5.xlarge", "ml.g6.xlarge"]],
                              []), "--gpu-layers=-1", "--dry-run"], "5"),
])
def test_refusals_are_one_clear_line(argv, needle, capsys):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and needle in err and "Traceback" not in err


@pytest.fixture
def fake_aws(monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        import boto3

        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="amzn-s3-demo-semif-artifacts")
        yield


def test_deploy_running_cleanup_round_trip_on_the_emulator(fake_aws, capsys):
    # moto stands in for SageMaker; it knows older instance types only
    assert main(["deploy-standard", *DEPLOY, "--instance-type", "ml.c5.2xlarge", "--name", "llamacpp-gguf",
                 "--no-wait"]) == 0
    assert main(["deploy", *DEPLOY, "--instance-type", "ml.c5.2xlarge", "--threads", "8",
                 "--name", "semif-decision-workflows", "--no-wait"]) == 0
    capsys.readouterr()
    assert main(["running", "--region", "us-east-1"]) == 0
    listed = capsys.readouterr().out
    assert "llamacpp-gguf" in listed and "semif-decision-workflows" in listed
    assert main(["cleanup", "--region", "us-east-1", "--name", "llamacpp-gguf"]) == 0
    assert main(["cleanup", "--region", "us-east-1", "--name", "llamacpp-gguf"]) == 0  # idempotent
    capsys.readouterr()
    assert main(["running", "--region", "us-east-1"]) == 0
    after = capsys.readouterr().out
    print(after)
    assert "semif-decision-workflows" in after  # cleanup touched only the named endpoint
    assert "llamacpp-gguf" not in after

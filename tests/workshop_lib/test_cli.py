"""The command line: one command per step on one Workshop, flags over the saved config, no defaults
of its own, dry runs, refusals, and a moto-backed round trip.

Every test runs inside moto with fake credentials and its own config file, so nothing reaches AWS
and nobody's saved config is read or written.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import operator
import re
from pathlib import Path

import pytest

import workshop_lib.cli
from workshop_lib.aws import endpoints, instance_types, model_requests, variants
from workshop_lib.cli import build_parser, main
from workshop_lib.cli_commands import CONFIG_FLAGS
from workshop_lib.config import ENV_VARS, WorkshopConfig

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagemaker-decision-workshop@sha256:" + "a" * 64
BUCKET = "workshop-cli-bucket"
MODEL = f"s3://{BUCKET}/decision-workshop/model/model.tar.gz"  # the workshop's model folder: the only one allowed
ROLE = "arn:aws:iam::123456789012:role/workshop-sagemaker"
DEPLOY = [
    "--region",
    "us-east-1",
    "--image-uri",
    IMAGE,
    "--model-data-url",
    MODEL,
    "--role-arn",
    ROLE,
    "--bucket",
    BUCKET,
]


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """Fake credentials inside moto (AWS mode, nothing sent anywhere), a config file of the test's own."""
    from moto import mock_aws

    for name in [
        *ENV_VARS.values(),
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
    ]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("WORKSHOP_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.setenv("WORKSHOP_LOCAL_DIR", str(tmp_path / "local"))
    with mock_aws():
        yield tmp_path


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    """Each command's parser once (aliases share their command's parser)."""
    choices = build_parser()._subparsers._group_actions[0].choices
    seen, unique = set(), {}
    for name, sub in choices.items():
        if id(sub) not in seen:
            seen.add(id(sub))
            unique[name] = sub
    return unique


def _deploy_plan(capsys, *argv) -> dict:
    assert main(["deploy", *argv, "--dry-run"]) == 0
    return json.loads(capsys.readouterr().out)


# ---- the parser -----------------------------------------------------------------------------------


@pytest.mark.parametrize("command", sorted(_subparsers()))
def test_every_command_has_readable_help(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert f"python -m workshop_lib {command}" in text and len(text.splitlines()) > 3


def test_one_command_per_step_the_notebooks_use():
    parser = build_parser()
    commands = set(parser._subparsers._group_actions[0].choices)
    assert {
        "config",
        "check",
        "setup",
        "codebuild-role",
        "package-model",
        "verify-package",
        "resolve-image",
        "build-image",
        "deploy-standard",
        "deploy",
        "extend",
        "deadline",
        "placement",
        "invoke-standard",
        "invoke",
        "bench",
        "cleanup",
        "delete-endpoints",
        "delete-builds",
        "delete-codebuild-role",
        "delete-deadline-role",
        "delete-artifacts",
        "running",
        "audit",
        "stop-local",
        "demo",
        "serve",
    } <= commands


def test_the_sample_scripts_flags_are_all_here():
    flags = {name: {o for a in sub._actions for o in a.option_strings} for name, sub in _subparsers().items()}
    assert {"--region", "--bucket", "--codebuild-role-arn", "--model-s3-uri"} <= flags["package-model"]
    assert {
        "--image-uri",
        "--model-data-url",
        "--role-arn",
        "--instance-type",
        "--name",
        "--threads",
        "--ctx-size",
        "--startup-timeout",
        "--download-timeout",
        "--dry-run",
        "--no-wait",
    } <= flags["deploy-standard"]
    assert {
        "--instance-type",
        "--threads",
        "--instance-pool",
        "--gpu-layers",
        "--provision-timeout",
        "--name",
        "--image-uri",
        "--model-data-url",
        "--role-arn",
        "--dry-run",
    } <= flags["deploy"]
    assert {"--dockerfile", "--image-tag", "--bucket", "--codebuild-role-arn", "--base-image", "--repository"} <= flags[
        "build-image"
    ]
    assert {"--variant", "--image-uri"} <= flags["resolve-image"]
    assert {"--region", "--name", "--no-wait"} <= flags["cleanup"]
    for command in ("invoke", "invoke-standard", "bench"):
        assert {"--endpoint-name", "--url"} <= flags[command]
    assert "--request" in flags["invoke"] and "--endpoint" in flags["bench"]


def test_no_flag_repeats_a_default_of_the_library():
    """A flag left out is None (False for a switch): the saved config, the step's or the endpoints
    builder's default decides, in one place. demo and serve are not workshop steps and keep theirs."""
    repeated = [
        f"{name} {action.option_strings[0]}={action.default!r}"
        for name, sub in _subparsers().items()
        if name not in ("demo", "serve")
        for action in sub._actions
        if action.default not in (None, False, argparse.SUPPRESS)
    ]
    assert repeated == []
    for name, sub in _subparsers().items():  # and nothing is required: the config holds it
        if name not in ("demo", "serve"):
            assert not [a.dest for a in sub._actions if a.required], name


def test_every_workshop_command_takes_mode_region_and_config_file():
    for name, sub in _subparsers().items():
        if name not in ("demo", "serve"):
            flags = {o for a in sub._actions for o in a.option_strings}
            assert {"--mode", "--region", "--config"} <= flags, name


def test_each_config_flag_is_made_from_its_settings_declaration():
    """A setting declared with a flag is that flag wherever a command takes it: the setting's name as its dest,
    its choices, its meaning in the help, and no default of its own (the config's applies)."""
    declared = {f.name: f for f in dataclasses.fields(WorkshopConfig)}
    assert set(CONFIG_FLAGS) <= set(declared) and {"mode", "region", "deploy_path"} <= set(CONFIG_FLAGS)
    actions = [a for sub in _subparsers().values() for a in sub._actions]
    for name, flag in CONFIG_FLAGS.items():
        made = [a for a in actions if flag in a.option_strings]
        assert made, flag
        for action in made:
            assert action.dest == name and action.default is None
            assert tuple(action.choices or ()) == tuple(declared[name].metadata["choices"] or ())
            assert declared[name].metadata["doc"] in action.help
    assert build_parser().parse_args(["setup", "--role-arn", ROLE]).sagemaker_role_arn == ROLE


def test_the_command_line_makes_no_client_and_calls_no_flow_of_its_own():
    """Commands reach AWS only through the Workshop's clients and the steps."""
    source = Path(workshop_lib.cli.__file__).read_text()
    forbidden = re.compile(
        r"\baws\.client\(|\bapi\.client\(|\bcodebuild\.|\bimport boto3|boto3\.|rehearsal\.client\(|EndpointClient\.sagemaker|"
        r"\bbuilds\.|endpoints\.deploy\(|endpoints\.\w+_plan\(|delete_endpoint_resources|"
        r"running_workshop_endpoints|package_model_in_codebuild"
    )
    offenders = [
        f"cli.py:{n}: {line.strip()}" for n, line in enumerate(source.splitlines(), 1) if forbidden.search(line)
    ]
    assert offenders == []


def test_no_command_makes_a_boto3_client_at_run_time(monkeypatch, capsys):
    """The same, at run time: every client a command uses is made by the one factory, aws.calls.client."""
    import inspect

    import boto3

    made, outside = [], []
    real = boto3.session.Session.client

    def watched(self, service, *args, **kwargs):
        caller = inspect.stack()[1]
        (made if caller.filename.endswith("workshop_lib/aws/calls.py") else outside).append((service, caller.filename))
        return real(self, service, *args, **kwargs)

    monkeypatch.setattr(boto3.session.Session, "client", watched)
    assert main(["running", "--region", "us-east-1"]) == 0
    assert main(["cleanup", "--region", "us-east-1", "--name", "nothing-here"]) == 0
    assert outside == [] and {service for service, _ in made} == {"sagemaker", "logs", "scheduler"}
    assert "endpoint nothing-here" in capsys.readouterr().out


# ---- flags over the config --------------------------------------------------------------------


def test_flags_override_the_saved_config_and_the_environment_for_one_run(isolated, monkeypatch, capsys):
    saved = WorkshopConfig(mode="aws", region="eu-west-1", bucket="saved-bucket", sagemaker_role_arn=ROLE)
    path = saved.save(isolated / "config.json")
    monkeypatch.setenv("WORKSHOP_BUCKET", "env-bucket")
    assert main(["config"]) == 0
    shown = capsys.readouterr().out
    assert "eu-west-1" in shown and "env-bucket" in shown  # the environment over the file, as notebooks load
    assert main(["config", "--region", "us-west-2", "--bucket", "flag-bucket"]) == 0
    shown = capsys.readouterr().out
    assert "us-west-2" in shown and "flag-bucket" in shown and "env-bucket" not in shown
    assert WorkshopConfig.load(path).region == "eu-west-1"  # nothing saved by a command that only runs


def test_mode_flag_chooses_local_with_its_placeholders(capsys):
    assert main(["config", "--mode", "local"]) == 0
    shown = capsys.readouterr().out
    assert "local rehearsal" in shown and "decision-workshop-local" in shown


def test_broken_credentials_are_an_error_naming_the_profile_never_local(monkeypatch, capsys):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_PROFILE", "workshop-missing-profile")
    assert main(["running", "--region", "us-east-1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "'workshop-missing-profile'" in err and "Traceback" not in err
    assert main(["running", "--region", "us-east-1", "--mode", "local"]) == 0  # chosen explicitly: no guess
    assert "the local rehearsal is not running" in capsys.readouterr().out


def test_no_region_in_aws_mode_says_which_flag(capsys):
    assert main(["running", "--mode", "aws"]) == 1
    assert "pass --region" in capsys.readouterr().err


def test_a_bad_flag_value_is_the_configs_one_line_error(capsys):
    assert main(["setup", "--region", "us-east-1", "--role-arn", ROLE, "--bucket", "Not_A_Bucket"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: bucket name 'Not_A_Bucket'") and "Traceback" not in err


# ---- deploy --dry-run: the step's plan, printed ------------------------------------------------


def test_gpu_pool_dry_run_keeps_the_given_order(capsys):
    plan = _deploy_plan(
        capsys,
        *DEPLOY,
        "--instance-pool",
        "ml.g6e.xlarge",
        "--instance-pool",
        "ml.g4dn.2xlarge",
        "--gpu-layers=-1",
        "--provision-timeout",
        "900",
    )
    variant = plan["CreateEndpointConfig"]["ProductionVariants"][0]
    assert variant["InstancePools"] == [
        {"InstanceType": "ml.g6e.xlarge", "Priority": 1},
        {"InstanceType": "ml.g4dn.2xlarge", "Priority": 2},
    ]
    assert variant["VariantInstanceProvisionTimeoutInSeconds"] == 900 and "InstanceType" not in variant
    assert plan["CreateModel"]["PrimaryContainer"]["Environment"]["SM_LLAMA_CPP_N_GPU_LAYERS"] == "999"


def test_cpu_dry_run_sets_threads_and_no_offload(capsys):
    plan = _deploy_plan(capsys, *DEPLOY, "--instance-type", "ml.c6i.8xlarge", "--threads", "32")
    env = plan["CreateModel"]["PrimaryContainer"]["Environment"]
    assert env["SM_LLAMA_CPP_THREADS"] == "32" and env["SM_LLAMA_CPP_N_GPU_LAYERS"] == "0"


def test_the_sample_deploy_flags_verbatim(capsys):
    """deploy_endpoint.py's GPU form, verbatim: pools in order, -1 layers, 900 s timeouts."""
    plan = _deploy_plan(
        capsys,
        *DEPLOY,
        "--instance-pool",
        "ml.g6e.xlarge",
        "--instance-pool",
        "ml.g6.2xlarge",
        "--instance-pool",
        "ml.g5.2xlarge",
        "--instance-pool",
        "ml.g4dn.2xlarge",
        "--gpu-layers=-1",
        "--provision-timeout",
        "1200",
        "--name",
        "my-decision-endpoint",
    )
    variant = plan["CreateEndpointConfig"]["ProductionVariants"][0]
    assert [p["InstanceType"] for p in variant["InstancePools"]] == [
        "ml.g6e.xlarge",
        "ml.g6.2xlarge",
        "ml.g5.2xlarge",
        "ml.g4dn.2xlarge",
    ]
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 900
    assert variant["ModelDataDownloadTimeoutInSeconds"] == 900
    assert plan["CreateEndpoint"]["EndpointName"] == "my-decision-endpoint"
    env = plan["CreateModel"]["PrimaryContainer"]["Environment"]
    assert env["SM_LLAMA_CPP_N_GPU_LAYERS"] == "999" and "SM_LLAMA_CPP_CTX_SIZE" not in env  # the adapter's 8192


def test_flags_left_out_take_the_builders_defaults(capsys):
    """No flag: the plan is the one the library builds by default (the same as the notebooks')."""
    gpu = _deploy_plan(capsys, *DEPLOY, "--instance-pool", "ml.g6e.xlarge")
    variant = gpu["CreateEndpointConfig"]["ProductionVariants"][0]
    assert gpu["CreateModel"]["PrimaryContainer"]["Environment"]["SM_LLAMA_CPP_N_GPU_LAYERS"] == str(
        model_requests.FULL_OFFLOAD
    )
    assert variant["VariantInstanceProvisionTimeoutInSeconds"] == variants.PROVISION_TIMEOUT_S
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == variants.STARTUP_TIMEOUT_S
    cpu = _deploy_plan(capsys, *DEPLOY)
    variant = cpu["CreateEndpointConfig"]["ProductionVariants"][0]
    assert variant["InstanceType"] == endpoints.DECISION_CPU_INSTANCE
    assert cpu["CreateModel"]["PrimaryContainer"]["Environment"]["SM_LLAMA_CPP_THREADS"] == str(
        instance_types.vcpus(endpoints.DECISION_CPU_INSTANCE)
    )


def test_dry_run_takes_names_role_and_model_from_the_saved_workshop(isolated, capsys):
    config = WorkshopConfig(
        mode="aws",
        region="us-east-1",
        bucket=BUCKET,
        sagemaker_role_arn=ROLE,
        cpu_endpoint_name="my-cpu",
        gpu_endpoint_name="my-gpu",
    )
    config.save(isolated / "config.json")
    (isolated / "outputs.json").write_text(json.dumps({"model_data_url": MODEL}))  # what package-model records
    cpu = _deploy_plan(capsys, "--image-uri", IMAGE)
    assert cpu["CreateEndpoint"]["EndpointName"] == "my-cpu"
    assert cpu["CreateModel"]["ExecutionRoleArn"] == ROLE
    assert cpu["CreateModel"]["PrimaryContainer"]["ModelDataUrl"] == MODEL
    gpu = _deploy_plan(capsys, "--image-uri", IMAGE, "--instance-pool", "ml.g6e.xlarge")
    assert gpu["CreateEndpoint"]["EndpointName"] == "my-gpu"
    named = _deploy_plan(capsys, "--image-uri", IMAGE, "--name", "other-cpu")
    assert named["CreateModel"]["ModelName"] == "other-cpu"
    assert (
        main(
            [
                "deploy-standard",
                "--image-uri",
                IMAGE,
                "--dry-run",
                "--instance-type",
                "ml.c6i.xlarge",
                "--ctx-size",
                "2048",
            ]
        )
        == 0
    )
    standard = json.loads(capsys.readouterr().out)
    assert standard["CreateEndpoint"]["EndpointName"] == config.standard_endpoint_name
    assert standard["CreateModel"]["PrimaryContainer"]["Environment"]["SM_LLAMA_CPP_CTX_SIZE"] == "2048"


def test_dry_run_without_a_packaged_model_says_which_step_comes_first(isolated, capsys):
    WorkshopConfig(mode="aws", region="us-east-1", sagemaker_role_arn=ROLE).save(isolated / "config.json")
    assert main(["deploy", "--image-uri", IMAGE, "--dry-run"]) == 1
    assert "no model data url recorded yet" in capsys.readouterr().err


def test_dry_run_without_a_role_names_the_setting(capsys):
    assert main(["deploy", "--region", "us-east-1", "--image-uri", IMAGE, "--model-data-url", MODEL, "--dry-run"]) == 1
    assert "WORKSHOP_ROLE_ARN" in capsys.readouterr().err


def test_a_region_without_instance_pools_gets_the_first_pool_fixed_and_the_dry_run_says_so(capsys):
    image = IMAGE.replace("us-east-1", "af-south-1")
    argv = [
        "deploy",
        "--region",
        "af-south-1",
        "--image-uri",
        image,
        "--model-data-url",
        MODEL,
        "--role-arn",
        ROLE,
        "--bucket",
        BUCKET,
        "--instance-pool",
        "ml.g6e.xlarge",
        "--instance-pool",
        "ml.g5.2xlarge",
        "--dry-run",
    ]
    assert main(argv) == 0
    captured = capsys.readouterr()
    variant = json.loads(captured.out)["CreateEndpointConfig"]["ProductionVariants"][0]
    assert variant["InstanceType"] == "ml.g6e.xlarge" and "InstancePools" not in variant
    assert "instances: ml.g6e.xlarge (fixed)" in captured.err
    assert "instance pools are not offered in af-south-1" in captured.err and "ml.g5.2xlarge" in captured.err
    assert main([*argv[:2], "us-east-1", *argv[3:4], IMAGE, *argv[5:]]) == 0  # the same flags where pools exist
    assert "InstancePools" in json.loads(capsys.readouterr().out)["CreateEndpointConfig"]["ProductionVariants"][0]


def test_a_model_uri_outside_the_workshops_folder_is_refused_before_any_build(capsys):
    import boto3

    argv = ["package-model", "--region", "us-east-1", "--bucket", BUCKET, "--codebuild-role-arn", ROLE]
    assert main([*argv, "--model-s3-uri", "s3://someone-elses-bucket/semif-llamacpp/"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --model-s3-uri") and f"s3://{BUCKET}/decision-workshop/model/" in err
    assert "Traceback" not in err
    assert boto3.client("codebuild", region_name="us-east-1").list_projects()["projects"] == []  # nothing built
    assert boto3.client("s3", region_name="us-east-1").list_buckets()["Buckets"] == []  # nothing uploaded
    assert (
        main(["deploy", *DEPLOY[:5], "s3://someone-elses-bucket/semif-llamacpp/model.tar.gz", *DEPLOY[6:], "--dry-run"])
        == 1
    )
    assert "model data URL 's3://someone-elses-bucket" in capsys.readouterr().err


def test_one_gpu_instance_type_is_the_samples_fixed_gpu_form(capsys):
    plan = _deploy_plan(capsys, *DEPLOY, "--instance-type", "ml.g6e.xlarge", "--gpu-layers=-1")
    variant = plan["CreateEndpointConfig"]["ProductionVariants"][0]
    assert variant["InstancePools"] == [{"InstanceType": "ml.g6e.xlarge", "Priority": 1}]
    assert variant["InferenceAmiVersion"].startswith("al2023-ami-sagemaker-inference-gpu")


def test_placement_is_one_of_instance_type_or_pools(capsys):
    with pytest.raises(SystemExit) as done:
        main(["deploy", *DEPLOY, "--instance-type", "ml.c6i.8xlarge", "--instance-pool", "ml.g6e.xlarge"])
    assert done.value.code == 2 and "not allowed with" in capsys.readouterr().err


def test_gpu_layers_on_a_cpu_type_are_refused(capsys):
    assert main(["deploy", *DEPLOY, "--instance-type", "ml.c6i.8xlarge", "--gpu-layers=-1", "--dry-run"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --gpu-layers -1 needs a GPU instance") and "Traceback" not in err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["deploy", *DEPLOY[:3], IMAGE.split("@")[0] + ":latest", *DEPLOY[4:], "--dry-run"], "Pin it by digest"),
        (
            [
                "deploy",
                *DEPLOY,
                "--provision-timeout",
                "100",
                "--instance-pool",
                "ml.g6e.xlarge",
                "--gpu-layers=-1",
                "--dry-run",
            ],
            "300",
        ),
        (
            [
                "deploy",
                *DEPLOY,
                *functools.reduce(
                    operator.iadd,
                    [
                        ["--instance-pool", t]
                        for t in [
                            "ml.g6e.xlarge",
                            "ml.g6.2xlarge",
                            "ml.g5.2xlarge",
                            "ml.g4dn.2xlarge",
                            "ml.g5.xlarge",
                            "ml.g6.xlarge",
                        ]
                    ],
                    [],
                ),
                "--gpu-layers=-1",
                "--dry-run",
            ],
            "5",
        ),
    ],
)
def test_refusals_are_one_clear_line(argv, needle, capsys):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and needle in err and "Traceback" not in err


def test_a_bug_keeps_its_traceback(monkeypatch):
    from workshop_lib import steps

    def broken(workshop):
        raise KeyError("a bug")

    monkeypatch.setattr(steps, "running_endpoints", broken)
    with pytest.raises(KeyError):
        main(["running", "--region", "us-east-1"])


# ---- against moto: the steps run, the config is saved by setup only ----------------------------


def test_setup_saves_the_flags_where_later_commands_read_them(isolated, capsys):
    assert (
        main(
            [
                "setup",
                "--region",
                "us-east-1",
                "--bucket",
                "workshop-cli-bucket",
                "--role-arn",
                ROLE,
                "--deploy-path",
                "decision-cpu",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "created bucket s3://workshop-cli-bucket in us-east-1" in out
    saved = WorkshopConfig.load(isolated / "config.json")
    assert (saved.region, saved.bucket, saved.sagemaker_role_arn, saved.deploy_path) == (
        "us-east-1",
        "workshop-cli-bucket",
        ROLE,
        "decision-cpu",
    )
    assert main(["setup"]) == 0  # from the saved config alone now
    assert "bucket s3://workshop-cli-bucket exists in us-east-1" in capsys.readouterr().out
    assert main(["config"]) == 0
    assert "workshop-cli-bucket" in capsys.readouterr().out


def test_deploy_running_cleanup_round_trip_on_moto(isolated, capsys):
    import boto3

    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
    standard, cpu = WorkshopConfig().standard_endpoint_name, WorkshopConfig().cpu_endpoint_name
    # moto stands in for SageMaker; it knows older instance types only
    assert main(["deploy-standard", *DEPLOY, "--instance-type", "ml.c5.2xlarge", "--no-wait"]) == 0
    out = capsys.readouterr().out
    assert f"endpoint {standard}: " in out and f"deadline: endpoint {standard} is deleted at " in out
    assert main(["deploy", *DEPLOY, "--instance-type", "ml.c5.2xlarge", "--threads", "8", "--no-wait"]) == 0
    out = capsys.readouterr().out
    assert f"endpoint {cpu}: " in out and "SM_LLAMA_CPP_THREADS=8" in out
    assert re.search(r"UTC \(in (4 h 0|3 h 59) min\) unless extended", out)  # the config's default, 4 h
    assert not (isolated / "config.json").exists()  # deploying saves nothing
    assert main(["running", "--region", "us-east-1"]) == 0
    listed = capsys.readouterr().out
    assert standard in listed and cpu in listed
    assert main(["cleanup", "--region", "us-east-1", "--name", standard]) == 0
    out = capsys.readouterr().out
    assert f"endpoint {standard}: deleted" in out and f"deadline of {standard}: deleted" in out
    assert main(["delete-endpoints", "--region", "us-east-1", "--name", standard]) == 0  # idempotent
    assert f"deadline of {standard}: already gone" in capsys.readouterr().out
    assert main(["running", "--region", "us-east-1"]) == 0
    after = capsys.readouterr().out
    assert cpu in after  # cleanup touched only the named endpoint
    assert standard not in after
    assert main(["cleanup", "--region", "us-east-1"]) == 0  # no --name: the config's three endpoints
    assert f"endpoint {cpu}: deleted" in capsys.readouterr().out
    assert main(["running", "--region", "us-east-1"]) == 0
    assert cpu not in capsys.readouterr().out


def test_extend_moves_the_deadline_and_deadline_shows_it(isolated, capsys):
    import boto3

    from workshop_lib.aws import spend_guard

    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
    cpu = WorkshopConfig().cpu_endpoint_name
    assert main(["deploy", *DEPLOY, "--instance-type", "ml.c5.2xlarge", "--no-wait"]) == 0
    capsys.readouterr()
    scheduler = boto3.client("scheduler", region_name="us-east-1")
    first = scheduler.get_schedule(Name=spend_guard.schedule_name(cpu))
    assert main(["extend", "--region", "us-east-1", "--bucket", BUCKET, "--name", cpu, "--hours", "8"]) == 0
    assert f"endpoint {cpu} is deleted at " in capsys.readouterr().out
    moved = scheduler.get_schedule(Name=spend_guard.schedule_name(cpu))
    gap = spend_guard.parse_at(moved["ScheduleExpression"]) - spend_guard.parse_at(first["ScheduleExpression"])
    assert 3.9 * 3600 < gap.total_seconds() < 4.1 * 3600  # 8 h from now instead of 4 h from the deploy
    assert moved["Target"] == first["Target"] and moved["ActionAfterCompletion"] == "NONE"
    assert main(["deadline", "--region", "us-east-1", "--name", cpu]) == 0
    assert re.search(rf"endpoint {cpu} is deleted at .* UTC \(in (8 h 0|7 h 59) min\)", capsys.readouterr().out)
    assert (
        main(["extend", "--region", "us-east-1", "--bucket", BUCKET, "--name", "no-such-endpoint", "--hours", "1"]) == 1
    )
    assert "there is no endpoint no-such-endpoint" in capsys.readouterr().err
    assert main(["extend", "--region", "us-east-1", "--bucket", BUCKET, "--name", cpu, "--hours", "500"]) == 1
    assert "WORKSHOP_ENDPOINT_TTL_HOURS" in capsys.readouterr().err


def test_deadline_of_an_endpoint_without_one_says_how_to_set_it(capsys):
    assert main(["deadline", "--region", "us-east-1", "--name", "decision-workshop-gpu"]) == 0
    assert "endpoint decision-workshop-gpu is not deployed, so it has no deadline" in capsys.readouterr().out
    import boto3

    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
    assert main(["deploy", *DEPLOY, "--instance-type", "ml.c5.2xlarge", "--no-wait"]) == 0
    assert main(["deadline", "--region", "us-east-1", "--name", "decision-workshop-cpu"]) == 0
    assert "is deleted at" in capsys.readouterr().out.splitlines()[-1]


def test_aws_mode_audit_and_stop_local_say_they_are_local_only(capsys):
    assert main(["audit", "--region", "us-east-1"]) == 0
    assert "WORKSHOP_MODE=local" in capsys.readouterr().out
    assert main(["stop-local", "--region", "us-east-1"]) == 0
    assert "no local processes" in capsys.readouterr().out


def test_the_other_cleanup_steps_on_moto_say_what_was_already_gone(capsys):
    import boto3

    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="workshop-cli-bucket")
    boto3.client("s3", region_name="us-east-1").put_object(
        Bucket="workshop-cli-bucket", Key="decision-workshop/model/model.tar.gz", Body=b"x"
    )
    assert main(["delete-builds", "--region", "us-east-1", "--repository", "my-repo"]) == 0
    assert "ECR repository my-repo: already gone" in capsys.readouterr().out
    assert main(["delete-deadline-role", "--region", "us-east-1"]) == 0
    assert "IAM role decision-workshop-scheduler: already gone" in capsys.readouterr().out
    assert main(["delete-codebuild-role", "--region", "us-east-1", "--codebuild-role-arn", ROLE]) == 0
    assert "not created by the workshop, left alone" in capsys.readouterr().out
    assert main(["delete-artifacts", "--region", "us-east-1", "--bucket", "workshop-cli-bucket"]) == 0
    assert "s3://workshop-cli-bucket/decision-workshop/: 1 objects deleted" in capsys.readouterr().out


def test_setup_saves_the_endpoint_deadline_and_refuses_a_bad_one(isolated, capsys):
    argv = ["setup", "--region", "us-east-1", "--bucket", BUCKET, "--role-arn", ROLE]
    assert main([*argv, "--endpoint-ttl-hours", "8"]) == 0
    assert WorkshopConfig.load(isolated / "config.json").ttl_hours == 8
    capsys.readouterr()
    assert main([*argv, "--endpoint-ttl-hours", "200"]) == 1
    assert "endpoint_ttl_hours '200'" in capsys.readouterr().err
    assert WorkshopConfig.load(isolated / "config.json").ttl_hours == 8  # the bad value was not saved


# ---- the sample's flags alone: no workshop config, no emulator -------------------------------------------

SAMPLE = [
    "--region",
    "us-east-1",
    "--image-uri",
    IMAGE,
    "--model-data-url",
    "s3://my-models/llm/model.tar.gz",
    "--role-arn",
    ROLE,
    "--instance-type",
    "ml.c6i.2xlarge",
    "--name",
    "my-decision-endpoint",
]


def test_the_samples_flags_alone_reach_the_mutable_tag_refusal_first(isolated, capsys):
    import boto3

    tagged = [*SAMPLE[:3], IMAGE.split("@")[0] + ":latest", *SAMPLE[4:]]
    for extra in ([], ["--dry-run"]):
        assert main(["deploy", *tagged, *extra]) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: image ") and "Pin it by digest" in err and "bucket" not in err
    assert boto3.client("sagemaker", region_name="us-east-1").list_models()["Models"] == []  # nothing sent
    assert not (isolated / "config.json").exists()


def test_the_samples_flags_alone_plan_a_deploy_with_data_capture_off_and_a_note(isolated, capsys):
    assert main(["deploy", *SAMPLE, "--dry-run"]) == 0
    captured = capsys.readouterr()
    plan = json.loads(captured.out)
    assert plan["CreateModel"]["PrimaryContainer"]["ModelDataUrl"] == "s3://my-models/llm/model.tar.gz"
    assert plan["CreateModel"]["ExecutionRoleArn"] == ROLE
    assert plan["CreateEndpoint"]["EndpointName"] == "my-decision-endpoint"
    assert "DataCaptureConfig" not in plan["CreateEndpointConfig"]
    assert "note: data capture off: no workshop bucket" in captured.err
    # with a bucket, the workshop's rules are back: the model must be in its folder, and capture is on
    assert main(["deploy", *SAMPLE, "--bucket", BUCKET, "--dry-run"]) == 1
    assert "outside the workshop's model folder" in capsys.readouterr().err
    assert main(["deploy", *SAMPLE[:5], MODEL, *SAMPLE[6:], "--bucket", BUCKET, "--dry-run"]) == 0
    assert "DataCaptureConfig" in json.loads(capsys.readouterr().out)["CreateEndpointConfig"]


def test_a_local_dry_run_needs_no_emulator(isolated, capsys):
    model = "s3://decision-workshop-local/decision-workshop/model/model.tar.gz"  # local mode's placeholder bucket
    assert (
        main(
            [
                "deploy",
                "--mode",
                "local",
                "--image-uri",
                IMAGE,
                "--model-data-url",
                model,
                "--instance-type",
                "ml.c6i.2xlarge",
                "--dry-run",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["CreateModel"]["PrimaryContainer"]["ModelDataUrl"] == model
    assert not (isolated / "local").exists() or not any((isolated / "local").iterdir())  # nothing started

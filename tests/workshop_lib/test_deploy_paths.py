"""The deploy-path table drives the config, the command line, the deploy spec, the steps and the quota check:
each row is read where its path is asked for, and nothing else spells a path."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest

from workshop_lib import deploy_paths, steps
from workshop_lib.aws import capture, endpoints, images
from workshop_lib.aws.deploy_spec import ENDPOINT_NAME_ENV, DeploySpec, plan_builder, plan_for
from workshop_lib.aws.images import parse_image_uri
from workshop_lib.cli import build_parser, main
from workshop_lib.cli_commands import workshop_for
from workshop_lib.config import ENV_VARS, WorkshopConfig, check_deploy_path
from workshop_lib.deploy_paths import DEPLOY_PATHS
from workshop_lib.errors import InvalidInput
from workshop_lib.steps import deploy as deploy_module
from workshop_lib.steps.quotas import instance_types_for
from workshop_lib.steps.recorded import recorded_image

ROLE = "arn:aws:iam::111122223333:role/sagemaker-workshop"
IMAGE = "111122223333.dkr.ecr.eu-west-1.amazonaws.com/decision-workshop@sha256:" + "ab" * 32
ROWS = pytest.mark.parametrize("path", DEPLOY_PATHS, ids=lambda p: p.name)


def test_the_rows_are_frozen_and_their_names_unique():
    assert len({p.name for p in DEPLOY_PATHS}) == len(DEPLOY_PATHS) == len(deploy_paths.NAMES)
    assert len({p.endpoint_field for p in DEPLOY_PATHS}) == len(DEPLOY_PATHS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEPLOY_PATHS[0].name = "other"  # type: ignore[misc]
    with pytest.raises(InvalidInput, match="not one of " + ", ".join(deploy_paths.NAMES)):
        deploy_paths.deploy_path("decision-tpu")


@ROWS
def test_the_config_declares_each_rows_endpoint_and_accepts_its_name(path):
    declared = {f.name: f for f in dataclasses.fields(WorkshopConfig)}[path.endpoint_field]
    assert declared.default == path.default_endpoint and ENV_VARS[path.endpoint_field] == path.endpoint_env
    config = WorkshopConfig(**{path.endpoint_field: "my-endpoint"}, deploy_path=path.name)
    assert check_deploy_path(path.name) == path.name and config.check()
    assert config.endpoint_name() == config.endpoint_name(path) == "my-endpoint"
    assert config.path_of("my-endpoint") is path
    with pytest.raises(InvalidInput, match=path.endpoint_field):
        WorkshopConfig(**{path.endpoint_field: "Capitals"}).check()


def test_a_name_that_is_no_row_is_refused_by_the_config_and_the_command_line(capsys):
    with pytest.raises(InvalidInput, match="WORKSHOP_DEPLOY_PATH"):
        WorkshopConfig(deploy_path="decision-tpu").check()
    with pytest.raises(SystemExit):
        build_parser().parse_args(["setup", "--deploy-path", "decision-tpu"])
    assert "invalid choice" in capsys.readouterr().err


@ROWS
def test_the_command_line_takes_each_rows_name_and_a_deploy_commands_name_flag_sets_its_endpoint(
    path, tmp_path, monkeypatch
):
    for name in ENV_VARS.values():
        monkeypatch.delenv(name, raising=False)
    args = build_parser().parse_args(
        ["setup", "--mode", "local", "--deploy-path", path.name, "--config", str(tmp_path / "config.json")]
    )
    assert workshop_for(args, check=False).config.deploy_path == path.name
    args.name = "named-here"
    config = workshop_for(args, deploy_path=path.name, check=False).config
    assert getattr(config, path.endpoint_field) == "named-here" and config.endpoint_name() == "named-here"


@ROWS
def test_the_spec_builds_each_row_with_its_builder_and_settings(path):
    spec = DeploySpec(path.name)
    assert spec.row is path and plan_builder(path) is getattr(endpoints, path.plan_builder)
    image = parse_image_uri(IMAGE)
    plan = plan_for(
        spec,
        name="ep",
        role_arn=ROLE,
        region="eu-west-1",
        image=image,
        model_data_url="s3://amzn-s3-demo-bucket/p/model/model.tar.gz",
        data_capture=capture.data_capture_config("s3://amzn-s3-demo-bucket/p/captured", 100),
    )
    environment = plan.model["PrimaryContainer"].get("Environment", {})
    assert (environment.get(ENDPOINT_NAME_ENV) == "ep") is path.decision
    assert ("DataCaptureConfig" in plan.endpoint_config) is path.decision
    variant = plan.endpoint_config["ProductionVariants"][0]
    placed = [p["InstanceType"] for p in variant["InstancePools"]] if path.gpu else [variant["InstanceType"]]
    assert placed == spec.instance_types("eu-west-1")  # what the quota check counts is what the plan places
    if path.gpu:
        with pytest.raises(InvalidInput, match="instance_pools"):
            DeploySpec(path.name, instance_type=placed[0])
    else:
        with pytest.raises(InvalidInput, match="instance_pools is a setting of the GPU path"):
            DeploySpec(path.name, instance_pools=("ml.g5.2xlarge",))
    takes_layers = "n_gpu_layers" in inspect.signature(plan_builder(path)).parameters
    assert path.gpu_layers == takes_layers


@ROWS
def test_each_rows_deploy_step_deploys_a_spec_of_that_row(path, monkeypatch, tmp_path):
    asked = []
    monkeypatch.setattr(deploy_module, "deploy_endpoint", lambda workshop, spec, **kw: asked.append(spec) or spec)
    step = getattr(steps, path.deploy_step)
    step(steps.Workshop(WorkshopConfig(mode="local"), tmp_path / "config.json"))
    assert [spec.path for spec in asked] == [path.name]
    assert steps.CREATES[path.deploy_step][0] == f"config.{path.endpoint_field}"


@ROWS
def test_the_image_a_deploy_uses_is_the_rows(path, tmp_path):
    workshop = steps.Workshop(WorkshopConfig(mode="aws", region="eu-west-1"), tmp_path / "config.json")
    if path.image_variant is None:  # the DLC itself, pinned for the region
        assert recorded_image(workshop, path) == images.pinned_dlc("eu-west-1", path.dlc_variant)
    else:
        workshop.remember(**{f"decision_image_{path.image_variant}": IMAGE})
        assert recorded_image(workshop, path).uri == IMAGE
        assert deploy_paths.for_image(path.image_variant) is path
        assert (Path(__file__).parents[2] / "container" / path.dockerfile).is_file()


@ROWS
def test_the_quota_check_counts_the_rows_instance_types(path):
    config = WorkshopConfig(mode="aws", region="af-south-1", deploy_path=path.name)
    standard = DeploySpec(deploy_paths.STANDARD.name).instance_types("af-south-1")
    mine = DeploySpec(path.name).instance_types("af-south-1") if path.decision else []
    assert instance_types_for(config) == standard + mine


@ROWS
def test_the_decision_endpoint_is_the_rows_or_the_default_decision_path(path, tmp_path):
    local = steps.Workshop(WorkshopConfig(mode="local", deploy_path=path.name), tmp_path / "config.json")
    expected = path if path.decision else deploy_paths.DEFAULT_DECISION
    assert steps.decision_endpoint(local) == local.config.endpoint_name(expected)
    on_aws = steps.Workshop(WorkshopConfig(mode="aws", deploy_path=path.name), tmp_path / "config.json")
    if path.decision:
        assert steps.decision_endpoint(on_aws) == on_aws.config.endpoint_name(path)
    else:
        with pytest.raises(steps.StepError, match="no decision endpoint"):
            steps.decision_endpoint(on_aws)


def test_no_module_but_the_table_spells_a_deploy_path():
    """A path's name in quotes, or compared with (``standard`` is also botocore's retry mode), is the table's."""
    root = Path(__file__).parents[2] / "workshop_lib"
    spelled = re.compile(
        "|".join(
            rf"""[=!]= *["']{re.escape(name)}["']|["']{re.escape(name)}["']"""
            if "-" in name
            else rf"""[=!]= *["']{re.escape(name)}["']"""
            for name in deploy_paths.NAMES
        )
    )
    found = [
        f"{path.relative_to(root)}:{n}"
        for path in sorted(root.rglob("*.py"))
        if path.name != "deploy_paths.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if spelled.search(line)
    ]
    assert found == []


def test_build_image_offers_each_decision_rows_image_and_refuses_a_dockerfile_of_another(capsys):
    sub = build_parser()._subparsers._group_actions[0].choices["build-image"]
    choices = {a.dest: tuple(a.choices) for a in sub._actions if a.choices}
    assert choices["variant"] == tuple(p.image_variant for p in deploy_paths.decision_paths())
    assert choices["dockerfile"] == tuple(p.dockerfile for p in deploy_paths.decision_paths())
    cpu, gpu = deploy_paths.DECISION_CPU, deploy_paths.DECISION_GPU
    assert main(["build-image", "--dockerfile", cpu.dockerfile, "--variant", gpu.image_variant]) == 1
    error = capsys.readouterr().err
    assert f"--dockerfile {cpu.dockerfile} is the {cpu.label} image" in error and gpu.dockerfile in error

"""One frozen deploy specification, and planning that sends, prints and writes nothing."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json

import pytest

from workshop_lib.aws import capture, endpoints, images, instance_types
from workshop_lib.aws.deploy_spec import ENDPOINT_NAME_ENV, DeploySpec, plan_for
from workshop_lib.aws.images import parse_image_uri
from workshop_lib.config import WorkshopConfig
from workshop_lib.errors import InvalidInput
from workshop_lib.steps import StepNotRun, Workshop, deploy_plan

ROLE = "arn:aws:iam::111122223333:role/sagemaker-workshop"
BUCKET = "amzn-s3-demo-bucket"
DECISION_IMAGE = "111122223333.dkr.ecr.eu-west-1.amazonaws.com/decision-workshop@sha256:" + "ab" * 32


class NoCallsMode:
    """A mode whose every client fails on any attribute: planning must never reach one."""

    name = "aws"
    calls = None

    def __init__(self):
        self.asked: list[str] = []

    def client(self, service: str, region: str):
        self.asked.append(service)
        raise AssertionError(f"planning asked for a {service} client")

    def build_runner(self, clients):
        raise AssertionError("planning asked for the build runner")

    def hosting(self, clients):
        raise AssertionError("planning asked for the hosting")

    def acting_as(self, principal):
        return contextlib.nullcontext()

    def forget(self):
        pass


@pytest.fixture
def workshop(tmp_path):
    config = WorkshopConfig(mode="aws", region="eu-west-1", bucket=BUCKET, sagemaker_role_arn=ROLE)
    made = Workshop(config, tmp_path / "config.json")
    made.remember(
        model_data_url=config.model_data_url, decision_image_cpu=DECISION_IMAGE, decision_image_gpu=DECISION_IMAGE
    )
    made.mode = NoCallsMode()
    return made


def _files(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    "spec",
    [
        DeploySpec("standard"),
        DeploySpec("decision-cpu", threads=8),
        DeploySpec("decision-gpu", instance_pools=("ml.g5.2xlarge",), n_gpu_layers=10),
    ],
    ids=lambda s: s.path,
)
def test_planning_sends_prints_and_writes_nothing(workshop, tmp_path, spec, capsys):
    before = _files(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        plan = deploy_plan(workshop, spec)
    assert workshop.mode.asked == [] and out.getvalue() == "" and err.getvalue() == ""
    assert capsys.readouterr() == ("", "")
    assert _files(tmp_path) == before  # no outputs.json change, no file beside it
    assert plan.name == workshop.config.endpoint_name(spec.path)
    assert plan.model["ExecutionRoleArn"] == ROLE and plan.model_data_url == workshop.config.model_data_url


def test_the_standard_plan_takes_the_pinned_dlc_without_looking_it_up(workshop):
    plan = deploy_plan(workshop, DeploySpec("standard"))
    assert plan.image_uri == images.pinned_dlc_uri("eu-west-1", "cpu")
    workshop.remember(follow_dlc_tag=True)  # notebook 02 chose the floating tag: its recorded digest is used
    with pytest.raises(StepNotRun, match="02_deploy_standard_endpoint"):
        deploy_plan(workshop, DeploySpec("standard"))
    followed = images.pinned_dlc_uri("eu-west-1", "cpu").split("@")[0] + "@sha256:" + "cd" * 32
    workshop.remember(dlc_cpu=followed)
    assert deploy_plan(workshop, DeploySpec("standard")).image_uri == followed


def test_the_spec_is_passed_down_unchanged_to_the_builder(workshop):
    spec = DeploySpec(
        "decision-gpu",
        instance_pools=["ml.g6.2xlarge", "ml.g5.2xlarge"],
        provision_timeout_s=900,
        ctx_size=2048,
        startup_timeout_s=600,
    )
    assert spec.instance_pools == ("ml.g6.2xlarge", "ml.g5.2xlarge")  # a list given becomes a tuple: hashable
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.threads = 4
    plan = deploy_plan(workshop, spec)
    built = endpoints.decision_gpu_plan(
        plan.name,
        image=parse_image_uri(DECISION_IMAGE),
        role_arn=ROLE,
        model_data_url=workshop.config.model_data_url,
        region="eu-west-1",
        instance_pools=("ml.g6.2xlarge", "ml.g5.2xlarge"),
        provision_timeout_s=900,
        ctx_size=2048,
        startup_timeout_s=600,
        # what every decision deploy adds: its name for the adapter's metric
        # lines, and data capture as the config asks
        environment={ENDPOINT_NAME_ENV: plan.name},
        data_capture=capture.data_capture_config(
            capture.destination_uri(workshop.config), workshop.config.capture_percent
        ),
    )
    assert plan.endpoint_config["DataCaptureConfig"]["InitialSamplingPercentage"] == 100  # the config's default
    assert json.loads(plan.to_json()) == json.loads(built.to_json())


def test_settings_left_out_take_the_builders_defaults():
    plan = plan_for(
        DeploySpec("decision-cpu"),
        name="cpu",
        role_arn=ROLE,
        region="eu-west-1",
        image=parse_image_uri(DECISION_IMAGE),
        model_data_url=f"s3://{BUCKET}/decision-workshop/model/model.tar.gz",
    )
    variant = plan.endpoint_config["ProductionVariants"][0]
    assert variant["InstanceType"] == endpoints.DECISION_CPU_INSTANCE
    assert plan.model["PrimaryContainer"]["Environment"]["SM_LLAMA_CPP_THREADS"] == str(
        instance_types.vcpus(endpoints.DECISION_CPU_INSTANCE)
    )
    assert DeploySpec("decision-cpu").settings() == {}


@pytest.mark.parametrize(
    "path, settings, needle",
    [
        ("decision-x", {}, "not one of standard, decision-cpu, decision-gpu"),
        ("decision-cpu", {"instance_pools": ("ml.g5.2xlarge",)}, "instance_pools is a setting of the GPU path"),
        ("decision-cpu", {"n_gpu_layers": 10}, "n_gpu_layers is a setting of the GPU path"),
        ("standard", {"provision_timeout_s": 600}, "provision_timeout_s is a setting of the GPU path"),
        ("decision-gpu", {"instance_type": "ml.g5.2xlarge"}, "instance_pools=('ml.g5.2xlarge',)"),
    ],
)
def test_a_setting_its_path_does_not_take_is_refused_by_name(path, settings, needle):
    with pytest.raises(InvalidInput) as refused:
        DeploySpec(path, **settings)
    assert needle in str(refused.value)

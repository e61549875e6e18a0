"""The deploy steps where regions differ, in AWS mode against moto: the DLC pins a region's registry
may lack (notebook 02's choice to follow the tag), the GPU plan where pools are not offered, the model
folder every URI must be in, and the deadline every endpoint gets."""

from __future__ import annotations

import json
import re

import pytest

from workshop_lib.aws import images, spend_guard
from workshop_lib.config import WorkshopConfig
from workshop_lib.errors import InvalidInput
from workshop_lib.local import stand_ins

from .values import DECISION_PINNED, ROLE

BUCKET = "sagemaker-decision-workshop-test"


@pytest.fixture
def workshop_in(tmp_path, monkeypatch, fake_credentials):
    """A Workshop in AWS mode inside moto, in the region asked for, with a packaged model recorded."""
    from moto import mock_aws

    from workshop_lib import steps

    monkeypatch.setenv("WORKSHOP_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.setenv("WORKSHOP_MODE", "aws")
    with mock_aws():

        def make(region: str, **fields):
            config = WorkshopConfig(
                mode="aws", region=region, bucket=BUCKET, sagemaker_role_arn=ROLE, codebuild_role_arn=ROLE, **fields
            )
            workshop = steps.Workshop(config, tmp_path / "config.json")
            s3 = workshop.clients.s3
            if region == "us-east-1":
                s3.create_bucket(Bucket=BUCKET)
                s3.put_object(Bucket=BUCKET, Key="decision-workshop/model/model.tar.gz", Body=b"packaged")
            workshop.remember(model_data_url=config.model_data_url)
            return workshop

        yield make


def test_where_the_region_holds_the_pins_nothing_is_asked(workshop_in):
    from workshop_lib import steps

    workshop = workshop_in("us-east-1", deploy_path="decision-gpu")
    stand_ins.seed_dlc(workshop.clients.ecr)
    text = steps.check_dlc_pins(workshop, follow_tag=True)
    assert text.ok and text.count("present in the us-east-1 DLC registry") == 2  # cpu and cuda
    assert workshop.outputs()["follow_dlc_tag"] is False  # the box changes nothing here


def test_a_missing_pin_stops_unless_following_the_tag_was_chosen(workshop_in):
    from workshop_lib import steps

    workshop = workshop_in("us-east-1")
    ecr = workshop.clients.ecr
    ecr.create_repository(repositoryName="llama-cpp", registryId=images.DEFAULT_DLC_ACCOUNT)
    stand_ins.push_stand_in(
        ecr,
        "llama-cpp",
        "server-sagemaker-cpu-v1",
        "another build of the tag",
        "3" * 64,
        registry_id=images.DEFAULT_DLC_ACCOUNT,
    )
    refused = steps.check_dlc_pins(workshop)  # the notebook's headless default: "no"
    assert not refused.ok and "MISSING from the us-east-1 DLC registry" in refused
    assert "choose 'yes' above" in refused and workshop.outputs()["follow_dlc_tag"] is False
    with pytest.raises(InvalidInput, match="build-time proof"):
        steps.deploy_standard(workshop, progress=False)  # the pin is looked up before anything is created
    chosen = steps.check_dlc_pins(workshop, follow_tag=True)
    assert chosen.ok and "notebook 03's image build proves them" in chosen
    assert workshop.outputs()["follow_dlc_tag"] is True
    with pytest.warns(UserWarning, match="bindings proof stops the build"):
        followed = steps.resolve_dlc(workshop, "cpu")  # notebook 02 resolves (and records) the tag's digest
    plan = steps.deploy_plan(workshop, steps.DeploySpec("standard"))  # the standard DLC follows the tag now
    assert plan.image_uri == followed
    assert plan.image_uri.startswith(f"{images.DEFAULT_DLC_ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/llama-cpp@")
    assert not plan.image_uri.endswith(images.DLC_PINS["cpu"].digest)
    with pytest.warns(UserWarning):
        assert steps.resolve_dlc(workshop, "cpu") == plan.image_uri  # and so does notebook 03's build


def test_the_gpu_plan_in_a_region_without_pools(workshop_in):
    from workshop_lib import steps
    from workshop_lib.aws import calls

    workshop = workshop_in("af-south-1", deploy_path="decision-gpu")
    image = DECISION_PINNED.replace("us-east-1", "af-south-1")
    plan = steps.deploy_plan(
        workshop, steps.DeploySpec("decision-gpu", image, instance_pools=("ml.g5.2xlarge", "ml.g4dn.2xlarge"))
    )
    variant = plan.endpoint_config["ProductionVariants"][0]
    assert variant["InstanceType"] == "ml.g5.2xlarge" and "InstancePools" not in variant
    calls.validate("sagemaker", "CreateEndpointConfig", plan.endpoint_config)
    assert "not offered in af-south-1" in plan.notes[0]
    shown = str(steps.EndpointResult(plan.name, plan, "Creating", "SageMaker"))
    assert "instances: ml.g5.2xlarge (fixed)" in shown and "note: instance pools are not offered" in shown
    pooled = steps.deploy_plan(
        workshop_in("eu-west-1", deploy_path="decision-gpu"),
        steps.DeploySpec("decision-gpu", DECISION_PINNED.replace("us-east-1", "eu-west-1")),
    )
    assert pooled.uses_instance_pools and pooled.notes == ()


def test_a_model_outside_the_workshops_folder_is_refused_before_anything_is_sent(workshop_in):
    from workshop_lib import steps

    workshop = workshop_in("us-east-1", deploy_path="decision-cpu")
    sm = workshop.clients.sm
    with pytest.raises(InvalidInput, match=f"s3://{BUCKET}/decision-workshop/model/"):
        steps.deploy_decision_cpu(workshop, DECISION_PINNED, model_data_url="s3://elsewhere-1/semif/model.tar.gz")
    with pytest.raises(InvalidInput):
        steps.package_model(workshop, model_s3_uri="s3://elsewhere-1/semif/")
    assert sm.list_models()["Models"] == [] and workshop.clients.codebuild.list_projects()["projects"] == []


def test_every_endpoint_the_step_creates_gets_its_deadline(workshop_in):
    from workshop_lib import steps

    workshop = workshop_in("us-east-1", endpoint_ttl_hours="2", deploy_path="decision-cpu")
    c = workshop.clients
    result = steps.deploy_decision_cpu(workshop, DECISION_PINNED, instance_type="ml.c5.2xlarge", wait=False)
    assert result.plan.model["EnableNetworkIsolation"] is True
    name = workshop.config.cpu_endpoint_name
    assert f"deadline: endpoint {name} is deleted at " in str(result)
    stored = c.get("scheduler").get_schedule(Name=spend_guard.schedule_name(name))
    assert json.loads(stored["Target"]["Input"]) == {"EndpointName": name}
    assert stored["Target"]["RoleArn"].endswith(":role/decision-workshop-scheduler")
    role = c.get("iam").get_role(RoleName=spend_guard.SCHEDULER_ROLE_NAME)["Role"]
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert steps.deadline_text(workshop, name).startswith(f"endpoint {name} is deleted at ")
    moved = steps.extend_deadline(workshop, name, 6)
    assert moved.ok and re.search(r"\(in (6 h 0|5 h 59) min\)", moved)


def test_no_deadline_when_the_config_says_0_and_a_loud_note_when_it_may_not_be_set(workshop_in):
    from workshop_lib import steps

    workshop = workshop_in("us-east-1", endpoint_ttl_hours="0", deploy_path="decision-cpu")
    result = steps.deploy_decision_cpu(workshop, DECISION_PINNED, instance_type="ml.c5.2xlarge", wait=False)
    assert "deadline: none (endpoint_ttl_hours is 0)" in str(result)
    assert "has no deadline" in steps.deadline_text(workshop, workshop.config.cpu_endpoint_name)

    guarded = workshop_in("us-east-1")
    scheduler = guarded.clients.get("scheduler")

    class Denied:
        status_code = 400

    scheduler.meta.events.register(
        "before-call.scheduler.CreateSchedule",
        lambda **_: (
            Denied(),
            {
                "Error": {
                    "Code": "AccessDeniedException",
                    "Message": "not authorized to perform scheduler:CreateSchedule",
                }
            },
        ),
    )
    result = steps.deploy_standard(
        guarded, images.pinned_dlc_uri("us-east-1"), instance_type="ml.c5.2xlarge", wait=False
    )
    text = str(result)
    assert result.status and "deadline: NOT SET (AccessDeniedException" in text and "bills until it is deleted" in text


def test_notebook_00_saves_the_deadline_later_deploys_use(workshop_in):
    from workshop_lib import steps

    workshop = workshop_in("us-east-1", deploy_path="decision-cpu")
    assert "deleted 2.5 h after it was created" in steps.set_endpoint_ttl(workshop, 2.5)
    assert steps.Workshop.load(workshop.path).config.endpoint_ttl_hours == "2.5"
    assert "no deadline" in steps.set_endpoint_ttl(workshop, 0)
    with pytest.raises(Exception, match="WORKSHOP_ENDPOINT_TTL_HOURS"):
        steps.set_endpoint_ttl(workshop, 0.1)
    steps.set_endpoint_ttl(workshop, 1)
    result = steps.deploy_decision_cpu(workshop, DECISION_PINNED, instance_type="ml.c5.2xlarge", wait=False)
    assert re.search(r"\(in (1 h 0|59) min\)", str(result))


def test_the_capture_share_chosen_in_notebook_04_is_what_the_decision_endpoint_records(workshop_in):
    from workshop_lib import steps

    workshop = workshop_in("us-east-1", deploy_path="decision-cpu")
    assert "25 % of their invocations" in steps.set_capture_percent(workshop, 25)
    assert steps.Workshop.load(workshop.path).config.capture_percent == "25"
    with pytest.raises(Exception, match="WORKSHOP_CAPTURE_PERCENT"):
        steps.set_capture_percent(workshop, 101)
    steps.deploy_decision_cpu(workshop, DECISION_PINNED, instance_type="ml.c5.2xlarge", wait=False)
    sm = workshop.clients.sm
    [config] = sm.list_endpoint_configs()["EndpointConfigs"]
    sent = sm.describe_endpoint_config(EndpointConfigName=config["EndpointConfigName"])["DataCaptureConfig"]
    assert sent["InitialSamplingPercentage"] == 25 and sent["EnableCapture"] is True
    assert "no data capture" in steps.set_capture_percent(workshop, 0)


def test_a_bad_deadline_setting_is_refused_before_the_endpoint_is_created(workshop_in):
    from workshop_lib import steps
    from workshop_lib.errors import InvalidInput

    workshop = workshop_in("us-east-1", deploy_path="decision-cpu", endpoint_ttl_hours="forever")
    with pytest.raises(InvalidInput, match="WORKSHOP_ENDPOINT_TTL_HOURS"):
        steps.deploy_decision_cpu(workshop, DECISION_PINNED, instance_type="ml.c5.2xlarge", wait=False)
    assert workshop.clients.sm.list_models()["Models"] == []  # nothing that could bill without a deadline


# ---- partitions and regions without pools -------------------------------------------------------------------------


def test_outside_the_pool_regions_the_gpu_endpoint_gets_the_widely_offered_type_and_the_quota_row_counts_it(
    workshop_in,
):
    import importlib

    from workshop_lib import steps
    from workshop_lib.aws import endpoints

    quotas = importlib.import_module("workshop_lib.steps.quotas")
    workshop = workshop_in("af-south-1", deploy_path="decision-gpu")
    plan = steps.deploy_plan(
        workshop, steps.DeploySpec("decision-gpu", DECISION_PINNED.replace("us-east-1", "af-south-1"))
    )
    variant = plan.endpoint_config["ProductionVariants"][0]
    assert variant["InstanceType"] == endpoints.FIXED_GPU_INSTANCE != endpoints.DEFAULT_GPU_POOLS[0]  # not g6e
    assert f"runs on one type, {endpoints.FIXED_GPU_INSTANCE}" in plan.notes[0]
    assert quotas.instance_types_for(workshop.config)[1:] == [variant["InstanceType"]]  # the quota the plan needs
    passed, detail = quotas.quota_verdict(
        workshop.config,
        {endpoints.STANDARD_CPU_INSTANCE: 1, endpoints.DEFAULT_GPU_POOLS[0]: 4, endpoints.FIXED_GPU_INSTANCE: 0},
    )
    assert passed is False and f"{endpoints.FIXED_GPU_INSTANCE} has no quota" in detail


@pytest.mark.parametrize("region", ["us-gov-west-1", "us-gov-east-1"])
def test_govcloud_is_refused_where_the_dlc_is_looked_up_not_sent_to_the_commercial_registry(workshop_in, region):
    from workshop_lib import steps

    workshop = workshop_in(region)
    with pytest.raises(InvalidInput, match=f"AWS publishes no llama.cpp DLC in {region}"):
        steps.deploy_plan(workshop, steps.DeploySpec("standard"))
    with pytest.raises(InvalidInput, match="no llama.cpp DLC"):
        images.dlc_image_uri(region)


def test_me_west_1_has_its_own_dlc_registry():
    assert images.dlc_image_uri("me-west-1").startswith("124382933778.dkr.ecr.me-west-1.amazonaws.com/llama-cpp:")


@pytest.mark.parametrize(
    "region, host",
    [
        ("us-east-1", "us-east-1.console.aws.amazon.com"),
        ("us-gov-west-1", "console.amazonaws-us-gov.com"),
        ("cn-north-1", "console.amazonaws.cn"),
    ],
)
def test_the_dashboard_link_opens_the_console_of_the_regions_partition(workshop_in, region, host):
    from workshop_lib import steps

    workshop = workshop_in(region, deploy_path="decision-cpu")
    shown = steps.put_alarms(workshop)
    link = next(line for line in shown.splitlines() if line.startswith("dashboard: "))
    assert link == (
        f"dashboard: https://{host}/cloudwatch/home?region={region}"
        f"#dashboards/dashboard/{steps.operate.alarms.DASHBOARD}"
    )


def test_a_scale_to_zero_endpoints_deadline_text_says_when_its_component_goes_then_when_it_does(workshop_in):
    from datetime import datetime

    from workshop_lib import steps
    from workshop_lib.aws import inference_components
    from workshop_lib.steps.deadlines import give_deadline

    workshop = workshop_in("us-east-1")
    name = inference_components.ZERO_ENDPOINT
    component = inference_components.component_name(name)
    assert "deleted at" in give_deadline(workshop, name, 4, component=component)
    first, second = str(steps.deadline_text(workshop, name)).splitlines()
    assert first.startswith(f"inference component {component} (on endpoint {name}) is deleted at ")
    assert second.startswith(f"endpoint {name} is deleted at ")
    at = [
        datetime.strptime(re.search(r"deleted at (\S+ \S+) UTC", line)[1], "%Y-%m-%d %H:%M") for line in (first, second)
    ]
    assert at[1] - at[0] == spend_guard.COMPONENT_MARGIN  # the endpoint's goes a margin after its component's

    spend_guard.remove_deadline(workshop.clients.get("scheduler"), name, component)
    # no endpoint of that name hosts a component here: its own schedule alone is said
    assert str(steps.deadline_text(workshop, name)).startswith(f"endpoint {name} is deleted at ")
    assert "\n" not in str(steps.deadline_text(workshop, name))

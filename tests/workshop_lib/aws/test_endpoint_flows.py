"""The senders, against moto where moto knows the feature, else a botocore Stubber
(those tests say "stubber" in their name). moto's SageMaker rejects InstancePools and
newer instance types such as ml.c6i.*, so the moto flows use ml.c5.2xlarge."""

import time

import pytest

from workshop_lib.aws import endpoints, hosting, scaling
from workshop_lib.aws.endpoints import decision_gpu_plan, standard_plan
from workshop_lib.aws.hosting import DeployError, deploy, wait_in_service
from workshop_lib.aws.images import MutableImageReference, parse_image_uri
from workshop_lib.errors import AwsFailure, InvalidInput, WorkshopTimeout

from .values import DECISION_PINNED, DLC_PINNED, MODEL_DATA, REGION, ROLE

MOTO_CPU = "ml.c5.2xlarge"  # in moto's instance-type list, unlike ml.c6i.*


def moto_plan(name="decision-workshop-standard", **kw):
    return standard_plan(
        name, image=parse_image_uri(DLC_PINNED), role_arn=ROLE, model_data_url=MODEL_DATA, instance_type=MOTO_CPU, **kw
    )


# ---- moto -----------------------------------------------------------------------------------------------


def test_deploy_standard_endpoint_against_moto(clients):
    described = deploy(clients.sm, moto_plan(), region=REGION, progress=False, poll_s=0)
    assert described["EndpointName"] == "decision-workshop-standard"
    assert described["EndpointStatus"] == "InService"
    model = clients.sm.describe_model(ModelName="decision-workshop-standard")
    assert model["PrimaryContainer"]["Image"] == DLC_PINNED
    assert model["PrimaryContainer"]["ModelDataUrl"] == MODEL_DATA
    assert model["PrimaryContainer"]["Environment"] == {"SM_LLAMA_CPP_CTX_SIZE": "4096"}
    config = clients.sm.describe_endpoint_config(EndpointConfigName="decision-workshop-standard")
    assert config["ProductionVariants"][0]["InstanceType"] == MOTO_CPU
    assert config["ProductionVariants"][0]["ModelName"] == "decision-workshop-standard"
    for arn in (model["ModelArn"], config["EndpointConfigArn"], described["EndpointArn"]):
        tags = {t["Key"]: t["Value"] for t in clients.sm.list_tags(ResourceArn=arn)["Tags"]}
        assert tags == {"workshop": "decision-workshop", "created-by": "workshop_lib"}


def test_deploy_without_waiting_returns_the_description(clients):
    described = deploy(clients.sm, moto_plan("no-wait"), region=REGION, wait=False)
    assert described["EndpointName"] == "no-wait"


def test_deploy_refuses_a_bucket_in_another_region_before_creating_anything(clients):
    clients.s3.create_bucket(
        Bucket="decision-workshop-test", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
    )
    with pytest.raises(InvalidInput, match="eu-west-1"):
        deploy(clients.sm, moto_plan(), region=REGION, s3_client=clients.s3, progress=False)
    assert clients.sm.list_models()["Models"] == []
    assert clients.sm.list_endpoints()["Endpoints"] == []


def test_deploy_accepts_a_bucket_in_the_endpoint_region(clients):
    clients.s3.create_bucket(Bucket="decision-workshop-test")
    assert (
        deploy(clients.sm, moto_plan(), region=REGION, s3_client=clients.s3, progress=False, poll_s=0)["EndpointStatus"]
        == "InService"
    )


def test_deploy_refuses_an_image_from_another_region_than_the_clients(clients):
    plan = moto_plan()
    other = endpoints.DeployPlan(
        model={
            **plan.model,
            "PrimaryContainer": {**plan.model["PrimaryContainer"], "Image": DLC_PINNED.replace(REGION, "eu-west-1")},
        },
        endpoint_config=plan.endpoint_config,
        endpoint=plan.endpoint,
    )
    assert clients.sm.meta.region_name == REGION == "us-east-1"
    with pytest.raises(InvalidInput, match="is in eu-west-1 but the endpoint region is us-east-1"):
        deploy(clients.sm, other, progress=False)  # no region given: the client's
    assert clients.sm.list_models()["Models"] == []


def test_deploy_checks_the_region_it_is_given_not_the_clients(clients):
    with pytest.raises(InvalidInput, match="the endpoint region is eu-west-1"):
        deploy(clients.sm, moto_plan(), region="eu-west-1", progress=False)
    assert clients.sm.list_models()["Models"] == []


def test_senders_refuse_a_mutable_image_even_in_a_hand_made_request(clients):
    plan = moto_plan()
    request = {
        **plan.model,
        "PrimaryContainer": {
            **plan.model["PrimaryContainer"],
            "Image": DLC_PINNED.split("@")[0] + ":server-sagemaker-cpu-v1",
        },
    }
    with pytest.raises(MutableImageReference):
        hosting.create_model(clients.sm, request)
    tampered = endpoints.DeployPlan(model=request, endpoint_config=plan.endpoint_config, endpoint=plan.endpoint)
    with pytest.raises(MutableImageReference):
        deploy(clients.sm, tampered, region=REGION, progress=False)
    assert clients.sm.list_models()["Models"] == []


def test_moto_cannot_take_instance_pools(clients):
    """Documents why the pooled flow below uses a Stubber: moto 5 refuses the shape."""
    from botocore.exceptions import ClientError

    plan = decision_gpu_plan("gpu", image=parse_image_uri(DECISION_PINNED), role_arn=ROLE, model_data_url=MODEL_DATA)
    hosting.create_model(clients.sm, plan.model)
    with pytest.raises((ClientError, DeployError)):
        hosting.create_endpoint_config(clients.sm, plan.endpoint_config)


def _put_logs(logs, endpoint, messages):
    group = hosting.log_group(endpoint)
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="AllTraffic/i-0abc")
    now = int(time.time() * 1000)
    logs.put_log_events(
        logGroupName=group,
        logStreamName="AllTraffic/i-0abc",
        logEvents=[{"timestamp": now + i, "message": m} for i, m in enumerate(messages)],
    )


def test_offload_lines_from_moto_logs(clients):
    _put_logs(
        clients.logs,
        "gpu",
        [
            "llama_model_loader: loaded meta data with 40 key-value pairs",
            "load_tensors: offloading 34 repeating layers to GPU",
            "load_tensors: offloaded 35/35 layers to GPU",
            "main: server is listening on http://127.0.0.1:8081",
        ],
    )
    found = hosting.offload_log_lines(clients.logs, "gpu")
    assert [(f.offloaded, f.total) for f in found] == [(35, 35)]
    assert found[0].log_stream == "AllTraffic/i-0abc"
    assert hosting.offload_log_lines(clients.logs, "no-such-endpoint") == []


def test_endpoint_log_lines_are_the_first_lines(clients):
    _put_logs(clients.logs, "e", [f"line {i}" for i in range(30)])
    assert hosting.endpoint_log_lines(clients.logs, "e", limit=3) == ["line 0", "line 1", "line 2"]


def test_autoscaling_against_moto(clients):
    deploy(clients.sm, moto_plan("scaled"), region=REGION, progress=False, poll_s=0)
    arn = scaling.enable_autoscaling(
        clients.autoscaling,
        "scaled",
        invocations_per_instance=12.0,
        min_instances=1,
        max_instances=4,
        scale_in_cooldown_s=600,
    )
    assert "scaled" in arn
    target = clients.autoscaling.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"][0]
    assert (target["ResourceId"], target["MinCapacity"], target["MaxCapacity"]) == (
        "endpoint/scaled/variant/AllTraffic",
        1,
        4,
    )
    policy = clients.autoscaling.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"][0]
    config = policy["TargetTrackingScalingPolicyConfiguration"]
    assert config["TargetValue"] == 12.0
    assert config["ScaleInCooldown"] == 600 and config["ScaleOutCooldown"] == 60
    assert config["PredefinedMetricSpecification"]["PredefinedMetricType"] == "SageMakerVariantInvocationsPerInstance"


# ---- stubber ------------------------------------------------------------------------------------------------


def _describe(name, status, **extra):
    return {
        "EndpointName": name,
        "EndpointArn": f"arn:aws:sagemaker:{REGION}:123456789012:endpoint/{name}",
        "EndpointConfigName": name,
        "EndpointStatus": status,
        "CreationTime": "2026-01-01T00:00:00Z",
        "LastModifiedTime": "2026-01-01T00:00:00Z",
        **extra,
    }


def test_deploy_gpu_instance_pools_stubber(stub_sm):
    sm, stub = stub_sm
    plan = decision_gpu_plan(
        "semif-decision-gpu",
        image=parse_image_uri(DECISION_PINNED),
        role_arn=ROLE,
        model_data_url=MODEL_DATA,
        provision_timeout_s=1800,
    )
    arn = f"arn:aws:sagemaker:{REGION}:123456789012:"
    stub.add_response("create_model", {"ModelArn": arn + "model/semif-decision-gpu"}, plan.model)
    stub.add_response(
        "create_endpoint_config",
        {"EndpointConfigArn": arn + "endpoint-config/semif-decision-gpu"},
        plan.endpoint_config,
    )
    stub.add_response("create_endpoint", {"EndpointArn": arn + "endpoint/semif-decision-gpu"}, plan.endpoint)
    name = {"EndpointName": "semif-decision-gpu"}
    stub.add_response("describe_endpoint", _describe("semif-decision-gpu", "Creating"), name)
    pools = [
        {"InstanceType": "ml.g6e.xlarge", "CurrentInstanceCount": 0},
        {"InstanceType": "ml.g6.2xlarge", "CurrentInstanceCount": 1},
    ]
    stub.add_response(
        "describe_endpoint",
        _describe(
            "semif-decision-gpu",
            "InService",
            ProductionVariants=[{"VariantName": "AllTraffic", "CurrentInstanceCount": 1, "InstancePools": pools}],
        ),
        name,
    )

    described = deploy(sm, plan, region=REGION, progress=False, poll_s=0)
    assert described["EndpointStatus"] == "InService"
    assert hosting.placed_instance_types(described) == {"ml.g6.2xlarge": 1}
    sent = plan.endpoint_config["ProductionVariants"][0]
    assert sent["VariantInstanceProvisionTimeoutInSeconds"] == 1800
    assert [p["InstanceType"] for p in sent["InstancePools"]] == list(endpoints.DEFAULT_GPU_POOLS)


def test_existing_name_says_how_to_clean_up_stubber(stub_sm):
    # moto overwrites an existing model silently; SageMaker refuses, as stubbed here.
    sm, stub = stub_sm
    plan = moto_plan("taken")
    stub.add_client_error(
        "create_model",
        "ValidationException",
        'Cannot create already existing model "arn:aws:sagemaker:us-east-1:123456789012:model/taken".',
        400,
        expected_params=plan.model,
    )
    with pytest.raises(DeployError) as err:
        deploy(sm, plan, region=REGION, progress=False)
    assert "delete_endpoint_resources(sm, 'taken')" in str(err.value)
    assert "Already created" not in str(err.value)


def test_quota_error_is_explained_stubber(stub_sm):
    sm, stub = stub_sm
    plan = moto_plan("quota")
    stub.add_response("create_model", {"ModelArn": "arn:aws:sagemaker:us-east-1:123456789012:model/quota"}, plan.model)
    stub.add_response(
        "create_endpoint_config",
        {"EndpointConfigArn": "arn:aws:sagemaker:us-east-1:123456789012:endpoint-config/quota"},
        plan.endpoint_config,
    )
    stub.add_client_error(
        "create_endpoint",
        "ResourceLimitExceeded",
        "The account-level service limit 'ml.c5.2xlarge for endpoint usage' is 0 Instances",
        400,
        expected_params=plan.endpoint,
    )
    with pytest.raises(DeployError) as err:
        deploy(sm, plan, region=REGION, progress=False)
    message = str(err.value)
    assert "Service Quotas" in message
    # so the participant can clean up what was made before the refusal
    assert "Already created: model quota, endpoint config quota" in message


def test_wait_failed_shows_reason_and_first_log_lines_stubber(stub_sm, clients):
    sm, stub = stub_sm
    _put_logs(clients.logs, "broken", ["gguf_init_from_file: failed to open GGUF file", "error: model not found"])
    stub.add_response("describe_endpoint", _describe("broken", "Creating"), {"EndpointName": "broken"})
    stub.add_response(
        "describe_endpoint",
        _describe(
            "broken",
            "Failed",
            FailureReason="The primary container for production variant AllTraffic did not pass the ping health check.",
        ),
        {"EndpointName": "broken"},
    )
    with pytest.raises(AwsFailure) as err:
        wait_in_service(sm, "broken", poll_s=0, progress=False, logs_client=clients.logs)
    failure = err.value
    assert str(failure).startswith("endpoint broken is Failed: ")
    assert "did not pass the ping health check" in str(failure)
    assert (
        "first log lines of /aws/sagemaker/Endpoints/broken:\n  gguf_init_from_file: failed to open GGUF file\n"
        "  error: model not found\n"
    ) in str(failure)
    assert "delete_endpoint_resources" in str(failure)


def test_the_failure_reason_comes_through_when_logs_may_not_be_read_stubber(stub_sm, clients):
    sm, stub = stub_sm

    class Denied:
        status_code = 400

    clients.logs.meta.events.register(  # a Studio role without logs:FilterLogEvents
        "before-call.cloudwatch-logs.FilterLogEvents",
        lambda **_: (Denied(), {"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}),
    )
    stub.add_response(
        "describe_endpoint",
        _describe("broken", "Failed", FailureReason="The primary container did not pass the ping health check."),
        {"EndpointName": "broken"},
    )
    with pytest.raises(AwsFailure) as err:
        wait_in_service(sm, "broken", poll_s=0, progress=False, logs_client=clients.logs)
    message = str(err.value)
    assert "did not pass the ping health check" in message
    assert "logs could not be read: AccessDeniedException" in message and "first log lines" not in message


def test_wait_times_out_with_a_clear_state_stubber(stub_sm):
    sm, stub = stub_sm
    for _ in range(3):
        stub.add_response("describe_endpoint", _describe("slow", "Creating"), {"EndpointName": "slow"})
    ticks = iter([0, 0, 100, 200, 200])
    with pytest.raises(WorkshopTimeout, match="still Creating after 150 s"):
        wait_in_service(
            sm, "slow", poll_s=0, timeout_s=150, progress=False, clock=lambda: next(ticks), sleep=lambda s: None
        )


def test_wait_progress_ends_with_the_final_state_stubber(stub_sm, capsys):
    sm, stub = stub_sm
    stub.add_response("describe_endpoint", _describe("e", "Creating"), {"EndpointName": "e"})
    stub.add_response("describe_endpoint", _describe("e", "InService"), {"EndpointName": "e"})
    wait_in_service(sm, "e", poll_s=0, progress=True)
    err = capsys.readouterr().err
    final = err.replace("\r", "\n").strip().splitlines()[-1]
    assert final.startswith("endpoint e: InService after")


# ---- network isolation reaches the emulator, and local hosting keeps it ---------------------------------


def test_the_isolated_models_are_accepted_by_the_emulator(clients):
    sent = []
    clients.sm.meta.events.register(
        "before-parameter-build.sagemaker.CreateModel",
        lambda params, **_: sent.append(params.get("EnableNetworkIsolation")),
    )
    deploy(clients.sm, moto_plan("isolated-standard"), region=REGION, progress=False, poll_s=0)
    deploy(
        clients.sm,
        endpoints.decision_cpu_plan(
            "isolated-cpu",
            image=parse_image_uri(DECISION_PINNED),
            role_arn=ROLE,
            model_data_url=MODEL_DATA,
            instance_type=MOTO_CPU,
        ),
        region=REGION,
        progress=False,
        poll_s=0,
    )
    assert sent == [True, True]
    assert {e["EndpointName"] for e in clients.sm.list_endpoints()["Endpoints"]} == {
        "isolated-standard",
        "isolated-cpu",
    }


def test_local_hosting_sends_the_models_as_built(tmp_path):
    from workshop_lib.local import rehearsal, stand_ins

    local = stand_ins.LocalHosting(None, None, rehearsal.Rehearsal(tmp_path))
    for plan in (
        moto_plan(),
        decision_gpu_plan(
            "isolated-gpu", image=parse_image_uri(DECISION_PINNED), role_arn=ROLE, model_data_url=MODEL_DATA
        ),
    ):
        sent = local.adapt(plan)
        assert sent.model == plan.model and sent.model["EnableNetworkIsolation"] is True


def test_the_after_create_hook_runs_once_the_endpoint_was_accepted(clients):
    called = []
    deploy(
        clients.sm,
        moto_plan("hooked"),
        region=REGION,
        wait=False,
        after_create=lambda name: called.append(
            (name, clients.sm.describe_endpoint(EndpointName=name)["EndpointStatus"])
        ),
    )
    assert called and called[0][0] == "hooked"

    class Refused:
        status_code = 400

    clients.sm.meta.events.register(
        "before-call.sagemaker.CreateEndpoint",
        lambda **_: (
            Refused(),
            {"Error": {"Code": "ValidationException", "Message": 'Cannot create already existing endpoint "theirs".'}},
        ),
    )
    with pytest.raises(DeployError):
        deploy(clients.sm, moto_plan("theirs"), region=REGION, wait=False, after_create=called.append)
    assert len(called) == 1  # a refused deploy sets no deadline (the name may be someone else's)

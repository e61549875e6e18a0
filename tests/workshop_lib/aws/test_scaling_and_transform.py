import copy
import json

import pytest

from tests.support.stand_in import serving
from tests.support.wire import StreamedBody
from workshop_lib.aws import calls, endpoints, hosting, instance_types, scaling, transform, variants
from workshop_lib.aws.images import parse_image_uri
from workshop_lib.aws.scaling import scalable_target_request, scaling_policy_request
from workshop_lib.aws.transform import decisions_to_jsonl, join_transform_output, transform_job_request
from workshop_lib.errors import AwsFailure, InvalidInput

# ---- Application Auto Scaling ------------------------------------------------------------------


def test_scalable_target_request():
    request = scalable_target_request("semif-decision-workflows", min_instances=1, max_instances=6)
    assert request == {
        "ServiceNamespace": "sagemaker",
        "ResourceId": "endpoint/semif-decision-workflows/variant/AllTraffic",
        "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
        "MinCapacity": 1,
        "MaxCapacity": 6,
    }
    calls.validate("application-autoscaling", "RegisterScalableTarget", request)


def test_scaling_policy_request_tracks_invocations_per_instance():
    request = scaling_policy_request(
        "semif-decision-workflows", invocations_per_instance=20, scale_in_cooldown_s=900, scale_out_cooldown_s=120
    )
    config = request["TargetTrackingScalingPolicyConfiguration"]
    assert request["PolicyType"] == "TargetTrackingScaling"
    assert config == {
        "TargetValue": 20.0,
        "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"},
        "ScaleInCooldown": 900,
        "ScaleOutCooldown": 120,
    }
    calls.validate("application-autoscaling", "PutScalingPolicy", request)


def test_scaling_policy_misspelt_field_fails_validation():
    request = copy.deepcopy(scaling_policy_request("e", invocations_per_instance=5))
    request["TargetTrackingScalingPolicyConfiguration"]["ScaleInCoolDown"] = 10
    with pytest.raises(InvalidInput, match="ScaleInCoolDown"):
        calls.validate("application-autoscaling", "PutScalingPolicy", request)


@pytest.mark.parametrize("kw", [{"min_instances": 0}, {"min_instances": 3, "max_instances": 2}, {"max_instances": 101}])
def test_scalable_target_ranges(kw):
    with pytest.raises(InvalidInput):
        scalable_target_request("e", **kw)


@pytest.mark.parametrize(
    "kw",
    [
        {"invocations_per_instance": 0},
        {"invocations_per_instance": 5, "scale_in_cooldown_s": -1},
        {"invocations_per_instance": 5, "scale_out_cooldown_s": -5},
    ],
)
def test_scaling_policy_ranges(kw):
    with pytest.raises(InvalidInput):
        scaling_policy_request("e", **kw)


def test_target_from_seconds_per_decision():
    # 0.5 s per decision: at most 120 a minute per instance; aim at 70 % of that
    assert scaling.target_invocations_per_minute(0.5) == 84.0
    assert scaling.target_invocations_per_minute(2.0, utilisation=0.5) == 15.0


def test_target_from_a_measured_rate():
    # 3.5 decisions/s sustained: 210 a minute per instance; aim at 70 % of that
    assert scaling.target_from_rate(3.5) == 147.0
    assert scaling.target_from_rate(2.0) == scaling.target_invocations_per_minute(0.5)
    assert scaling_policy_request("e", invocations_per_instance=scaling.target_from_rate(0.5))
    for bad in ({"decisions_per_s": 0}, {"decisions_per_s": 2.0, "utilisation": 1.5}):
        with pytest.raises(InvalidInput):
            scaling.target_from_rate(**bad)


# ---- Batch Transform --------------------------------------------------------------------------------


def test_transform_job_request():
    request = transform_job_request(
        "decisions-2026-01-01",
        model_name="semif-decision-workflows",
        input_s3_uri="s3://bkt/decision-workshop/batch/in/",
        output_s3_uri="s3://bkt/decision-workshop/batch/out/",
        instance_count=4,
    )
    calls.validate("sagemaker", "CreateTransformJob", request)
    assert request["BatchStrategy"] == "SingleRecord"
    assert request["MaxConcurrentTransforms"] == 1
    assert request["TransformInput"] == {
        "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://bkt/decision-workshop/batch/in/"}},
        "ContentType": "application/json",
        "SplitType": "Line",
    }
    assert request["TransformOutput"] == {
        "S3OutputPath": "s3://bkt/decision-workshop/batch/out/",
        "Accept": "application/json",
        "AssembleWith": "Line",
    }
    assert request["TransformResources"] == {"InstanceType": "ml.c6i.8xlarge", "InstanceCount": 4}
    assert {t["Key"] for t in request["Tags"]} == {"workshop", "created-by"}


def test_transform_refuses_types_batch_transform_does_not_offer():
    # botocore's lists change between releases: pick a hosting-only type from the installed model
    hosting_only = sorted(set(instance_types.endpoint_instance_types()) - set(transform.transform_instance_types()))
    assert hosting_only, "botocore lists no hosting-only instance type"
    with pytest.raises(InvalidInput, match="Batch Transform instance type"):
        transform_job_request(
            "j", model_name="m", input_s3_uri="s3://b/in/", output_s3_uri="s3://b/out/", instance_type=hosting_only[0]
        )


@pytest.mark.parametrize("kw", [{"invocation_timeout_s": 3601}, {"max_retries": 4}, {"instance_count": 0}])
def test_transform_ranges(kw):
    with pytest.raises(InvalidInput):
        transform_job_request("j", model_name="m", input_s3_uri="s3://b/in/", output_s3_uri="s3://b/out/", **kw)


def test_transform_wants_s3_uris():
    with pytest.raises(InvalidInput, match="s3://"):
        transform_job_request("j", model_name="m", input_s3_uri="/local/in", output_s3_uri="s3://b/out/")


def test_transform_job_starts_against_moto(clients):
    from .values import DLC_PINNED, MODEL_DATA, ROLE

    plan = endpoints.decision_cpu_plan(
        "semif-decision-workflows", image=parse_image_uri(DLC_PINNED), role_arn=ROLE, model_data_url=MODEL_DATA
    )
    hosting.create_model(clients.sm, plan.model)
    request = transform_job_request(
        "decisions-1", model_name="semif-decision-workflows", input_s3_uri="s3://bkt/in/", output_s3_uri="s3://bkt/out/"
    )
    arn = transform.start_transform_job(clients.sm, request)
    assert arn.endswith("transform-job/decisions-1")
    described = clients.sm.describe_transform_job(TransformJobName="decisions-1")
    assert described["BatchStrategy"] == "SingleRecord"
    assert described["TransformInput"]["SplitType"] == "Line"


DECISIONS = [
    {"id": "t-1", "state": "charged twice", "question": "Which team?", "options": ["billing", "tech"]},
    {"id": "t-2", "state": "app crashes", "question": "Which team?", "options": ["billing", "tech"]},
    {"id": "t-3", "state": "triage", "questions": [{"id": "route", "question": "Team?", "options": ["a", "b"]}]},
]


def _answer(decision):
    if "questions" in decision:
        return {"id": decision["id"], "results": [{"id": "route", "option_ids": ["a", "b"]}]}
    return {"result": {"id": decision["id"], "option_ids": decision["options"], "probabilities": [0.9, 0.1]}}


def test_jsonl_round_trip_joins_results_by_decision_id():
    text = decisions_to_jsonl(DECISIONS)
    assert len(text.splitlines()) == 3 and all(json.loads(line) for line in text.splitlines())
    output = "\n".join(json.dumps(_answer(d)) for d in DECISIONS) + "\n"
    joined = join_transform_output(text, output)
    assert list(joined) == ["t-1", "t-2", "t-3"]
    assert joined["t-2"]["result"]["id"] == "t-2"
    assert joined["t-3"]["results"][0]["id"] == "route"


def test_join_refuses_shifted_or_missing_lines():
    text = decisions_to_jsonl(DECISIONS)
    shifted = "\n".join(json.dumps(_answer(d)) for d in reversed(DECISIONS))
    with pytest.raises(InvalidInput, match="line 1: input id 't-1'"):
        join_transform_output(text, shifted)
    short = "\n".join(json.dumps(_answer(d)) for d in DECISIONS[:2])
    with pytest.raises(InvalidInput, match="3 input lines but 2 output lines"):
        join_transform_output(text, short)


def test_jsonl_needs_unique_string_ids():
    with pytest.raises(InvalidInput, match="twice"):
        decisions_to_jsonl([DECISIONS[0], DECISIONS[0]])
    with pytest.raises(InvalidInput, match="no string id"):
        decisions_to_jsonl([{"state": "x"}])


def test_transform_output_uri():
    assert (
        transform.transform_output_uri("s3://b/in/decisions.jsonl", "s3://b/out/") == "s3://b/out/decisions.jsonl.out"
    )


def _transform_stubber(statuses, reason=None):
    import boto3
    from botocore.stub import Stubber

    sm = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(sm)
    for status in statuses:
        response = {
            "TransformJobName": "decisions-1",
            "TransformJobArn": "arn:aws:sagemaker:us-east-1:123456789012:transform-job/decisions-1",
            "TransformJobStatus": status,
            "ModelName": "m",
            "CreationTime": "2026-11-29T00:00:00Z",
            "TransformInput": {"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://b/in/"}}},
            "TransformOutput": {"S3OutputPath": "s3://b/out/"},
            "TransformResources": {"InstanceType": "ml.c5.2xlarge", "InstanceCount": 1},
        }
        if reason and status == "Failed":
            response["FailureReason"] = reason
        stub.add_response("describe_transform_job", response, {"TransformJobName": "decisions-1"})
    stub.activate()
    return sm, stub


def test_wait_for_transform_stubber_polls_until_completed():
    sm, stub = _transform_stubber(["InProgress", "InProgress", "Completed"])
    slept = []
    job = transform.wait_for_transform(sm, "decisions-1", poll_s=7, progress=False, sleep=slept.append)
    assert job["TransformJobStatus"] == "Completed" and slept == [7, 7]
    stub.assert_no_pending_responses()


def test_wait_for_transform_stubber_reports_the_failure_reason():
    sm, _ = _transform_stubber(["InProgress", "Failed"], reason="ClientError: bad line 3")
    with pytest.raises(AwsFailure, match="bad line 3"):
        transform.wait_for_transform(sm, "decisions-1", poll_s=0, progress=False, sleep=lambda s: None)


def test_wait_for_transform_stubber_times_out_with_the_status():
    sm, _ = _transform_stubber(["InProgress"])
    with pytest.raises(TimeoutError, match="transform job decisions-1 still InProgress after 0 s"):
        transform.wait_for_transform(sm, "decisions-1", poll_s=0, timeout_s=0, progress=False)


# ---- the local stand-in's transform ---------------------------------------------------------------------


@pytest.fixture
def answering_server():
    """A local HTTP server answering POST /invocations with each record's id and the headers it came with."""
    from http.server import BaseHTTPRequestHandler

    received = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            received.append((self.path, self.headers["Content-Type"], self.headers["Accept"], body))
            if body.get("id") == "bad":
                self.send_response(400)
                self.end_headers()
                self.wfile.write(b'{"error": "options: at least two"}')
                return
            answer = json.dumps({"result": {"id": body["id"], "option_ids": ["a", "b"], "probabilities": [0.4, 0.6]}})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(answer.encode())

        def log_message(self, *args):
            pass

    with serving(Handler) as url:
        yield url, received


def test_the_local_transform_answers_every_record_and_writes_sagemakers_layout(clients, answering_server):
    from workshop_lib.local.stand_ins import run_records

    url, received = answering_server
    clients.s3.create_bucket(Bucket="bkt")
    text = decisions_to_jsonl(DECISIONS)
    clients.s3.put_object(Bucket="bkt", Key="w/batch-input/decisions.jsonl", Body=text.encode())
    request = transform_job_request(
        "j-1", model_name="m", input_s3_uri="s3://bkt/w/batch-input/", output_s3_uri="s3://bkt/w/batch-output/"
    )
    assert run_records(clients.s3, request, url) == 3
    assert [r[3]["id"] for r in received] == ["t-1", "t-2", "t-3"]  # one request a record, in order
    assert {(r[0], r[1], r[2]) for r in received} == {("/invocations", "application/json", "application/json")}
    out = clients.s3.get_object(Bucket="bkt", Key="w/batch-output/decisions.jsonl.out")["Body"].read().decode()
    joined = join_transform_output(text, out)
    assert list(joined) == ["t-1", "t-2", "t-3"] and all(
        sum(a["result"]["probabilities"]) == 1.0 for a in joined.values()
    )


def test_the_local_transform_fails_the_job_on_a_refused_record(clients, answering_server):
    from workshop_lib.local.stand_ins import run_records

    url, _ = answering_server
    clients.s3.create_bucket(Bucket="bkt")
    clients.s3.put_object(
        Bucket="bkt", Key="in/d.jsonl", Body=decisions_to_jsonl([DECISIONS[0], {"id": "bad"}]).encode()
    )
    request = transform_job_request("j-2", model_name="m", input_s3_uri="s3://bkt/in/", output_s3_uri="s3://bkt/out/")
    with pytest.raises(AwsFailure, match=r"in/d.jsonl line 2 was answered 400: .*at least two"):
        run_records(clients.s3, request, url)
    assert "Contents" not in clients.s3.list_objects_v2(Bucket="bkt", Prefix="out/")
    request["BatchStrategy"] = "MultiRecord"
    with pytest.raises(InvalidInput, match="SingleRecord"):
        run_records(clients.s3, request, url)


# ---- notebook 07's transform step on AWS: where it runs, and its quota ----------------------------------------------


def _answered(client, answers):
    """The SageMaker requests ``client`` puts on the wire, by operation, answered here: ``answers`` maps an
    operation to its JSON answer, or to an error code (a str) answered with HTTP 400 (moto predates pools)."""
    from botocore.awsrequest import AWSResponse

    seen = {}

    def answer(request, **_):
        target = request.headers["X-Amz-Target"]
        operation = (target.decode() if isinstance(target, bytes) else target).split(".")[-1]
        seen[operation] = json.loads(request.body)
        if operation not in answers:
            return None
        given = answers[operation]
        status, body = (400, {"__type": given, "message": "limit reached"}) if isinstance(given, str) else (200, given)
        return AWSResponse(
            request.url, status, {"Content-Type": "application/x-amz-json-1.1"}, StreamedBody(json.dumps(body).encode())
        )

    client.meta.events.register("before-send.sagemaker", answer)
    return seen


@pytest.fixture
def aws_workshop(tmp_path, monkeypatch, fake_credentials):
    """A Workshop in AWS mode on the GPU path, inside moto, with its bucket."""
    from moto import mock_aws

    from workshop_lib import steps
    from workshop_lib.config import WorkshopConfig

    from .values import REGION, ROLE

    monkeypatch.setenv("WORKSHOP_CONFIG", str(tmp_path / "config.json"))
    with mock_aws():
        config = WorkshopConfig(
            mode="aws",
            region=REGION,
            bucket="decision-workshop-test",
            sagemaker_role_arn=ROLE,
            deploy_path="decision-gpu",
            endpoint_ttl_hours="0",
        )
        made = steps.Workshop(config, tmp_path / "config.json")
        made.clients.s3.create_bucket(Bucket=config.bucket)
        yield made


def test_the_transform_runs_on_the_pool_the_endpoint_was_placed_on_and_names_the_transform_quota(aws_workshop):
    from workshop_lib import steps

    name = aws_workshop.config.gpu_endpoint_name
    pools = endpoints.DEFAULT_GPU_POOLS
    wire = _answered(
        aws_workshop.clients.sm,
        {
            "DescribeEndpoint": {
                "EndpointName": name,
                "EndpointArn": f"arn:aws:sagemaker:us-east-1:123456789012:endpoint/{name}",
                "EndpointConfigName": name,
                "EndpointStatus": "InService",
                "CreationTime": 0,
                "LastModifiedTime": 0,
                "ProductionVariants": [
                    {
                        "VariantName": "AllTraffic",
                        "InstancePools": [
                            {"InstanceType": pools[0], "CurrentInstanceCount": 0},
                            {"InstanceType": pools[1], "CurrentInstanceCount": 1},
                        ],
                    }
                ],
            },
            "DescribeEndpointConfig": {
                "EndpointConfigName": name,
                "EndpointConfigArn": "arn:aws:sagemaker:us-east-1:123456789012:x/y",
                "CreationTime": 0,
                "ProductionVariants": [
                    {"VariantName": "AllTraffic", "ModelName": name, "InstancePools": variants.instance_pools(pools)}
                ],
            },
            "CreateTransformJob": "ResourceLimitExceeded",
        },
    )
    with pytest.raises(hosting.DeployError) as refused:
        steps.run_transform(aws_workshop, name, progress=False)
    assert wire["CreateTransformJob"]["TransformResources"]["InstanceType"] == pools[1]  # placed there, not on g6e
    message = str(refused.value)
    assert f"'{pools[1]} for transform job usage'" in message and "'for endpoint usage'" not in message


def test_a_refused_transform_job_names_the_transform_quota_not_the_endpoints(stub_sm):
    sm, stub = stub_sm
    request = transform_job_request(
        "decisions-1",
        model_name="m",
        input_s3_uri="s3://bkt/in/",
        output_s3_uri="s3://bkt/out/",
        instance_type="ml.g5.2xlarge",
    )
    stub.add_client_error(
        "create_transform_job", "ResourceLimitExceeded", "account-level service limit", 400, expected_params=request
    )
    with pytest.raises(hosting.DeployError, match="'ml.g5.2xlarge for transform job usage'") as refused:
        transform.start_transform_job(sm, request)
    assert "endpoint usage" not in str(refused.value)

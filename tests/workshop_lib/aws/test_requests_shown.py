"""The requests a step shows (``result.requests``): what botocore validated and sent, secrets masked, and
folded in the notebook's HTML; and notebook 07's scaling and transform steps in AWS mode against moto."""

from __future__ import annotations

import json
import re

import pytest
from botocore.exceptions import ParamValidationError

from tests.support.wire import StreamedBody
from workshop_lib.aws import requests_sent, scaling
from workshop_lib.aws.requests_sent import MASK, RequestRecorder, masked, plain
from workshop_lib.config import WorkshopConfig

from .values import DECISION_PINNED, REGION, ROLE

BUCKET = "sagemaker-decision-workshop-test"


def test_masked_hides_secrets_wherever_they_sit():
    params = {
        "Environment": {"HF_TOKEN": "hf_live", "SM_LLAMA_CPP_THREADS": "2", "API_KEY": "k"},
        "environmentVariables": [{"name": "GITHUB_TOKEN", "value": "ghp_x"}, {"name": "STAGE", "value": "a"}],
        "Body": b"12345",
        "SecretString": "s",
        "Tags": [{"Key": "workshop", "Value": "decision-workshop"}],
    }
    shown = masked(params)
    assert shown["Environment"] == {"HF_TOKEN": MASK, "SM_LLAMA_CPP_THREADS": "2", "API_KEY": MASK}
    assert shown["environmentVariables"] == [{"name": "GITHUB_TOKEN", "value": MASK}, {"name": "STAGE", "value": "a"}]
    assert shown["Body"] == "<5 bytes>" and shown["SecretString"] == MASK
    assert shown["Tags"] == params["Tags"]
    assert "hf_live" not in json.dumps(shown) and "ghp_x" not in json.dumps(shown)


def test_plain_is_masked_without_the_masking():
    import datetime
    import io

    params = {
        "Environment": {"HF_TOKEN": "hf_live", "A": "1"},
        "Pairs": [{"Name": "API_KEY", "Value": "k"}],
        "Body": io.BytesIO(b"123"),
        "Data": bytearray(b"12"),
        "When": datetime.datetime(2026, 1, 2, 3, 4),
        "Nested": [[1, 2.5, None, True]],
        "Other": object(),
    }
    shown = plain(params)
    assert shown["Environment"] == params["Environment"] and shown["Pairs"] == params["Pairs"]
    assert shown["Body"] == "<3 bytes>" and shown["Data"] == "<2 bytes>"
    assert shown["When"] == "2026-01-02T03:04:00" and shown["Nested"] == [[1, 2.5, None, True]]
    assert shown["Other"] == "<object>"
    json.dumps(shown)
    hidden = masked(params)
    assert hidden["Environment"]["HF_TOKEN"] == MASK and hidden["Pairs"] == [{"Name": "API_KEY", "Value": MASK}]
    assert {k: v for k, v in hidden.items() if k not in ("Environment", "Pairs")} == {
        k: v for k, v in shown.items() if k not in ("Environment", "Pairs")
    }


def test_the_recorder_keeps_what_botocore_validated_and_nothing_it_refused(moto_aws):
    import boto3

    sm = boto3.client("sagemaker", region_name=REGION)
    recorder = RequestRecorder()
    recorder.attach(sm)
    recorder.attach(sm)  # attaching twice records once
    model = {
        "ModelName": "m-1",
        "ExecutionRoleArn": ROLE,
        "PrimaryContainer": {"Image": DECISION_PINNED, "Environment": {"HF_TOKEN": "hf_secret", "A": "1"}},
    }
    sm.list_endpoints()  # outside a recording: not kept
    with recorder.recording() as outer:
        sm.create_model(**model)
        with recorder.recording() as inner:
            with pytest.raises(ParamValidationError):
                sm.create_endpoint_config(EndpointConfigName="c-1")  # no ProductionVariants: never sent
            sm.describe_model(ModelName="m-1")
    assert [r.operation for r in outer] == ["CreateModel", "DescribeModel"]
    assert [r.operation for r in inner] == ["DescribeModel"]
    sent = outer[0]
    assert sent.service == "sagemaker" and sent.params["ModelName"] == "m-1"
    assert sent.params["PrimaryContainer"]["Environment"] == {"HF_TOKEN": MASK, "A": "1"}
    described = sm.describe_model(ModelName="m-1")  # what moto received is what was shown, secrets aside
    assert described["PrimaryContainer"]["Image"] == sent.params["PrimaryContainer"]["Image"]


def test_requests_html_folds_each_request():
    sent = [requests_sent.SentRequest("sagemaker", "CreateEndpointConfig", {"EndpointConfigName": "<c>"})]
    page = requests_sent.requests_html(sent, "endpoint e: InService")
    assert page.startswith("<pre>endpoint e: InService</pre><details><summary>1 AWS request sent")
    assert "<code>sagemaker CreateEndpointConfig</code>" in page and "&lt;c&gt;" in page and "<c>" not in page
    assert page.count("<details>") == 2 and page.count("</details>") == 2


@pytest.fixture
def workshop(tmp_path, monkeypatch, fake_credentials):
    """A Workshop in AWS mode inside moto, with the bucket and a packaged model recorded."""
    from moto import mock_aws

    from workshop_lib import steps

    monkeypatch.setenv("WORKSHOP_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.setenv("WORKSHOP_MODE", "aws")
    with mock_aws():
        config = WorkshopConfig(
            mode="aws",
            region=REGION,
            bucket=BUCKET,
            sagemaker_role_arn=ROLE,
            codebuild_role_arn=ROLE,
            deploy_path="decision-gpu",
            endpoint_ttl_hours="0",
        )
        made = steps.Workshop(config, tmp_path / "config.json")
        made.clients.s3.create_bucket(Bucket=BUCKET)
        made.clients.s3.put_object(Bucket=BUCKET, Key="decision-workshop/model/model.tar.gz", Body=b"packaged")
        made.remember(model_data_url=config.model_data_url)
        yield made


def _wire(client, answers):
    """Every request ``client`` puts on the wire, as its JSON body by operation; the operations in ``answers``
    are answered here (moto predates instance pools) instead of being sent on."""
    from botocore.awsrequest import AWSResponse

    seen = {}

    def capture(request, operation_name=None, **_):
        operation = (
            request.headers["X-Amz-Target"].decode().split(".")[-1]
            if isinstance(request.headers["X-Amz-Target"], bytes)
            else request.headers["X-Amz-Target"].split(".")[-1]
        )
        seen[operation] = json.loads(request.body)
        if operation in answers:
            return AWSResponse(
                request.url,
                200,
                {"Content-Type": "application/x-amz-json-1.1"},
                StreamedBody(json.dumps(answers[operation]).encode()),
            )
        return None

    client.meta.events.register("before-send.sagemaker", capture)
    return seen


def test_the_gpu_deploy_shows_the_create_endpoint_config_it_sent(workshop):
    from workshop_lib import steps

    name = workshop.config.gpu_endpoint_name
    arn = f"arn:aws:sagemaker:{REGION}:123456789012:endpoint/{name}"
    wire = _wire(
        workshop.clients.sm,
        {
            "CreateEndpointConfig": {"EndpointConfigArn": arn.replace(":endpoint/", ":endpoint-config/")},
            "CreateEndpoint": {"EndpointArn": arn},
            "DescribeEndpoint": {
                "EndpointName": name,
                "EndpointArn": arn,
                "EndpointConfigName": name,
                "EndpointStatus": "Creating",
                "CreationTime": 0,
                "LastModifiedTime": 0,
            },
        },
    )
    result = steps.deploy_decision_gpu(workshop, DECISION_PINNED, wait=False, progress=False)
    shown = {r.operation: r.params for r in result.requests if r.service == "sagemaker"}
    assert {"CreateModel", "CreateEndpointConfig", "CreateEndpoint"} <= set(shown)
    for operation in ("CreateModel", "CreateEndpointConfig", "CreateEndpoint"):
        assert shown[operation] == wire[operation], operation  # what was shown is what went out
    config = shown["CreateEndpointConfig"]
    assert config == result.plan.endpoint_config
    assert [p["InstanceType"] for p in config["ProductionVariants"][0]["InstancePools"]] == [
        p["InstanceType"] for p in result.plan.endpoint_config["ProductionVariants"][0]["InstancePools"]
    ]
    page = result._repr_html_()
    assert "sagemaker CreateEndpointConfig" in page and "InstancePools" in page
    assert not hasattr(steps.show_config(workshop), "requests")  # a step that sends nothing shows nothing


def _served(workshop, name):
    """A model and endpoint named as the decision endpoint's, made directly (nothing shown)."""
    from workshop_lib.aws import endpoints, hosting
    from workshop_lib.aws.images import parse_image_uri

    plan = endpoints.decision_cpu_plan(
        name,
        image=parse_image_uri(DECISION_PINNED),
        role_arn=ROLE,
        model_data_url=workshop.config.model_data_url,
        instance_type="ml.c5.2xlarge",
    )
    sm = workshop.clients.sm
    hosting.create_model(sm, plan.model)
    sm.create_endpoint_config(**plan.endpoint_config)
    sm.create_endpoint(**plan.endpoint)
    return plan


def test_autoscale_registers_the_variant_from_the_rate_06_measured(workshop):
    from workshop_lib import steps

    name = workshop.config.gpu_endpoint_name

    class Report:
        summary = {"client_latency_ms": {"p50": 500.0}}

    kept = steps.record_rate(workshop, Report(), name)
    assert kept.ok and "0.5 s per decision" in kept
    assert steps.scaling_target(workshop, name) == scaling.target_invocations_per_minute(0.5) == 84.0
    result = steps.autoscale(workshop, name, max_instances=3)
    assert result.ok and "1 to 3 instances, tracking 84 a minute per instance" in result and "06's 0.5 s" in result
    client = workshop.clients.get("application-autoscaling")
    registered = scaling.scaling_of(client, name)
    assert registered["MaxCapacity"] == 3
    config = registered["Policies"][0]["TargetTrackingScalingPolicyConfiguration"]
    assert config["TargetValue"] == 84.0
    shown = {r.operation: r.params for r in result.requests}
    assert shown["RegisterScalableTarget"] == scaling.scalable_target_request(name, max_instances=3)
    assert shown["PutScalingPolicy"] == scaling.scaling_policy_request(name, invocations_per_instance=84.0)
    removed = steps.remove_autoscaling(workshop, [name])
    assert removed == f"{name}: scaling policy deleted, scalable target deleted"
    assert [r.operation for r in removed.requests] == ["DeleteScalingPolicy", "DeregisterScalableTarget"]
    assert scaling.scaling_of(client, name) is None
    again = steps.remove_autoscaling(workshop, [name])  # 08 run twice
    assert again == f"{name}: scaling policy already gone, scalable target already gone"


def test_autoscale_without_06_uses_the_default_pace(workshop):
    from workshop_lib import steps

    assert steps.scaling_target(workshop) == scaling.target_invocations_per_minute(steps.scale.DEFAULT_SECONDS)
    result = steps.autoscale(workshop, workshop.config.cpu_endpoint_name)
    assert "06 not run" in result


def _sustainable(rate: float | None, *, p95_limit_ms: float = 2000.0):
    """What notebook 06 measured: one level of 20 answers at ``rate`` a second (none fits when ``rate`` is None)."""
    from workshop_lib.evaluation.throughput import Level, Sustainable

    measured = Level(2, (400.0,) * 20, wall_s=20 / (rate or 1.0))
    return Sustainable("e", p95_limit_ms, measured if rate else None, (measured,))


def test_autoscale_tracks_the_sustainable_rate_06_measured_before_its_seconds_per_decision(workshop):
    from workshop_lib import steps

    name = workshop.config.gpu_endpoint_name

    class Report:
        summary = {"client_latency_ms": {"p50": 500.0}}

    steps.record_rate(workshop, Report(), name)  # one at a time: 84 a minute
    kept = steps.record_throughput(workshop, _sustainable(3.5), name)
    assert kept.ok and "3.50 decisions/s per instance" in kept
    expected = scaling.target_from_rate(3.5, steps.scale.UTILISATION)
    assert expected == 147.0 and steps.scaling_target(workshop, name) == expected
    assert steps.scaling_target(workshop, workshop.config.cpu_endpoint_name) != expected  # kept per endpoint
    result = steps.autoscale(workshop, name)
    assert (
        result.ok
        and "tracking 147 a minute per instance" in result
        and "sustainable 3.5 decisions/s at C = 2" in result
    )
    shown = {r.operation: r.params for r in result.requests}
    assert shown["PutScalingPolicy"] == scaling.scaling_policy_request(name, invocations_per_instance=expected)
    policy = scaling.scaling_of(workshop.clients.get("application-autoscaling"), name)["Policies"][0]
    assert policy["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] == expected
    given = steps.autoscale(workshop, name, invocations_per_instance=30)  # the widget's or --target's value wins
    assert "tracking 30 a minute per instance" in given and "as given" in given


def test_no_sustainable_rate_drops_the_kept_one_and_falls_back_to_the_seconds_per_decision(workshop):
    from workshop_lib import steps

    name = workshop.config.gpu_endpoint_name
    steps.record_throughput(workshop, _sustainable(3.5), name)
    steps.record_throughput(workshop, _sustainable(5.0), "other-endpoint")
    dropped = steps.record_throughput(workshop, _sustainable(None, p95_limit_ms=100), name)
    assert "no sustainable rate at p95 within 100 ms" in dropped and "default 2 s per decision" in dropped
    assert steps.scaling_target(workshop, name) == scaling.target_invocations_per_minute(steps.scale.DEFAULT_SECONDS)
    assert steps.scaling_target(workshop, "other-endpoint") == scaling.target_from_rate(5.0)
    assert "06 not run" in steps.autoscale(workshop, name)


def test_run_transform_on_aws_sends_the_job_and_reads_the_answers_back(workshop, monkeypatch):
    """moto records the job (Completed at once) and runs nothing: the answers are put where SageMaker writes
    them, so the step's reading and joining is what is checked here; the local stand-in is in test_personas."""
    from workshop_lib import steps
    from workshop_lib.aws import hosting, transform

    name = workshop.config.cpu_endpoint_name
    _served(workshop, name)
    s3 = workshop.clients.s3
    sent_to_sagemaker = hosting.SageMakerHosting.transform

    def answered_by_sagemaker(self, sm_client, s3_client, request, **options):
        described = sent_to_sagemaker(self, sm_client, s3_client, request, **options)
        prefix = request["TransformInput"]["DataSource"]["S3DataSource"]["S3Uri"]
        text = s3.get_object(Bucket=BUCKET, Key=prefix.split("/", 3)[3] + "decisions.jsonl")["Body"].read().decode()
        lines = [
            json.dumps(
                {"result": {"id": json.loads(line)["id"], "option_ids": ["a", "b"], "probabilities": [0.25, 0.75]}}
            )
            for line in text.splitlines()
        ]
        key = transform.transform_output_uri(
            prefix + "decisions.jsonl", request["TransformOutput"]["S3OutputPath"]
        ).split("/", 3)[3]
        s3.put_object(Bucket=BUCKET, Key=key, Body="\n".join(lines).encode())
        return described

    monkeypatch.setattr(hosting.SageMakerHosting, "transform", answered_by_sagemaker)
    decisions = [
        {"id": "d-1", "state": "s", "question": "q?", "options": ["a", "b"]},
        {"id": "d-2", "state": "t", "question": "q?", "options": ["a", "b"]},
    ]
    result = steps.run_transform(workshop, name, decisions, progress=False)
    assert result.ok and list(result.answers) == ["d-1", "d-2"] and "d-2: b (0.75)" in str(result)
    [job] = [r.params for r in result.requests if r.operation == "CreateTransformJob"]
    assert job["ModelName"] == name and job["TransformJobName"].startswith(f"{name}-batch-")
    assert job["TransformResources"]["InstanceType"] == "ml.c5.2xlarge"  # the endpoint's, offered for transform
    put = next(r.params for r in result.requests if r.operation == "PutObject")  # then the test's stand-in's
    assert put["Key"] == "decision-workshop/batch-input/decisions.jsonl" and put["Body"].endswith(" bytes>")
    described = workshop.clients.sm.describe_transform_job(TransformJobName=job["TransformJobName"])
    assert described["TransformInput"] == job["TransformInput"]
    deleted = steps.delete_transform_output(workshop)
    assert "batch-input/: 1 object(s) deleted" in deleted and "batch-output/: 1 object(s) deleted" in deleted


@pytest.mark.parametrize("fitted", ["letters", "cloze"])
def test_the_calibrated_package_takes_06s_file_only_when_it_was_fitted_for_the_served_readout(
    workshop, monkeypatch, fitted
):
    from types import SimpleNamespace

    from tests.support.calibration_results import AnsweringClient, mixed_results
    from workshop_lib import steps
    from workshop_lib.evaluation.profiles import calibration_document, write_document
    from workshop_lib.steps import package, recorded

    name = steps.decision_endpoint(workshop)
    doc = calibration_document(mixed_results(), order="as_given", tasks="t", readout=fitted)
    folder = workshop.folder("bench") / name  # where notebook 06 saves its report and this file
    folder.mkdir(parents=True)
    saved = write_document(doc, folder)
    packaged = []
    monkeypatch.setattr(package, "client", lambda ws, endpoint: AnsweringClient("cloze"))  # the endpoint serves cloze
    monkeypatch.setattr(
        package,
        "package_model",
        lambda ws, **kw: (
            packaged.append(kw["calibration"]) or SimpleNamespace(model_data_url="s3://b/calibrated/model.tar.gz")
        ),
    )
    made = steps.calibrated_package(workshop)
    if fitted == "cloze":
        assert packaged == [saved] and "fitted for the cloze readout (the readout the endpoint serves)" in made
        assert workshop.outputs()[recorded.CALIBRATED_KEY] == "s3://b/calibrated/model.tar.gz"
    else:
        assert packaged == [] and "fitted for the letters readout, but" in made and "serves cloze" in made
        assert recorded.CALIBRATED_KEY not in workshop.outputs()
        named = steps.calibrated_package(workshop, saved)  # a file named here is packaged whatever its readout
        assert packaged == [saved] and "applies only to requests that ask for letters" in named


def test_a_refused_step_raises_its_error_with_the_requests_it_sent_and_both_shells_show_them(
    workshop, capsys, monkeypatch
):
    """AWS refuses notebook 07's scaling policy (the variant was registered first): the error the notebook and
    the command line show carries both requests, the refused one included, as AWS received them."""
    from botocore.awsrequest import AWSResponse
    from botocore.exceptions import ClientError
    from IPython.core.interactiveshell import InteractiveShell

    from workshop_lib import cli, cli_operate, display, steps

    name = workshop.config.cpu_endpoint_name
    client = workshop.clients.get("application-autoscaling")

    def refuse(request, **_):
        if request.headers["X-Amz-Target"].decode().endswith(".PutScalingPolicy"):
            body = {"__type": "AccessDeniedException", "Message": "not authorized to perform: PutScalingPolicy"}
            return AWSResponse(
                request.url,
                400,
                {"Content-Type": "application/x-amz-json-1.1"},
                StreamedBody(json.dumps(body).encode()),
            )
        return None

    client.meta.events.register("before-send.application-autoscaling", refuse)
    with pytest.raises(ClientError) as refused:
        steps.autoscale(workshop, name, max_instances=3)
    error = refused.value
    assert [r.operation for r in error.requests] == ["RegisterScalableTarget", "PutScalingPolicy"]
    assert error.requests[0].params == scaling.scalable_target_request(name, max_instances=3)
    (note,) = error.__notes__
    assert note.startswith("AWS requests sent before it failed:\napplication-autoscaling RegisterScalableTarget\n")
    assert "application-autoscaling PutScalingPolicy" in note and '"MaxCapacity": 3' in note
    # the notebook: the error's one line, then the requests
    shell = InteractiveShell.instance()
    shell.reset(new_session=False)
    assert display.install_error_handler(shell)
    try:
        shell.user_ns["error"] = error
        assert not shell.run_cell("raise error").success
    finally:
        shell.set_custom_exc((), None)
    shown = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert "Traceback" not in shown and shown.startswith("ClientError: An error occurred (AccessDeniedException)")
    assert note in shown
    # the command line: the same
    monkeypatch.setattr(cli_operate, "cmd_autoscale", lambda args: (_ for _ in ()).throw(error))
    assert cli.main(["autoscale", "--region", REGION]) == 1
    printed = capsys.readouterr().err
    assert printed.startswith("error: An error occurred (AccessDeniedException)") and note in printed

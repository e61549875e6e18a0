"""An endpoint scaled to zero: SageMaker's refusal becomes ``NoCapacity`` at once, with the expected wait, and
the request named the inference component."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import ANY, Stubber

from workshop_lib.client.endpoint import EndpointClient
from workshop_lib.client.endpoint_errors import NO_CAPACITY_WAIT_S, EndpointBusy, NoCapacity

REFUSAL = (
    "Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress "
    "(if configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API."
)


def _client(runtime, slept):
    return EndpointClient.sagemaker(
        "decision-workshop-zero",
        runtime_client=runtime,
        inference_component="decision-workshop-zero-decision",
        retries=3,
        sleep=slept.append,
    )


def test_no_copy_raises_no_capacity_once_with_the_wait_and_is_not_retried():
    runtime = boto3.client(
        "sagemaker-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    slept: list[float] = []
    with Stubber(runtime) as stub:
        expected = {
            "EndpointName": "decision-workshop-zero",
            "InferenceComponentName": "decision-workshop-zero-decision",
            "Body": ANY,
            "ContentType": ANY,
            "Accept": ANY,
            "InferenceId": ANY,
        }
        stub.add_client_error(
            "invoke_endpoint", "ValidationError", REFUSAL, http_status_code=400, expected_params=expected
        )
        with pytest.raises(NoCapacity) as raised:
            _client(runtime, slept).invoke({"id": "t", "state": "s", "question": "q", "options": []})
        stub.assert_no_pending_responses()
    error = raised.value
    assert not isinstance(error, EndpointBusy) and slept == []  # raised at once: an instance takes minutes
    assert error.retry_after == NO_CAPACITY_WAIT_S and error.status == 400 and error.code == "ValidationError"
    assert "retry_after" in str(error) and "no capacity" in str(error)


def test_another_validation_error_is_not_taken_for_no_capacity():
    runtime = boto3.client(
        "sagemaker-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    with Stubber(runtime) as stub:
        stub.add_client_error("invoke_endpoint", "ValidationError", "Endpoint x of account y not found.", 400)
        with pytest.raises(Exception) as raised:
            _client(runtime, []).invoke({"id": "t"})
    assert not isinstance(raised.value, NoCapacity)

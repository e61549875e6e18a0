"""Offline decisions: Batch Transform from JSON Lines in S3 to JSON Lines in S3.

Builders first: the CreateTransformJob request (checked by botocore, ``calls.validate``),
the input file (one decision request per line), where the output lands, and the
output joined back to the decisions by id. Then the senders: start the job, wait
for it. The job runs the decision image's SageMaker model (``hosting.create_model``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .. import name_rules
from ..config import check_resource_name
from ..errors import AwsFailure, InvalidInput
from . import calls
from .endpoints import DECISION_CPU_INSTANCE
from .hosting import send_request
from .instance_types import check_choice, enum_of
from .model_requests import check_in_range, check_tags, workshop_tags

# ---- builders ---------------------------------------------------------------------------------


def transform_instance_types() -> tuple[str, ...]:
    return enum_of("sagemaker", "CreateTransformJob", "TransformResources", "InstanceType")


def transform_type(serving_type: str) -> str:
    """The type a transform job of an endpoint's model runs on: the endpoint's own where Batch Transform offers
    it, else ``DECISION_CPU_INSTANCE``."""
    return serving_type if serving_type in transform_instance_types() else DECISION_CPU_INSTANCE


def transform_job_request(
    job_name: str,
    *,
    model_name: str,
    input_s3_uri: str,
    output_s3_uri: str,
    instance_type: str = DECISION_CPU_INSTANCE,
    instance_count: int = 1,
    invocation_timeout_s: int = 600,
    max_retries: int = 1,
    max_payload_mb: int = 6,
    tags: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """CreateTransformJob: JSON Lines in S3, one decision request per line, one request at a time.

    Output lands in ``output_s3_uri`` as ``<input file>.out``, line i answering input line i.
    The job runs the endpoint's model, so each line must also finish within that container's
    DECISION_ADAPTER_REQUEST_TIMEOUT (30 s unless its environment says otherwise), whatever
    ``invocation_timeout_s`` allows.
    """
    check_resource_name(job_name, "transform job")
    check_resource_name(model_name, "model")
    check_choice(instance_type, transform_instance_types(), "Batch Transform instance type")
    check_in_range(instance_count, 1, 100, "instance_count")
    check_in_range(invocation_timeout_s, 1, 3600, "invocation_timeout_s")
    check_in_range(max_retries, 0, 3, "max_retries")
    check_in_range(max_payload_mb, 1, 100, "max_payload_mb")
    for uri in (input_s3_uri, output_s3_uri):
        if name_rules.split_s3_uri(uri) is None:
            raise InvalidInput(f"{uri!r} is not an s3://bucket/prefix URI")
    request = {
        "TransformJobName": job_name,
        "ModelName": model_name,
        # One container serialises decisions, so one request in flight per instance.
        "MaxConcurrentTransforms": 1,
        "MaxPayloadInMB": max_payload_mb,
        "BatchStrategy": "SingleRecord",
        "ModelClientConfig": {
            "InvocationsTimeoutInSeconds": invocation_timeout_s,
            "InvocationsMaxRetries": max_retries,
        },
        "TransformInput": {
            "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": input_s3_uri}},
            "ContentType": "application/json",
            "SplitType": "Line",
        },
        "TransformOutput": {"S3OutputPath": output_s3_uri, "Accept": "application/json", "AssembleWith": "Line"},
        "TransformResources": {"InstanceType": instance_type, "InstanceCount": instance_count},
    }
    request["Tags"] = check_tags(list(tags if tags is not None else workshop_tags()))
    return calls.validate("sagemaker", "CreateTransformJob", request)


def decisions_to_jsonl(decisions: Iterable[Mapping[str, Any]]) -> str:
    """One decision request per line, as Batch Transform's SplitType=Line expects; ids must be unique."""
    lines, seen = [], set()
    for i, decision in enumerate(decisions):
        did = decision.get("id")
        if not isinstance(did, str) or not did:
            raise InvalidInput(f"decision {i} has no string id; results are joined back by id")
        if did in seen:
            raise InvalidInput(f"decision id {did!r} appears twice; ids must be unique")
        seen.add(did)
        lines.append(json.dumps(decision, ensure_ascii=False, separators=(",", ":")))
    return "\n".join(lines) + "\n"


def transform_output_uri(input_file_uri: str, output_s3_uri: str) -> str:
    """Where Batch Transform writes the results for one input file."""
    return output_s3_uri.rstrip("/") + "/" + input_file_uri.rsplit("/", 1)[-1] + ".out"


def _response_id(response: Mapping[str, Any]) -> str | None:
    if "result" in response and isinstance(response["result"], Mapping):
        return response["result"].get("id")
    return response.get("id")


def join_transform_output(input_jsonl: str, output_jsonl: str) -> dict[str, dict[str, Any]]:
    """Decision id -> response, pairing output line i with input line i (AssembleWith=Line keeps order).

    Where a response carries an id, it must match the input's; a mismatch or a
    different line count raises InvalidInput.
    """
    inputs = [json.loads(line) for line in input_jsonl.splitlines() if line.strip()]
    outputs = [json.loads(line) for line in output_jsonl.splitlines() if line.strip()]
    if len(inputs) != len(outputs):
        raise InvalidInput(
            f"{len(inputs)} input lines but {len(outputs)} output lines; the job did not answer every "
            "decision (check its CloudWatch logs under /aws/sagemaker/TransformJobs)"
        )
    joined: dict[str, dict[str, Any]] = {}
    for i, (request, response) in enumerate(zip(inputs, outputs)):
        did = request.get("id")
        if did in joined:
            raise InvalidInput(f"decision id {did!r} appears twice in the input")
        answered = _response_id(response)
        if answered is not None and answered != did:
            raise InvalidInput(f"line {i + 1}: input id {did!r} but the response is for {answered!r}")
        joined[did] = response
    return joined


# ---- senders ----------------------------------------------------------------------------------


def start_transform_job(sm_client: Any, request: dict[str, Any]) -> str:
    calls.validate("sagemaker", "CreateTransformJob", request)
    instance_type = request["TransformResources"]["InstanceType"]
    # Batch Transform has quotas of its own, apart from the endpoints'.
    arn: str = send_request(
        sm_client.create_transform_job,
        "CreateTransformJob",
        request,
        request["TransformJobName"],
        quota=f"'{instance_type} for transform job usage' (Batch Transform's, apart from the "
        "endpoints' quota of the type)",
    )["TransformJobArn"]
    return arn


def wait_for_transform(
    sm_client: Any,
    job_name: str,
    *,
    poll_s: float = 30,
    timeout_s: float = 6 * 3600,
    progress: bool = True,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Poll DescribeTransformJob until Completed; raise AwsFailure on Failed or Stopped."""

    def failure(job: dict[str, Any]) -> AwsFailure | None:
        status = job["TransformJobStatus"]
        if status not in ("Failed", "Stopped"):
            return None
        return AwsFailure(
            f"transform job {job_name} {status.lower()}: "
            f"{job.get('FailureReason') or 'no reason given'}; see the CloudWatch log "
            f"group /aws/sagemaker/TransformJobs"
        )

    def timeout(status: str) -> TimeoutError:
        return TimeoutError(f"transform job {job_name} still {status} after {timeout_s:g} s")

    return calls.wait_for_status(
        lambda: sm_client.describe_transform_job(TransformJobName=job_name),
        "TransformJobStatus",
        done="Completed",
        label=f"transform {job_name}",
        failure=failure,
        timeout=timeout,
        poll_s=poll_s,
        timeout_s=timeout_s,
        progress=progress,
        sleep=sleep,
    )


def run_transform_job(
    sm_client: Any, request: dict[str, Any], *, poll_s: float = 30, progress: bool = True
) -> dict[str, Any]:
    """Start the job and wait until it is Completed (``wait_for_transform``)."""
    start_transform_job(sm_client, request)
    return wait_for_transform(sm_client, request["TransformJobName"], poll_s=poll_s, progress=progress)


__all__ = [
    "decisions_to_jsonl",
    "join_transform_output",
    "run_transform_job",
    "start_transform_job",
    "transform_instance_types",
    "transform_job_request",
    "transform_output_uri",
    "transform_type",
    "wait_for_transform",
]

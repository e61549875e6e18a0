"""Running an endpoint: the thin senders of the three requests ``endpoints`` builds, ``deploy``, which
chains them, and what happens after: waiting for InService, reading the endpoint's logs, and where
SageMaker placed it.

What only SageMaker can do (run the container on instances it places) is a parameter of ``deploy``,
``hosting``: ``SageMakerHosting`` waits for SageMaker; the local rehearsal passes
``stand_ins.LocalHosting``, which serves the endpoint from a local process. Model, endpoint config and
endpoint share one name, so ``cleanup.delete_endpoint_resources(sm, name)`` finds all three without
listing anything.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from .. import name_rules
from ..errors import AwsFailure, WorkshopTimeout
from . import calls
from .buckets import check_bucket_region
from .endpoints import DeployPlan
from .images import check_deployable, parse_image_uri, require_pinned


class DeployError(AwsFailure):
    """SageMaker refused a request; the message says what to do."""


def _error_code(exc: ClientError) -> tuple[str, str]:
    error = exc.response.get("Error", {})
    return str(error.get("Code", "")), str(error.get("Message", ""))


def send_request(
    call: Callable[..., Any],
    operation: str,
    request: dict[str, Any],
    name: str,
    quota: str = "this instance type 'for endpoint usage'",
) -> dict[str, Any]:
    """Send one request; a refusal becomes a DeployError saying what to do (``quota``: the quota a
    ResourceLimitExceeded is about, in words)."""
    try:
        response: dict[str, Any] = call(**request)
        return response
    except ClientError as exc:
        code, message = _error_code(exc)
        if code == "ResourceLimitExceeded":
            raise DeployError(
                f"{operation} for {name!r}: {message}. Your account's quota for {quota} is too low (often 0): "
                "request an increase in Service Quotas (Amazon SageMaker) or choose another instance type"
            ) from None
        if "already exist" in message:
            raise DeployError(
                f"{operation}: {message}. Delete it first with "
                f"workshop_lib.aws.teardown.delete_endpoint_resources(sm, {name!r}) or choose another name"
            ) from None
        raise DeployError(f"{operation} for {name!r} failed: {code}: {message}") from None


def create_model(sm_client: Any, request: dict[str, Any]) -> str:
    # a request may be made by hand: its image is read here, where it enters
    require_pinned(parse_image_uri(request["PrimaryContainer"]["Image"]))
    calls.validate("sagemaker", "CreateModel", request)
    arn: str = send_request(sm_client.create_model, "CreateModel", request, request["ModelName"])["ModelArn"]
    return arn


def create_endpoint_config(sm_client: Any, request: dict[str, Any]) -> str:
    calls.validate("sagemaker", "CreateEndpointConfig", request)
    response = send_request(
        sm_client.create_endpoint_config, "CreateEndpointConfig", request, request["EndpointConfigName"]
    )
    arn: str = response["EndpointConfigArn"]
    return arn


def create_endpoint(sm_client: Any, request: dict[str, Any]) -> str:
    calls.validate("sagemaker", "CreateEndpoint", request)
    response = send_request(sm_client.create_endpoint, "CreateEndpoint", request, request["EndpointName"])
    arn: str = response["EndpointArn"]
    return arn


def update_endpoint(sm_client: Any, request: dict[str, Any]) -> str:
    """UpdateEndpoint (``updates`` builds it): SageMaker rolls the endpoint onto another config while it serves."""
    calls.validate("sagemaker", "UpdateEndpoint", request)
    response = send_request(sm_client.update_endpoint, "UpdateEndpoint", request, request["EndpointName"])
    arn: str = response["EndpointArn"]
    return arn


class SageMakerHosting:
    """Where ``deploy`` runs an endpoint: SageMaker, which the flow waits for."""

    def __init__(self, *, poll_s: float = 30, timeout_s: float = 3600) -> None:
        self.poll_s, self.timeout_s = poll_s, timeout_s

    def adapt(self, plan: DeployPlan) -> DeployPlan:
        """The plan as sent (as built, on AWS)."""
        return plan

    def wait(self, sm_client: Any, name: str, *, logs_client: Any = None, progress: bool = True) -> dict[str, Any]:
        return wait_in_service(
            sm_client, name, poll_s=self.poll_s, timeout_s=self.timeout_s, progress=progress, logs_client=logs_client
        )

    def created(self, sm_client: Any, name: str) -> dict[str, Any]:
        """What ``deploy`` returns when told not to wait: the endpoint as SageMaker describes it now."""
        described: dict[str, Any] = sm_client.describe_endpoint(EndpointName=name)
        return described

    def served(self, name: str) -> tuple[str | None, list[str]]:
        """A URL to reach endpoint ``name`` directly and notes on how it is served (none on AWS)."""
        return None, []

    def update_endpoint(self, sm_client: Any, request: dict[str, Any]) -> str:
        """Send an update (``updates.roll_out`` waits for it); on AWS SageMaker runs the blue/green rollout."""
        return update_endpoint(sm_client, request)

    def offload_lines(self, logs_client: Any, name: str) -> tuple[list[OffloadLine], str]:
        """llama.cpp's offload lines for endpoint ``name``, and where they were read."""
        return offload_log_lines(logs_client, name), f"CloudWatch {log_group(name)}"

    def transform(
        self,
        sm_client: Any,
        s3_client: Any,
        request: dict[str, Any],
        *,
        run: Callable[..., dict[str, Any]],
        endpoint_name: str | None = None,
        progress: bool = True,
    ) -> tuple[dict[str, Any], list[str]]:
        """Run a Batch Transform job to its end with ``run`` (``transform.run_transform_job``): SageMaker's
        DescribeTransformJob once Completed, and notes on how it ran (none on AWS). ``endpoint_name`` is the
        endpoint serving the job's model (the local stand-in asks its process)."""
        return run(sm_client, request, poll_s=self.poll_s, progress=progress), []


def deploy(
    sm_client: Any,
    plan: DeployPlan,
    *,
    region: str | None = None,
    wait: bool = True,
    logs_client: Any = None,
    s3_client: Any = None,
    progress: bool = True,
    poll_s: float = 30,
    timeout_s: float = 3600,
    hosting: SageMakerHosting | None = None,
    after_create: Callable[[str], object] | None = None,
) -> dict[str, Any]:
    """Create model, endpoint config and endpoint; return the latest DescribeEndpoint response.

    ``region`` is the endpoint's: the clients' (read from ``sm_client`` when not given). Refuses an image
    not pinned by digest or in another region; with ``s3_client`` also checks that the model data bucket is
    in that region. ``after_create(name)`` runs once CreateEndpoint was accepted and before the wait (the
    spend guard sets the endpoint's deadline there, so it exists however the wait ends).
    """
    hosting = hosting or SageMakerHosting(poll_s=poll_s, timeout_s=timeout_s)
    region = region or calls.region_of(sm_client)
    check_deployable(plan.image, region)
    model_data = name_rules.split_s3_uri(plan.model_data_url)
    if s3_client is not None and model_data is not None:
        check_bucket_region(s3_client, model_data[0], region)
    sent = hosting.adapt(plan)
    created: list[str] = []
    try:
        create_model(sm_client, sent.model)
        created.append(f"model {sent.model['ModelName']}")
        create_endpoint_config(sm_client, sent.endpoint_config)
        created.append(f"endpoint config {sent.endpoint_config['EndpointConfigName']}")
        create_endpoint(sm_client, sent.endpoint)
    except DeployError as exc:
        if created:
            exc.args = (
                f"{exc.args[0]}\nAlready created: {', '.join(created)}; remove them with "
                f"workshop_lib.aws.teardown.delete_endpoint_resources(sm, {plan.name!r})",
            )
        raise
    if after_create is not None:
        after_create(plan.name)
    if wait:
        return hosting.wait(sm_client, plan.name, logs_client=logs_client, progress=progress)
    return hosting.created(sm_client, plan.name)


_WAITING = ("Creating", "Updating", "SystemUpdating", "RollingBack")


def wait_in_service(
    sm_client: Any,
    name: str,
    poll_s: float = 30,
    timeout_s: float = 3600,
    progress: bool = True,
    *,
    logs_client: Any = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Poll until the endpoint is InService and return DescribeEndpoint.

    On Failed, raise AwsFailure with SageMaker's FailureReason and, given
    ``logs_client``, the first lines of ``/aws/sagemaker/Endpoints/<name>`` (when the logs
    cannot be read, the reason still comes through, with a note saying so).
    """

    def failure(described: dict[str, Any]) -> AwsFailure | None:
        status = described["EndpointStatus"]
        if status in _WAITING:
            return None
        reason = described.get("FailureReason", "")
        lines, unreadable = [], None
        if logs_client is not None:
            try:
                lines = endpoint_log_lines(logs_client, name)
            except ClientError as exc:  # e.g. a Studio role without logs:FilterLogEvents: keep the reason
                unreadable = "{}: {}".format(*_error_code(exc))
        message = _failure_message(name, status, reason, lines, logs_client is not None and not unreadable)
        if unreadable:
            message += (
                f"\n(the endpoint's logs could not be read: {unreadable}; open "
                f"/aws/sagemaker/Endpoints/{name} in the CloudWatch console)"
            )
        return AwsFailure(message)

    def timeout(status: str) -> WorkshopTimeout:
        return WorkshopTimeout(
            f"endpoint {name} is still {status} after {timeout_s:.0f} s; it keeps going (and billing "
            f"once instances run): wait again with wait_in_service, or delete it with "
            f"workshop_lib.aws.teardown.delete_endpoint_resources(sm, {name!r})"
        )

    return calls.wait_for_status(
        lambda: sm_client.describe_endpoint(EndpointName=name),
        "EndpointStatus",
        done="InService",
        label=f"endpoint {name}",
        failure=failure,
        timeout=timeout,
        poll_s=poll_s,
        timeout_s=timeout_s,
        progress=progress,
        sleep=sleep,
        clock=clock,
    )


def _failure_message(name: str, status: str, reason: str, lines: list[str], had_logs: bool) -> str:
    parts = [f"endpoint {name} is {status}: {reason or 'no FailureReason given'}"]
    if lines:
        parts.append(f"first log lines of /aws/sagemaker/Endpoints/{name}:")
        parts.extend(f"  {line}" for line in lines)
    elif had_logs:
        parts.append(f"no log lines in /aws/sagemaker/Endpoints/{name} (the container may never have started)")
    parts.append(f"It still exists; delete it with workshop_lib.aws.teardown.delete_endpoint_resources(sm, {name!r})")
    return "\n".join(parts)


def log_group(endpoint_name: str) -> str:
    return f"/aws/sagemaker/Endpoints/{endpoint_name}"


def _log_events(logs_client: Any, endpoint_name: str, limit: int, pattern: str | None = None) -> list[dict[str, Any]]:
    kwargs = {"logGroupName": log_group(endpoint_name), "limit": min(limit, 10_000)}
    if pattern:
        kwargs["filterPattern"] = pattern
    events: list[dict[str, Any]] = []
    try:
        while len(events) < limit:
            response = logs_client.filter_log_events(**kwargs)
            events.extend(response.get("events", []))
            if not response.get("nextToken") or not response.get("events"):
                break
            kwargs["nextToken"] = response["nextToken"]
    except ClientError as exc:
        if _error_code(exc)[0] == "ResourceNotFoundException":
            return []
        raise
    return events[:limit]


def endpoint_log_lines(logs_client: Any, endpoint_name: str, limit: int = 20) -> list[str]:
    """The first ``limit`` lines the endpoint's containers logged (oldest first)."""
    return [e["message"].rstrip() for e in _log_events(logs_client, endpoint_name, limit)]


@dataclass(frozen=True)
class OffloadLine:
    log_stream: str
    message: str
    offloaded: int
    total: int


_OFFLOAD = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")


def parse_offload(message: str, log_stream: str = "") -> OffloadLine | None:
    """llama.cpp's "offloaded N/M layers to GPU" line, or None for any other line."""
    m = _OFFLOAD.search(message)
    return OffloadLine(log_stream, message.strip(), int(m[1]), int(m[2])) if m else None


def offload_log_lines(logs_client: Any, endpoint_name: str, limit: int = 50) -> list[OffloadLine]:
    """llama.cpp's offload lines from the endpoint's CloudWatch logs (one per model load)."""
    found = (
        parse_offload(e["message"], e.get("logStreamName", ""))
        for e in _log_events(logs_client, endpoint_name, limit, pattern='"offloaded"')
    )
    return [line for line in found if line]


def placed_instance_types(describe_endpoint_response: Mapping[str, Any]) -> dict[str, int]:
    """Instance type -> running count for pooled variants (which pool SageMaker placed on).

    Fixed-type variants do not report their type in DescribeEndpoint: they give ``{}``.
    """
    placed: dict[str, int] = {}
    for variant in describe_endpoint_response.get("ProductionVariants", []):
        for pool in variant.get("InstancePools") or []:
            count = pool.get("CurrentInstanceCount") or 0
            if count > 0:
                placed[pool["InstanceType"]] = placed.get(pool["InstanceType"], 0) + count
    return placed

"""Sending a scale-to-zero plan (``inference_components``) and moving its copies: the senders around boto3
clients, with what differs in the local rehearsal a method of ``ComponentHosting`` (``local.component_stand_in``
overrides them, as ``hosting.SageMakerHosting`` is overridden for endpoints).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from botocore import xform_name
from botocore.exceptions import ClientError

from ..errors import AwsFailure, WorkshopTimeout
from . import calls, hosting, teardown
from .inference_components import ZeroPlan, copies_request, removal_requests

DELETED, ALREADY_GONE = "deleted", "already gone"
_GONE_CODES = ("ValidationException", "ValidationError", "ObjectNotFoundException", "ResourceNotFound")


class ComponentHosting:
    """Where the component runs: SageMaker, which the flows poll until it has the copies asked for."""

    def __init__(self, *, poll_s: float = 30, timeout_s: float = 3600) -> None:
        self.poll_s, self.timeout_s = poll_s, timeout_s

    def create_endpoint(self, sm_client: Any, plan: ZeroPlan, *, progress: bool = True) -> list[str]:
        """CreateModel, CreateEndpointConfig and CreateEndpoint, waited for; notes on how it was served."""
        hosting.create_model(sm_client, plan.model)
        hosting.create_endpoint_config(sm_client, plan.endpoint_config)
        hosting.create_endpoint(sm_client, plan.endpoint)
        hosting.wait_in_service(sm_client, plan.name, poll_s=self.poll_s, timeout_s=self.timeout_s, progress=progress)
        return []

    def call(self, client: Any, operation: str, request: dict[str, Any]) -> dict[str, Any]:
        """Send ``operation`` with ``request`` through ``client`` (the stand-in answers what the emulator lacks)."""
        response: dict[str, Any] = getattr(client, xform_name(operation))(**request)
        return response

    def create_component(self, sm_client: Any, request: dict[str, Any]) -> str:
        arn: str = self.call(sm_client, "CreateInferenceComponent", request)["InferenceComponentArn"]
        return arn

    def set_copies(self, sm_client: Any, component: str, copies: int) -> None:
        self.call(sm_client, "UpdateInferenceComponentRuntimeConfig", copies_request(component, copies))

    def describe(self, sm_client: Any, component: str) -> dict[str, Any]:
        return self.call(sm_client, "DescribeInferenceComponent", {"InferenceComponentName": component})

    def delete_component(self, sm_client: Any, component: str) -> None:
        self.call(sm_client, "DeleteInferenceComponent", {"InferenceComponentName": component})

    def wait_gone(self, sm_client: Any, component: str) -> None:
        """Poll until DescribeInferenceComponent no longer finds ``component`` (the endpoint may go only then)."""
        started = time.monotonic()
        while True:
            try:
                self.describe(sm_client, component)
            except ClientError as exc:
                if _gone(exc):
                    return
                raise
            if time.monotonic() - started >= self.timeout_s:
                raise WorkshopTimeout(f"inference component {component} is still there after {self.timeout_s:.0f} s")
            time.sleep(self.poll_s)

    def runtime(self, make_client: Callable[[str], object]) -> Any:
        """The sagemaker-runtime client invocations go through (``make_client(service)`` makes the mode's)."""
        return make_client("sagemaker-runtime")

    def wait_copies(self, sm_client: Any, component: str, copies: int, *, progress: bool = True) -> dict[str, Any]:
        """Poll until the component is InService with ``copies`` copies; AwsFailure on Failed, a timeout after
        ``timeout_s``."""
        return wait_copies(
            lambda: self.describe(sm_client, component),
            component,
            copies,
            poll_s=self.poll_s,
            timeout_s=self.timeout_s,
            progress=progress,
        )

    def not_exercised(self) -> list[str]:
        return []


def current_copies(described: dict[str, Any]) -> int:
    return int((described.get("RuntimeConfig") or {}).get("CurrentCopyCount") or 0)


def wait_copies(
    describe: Callable[[], dict[str, Any]],
    component: str,
    copies: int,
    *,
    poll_s: float,
    timeout_s: float,
    progress: bool = True,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    def look() -> dict[str, Any]:
        described = describe()
        ready = described["InferenceComponentStatus"] == "InService" and current_copies(described) == copies
        return {**described, "Ready": "ready" if ready else described["InferenceComponentStatus"]}

    def failure(described: dict[str, Any]) -> Exception | None:
        if described["InferenceComponentStatus"] == "Failed":
            return AwsFailure(f"inference component {component} failed: {described.get('FailureReason', '')}")
        return None

    def timeout(status: str) -> Exception:
        return WorkshopTimeout(
            f"inference component {component} has not reached {copies} cop{'y' if copies == 1 else 'ies'} "
            f"after {timeout_s:.0f} s (now {status}); it keeps going: look again with DescribeInferenceComponent"
        )

    return calls.wait_for_status(
        look,
        "Ready",
        done="ready",
        label=f"{component}: {copies} cop{'y' if copies == 1 else 'ies'}",
        failure=failure,
        timeout=timeout,
        poll_s=poll_s,
        timeout_s=timeout_s,
        progress=progress,
        sleep=sleep,
        clock=clock,
    )


def _gone(exc: ClientError) -> bool:
    error = exc.response.get("Error", {})
    message = str(error.get("Message", "")).lower()
    return error.get("Code") in _GONE_CODES and any(
        words in message for words in ("could not find", "not found", "no scalable target", "no scaling policy")
    )


def remove_components(
    clients: Callable[[str], object], endpoint: str, components: ComponentHosting, *, wait: bool = True
) -> list[tuple[str, str]]:
    """What a scale-to-zero deployment of ``endpoint`` made beside the endpoint, in SageMaker's order: the alarm,
    the scaling policies and target, then the component (waited for until gone, so the endpoint may go next).
    (what, ``deleted`` or ``already gone``) each; other refusals are raised. ``clients(service)``: the mode's."""
    done = []
    for service, operation, request in removal_requests(endpoint):
        if service == "sagemaker" and operation != "DeleteInferenceComponent":
            continue  # the endpoint, its config and model: teardown's
        if operation == "DeleteScalingPolicy":
            what = f"scaling policy {request['PolicyName']}"
        elif operation == "DeregisterScalableTarget":
            what = f"scalable target {request['ResourceId']}"
        elif operation == "DeleteAlarms":
            what = f"alarm {request['AlarmNames'][0]}"
        else:
            what = f"inference component {request['InferenceComponentName']}"
        try:
            components.call(clients(service), operation, request)
            if operation == "DeleteInferenceComponent" and wait:
                components.wait_gone(clients("sagemaker"), request["InferenceComponentName"])
            done.append((what, DELETED))
        except ClientError as exc:
            if not _gone(exc):
                raise
            done.append((what, ALREADY_GONE))
    return done


def remove(
    clients: Callable[[str], object],
    endpoint: str,
    components: ComponentHosting,
    *,
    scheduler_client: Any = None,
    wait: bool = True,
) -> tuple[list[tuple[str, str]], teardown.CleanupResult]:
    """``remove_components``, then the endpoint, its config and model and its deadline
    (``teardown.delete_endpoint_resources``: only what carries the workshop's tag)."""
    done = remove_components(clients, endpoint, components, wait=wait)
    result = teardown.delete_endpoint_resources(
        clients("sagemaker"), endpoint, wait=wait, poll_s=components.poll_s, scheduler_client=scheduler_client
    )
    return done, result


def hosts_components(sm_client: Any, endpoint: str) -> bool:
    """Whether ``endpoint`` is one that hosts inference components: its variant names no model, or has its
    instances managed (``ManagedInstanceScaling``); False when there is no such endpoint."""
    try:
        config_name = sm_client.describe_endpoint(EndpointName=endpoint)["EndpointConfigName"]
        variants = sm_client.describe_endpoint_config(EndpointConfigName=config_name)["ProductionVariants"]
    except ClientError as exc:
        if _gone(exc):
            return False
        raise
    return any("ModelName" not in v or "ManagedInstanceScaling" in v for v in variants)


__all__ = [
    "ALREADY_GONE",
    "DELETED",
    "ComponentHosting",
    "current_copies",
    "hosts_components",
    "remove",
    "remove_components",
    "wait_copies",
]

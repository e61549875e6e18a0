"""The local stand-in for inference components: the emulator (moto) has no inference component API and its
Application Auto Scaling knows no ``sagemaker:inference-component:DesiredCopyCount``, so those calls are
validated by botocore and recorded like any other (the rehearsal's call log and strict IAM see them), then
answered here from a state file in the rehearsal's folder (``inference-components.json``), which every
process of the rehearsal (the CLI's commands, the notebooks' kernels) reads.

A component with copies is served by a real local process, registered under the component's name with the
rehearsal (``Rehearsal.start_local_endpoint(..., model_name=...)``), so ``stop_all`` stops it as it stops
endpoints. Zero copies stops the process; one copy starts it again (the local cold start, timed).
InvokeEndpoint naming an ``InferenceComponentName`` goes to that process; with no copy it fails as SageMaker
fails it: ``ValidationError``, HTTP 400, "Inference Component has no capacity to process this request. ...".
"""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

from botocore import xform_name
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError

from ..aws import arns, calls, component_hosting, hosting
from ..aws.inference_components import SCALABLE_DIMENSION, ZeroPlan
from ..config import LOCAL_ROLE_ARN
from ..name_rules import role_account
from . import rehearsal
from .permissions import CallLog
from .stand_ins import EMULATOR_FAMILIES, EMULATOR_INSTANCE_TYPES

STATE_FILE = "inference-components.json"
ACCOUNT = str(role_account(LOCAL_ROLE_ARN))  # the emulated account the rehearsal acts in
COMPONENT_HEADER = "X-Amzn-SageMaker-Inference-Component"
NO_CAPACITY_MESSAGE = (
    "Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress "
    "(if configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API."
)
SAGEMAKER_CALLS = frozenset(
    {
        "CreateInferenceComponent",
        "DescribeInferenceComponent",
        "ListInferenceComponents",
        "UpdateInferenceComponent",
        "UpdateInferenceComponentRuntimeConfig",
        "DeleteInferenceComponent",
    }
)
SCALING_CALLS = frozenset(
    {
        "RegisterScalableTarget",
        "DeregisterScalableTarget",
        "PutScalingPolicy",
        "DeleteScalingPolicy",
        "DescribeScalableTargets",
        "DescribeScalingPolicies",
    }
)


class _Body(io.BytesIO):
    """A raw HTTP body as botocore reads it: whole (``stream``) or in chunks (a streaming answer's ``read``)."""

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.getvalue()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def _reply(url: str, status: int, body: dict[str, Any] | bytes, headers: dict[str, str] | None = None) -> AWSResponse:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return AWSResponse(url, status, {"Content-Type": "application/x-amz-json-1.1", **(headers or {})}, _Body(data))


def _bytes(body: Any) -> bytes:
    if isinstance(body, bytes):
        return body
    if hasattr(body, "read"):
        read: bytes = body.read()
        return read
    return str(body or "").encode()


class Refusal(NamedTuple):
    """An error answer, as the service would give it (returned, not raised: the reply carries it)."""

    code: str
    message: str
    status: int = 400


class LocalComponents(component_hosting.ComponentHosting):
    """Inference components and their scaling answered here, each copy a local process."""

    def __init__(self, local: rehearsal.Rehearsal, s3_client: Any, calls: CallLog | None = None):
        super().__init__(poll_s=0.2, timeout_s=180)
        self.local, self.s3, self.calls = local, s3_client, calls
        self.cold_starts: dict[str, float] = {}  # component -> seconds its last process took to start

    # ---- state -------------------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self.local.home / STATE_FILE

    def _read(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads(self.path.read_text())  # as _write left it
        except (OSError, ValueError):
            data = {}
        data.setdefault("components", {})
        data.setdefault("targets", {})
        return data

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        tmp.replace(self.path)

    def _as(self, principal: str | None) -> AbstractContextManager[None]:
        return self.calls.acting_as(principal) if self.calls is not None else nullcontext()

    # ---- the endpoint: to the emulator, which wants a model on every variant ----------------------

    def create_endpoint(self, sm_client: Any, plan: ZeroPlan, *, progress: bool = True) -> list[str]:
        variant = dict(plan.endpoint_config["ProductionVariants"][0])
        wanted = variant["InstanceType"]
        if wanted.split(".")[1] not in EMULATOR_FAMILIES:
            variant["InstanceType"] = EMULATOR_INSTANCE_TYPES.get(wanted, "ml.c5.2xlarge")
        variant["ModelName"] = plan.model["ModelName"]
        config = {**plan.endpoint_config, "ProductionVariants": [variant]}
        hosting.create_model(sm_client, plan.model)
        hosting.create_endpoint_config(sm_client, calls.validate("sagemaker", "CreateEndpointConfig", config))
        hosting.create_endpoint(sm_client, plan.endpoint)
        hosting.wait_in_service(sm_client, plan.name, poll_s=self.poll_s, timeout_s=self.timeout_s, progress=False)
        return [
            f"  the emulator takes no variant without a model, so its CreateEndpointConfig named {plan.model['ModelName']} "
            f"(and {variant['InstanceType']} for {wanted}); the request as built was validated by botocore",
        ]

    def not_exercised(self) -> list[str]:
        return [
            "Not exercised locally: SageMaker's managed instance scaling (no instance is provisioned or released; "
            "a copy is a local process), the CloudWatch metrics and alarms that drive the scaling policies (the "
            "stand-in records the target and policies; the step moves the copies itself), and the minutes an "
            "instance takes to start on AWS."
        ]

    # ---- calls answered here ------------------------------------------------------------------------

    def call(self, client: Any, operation: str, request: dict[str, Any]) -> dict[str, Any]:
        """``operation`` through ``client`` (validated by botocore, recorded), answered here when the emulator
        lacks it, sent to the emulator otherwise."""
        service = client.meta.service_model.service_name
        handled = (service == "sagemaker" and operation in SAGEMAKER_CALLS) or (
            service == "application-autoscaling"
            and operation in SCALING_CALLS
            and (request.get("ScalableDimension") == SCALABLE_DIMENSION or operation.startswith("Describe"))
        )
        if not handled:
            response: dict[str, Any] = getattr(client, xform_name(operation))(**request)
            return response
        event = f"before-send.{client.meta.service_model.service_id.hyphenize()}.{operation}"

        def answer(request: object, **_: Any) -> AWSResponse:
            url = getattr(request, "url", "")
            answered = self._answer(client, service, operation, sent)
            if isinstance(answered, Refusal):
                return _reply(url, answered.status, {"__type": answered.code, "message": answered.message})
            return _reply(url, 200, answered)

        sent = request
        client.meta.events.register(event, answer)
        try:
            answered: dict[str, Any] = getattr(client, xform_name(operation))(**request)
            return answered
        finally:
            client.meta.events.unregister(event, answer)

    def _answer(self, client: Any, service: str, operation: str, request: dict[str, Any]) -> dict[str, Any] | Refusal:
        region = client.meta.region_name
        if service == "sagemaker":
            return self._sagemaker(client, operation, request, region)
        return self._scaling(operation, request, region)

    def _sagemaker(
        self, sm_client: Any, operation: str, request: dict[str, Any], region: str
    ) -> dict[str, Any] | Refusal:
        data = self._read()
        components = data["components"]
        if operation == "ListInferenceComponents":
            wanted = request.get("EndpointNameEquals")
            listed = [self._summary(c) for c in components.values() if not wanted or c["EndpointName"] == wanted]
            return {"InferenceComponents": listed}
        name = request["InferenceComponentName"]
        arn = arns.sagemaker_arn(region, ACCOUNT, "inference-component", name)
        if operation == "CreateInferenceComponent":
            if name in components:
                return Refusal("ValidationException", f"Cannot create already existing inference component {arn}.")
            missing = self._require_endpoint(sm_client, request["EndpointName"])
            if missing is not None:
                return missing
            components[name] = {
                "InferenceComponentName": name,
                "InferenceComponentArn": arn,
                "EndpointName": request["EndpointName"],
                "VariantName": request.get("VariantName"),
                "Specification": request.get("Specification", {}),
                "DesiredCopyCount": request["RuntimeConfig"]["CopyCount"],
                "CreationTime": _now(),
                "Refused": 0,
            }
            self._write(data)
            self._serve(sm_client, name, components[name])
            return {"InferenceComponentArn": arn}
        found = components.get(name)
        if found is None:
            return Refusal("ValidationException", f"Could not find inference component '{arn}'.")
        if operation == "DescribeInferenceComponent":
            return self._described(found)
        if operation == "DeleteInferenceComponent":
            self.local.stop_endpoint(name)
            del components[name]
            self._write(data)
            return {}
        copies = (request.get("DesiredRuntimeConfig") or request.get("RuntimeConfig") or {}).get("CopyCount")
        if copies is not None:
            found["DesiredCopyCount"] = copies
            self._write(data)
            self._serve(sm_client, name, found)
        return {"InferenceComponentArn": arn}

    def _require_endpoint(self, sm_client: Any, endpoint: str) -> Refusal | None:
        with self._as(None):  # the stand-in's own look-up, no call AWS would see
            try:
                status = sm_client.describe_endpoint(EndpointName=endpoint)["EndpointStatus"]
            except ClientError:
                return Refusal("ValidationException", f"Could not find endpoint '{endpoint}'.")
        if status != "InService":
            return Refusal("ValidationException", f"Endpoint {endpoint} is {status}, not InService.")
        return None

    def _running(self, name: str) -> bool:
        try:
            self.local.endpoint_url(name)
        except rehearsal.RehearsalError:
            return False
        return True

    def _serve(self, sm_client: Any, name: str, component: dict[str, Any]) -> None:
        """Start or stop the component's process to match its copies (one process serves any copies here)."""
        if component["DesiredCopyCount"] == 0:
            self.local.stop_endpoint(name)
            return
        if self._running(name):
            return
        started = self.local.start_local_endpoint(
            name, sm_client, self.s3, calls=self.calls, model_name=component["Specification"]["ModelName"]
        )
        self.cold_starts[name] = started.seconds

    def _described(self, component: dict[str, Any]) -> dict[str, Any]:
        current = 1 if component["DesiredCopyCount"] and self._running(component["InferenceComponentName"]) else 0
        return {
            **{k: component[k] for k in ("InferenceComponentName", "InferenceComponentArn", "EndpointName")},
            "EndpointArn": component["InferenceComponentArn"].replace(
                f"inference-component/{component['InferenceComponentName']}", f"endpoint/{component['EndpointName']}"
            ),
            "VariantName": component.get("VariantName") or "AllTraffic",
            "Specification": component["Specification"],
            "RuntimeConfig": {"DesiredCopyCount": component["DesiredCopyCount"], "CurrentCopyCount": current},
            "CreationTime": component["CreationTime"],
            "LastModifiedTime": _now(),
            "InferenceComponentStatus": "InService",
        }

    def _summary(self, component: dict[str, Any]) -> dict[str, Any]:
        described = self._described(component)
        keep = ("InferenceComponentName", "InferenceComponentArn", "EndpointName", "EndpointArn", "VariantName")
        return {
            **{k: described[k] for k in keep},
            "InferenceComponentStatus": "InService",
            "CreationTime": described["CreationTime"],
            "LastModifiedTime": described["LastModifiedTime"],
        }

    def _scaling(self, operation: str, request: dict[str, Any], region: str) -> dict[str, Any] | Refusal:
        data = self._read()
        targets = data["targets"]
        if operation == "DescribeScalableTargets":
            return {"ScalableTargets": [t["target"] for t in targets.values()]}
        if operation == "DescribeScalingPolicies":
            return {"ScalingPolicies": [p for t in targets.values() for p in t["policies"].values()]}
        resource = request["ResourceId"]
        found = targets.get(resource)
        if operation == "RegisterScalableTarget":
            arn = f"arn:{arns.partition(region)}:application-autoscaling:{region}:{ACCOUNT}:scalable-target/{resource}"
            target = {k: request[k] for k in ("ServiceNamespace", "ResourceId", "ScalableDimension")}
            target.update(MinCapacity=request["MinCapacity"], MaxCapacity=request["MaxCapacity"], ScalableTargetARN=arn)
            targets[resource] = {"target": target, "policies": (found or {}).get("policies", {})}
            self._write(data)
            return {"ScalableTargetARN": arn}
        if found is None:
            return Refusal("ObjectNotFoundException", f"No scalable target registered for {resource}")
        if operation == "DeregisterScalableTarget":
            del targets[resource]
            self._write(data)
            return {}
        name = request["PolicyName"]
        if operation == "DeleteScalingPolicy":
            if found["policies"].pop(name, None) is None:
                return Refusal(
                    "ObjectNotFoundException",
                    f"No scaling policy found for service namespace "
                    f"sagemaker, resource ID {resource}, policy name {name}",
                )
            self._write(data)
            return {}
        arn = (
            f"arn:{arns.partition(region)}:autoscaling:{region}:{ACCOUNT}:scalingPolicy:local:resource/"
            f"sagemaker/{resource}:policyName/{name}"
        )
        found["policies"][name] = {**request, "PolicyARN": arn, "CreationTime": _now()}
        self._write(data)
        return {"PolicyARN": arn, "Alarms": []}

    # ---- InvokeEndpoint with InferenceComponentName --------------------------------------------------

    def runtime(self, make_client: Callable[[str], object]) -> Any:
        client: Any = make_client("sagemaker-runtime")
        client.meta.events.register("before-send.sagemaker-runtime.InvokeEndpoint", self._invoke)
        return client

    def _invoke(self, request: Any, **_: Any) -> AWSResponse | None:
        component = request.headers.get(COMPONENT_HEADER)
        name = component.decode() if isinstance(component, bytes) else component
        data = self._read()
        found = data["components"].get(name or "")
        if found is None:
            return None  # not a component of this stand-in: the emulator answers
        if not (found["DesiredCopyCount"] and self._running(name)):
            found["Refused"] = found.get("Refused", 0) + 1  # what NoCapacityInvocationFailures counts on AWS
            self._write(data)
            return _reply(request.url, 400, {"message": NO_CAPACITY_MESSAGE}, {"x-amzn-ErrorType": "ValidationError:"})
        headers = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()}
        forwarded = {k: headers[k] for k in ("Content-Type", "Accept") if k in headers}
        sent = urllib.request.Request(
            self.local.endpoint_url(name).rstrip("/") + "/invocations",
            data=_bytes(request.body),
            headers=forwarded,
            method="POST",
        )
        try:
            with urllib.request.urlopen(sent, timeout=rehearsal.LOCAL_REQUEST_TIMEOUT_S) as answered:
                body, status, custom = answered.read(), answered.status, answered.headers.get(_CUSTOM)
        except urllib.error.HTTPError as exc:
            text = exc.read().decode("utf-8", "replace")
            error = {
                "OriginalStatusCode": exc.code,
                "OriginalMessage": text,
                "message": f'Received client error ({exc.code}) from primary with message "{text[:500]}".',
            }
            return _reply(request.url, 424, error, {"x-amzn-ErrorType": "ModelError:"})
        extra = {_CUSTOM: custom} if custom else {}
        return AWSResponse(request.url, status, {"Content-Type": "application/json", **extra}, _Body(body))

    def hosted_by(self, endpoint: str) -> list[str]:
        """The inference components ``endpoint`` hosts (SageMaker refuses its DeleteEndpoint while there are any)."""
        return sorted(n for n, c in self._read()["components"].items() if c["EndpointName"] == endpoint)

    def refused(self, component: str) -> int:
        """How many invocations found ``component`` with no copy (NoCapacityInvocationFailures' count here)."""
        return int(self._read()["components"].get(component, {}).get("Refused", 0))


_CUSTOM = "X-Amzn-SageMaker-Custom-Attributes"

__all__ = ["COMPONENT_HEADER", "NO_CAPACITY_MESSAGE", "STATE_FILE", "LocalComponents"]

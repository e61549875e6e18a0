"""Safe updates: a decision endpoint rolled to a new model package or image while it keeps serving.

An update is a new *version* of the endpoint's model and endpoint config, named
``<endpoint>-<UTC time>`` (``version_name``) and built by the same plan builders a deploy uses
(``deploy_spec.plan_for``), so it has the same shape as what ``hosting.deploy`` made; then one
``UpdateEndpoint`` with a blue/green ``DeploymentConfig``: SageMaker starts the new fleet beside
the old one, shifts traffic all at once or a canary first, watches the rollback alarms
(``alarms.rollback_alarms``) for the baking period and rolls back by itself if one fires.

Builders are pure and checked by botocore's model (plus the bounds it leaves to SageMaker);
``roll_out`` sends the version's CreateModel and CreateEndpointConfig, then UpdateEndpoint through
the hosting (``SageMakerHosting``; locally ``stand_ins.LocalHosting`` replaces the local endpoint's
process once its successor is ready), and waits with botocore's ``endpoint_in_service`` waiter,
reporting each status it passes through. An endpoint back on its old config once it is InService
again was rolled back, and the result says so.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError, WaiterError

from ..config import check_resource_name
from ..errors import AwsFailure, InvalidInput
from . import calls, teardown
from . import hosting as hosting_module
from .deploy_spec import ENDPOINT_NAME_ENV, DeploySpec, plan_for
from .endpoints import DeployPlan, is_version, version_name
from .images import ImageRef, check_deployable
from .variants import endpoint_request

ALL_AT_ONCE, CANARY = "ALL_AT_ONCE", "CANARY"
ROUTINGS = (ALL_AT_ONCE, CANARY)
BAKE_S = 300  # how long SageMaker watches the alarms on the new fleet before it goes on
TERMINATION_WAIT_S = 0  # the old fleet is stopped as soon as the new one has baked
MAX_EXECUTION_S = 3600  # the whole rollout, after which SageMaker rolls back
CANARY_PERCENT = 50  # at most half the fleet takes the canary's traffic


def _shape(*members: str) -> Any:
    shape = calls.operation_model("sagemaker", "UpdateEndpoint").input_shape
    for member in members:
        shape = shape.members[member]
    return shape


def _bounded(value: object, members: Sequence[str], what: str) -> int:
    meta = _shape(*members).metadata
    low, high = meta.get("min", 0), meta.get("max", 2**31 - 1)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{what} is {value!r}; SageMaker takes a whole number from {low} to {high}")
    return value


def deployment_config(
    rollback_alarms: Sequence[str],
    *,
    routing: str = ALL_AT_ONCE,
    instance_count: int = 1,
    canary_percent: int = CANARY_PERCENT,
    bake_s: int = BAKE_S,
    termination_wait_s: int = TERMINATION_WAIT_S,
    max_execution_s: int = MAX_EXECUTION_S,
) -> dict[str, Any]:
    """A blue/green DeploymentConfig: ``routing`` ALL_AT_ONCE (every request moves to the new fleet, which
    is then watched for ``bake_s``) or CANARY (``canary_percent`` of the capacity first, watched for
    ``bake_s``, then the rest); any of ``rollback_alarms`` firing rolls the endpoint back."""
    routings = _shape("DeploymentConfig", "BlueGreenUpdatePolicy", "TrafficRoutingConfiguration", "Type").enum
    if routing not in ROUTINGS:
        other = " (SageMaker also has LINEAR; the workshop offers these two)" if routing in routings else ""
        raise InvalidInput(f"routing {routing!r} is not one of {', '.join(ROUTINGS)}{other}")
    alarms = list(dict.fromkeys(rollback_alarms))
    limit = _shape("DeploymentConfig", "AutoRollbackConfiguration", "Alarms").metadata["max"]
    if not 1 <= len(alarms) <= limit:
        raise InvalidInput(
            f"{len(alarms)} rollback alarms given; an update watches 1 to {limit}: create them "
            "first (alarms.put_alarms) and pass alarms.rollback_alarms(endpoint)"
        )
    traffic = {
        "Type": routing,
        "WaitIntervalInSeconds": _bounded(
            bake_s,
            ("DeploymentConfig", "BlueGreenUpdatePolicy", "TrafficRoutingConfiguration", "WaitIntervalInSeconds"),
            "bake_s (WaitIntervalInSeconds)",
        ),
    }
    if routing == CANARY:
        if instance_count < 2:
            raise InvalidInput(
                f"a CANARY update needs at least 2 instances (the canary is at most half the fleet) "
                f"and the endpoint has {instance_count}; use routing='{ALL_AT_ONCE}'"
            )
        if isinstance(canary_percent, bool) or not isinstance(canary_percent, int) or not 1 <= canary_percent <= 50:
            raise InvalidInput(f"canary_percent is {canary_percent!r}; it must be 1 to 50 (% of the capacity)")
        traffic["CanarySize"] = {"Type": "CAPACITY_PERCENT", "Value": canary_percent}
    wait = _bounded(
        termination_wait_s,
        ("DeploymentConfig", "BlueGreenUpdatePolicy", "TerminationWaitInSeconds"),
        "termination_wait_s",
    )
    longest = _bounded(
        max_execution_s,
        ("DeploymentConfig", "BlueGreenUpdatePolicy", "MaximumExecutionTimeoutInSeconds"),
        "max_execution_s",
    )
    policy = {
        "TrafficRoutingConfiguration": traffic,
        "TerminationWaitInSeconds": wait,
        "MaximumExecutionTimeoutInSeconds": longest,
    }
    if longest < bake_s * (2 if routing == CANARY else 1):
        raise InvalidInput(
            f"max_execution_s ({max_execution_s}) is shorter than the baking the rollout needs "
            f"({bake_s} s{' twice, for the canary and the rest' if routing == CANARY else ''})"
        )
    return {
        "BlueGreenUpdatePolicy": policy,
        "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": name} for name in alarms]},
    }


def update_request(endpoint_name: str, config_name: str, deployment: dict[str, Any]) -> dict[str, Any]:
    """UpdateEndpoint onto ``config_name`` with ``deployment`` (``deployment_config``), keeping the variant's
    instance count and weight as they are now (``RetainAllVariantProperties``): the version's config says 1
    instance, and without it an endpoint auto scaling had scaled out would drop to one instance in the update
    (SageMaker guide, "Update endpoints that use auto scaling"). The version keeps the variant's name, which is
    what SageMaker matches the retained properties by."""
    request = {
        "EndpointName": check_resource_name(endpoint_name, "endpoint"),
        "EndpointConfigName": check_resource_name(config_name, "endpoint config"),
        "RetainAllVariantProperties": True,
        "DeploymentConfig": deployment,
    }
    return calls.validate("sagemaker", "UpdateEndpoint", request)


@dataclass(frozen=True)
class UpdatePlan:
    """One update: the version as a deploy plan (its model and endpoint config; its CreateEndpoint is
    never sent) and the UpdateEndpoint that moves ``endpoint_name`` onto it. What the version serves
    (image, model data, notes) is read from that one plan."""

    endpoint_name: str
    version_plan: DeployPlan
    update: dict[str, Any]

    @property
    def version(self) -> str:
        name: str = self.version_plan.endpoint_config["EndpointConfigName"]
        return name

    @property
    def model(self) -> dict[str, Any]:
        return self.version_plan.model

    @property
    def endpoint_config(self) -> dict[str, Any]:
        return self.version_plan.endpoint_config

    @property
    def notes(self) -> tuple[str, ...]:
        return self.version_plan.notes

    @property
    def image_uri(self) -> str:
        return self.version_plan.image_uri

    @property
    def model_data_url(self) -> str | None:
        return self.version_plan.model_data_url

    def requests(self) -> list[tuple[str, dict[str, Any]]]:
        return [
            ("CreateModel", self.model),
            ("CreateEndpointConfig", self.endpoint_config),
            ("UpdateEndpoint", self.update),
        ]

    def to_json(self) -> str:
        return json.dumps(dict(self.requests()), indent=2)


def update_plan(
    spec: DeploySpec,
    *,
    endpoint_name: str,
    role_arn: str,
    region: str,
    image: ImageRef,
    model_data_url: str,
    rollback_alarms: Sequence[str],
    version: str | None = None,
    routing: str = ALL_AT_ONCE,
    instance_count: int = 1,
    data_capture: dict[str, Any] | None = None,
    **deployment: Any,
) -> UpdatePlan:
    """The requests that roll ``endpoint_name`` to ``image`` and ``model_data_url`` with ``spec``'s
    settings (and ``data_capture``, as the deploy sends it), as a new version (``version_name``); pure:
    nothing is sent. The adapter's metrics keep the endpoint's name, not the version's."""
    check_resource_name(endpoint_name, "endpoint")
    version = version or version_name(endpoint_name)
    made = plan_for(
        spec,
        name=version,
        role_arn=role_arn,
        region=region,
        image=image,
        model_data_url=model_data_url,
        data_capture=data_capture,
    )
    model = made.model
    env = model["PrimaryContainer"].get("Environment") or {}
    if ENDPOINT_NAME_ENV in env and env[ENDPOINT_NAME_ENV] != endpoint_name:
        container = {**model["PrimaryContainer"], "Environment": {**env, ENDPOINT_NAME_ENV: endpoint_name}}
        model = calls.validate("sagemaker", "CreateModel", {**model, "PrimaryContainer": container})
    config = made.endpoint_config
    count = config["ProductionVariants"][0].get("InitialInstanceCount", instance_count)
    update = update_request(
        endpoint_name,
        version,
        deployment_config(rollback_alarms, routing=routing, instance_count=max(count, instance_count), **deployment),
    )
    return UpdatePlan(endpoint_name, DeployPlan(model, config, endpoint_request(version), made.notes), update)


# ---- sending and waiting ---------------------------------------------------------------------------


@dataclass
class Rollout:
    """How an update ended: the statuses the endpoint went through, and the config it serves now."""

    endpoint_name: str
    version: str
    statuses: list[str] = field(default_factory=list)
    config_name: str = ""
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def rolled_back(self) -> bool:
        return self.config_name != self.version

    @property
    def ok(self) -> bool:
        return bool(self.statuses) and self.statuses[-1] == "InService" and not self.rolled_back

    def __str__(self) -> str:
        path = " -> ".join(self.statuses) or "no status read"
        if self.rolled_back:
            outcome = (
                f"ROLLED BACK: it still serves {self.config_name}, not {self.version} (a rollback alarm "
                "fired, or the new fleet failed to start; see the endpoint's FailureReason and its alarms)"
            )
        else:
            outcome = f"now serves {self.version}"
        return "\n".join([f"endpoint {self.endpoint_name}: {path} after {self.seconds:.1f} s; {outcome}", *self.notes])

    __repr__ = __str__


def wait_rollout(
    sm_client: Any,
    endpoint_name: str,
    *,
    delay_s: float = 30,
    max_attempts: int = 240,
    report: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Wait with botocore's ``endpoint_in_service`` waiter (its acceptors decide: InService succeeds, Failed
    fails), one attempt at a time so each new status is reported; returns the statuses seen."""
    waiter = sm_client.get_waiter("endpoint_in_service")
    seen: list[str] = []

    def saw(status: str) -> None:
        if not seen or seen[-1] != status:
            seen.append(status)
            if report is not None:
                report(f"endpoint {endpoint_name}: {status}")

    for _attempt in range(max_attempts):
        try:
            waiter.wait(EndpointName=endpoint_name, WaiterConfig={"Delay": 1, "MaxAttempts": 1})
        except WaiterError as exc:
            status = (exc.last_response or {}).get("EndpointStatus", "unknown")
            saw(status)
            if "terminal failure" in str(exc):
                reason = (exc.last_response or {}).get("FailureReason", "no FailureReason given")
                raise AwsFailure(f"endpoint {endpoint_name} is {status} during the update: {reason}") from None
            sleep(delay_s)
            continue
        saw("InService")
        return seen
    raise AwsFailure(
        f"endpoint {endpoint_name} is still {seen[-1] if seen else 'unknown'} after {max_attempts} "
        f"checks {delay_s:g} s apart; the rollout goes on in SageMaker: wait again with "
        "updates.wait_rollout, or read its status with describe_endpoint"
    )


def roll_out(
    sm_client: Any,
    plan: UpdatePlan,
    *,
    region: str | None = None,
    hosting: hosting_module.SageMakerHosting | None = None,
    delay_s: float = 30,
    max_attempts: int = 240,
    report: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Rollout:
    """Create the version's model and endpoint config, send UpdateEndpoint, and wait for the endpoint to be
    InService again; the result says which config it serves (the old one: rolled back). ``region`` is the
    endpoint's (read from ``sm_client`` when not given), which the new image must be in."""

    hosting = hosting or hosting_module.SageMakerHosting()
    started = time.perf_counter()
    check_deployable(plan.version_plan.image, region or calls.region_of(sm_client))
    before = sm_client.describe_endpoint(EndpointName=plan.endpoint_name)
    if before["EndpointStatus"] != "InService":
        raise AwsFailure(
            f"endpoint {plan.endpoint_name} is {before['EndpointStatus']}; an update starts from "
            "InService: wait for it (or for the update under way) first"
        )
    sent = hosting.adapt(plan.version_plan)
    try:
        hosting_module.create_model(sm_client, sent.model)
        hosting_module.create_endpoint_config(sm_client, sent.endpoint_config)
        if report is not None:
            report(
                f"endpoint {plan.endpoint_name}: {before['EndpointStatus']} on {before['EndpointConfigName']}; "
                f"updating to {plan.version}"
            )
        hosting.update_endpoint(sm_client, plan.update)
        statuses = wait_rollout(
            sm_client, plan.endpoint_name, delay_s=delay_s, max_attempts=max_attempts, report=report, sleep=sleep
        )
    except (ClientError, AwsFailure) as exc:  # refused or failed: the version it made must not stay behind
        note = f"the update's version {plan.version}: {discard_version(sm_client, plan.endpoint_name, plan.version)}"
        if sys.version_info >= (3, 11):
            exc.add_note(note)
        else:  # Python 3.10 has no add_note; the note is kept where 3.11's traceback would read it
            exc.__notes__ = [*getattr(exc, "__notes__", []), note]  # type: ignore[union-attr]  # not in 3.10's stubs
        raise
    after = sm_client.describe_endpoint(EndpointName=plan.endpoint_name)
    _, notes = hosting.served(plan.endpoint_name)
    rollout = Rollout(
        plan.endpoint_name,
        plan.version,
        statuses,
        after["EndpointConfigName"],
        time.perf_counter() - started,
        [*("  note: " + n for n in plan.notes), *notes],
    )
    if rollout.rolled_back:
        rollout.notes.append(
            f"  the version rolled back from, {plan.version}: "
            f"{discard_version(sm_client, plan.endpoint_name, plan.version)}"
        )
    superseded = before["EndpointConfigName"]
    if rollout.ok and is_version(plan.endpoint_name, superseded):  # an earlier update's: nothing serves it now
        rollout.notes.append(f"  the version it replaced, {superseded}: {_delete_version(sm_client, superseded)}")
    return rollout


# While the endpoint is in one of these, the version may still be in use (an update under way).
_BUSY = ("Creating", "Updating", "SystemUpdating", "RollingBack", "UpdateRollbackFailed")


def discard_version(sm_client: Any, endpoint_name: str, version: str) -> str:
    """Delete an update's version (config and model) unless the endpoint serves it or is still moving."""
    try:
        described = sm_client.describe_endpoint(EndpointName=endpoint_name)
    except ClientError as exc:
        if "Could not find" not in str(exc.response.get("Error", {}).get("Message", "")):
            return f"kept (the endpoint could not be read: {exc.response.get('Error', {}).get('Code')})"
        described = {}
    if described.get("EndpointConfigName") == version:
        return "kept: the endpoint serves it"
    if described.get("EndpointStatus") in _BUSY:
        return (
            f"kept: the endpoint is {described['EndpointStatus']}; notebook 08 deletes it with the endpoint "
            "(steps.delete_endpoints)"
        )
    return _delete_version(sm_client, version)


def _delete_version(sm_client: Any, version: str) -> str:
    """An earlier version's endpoint config and model (each only if it carries the workshop's tag)."""
    notes: list[str] = []
    done = [
        f"{kind} {teardown.delete_owned(sm_client, kind, version, delete, notes)}"
        for kind, delete in (("endpoint config", teardown.delete_endpoint_config), ("model", teardown.delete_model))
    ]
    return "; ".join(done + notes)


__all__ = [
    "ALL_AT_ONCE",
    "CANARY",
    "Rollout",
    "UpdatePlan",
    "deployment_config",
    "discard_version",
    "is_version",
    "roll_out",
    "update_plan",
    "update_request",
    "version_name",
    "wait_rollout",
]

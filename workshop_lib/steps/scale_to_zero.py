"""Scale to zero: the decision model as an inference component on an endpoint whose instances SageMaker
manages down to none, so an idle endpoint costs nothing (``aws.inference_components`` holds the requests and
SageMaker's rules).

``deploy_scale_to_zero`` sends the plan (model, endpoint config, endpoint, component, the copies' scalable
target from 0, target tracking, the step policy and its no-capacity alarm) after saying, before anything is
sent, where the region or the quota rules it out, then gives it a deadline of two schedules: the component's
deletion, and the endpoint's a margin later (``spend_guard.set_deadlines``); ``zero_requests`` lists all it sends,
those two schedules included, for the dry run. ``show_scale_to_zero`` then takes
the copies to zero, shows the invocation SageMaker refuses meanwhile (``NoCapacity``: retryable, with the
expected wait), brings a copy back and times the cold start until a decision is answered, and shows what the
endpoint costs idle and busy.
``remove_scale_to_zero`` deletes it all, the component before the endpoint. Locally the stand-in
(``local.component_stand_in``) answers what the emulator lacks and runs each copy as a local process.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from .. import name_rules
from ..aws import encryption, images, inference_components, spend_guard, teardown
from ..aws.component_hosting import ComponentHosting
from ..aws.inference_components import ZeroPlan
from ..client.endpoint import EndpointClient
from ..client.endpoint_errors import NoCapacity
from ..client.transport import READ_TIMEOUT_S
from ..deploy_paths import DECISION_CPU
from ..errors import StepError
from ..examples import SUPPORT_ROUTE
from ..local.rehearsal import LOCAL_REQUEST_TIMEOUT_S
from .components import components_first, components_for
from .context import Shown, Text, Workshop, cleanup_step, shows_requests
from .deadlines import give_deadline
from .quotas import quota_name
from .recorded import decision_image
from .recorded import model_data_url as recorded_model

DEFAULT_NAME = inference_components.ZERO_ENDPOINT


def refusal(workshop: Workshop, instance_type: str) -> str | None:
    """Why scale to zero cannot be deployed here, said before anything is sent; None when nothing stands in the way.
    The region's partition, then (on AWS) the instance type's endpoint quota."""
    config = workshop.config
    config.require("region")
    why = inference_components.offered_in(config.region)
    if why or workshop.local:
        return why
    wanted = quota_name(instance_type)
    try:
        quotas = workshop.clients.get("service-quotas")
        found = [
            q["Value"]
            for operation in ("list_service_quotas", "list_aws_default_service_quotas")
            for page in quotas.get_paginator(operation).paginate(ServiceCode="sagemaker")
            for q in page["Quotas"]
            if q["QuotaName"] == wanted
        ]
    except (ClientError, BotoCoreError):  # no quota read granted: the deploy goes on, as notebook 00's check does
        return None
    if found and found[0] < 1:
        return (
            f"the quota '{wanted}' is {found[0]:g} in {config.region}: request an increase in Service Quotas "
            "(Amazon SageMaker) before deploying; nothing was sent"
        )
    return None


def zero_plan(
    workshop: Workshop,
    name: str | None = None,
    *,
    instance_type: str = inference_components.ZERO_INSTANCE,
    max_instances: int = 1,
    image_uri: str | None = None,
    model_data_url: str | None = None,
) -> ZeroPlan:
    """The requests, built and validated (nothing sent): notebook 03's CPU decision image and notebook 01's
    package unless given, the config's execution role."""
    config = workshop.config
    config.require("sagemaker_role_arn")
    image = images.pinned_image(image_uri or decision_image(workshop, DECISION_CPU.image_variant or "cpu"))
    model = model_data_url or recorded_model(workshop)
    if config.bucket:
        model = config.check_model_uri(model, "model data URL")
    plan = inference_components.zero_plan(
        name or DEFAULT_NAME,
        image=image,
        role_arn=config.sagemaker_role_arn,
        model_data_url=model,
        instance_type=instance_type,
        max_instances=max_instances,
    )
    if config.kms_key_arn:
        plan = encryption.encrypted_plan(plan, config.kms_key_arn)
    return plan


def zero_requests(workshop: Workshop, plan: ZeroPlan) -> list[tuple[str, str, dict[str, Any]]]:
    """(service, operation, request) of each request the deploy of ``plan`` makes something with, in order, each
    validated by botocore (nothing is sent): the plan's, then its deadline's two CreateSchedule, the component's and
    the endpoint's (none where endpoint_ttl_hours is 0), counted from now, run as the deadlines' role in the
    execution role's account. Not listed: the polls while it waits, and the IAM requests that make the deadlines'
    role or bring it up to date (``spend_guard.ensure_role``)."""
    config = workshop.config
    if config.ttl_hours == 0:
        return plan.requests()
    account = name_rules.role_account(config.sagemaker_role_arn) or ""
    schedules = spend_guard.deadline_requests(
        plan.name,
        role_arn=spend_guard.scheduler_role_arn(config.region, account),
        when=spend_guard.deadline_after(config.ttl_hours),
        region=config.region,
        component=plan.component_name,
    )
    return [*plan.requests(), *(("scheduler", "CreateSchedule", request) for request in schedules)]


@dataclass(repr=False)
class ZeroResult(Shown):
    name: str
    component: str
    lines_: list[str] = field(default_factory=list)
    problem: str = ""

    @property
    def ok(self) -> bool:
        return not self.problem

    def lines(self) -> list[str]:
        return [*self.lines_, *([f"problem: {self.problem}"] if self.problem else [])]


@shows_requests
def deploy_scale_to_zero(
    workshop: Workshop,
    name: str | None = None,
    *,
    instance_type: str = inference_components.ZERO_INSTANCE,
    max_instances: int = 1,
    image_uri: str | None = None,
    model_data_url: str | None = None,
    progress: bool = True,
) -> ZeroResult:
    """Deploy the decision model as an inference component on an endpoint that scales to zero instances."""
    why = refusal(workshop, instance_type)
    if why:
        raise StepError(f"scale to zero is not deployed: {why}")
    plan = zero_plan(
        workshop,
        name,
        instance_type=instance_type,
        max_instances=max_instances,
        image_uri=image_uri,
        model_data_url=model_data_url,
    )
    c, components = workshop.clients, components_for(workshop)
    started = time.perf_counter()
    notes = components.create_endpoint(c.sm, plan, progress=progress)
    components.create_component(c.sm, plan.component)
    components.wait_copies(c.sm, plan.component_name, 1, progress=progress)
    scaling = c.get("application-autoscaling")
    components.call(scaling, "RegisterScalableTarget", plan.scalable_target)
    components.call(scaling, "PutScalingPolicy", plan.target_tracking)
    step_arn = components.call(scaling, "PutScalingPolicy", plan.step_scaling)["PolicyARN"]
    c.get("cloudwatch").put_metric_alarm(**plan.alarm(step_arn))
    return ZeroResult(
        plan.name,
        plan.component_name,
        [
            f"endpoint {plan.name}: {plan.instance_type}, 0 to {max_instances} instance(s) (managed instance "
            f"scaling), in {time.perf_counter() - started:.0f} s",
            f"  inference component {plan.component_name}: the decision model, 1 copy (0 to {max_instances} by "
            "target tracking on requests per copy)",
            f"  scale out from zero: alarm {inference_components.alarm_name(plan.name)} on "
            f"{inference_components.NO_CAPACITY_METRIC} runs the step policy (one copy more)",
            give_deadline(workshop, plan.name, component=plan.component_name),
            *(f"  {note}" for note in plan.notes),
            *notes,
            *components.not_exercised(),
        ],
    )


def _client(workshop: Workshop, components: ComponentHosting, name: str) -> EndpointClient:
    runtime = components.runtime(workshop.clients.get)
    component = inference_components.component_name(name)
    # Locally a cold adapter's first decision shares two cores; it gets the local endpoints' request limit.
    timeout_s = LOCAL_REQUEST_TIMEOUT_S + 10.0 if workshop.local else READ_TIMEOUT_S
    return EndpointClient.sagemaker(
        name, runtime_client=runtime, inference_component=component, retries=0, timeout_s=timeout_s
    )


@shows_requests
def show_scale_to_zero(
    workshop: Workshop, name: str | None = None, *, busy_hours_per_day: float = 2.0, progress: bool = True
) -> ZeroResult:
    """Copies to zero, the refused invocation, one copy back with its cold start timed, and the cost table."""
    name = name or DEFAULT_NAME
    component = inference_components.component_name(name)
    c, components = workshop.clients, components_for(workshop)
    client = _client(workshop, components, name)
    lines = [f"{name}: scale to zero and back"]
    components.set_copies(c.sm, component, 0)
    components.wait_copies(c.sm, component, 0, progress=progress)
    lines.append(f"  copies: 0 (UpdateInferenceComponentRuntimeConfig); {component} has no instance now")
    try:
        client.decide(SUPPORT_ROUTE)
    except NoCapacity as refused:
        lines.append(
            f"  a decision meanwhile: refused at once, {refused.status} {refused.code}: retry after about "
            f"{refused.retry_after:.0f} s (NoCapacity, retryable; the refusal is what fires the scale-out alarm)"
        )
    else:
        return ZeroResult(name, component, lines, "a decision was answered with no copy running")
    started = time.perf_counter()
    components.set_copies(c.sm, component, 1)
    components.wait_copies(c.sm, component, 1, progress=progress)
    decision = client.decide(SUPPORT_ROUTE)
    cold = time.perf_counter() - started
    where = (
        "a local process started"
        if workshop.local
        else "a copy started; SageMaker releases an idle instance about 10 minutes after its last copy, so a start "
        "from no instance at all adds the instance's provisioning, several minutes"
    )
    lines += [
        f"  copies: 1 again; cold start {cold:.1f} s until a decision was answered ({where})",
        f"  the decision: {decision.top} ({decision.top_probability:.2f})",
        "  cost (us-east-1 on-demand list price, USD):",
        *(
            f"    {what:<72} {usd:>7}"
            for what, usd in inference_components.cost_rows(
                inference_components.ZERO_INSTANCE, busy_hours_per_day=busy_hours_per_day
            )
        ),
    ]
    return ZeroResult(name, component, lines)


@cleanup_step
@shows_requests
def remove_scale_to_zero(workshop: Workshop, name: str | None = None, *, wait: bool = True) -> Text:
    """The alarm, scaling policies and target, the component (gone first), then the endpoint, its config, model and
    deadline. Safe to run twice."""
    name = name or DEFAULT_NAME
    c = workshop.clients
    lines = components_first(workshop, name, wait=wait)
    result = teardown.delete_endpoint_resources(
        c.sm, name, wait=wait, poll_s=0.2 if workshop.local else 15, scheduler_client=c.get("scheduler")
    )
    lines.append(str(result))
    return Text("\n".join(lines))


__all__ = [
    "DEFAULT_NAME",
    "ZeroResult",
    "deploy_scale_to_zero",
    "refusal",
    "remove_scale_to_zero",
    "show_scale_to_zero",
    "zero_plan",
    "zero_requests",
]

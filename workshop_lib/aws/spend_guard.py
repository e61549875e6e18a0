"""The spend guard: every endpoint the workshop creates is deleted at a deadline unless it is extended.

An endpoint bills by the hour whether or not anyone calls it, and a participant who closes the laptop
before notebook 08 keeps paying. So, as soon as SageMaker accepts ``CreateEndpoint``, the deploy step
creates an EventBridge Scheduler one-time schedule for that endpoint: ``at(<deadline>)`` in UTC,
kept after it has run (``ActionAfterCompletion`` NONE: a deadline that failed stays visible, and notebook 08
removes it), whose universal target
(``arn:aws:scheduler:::aws-sdk:sagemaker:deleteEndpoint``) calls SageMaker's DeleteEndpoint with the
endpoint's name. The schedule runs as a role of its own, trusted only by EventBridge Scheduler acting
for this account, that may delete endpoints carrying the workshop's tag (and deregister their auto scaling,
which such a deletion requires of the caller) and nothing else. Its endpoint config and model cost
nothing and stay for notebook 08.

As in the IAM documents' modules (``service_roles``): pure builders (schedule names and ARNs, the
requests, each validated by botocore's EventBridge Scheduler model, the role's two documents), then thin
senders around a boto3 client. Schedules carry no tags, so a schedule counts as the workshop's only when
its target is DeleteEndpoint of that endpoint with the workshop's scheduler role; any other schedule of
the same name is left alone.

An endpoint that hosts an inference component (``steps.scale_to_zero``) cannot be deleted while the component
exists: SageMaker refuses DeleteEndpoint then. Its deadline is two schedules (``set_deadlines``): one named after the
component (``<component>-deadline``) calls DeleteInferenceComponent at the deadline, and the endpoint's own calls
DeleteEndpoint ``COMPONENT_MARGIN`` later, once the component's deletion has had time to finish.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from botocore.exceptions import ClientError

from .. import name_rules
from ..config import WorkshopConfig
from ..errors import AwsFailure, InvalidInput
from . import calls, roles
from .arns import SCHEDULE_GROUP, delete_endpoint_target, schedule_arn, schedule_name
from .deadline_targets import COMPONENT, COMPONENT_MARGIN, DELETIONS, ENDPOINT, PRINCIPAL, Deletion, deadline_calls
from .iam import check_policy_document
from .inference_components import component_name
from .policy_scope import Scope, deadline_scope
from .role_boundary import boundary_policy_arn
from .service_roles import SCHEDULER_ROLE_NAME, scheduler_role_arn, scheduler_role_policy, scheduler_trust_policy

# A deadline that fires while SageMaker is busy (the endpoint still Creating, say) is retried for an hour.
RETRY_POLICY = {"MaximumRetryAttempts": 20, "MaximumEventAgeInSeconds": 3600}
DELETED, ALREADY_GONE, LEFT_ALONE = "deleted", "already gone", "left alone"


class NotTheWorkshops(AwsFailure):
    """A schedule of the workshop's name that does something else: it is never changed or deleted."""


# ---- time --------------------------------------------------------------------------------------------


def deadline_after(hours: float, now: datetime | None = None) -> datetime:
    """``now`` + ``hours``, rounded up to the next whole minute, in UTC."""
    if not hours > 0:
        raise AwsFailure(f"a deadline needs a positive number of hours, got {hours!r}")
    now = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    when = now + timedelta(hours=hours)
    rounded = when.replace(second=0, microsecond=0)
    return rounded if rounded == when else rounded + timedelta(minutes=1)


def at_expression(when: datetime) -> str:
    """EventBridge Scheduler's one-time expression, ``at(yyyy-mm-ddThh:mm:ss)`` (read in UTC here)."""
    return f"at({when.astimezone(timezone.utc):%Y-%m-%dT%H:%M:%S})"


_AT = re.compile(r"at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)")


def parse_at(expression: str, zone: str = "UTC") -> datetime | None:
    """The time of an ``at(...)`` expression in UTC, or None for another kind of expression."""
    match = _AT.fullmatch(expression or "")
    if not match or zone not in ("UTC", "Etc/UTC", "", None):
        return None
    return datetime.strptime(match[1], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)


def remaining_text(when: datetime, now: datetime | None = None) -> str:
    seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
    if seconds <= 0:
        return "passed"
    if seconds < 60:
        return "in less than a minute"
    hours, minutes = divmod(int(seconds // 60), 60)
    return f"in {hours} h {minutes} min" if hours else f"in {minutes} min"


# ---- requests ---------------------------------------------------------------------------------------


def schedule_request(
    endpoint_name: str,
    *,
    role_arn: str,
    when: datetime,
    region: str,
    operation: str = "CreateSchedule",
    deletes: Deletion = ENDPOINT,
) -> dict[str, Any]:
    """CreateSchedule (or, with ``operation="UpdateSchedule"``, the same full request that replaces it) that
    deletes ``endpoint_name`` (with ``deletes=COMPONENT``: the inference component of that name) at ``when``."""
    if operation not in ("CreateSchedule", "UpdateSchedule"):
        raise ValueError("operation is CreateSchedule or UpdateSchedule")
    if not name_rules.is_role_arn(role_arn):
        raise AwsFailure(f"scheduler role ARN {role_arn!r} is not an IAM role ARN")
    request = {
        "Name": schedule_name(endpoint_name),
        "GroupName": SCHEDULE_GROUP,
        "ScheduleExpression": at_expression(when),
        "ScheduleExpressionTimezone": "UTC",
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "ActionAfterCompletion": "NONE",
        "State": "ENABLED",
        "Description": f"decision workshop spend guard: delete {deletes.what} {endpoint_name} at its deadline",
        "Target": {
            "Arn": deletes.target(region),
            "RoleArn": role_arn,
            "Input": json.dumps({deletes.parameter: endpoint_name}),
            "RetryPolicy": dict(RETRY_POLICY),
        },
    }
    return calls.validate("scheduler", operation, request)


def get_request(endpoint_name: str) -> dict[str, Any]:
    return calls.validate(
        "scheduler", "GetSchedule", {"Name": schedule_name(endpoint_name), "GroupName": SCHEDULE_GROUP}
    )


def delete_request(endpoint_name: str) -> dict[str, Any]:
    return calls.validate(
        "scheduler", "DeleteSchedule", {"Name": schedule_name(endpoint_name), "GroupName": SCHEDULE_GROUP}
    )


# ---- what a schedule says ----------------------------------------------------------------------------


@dataclass(frozen=True)
class EndpointDeadline:
    """When an endpoint's schedule deletes it (not a request's time limit: ``client.Deadline``); with
    ``component``, when the schedule of the component it hosts deletes that component."""

    endpoint_name: str
    when: datetime | None  # None: a schedule whose expression is not a one-time at(...)
    schedule: str
    component: str = ""

    @property
    def what(self) -> str:
        if self.component:
            return f"inference component {self.component} (on endpoint {self.endpoint_name})"
        return f"endpoint {self.endpoint_name}"

    def text(self, now: datetime | None = None) -> str:
        if self.when is None:
            return f"{self.what}: schedule {self.schedule} is not a one-time deadline"
        if remaining_text(self.when, now) == "passed":
            return (
                f"{self.what}: its deadline {self.when:%Y-%m-%d %H:%M} UTC has passed; if it is still there, "
                "the deletion failed (EventBridge Scheduler's TargetErrorCount metric, "
                f"schedule {self.schedule}): delete it with python -m workshop_lib cleanup"
            )
        return (
            f"{self.what} is deleted at {self.when:%Y-%m-%d %H:%M} UTC "
            f"({remaining_text(self.when, now)}) unless extended: "
            f"python -m workshop_lib extend --name {self.endpoint_name} --hours N"
        )

    __str__ = text


def is_workshop_schedule(described: Mapping[str, Any], endpoint_name: str, deletes: Deletion = ENDPOINT) -> bool:
    """The schedule deletes exactly this endpoint (``deletes=COMPONENT``: this inference component), as the
    workshop's scheduler role."""
    target = described.get("Target") or {}
    try:
        given = json.loads(target.get("Input") or "{}").get(deletes.parameter)
    except ValueError:
        return False
    return (
        str(target.get("Arn", "")).endswith(f":scheduler:::aws-sdk:sagemaker:{deletes.action}")
        and str(target.get("RoleArn", "")).endswith(f":role/{SCHEDULER_ROLE_NAME}")
        and given == endpoint_name
    )


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


# ---- senders -------------------------------------------------------------------------------------------


REGIONS_TAG = "decision-workshop:deadline-regions"  # on the role: where deadlines were set (notebook 08 reads it)


def regions_of(role_tags: Iterable[Mapping[str, str]] | None) -> list[str]:
    """The regions a ListRoleTags answer (or a role's ``Tags``) says deadlines were set in."""
    found = next((t["Value"] for t in role_tags or [] if t.get("Key") == REGIONS_TAG), "")
    return sorted(set(found.split()))


def ensure_role(iam: Any, config: Scope | WorkshopConfig, account_id: str) -> tuple[str, str]:
    """The deadlines' role, created from its documents (under the workshop's permissions boundary) if
    missing, its permissions brought up to date (the endpoint names may have changed), and the config's
    region added to the regions it serves (``REGIONS_TAG``). Returns (ARN, what was done). Refusals are raised."""
    s = config if isinstance(config, Scope) else deadline_scope(config, account_id)
    boundary = boundary_policy_arn(s.region, s.account)
    document = check_policy_document(scheduler_role_policy(s))
    try:
        role = iam.get_role(RoleName=SCHEDULER_ROLE_NAME)["Role"]
        done = f"the IAM role {SCHEDULER_ROLE_NAME} exists; its permissions were brought up to date"
        if roles.keep_bounded(iam, role, boundary):
            done += " and it was given the workshop's permissions boundary"
        regions = regions_of(iam.list_role_tags(RoleName=SCHEDULER_ROLE_NAME).get("Tags"))
    except ClientError as exc:
        if _code(exc) != "NoSuchEntity":
            raise
        role = roles.create(
            iam,
            SCHEDULER_ROLE_NAME,
            scheduler_trust_policy(s),
            boundary,
            description="decision workshop: endpoint deadlines delete the workshop's endpoints",
        )
        done = (
            f"created the IAM role {SCHEDULER_ROLE_NAME} (trusted by EventBridge Scheduler for this account, "
            "under the workshop's permissions boundary)"
        )
        regions = []
    roles.put_permissions(iam, SCHEDULER_ROLE_NAME, document)
    if s.region not in regions:
        iam.tag_role(
            RoleName=SCHEDULER_ROLE_NAME, Tags=[{"Key": REGIONS_TAG, "Value": " ".join(sorted({*regions, s.region}))}]
        )
    return role["Arn"], done


def deadline_parts(endpoint_name: str) -> list[str]:
    """What a deadline of ``endpoint_name`` may be made of, as ``read_deadline`` takes it: the schedule of the
    workshop's inference component on it (``component_name``; none for a name too long to carry one), then the
    endpoint's own ("")."""
    try:
        return [component_name(endpoint_name), ""]
    except InvalidInput:
        return [""]


def schedules_left(
    scheduler_for: Callable[[str], Any], regions: Iterable[str], endpoint_names: Iterable[str]
) -> list[str]:
    """The workshop's deadlines still set in ``regions`` (those the role's tags name, ``regions_of``, and the
    current one): ``scheduler_for(region)`` gives that region's Scheduler client. Each as
    ``<region>: <schedule>``, an endpoint's component's schedule before its own (``deadline_parts``); a schedule
    that is not the workshop's does not count."""
    left = []
    for region in sorted(set(regions)):
        client = scheduler_for(region)
        for name in dict.fromkeys(n for n in endpoint_names if n):
            for component in deadline_parts(name):
                try:
                    deadline = read_deadline(client, name, component)
                except NotTheWorkshops:
                    continue
                if deadline is not None:
                    left.append(f"{region}: {deadline.schedule}")
    return left


def _deletes(component: str) -> Deletion:
    return COMPONENT if component else ENDPOINT


def read_deadline(scheduler: Any, endpoint_name: str, component: str = "") -> EndpointDeadline | None:
    """The endpoint's deadline (with ``component``: that component's schedule), or None when it has none (never set,
    already fired, or removed)."""
    name = component or endpoint_name
    try:
        described = scheduler.get_schedule(**get_request(name))
    except ClientError as exc:
        if _code(exc) == "ResourceNotFoundException":
            return None
        raise
    if not is_workshop_schedule(described, name, _deletes(component)):
        raise NotTheWorkshops(
            f"schedule {described.get('Name')} exists but does not delete {_deletes(component).what} {name} as the "
            f"workshop's role {SCHEDULER_ROLE_NAME}; it is left alone"
        )
    when = parse_at(described.get("ScheduleExpression", ""), described.get("ScheduleExpressionTimezone") or "UTC")
    return EndpointDeadline(endpoint_name, when, described["Name"], component)


def set_deadline(
    scheduler: Any,
    endpoint_name: str,
    *,
    role_arn: str,
    when: datetime,
    region: str | None = None,
    component: str = "",
    attempts: int = 8,
    sleep: Callable[[float], None] = time.sleep,
) -> EndpointDeadline:
    """Create the endpoint's deadline (with ``component``: the schedule that deletes that component of it), or move
    the workshop's existing one to ``when``, in the scheduler client's region (``region``: the same, read from the
    client when not given).

    A role created moments ago may not be usable by the scheduler yet (IAM is eventually consistent):
    the scheduler then answers ValidationException, and the request is retried with backoff.
    """
    region = region or calls.region_of(scheduler)
    name, deletes = component or endpoint_name, _deletes(component)
    request = schedule_request(name, role_arn=role_arn, when=when, region=region, deletes=deletes)
    for attempt in range(attempts):
        try:
            try:
                scheduler.create_schedule(**request)
            except ClientError as exc:
                if _code(exc) != "ConflictException":
                    raise
                read_deadline(scheduler, endpoint_name, component)  # raises NotTheWorkshops for someone else's
                scheduler.update_schedule(
                    **schedule_request(
                        name, role_arn=role_arn, when=when, region=region, operation="UpdateSchedule", deletes=deletes
                    )
                )
            at = when.astimezone(timezone.utc).replace(microsecond=0)
            return EndpointDeadline(endpoint_name, at, request["Name"], component)
        except ClientError as exc:
            if _code(exc) != "ValidationException" or attempt == attempts - 1:
                raise
            sleep(min(2**attempt, 15))
    raise AssertionError("unreachable")


def deadline_times(when: datetime, component: str = "") -> list[tuple[str, datetime]]:
    """(component, time) of each schedule an endpoint's deadline at ``when`` is made of, in the order they fire:
    the endpoint's alone (component ""), or first its component's at ``when``, then its own ``COMPONENT_MARGIN``
    later (SageMaker refuses DeleteEndpoint while the endpoint hosts a component)."""
    if not component:
        return [("", when)]
    return [(component, when), ("", when + COMPONENT_MARGIN)]


def deadline_requests(
    endpoint_name: str, *, role_arn: str, when: datetime, region: str, component: str = ""
) -> list[dict[str, Any]]:
    """The CreateSchedule request of each schedule of ``deadline_times``, in the order ``set_deadlines`` sends them
    (what a dry run shows; nothing is sent)."""
    return [
        schedule_request(part or endpoint_name, role_arn=role_arn, when=at, region=region, deletes=_deletes(part))
        for part, at in deadline_times(when, component)
    ]


def set_deadlines(
    scheduler: Any,
    endpoint_name: str,
    *,
    role_arn: str,
    when: datetime,
    region: str | None = None,
    component: str = "",
    sleep: Callable[[float], None] = time.sleep,
) -> list[EndpointDeadline]:
    """``set_deadline`` for each schedule of ``deadline_times``: the component's first, so an endpoint is never
    left with a deadline that would be refused."""
    return [
        set_deadline(scheduler, endpoint_name, role_arn=role_arn, when=at, region=region, component=part, sleep=sleep)
        for part, at in deadline_times(when, component)
    ]


def extend(
    scheduler: Any,
    endpoint_name: str,
    hours: float,
    *,
    role_arn: str,
    region: str | None = None,
    component: str = "",
    now: datetime | None = None,
) -> EndpointDeadline:
    """Move the deadline (both schedules, with ``component``) to ``hours`` from now (made again if it had gone);
    the endpoint's own schedule is returned."""
    made = set_deadlines(
        scheduler, endpoint_name, role_arn=role_arn, when=deadline_after(hours, now), region=region, component=component
    )
    return made[-1]


def remove_deadline(scheduler: Any, endpoint_name: str, component: str = "") -> str:
    """Delete the endpoint's deadline (with ``component``: that component's schedule): DELETED, ALREADY_GONE, or
    LEFT_ALONE for a schedule not the workshop's."""
    try:
        if read_deadline(scheduler, endpoint_name, component) is None:
            return ALREADY_GONE
    except NotTheWorkshops:
        return LEFT_ALONE
    try:
        scheduler.delete_schedule(**delete_request(component or endpoint_name))
    except ClientError as exc:
        if _code(exc) == "ResourceNotFoundException":
            return ALREADY_GONE
        raise
    return DELETED


__all__ = [
    "ALREADY_GONE",
    "COMPONENT",
    "COMPONENT_MARGIN",
    "DELETED",
    "DELETIONS",
    "ENDPOINT",
    "LEFT_ALONE",
    "PRINCIPAL",
    "REGIONS_TAG",
    "SCHEDULER_ROLE_NAME",
    "Deletion",
    "EndpointDeadline",
    "NotTheWorkshops",
    "at_expression",
    "deadline_after",
    "deadline_calls",
    "deadline_parts",
    "deadline_requests",
    "deadline_times",
    "delete_endpoint_target",
    "delete_request",
    "ensure_role",
    "extend",
    "get_request",
    "is_workshop_schedule",
    "parse_at",
    "read_deadline",
    "regions_of",
    "remaining_text",
    "remove_deadline",
    "schedule_arn",
    "schedule_name",
    "schedule_request",
    "scheduler_role_arn",
    "scheduler_role_policy",
    "scheduler_trust_policy",
    "schedules_left",
    "set_deadline",
    "set_deadlines",
]

"""Cleanup by explicit name, of what carries the workshop's tag, and a read-only report of what still runs.

Nothing here lists resources and deletes what matches a pattern: a participant's account may hold
endpoints that are not the workshop's, some of them with the same names (a reader of the published
sample keeps its own). ``delete_endpoint_resources`` deletes the endpoint, endpoint config and model
it is told to (by default all three named like the endpoint, as ``hosting.deploy`` creates them),
each only if it carries the workshop's tag (``names.WORKSHOP_TAGS``): one without it is kept and the
result says why. What was already gone is reported instead of failing, so it can be run twice. Given
the EventBridge Scheduler client, it also removes the endpoint's deadline (``spend_guard``).

``running_workshop_endpoints`` lists the region's endpoints and reads their tags (the operator may read any
endpoint's tags, and delete only those carrying the workshop's), so an endpoint deployed under another name is
found too; a refusal becomes a note.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from botocore.exceptions import ClientError

from ..config import check_resource_name
from ..errors import AwsFailure
from ..name_rules import TAG_WORKSHOP, WORKSHOP_TAGS
from . import alarms, calls, spend_guard
from .endpoints import is_version

DELETED = "deleted"
ALREADY_GONE = "already gone"
KEPT = "kept"  # exists, but is not the workshop's (or its tags could not be read)


def is_workshop_tagged(tags: Mapping[str, str] | None) -> bool:
    """The resource carries ``workshop=decision-workshop``, as everything the workshop creates does."""
    return tags is not None and tags.get(TAG_WORKSHOP) == WORKSHOP_TAGS[TAG_WORKSHOP]


def not_tagged_note(kind: str, name: str, why: str = "") -> str:
    tag = f"{TAG_WORKSHOP}={WORKSHOP_TAGS[TAG_WORKSHOP]}"
    return (
        f"note: {kind} {name} was kept: {why or f'it does not carry the workshop tag {tag}'}, so it is not "
        "the workshop's (it may be yours, e.g. from the published sample); delete it yourself if it is not needed"
    )


@dataclass
class CleanupResult:
    endpoint_name: str
    config_name: str
    model_name: str
    endpoint: str = ""  # DELETED, ALREADY_GONE or KEPT
    endpoint_config: str = ""
    model: str = ""
    deadline: str = ""  # spend_guard: "deleted", "already gone", "left alone"; "" when not asked
    notes: list[str] = field(default_factory=list)

    @property
    def deleted_anything(self) -> bool:
        return DELETED in (self.endpoint, self.endpoint_config, self.model)

    def __str__(self) -> str:
        lines = [
            f"endpoint {self.endpoint_name}: {self.endpoint}",
            f"endpoint config {self.config_name}: {self.endpoint_config}",
            f"model {self.model_name}: {self.model}",
        ]
        if self.deadline:
            lines.append(f"deadline of {self.endpoint_name}: {self.deadline}")
        return "\n".join(lines + self.notes)


def _error(exc: ClientError) -> tuple[str, str]:
    error = exc.response.get("Error", {})
    return str(error.get("Code", "")), str(error.get("Message", ""))


def _is_not_found(exc: ClientError) -> bool:
    code, message = _error(exc)
    return code == "ValidationException" and "Could not find" in message


def _delete(call: Callable[..., object], **name: str) -> str:
    try:
        call(**name)
    except ClientError as exc:
        if _is_not_found(exc):
            return ALREADY_GONE
        code, message = _error(exc)
        raise AwsFailure(f"{call.__name__}({name}) failed: {code}: {message}") from None
    return DELETED


def delete_endpoint(sm_client: Any, name: str) -> str:
    return _delete(sm_client.delete_endpoint, EndpointName=check_resource_name(name, "endpoint"))


def delete_endpoint_config(sm_client: Any, name: str) -> str:
    return _delete(sm_client.delete_endpoint_config, EndpointConfigName=check_resource_name(name, "endpoint config"))


def delete_model(sm_client: Any, name: str) -> str:
    return _delete(sm_client.delete_model, ModelName=check_resource_name(name, "model"))


def sagemaker_tags(sm_client: Any, arn: str) -> dict[str, str]:
    """A SageMaker resource's tags (ListTags, every page)."""
    tags: dict[str, str] = {}
    kwargs = {"ResourceArn": arn}
    while True:
        page = sm_client.list_tags(**kwargs)
        tags.update({t["Key"]: t["Value"] for t in page.get("Tags", [])})
        if not page.get("NextToken"):
            return tags
        kwargs["NextToken"] = page["NextToken"]


_DESCRIBE = {
    "endpoint": ("describe_endpoint", "EndpointName", "EndpointArn"),
    "endpoint config": ("describe_endpoint_config", "EndpointConfigName", "EndpointConfigArn"),
    "model": ("describe_model", "ModelName", "ModelArn"),
}


def _described(sm_client: Any, kind: str, name: str) -> dict[str, Any] | None:
    """DescribeX of a named resource, or None when SageMaker does not know it."""
    operation, key, _ = _DESCRIBE[kind]
    try:
        described: dict[str, Any] = getattr(sm_client, operation)(**{key: check_resource_name(name, kind)})
        return described
    except ClientError as exc:
        if _is_not_found(exc):
            return None
        raise


def _ownership(sm_client: Any, kind: str, name: str, described: Mapping[str, Any]) -> str | None:
    """None when the resource is the workshop's, else the note that says why it is kept."""
    try:
        tags = sagemaker_tags(sm_client, described[_DESCRIBE[kind][2]])
    except ClientError as exc:
        code, message = _error(exc)
        return not_tagged_note(kind, name, f"its tags could not be read ({code}: {message})")
    return None if is_workshop_tagged(tags) else not_tagged_note(kind, name)


def wait_endpoint_gone(
    sm_client: Any,
    name: str,
    poll_s: float = 15,
    timeout_s: float = 900,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Poll DescribeEndpoint until SageMaker no longer knows the endpoint."""
    started = clock()
    while True:
        try:
            status = sm_client.describe_endpoint(EndpointName=name)["EndpointStatus"]
        except ClientError as exc:
            if _is_not_found(exc):
                return
            raise
        if clock() - started >= timeout_s:
            raise AwsFailure(
                f"endpoint {name} is still {status} after {timeout_s:.0f} s; "
                f"check the SageMaker console and run the cleanup again"
            )
        sleep(poll_s)


def delete_endpoint_resources(
    sm_client: Any,
    endpoint_name: str,
    *,
    config_name: str | None = None,
    model_name: str | None = None,
    wait: bool = True,
    poll_s: float = 15,
    timeout_s: float = 900,
    scheduler_client: Any = None,
) -> CleanupResult:
    """Delete the named endpoint, then (once it is gone) its endpoint config and model, each only if it
    carries the workshop's tag; with ``scheduler_client`` also the endpoint's deadline.

    ``config_name`` and ``model_name`` default to ``endpoint_name``. Anything already gone is reported
    in the result, not raised; anything not the workshop's is kept, with a note saying why.
    """

    config_name = config_name or endpoint_name
    model_name = model_name or endpoint_name
    result = CleanupResult(endpoint_name, config_name, model_name)
    version = None
    described = _described(sm_client, "endpoint", endpoint_name)
    if described is None:
        result.endpoint = ALREADY_GONE
    else:
        used_config = described.get("EndpointConfigName")
        if is_version(endpoint_name, used_config) and config_name == endpoint_name:
            # an update's version (updates.version_name), named by the endpoint itself: its config and model go too
            version = used_config
        elif used_config and used_config != config_name:
            result.notes.append(
                f"note: endpoint {endpoint_name} used endpoint config {used_config}, which was not "
                f"named and is left alone; delete it with delete_endpoint_config(sm, {used_config!r})"
            )
        kept = _ownership(sm_client, "endpoint", endpoint_name, described)
        if kept:
            result.endpoint = KEPT
            result.notes.append(kept)
        else:
            result.endpoint = delete_endpoint(sm_client, endpoint_name)
            if wait and result.endpoint == DELETED:
                wait_endpoint_gone(sm_client, endpoint_name, poll_s=poll_s, timeout_s=timeout_s)
    for kind, name, delete, attribute in (
        ("endpoint config", config_name, delete_endpoint_config, "endpoint_config"),
        ("model", model_name, delete_model, "model"),
    ):
        found = _described(sm_client, kind, name)
        kept = _ownership(sm_client, kind, name, found) if found is not None else None
        if found is None:
            setattr(result, attribute, ALREADY_GONE)
        elif kept:
            setattr(result, attribute, KEPT)
            result.notes.append(kept)
        else:
            setattr(result, attribute, delete(sm_client, name))
    if version is not None and result.endpoint == DELETED:
        result.notes += [
            f"{kind} {version} (the update it served): {delete_owned(sm_client, kind, version, delete, result.notes)}"
            for kind, delete in (("endpoint config", delete_endpoint_config), ("model", delete_model))
        ]
    if scheduler_client is not None and result.endpoint != KEPT:
        result.deadline = remove_deadline(scheduler_client, endpoint_name)
    return result


def delete_owned(sm_client: Any, kind: str, name: str, delete: Callable[[Any, str], str], notes: list[str]) -> str:
    """DELETED, ALREADY_GONE or KEPT (with a note saying why) for one named resource."""
    found = _described(sm_client, kind, name)
    if found is None:
        return ALREADY_GONE
    kept = _ownership(sm_client, kind, name, found)
    if kept:
        notes.append(kept)
        return KEPT
    return delete(sm_client, name)


def remove_deadline(scheduler_client: Any, endpoint_name: str, component: str = "") -> str:
    """The endpoint's spend-guard schedule (with ``component``: its inference component's) removed: what
    ``spend_guard.remove_deadline`` says, or why not."""

    try:
        return spend_guard.remove_deadline(scheduler_client, endpoint_name, component)
    except ClientError as exc:  # it costs nothing: a refusal is a note, never a stop
        code, message = _error(exc)
        schedule = spend_guard.schedule_name(component or endpoint_name)
        return f"not deleted ({code}: {message}); delete schedule {schedule} in the EventBridge Scheduler console"


# ---- alarms and the dashboard ----------------------------------------------------------------------


def delete_alarms(cloudwatch: Any, endpoint_names: Iterable[str]) -> dict[str, str]:
    """The endpoints' alarms (``alarms.alarm_names``, nothing else), each DELETED or ALREADY_GONE."""

    wanted = [name for endpoint in dict.fromkeys(endpoint_names) for name in alarms.alarm_names(endpoint)]
    found: set[str] = set()
    for start in range(0, len(wanted), 100):  # DescribeAlarms and DeleteAlarms take 100 names each
        chunk = wanted[start : start + 100]
        described = cloudwatch.describe_alarms(**calls.validate("cloudwatch", "DescribeAlarms", {"AlarmNames": chunk}))
        there = [a["AlarmName"] for a in described.get("MetricAlarms", []) if a["AlarmName"] in chunk]
        if there:
            cloudwatch.delete_alarms(**calls.validate("cloudwatch", "DeleteAlarms", {"AlarmNames": there}))
        found.update(there)
    return {name: DELETED if name in found else ALREADY_GONE for name in wanted}


def delete_dashboard(cloudwatch: Any, name: str | None = None) -> str:
    """The workshop's dashboard (``alarms.DASHBOARD`` unless named), DELETED or ALREADY_GONE."""

    request = calls.validate("cloudwatch", "DeleteDashboards", {"DashboardNames": [name or alarms.DASHBOARD]})
    try:
        cloudwatch.delete_dashboards(**request)
    except ClientError as exc:
        code, message = _error(exc)
        if code in ("ResourceNotFound", "ResourceNotFoundException") or "does not exist" in message:
            return ALREADY_GONE
        raise AwsFailure(f"DeleteDashboards({request['DashboardNames']}) failed: {code}: {message}") from None
    return DELETED


# ---- the report of what still runs ------------------------------------------------------------------


@dataclass(frozen=True)
class RunningEndpoint:
    name: str
    status: str
    created: datetime
    age: timedelta
    tags: dict[str, str]

    @property
    def age_text(self) -> str:
        hours, rest = divmod(int(self.age.total_seconds()), 3600)
        days, hours = divmod(hours, 24)
        return f"{days} d {hours} h" if days else f"{hours} h {rest // 60} min"


class Running(list[RunningEndpoint]):
    """The workshop's endpoints still there (a list of RunningEndpoint), with the report's notes."""

    def __init__(self, endpoints: Iterable[RunningEndpoint] = (), notes: Iterable[str] = ()):
        super().__init__(endpoints)
        self.notes = list(notes)


def _summaries(sm_client: Any, names: list[str] | None, notes: list[str]) -> list[dict[str, Any]]:
    """ListEndpoints filtered to ``names`` (None: every endpoint); DescribeEndpoint of each name where listing
    is refused."""
    try:
        return [
            s
            for page in sm_client.get_paginator("list_endpoints").paginate()
            for s in page["Endpoints"]
            if names is None or s["EndpointName"] in names
        ]
    except ClientError as exc:
        code, message = _error(exc)
        notes.append(
            f"note: ListEndpoints was refused ({code}: {message}); each workshop endpoint was looked up by name instead"
        )
    found = []
    for name in names or ():
        try:
            described = _described(sm_client, "endpoint", name)
        except ClientError as exc:
            code, message = _error(exc)
            notes.append(
                f"note: endpoint {name} could not be looked up ({code}: {message}); check it in the SageMaker console"
            )
            continue
        if described is not None:
            found.append(described)
    return found


def running_workshop_endpoints(
    sm_client: Any, names: Iterable[str] | None = None, *, now: datetime | None = None, tag_key: str = TAG_WORKSHOP
) -> Running:
    """The endpoints that still exist and carry the workshop tag, oldest first: every one in the region (under
    whatever name it was deployed), or those of ``names``.

    Read-only. A name of ``names`` whose tags may not be read is listed (by name, with a note), one without the
    workshop tag is left out (with a note: it is someone else's); other endpoints without it are not mentioned.
    """
    now = now or datetime.now(timezone.utc)
    wanted = None if names is None else list(dict.fromkeys(names))
    notes: list[str] = []
    found = []
    for summary in _summaries(sm_client, wanted, notes):
        name = summary["EndpointName"]
        try:
            tags = sagemaker_tags(sm_client, summary["EndpointArn"])
        except ClientError as exc:
            code, message = _error(exc)
            notes.append(
                f"note: the tags of endpoint {name} could not be read ({code}: {message}); it is listed by its name"
            )
            tags = {}
        else:
            if tag_key not in tags:
                if wanted is not None:
                    notes.append(not_tagged_note("endpoint", name).replace(" was kept:", " is not listed:"))
                continue
        created = summary["CreationTime"]
        if created.tzinfo is None:
            created = created.replace(tzinfo=timezone.utc)
        found.append(RunningEndpoint(name, summary["EndpointStatus"], created, now - created, tags))
    return Running(sorted(found, key=lambda e: e.created), notes)


def format_running(endpoints: list[RunningEndpoint]) -> str:
    notes = list(getattr(endpoints, "notes", []))
    if not endpoints:
        return "\n".join(["no workshop endpoints found", *notes])
    width = max(len(e.name) for e in endpoints)
    lines = [f"{'endpoint':<{width}}  {'status':<12} age"]
    lines += [f"{e.name:<{width}}  {e.status:<12} {e.age_text}" for e in endpoints]
    lines.append("delete one with workshop_lib.aws.teardown.delete_endpoint_resources(sm, '<endpoint>')")
    return "\n".join(lines + notes)

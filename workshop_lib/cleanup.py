"""Cleanup by explicit name, and a read-only report of what is still running.

Nothing here lists resources and deletes what matches a pattern: a participant's
account may hold endpoints that are not the workshop's. ``delete_endpoint_resources``
deletes the endpoint, endpoint config and model it is told to (by default all
three named like the endpoint, as ``endpoints.deploy`` creates them), and
reports what was already gone instead of failing, so it can be run twice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from .config import check_resource_name
from .names import TAG_WORKSHOP
from .errors import WorkshopError

DELETED = "deleted"
ALREADY_GONE = "already gone"


class CleanupError(WorkshopError, RuntimeError):
    pass


@dataclass
class CleanupResult:
    endpoint_name: str
    config_name: str
    model_name: str
    endpoint: str = ""  # DELETED or ALREADY_GONE
    endpoint_config: str = ""
    model: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def deleted_anything(self) -> bool:
        return DELETED in (self.endpoint, self.endpoint_config, self.model)

    def __str__(self) -> str:
        lines = [f"endpoint {self.endpoint_name}: {self.endpoint}",
                 f"endpoint config {self.config_name}: {self.endpoint_config}",
                 f"model {self.model_name}: {self.model}"]
        return "\n".join(lines + self.notes)


def _is_not_found(exc) -> bool:
    error = exc.response.get("Error", {})
    return error.get("Code") == "ValidationException" and "Could not find" in error.get("Message", "")


def _delete(call, **name) -> str:
    from botocore.exceptions import ClientError

    try:
        call(**name)
    except ClientError as exc:
        if _is_not_found(exc):
            return ALREADY_GONE
        error = exc.response.get("Error", {})
        raise CleanupError(f"{call.__name__}({name}) failed: {error.get('Code')}: {error.get('Message')}") from None
    return DELETED


def delete_endpoint(sm_client, name: str) -> str:
    return _delete(sm_client.delete_endpoint, EndpointName=check_resource_name(name, "endpoint"))


def delete_endpoint_config(sm_client, name: str) -> str:
    return _delete(sm_client.delete_endpoint_config, EndpointConfigName=check_resource_name(name, "endpoint config"))


def delete_model(sm_client, name: str) -> str:
    return _delete(sm_client.delete_model, ModelName=check_resource_name(name, "model"))


def wait_endpoint_gone(sm_client, name: str, poll_s: float = 15, timeout_s: float = 900, *,
                       sleep=time.sleep, clock=time.monotonic) -> None:
    """Poll DescribeEndpoint until SageMaker no longer knows the endpoint."""
    from botocore.exceptions import ClientError

    started = clock()
    while True:
        try:
            status = sm_client.describe_endpoint(EndpointName=name)["EndpointStatus"]
        except ClientError as exc:
            if _is_not_found(exc):
                return
            raise
        if clock() - started >= timeout_s:
            raise CleanupError(f"endpoint {name} is still {status} after {timeout_s:.0f} s; "
                               f"check the SageMaker console and run the cleanup again")
        sleep(poll_s)


def delete_endpoint_resources(sm_client, endpoint_name: str, *, config_name: str | None = None,
                              model_name: str | None = None, wait: bool = True, poll_s: float = 15,
                              timeout_s: float = 900) -> CleanupResult:
    """Delete the named endpoint, then (once it is gone) its endpoint config and model.

    ``config_name`` and ``model_name`` default to ``endpoint_name``. Anything
    already gone is reported in the result, not raised.
    """
    from botocore.exceptions import ClientError

    config_name = config_name or endpoint_name
    model_name = model_name or endpoint_name
    result = CleanupResult(endpoint_name, config_name, model_name)
    try:
        used_config = sm_client.describe_endpoint(EndpointName=endpoint_name)["EndpointConfigName"]
    except ClientError as exc:
        if not _is_not_found(exc):
            raise
        used_config = None
    if used_config and used_config != config_name:
        result.notes.append(f"note: endpoint {endpoint_name} used endpoint config {used_config}, which was not "
                            f"named and is left alone; delete it with delete_endpoint_config(sm, {used_config!r})")
    result.endpoint = delete_endpoint(sm_client, endpoint_name)
    if wait and result.endpoint == DELETED:
        wait_endpoint_gone(sm_client, endpoint_name, poll_s=poll_s, timeout_s=timeout_s)
    result.endpoint_config = delete_endpoint_config(sm_client, config_name)
    result.model = delete_model(sm_client, model_name)
    return result


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


def running_workshop_endpoints(sm_client, *, now: datetime | None = None,
                               tag_key: str = TAG_WORKSHOP) -> list[RunningEndpoint]:
    """Endpoints carrying the workshop tag, oldest first. Read-only: lists and reads tags, deletes nothing."""
    now = now or datetime.now(timezone.utc)
    found = []
    for page in sm_client.get_paginator("list_endpoints").paginate():
        for summary in page["Endpoints"]:
            tags = {t["Key"]: t["Value"] for t in sm_client.list_tags(ResourceArn=summary["EndpointArn"])["Tags"]}
            if tag_key not in tags:
                continue
            created = summary["CreationTime"]
            if created.tzinfo is None:
                created = created.replace(tzinfo=timezone.utc)
            found.append(RunningEndpoint(summary["EndpointName"], summary["EndpointStatus"], created,
                                         now - created, tags))
    return sorted(found, key=lambda e: e.created)


def format_running(endpoints: list[RunningEndpoint]) -> str:
    if not endpoints:
        return "no workshop endpoints found"
    width = max(len(e.name) for e in endpoints)
    lines = [f"{'endpoint':<{width}}  {'status':<12} age"]
    lines += [f"{e.name:<{width}}  {e.status:<12} {e.age_text}" for e in endpoints]
    lines.append("delete one with workshop_lib.cleanup.delete_endpoint_resources(sm, '<endpoint>')")
    return "\n".join(lines)

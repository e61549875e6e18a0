"""An endpoint's deadline given by the steps that create one (``deploy``, ``scale_to_zero``): the spend guard's
schedules (``aws.spend_guard``) made with the deadlines' role, and the line that says when, or why not."""

from __future__ import annotations

from botocore.exceptions import ClientError

from ..aws import spend_guard
from ..errors import WorkshopError
from .context import Workshop


def _scheduler_role(workshop: Workshop) -> str:
    """The deadlines' role (spend_guard.ensure_role): created from its documents when missing."""
    c = workshop.clients
    account = c.sts.get_caller_identity()["Account"]
    return spend_guard.ensure_role(c.get("iam"), workshop.config, account)[0]


def give_deadline(workshop: Workshop, name: str, hours: float | None = None, *, component: str = "") -> str:
    """Give endpoint ``name`` (and first its inference component ``component``: ``spend_guard.set_deadlines``) its
    deadline ``hours`` (default: the config's endpoint_ttl_hours) from now; the lines say when, or, loudly, why it
    has none. Never raises: the endpoint exists already."""
    hours = workshop.config.ttl_hours if hours is None else hours
    if hours == 0:
        return (
            f"  deadline: none (endpoint_ttl_hours is 0): {name} bills until it is deleted "
            f"(notebook 08, or steps.delete_endpoint(workshop, {name!r}))"
        )
    c = workshop.clients
    try:
        deadlines = spend_guard.set_deadlines(
            c.get("scheduler"),
            name,
            role_arn=_scheduler_role(workshop),
            when=spend_guard.deadline_after(hours),
            region=workshop.config.region,
            component=component,
        )
    except (ClientError, WorkshopError) as exc:
        why = "{}: {}".format(*_error(exc)) if isinstance(exc, ClientError) else str(exc)
        return (
            f"  deadline: NOT SET ({why}). {name} bills until it is deleted: run notebook 08 (or "
            f"steps.delete_endpoint(workshop, {name!r})) when done; operator-deadlines-policy.json and "
            "operator-roles-policy.json, which notebook 00 writes beside operator-policy.json, grant what the "
            "deadline needs (with role-boundary-policy.json created as the roles' boundary)"
        )
    line = "\n".join(f"  deadline: {deadline.text()}" for deadline in deadlines)
    if component:
        line += (
            f"\n  (SageMaker refuses DeleteEndpoint while {name} hosts {component}: the component's schedule goes "
            f"first, the endpoint's {spend_guard.COMPONENT_MARGIN.seconds // 60} minutes later)"
        )
    if c.local:
        line += (
            "\n  Not exercised locally: the deadline firing at its time (the emulator's EventBridge Scheduler "
            "keeps the schedule, validated by botocore, and never runs it by itself; the rehearsal's "
            "LocalMode.fire_deadline runs it as the scheduler would)"
        )
    return line


def _error(exc: ClientError) -> tuple[str, str]:
    error = exc.response.get("Error", {})
    return str(error.get("Code", "")), str(error.get("Message", ""))


__all__ = ["give_deadline"]

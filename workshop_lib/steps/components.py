"""What the scale-to-zero step and the cleanup share: where an inference component runs in the workshop's mode
(SageMaker, or the local stand-in), and removing one before its endpoint, as SageMaker requires."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from ..aws import component_hosting, spend_guard, teardown
from ..aws.inference_components import component_name
from ..errors import InvalidInput
from ..local.component_stand_in import LocalComponents
from .context import Workshop


def components_for(workshop: Workshop) -> component_hosting.ComponentHosting:
    """Where the component runs in the workshop's mode: SageMaker, or the local stand-in."""
    if workshop.local:
        return LocalComponents(workshop.rehearsal, workshop.clients.s3, workshop.mode.calls)
    return component_hosting.ComponentHosting(poll_s=15)


def components_first(workshop: Workshop, name: str, *, wait: bool = True) -> list[str]:
    """Before endpoint ``name`` is deleted, where it hosts inference components: the workshop's component
    (``component_name``), its scaling and alarm, then the component's deadline schedule, one line each; [] for an
    endpoint of one model. Where the deadline already deleted the component and the endpoint, what they left (the
    scaling, the alarm, the schedule) goes the same way. A refused look is said, not raised: the endpoint's deletion
    then says more."""
    c = workshop.clients
    try:
        component = component_name(name)
    except InvalidInput:  # a name too long to carry the workshop's component
        return []
    scheduler = c.get("scheduler")
    try:
        if not component_hosting.hosts_components(c.sm, name) and not _component_deadline(scheduler, name, component):
            return []
    except ClientError as exc:
        error = exc.response.get("Error", {})
        return [f"inference component of {name}: not looked for ({error.get('Code')}: {error.get('Message')})"]
    components = components_for(workshop)
    done = component_hosting.remove_components(c.get, name, components, wait=wait)
    if workshop.local:
        workshop.rehearsal.stop_endpoint(component)
    done.append((f"deadline of {component}", teardown.remove_deadline(scheduler, name, component)))
    return [f"{what}: {state}" for what, state in done]


def _component_deadline(scheduler: Any, name: str, component: str) -> bool:
    """Whether the workshop's schedule that deletes ``component`` is there (kept after it fired); False when it
    cannot be read (the endpoint's own deadline removal then says why)."""
    try:
        return spend_guard.read_deadline(scheduler, name, component) is not None
    except (spend_guard.NotTheWorkshops, ClientError):
        return False


__all__ = ["components_first", "components_for"]

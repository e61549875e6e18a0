"""What the spend guard's schedules delete (``spend_guard``): an endpoint, or the inference component an endpoint
hosts, each through its EventBridge Scheduler universal target; and the calls a fired deadline makes, which the
local rehearsal's permission audit holds against the deadlines' role."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from . import policies
from .arns import partition

# The principal the deadlines act as, in the local rehearsal's permission audit (permissions.audit).
PRINCIPAL = policies.DEADLINES

# Between the component's deletion and the endpoint's: SageMaker deletes a component in a few minutes (its copies
# stop, nothing is drained), and a DeleteEndpoint sent while the endpoint still hosts it is refused, so a quarter
# of an hour leaves room to spare; the endpoint bills for those minutes at most.
COMPONENT_MARGIN = timedelta(minutes=15)


@dataclass(frozen=True)
class Deletion:
    """What a deadline deletes: the SageMaker action its universal target calls, and that action's one input."""

    action: str  # the target's last part: deleteEndpoint
    parameter: str  # the action's input: EndpointName
    what: str  # in messages

    def operation(self, verb: str = "Delete") -> str:
        """The SageMaker operation with another verb: ``Create`` gives the one that made the resource."""
        return verb + self.action.removeprefix("delete")

    def target(self, region: str) -> str:
        """The universal target (global: no region, no account)."""
        return f"arn:{partition(region)}:scheduler:::aws-sdk:sagemaker:{self.action}"


ENDPOINT = Deletion("deleteEndpoint", "EndpointName", "endpoint")
COMPONENT = Deletion("deleteInferenceComponent", "InferenceComponentName", "inference component")
DELETIONS = (ENDPOINT, COMPONENT)


def deadline_calls(calls: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The call each recorded deadline makes when it fires (SageMaker DeleteEndpoint, or DeleteInferenceComponent
    for a component's, as ``PRINCIPAL``), in the call log's form, with what IAM reads then: the resource's tags (from
    its create call) and, for an endpoint, its variants ever registered for auto scaling (SageMaker deregisters them
    as the caller). The emulator never fires a schedule by itself, so the audit holds these against the role."""
    calls = [c for c in calls if not c.get("refused")]
    tags: dict[tuple[str, str | None], dict[str, str]] = {}
    scaled: dict[str, set[str]] = {}
    for call in calls:
        params = call.get("params") or {}
        for deletes in DELETIONS:
            if call.get("service") == "sagemaker" and call.get("operation") == deletes.operation("Create"):
                tags[deletes.parameter, params.get(deletes.parameter)] = {
                    t["Key"]: t["Value"] for t in params.get("Tags") or []
                }
        # A deadline may fire at any time while the endpoint lives, so while it is scaled too.
        if call.get("service") == "application-autoscaling" and call.get("operation") == "RegisterScalableTarget":
            resource = str(params.get("ResourceId", ""))
            if resource.startswith("endpoint/"):
                scaled.setdefault(resource.split("/")[1], set()).add(resource)
    made = []
    for call in calls:
        if call.get("service") == "scheduler" and call.get("operation") in ("CreateSchedule", "UpdateSchedule"):
            target = (call.get("params") or {}).get("Target") or {}
            fired = next((d for d in DELETIONS if str(target.get("Arn", "")).endswith(f":{d.action}")), None)
            try:
                name = json.loads(target.get("Input") or "{}").get(fired.parameter) if fired else None
            except ValueError:
                name = None
            if fired is None or not name:
                continue
            facts: dict[str, object] = {"resource_tags": tags.get((fired.parameter, name), {})}
            if fired is ENDPOINT:
                facts["scaled_variants"] = sorted(scaled.get(name, ()))
            made.append(
                {
                    "principal": PRINCIPAL,
                    "service": "sagemaker",
                    "operation": fired.operation(),
                    "params": {fired.parameter: name},
                    "facts": facts,
                }
            )
    return made


__all__ = ["COMPONENT", "COMPONENT_MARGIN", "DELETIONS", "ENDPOINT", "PRINCIPAL", "Deletion", "deadline_calls"]

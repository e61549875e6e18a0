"""Notebook 07: operating the decision endpoint: its alarms and the workshop's dashboard, a safe update
to a new model package (blue/green, rolled back by the alarms; the calibrated package is made in
``package``), and its status through the rollout.
Notebook 08 deletes the alarms and the dashboard (``delete_alarms``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..aws import alarms, capture, regions, teardown, updates
from ..aws.capture import data_capture_config, destination_uri
from ..aws.deploy_spec import DeploySpec
from ..deploy_paths import DeployPath, decision_paths
from ..errors import StepError
from .context import Shown, Text, Workshop, decision_endpoint, short, shows_requests
from .recorded import UPDATE_VERSIONS, given_image, update_package


def _path_of(workshop: Workshop, name: str) -> DeployPath:
    config = workshop.config
    path = config.path_of(name)
    if path is None or not path.decision:
        names = ", ".join(config.endpoint_name(p) for p in decision_paths())
        raise StepError(
            f"{name} is not one of the workshop's decision endpoints ({names}); alarms and updates are for those"
        )
    return path


@shows_requests
def put_alarms(workshop: Workshop, /, name: str | None = None, **thresholds: float) -> Text:
    """The decision endpoint's alarms (SageMaker's latency, errors and load; the adapter's latency, busy
    answers and time-limit stops) and the workshop's dashboard; ``thresholds`` as ``alarms.Thresholds``."""
    name = name or decision_endpoint(workshop)
    _path_of(workshop, name)
    region = workshop.config.region
    result = alarms.put_alarms(
        workshop.clients.get("cloudwatch"), [name], region, thresholds=alarms.Thresholds(**thresholds)
    )
    lines = [str(result)]
    if workshop.local:
        lines.append(
            "Not exercised locally: the alarms firing (the emulator's CloudWatch stores them, validated by "
            "botocore, and receives no SageMaker metrics; the adapter's metric lines are in the local "
            "endpoint's log)"
        )
    else:
        url = regions.console_url(region, "cloudwatch", f"dashboards/dashboard/{result.dashboard}")
        lines.append(f"dashboard: {url}")
    return Text("\n".join(lines))


@shows_requests
def alarm_states(workshop: Workshop, name: str | None = None) -> Text:
    """Each of the endpoint's alarms and its state (OK, ALARM, INSUFFICIENT_DATA). Read-only."""
    name = name or decision_endpoint(workshop)
    states = alarms.alarm_states(workshop.clients.get("cloudwatch"), name)
    if not states:
        return Text(
            f"endpoint {name} has no alarms yet: run steps.put_alarms(workshop) first", problem=f"no alarms for {name}"
        )
    return Text("\n".join(f"{alarm}: {state}" for alarm, state in states.items()))


@shows_requests
def endpoint_status(workshop: Workshop, name: str | None = None) -> Text:
    """The endpoint's status, the config it serves and its last deployment settings. Read-only."""
    name = name or decision_endpoint(workshop)
    described = workshop.clients.sm.describe_endpoint(EndpointName=name)
    lines = [f"endpoint {name}: {described['EndpointStatus']}, serving {described['EndpointConfigName']}"]
    last = (described.get("LastDeploymentConfig") or {}).get("BlueGreenUpdatePolicy")
    if last:
        routing = last["TrafficRoutingConfiguration"]
        lines.append(f"  last update: {routing['Type']}, baked {routing['WaitIntervalInSeconds']} s")
    if described.get("FailureReason"):
        lines.append(f"  FailureReason: {described['FailureReason']}")
    return Text("\n".join(lines))


@shows_requests
def audit_trail(workshop: Workshop, name: str | None = None, limit: int = 20) -> Text:
    """The decision endpoint's captured requests and answers (data capture), read into the benchmark's task
    format with an empty ``expected`` for a person to label, as ``workshop captured`` does. Read-only in
    AWS (it writes the tasks file beside the config)."""
    name = name or decision_endpoint(workshop)
    c = workshop.clients
    found = capture.collect(c.sm, c.s3, name, limit=limit, default_destination=capture.destination_uri(workshop.config))
    path = capture.write_tasks(found.tasks, workshop.folder("captured") / f"{name}.jsonl")
    return Text(f'{found}\nwritten: {path} (fill in each line\'s "expected" to label it)')


@dataclass(repr=False)
class UpdateResult(Shown):
    plan: updates.UpdatePlan
    rollout: updates.Rollout
    why: str
    progress: list[str] = field(default_factory=list)  # the statuses as reported, shown unless printed live
    printed: bool = False

    @property
    def ok(self) -> bool:
        return self.rollout.ok

    def lines(self) -> list[str]:
        return [
            f"update of {self.plan.endpoint_name} to {self.plan.version}: {self.why}",
            f"  model {self.plan.model_data_url}",
            f"  image {short(self.plan.image_uri)}",
            *(() if self.printed else ("  " + line for line in self.progress)),
            str(self.rollout),
        ]


@shows_requests
def update_endpoint(
    workshop: Workshop,
    name: str | None = None,
    *,
    model_data_url: str | None = None,
    image_uri: str | None = None,
    routing: str = updates.ALL_AT_ONCE,
    bake_s: int | None = None,
    ctx_size: int | None = None,
    threads: int | None = None,
    progress: bool = True,
    dry_run: bool = False,
) -> UpdateResult | Text:
    """Roll the decision endpoint to ``model_data_url`` (default: ``update_package``) and ``image_uri``
    (default: notebook 03's image) as a new version, blue/green, rolled back if a rollback alarm fires
    (run ``put_alarms`` first); the endpoint's status is reported as it changes. ``dry_run``: the
    validated requests as JSON, nothing sent."""
    config = workshop.config
    name = name or decision_endpoint(workshop)
    path = _path_of(workshop, name)
    config.require("sagemaker_role_arn")
    if model_data_url:
        why = "the package given"
    else:
        model_data_url, why = update_package(workshop)
    model_data_url = config.check_model_uri(model_data_url, "model data URL")
    rollback = alarms.rollback_alarms(name)
    spec = DeploySpec(path.name, ctx_size=ctx_size, threads=threads)
    capture = data_capture_config(destination_uri(config), config.capture_percent)  # as the deploy sends it
    deployment: dict[str, Any] = {"bake_s": bake_s} if bake_s is not None else {}
    plan = updates.update_plan(
        spec,
        endpoint_name=name,
        role_arn=config.sagemaker_role_arn,
        region=config.region,
        image=given_image(workshop, image_uri, path),
        model_data_url=model_data_url,
        rollback_alarms=rollback,
        routing=routing,
        data_capture=capture,
        **deployment,
    )
    if dry_run:
        return Text(plan.to_json())
    c = workshop.clients
    if set(rollback) - set(alarms.alarm_states(c.get("cloudwatch"), name)):
        raise StepError(
            f"endpoint {name}'s rollback alarms are missing: run steps.put_alarms(workshop) first, "
            "so that the update can roll back by itself"
        )
    seen: list[str] = []

    def report(line: str) -> None:
        seen.append(line)
        if progress:
            print(line, flush=True)

    # Recorded before it is made: if a deadline deletes the endpoint, notebook 08 still finds the version.
    made = workshop.outputs().get(UPDATE_VERSIONS, {})
    workshop.remember(**{UPDATE_VERSIONS: {**made, name: sorted({*made.get(name, []), plan.version})}})
    rollout = updates.roll_out(
        c.sm, plan, region=config.region, hosting=c.hosting, delay_s=0.2 if workshop.local else 30, report=report
    )
    return UpdateResult(plan, rollout, why, seen, printed=progress)


@shows_requests
def delete_alarms(workshop: Workshop, names: Sequence[str] | None = None) -> Text:
    """Notebook 08: the decision endpoints' alarms (by their names) and the workshop's dashboard."""
    if (nothing := workshop.nothing_to_clean()) is not None:
        return nothing
    config = workshop.config
    names = list(names or (config.endpoint_name(p) for p in decision_paths()))
    cloudwatch = workshop.clients.get("cloudwatch")
    deleted = teardown.delete_alarms(cloudwatch, names)
    lines = [f"alarm {alarm}: {state}" for alarm, state in deleted.items() if state == teardown.DELETED]
    gone = sum(state == teardown.ALREADY_GONE for state in deleted.values())
    if gone:
        lines.append(f"{gone} alarm(s) of {', '.join(names)} were not there (already gone, or never put)")
    lines.append(f"dashboard {alarms.DASHBOARD}: {teardown.delete_dashboard(cloudwatch)}")
    return Text("\n".join(lines))


__all__ = [
    "UpdateResult",
    "alarm_states",
    "audit_trail",
    "delete_alarms",
    "endpoint_status",
    "put_alarms",
    "update_endpoint",
]

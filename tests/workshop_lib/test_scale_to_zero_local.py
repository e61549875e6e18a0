"""Scale to zero, rehearsed locally through the command line: the dry run shows the inference component, the
managed instance scaling down to 0 and the deadline's two schedules; one deploy, with its deadline of two schedules,
both of which ``deadline`` shows (and a component left without one, said); a decision is refused with
SageMaker's retryable error while no copy runs; the show goes to zero and back; the deadline, moved and then fired
as EventBridge Scheduler would, deletes the component (its process stopped), then the endpoint; the cleanup removes
what the deadline left (scaling, alarm, config, model, schedules) and no process remains. The stand-in's recorded
calls, the deadline's included, pass the rehearsal's strict IAM as they go.
"""

from __future__ import annotations

import json

import pytest

from workshop_lib.aws import inference_components as ic
from workshop_lib.aws import spend_guard
from workshop_lib.cli import main
from workshop_lib.client.endpoint import EndpointClient
from workshop_lib.client.endpoint_errors import NoCapacity
from workshop_lib.config import ENV_VARS
from workshop_lib.examples import SUPPORT_ROUTE
from workshop_lib.local import permissions, rehearsal
from workshop_lib.local.component_stand_in import LocalComponents
from workshop_lib.steps import Workshop, audit_permissions

pytestmark = pytest.mark.slow

NAME = ic.ZERO_ENDPOINT
COMPONENT = ic.component_name(NAME)


@pytest.fixture
def local_mode(tmp_path, monkeypatch):
    for name in ENV_VARS.values():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WORKSHOP_MODE", "local")
    monkeypatch.setenv("WORKSHOP_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.setenv("WORKSHOP_LOCAL_DIR", str(tmp_path / "local"))
    yield tmp_path
    rehearsal.default().stop_all()


def _run(capsys, *argv) -> str:
    status = main(list(argv))
    out = capsys.readouterr()
    assert status == 0, out.err[out.err.find("error:") :][:3000] if "error:" in out.err else out.err[-3000:]
    return out.out


def _running() -> list[str]:
    return [p.what for p in rehearsal.default().status() if p.running]


def test_scale_to_zero_and_back_then_removal_leaves_nothing(local_mode, capsys):
    _run(capsys, "setup", "--deploy-path", "decision-cpu")
    _run(capsys, "codebuild-role")
    _run(capsys, "package-model")
    _run(capsys, "build-image")

    dry = json.loads(_run(capsys, "scale-to-zero", "--dry-run"))
    sent = {item["operation"]: item["request"] for item in dry}
    variant = sent["sagemaker CreateEndpointConfig"]["ProductionVariants"][0]
    assert variant["ManagedInstanceScaling"]["MinInstanceCount"] == 0 and "ModelName" not in variant
    assert sent["sagemaker CreateInferenceComponent"]["RuntimeConfig"]["CopyCount"] == 1
    assert sent["application-autoscaling RegisterScalableTarget"]["MinCapacity"] == 0
    schedules = [item["request"] for item in dry if item["operation"] == "scheduler CreateSchedule"]
    assert [json.loads(r["Target"]["Input"]) for r in schedules] == [  # the deadline: the component's, then its own
        {"InferenceComponentName": COMPONENT},
        {"EndpointName": NAME},
    ]
    assert not rehearsal.default().status() or f"local endpoint {COMPONENT}" not in _running()  # sent nothing
    assert spend_guard.read_deadline(Workshop.load().clients.get("scheduler"), NAME, COMPONENT) is None

    out = _run(capsys, "scale-to-zero", "--deploy-only", "--show-requests")
    assert f"inference component {COMPONENT}: the decision model, 1 copy" in out
    assert "sagemaker CreateInferenceComponent" in out and "cloudwatch PutMetricAlarm" in out
    assert out.count("scheduler CreateSchedule") == 2  # the component's deadline, then the endpoint's
    assert f"deadline: inference component {COMPONENT} (on endpoint {NAME}) is deleted at" in out
    assert f"deadline: endpoint {NAME} is deleted at" in out
    assert f"local endpoint {COMPONENT}" in _running()
    component_line, endpoint_line = _run(capsys, "deadline", "--name", NAME).splitlines()
    assert component_line.startswith(f"inference component {COMPONENT} (on endpoint {NAME}) is deleted at ")
    assert endpoint_line.startswith(f"endpoint {NAME} is deleted at ")

    workshop = Workshop.load()  # the refusal, read by the client directly while no copy runs
    components = LocalComponents(workshop.rehearsal, workshop.clients.s3, workshop.mode.calls)
    components.set_copies(workshop.clients.sm, COMPONENT, 0)
    assert f"local endpoint {COMPONENT}" not in _running()
    client = EndpointClient.sagemaker(
        NAME, runtime_client=components.runtime(workshop.clients.get), inference_component=COMPONENT, retries=2
    )
    with pytest.raises(NoCapacity) as refused:
        client.decide(SUPPORT_ROUTE)
    assert refused.value.retry_after and refused.value.attempts == 1

    out = _run(capsys, "scale-to-zero", "--show-only")
    assert "refused at once, 400 ValidationError" in out and "retry after about 300 s" in out
    assert "cold start" in out and "the decision: " in out
    assert "a day always on (24 h)" in out
    assert components.refused(COMPONENT) >= 2  # this one and the show's: what NoCapacityInvocationFailures counts
    assert f"local endpoint {COMPONENT}" in _running()  # one copy again after the show

    scheduler = workshop.clients.get("scheduler")
    before = spend_guard.read_deadline(scheduler, NAME, COMPONENT).when
    spend_guard.remove_deadline(scheduler, NAME, COMPONENT)  # the endpoint's deletion would then be refused: said
    assert f"inference component {COMPONENT} (on endpoint {NAME}) has no deadline" in _run(
        capsys, "deadline", "--name", NAME
    )
    out = _run(capsys, "extend", "--name", NAME, "--hours", "48")  # moves both schedules, the gone one made again
    moved = [spend_guard.read_deadline(scheduler, NAME, part).when for part in (COMPONENT, "")]
    assert moved[0] > before and moved[1] - moved[0] == spend_guard.COMPONENT_MARGIN, out
    workshop.mode.fire_deadline(NAME, workshop.config.region)  # the component's schedule, then the endpoint's
    assert f"local endpoint {COMPONENT}" not in _running()
    assert json.loads((local_mode / "local" / "inference-components.json").read_text())["components"] == {}
    sm = workshop.clients.sm
    assert NAME not in [e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]]

    out = _run(capsys, "cleanup", "--name", NAME)  # notebook 08's cleanup: what the deadline left
    assert f"scalable target inference-component/{COMPONENT}: deleted" in out
    assert f"inference component {COMPONENT}: already gone" in out and f"endpoint {NAME}: already gone" in out
    assert f"deadline of {COMPONENT}: deleted" in out
    assert spend_guard.read_deadline(scheduler, NAME) is None
    assert spend_guard.read_deadline(scheduler, NAME, COMPONENT) is None
    assert f"local endpoint {COMPONENT}" not in _running()
    again = _run(capsys, "scale-to-zero", "--remove")
    assert f"endpoint {NAME}: already gone" in again and "inference component" not in again

    audit = _run(capsys, "audit")  # every call above, the stand-in's included, held against the generated policies
    assert "permissions checked against its policy" in audit and "DENIED" not in audit, audit
    audited = audit_permissions(Workshop.load())  # the same audit, read field by field
    assert audited.unused  # the notebooks' statements: no notebook ran here
    only_here = {(p, sid) for p, sids in permissions.SCALE_TO_ZERO_ONLY.items() for sid in sids}
    assert not only_here & {*audited.unused, *audited.command_only}, audited  # the command used each
    _run(capsys, "stop-local")
    assert _running() == []

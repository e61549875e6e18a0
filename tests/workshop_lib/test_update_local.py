"""A safe update in local mode: the stand-in hosting replaces the local endpoint's process only once the
new one is ready, so a client sending decisions from a thread throughout never sees a failure, and its
answers switch to the new version (a package carrying a calibration profile, as notebook 07 rolls out);
the calls it made are the ones the operator policies grant.

One emulator and two adapter processes (the endpoint before and after); everything is stopped afterwards.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from workshop_lib.aws import alarms, hosting, operator_policies, policy_scope, service_roles, teardown, updates
from workshop_lib.aws.build_projects import TARBALL_NAME
from workshop_lib.aws.codebuild import upload_package
from workshop_lib.aws.deploy_spec import DeploySpec, plan_for
from workshop_lib.aws.images import parse_image_uri
from workshop_lib.client import EndpointClient
from workshop_lib.config import WorkshopConfig
from workshop_lib.evaluation import profiles
from workshop_lib.examples import SUPPORT_ROUTE
from workshop_lib.local import group_alive, modes, permissions, rehearsal
from workshop_lib.local.stand_ins import LocalHosting
from workshop_lib.models import EMBEDDED_MODEL
from workshop_lib.packaging import MANIFEST_NAME, LocalPackage, package_local, sha256_of

pytestmark = pytest.mark.slow

REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/service-role/WorkshopSageMakerRole"
IMAGE = f"123456789012.dkr.ecr.{REGION}.amazonaws.com/sagemaker-decision-workshop@sha256:{'ab' * 32}"
CONFIG = WorkshopConfig(mode="local", region=REGION, bucket="decision-workshop-update-test", sagemaker_role_arn=ROLE)
NAME = CONFIG.cpu_endpoint_name


@pytest.fixture
def local(tmp_path, monkeypatch):
    monkeypatch.setenv(permissions.PERSONA_ENV, permissions.ADMINISTRATOR)  # the audit below holds every call
    monkeypatch.setattr(rehearsal, "SWITCH_DRAIN_S", 0.5)
    local = rehearsal.Rehearsal(tmp_path / "local")
    url = local.ensure_emulator(keep_alive_s=600)
    calls = permissions.CallLog(tmp_path / "calls.jsonl")

    def client(service):
        made = modes.emulator_client(service, REGION, url)
        calls.attach(made)
        return made

    yield local, client, calls, tmp_path
    local.stop_all()


def _package(s3, model_dir) -> str:
    """The session's packaged embedded model (tests/conftest.py), uploaded as notebook 01 uploads it."""
    package = model_dir.parent / "package"
    tarball, manifest = package / TARBALL_NAME, package / MANIFEST_NAME
    return upload_package(s3, LocalPackage(tarball, manifest, json.loads(manifest.read_text())), CONFIG.s3_uri("model"))


def _calibrated_package(s3, embedded_gguf, work) -> str:
    """The same model packaged again with a calibration file (every choice band at T = 2), uploaded where
    steps.calibrated_package puts it."""
    doc = {
        "format": "decision-calibration/1",
        "order": "as_given",
        "created": "2026-12-01T00:00:00Z",
        "fit_for": {"gguf_sha256": sha256_of(embedded_gguf), "prompt_version": "decision-prompt/1"},
        "data": {"tasks": "synthetic", "fit_n": 30, "heldout_n": 10},
        "profiles": {
            f"choice/{band}": {
                "temperature": 2.0,
                "kept": True,
                "fit_n": 30,
                "heldout_n": 10,
                "heldout": {key: 0.5 for key in profiles.HELDOUT_KEYS},
            }
            for band in ("2", "3-4", "5-8", "9-16")
        },
    }
    path = profiles.write_document(profiles.check_document(doc), work / "calibration.json")
    made = package_local(
        EMBEDDED_MODEL, {EMBEDDED_MODEL.gguf.path: embedded_gguf}, work / "calibrated", calibration=path
    )
    return upload_package(s3, made, CONFIG.s3_uri("model", "calibrated") + "/")


def test_an_update_replaces_the_local_endpoint_without_a_failed_request(local, model_dir, embedded_gguf):
    local, client, calls, tmp_path = local
    sm, s3, cloudwatch = client("sagemaker"), client("s3"), client("cloudwatch")
    with calls.acting_as(None):  # the emulator's setup, not part of what is audited
        s3.create_bucket(Bucket=CONFIG.bucket)
        package = _package(s3, model_dir)
        calibrated = _calibrated_package(s3, embedded_gguf, tmp_path)
    stand_in = LocalHosting(s3, calls=calls, local=local)  # as local mode makes it
    plan = plan_for(
        DeploySpec("decision-cpu", threads=2, ctx_size=1024),
        name=NAME,
        role_arn=ROLE,
        region=REGION,
        image=parse_image_uri(IMAGE),
        model_data_url=package,
    )
    hosting.deploy(sm, plan, region=REGION, hosting=stand_in, progress=False)
    put = alarms.put_alarms(cloudwatch, [NAME], REGION)
    assert set(alarms.alarm_states(cloudwatch, NAME)) == set(put.alarms) == set(alarms.alarm_names(NAME))
    old = local.read_registry()["endpoints"][NAME]

    answers, failures, stop = [], [], threading.Event()

    def send():
        endpoint = EndpointClient(rehearsal.RoutedTransport(local, NAME), retries=0)  # a retry would hide a gap
        while not stop.is_set():
            try:
                # letters: the readout the calibration file was fitted for (local endpoints default to cloze)
                decision = endpoint.decide({**SUPPORT_ROUTE, "readout": "letters"})
                answers.append(
                    (decision.model["context_size"], decision.attempts, decision.raw["calibration"]["source"])
                )
            except Exception as exc:
                failures.append(repr(exc))
            stop.wait(0.1)  # a steady caller, leaving the new process's start-up some of the two cores

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        while not answers and not failures:
            time.sleep(0.05)
        update = updates.update_plan(
            DeploySpec("decision-cpu", threads=2, ctx_size=2048),
            endpoint_name=NAME,
            role_arn=ROLE,
            region=REGION,
            image=parse_image_uri(IMAGE),
            model_data_url=calibrated,
            rollback_alarms=alarms.rollback_alarms(NAME),
        )
        seen: list[str] = []
        rollout = updates.roll_out(sm, update, region=REGION, hosting=stand_in, delay_s=0.1, report=seen.append)
        during = len(answers)
        while len(answers) < during + 3 and not failures:
            time.sleep(0.05)
    finally:
        stop.set()
        sender.join(30)

    assert failures == []
    assert rollout.ok and rollout.config_name == update.version and rollout.statuses[-1] == "InService"
    assert any("updating to " + update.version in line for line in seen)
    versions = [(size, source) for size, _, source in answers]
    before, after = (1024, "none"), (2048, "calibration")  # the new version serves the calibration profile
    assert versions[0] == before and versions[-1] == after  # the answers come from the new version after it
    switched = versions.index(after)
    assert set(versions[:switched]) == {before} and set(versions[switched:]) == {after}  # one switch, never back
    assert {attempts for _, attempts, _ in answers} == {1}
    new = local.read_registry()["endpoints"][NAME]
    assert new["url"] != old["url"] and new["model_name"] == update.version
    assert not group_alive(old["pgid"]) and group_alive(new["pgid"])
    described = sm.describe_endpoint(EndpointName=NAME)
    assert described["EndpointConfigName"] == update.version

    # cleanup: the endpoint with both configs and models, then exactly its alarms and the dashboard
    result = teardown.delete_endpoint_resources(sm, NAME, poll_s=0)
    assert (result.endpoint, result.endpoint_config, result.model) == (teardown.DELETED,) * 3
    assert any(f"endpoint config {update.version} (the update it served): deleted" in n for n in result.notes)
    assert set(teardown.delete_alarms(cloudwatch, [NAME]).values()) == {teardown.DELETED}
    assert teardown.delete_dashboard(cloudwatch) == teardown.DELETED
    with calls.acting_as(None):  # the test's own look, not the workshop's calls
        assert sm.list_models()["Models"] == [] and sm.list_endpoint_configs()["EndpointConfigs"] == []
        assert cloudwatch.describe_alarms()["MetricAlarms"] == []
        assert cloudwatch.list_dashboards()["DashboardEntries"] == []

    # every call above, held against the operator's documents: nothing denied, the new statements used
    scope = policy_scope.scope(CONFIG, "123456789012")
    documents = {
        permissions.OPERATOR: operator_policies.operator_documents(scope),
        permissions.SAGEMAKER: service_roles.sagemaker_execution_role_policy(scope),
    }
    audit = permissions.audit(calls.calls(), documents, REGION, "123456789012", not_exercised={})
    assert audit.denied == [], audit
    # auto scaling and Batch Transform (notebook 07's last steps) are exercised by test_personas' full flow
    later = {s["Sid"] for s in operator_policies.autoscaling_statements(scope)} | {"TransformJobs"}
    operations = {s["Sid"] for s in operator_policies.operator_operations_policy(scope)["Statement"]} - later
    assert operations and not operations & {sid for _, sid in audit.unused}, audit
    made = {c["operation"] for c in calls.calls()}
    assert {
        "UpdateEndpoint",
        "PutMetricAlarm",
        "PutDashboard",
        "DescribeAlarms",
        "DeleteAlarms",
        "DeleteDashboards",
    } <= made

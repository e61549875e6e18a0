from datetime import datetime, timedelta, timezone

import pytest

from workshop_lib import cleanup
from workshop_lib.cleanup import ALREADY_GONE, DELETED, delete_endpoint_resources, running_workshop_endpoints
from workshop_lib.config import InvalidResourceName
from workshop_lib.endpoints import deploy, standard_plan

from .values import DLC_PINNED, MODEL_DATA, REGION, ROLE


def _deploy(sm, name, tags=None):
    plan = standard_plan(name, image_uri=DLC_PINNED, role_arn=ROLE, model_data_url=MODEL_DATA,
                         instance_type="ml.c5.2xlarge", tags=tags)
    deploy(sm, plan, progress=False, poll_s=0)


def _names(sm):
    return ({e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]},
            {c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]},
            {m["ModelName"] for m in sm.list_models()["Models"]})


def test_cleanup_deletes_only_what_it_was_named(clients):
    _deploy(clients.sm, "llamacpp-gguf")
    _deploy(clients.sm, "llamacpp-gguf-2")  # shares a prefix: a pattern delete would take it too
    result = delete_endpoint_resources(clients.sm, "llamacpp-gguf", poll_s=0)
    assert (result.endpoint, result.endpoint_config, result.model) == (DELETED, DELETED, DELETED)
    assert _names(clients.sm) == ({"llamacpp-gguf-2"}, {"llamacpp-gguf-2"}, {"llamacpp-gguf-2"})
    assert clients.sm.describe_endpoint(EndpointName="llamacpp-gguf-2")["EndpointStatus"] == "InService"


def test_cleanup_twice_reports_already_gone(clients):
    _deploy(clients.sm, "e1")
    delete_endpoint_resources(clients.sm, "e1", poll_s=0)
    again = delete_endpoint_resources(clients.sm, "e1", poll_s=0)
    assert (again.endpoint, again.endpoint_config, again.model) == (ALREADY_GONE,) * 3
    assert not again.deleted_anything
    assert str(again).splitlines() == ["endpoint e1: already gone", "endpoint config e1: already gone",
                                       "model e1: already gone"]


def test_cleanup_of_a_half_made_deployment(clients):
    # a model left behind by a deploy that stopped early, no config and no endpoint
    plan = standard_plan("half", image_uri=DLC_PINNED, role_arn=ROLE, model_data_url=MODEL_DATA,
                         instance_type="ml.c5.2xlarge")
    clients.sm.create_model(**plan.model)
    result = delete_endpoint_resources(clients.sm, "half", poll_s=0)
    assert (result.endpoint, result.endpoint_config, result.model) == (ALREADY_GONE, ALREADY_GONE, DELETED)
    assert _names(clients.sm) == (set(), set(), set())


def test_cleanup_leaves_an_unnamed_config_alone_and_says_so(clients):
    # an endpoint made outside the library, whose config is named differently
    plan = standard_plan("outside", image_uri=DLC_PINNED, role_arn=ROLE, model_data_url=MODEL_DATA,
                         instance_type="ml.c5.2xlarge")
    clients.sm.create_model(**plan.model)
    clients.sm.create_endpoint_config(**{**plan.endpoint_config, "EndpointConfigName": "other-config"})
    clients.sm.create_endpoint(EndpointName="outside", EndpointConfigName="other-config")
    result = delete_endpoint_resources(clients.sm, "outside", poll_s=0)
    assert (result.endpoint, result.endpoint_config, result.model) == (DELETED, ALREADY_GONE, DELETED)
    assert "other-config" in "\n".join(result.notes)
    assert _names(clients.sm) == (set(), {"other-config"}, set())


def test_cleanup_waits_until_the_endpoint_is_gone_stubber(stub_sm):
    sm, stub = stub_sm
    name = {"EndpointName": "e"}
    described = {"EndpointName": "e", "EndpointArn": f"arn:aws:sagemaker:{REGION}:123456789012:endpoint/e",
                 "EndpointConfigName": "e", "CreationTime": "2026-01-01T00:00:00Z",
                 "LastModifiedTime": "2026-01-01T00:00:00Z"}
    stub.add_response("describe_endpoint", {**described, "EndpointStatus": "InService"}, name)
    stub.add_response("delete_endpoint", {}, name)
    stub.add_response("describe_endpoint", {**described, "EndpointStatus": "Deleting"}, name)
    stub.add_response("describe_endpoint", {**described, "EndpointStatus": "Deleting"}, name)
    stub.add_client_error("describe_endpoint", "ValidationException", "Could not find endpoint \"e\".", 400,
                          expected_params=name)
    stub.add_response("delete_endpoint_config", {}, {"EndpointConfigName": "e"})
    stub.add_response("delete_model", {}, {"ModelName": "e"})
    result = delete_endpoint_resources(sm, "e", poll_s=0)
    assert (result.endpoint, result.endpoint_config, result.model) == (DELETED, DELETED, DELETED)


def test_cleanup_errors_other_than_not_found_are_raised_stubber(stub_sm):
    sm, stub = stub_sm
    stub.add_client_error("describe_endpoint", "ValidationException", "Could not find endpoint \"e\".", 400)
    stub.add_client_error("delete_endpoint", "AccessDeniedException", "not authorized to sagemaker:DeleteEndpoint",
                          400)
    with pytest.raises(cleanup.CleanupError, match="DeleteEndpoint"):
        delete_endpoint_resources(sm, "e", poll_s=0)


def test_only_could_not_find_counts_as_already_gone_stubber(stub_sm):
    sm, stub = stub_sm
    stub.add_client_error("delete_model", "ValidationException",
                          'Cannot delete model "m": it is in use by a transform job', 400)
    with pytest.raises(cleanup.CleanupError, match="in use"):
        cleanup.delete_model(sm, "m")
    stub.add_client_error("delete_model", "ValidationException", 'Could not find model "m".', 400)
    assert cleanup.delete_model(sm, "m") == ALREADY_GONE


def test_cleanup_refuses_names_sagemaker_could_not_hold(clients):
    with pytest.raises(InvalidResourceName):
        cleanup.delete_endpoint(clients.sm, "llamacpp-*")


def test_running_report_lists_tagged_endpoints_with_age_and_deletes_nothing(clients):
    _deploy(clients.sm, "tagged-a")
    _deploy(clients.sm, "untagged", tags=[{"Key": "team", "Value": "other"}])
    _deploy(clients.sm, "tagged-b")
    before = _names(clients.sm)
    now = datetime.now(timezone.utc) + timedelta(days=2, hours=3)
    running = running_workshop_endpoints(clients.sm, now=now)
    assert [e.name for e in running] == ["tagged-a", "tagged-b"]
    assert all(e.status == "InService" for e in running)
    assert all(timedelta(days=2, hours=2) < e.age < timedelta(days=2, hours=4) for e in running)
    assert running[0].age_text == "2 d 3 h"
    assert running[0].tags["created-by"] == "workshop_lib"
    assert _names(clients.sm) == before
    table = cleanup.format_running(running)
    assert "tagged-a" in table and "untagged" not in table


def test_running_report_when_nothing_runs(clients):
    assert running_workshop_endpoints(clients.sm) == []
    assert cleanup.format_running([]) == "no workshop endpoints found"


# -- the notebook's cleanup step: billing first, refusals as notes ------------------------------------


def _deny(client, operation: str, only_for: str | None = None):
    """Make one operation of a real boto3 client answer AccessDenied, through botocore's own call path."""
    class Denied:
        status_code = 403

    def refuse(params, **_):
        if only_for is None or only_for in str(params):
            return Denied(), {"Error": {"Code": "AccessDeniedException", "Message": "not authorized (test)"}}
        return None

    client.meta.events.register(f"before-call.{client.meta.service_model.service_id.hyphenize()}.{operation}", refuse)


@pytest.fixture
def aws_mode_steps(tmp_path, monkeypatch, fake_credentials):
    from moto import mock_aws

    from workshop_lib import steps

    monkeypatch.setenv("WORKSHOP_MODE", "aws")
    monkeypatch.setenv("WORKSHOP_REGION", REGION)
    monkeypatch.setenv("WORKSHOP_CONFIG", str(tmp_path / "config.json"))
    with mock_aws():
        yield steps


def test_endpoints_are_deleted_even_when_log_groups_may_not_be(aws_mode_steps):
    workshop = aws_mode_steps.Workshop.load()
    c = workshop.clients
    for name in ("llamacpp-gguf", "semif-decision-workflows"):
        _deploy(c.sm, name)
        c.logs.create_log_group(logGroupName=f"/aws/sagemaker/Endpoints/{name}")
    _deny(c.logs, "DeleteLogGroup")
    text = str(aws_mode_steps.delete_endpoints(workshop, ["llamacpp-gguf", "semif-decision-workflows"]))
    assert c.sm.list_endpoints()["Endpoints"] == []
    assert text.count("not deleted (AccessDeniedException") == 2  # a note per log group, not an exception


def test_one_endpoint_that_cannot_be_deleted_does_not_keep_the_others(aws_mode_steps):
    from workshop_lib.steps import StepError

    workshop = aws_mode_steps.Workshop.load()
    c = workshop.clients
    for name in ("first", "second"):
        _deploy(c.sm, name)
    _deny(c.sm, "DeleteEndpoint", only_for="first")
    with pytest.raises(StepError, match="first may still be billing") as raised:
        aws_mode_steps.delete_endpoints(workshop, ["first", "second"])
    assert [e["EndpointName"] for e in c.sm.list_endpoints()["Endpoints"]] == ["first"]
    assert "endpoint second: deleted" in str(raised.value)

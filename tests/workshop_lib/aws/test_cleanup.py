from datetime import datetime, timedelta, timezone

import pytest

from workshop_lib import name_rules
from workshop_lib.aws import teardown as cleanup
from workshop_lib.aws.endpoints import standard_plan
from workshop_lib.aws.hosting import deploy
from workshop_lib.aws.images import parse_image_uri
from workshop_lib.aws.model_requests import workshop_tags
from workshop_lib.aws.teardown import ALREADY_GONE, DELETED, KEPT, delete_endpoint_resources, running_workshop_endpoints
from workshop_lib.errors import AwsFailure, InvalidInput

from .values import DLC_PINNED, MODEL_DATA, REGION, ROLE


def _deploy(sm, name, tags=None):
    plan = standard_plan(
        name,
        image=parse_image_uri(DLC_PINNED),
        role_arn=ROLE,
        model_data_url=MODEL_DATA,
        instance_type="ml.c5.2xlarge",
        tags=tags,
    )
    deploy(sm, plan, region=REGION, progress=False, poll_s=0)


def _names(sm):
    return (
        {e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]},
        {c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]},
        {m["ModelName"] for m in sm.list_models()["Models"]},
    )


def test_cleanup_deletes_only_what_it_was_named(clients):
    _deploy(clients.sm, "decision-workshop-standard")
    _deploy(clients.sm, "decision-workshop-standard-2")  # shares a prefix: a pattern delete would take it too
    result = delete_endpoint_resources(clients.sm, "decision-workshop-standard", poll_s=0)
    assert (result.endpoint, result.endpoint_config, result.model) == (DELETED, DELETED, DELETED)
    assert _names(clients.sm) == (
        {"decision-workshop-standard-2"},
        {"decision-workshop-standard-2"},
        {"decision-workshop-standard-2"},
    )
    assert clients.sm.describe_endpoint(EndpointName="decision-workshop-standard-2")["EndpointStatus"] == "InService"


def test_cleanup_twice_reports_already_gone(clients):
    _deploy(clients.sm, "e1")
    delete_endpoint_resources(clients.sm, "e1", poll_s=0)
    again = delete_endpoint_resources(clients.sm, "e1", poll_s=0)
    assert (again.endpoint, again.endpoint_config, again.model) == (ALREADY_GONE,) * 3
    assert not again.deleted_anything
    assert str(again).splitlines() == [
        "endpoint e1: already gone",
        "endpoint config e1: already gone",
        "model e1: already gone",
    ]


def test_cleanup_of_a_half_made_deployment(clients):
    # a model left behind by a deploy that stopped early, no config and no endpoint
    plan = standard_plan(
        "half",
        image=parse_image_uri(DLC_PINNED),
        role_arn=ROLE,
        model_data_url=MODEL_DATA,
        instance_type="ml.c5.2xlarge",
    )
    clients.sm.create_model(**plan.model)
    result = delete_endpoint_resources(clients.sm, "half", poll_s=0)
    assert (result.endpoint, result.endpoint_config, result.model) == (ALREADY_GONE, ALREADY_GONE, DELETED)
    assert _names(clients.sm) == (set(), set(), set())


def test_cleanup_leaves_an_unnamed_config_alone_and_says_so(clients):
    # an endpoint made outside the library, whose config is named differently
    plan = standard_plan(
        "outside",
        image=parse_image_uri(DLC_PINNED),
        role_arn=ROLE,
        model_data_url=MODEL_DATA,
        instance_type="ml.c5.2xlarge",
    )
    clients.sm.create_model(**plan.model)
    clients.sm.create_endpoint_config(**{**plan.endpoint_config, "EndpointConfigName": "other-config"})
    clients.sm.create_endpoint(EndpointName="outside", EndpointConfigName="other-config", Tags=workshop_tags())
    result = delete_endpoint_resources(clients.sm, "outside", poll_s=0)
    assert (result.endpoint, result.endpoint_config, result.model) == (DELETED, ALREADY_GONE, DELETED)
    assert "other-config" in "\n".join(result.notes)
    assert _names(clients.sm) == (set(), {"other-config"}, set())


ARN = f"arn:aws:sagemaker:{REGION}:123456789012"
DESCRIBED = {
    "EndpointName": "e",
    "EndpointArn": f"{ARN}:endpoint/e",
    "EndpointConfigName": "e",
    "CreationTime": "2026-01-01T00:00:00Z",
    "LastModifiedTime": "2026-01-01T00:00:00Z",
}
TAGS = {"Tags": [{"Key": "workshop", "Value": "decision-workshop"}]}


def _stub_owned(stub, kind: str) -> None:
    """DescribeX and ListTags of a workshop-tagged config or model named "e"."""
    if kind == "config":
        stub.add_response(
            "describe_endpoint_config",
            {
                "EndpointConfigName": "e",
                "EndpointConfigArn": f"{ARN}:endpoint-config/e",
                "CreationTime": "2026-01-01",
                "ProductionVariants": [{"VariantName": "AllTraffic", "ModelName": "e"}],
            },
            {"EndpointConfigName": "e"},
        )
        stub.add_response("list_tags", TAGS, {"ResourceArn": f"{ARN}:endpoint-config/e"})
    else:
        stub.add_response(
            "describe_model",
            {"ModelName": "e", "ModelArn": f"{ARN}:model/e", "CreationTime": "2026-01-01"},
            {"ModelName": "e"},
        )
        stub.add_response("list_tags", TAGS, {"ResourceArn": f"{ARN}:model/e"})


def test_cleanup_waits_until_the_endpoint_is_gone_stubber(stub_sm):
    sm, stub = stub_sm
    name = {"EndpointName": "e"}
    stub.add_response("describe_endpoint", {**DESCRIBED, "EndpointStatus": "InService"}, name)
    stub.add_response("list_tags", TAGS, {"ResourceArn": f"{ARN}:endpoint/e"})
    stub.add_response("delete_endpoint", {}, name)
    stub.add_response("describe_endpoint", {**DESCRIBED, "EndpointStatus": "Deleting"}, name)
    stub.add_response("describe_endpoint", {**DESCRIBED, "EndpointStatus": "Deleting"}, name)
    stub.add_client_error(
        "describe_endpoint", "ValidationException", 'Could not find endpoint "e".', 400, expected_params=name
    )
    _stub_owned(stub, "config")
    stub.add_response("delete_endpoint_config", {}, {"EndpointConfigName": "e"})
    _stub_owned(stub, "model")
    stub.add_response("delete_model", {}, {"ModelName": "e"})
    result = delete_endpoint_resources(sm, "e", poll_s=0)
    assert (result.endpoint, result.endpoint_config, result.model) == (DELETED, DELETED, DELETED)


def test_cleanup_errors_other_than_not_found_are_raised_stubber(stub_sm):
    sm, stub = stub_sm
    stub.add_response("describe_endpoint", {**DESCRIBED, "EndpointStatus": "InService"}, {"EndpointName": "e"})
    stub.add_response("list_tags", TAGS, {"ResourceArn": f"{ARN}:endpoint/e"})
    stub.add_client_error("delete_endpoint", "AccessDeniedException", "not authorized to sagemaker:DeleteEndpoint", 400)
    with pytest.raises(AwsFailure, match="DeleteEndpoint"):
        delete_endpoint_resources(sm, "e", poll_s=0)


def test_an_untagged_endpoint_of_the_same_name_is_kept_with_its_config_and_model(clients):
    # a blog reader's own endpoint, made by the published sample: no workshop tag on any of the three
    _deploy(clients.sm, "decision-workshop-cpu", tags=[{"Key": "project", "Value": "semif"}])
    before = _names(clients.sm)
    result = delete_endpoint_resources(clients.sm, "decision-workshop-cpu", poll_s=0)
    assert (result.endpoint, result.endpoint_config, result.model) == (KEPT, KEPT, KEPT)
    assert not result.deleted_anything
    assert _names(clients.sm) == before
    notes = "\n".join(result.notes)
    assert notes.count("was kept") == 3 and "workshop=decision-workshop" in notes and "not the workshop's" in notes
    assert clients.sm.describe_endpoint(EndpointName="decision-workshop-cpu")["EndpointStatus"] == "InService"


def test_only_the_tagged_ones_of_the_three_are_deleted(clients):
    _deploy(clients.sm, "mixed")
    config_arn = clients.sm.describe_endpoint_config(EndpointConfigName="mixed")["EndpointConfigArn"]
    clients.sm.delete_tags(ResourceArn=config_arn, TagKeys=["workshop"])
    result = delete_endpoint_resources(clients.sm, "mixed", poll_s=0)
    assert (result.endpoint, result.endpoint_config, result.model) == (DELETED, KEPT, DELETED)
    assert _names(clients.sm) == (set(), {"mixed"}, set())


def test_tags_that_may_not_be_read_keep_the_resource_and_say_why(clients):
    _deploy(clients.sm, "guarded")
    _deny(clients.sm, "ListTags", only_for=":endpoint/guarded")
    result = delete_endpoint_resources(clients.sm, "guarded", poll_s=0)
    assert result.endpoint == KEPT and (result.endpoint_config, result.model) == (DELETED, DELETED)
    assert "could not be read (AccessDeniedException" in "\n".join(result.notes)
    assert clients.sm.describe_endpoint(EndpointName="guarded")["EndpointStatus"] == "InService"


def test_only_could_not_find_counts_as_already_gone_stubber(stub_sm):
    sm, stub = stub_sm
    stub.add_client_error(
        "delete_model", "ValidationException", 'Cannot delete model "m": it is in use by a transform job', 400
    )
    with pytest.raises(AwsFailure, match="in use"):
        cleanup.delete_model(sm, "m")
    stub.add_client_error("delete_model", "ValidationException", 'Could not find model "m".', 400)
    assert cleanup.delete_model(sm, "m") == ALREADY_GONE


def test_cleanup_refuses_names_sagemaker_could_not_hold(clients):
    with pytest.raises(InvalidInput):
        cleanup.delete_endpoint(clients.sm, "llamacpp-*")


def test_running_report_lists_tagged_endpoints_with_age_and_deletes_nothing(clients):
    _deploy(clients.sm, "tagged-a")
    _deploy(clients.sm, "untagged", tags=[{"Key": "team", "Value": "other"}])
    _deploy(clients.sm, "tagged-b")
    before = _names(clients.sm)
    now = datetime.now(timezone.utc) + timedelta(days=2, hours=3)
    running = running_workshop_endpoints(clients.sm, ["tagged-a", "untagged", "tagged-b"], now=now)
    assert [e.name for e in running] == ["tagged-a", "tagged-b"]
    assert all(e.status == "InService" for e in running)
    assert all(timedelta(days=2, hours=2) < e.age < timedelta(days=2, hours=4) for e in running)
    assert running[0].age_text == "2 d 3 h"
    assert running[0].tags["created-by"] == "workshop_lib"
    assert _names(clients.sm) == before
    table = cleanup.format_running(running)
    assert "tagged-a" in table and "untagged is not listed" in table and "workshop=decision-workshop" in table


def test_running_report_when_nothing_runs(clients):
    assert running_workshop_endpoints(clients.sm, ["decision-workshop-cpu"]) == []
    assert cleanup.format_running([]) == "no workshop endpoints found"


def _listed_tags_of(client) -> list[str]:
    seen = []
    client.meta.events.register(
        "before-parameter-build.sagemaker.ListTags", lambda params, **_: seen.append(params["ResourceArn"])
    )
    return seen


def test_running_report_reads_the_tags_of_the_named_endpoints_only(clients):
    for name in ("decision-workshop-cpu", "someone-elses", "another-team"):
        _deploy(clients.sm, name)
    seen = _listed_tags_of(clients.sm)
    running = running_workshop_endpoints(clients.sm, ["decision-workshop-standard", "decision-workshop-cpu"])
    assert [e.name for e in running] == ["decision-workshop-cpu"]
    assert [arn.rsplit("/", 1)[1] for arn in seen] == ["decision-workshop-cpu"]  # never the account's others


def test_running_report_turns_a_listtags_refusal_into_a_note(clients):
    _deploy(clients.sm, "decision-workshop-cpu")
    _deploy(clients.sm, "decision-workshop-gpu")
    _deny(clients.sm, "ListTags", only_for="decision-workshop-gpu")
    running = running_workshop_endpoints(clients.sm, ["decision-workshop-cpu", "decision-workshop-gpu"])
    assert sorted(e.name for e in running) == ["decision-workshop-cpu", "decision-workshop-gpu"]  # by name
    text = cleanup.format_running(running)
    assert "the tags of endpoint decision-workshop-gpu could not be read (AccessDeniedException" in text


def test_running_report_without_listendpoints_looks_each_name_up(clients):
    _deploy(clients.sm, "decision-workshop-cpu")
    _deny(clients.sm, "ListEndpoints")
    running = running_workshop_endpoints(clients.sm, ["decision-workshop-cpu", "decision-workshop-gpu"])
    assert [e.name for e in running] == ["decision-workshop-cpu"] and running[0].status == "InService"
    assert "ListEndpoints was refused" in cleanup.format_running(running)


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
    for name in ("decision-workshop-standard", "decision-workshop-cpu"):
        _deploy(c.sm, name)
        c.logs.create_log_group(logGroupName=f"/aws/sagemaker/Endpoints/{name}")
    _deny(c.logs, "DeleteLogGroup")
    text = str(aws_mode_steps.delete_endpoints(workshop, ["decision-workshop-standard", "decision-workshop-cpu"]))
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


# -- build resources and deadlines: only what carries the workshop's tag -------------------------------


def _images(ecr, repository):
    return [i["imageTags"] for i in ecr.describe_images(repositoryName=repository)["imageDetails"]]


def test_an_untagged_repository_of_the_same_name_keeps_its_images_and_says_why(aws_mode_steps):
    from workshop_lib.aws import build_projects
    from workshop_lib.local import stand_ins

    workshop = aws_mode_steps.Workshop.load()
    c = workshop.clients
    repository = workshop.config.ecr_repository
    c.ecr.create_repository(repositoryName=repository)  # as the sample's prepare_build.py does: no tags
    stand_ins.push_stand_in(c.ecr, repository, "cpu-1", "a reader's own image", "0" * 64)
    text = str(aws_mode_steps.delete_build_resources(workshop, [build_projects.IMAGE_BUILD_PROJECT], repository))
    assert f"ECR repository {repository}: kept, with its images" in text
    assert "does not carry the workshop tag workshop=decision-workshop" in text and "not the workshop's" in text
    assert _images(c.ecr, repository) == [["cpu-1"]]  # nothing deleted, no force=True


def test_the_workshops_tagged_repository_goes_with_its_images(aws_mode_steps):
    from workshop_lib.aws import build_projects
    from workshop_lib.aws import codebuild as builds
    from workshop_lib.local import stand_ins

    workshop = aws_mode_steps.Workshop.load()
    c = workshop.clients
    repository = workshop.config.ecr_repository
    builds.ensure_ecr_repository(c.ecr, build_projects.ecr_repository_request(repository))  # tagged, as notebook 03
    stand_ins.push_stand_in(c.ecr, repository, "cpu-1", "the decision image", "1" * 64)
    text = str(aws_mode_steps.delete_build_resources(workshop))  # by default the workshop's projects and repository
    assert f"ECR repository {repository} (and its images): deleted" in text
    assert c.ecr.describe_repositories()["repositories"] == []
    assert [line.split(":")[0] for line in text.splitlines() if line.startswith("CodeBuild project")] == [
        f"CodeBuild project {project}" for project in build_projects.BUILD_PROJECTS
    ]


def test_a_repository_whose_tags_may_not_be_read_is_kept(aws_mode_steps):
    from workshop_lib.aws import build_projects
    from workshop_lib.aws import codebuild as builds

    workshop = aws_mode_steps.Workshop.load()
    c = workshop.clients
    repository = workshop.config.ecr_repository
    builds.ensure_ecr_repository(c.ecr, build_projects.ecr_repository_request(repository))
    _deny(c.ecr, "ListTagsForResource")
    text = str(aws_mode_steps.delete_build_resources(workshop, [], repository))
    assert "kept, with its images" in text and "its tags could not be read (AccessDeniedException" in text
    assert len(c.ecr.describe_repositories()["repositories"]) == 1


def test_an_untagged_codebuild_project_of_the_same_name_is_kept(aws_mode_steps):
    from workshop_lib.aws import build_projects

    workshop = aws_mode_steps.Workshop.load()
    c = workshop.clients
    for project, tags in (("theirs", {}), ("ours", None)):
        c.codebuild.create_project(
            **build_projects.project_request(
                project,
                buildspec=build_projects.IMAGE_BUILD_BUILDSPEC,
                source_location="b/src.zip",
                service_role_arn=ROLE,
                tags=tags,
            )
        )
    text = str(aws_mode_steps.delete_build_resources(workshop, ["theirs", "ours"], "no-such-repository"))
    assert "CodeBuild project theirs: kept" in text and "CodeBuild project ours: deleted" in text
    assert "ECR repository no-such-repository: already gone" in text
    assert [p["name"] for p in c.codebuild.batch_get_projects(names=["theirs", "ours"])["projects"]] == ["theirs"]


def test_deleting_an_endpoint_through_the_library_removes_its_deadline(aws_mode_steps):
    from workshop_lib.aws import spend_guard

    workshop = aws_mode_steps.Workshop.load()
    c = workshop.clients
    scheduler = c.get("scheduler")
    _deploy(c.sm, "decision-workshop-cpu")
    spend_guard.set_deadline(
        scheduler,
        "decision-workshop-cpu",
        region=REGION,
        role_arn=spend_guard.scheduler_role_arn(REGION, "123456789012"),
        when=spend_guard.deadline_after(4),
    )
    assert spend_guard.read_deadline(scheduler, "decision-workshop-cpu") is not None
    text = str(aws_mode_steps.delete_endpoint(workshop, "decision-workshop-cpu"))
    assert "deadline of decision-workshop-cpu: deleted" in text
    assert spend_guard.read_deadline(scheduler, "decision-workshop-cpu") is None
    again = str(aws_mode_steps.delete_endpoint(workshop, "decision-workshop-cpu"))
    assert "deadline of decision-workshop-cpu: already gone" in again


def test_a_kept_endpoint_keeps_its_schedule_too(aws_mode_steps):
    from workshop_lib.aws import spend_guard

    workshop = aws_mode_steps.Workshop.load()
    c = workshop.clients
    _deploy(c.sm, "decision-workshop-gpu", tags=[{"Key": "project", "Value": "semif"}])
    text = str(aws_mode_steps.delete_endpoints(workshop, ["decision-workshop-gpu"]))
    assert "endpoint decision-workshop-gpu: kept" in text and "deadline of" not in text
    assert c.sm.describe_endpoint(EndpointName="decision-workshop-gpu")["EndpointStatus"] == "InService"
    assert spend_guard.read_deadline(c.get("scheduler"), "decision-workshop-gpu") is None


def test_deadlines_in_two_regions_share_the_role_and_cleanup_in_one_keeps_it_for_the_other(aws_mode_steps, monkeypatch):
    import json

    from workshop_lib.aws import iam, spend_guard
    from workshop_lib.steps import deploy

    monkeypatch.setenv("WORKSHOP_BUCKET", "sagemaker-decision-workshop-test")
    first = aws_mode_steps.Workshop.load()
    name = first.config.gpu_endpoint_name
    assert "deleted at" in deploy.give_deadline(first, name, 4)
    monkeypatch.setenv("WORKSHOP_REGION", "us-west-2")  # the participant moves region
    second = aws_mode_steps.Workshop.load()
    assert second.config.region == "us-west-2" and "deleted at" in deploy.give_deadline(second, name, 4)

    role_iam = second.clients.get("iam")
    role = spend_guard.SCHEDULER_ROLE_NAME
    assert spend_guard.regions_of(role_iam.list_role_tags(RoleName=role)["Tags"]) == [REGION, "us-west-2"]

    # notebook 08 in the second region: its deadline goes, the role stays for the first region's
    aws_mode_steps.delete_endpoints(second, [name])
    assert spend_guard.read_deadline(second.clients.get("scheduler"), name) is None
    kept = str(aws_mode_steps.delete_deadline_role(second))
    assert "kept" in kept and f"{REGION}: {spend_guard.schedule_name(name)}" in kept
    described = first.clients.get("scheduler").get_schedule(Name=spend_guard.schedule_name(name))
    assert described["Target"]["RoleArn"] == role_iam.get_role(RoleName=role)["Role"]["Arn"]
    inline = role_iam.get_role_policy(RoleName=role, PolicyName=role)["PolicyDocument"]
    inline = json.loads(inline) if isinstance(inline, str) else inline
    # what the first region's deadline does when it fires is still allowed after the second region's deploy
    endpoint = f"arn:aws:sagemaker:{REGION}:123456789012:endpoint/{name}"
    assert iam.allows(
        inline,
        "sagemaker:DeleteEndpoint",
        endpoint,
        {f"aws:ResourceTag/{k}": v for k, v in name_rules.WORKSHOP_TAGS.items()},
    )

    # notebook 08 in the first region: nothing needs the role any more
    aws_mode_steps.delete_endpoints(first, [name])
    assert str(aws_mode_steps.delete_deadline_role(first)).startswith(f"IAM role {role}: deleted")
    assert str(aws_mode_steps.delete_deadline_role(first)) == f"IAM role {role}: already gone"


def test_a_scale_to_zero_components_deadline_left_over_keeps_the_deadline_role(aws_mode_steps, monkeypatch):
    from workshop_lib.aws import inference_components, spend_guard
    from workshop_lib.steps import deploy

    monkeypatch.setenv("WORKSHOP_BUCKET", "sagemaker-decision-workshop-test")
    workshop = aws_mode_steps.Workshop.load()
    name = inference_components.ZERO_ENDPOINT
    component = inference_components.component_name(name)
    assert "deleted at" in deploy.give_deadline(workshop, name, 4, component=component)
    scheduler = workshop.clients.get("scheduler")
    assert spend_guard.remove_deadline(scheduler, name) == spend_guard.DELETED  # the component's schedule remains

    kept = str(aws_mode_steps.delete_deadline_role(workshop))
    assert kept.startswith("IAM role decision-workshop-scheduler: kept") and f"{REGION}: {component}-deadline" in kept
    assert spend_guard.remove_deadline(scheduler, name, component) == spend_guard.DELETED
    assert str(aws_mode_steps.delete_deadline_role(workshop)).startswith(
        "IAM role decision-workshop-scheduler: deleted"
    )


def test_the_versions_an_update_made_go_even_after_a_deadline_deleted_the_endpoint(aws_mode_steps):
    workshop = aws_mode_steps.Workshop.load()
    c = workshop.clients
    name, version = "decision-workshop-cpu", "decision-workshop-cpu-20261201153601"
    _deploy(c.sm, version)  # what the update made (model and config, tagged), then served
    c.sm.delete_endpoint(EndpointName=version)  # the deadline fired: no endpoint left to say what it served
    workshop.remember(update_versions={name: [version], "other": ["other-20261201153601"]})
    text = str(aws_mode_steps.delete_endpoints(workshop, [name]))
    assert f"update version {version}: endpoint config deleted; model deleted" in text
    assert _names(c.sm) == (set(), set(), set())
    assert workshop.outputs()["update_versions"] == {"other": ["other-20261201153601"]}  # others' are kept


def test_a_deadline_role_whose_schedules_cannot_be_checked_is_kept_with_a_note(aws_mode_steps, monkeypatch):
    from workshop_lib.steps import deploy

    monkeypatch.setenv("WORKSHOP_BUCKET", "sagemaker-decision-workshop-test")
    workshop = aws_mode_steps.Workshop.load()
    assert "deleted at" in deploy.give_deadline(workshop, workshop.config.cpu_endpoint_name, 4)
    _deny(workshop.clients.get("scheduler"), "GetSchedule")
    text = str(aws_mode_steps.delete_deadline_role(workshop))
    assert "kept, the deadlines that may still use it could not be checked (AccessDeniedException" in text
    assert workshop.clients.get("iam").get_role(RoleName="decision-workshop-scheduler")["Role"]

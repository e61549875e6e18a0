"""Notebook 08: delete what the workshop created, by name only and only where it carries the workshop's
tag, then the permissions audit and a last look for anything still running.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from botocore.exceptions import ClientError

from ..aws import hosting, policies, spend_guard, teardown, updates
from ..aws.build_projects import BUILD_PROJECTS, parse_s3_uri
from ..aws.inference_components import ZERO_ENDPOINT
from ..errors import StepError
from ..local import permissions
from ..local.modes import CALL_LOG
from .components import components_first
from .context import Text, Workshop, cleanup_step, shows_requests
from .recorded import UPDATE_VERSIONS


def _gone(call: Callable[..., object], *codes: str, **kwargs: Any) -> str:
    """Delete something that costs nothing while it stays: "deleted", "already gone", or why not.

    A refusal (AccessDenied, say, when the role may not delete log groups) becomes a note in the
    result instead of an exception, so it never stops the deletions that stop the billing.
    """
    try:
        call(**kwargs)
        return teardown.DELETED
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") in codes:
            return teardown.ALREADY_GONE
        return (
            f"not deleted ({error.get('Code')}: {error.get('Message')}); it costs little or nothing, "
            "delete it in the console or ask an administrator"
        )


def tagged_endpoints(workshop: Workshop, names: Sequence[str] | None = None) -> list[str]:
    """The endpoints notebook 08 deletes: ``names`` (default: each deploy path's), then every other one in the
    region that carries the workshop's tag (deployed under another name, with the sample's ``--name`` say, or
    under an earlier config)."""
    config = workshop.config
    names = names or config.endpoint_names()
    tagged = [e.name for e in teardown.running_workshop_endpoints(workshop.clients.sm)]
    return list(dict.fromkeys((*names, *tagged)))


@shows_requests
def delete_endpoint(workshop: Workshop, name: str) -> Text:
    """Delete endpoint, endpoint config and model ``name`` and its log group; locally stop its process."""
    return delete_endpoints(workshop, [name])


@cleanup_step
@shows_requests
def delete_endpoints(workshop: Workshop, names: Sequence[str], *, wait: bool = True) -> Text:
    """Every named endpoint (with its config and model, and first its inference component where it hosts one)
    first, since they bill; then their log groups.

    An endpoint that cannot be deleted does not stop the others: each failure is reported and the
    step raises only after all were tried. ``wait`` False: the endpoint config and model are deleted
    without waiting for the endpoint to be gone.
    """
    config = workshop.config
    c = workshop.clients
    lines, failed, deleted = [], [], []
    for name in names:
        try:
            lines += components_first(workshop, name, wait=wait)  # an inference component goes before its endpoint
            result = teardown.delete_endpoint_resources(
                c.sm, name, wait=wait, poll_s=15 if config.mode == "aws" else 0.2, scheduler_client=c.get("scheduler")
            )
            lines.append(str(result))
            if result.deleted_anything:
                deleted.append(name)
            lines += _delete_versions(workshop, name)
        except Exception as exc:
            failed.append(name)
            lines.append(f"endpoint {name}: NOT deleted: {exc}")
        if config.mode == "local":
            lines.append(
                f"local endpoint process: {'stopped' if workshop.rehearsal.stop_endpoint(name) else 'not running'}"
            )
    for name in names:
        group = hosting.log_group(name)
        lines.append(
            f"log group {group}: {_gone(c.logs.delete_log_group, 'ResourceNotFoundException', logGroupName=group)}"
        )
    if failed:
        raise StepError(
            "\n".join(lines) + f"\n{', '.join(failed)} may still be billing: delete them in the "
            "SageMaker console (Inference > Endpoints) or run this cell again"
        )
    if not deleted:  # 07 ran before, or the rehearsal started over: safe, and said so
        lines.append("nothing was there to delete: these endpoints are already gone")
    return Text("\n".join(lines))


def _delete_versions(workshop: Workshop, name: str) -> list[str]:
    """The versions the endpoint's updates made (``operate.UPDATE_VERSIONS``) that are still there: they outlive
    an endpoint a deadline deleted. Each goes only if it carries the workshop's tag."""
    made = workshop.outputs().get(UPDATE_VERSIONS, {})
    lines = [
        f"update version {version}: {updates.discard_version(workshop.clients.sm, name, version)}"
        for version in made.get(name, [])
    ]
    if name in made:
        workshop.remember(**{UPDATE_VERSIONS: {k: v for k, v in made.items() if k != name}})
    return lines


def _delete_project(codebuild: Any) -> Callable[[str], None]:
    """DeleteProject succeeds for a project that does not exist; ask first so the result says so."""

    def delete(name: str) -> None:
        if not codebuild.batch_get_projects(names=[name]).get("projects"):
            raise ClientError({"Error": {"Code": "ResourceNotFound", "Message": name}}, "BatchGetProjects")
        codebuild.delete_project(name=name)

    return delete


def _project_tags(codebuild: Any, name: str) -> dict[str, str] | None:
    """A CodeBuild project's tags, or None when there is no such project."""
    found = codebuild.batch_get_projects(names=[name]).get("projects") or []
    return {t["key"]: t["value"] for t in found[0].get("tags") or []} if found else None


def _repository_tags(ecr: Any, name: str) -> dict[str, str] | None:
    """An ECR repository's tags, or None when there is no such repository."""
    try:
        arn = ecr.describe_repositories(repositoryNames=[name])["repositories"][0]["repositoryArn"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "RepositoryNotFoundException":
            return None
        raise
    return {t["Key"]: t["Value"] for t in ecr.list_tags_for_resource(resourceArn=arn).get("tags", [])}


def _owned(read: Callable[..., dict[str, str] | None], *args: Any) -> tuple[bool | None, str]:
    """(True: the workshop's / False: someone else's / None: gone, why) from a tag reader."""
    try:
        tags = read(*args)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        return False, f"its tags could not be read ({error.get('Code')}: {error.get('Message')})"
    if tags is None:
        return None, ""
    return teardown.is_workshop_tagged(tags), ""


@cleanup_step
@shows_requests
def delete_build_resources(
    workshop: Workshop, projects: Sequence[str] = BUILD_PROJECTS, repository: str | None = None
) -> Text:
    """Delete the CodeBuild projects (by default the workshop's two, and their log groups) and the ECR
    repository with its images (by default the config's), each only if it carries the workshop's tag: a
    repository of the same name without it (the published sample's, say) is kept with every image in it,
    and the result says why."""
    c = workshop.clients
    repository = workshop.config.ecr_repository if repository is None else repository
    lines = []
    for project in projects:
        ours, why = _owned(_project_tags, c.codebuild, project)
        if ours is False:
            lines.append(f"CodeBuild project {project}: {teardown.KEPT}")
            lines.append(teardown.not_tagged_note("CodeBuild project", project, why))
            continue
        lines.append(
            f"CodeBuild project {project}: {_gone(_delete_project(c.codebuild), 'ResourceNotFound', name=project)}"
        )
        group = f"/aws/codebuild/{project}"
        lines.append(
            f"log group {group}: {_gone(c.logs.delete_log_group, 'ResourceNotFoundException', logGroupName=group)}"
        )
    ours, why = _owned(_repository_tags, c.ecr, repository)
    if ours is None:
        lines.append(f"ECR repository {repository}: {teardown.ALREADY_GONE}")
    elif ours:  # force: its images go with it, which is what the workshop pushed there
        state = _gone(c.ecr.delete_repository, "RepositoryNotFoundException", repositoryName=repository, force=True)
        lines.append(f"ECR repository {repository} (and its images): {state}")
    else:
        lines.append(f"ECR repository {repository}: {teardown.KEPT}, with its images")
        lines.append(teardown.not_tagged_note("ECR repository", repository, why))
    return Text("\n".join(lines))


@cleanup_step
@shows_requests
def delete_codebuild_role(workshop: Workshop) -> Text:
    """Delete the CodeBuild service role notebook 00 created (by its fixed name); a role someone else
    made and gave by ARN is left alone. It costs nothing, so a refusal is a note, not a stop."""
    config = workshop.config
    name = policies.CODEBUILD_ROLE_NAME
    if not (config.codebuild_role_arn or "").endswith(f":role/{name}"):
        return Text(f"CodeBuild role {config.codebuild_role_arn or '(none)'}: not created by the workshop, left alone")
    iam = workshop.clients.get("iam")
    policy = _gone(iam.delete_role_policy, "NoSuchEntity", RoleName=name, PolicyName=name)
    role = _gone(iam.delete_role, "NoSuchEntity", RoleName=name)
    return Text(f"IAM role {name}: {role} (its inline policy: {policy})")


@cleanup_step
@shows_requests
def delete_deadline_role(workshop: Workshop) -> Text:
    """Delete the role the endpoint deadlines run as (``spend_guard``), once no deadline needs it: the role is
    one per account, so it is kept while any region it served (its tag says which) still holds one of the
    workshop's deadlines. It costs nothing, so a refusal is a note, not a stop."""
    iam = workshop.clients.get("iam")
    name = spend_guard.SCHEDULER_ROLE_NAME
    config = workshop.config
    mode = workshop.clients.mode
    try:
        tags = iam.list_role_tags(RoleName=name).get("Tags", [])
        left = spend_guard.schedules_left(
            lambda region: (
                workshop.clients.get("scheduler") if region == config.region else mode.client("scheduler", region)
            ),
            {*spend_guard.regions_of(tags), config.region},
            [*config.endpoint_names(), ZERO_ENDPOINT],  # each with its component's schedule, where it has one
        )
    except ClientError as exc:
        error = exc.response["Error"]
        if error["Code"] == "NoSuchEntity":
            return Text(f"IAM role {name}: {teardown.ALREADY_GONE}")
        return Text(
            f"IAM role {name}: kept, the deadlines that may still use it could not be checked "
            f"({error['Code']}: {error.get('Message')}); attach the current operator documents (notebook "
            "00) and run this cell again, or delete the role once no schedule uses it"
        )
    if left:
        return Text(
            f"IAM role {name}: kept, the deadlines still set run as it ({'; '.join(left)}); run this "
            "notebook in those regions (set the region in notebook 00) to delete their endpoints first"
        )
    policy = _gone(iam.delete_role_policy, "NoSuchEntity", RoleName=name, PolicyName=name)
    role = _gone(iam.delete_role, "NoSuchEntity", RoleName=name)
    return Text(f"IAM role {name}: {role} (its inline policy: {policy})")


@cleanup_step
@shows_requests
def delete_artifacts(workshop: Workshop, s3_uri: str, *, delete_bucket: bool = False) -> Text:
    """Delete the objects under the workshop's S3 prefix (model, build sources); the bucket only if asked."""
    c = workshop.clients
    bucket, prefix = parse_s3_uri(s3_uri)
    if not prefix:
        raise StepError(f"{s3_uri} names a whole bucket; pass the workshop's prefix (config.s3_uri())")
    keys = []
    try:
        for page in c.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix.rstrip("/") + "/"):
            keys += [o["Key"] for o in page.get("Contents", [])]
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "NoSuchBucket":
            raise
        return Text(f"bucket {bucket}: already gone")
    for i in range(0, len(keys), 1000):
        c.s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[i : i + 1000]]})
    lines = [f"s3://{bucket}/{prefix}/: {len(keys)} objects deleted"]
    if delete_bucket:
        left = c.s3.list_objects_v2(Bucket=bucket, MaxKeys=1).get("KeyCount", 0)
        if left:
            lines.append(f"bucket {bucket} kept: it holds objects outside the workshop's prefix")
        else:
            c.s3.delete_bucket(Bucket=bucket)
            lines.append(f"bucket {bucket}: {teardown.DELETED}")
    else:
        lines.append(f"bucket {bucket} kept (tick the box above to delete it too)")
    return Text("\n".join(lines))


def audit_permissions(workshop: Workshop) -> permissions.Audit | Text:
    """Local mode: every AWS call the rehearsal recorded, held against the policy of whoever made it.

    The operator's calls (these notebooks) against ``policies.operator_policy``, the image push and
    model upload the stand-ins made for CodeBuild against its service role's policy, and the model
    download a local endpoint made for SageMaker against the execution role's. A denied call means a
    participant with exactly these policies would be stopped there.
    """
    config = workshop.config
    if config.mode != "local":
        return Text(
            "the permission audit checks the calls the local rehearsal recorded (WORKSHOP_MODE=local); "
            "on AWS, IAM itself is the check"
        )

    log = permissions.CallLog(workshop.rehearsal.home / CALL_LOG)
    scope = policies.scope(config)
    documents = {
        permissions.OPERATOR: policies.operator_documents(scope),  # every operator-*.json together
        permissions.CODEBUILD: policies.codebuild_service_role_policy(scope),
        permissions.SAGEMAKER: policies.sagemaker_execution_role_policy(scope),
        spend_guard.PRINCIPAL: policies.scheduler_role_policy(scope),
    }
    calls = log.calls()
    # The roles the workshop creates carry its boundary (the SageMaker role is the participant's own).
    boundary = policies.role_boundary_policy(scope)
    bounded = {permissions.CODEBUILD: boundary, spend_guard.PRINCIPAL: boundary}
    # The emulator's scheduler never fires: each deadline set is held against its role as the call it makes.
    audit = permissions.audit(
        [*calls, *spend_guard.deadline_calls(calls)], documents, config.region, scope.account, capped_by=bounded
    )
    if not audit.ok:
        raise StepError(f"the generated policies deny calls the rehearsal made:\n{audit}")
    return audit


@cleanup_step
@shows_requests
def running_endpoints(workshop: Workshop) -> Text:
    """The endpoints still there that carry the workshop tag, under any name; should be none."""
    running = teardown.running_workshop_endpoints(workshop.clients.sm)
    return Text(
        teardown.format_running(running), problem=f"{len(running)} workshop endpoint(s) still there" if running else ""
    )


def stop_local(workshop: Workshop) -> Text:
    """Local mode: stop every local endpoint and the emulator, then show that nothing runs."""
    config = workshop.config
    if config.mode != "local":
        return Text("aws mode: no local processes were started")
    stopped = workshop.rehearsal.stop_all()
    workshop.forget_clients()
    left = [p.what for p in workshop.rehearsal.status() if p.running]
    return Text(
        f"stopped: {', '.join(stopped) or 'nothing was running'}\n{workshop.rehearsal.format_status()}",
        problem=f"still running: {', '.join(left)}" if left else "",
    )

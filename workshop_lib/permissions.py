"""Which IAM permission each AWS call needs, and a record of the calls each principal made.

In local rehearsal every boto3 client the notebooks use records its calls (``CallLog``), each
labelled with the principal that makes it on AWS: the operator (whoever runs the notebooks),
CodeBuild's service role (the image push a stand-in does in its place) and SageMaker's execution
role (the model a local endpoint reads from S3, as SageMaker would). ``needed`` turns a call into
what IAM checks (action, resource ARN, request context) and ``audit`` evaluates those against the
generated policies (policies.py): every denied call, and every statement no call used. The
emulator enforces no IAM itself; this is how the policies are held to what the flows really send.
"""

from __future__ import annotations

import datetime
import json
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from . import names, policies

OPERATOR, CODEBUILD, SAGEMAKER = "operator", "codebuild-service-role", "sagemaker-execution-role"


def _plain(value):
    """Request parameters as JSON: bytes and streams by their size, times as ISO text."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return f"<{type(value).__name__}>"


class CallLog:
    """Every call of the attached clients, one JSON line each: principal, service, operation, params."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.principal = OPERATOR

    def attach(self, client) -> None:
        # before-parameter-build sees the call's own parameters (Bucket, Key, ...), as IAM reads them.
        client.meta.events.register("before-parameter-build", self._record)

    @contextmanager
    def acting_as(self, principal: str | None):
        """Record the block's calls as ``principal``'s; ``None``: the emulator's own setup, not recorded."""
        before, self.principal = self.principal, principal
        try:
            yield
        finally:
            self.principal = before

    def _record(self, model, params, **_) -> None:
        if self.principal is None:
            return
        entry = {"principal": self.principal, "service": model.service_model.signing_name,
                 "operation": model.name, "params": _plain(params)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")

    def calls(self) -> list[dict]:
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


# -- what IAM checks for each call ---------------------------------------------------------------

Need = tuple[str, str, dict]  # (action, resource ARN, request context)


def _sagemaker_arn(region: str, account: str, kind: str, name: str) -> str:
    return f"arn:{policies.partition(region)}:sagemaker:{region}:{account}:{kind}/{name.lower()}"


def _pass_role(role_arn: str | None, service: str) -> list[Need]:
    return [("iam:PassRole", role_arn, {"iam:PassedToService": service})] if role_arn else []


def _s3(call: str, params: Mapping, region: str) -> list[Need]:
    bucket = params.get("Bucket", "")
    bucket_arn = policies.s3_bucket_arn(bucket, region)
    key = params.get("Key")
    if call in ("PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"):
        return [("s3:PutObject", policies.s3_object_arn(bucket, key, region), {})]
    if call == "AbortMultipartUpload":
        return [("s3:AbortMultipartUpload", policies.s3_object_arn(bucket, key, region), {})]
    if call in ("GetObject", "HeadObject"):
        return [("s3:GetObject", policies.s3_object_arn(bucket, key, region), {})]
    if call == "DeleteObject":
        return [("s3:DeleteObject", policies.s3_object_arn(bucket, key, region), {})]
    if call == "DeleteObjects":
        return [("s3:DeleteObject", policies.s3_object_arn(bucket, o["Key"], region), {})
                for o in params.get("Delete", {}).get("Objects", [])]
    if call in ("ListObjectsV2", "ListObjects", "HeadBucket"):
        return [("s3:ListBucket", bucket_arn, {"s3:prefix": params.get("Prefix", "")})]
    if call == "ListBuckets":
        return [("s3:ListAllMyBuckets", "*", {})]
    return [(f"s3:{call}", bucket_arn, {})]  # CreateBucket, PutBucketTagging, GetBucketLocation, DeleteBucket


def _codebuild(call: str, params: Mapping, region: str, account: str) -> list[Need]:
    def project(name: str) -> str:
        return policies.codebuild_project_arn(region, account, name)

    if call in ("CreateProject", "UpdateProject"):
        return [(f"codebuild:{call}", project(params["name"]), {}),
                *_pass_role(params.get("serviceRole"), "codebuild.amazonaws.com")]
    if call in ("StartBuild",):
        return [("codebuild:StartBuild", project(params["projectName"]), {})]
    if call == "BatchGetBuilds":  # a build id is "<project>:<uuid>"
        return [("codebuild:BatchGetBuilds", project(i.split(":")[0]), {}) for i in params.get("ids", [])]
    if call == "BatchGetProjects":
        return [("codebuild:BatchGetProjects", project(n), {}) for n in params.get("names", [])]
    return [(f"codebuild:{call}", project(params.get("name", "")), {})]  # DeleteProject


def _ecr(call: str, params: Mapping, region: str, account: str) -> list[Need]:
    registry = params.get("registryId") or account
    names = params.get("repositoryNames") or [params.get("repositoryName", "")]
    needs = [(f"ecr:{call}", policies.ecr_repository_arn(region, registry, n), {}) for n in names]
    if call == "CreateRepository" and params.get("tags"):
        needs.append(("ecr:TagResource", needs[0][1], {}))
    if call == "GetAuthorizationToken":
        return [("ecr:GetAuthorizationToken", "*", {})]
    return needs


_SAGEMAKER_KINDS = {"Model": "model", "EndpointConfig": "endpoint-config", "Endpoint": "endpoint"}


def _sagemaker(call: str, params: Mapping, region: str, account: str) -> list[Need]:
    if call == "ListEndpoints":
        return [("sagemaker:ListEndpoints", "*", {})]  # list actions take no resource
    if call in ("ListTags", "AddTags"):
        return [(f"sagemaker:{call}", params["ResourceArn"], {})]
    verb, kind = re.fullmatch(r"(Create|Describe|Delete|Update|Invoke)(\w+)", call).groups()
    if call == "InvokeEndpoint":
        verb, kind = "Invoke", "Endpoint"
    name = params.get(f"{kind}Name", "")
    arn = _sagemaker_arn(region, account, _SAGEMAKER_KINDS.get(kind, kind.lower()), name)
    needs = [(f"sagemaker:{call}", arn, {})]
    if verb == "Create" and params.get("Tags"):
        needs.append(("sagemaker:AddTags", arn, {}))
    if call == "CreateModel":
        needs += _pass_role(params.get("ExecutionRoleArn"), "sagemaker.amazonaws.com")
    return needs


def _logs(call: str, params: Mapping, region: str, account: str) -> list[Need]:
    return [(f"logs:{call}", policies.log_group_arn(region, account, params.get("logGroupName", "")), {})]


def needed(call: Mapping, region: str, account: str) -> list[Need]:
    """What IAM checks for one recorded call; [] for calls IAM always allows (sts:GetCallerIdentity)."""
    service, operation, params = call["service"], call["operation"], call.get("params") or {}
    if service == "sts" and operation == "GetCallerIdentity":
        return []
    if service == "s3":
        return _s3(operation, params, region)
    if service == "codebuild":
        return _codebuild(operation, params, region, account)
    if service == "ecr":
        return _ecr(operation, params, region, account)
    if service == "sagemaker":
        return _sagemaker(operation, params, region, account)
    if service == "logs":
        return _logs(operation, params, region, account)
    if service == "servicequotas":
        return [(f"servicequotas:{operation}", f"arn:{policies.partition(region)}:servicequotas:{region}:"
                 f"{account}:{params.get('ServiceCode', '')}/{params.get('QuotaCode', '')}", {})]
    if service == "iam":
        return [(f"iam:{operation}", f"arn:{policies.partition(region)}:iam::{account}:role/"
                 f"{params.get('RoleName', '')}", {})]
    raise ValueError(f"no IAM mapping for {service}:{operation}; add it to permissions.needed")


# -- checking the record against the policies ------------------------------------------------------


@dataclass(repr=False)
class Audit:
    """Denied calls per principal (each fails the check) and statements no recorded call used."""

    checked: dict[str, int] = field(default_factory=dict)  # principal -> permissions checked
    denied: list[tuple[str, str, str, str]] = field(default_factory=list)  # principal, action, resource, why
    unused: list[tuple[str, str]] = field(default_factory=list)  # principal, statement Sid

    @property
    def ok(self) -> bool:
        return not self.denied

    def __repr__(self) -> str:  # what a notebook shows
        return str(self)

    def __str__(self) -> str:
        lines = [f"{p}: {n} permissions checked against its policy" for p, n in self.checked.items()]
        lines += [f"DENIED {p}: {a} on {r} ({why})" for p, a, r, why in self.denied]
        lines += [f"unused statement in the {p} policy: {sid}" for p, sid in self.unused]
        return "\n".join(lines)


def audit(calls: Iterable[Mapping], documents: Mapping[str, Mapping], region: str, account: str) -> Audit:
    """Evaluate every recorded call of each principal against that principal's policy document."""
    result, used = Audit(), {p: set() for p in documents}
    for call in calls:
        principal = call["principal"]
        for action, resource, context in needed(call, region, account):
            result.checked[principal] = result.checked.get(principal, 0) + 1
            verdict = policies.evaluate(documents[principal], action, resource, context)
            if verdict.allowed:
                used[principal].update(verdict.matched)
            else:
                result.denied.append((principal, action, resource, verdict.reason))
    for principal, document in documents.items():
        for i, statement in enumerate(document["Statement"]):
            sid = statement.get("Sid") or f"Statement[{i}]"
            if sid not in used[principal]:
                result.unused.append((principal, sid))
    return result


def cli_needed(argv: list[str], region: str, account: str) -> list[Need]:
    """What IAM checks for a command a buildspec runs with the CodeBuild role (``aws`` and ``docker``)."""
    from .images import parse_image_uri

    def option(name: str) -> str | None:
        return argv[argv.index(name) + 1] if name in argv else None

    plain = [a for a in argv if not a.startswith("--only-show-errors")]
    if plain[:3] == ["aws", "s3", "cp"]:
        bucket, key = names.split_s3_uri(plain[4])
        return [("s3:PutObject", policies.s3_object_arn(bucket, key, region), {})]
    if plain[:3] == ["aws", "ecr", "get-login-password"]:
        return [("ecr:GetAuthorizationToken", "*", {})]
    if plain[:3] == ["aws", "ecr", "describe-images"]:
        return [("ecr:DescribeImages", policies.ecr_repository_arn(region, option("--registry-id") or account,
                                                                   option("--repository-name")), {})]
    if plain[:2] == ["docker", "build"]:  # pulls FROM the base image
        base = next(a.split("=", 1)[1] for i, a in enumerate(plain) if plain[i - 1] == "--build-arg"
                    and a.startswith("BASE_IMAGE="))
        ref = parse_image_uri(base)
        return [(a, policies.ecr_repository_arn(region, ref.account, ref.repository), {}) for a in policies.ECR_PULL]
    if plain[:2] == ["docker", "push"]:
        ref = parse_image_uri(plain[2])
        arn = policies.ecr_repository_arn(region, ref.account, ref.repository)
        return [(a, arn, {}) for a in ("ecr:BatchCheckLayerAvailability", *policies.ECR_PUSH)]
    if plain[:2] == ["docker", "login"]:
        return []  # the token from get-login-password is the permission
    raise ValueError(f"no IAM mapping for the build command {' '.join(argv[:3])}; add it to permissions.cli_needed")

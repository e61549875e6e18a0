"""IAM's policy language, offline: the grammar IAM checks a document against, and a small evaluator.

``policy_problems`` / ``check_policy_document`` say what IAM would reject in a document (keys,
actions, ARNs, condition operators, the 6,144-character quota of a managed policy).
``evaluate`` / ``allows`` answer "would these documents allow this action on this resource?" the way
IAM's identity-policy logic does: Allow and Deny statements, ``Action``/``NotAction``,
``Resource``/``NotResource``, ``*`` and ``?`` wildcards, the string/ARN condition operators the
workshop's policies use, and a permissions boundary capping what the identity policies grant. ``policies`` builds the documents; ``permissions`` audits calls with this.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidInput

VERSION = "2012-10-17"
# IAM's quota for a customer managed policy, counted without whitespace.
MANAGED_POLICY_MAX_CHARS = 6144


def minified(document: Mapping[str, Any]) -> str:
    return json.dumps(document, separators=(",", ":"))


# ---- checking documents against IAM's grammar -----------------------------------------------

_STATEMENT_KEYS = {
    "Sid",
    "Effect",
    "Principal",
    "NotPrincipal",
    "Action",
    "NotAction",
    "Resource",
    "NotResource",
    "Condition",
}
_ACTION = re.compile(r"[a-z0-9-]+:[A-Za-z0-9*?]+")
_SID = re.compile(r"[A-Za-z0-9]*")
_ARN = re.compile(r"arn:(aws|aws-cn|aws-us-gov):([a-z0-9-]+):([a-z0-9*-]*):(\d{12}|\*?):(.+)")
_CONDITION_OPERATOR = re.compile(
    r"(ForAnyValue:|ForAllValues:)?(String|Arn|Numeric|Date|Bool|IpAddress|NotIpAddress|Null|Binary)[A-Za-z]*"
)


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def policy_problems(document: Any, *, trust: bool = False) -> list[str]:
    """What IAM's policy grammar (and the 6,144-character quota) would reject in ``document``."""
    problems: list[str] = []
    if not isinstance(document, dict):
        return ["the document must be a JSON object"]
    unknown = set(document) - {"Version", "Id", "Statement"}
    if unknown:
        problems.append(f"unknown top-level keys {sorted(unknown)}")
    if document.get("Version") != VERSION:
        problems.append(f"Version must be {VERSION!r}, got {document.get('Version')!r}")
    statements = document.get("Statement")
    if not isinstance(statements, list) or not statements:
        return problems + ["Statement must be a non-empty list"]
    sids = [s.get("Sid") for s in statements if isinstance(s, dict) and s.get("Sid")]
    if len(set(sids)) != len(sids):
        problems.append(f"Sids must be unique, got {sids}")
    for i, statement in enumerate(statements):
        where = f"Statement[{i}]"
        if not isinstance(statement, dict):
            problems.append(f"{where} must be an object")
            continue
        extra = set(statement) - _STATEMENT_KEYS
        if extra:
            problems.append(f"{where} has unknown keys {sorted(extra)}")
        if statement.get("Effect") not in ("Allow", "Deny"):
            problems.append(f"{where}.Effect must be Allow or Deny")
        if not isinstance(statement.get("Sid", ""), str) or not _SID.fullmatch(statement.get("Sid", "")):
            problems.append(f"{where}.Sid must be letters and digits only")
        if ("Action" in statement) == ("NotAction" in statement):
            problems.append(f"{where} needs exactly one of Action and NotAction")
        for action in _listed(statement.get("Action", statement.get("NotAction", []))):
            if not isinstance(action, str) or not (_ACTION.fullmatch(action) or action == "*"):
                problems.append(f"{where}: {action!r} is not an action like 'service:Operation'")
        has_principal = "Principal" in statement or "NotPrincipal" in statement
        has_resource = "Resource" in statement or "NotResource" in statement
        if trust:
            if not has_principal:
                problems.append(f"{where}: a trust policy statement needs a Principal")
            if has_resource:
                problems.append(f"{where}: a trust policy statement takes no Resource")
        else:
            if has_principal:
                problems.append(f"{where}: an identity policy takes no Principal")
            if ("Resource" in statement) == ("NotResource" in statement):
                problems.append(f"{where} needs exactly one of Resource and NotResource")
            for resource in _listed(statement.get("Resource", statement.get("NotResource", []))):
                if not isinstance(resource, str) or not (resource == "*" or _ARN.fullmatch(resource)):
                    problems.append(f"{where}: resource {resource!r} is not an ARN or '*'")
        condition = statement.get("Condition")
        if condition is not None:
            if not isinstance(condition, dict):
                problems.append(f"{where}.Condition must be an object")
            else:
                for operator, pairs in condition.items():
                    if not _CONDITION_OPERATOR.fullmatch(operator) or not isinstance(pairs, dict) or not pairs:
                        problems.append(f"{where}.Condition: {operator!r} is not an operator with key/values")
                        continue
                    for key, values in pairs.items():
                        if not all(isinstance(v, (str, bool, int)) for v in _listed(values)):
                            problems.append(f"{where}.Condition.{operator}.{key}: values must be strings")
    if not trust and len(minified(document)) > MANAGED_POLICY_MAX_CHARS:
        problems.append(
            f"the document has {len(minified(document))} characters; IAM allows "
            f"{MANAGED_POLICY_MAX_CHARS} for a managed policy"
        )
    return problems


def check_policy_document(document: Any, *, trust: bool = False) -> dict[str, Any]:
    found = policy_problems(document, trust=trust)
    if found:
        raise InvalidInput("the policy document is not valid IAM: " + "; ".join(found))
    valid: dict[str, Any] = document
    return valid


def wildcard_grants(document: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(statement Sid, action) for every action granted on ``"Resource": "*"``."""
    found = []
    for statement in document["Statement"]:
        if statement.get("Effect") == "Allow" and "*" in _listed(statement.get("Resource", [])):
            found += [(statement.get("Sid", ""), a) for a in _listed(statement.get("Action", ["*"]))]
    return found


# ---- a small evaluator ---------------------------------------------------------------------------


def _glob(pattern: str, value: str, *, ignore_case: bool) -> bool:
    """IAM wildcard matching: ``*`` any run of characters (also ``:`` and ``/``), ``?`` one character."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.DOTALL | (re.IGNORECASE if ignore_case else 0)) is not None


def _substituted(value: str, lowered: Mapping[str, object]) -> str | None:
    """A condition value with its policy variables (``${aws:PrincipalAccount}``) taken from the request
    context; None where the context lacks one, so that value matches nothing (as IAM reads it)."""
    missing = False

    def fill(match: re.Match[str]) -> str:
        nonlocal missing
        found = lowered.get(match.group(1).lower())
        missing = missing or found is None
        return str(found)

    filled = re.sub(r"\$\{([^}]+)\}", fill, value)
    return None if missing else filled


def conditions_hold(condition: Mapping[str, Any], context: Mapping[str, object]) -> bool:
    """A statement's Condition against a request context, as IAM reads it.

    Every operator and key must hold (AND); any of a key's values may match (OR). A key
    missing from the context fails a positive operator and passes a negated or
    ``...IfExists`` one. Condition keys are case-insensitive, values are not.
    """
    lowered = {k.lower(): v for k, v in context.items()}
    for operator, pairs in condition.items():
        base = operator.split(":")[-1]
        if_exists = base.endswith("IfExists")
        base = base.removesuffix("IfExists")
        negated = "Not" in base
        for key, wanted in pairs.items():
            present = key.lower() in lowered
            if base == "Null":  # "true": the key must be absent; "false": present
                if present == (str(_listed(wanted)[0]).lower() == "true"):
                    return False
                continue
            if not present:
                if if_exists or negated:
                    continue
                return False
            values = [str(v) for v in _listed(lowered[key.lower()])]
            wanted = [w for w in (_substituted(str(w), lowered) for w in _listed(wanted)) if w is not None]
            if base in ("StringEquals", "StringNotEquals", "ArnEquals", "ArnNotEquals"):
                hit = any(v == w for v in values for w in wanted)
            elif base in ("StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase", "Bool"):
                hit = any(v.lower() == w.lower() for v in values for w in wanted)
            elif base in ("StringLike", "StringNotLike", "ArnLike", "ArnNotLike"):
                hit = any(_glob(w, v, ignore_case=False) for v in values for w in wanted)
            else:
                raise InvalidInput(f"the evaluator does not know the condition operator {operator!r}")
            if hit == negated:
                return False
    return True


def _statement_applies(statement: Mapping[str, Any], action: str, resource: str, context: Mapping[str, Any]) -> bool:
    if "Action" in statement:
        if not any(_glob(p, action, ignore_case=True) for p in _listed(statement["Action"])):
            return False
    elif any(_glob(p, action, ignore_case=True) for p in _listed(statement.get("NotAction", []))):
        return False
    if "Resource" in statement:
        if not any(_glob(p, resource, ignore_case=False) for p in _listed(statement["Resource"])):
            return False
    elif any(_glob(p, resource, ignore_case=False) for p in _listed(statement.get("NotResource", []))):
        return False
    return conditions_hold(statement.get("Condition") or {}, context)


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str  # "allowed by <Sid>", "denied by <Sid>" or "no statement allows it"
    matched: tuple[str, ...] = field(default=())


def evaluate(
    documents: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    action: str,
    resource: str,
    context: Mapping[str, object] | None = None,
    *,
    boundary: Mapping[str, Any] | None = None,
) -> Verdict:
    """IAM's identity-policy logic: an explicit Deny wins, else any Allow, else an implicit deny.

    With ``boundary`` (the principal's permissions boundary) a call is allowed only if the boundary
    allows it too: the boundary grants nothing, it caps what the identity policies grant.
    """
    verdict = _identity_verdict(documents, action, resource, context)
    if boundary is None or not verdict.allowed:
        return verdict
    capped = _identity_verdict(boundary, action, resource, context)
    if not capped.allowed:
        return Verdict(False, f"outside the permissions boundary ({capped.reason})", capped.matched)
    return verdict


def _identity_verdict(
    documents: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    action: str,
    resource: str,
    context: Mapping[str, object] | None,
) -> Verdict:
    docs = [documents] if isinstance(documents, Mapping) else list(documents)
    context = context or {}
    allowed_by: list[str] = []
    denied_by: list[str] = []
    for doc in docs:
        for i, statement in enumerate(doc["Statement"]):
            if _statement_applies(statement, action, resource, context):
                sid = statement.get("Sid") or f"Statement[{i}]"
                (allowed_by if statement["Effect"] == "Allow" else denied_by).append(sid)
    if denied_by:
        return Verdict(False, f"denied by {', '.join(denied_by)}", tuple(denied_by))
    if allowed_by:
        return Verdict(True, f"allowed by {', '.join(allowed_by)}", tuple(allowed_by))
    return Verdict(False, "no statement allows it")


def allows(
    documents: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    action: str,
    resource: str,
    context: Mapping[str, object] | None = None,
    *,
    boundary: Mapping[str, Any] | None = None,
) -> bool:
    return evaluate(documents, action, resource, context, boundary=boundary).allowed


__all__ = [
    "MANAGED_POLICY_MAX_CHARS",
    "VERSION",
    "Verdict",
    "allows",
    "check_policy_document",
    "conditions_hold",
    "evaluate",
    "minified",
    "policy_problems",
    "wildcard_grants",
]

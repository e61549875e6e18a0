"""Notebook 00's quota check: the SageMaker instance quotas the deploy path's endpoints need (read from
Service Quotas, AWS's defaults where the account has none applied), and what they mean for notebook
07's blue/green update and Batch Transform job.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ..aws import regions, transform
from ..aws.deploy_spec import DeploySpec
from ..config import WorkshopConfig
from ..deploy_paths import STANDARD, deploy_path
from .context import Checks, Workshop


def instance_types_for(config: WorkshopConfig) -> list[str]:
    """The types whose quotas decide the deploy path's endpoints, as their plans choose them: the standard
    endpoint's first (notebook 02 deploys it on every path), then the deploy path's decision endpoint's (where
    instance pools are not offered the GPU endpoint runs on one fixed type, so only that one counts)."""
    path = deploy_path(config.deploy_path)
    types = DeploySpec(STANDARD.name).instance_types(config.region or "")
    return types + (DeploySpec(path.name).instance_types(config.region or "") if path.decision else [])


def _transform_types_for(config: WorkshopConfig) -> list[str]:
    """The types notebook 07's Batch Transform job may run on: the decision endpoint's (steps.run_transform)."""
    return list(dict.fromkeys(transform.transform_type(t) for t in instance_types_for(config)[1:]))


ENDPOINT_USAGE, TRANSFORM_USAGE = "endpoint usage", "transform job usage"
QUOTAS_AGAIN = (
    "read again below, once the operator documents are attached (steps.check_quotas; Service Quotas "
    "needs servicequotas:ListServiceQuotas and servicequotas:ListAWSDefaultServiceQuotas)"
)


def quota_name(instance_type: str, usage: str = ENDPOINT_USAGE) -> str:
    """Service Quotas' name of SageMaker's quota of ``instance_type`` for ``usage``."""
    return f"{instance_type} for {usage}"


def quota_verdict(
    config: WorkshopConfig,
    found: Mapping[str, float],
    transform_found: Mapping[str, float] | None = None,
    defaults: Collection[str] = (),
) -> tuple[bool, str]:
    """What the quotas ``found`` (type -> instances "for endpoint usage") mean for the deploy path: whether
    its endpoints can start, and whether notebook 07's blue/green update can (it starts a second fleet
    of the decision endpoint while the first still serves, so it needs twice the instance count) and its Batch
    Transform job (``transform_found``: type -> instances "for transform job usage"; None: not read).
    ``defaults``: the quota names whose value is AWS's default, the account having none applied. A type in
    neither map is unknown: Service Quotas lists no such quota in the region."""
    path = deploy_path(config.deploy_path)
    wanted = instance_types_for(config)

    def shown(values: Mapping[str, float], types: Sequence[str], usage: str) -> str:
        return ", ".join(
            f"{t}: {values[t]:g}" + (" (AWS default)" if quota_name(t, usage) in defaults else "")
            if t in values
            else f"{t}: unknown"
            for t in types
        )

    detail = shown(found, wanted, ENDPOINT_USAGE)
    standard_ok = found.get(wanted[0], 0) >= 1
    pooled = path.gpu and regions.offers_instance_pools(config.region)
    decision = list(wanted[1:])
    update_room: float  # instances of room for the update's second fleet
    if not decision:
        update_room = 2  # 07 updates a decision endpoint only
    elif pooled:  # the new fleet may start on any pool type with room
        update_room = sum(found.get(t, 0) for t in decision)
    else:  # a fixed type needs 2 of its own
        update_room = found.get(decision[0], 0)
    startable = not decision or any(found.get(t, 0) >= 1 for t in decision)
    if not (standard_ok and startable):
        missing = [t for t in wanted[:1] if not standard_ok] + ([] if startable else decision)
        zero = [t for t in missing if t in found]
        unknown = [t for t in missing if t not in found]
        reasons = []
        if zero:
            reasons.append(
                f"{', '.join(zero)} has no quota: request an increase in Service Quotas (Amazon SageMaker, "
                f"'<type> for endpoint usage') before deploying"
            )
        if unknown:
            reasons.append(
                f"Service Quotas lists no '{quota_name(unknown[0])}'"
                + (f" (nor for {', '.join(unknown[1:])})" if unknown[1:] else "")
                + f" in {config.region}, applied or default: SageMaker may not offer it there"
            )
        return False, detail + " - " + "; ".join(reasons)
    if pooled and any(found.get(t, 0) < 1 for t in decision):
        detail += " (pools with quota 0 are skipped at placement)"
    if path.gpu and not pooled:
        detail += f" (instance pools are not offered in {config.region}: the GPU endpoint runs on {decision[0]} alone)"
    if update_room < 2:
        detail += (
            f"; note: notebook 07's blue/green update starts a second {' or '.join(decision)} instance "
            "while the first still serves, so it needs a quota of 2: request it before 07, or skip 07's update"
        )
    transform_types = _transform_types_for(config)
    if transform_found is not None and transform_types:
        detail += f"; {TRANSFORM_USAGE}: {shown(transform_found, transform_types, TRANSFORM_USAGE)}"
        short = [t for t in transform_types if transform_found.get(t, 0) < 1]
        if short:
            detail += (
                f"; note: notebook 07's Batch Transform job runs on the endpoint's type, whose quota "
                f"'<type> for {TRANSFORM_USAGE}' is apart from the endpoint's: {', '.join(short)} has none, "
                "so request it before 07, or skip 07's transform"
            )
    if defaults:
        detail += (
            "; (AWS default): no value applied to this account, so Service Quotas' default is what holds "
            "(ListAWSDefaultServiceQuotas)"
        )
    return True, detail


def _quota_values(quotas: Any, operation: str, names: Collection[str]) -> dict[str, float]:
    """Quota name -> value for the ``names`` SageMaker's quotas list under ``operation`` (a paginated listing)."""
    values: dict[str, float] = {}
    for page in quotas.get_paginator(operation).paginate(ServiceCode="sagemaker"):
        values.update((q["QuotaName"], q["Value"]) for q in page["Quotas"] if q["QuotaName"] in names)
    return values


def endpoint_quotas(workshop: Workshop) -> tuple[bool | None, str]:
    """Notebook 00's quota row. A quota whose value was never applied to the account is absent from
    ListServiceQuotas (Service Quotas' documentation); AWS's default holds for it, read from
    ListAWSDefaultServiceQuotas, and the row says which values are defaults."""
    config = workshop.config
    wanted, transform_types = instance_types_for(config), _transform_types_for(config)
    names = ({quota_name(t): t for t in wanted}, {quota_name(t, TRANSFORM_USAGE): t for t in transform_types})
    try:
        quotas = workshop.clients.get("service-quotas")
        values = _quota_values(quotas, "list_service_quotas", [*names[0], *names[1]])
        unset = [name for name in (*names[0], *names[1]) if name not in values]
        defaults = _quota_values(quotas, "list_aws_default_service_quotas", unset) if unset else {}
    except Exception as exc:
        return None, (
            f"could not read Service Quotas ({type(exc).__name__}); {QUOTAS_AGAIN}, or check "
            f"'Amazon SageMaker' quotas for {', '.join(wanted)} 'for endpoint usage' in the console"
        )
    values.update(defaults)
    endpoint, transform_job = ({t: values[name] for name, t in usage.items() if name in values} for usage in names)
    return quota_verdict(config, endpoint, transform_job, defaults)


def check_quotas(workshop: Workshop, checks: Checks | None = None) -> Checks:
    """The quota row read again (after an administrator attached the operator documents, which grant the
    read): ``checks`` with its quotas row replaced, or a Checks of that row alone."""
    config = workshop.config
    row: tuple[str, bool | None, str]
    if config.mode == "local":
        row = ("quotas", None, "local mode: no instance quotas to read; on AWS endpoint quotas are often 0")
    else:
        row = ("quotas", *endpoint_quotas(workshop))
    if checks is None:
        return Checks([row])
    return Checks([row if name == "quotas" else (name, passed, detail) for name, passed, detail in checks.rows])

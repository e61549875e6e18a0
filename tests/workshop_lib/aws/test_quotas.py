"""Notebook 00's quota row says what will happen: which types' quotas decide each deploy path in a region
with or without instance pools, and whether notebook 07's blue/green update (a second fleet while the
first serves) has room. The read itself goes through a Stubber'd Service Quotas client."""

from __future__ import annotations

import importlib

import pytest

from workshop_lib import steps
from workshop_lib.aws import endpoints
from workshop_lib.config import WorkshopConfig

quota_check = importlib.import_module("workshop_lib.steps.quotas")

STANDARD, CPU = endpoints.STANDARD_CPU_INSTANCE, endpoints.DECISION_CPU_INSTANCE
POOLS, FIXED = endpoints.DEFAULT_GPU_POOLS, endpoints.FIXED_GPU_INSTANCE


def _config(path, region="us-east-1"):
    return WorkshopConfig(mode="aws", region=region, bucket="b", deploy_path=path)


def test_without_pools_only_the_fixed_type_counts():
    # af-south-1 offers no instance pools: the GPU endpoint runs on one fixed type alone
    config = _config("decision-gpu", "af-south-1")
    passed, detail = quota_check.quota_verdict(config, {STANDARD: 1, FIXED: 0, POOLS[0]: 4, POOLS[1]: 4})
    assert passed is False and f"{FIXED} has no quota" in detail
    passed, detail = quota_check.quota_verdict(config, {STANDARD: 1, FIXED: 2})
    assert passed is True and "not offered in af-south-1" in detail and POOLS[1] not in detail
    # where pools are offered, any pool type with room lets the endpoint start
    passed, detail = quota_check.quota_verdict(_config("decision-gpu"), {STANDARD: 1, POOLS[0]: 0, POOLS[1]: 1})
    assert passed is True and "skipped at placement" in detail


@pytest.mark.parametrize(
    "path, found, note",
    [
        ("decision-cpu", {STANDARD: 1, CPU: 1}, True),
        ("decision-cpu", {STANDARD: 1, CPU: 2}, False),
        ("decision-gpu", {STANDARD: 1, POOLS[0]: 1}, True),
        ("decision-gpu", {STANDARD: 1, POOLS[0]: 1, POOLS[2]: 1}, False),  # the new fleet may start on another pool
        ("standard", {STANDARD: 1}, False),  # 07 updates a decision endpoint only
    ],
)
def test_a_blue_green_update_needs_twice_the_instance_count(path, found, note):
    passed, detail = quota_check.quota_verdict(_config(path), found)
    assert passed is True
    assert ("notebook 07's blue/green update" in detail) is note


def test_the_fixed_gpu_type_needs_two_for_the_update_where_pools_are_not_offered():
    passed, detail = quota_check.quota_verdict(
        _config("decision-gpu", "af-south-1"), {STANDARD: 1, FIXED: 1, POOLS[1]: 5}
    )
    assert passed is True and "needs a quota of 2" in detail


def test_an_unreadable_quota_says_it_is_read_again_and_check_quotas_replaces_the_row(tmp_path, monkeypatch):
    import boto3
    from botocore.stub import Stubber

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    workshop = steps.Workshop(_config("decision-cpu"), tmp_path / "config.json")
    client = boto3.client("service-quotas", region_name="us-east-1")
    monkeypatch.setattr(workshop.clients, "get", lambda service: client)
    with Stubber(client) as stub:
        stub.add_client_error("list_service_quotas", "AccessDeniedException", "not authorized")
        passed, detail = quota_check.endpoint_quotas(workshop)
        assert passed is None and "read again below, once the operator documents are attached" in detail
        quotas = [{"QuotaName": f"{t} for endpoint usage", "Value": v} for t, v in ((STANDARD, 1.0), (CPU, 2.0))]
        stub.add_response("list_service_quotas", {"Quotas": quotas}, {"ServiceCode": "sagemaker"})
        stub.add_response("list_aws_default_service_quotas", {"Quotas": []}, {"ServiceCode": "sagemaker"})
        before = steps.Checks([("python", True, "3.11"), ("quotas", None, detail)])
        after = quota_check.check_quotas(workshop, before)
    assert after.rows[0] == before.rows[0]
    assert after.rows[1][0] == "quotas" and after.rows[1][1] is True and f"{CPU}: 2" in after.rows[1][2]


def _quota(name, value):
    return {"QuotaName": name, "Value": value}


def _read(tmp_path, monkeypatch, path, applied, defaults):
    """``endpoint_quotas`` against a Stubber'd Service Quotas client answering ``applied`` (ListServiceQuotas)
    and, when given, ``defaults`` (ListAWSDefaultServiceQuotas)."""
    import boto3
    from botocore.stub import Stubber

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    workshop = steps.Workshop(_config(path), tmp_path / "config.json")
    client = boto3.client("service-quotas", region_name="us-east-1")
    monkeypatch.setattr(workshop.clients, "get", lambda service: client)
    with Stubber(client) as stub:
        stub.add_response("list_service_quotas", {"Quotas": applied}, {"ServiceCode": "sagemaker"})
        if defaults is not None:
            stub.add_response("list_aws_default_service_quotas", {"Quotas": defaults}, {"ServiceCode": "sagemaker"})
        found = quota_check.endpoint_quotas(workshop)
        stub.assert_no_pending_responses()
    return found


def test_a_quota_never_applied_to_the_account_is_read_as_aws_default_not_as_zero(tmp_path, monkeypatch):
    # Service Quotas: a quota with no applied value is absent from ListServiceQuotas; its default holds
    applied = [_quota(f"{STANDARD} for endpoint usage", 1.0)]
    defaults = [
        _quota(f"{STANDARD} for endpoint usage", 0.0),
        _quota(f"{CPU} for endpoint usage", 2.0),
        _quota(f"{CPU} for transform job usage", 1.0),
        _quota("ml.p5.48xlarge for endpoint usage", 0.0),
    ]
    passed, detail = _read(tmp_path, monkeypatch, "decision-cpu", applied, defaults)
    assert passed is True and "has no quota" not in detail
    assert f"{STANDARD}: 1, {CPU}: 2 (AWS default)" in detail  # the applied value wins over the default
    assert f"transform job usage: {CPU}: 1 (AWS default)" in detail and "ListAWSDefaultServiceQuotas" in detail
    assert "Batch Transform" not in detail  # the transform job has its instance


def test_applied_quotas_are_not_called_defaults_and_the_defaults_are_not_read_when_none_is_missing(
    tmp_path, monkeypatch
):
    applied = [
        _quota(f"{STANDARD} for endpoint usage", 1.0),
        _quota(f"{CPU} for endpoint usage", 2.0),
        _quota(f"{CPU} for transform job usage", 1.0),
    ]
    passed, detail = _read(tmp_path, monkeypatch, "decision-cpu", applied, None)
    assert passed is True and "AWS default" not in detail and f"transform job usage: {CPU}: 1" in detail


def test_a_transform_quota_of_zero_is_a_note_for_notebook_07():
    passed, detail = quota_check.quota_verdict(_config("decision-cpu"), {STANDARD: 1, CPU: 2}, {CPU: 0})
    assert passed is True
    assert f"transform job usage: {CPU}: 0" in detail and "Batch Transform job runs on the endpoint's type" in detail
    assert f"{CPU} has none" in detail
    # pools: the job runs on whichever pool type the endpoint was placed on, each counted for transform
    passed, detail = quota_check.quota_verdict(
        _config("decision-gpu"), {STANDARD: 1, POOLS[0]: 1}, {POOLS[0]: 1, POOLS[1]: 1, POOLS[2]: 1}
    )
    assert passed is True and f"{POOLS[3]}: unknown" in detail and f"{POOLS[3]} has none" in detail
    # the standard path runs no transform
    passed, detail = quota_check.quota_verdict(_config("standard"), {STANDARD: 1}, {})
    assert "transform" not in detail


def test_a_quota_listed_neither_applied_nor_default_is_unknown_not_zero():
    passed, detail = quota_check.quota_verdict(_config("decision-cpu"), {STANDARD: 1}, {})
    assert passed is False and f"{CPU}: unknown" in detail
    assert f"lists no '{CPU} for endpoint usage'" in detail and "request an increase" not in detail


def test_the_operator_may_read_the_default_quotas():
    from workshop_lib.aws import iam, operator_policies
    from workshop_lib.local import iam_needs

    config = _config("decision-cpu").replace(bucket="decision-workshop-b")
    document = operator_policies.operator_policy(config, "123456789012")
    assert iam.allows(document, "servicequotas:ListAWSDefaultServiceQuotas", "*")
    call = {
        "service": "servicequotas",
        "operation": "ListAWSDefaultServiceQuotas",
        "params": {"ServiceCode": "sagemaker"},
    }
    needs = iam_needs.needed(call, "us-east-1", "123456789012")
    assert needs == [("servicequotas:ListAWSDefaultServiceQuotas", "*", {})]

"""Notebook 00's quota row says what will happen: which types' quotas decide each deploy path in a region
with or without instance pools, and whether notebook 07's blue/green update (a second fleet while the
first serves) has room. The read itself goes through a Stubber'd Service Quotas client."""

from __future__ import annotations

import importlib

import pytest
from workshop_lib.aws import endpoints
from workshop_lib.config import WorkshopConfig

setup = importlib.import_module("workshop_lib.steps.setup")  # the module (steps.setup is the step)

STANDARD, CPU = endpoints.STANDARD_CPU_INSTANCE, endpoints.DECISION_CPU_INSTANCE
POOLS = endpoints.DEFAULT_GPU_POOLS


def _config(path, region="us-east-1"):
    return WorkshopConfig(mode="aws", region=region, bucket="b", deploy_path=path)


def test_without_pools_only_the_fixed_type_counts():
    # af-south-1 offers no instance pools: the GPU endpoint runs on the first pool's type alone
    config = _config("decision-gpu", "af-south-1")
    passed, detail = setup.quota_verdict(config, {STANDARD: 1, POOLS[0]: 0, POOLS[1]: 4, POOLS[2]: 4})
    assert passed is False and f"{POOLS[0]} has no quota" in detail
    passed, detail = setup.quota_verdict(config, {STANDARD: 1, POOLS[0]: 2})
    assert passed is True and "not offered in af-south-1" in detail and POOLS[1] not in detail
    # where pools are offered, any pool type with room lets the endpoint start
    passed, detail = setup.quota_verdict(_config("decision-gpu"), {STANDARD: 1, POOLS[0]: 0, POOLS[1]: 1})
    assert passed is True and "skipped at placement" in detail


@pytest.mark.parametrize("path, found, note", [
    ("decision-cpu", {STANDARD: 1, CPU: 1}, True),
    ("decision-cpu", {STANDARD: 1, CPU: 2}, False),
    ("decision-gpu", {STANDARD: 1, POOLS[0]: 1}, True),
    ("decision-gpu", {STANDARD: 1, POOLS[0]: 1, POOLS[2]: 1}, False),  # the new fleet may start on another pool
    ("standard", {STANDARD: 1}, False),  # 07 updates a decision endpoint only
])
def test_a_blue_green_update_needs_twice_the_instance_count(path, found, note):
    passed, detail = setup.quota_verdict(_config(path), found)
    assert passed is True
    assert ("notebook 07's blue/green update" in detail) is note


def test_the_fixed_gpu_type_needs_two_for_the_update_where_pools_are_not_offered():
    passed, detail = setup.quota_verdict(_config("decision-gpu", "af-south-1"), {STANDARD: 1, POOLS[0]: 1, POOLS[1]: 5})
    assert passed is True and "needs a quota of 2" in detail


def test_an_unreadable_quota_says_it_is_read_again_and_check_quotas_replaces_the_row(tmp_path, monkeypatch):
    import boto3
    from botocore.stub import Stubber

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    workshop = setup.Workshop(_config("decision-cpu"), tmp_path / "config.json")
    client = boto3.client("service-quotas", region_name="us-east-1")
    monkeypatch.setattr(workshop.clients, "get", lambda service: client)
    with Stubber(client) as stub:
        stub.add_client_error("list_service_quotas", "AccessDeniedException", "not authorized")
        passed, detail = setup._endpoint_quotas(workshop)
        assert passed is None and "read again below, once the operator documents are attached" in detail
        quotas = [{"QuotaName": f"{t} for endpoint usage", "Value": v} for t, v in ((STANDARD, 1.0), (CPU, 2.0))]
        stub.add_response("list_service_quotas", {"Quotas": quotas}, {"ServiceCode": "sagemaker"})
        before = setup.Checks([("python", True, "3.11"), ("quotas", None, detail)])
        after = setup.check_quotas(workshop, before)
    assert after.rows[0] == before.rows[0]
    assert after.rows[1][0] == "quotas" and after.rows[1][1] is True and f"{CPU}: 2" in after.rows[1][2]

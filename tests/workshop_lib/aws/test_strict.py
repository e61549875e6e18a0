"""The rules of a real account the emulator lacks (local/strict.py), each refusing what AWS refuses and letting
through what AWS lets through, against moto's own state."""

from __future__ import annotations

import json

import boto3
import pytest

from workshop_lib.local.strict import RULES, Strict, iam_length

from .values import REGION

ACCOUNT = "123456789012"


@pytest.fixture
def strict(moto_aws):
    made = {}

    def reader(service, region):
        return made.setdefault((service, region), boto3.client(service, region_name=region))

    return Strict(reader, ACCOUNT), reader


def _doc(n_chars: int) -> str:
    """A policy document of about ``n_chars`` characters as IAM counts them."""
    base = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": ""}]}
    pad = n_chars - iam_length(base)
    base["Statement"][0]["Resource"] = "arn:aws:s3:::b/" + "k" * (pad - len("arn:aws:s3:::b/"))
    return json.dumps(base, indent=2)


def _code(error) -> str:
    return error.response["Error"]["Code"] if error is not None else ""


def test_every_rule_names_its_source():
    assert all(what and source for what, source in RULES.values())


def test_inline_policies_of_a_role_together_at_most_10240_characters(strict):
    rules, reader = strict
    iam = reader("iam", REGION)
    iam.create_role(RoleName="r", AssumeRolePolicyDocument="{}")
    first = _doc(6000)
    assert iam_length(first) == 6000 and len(first) > 6000  # whitespace is not counted
    assert (
        rules.check("iam", "PutRolePolicy", {"RoleName": "r", "PolicyName": "a", "PolicyDocument": first}, REGION)
        is None
    )
    iam.put_role_policy(RoleName="r", PolicyName="a", PolicyDocument=first)
    second = {"RoleName": "r", "PolicyName": "b", "PolicyDocument": _doc(4300)}
    assert _code(rules.check("iam", "PutRolePolicy", second, REGION)) == "LimitExceeded"
    replacing = {"RoleName": "r", "PolicyName": "a", "PolicyDocument": _doc(10000)}  # the old one goes
    assert rules.check("iam", "PutRolePolicy", replacing, REGION) is None
    assert rules.check("iam", "PutRolePolicy", {**second, "PolicyDocument": _doc(4200)}, REGION) is None


def test_a_managed_policy_at_most_6144_and_ten_per_role(strict):
    rules, reader = strict
    iam = reader("iam", REGION)
    assert (
        _code(rules.check("iam", "CreatePolicy", {"PolicyName": "p", "PolicyDocument": _doc(6145)}, REGION))
        == "LimitExceeded"
    )
    assert rules.check("iam", "CreatePolicy", {"PolicyName": "p", "PolicyDocument": _doc(6144)}, REGION) is None
    iam.create_role(RoleName="r", AssumeRolePolicyDocument="{}")
    arns = [iam.create_policy(PolicyName=f"p{i}", PolicyDocument=_doc(200))["Policy"]["Arn"] for i in range(11)]
    for arn in arns[:10]:
        assert rules.check("iam", "AttachRolePolicy", {"RoleName": "r", "PolicyArn": arn}, REGION) is None
        iam.attach_role_policy(RoleName="r", PolicyArn=arn)
    assert (
        _code(rules.check("iam", "AttachRolePolicy", {"RoleName": "r", "PolicyArn": arns[10]}, REGION))
        == "LimitExceeded"
    )
    assert rules.check("iam", "AttachRolePolicy", {"RoleName": "r", "PolicyArn": arns[0]}, REGION) is None  # again


def test_a_boundary_must_exist_and_a_trust_policy_fit(strict):
    rules, reader = strict
    missing = f"arn:aws:iam::{ACCOUNT}:policy/decision-workshop/none"
    request = {"RoleName": "r", "AssumeRolePolicyDocument": "{}", "PermissionsBoundary": missing}
    assert _code(rules.check("iam", "CreateRole", request, REGION)) == "NoSuchEntity"
    made = reader("iam", REGION).create_policy(PolicyName="none", Path="/decision-workshop/", PolicyDocument=_doc(100))
    assert made["Policy"]["Arn"] == missing and rules.check("iam", "CreateRole", request, REGION) is None
    too_long = {"RoleName": "r", "AssumeRolePolicyDocument": _doc(2049)}
    assert _code(rules.check("iam", "CreateRole", too_long, REGION)) == "LimitExceeded"


def test_a_request_to_another_accounts_bucket_with_the_owner_stated_is_refused(strict):
    rules, reader = strict
    reader("s3", REGION).create_bucket(Bucket="ours")
    assert rules.facts("s3", "PutObject", {"Bucket": "ours"}, REGION) == {"bucket_owner": ACCOUNT}
    assert rules.facts("s3", "PutObject", {"Bucket": "nobodys"}, REGION) == {"bucket_owner": ACCOUNT}
    for owner, refused in ((ACCOUNT, False), (None, True)):
        error = rules.check(
            "s3", "PutObject", {"Bucket": "b", "ExpectedBucketOwner": ACCOUNT}, REGION, {"bucket_owner": owner}
        )
        assert (error is not None) == refused
    assert rules.check("s3", "PutObject", {"Bucket": "b"}, REGION, {"bucket_owner": None}) is None  # not stated


def test_deleting_a_scaled_endpoint_deregisters_its_scaling(strict):
    rules, reader = strict
    scaling = reader("application-autoscaling", REGION)
    resource = "endpoint/e/variant/AllTraffic"
    scaling.register_scalable_target(
        ServiceNamespace="sagemaker",
        ResourceId=resource,
        MinCapacity=1,
        MaxCapacity=2,
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
    )
    scaling.put_scaling_policy(
        PolicyName="p",
        ServiceNamespace="sagemaker",
        ResourceId=resource,
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        PolicyType="TargetTrackingScaling",
        TargetTrackingScalingPolicyConfiguration={
            "TargetValue": 10.0,
            "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"},
        },
    )
    assert rules.facts("sagemaker", "DeleteEndpoint", {"EndpointName": "e"}, REGION)["scaled_variants"] == [resource]
    rules.after("sagemaker", "DeleteEndpoint", {"EndpointName": "e"}, REGION)
    assert scaling.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"] == []
    assert scaling.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"] == []


def test_a_role_is_read_as_the_account_holds_it(strict):
    rules, reader = strict
    iam = reader("iam", REGION)
    boundary = iam.create_policy(PolicyName="b", PolicyDocument=_doc(150))["Policy"]["Arn"]
    iam.create_role(RoleName="r", AssumeRolePolicyDocument="{}", PermissionsBoundary=boundary)
    iam.put_role_policy(RoleName="r", PolicyName="r", PolicyDocument=_doc(300))
    documents, held = rules.role_documents("r")
    assert len(documents) == 1 and iam_length(documents[0]) == 300 and iam_length(held) == 150
    assert rules.role_documents("nobody") is None

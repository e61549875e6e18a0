"""Fixtures for the AWS tests: fake credentials, and moto standing in for AWS itself."""

import pytest

from .values import REGION


@pytest.fixture
def fake_credentials(monkeypatch):
    """Credentials that can only ever reach moto or a Stubber, never a real account."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


@pytest.fixture
def moto_aws(fake_credentials):
    from moto import mock_aws

    with mock_aws():
        yield


@pytest.fixture
def clients(moto_aws):
    import boto3

    class Clients:
        sm = boto3.client("sagemaker", region_name=REGION)
        s3 = boto3.client("s3", region_name=REGION)
        ecr = boto3.client("ecr", region_name=REGION)
        logs = boto3.client("logs", region_name=REGION)
        autoscaling = boto3.client("application-autoscaling", region_name=REGION)

    return Clients


@pytest.fixture
def stub_sm(fake_credentials):
    """A SageMaker client whose every call must be announced to its Stubber (no moto, no network)."""
    import boto3
    from botocore.stub import Stubber

    sm = boto3.client("sagemaker", region_name=REGION)
    with Stubber(sm) as stubber:
        yield sm, stubber
        stubber.assert_no_pending_responses()

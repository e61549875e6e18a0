"""One boto3 client factory (calls.client) and one control-plane retry policy for every caller."""

from __future__ import annotations

import re
from pathlib import Path

import workshop_lib
from workshop_lib.aws import calls
from workshop_lib.local import modes

POLICY = {"mode": "standard", "total_max_attempts": 5}


def test_the_factory_gives_every_control_plane_client_the_same_retry_policy():
    for service in ("sagemaker", "s3", "ecr", "codebuild", "iam", "logs", "sts"):
        assert calls.client(service, "us-east-1").meta.config.retries == POLICY


def test_the_rehearsal_clients_retry_like_the_real_ones():
    made = modes.emulator_client("sagemaker", "us-east-1", "http://127.0.0.1:9")  # no emulator needed to build it
    assert made.meta.config.retries == POLICY and made.meta.endpoint_url == "http://127.0.0.1:9"


def test_no_module_makes_a_boto3_client_around_the_factory():
    root = Path(workshop_lib.__file__).parent
    pattern = re.compile(r"boto3\.client\(|[Ss]ession\(\)\.client\(|\bsession\.client\(")
    offenders = [
        f"{p.relative_to(root)}:{n}"
        for p in root.rglob("*.py")
        if p.relative_to(root).as_posix() != "aws/calls.py"
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []

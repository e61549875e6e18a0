"""name_rules.py: the one home of naming rules; botocore's models where they state the rule."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import workshop_lib
from workshop_lib import name_rules


@pytest.mark.parametrize(
    "name, ok",
    [
        ("semif-llamacpp-dlc", True),
        ("team/semif.dlc_2", True),
        ("a", False),
        ("Semif", False),
        ("semif--/x", False),
        ("x" * 257, False),
    ],
)
def test_ecr_repository_names_follow_the_ecr_model(name, ok):
    assert name_rules.is_ecr_repository(name) is ok


def test_the_rules_come_from_botocore_not_from_copies():
    pattern, max_len = name_rules.service_rule("codebuild", "CreateProject", "name")
    assert name_rules.is_codebuild_project("decision-workshop-image") and not name_rules.is_codebuild_project("-x")
    assert (pattern.pattern and max_len is None) or max_len >= 150


@pytest.mark.parametrize(
    "arn, account",
    [
        ("arn:aws:iam::111122223333:role/workshop-codebuild", "111122223333"),
        ("arn:aws:iam::111122223333:role/service-role/x", "111122223333"),
        ("arn:aws:sts::111122223333:assumed-role/x/session", None),
        ("arn:aws:iam::111122223333:user/alice", None),
        ("", None),
    ],
)
def test_role_arns(arn, account):
    assert name_rules.role_account(arn) == account
    assert name_rules.is_role_arn(arn) is (account is not None)


@pytest.mark.parametrize(
    "uri, parts",
    [
        ("s3://my-bucket/models/qwen/", ("my-bucket", "models/qwen/")),
        ("s3://my-bucket", ("my-bucket", "")),
        ("s3:/my-bucket/x", None),
        ("s3://My_Bucket/x", None),
        ("https://my-bucket/x", None),
    ],
)
def test_s3_uris_are_taken_apart_once(uri, parts):
    assert name_rules.split_s3_uri(uri) == parts


def test_a_model_archive_is_one_tar_gz_object():
    assert name_rules.is_s3_tarball("s3://b-1/semif/model.tar.gz")
    assert not name_rules.is_s3_tarball("s3://b-1/semif/") and not name_rules.is_s3_tarball("s3://b-1/.tar.gz")


def test_image_tags_follow_docker_grammar():
    assert (
        name_rules.is_image_tag("cpu-2026-11-30")
        and not name_rules.is_image_tag("-x")
        and not name_rules.is_image_tag("x" * 129)
    )


def test_no_other_module_keeps_its_own_copy_of_these_rules():
    root = Path(workshop_lib.__file__).parent
    copies = re.compile(
        r"""r["']s3://|len\(["']s3://|\{0,127\}|iam::\\d\{12\}:role|["']created-by["']|startswith\(["']aws:"""
    )
    found = [
        f"{p.relative_to(root)}:{n}"
        for p in root.rglob("*.py")
        if p.name != "name_rules.py"
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if copies.search(line)
    ]
    assert found == []


def test_tags_follow_the_resource_tag_rules():
    assert name_rules.is_tag_key("team") and name_rules.is_tag_key("cost-center:ml/1") and not name_rules.is_tag_key("")
    assert (
        not name_rules.is_tag_key("aws:owner")
        and not name_rules.is_tag_key("k" * 129)
        and not name_rules.is_tag_key("a<b")
    )
    assert name_rules.is_tag_value("") and name_rules.is_tag_value("v" * 256) and not name_rules.is_tag_value("v" * 257)
    assert not name_rules.is_tag_value("alice<script>")


def test_every_workshop_resource_gets_the_same_tags_in_each_apis_spelling():
    from workshop_lib.aws import build_projects, model_requests

    pairs = {(t["Key"], t["Value"]) for t in model_requests.workshop_tags()}
    assert pairs == set(name_rules.WORKSHOP_TAGS.items())
    project = build_projects.project_request(
        build_projects.IMAGE_BUILD_PROJECT,
        buildspec=build_projects.IMAGE_BUILD_BUILDSPEC,
        source_location="b/k.zip",
        service_role_arn="arn:aws:iam::123456789012:role/r",
    )
    assert {(t["key"], t["value"]) for t in project["tags"]} == pairs  # CodeBuild spells it key/value
    assert {(t["Key"], t["Value"]) for t in build_projects.ecr_repository_request()["tags"]} == pairs

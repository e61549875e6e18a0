"""builds.check_manifest: the uploaded manifest follows the manifest rules and describes the pinned GGUF.

Pure: the manifests are built here (the workshop's shape by packaging.build_manifest, the published
sample's as its buildspec writes it: aws-samples/sagemaker-genai-hosting-examples,
03-features/semif-decision-model/deploy/model-buildspec.yml); no AWS call is made.
"""

from __future__ import annotations

import copy

import pytest

from workshop_lib.aws import codebuild as builds
from workshop_lib.errors import AwsFailure
from workshop_lib.models import PINNED_MODEL
from workshop_lib.packaging import SAMPLE_SHAPE, WORKSHOP_SHAPE, build_manifest, parse_manifest

PIN = PINNED_MODEL.gguf
TOKENIZER = PINNED_MODEL.tokenizer


def workshop_manifest() -> dict:
    measured = {f.path: (f.size, f.sha256) for f in PINNED_MODEL.files}
    manifest = build_manifest(PINNED_MODEL, measured, build_id="b:1", where="codebuild")
    manifest["files"].append(
        {
            "path": "tokenizer.json",
            "role": "tokenizer",
            "repo": TOKENIZER.repo,
            "revision": TOKENIZER.revision,
            "size": 11,
            "sha256": "1f" * 32,
        }
    )
    return manifest


def sample_manifest() -> dict:
    return {
        "gguf": {"repo": PIN.repo, "revision": PIN.revision, "file": PIN.path, "sha256": PIN.sha256},
        "tokenizer": {"repo": TOKENIZER.repo, "revision": TOKENIZER.revision},
    }


def test_the_workshop_shape_is_accepted_and_named():
    manifest = workshop_manifest()
    assert builds.check_manifest(manifest, PINNED_MODEL) is manifest
    assert parse_manifest(manifest).shape == WORKSHOP_SHAPE
    assert builds.describe_manifest(manifest) == "the workshop's shape: 2 files listed with size and sha256"


def test_the_published_samples_shape_is_accepted_and_named():
    manifest = sample_manifest()
    assert builds.check_manifest(manifest, PINNED_MODEL) is manifest
    view = parse_manifest(manifest)
    assert view.shape == SAMPLE_SHAPE and view.gguf.sha256 == PIN.sha256 and view.gguf.size is None
    assert builds.describe_manifest(manifest).startswith("the published sample's shape: the GGUF's sha256")
    assert "tokenizer files are not listed with digests" in builds.describe_manifest(manifest)


@pytest.mark.parametrize(
    "change, needle",
    [
        (lambda m: m["gguf"].update(sha256="ab" * 32), f"sha256 '{'ab' * 32}', pinned '{PIN.sha256}'"),
        (lambda m: m["gguf"].update(revision="main"), f"revision 'main', pinned '{PIN.revision}'"),
        (lambda m: m["gguf"].update(repo="someone/else"), "repo 'someone/else'"),
        (lambda m: m["gguf"].update(file="Other.gguf"), f"no entry for {PIN.path}"),
        (lambda m: m["tokenizer"].update(revision="main"), f"tokenizer from {TOKENIZER.repo}@main"),
        (lambda m: m["gguf"].update(sha256="xyz"), r"gguf \('.*'\): sha256 must be 64 hexadecimal"),
        (lambda m: m["gguf"].update(file="../x.gguf"), r"gguf\.file: the path '\.\./x\.gguf' leaves"),
    ],
    ids=["sha256", "revision", "repo", "file", "tokenizer-revision", "sha256-malformed", "file-dotdot"],
)
def test_a_sample_shape_that_differs_from_the_pin_is_refused(change, needle):
    manifest = sample_manifest()
    change(manifest)
    with pytest.raises(AwsFailure, match=needle):
        builds.check_manifest(manifest, PINNED_MODEL)


def test_the_size_is_compared_as_well_as_the_digest():
    manifest = workshop_manifest()
    manifest["files"][0]["size"] = PIN.size - 1
    with pytest.raises(AwsFailure, match=f"size {PIN.size - 1}, pinned {PIN.size}"):
        builds.check_manifest(manifest, PINNED_MODEL)


def test_two_entries_for_the_gguf_are_refused_whichever_is_pinned():
    # The issue's bend: the first entry carried the pinned digest, the adapter read the last.
    for tampered_first in (False, True):
        manifest = workshop_manifest()
        tampered = dict(manifest["files"][0], sha256="ab" * 32, size=5)
        manifest["files"].insert(0 if tampered_first else 1, tampered)
        with pytest.raises(AwsFailure, match=rf"lists '{PIN.path}' twice \(files\[0\] and files\[1\]\)"):
            builds.check_manifest(manifest, PINNED_MODEL)


def test_a_second_gguf_listed_is_refused():
    manifest = workshop_manifest()
    manifest["files"].append(dict(manifest["files"][0], path="AAA.gguf"))
    with pytest.raises(AwsFailure, match=r"also lists \['AAA\.gguf'\]"):
        builds.check_manifest(manifest, PINNED_MODEL)


def test_a_tokenizer_from_another_revision_is_refused():
    manifest = workshop_manifest()
    manifest["files"][1]["revision"] = "main"
    with pytest.raises(AwsFailure, match=f"tokenizer from {TOKENIZER.repo}@main"):
        builds.check_manifest(manifest, PINNED_MODEL)


@pytest.mark.parametrize(
    "entry, needle",
    [
        (
            {"path": "../../etc/passwd", "size": 1, "sha256": "0" * 64},
            r"files\[2\]: the path '\.\./\.\./etc/passwd' leaves",
        ),
        ({"path": "/etc/passwd", "size": 1, "sha256": "0" * 64}, r"files\[2\]: the path '/etc/passwd' is absolute"),
        ({"path": "./tokenizer.json", "size": 1, "sha256": "0" * 64}, r"files\[2\]: .* is not written plainly"),
        ("tokenizer.json", r"files\[2\] is not an object"),
        ({"path": ["x"], "size": 1, "sha256": "0" * 64}, r"files\[2\]: the path must be a non-empty string"),
        ({"path": "x.txt", "size": -3, "sha256": "0" * 64}, r"files\[2\] \('x\.txt'\): size must be a non-negative"),
        ({"path": "x.txt", "size": 1.5, "sha256": "0" * 64}, r"files\[2\] \('x\.txt'\): size must be"),
        ({"path": "x.txt", "size": 1, "sha256": "0" * 63}, r"files\[2\] \('x\.txt'\): sha256 must be 64 hexadecimal"),
    ],
    ids=["dotdot", "absolute", "dot", "not-object", "path-list", "size-negative", "size-float", "sha-short"],
)
def test_bent_or_malformed_entries_are_refused_naming_the_entry(entry, needle):
    manifest = workshop_manifest()
    manifest["files"].append(entry)
    with pytest.raises(AwsFailure, match=needle):
        builds.check_manifest(manifest, PINNED_MODEL)


@pytest.mark.parametrize(
    "manifest, needle",
    [
        ([], "is not a JSON object"),
        ({"model": {}}, "neither a 'files' list"),
        ({**workshop_manifest(), **sample_manifest()}, "both a 'files' list"),
    ],
    ids=["not-object", "no-shape", "both-shapes"],
)
def test_a_manifest_of_no_known_shape_is_refused(manifest, needle):
    with pytest.raises(AwsFailure, match=needle):
        builds.check_manifest(copy.deepcopy(manifest), PINNED_MODEL)

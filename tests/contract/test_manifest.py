"""The manifest contract (decision_contract.manifest): one set of rules, read by both rooms.

The adapter (decision_adapter.model_files) and the client (workshop_lib.packaging) call the same
``parse``; each turns a refusal into its own error class with the same message.
"""

from __future__ import annotations

import re

import pytest

from decision_adapter.model_files import ModelFilesError
from decision_adapter.model_files import parse_manifest as adapter_parse
from decision_contract import manifest
from workshop_lib.packaging import ManifestInvalid
from workshop_lib.packaging import parse_manifest as client_parse

DIGEST = "ab" * 32


def _files(*entries) -> dict:
    return {"files": [{"path": "m.gguf", "size": 10, "sha256": DIGEST}, *entries]}


GOOD = [
    pytest.param(_files(), id="workshop"),
    pytest.param(_files({"path": "tok/t.json", "size": 0, "sha256": DIGEST.upper(), "repo": "r"}), id="workshop-2"),
    pytest.param(
        _files({"path": "calibration.json", "role": "calibration", "size": 5, "sha256": DIGEST}), id="calibration"
    ),
    pytest.param(
        {"gguf": {"file": "m.gguf", "sha256": DIGEST}, "tokenizer": {"repo": "r", "revision": "v"}}, id="sample"
    ),
]

BAD = [
    pytest.param(_files({"path": "m.gguf", "size": 10, "sha256": DIGEST}), id="duplicate"),
    pytest.param(_files({"path": "../../etc/passwd", "size": 1, "sha256": DIGEST}), id="dotdot"),
    pytest.param(_files({"path": "/etc/passwd", "size": 1, "sha256": DIGEST}), id="absolute"),
    pytest.param(_files({"path": "./m.gguf", "size": 10, "sha256": DIGEST}), id="dot-spelling"),
    pytest.param(_files({"path": "a\\b", "size": 1, "sha256": DIGEST}), id="backslash"),
    pytest.param(_files("m.gguf"), id="not-object"),
    pytest.param(_files({"path": None, "size": 1, "sha256": DIGEST}), id="path-none"),
    pytest.param(_files({"path": "t", "size": -1, "sha256": DIGEST}), id="size-negative"),
    pytest.param(_files({"path": "t", "size": False, "sha256": DIGEST}), id="size-bool"),
    pytest.param(_files({"path": "t", "sha256": DIGEST}), id="size-missing"),
    pytest.param(_files({"path": "t", "size": 1, "sha256": DIGEST[:-1] + "z"}), id="sha-not-hex"),
    pytest.param(_files({"path": "t", "size": 1, "sha256": DIGEST, "revision": 3}), id="revision-int"),
    pytest.param({"files": []}, id="empty"),
    pytest.param({**_files(), "gguf": {"file": "m.gguf", "sha256": DIGEST}}, id="both-shapes"),
    pytest.param({"gguf": {"file": "/m.gguf", "sha256": DIGEST}}, id="sample-absolute"),
    pytest.param({"gguf": {"file": "m.gguf", "sha256": None}}, id="sample-no-digest"),
    pytest.param({"gguf": {"file": "m.gguf", "sha256": DIGEST}, "tokenizer": "r"}, id="sample-tokenizer"),
    pytest.param({"model": {}}, id="no-shape"),
    pytest.param(["m.gguf"], id="not-a-dict"),
]


@pytest.mark.parametrize("raw", GOOD)
def test_a_valid_manifest_is_read_in_its_shape(raw):
    parsed = manifest.parse(raw)
    assert parsed.shape == (manifest.SAMPLE_SHAPE if "gguf" in raw else manifest.WORKSHOP_SHAPE)
    listed = raw["files"] if "files" in raw else [{"path": raw["gguf"]["file"], "sha256": raw["gguf"]["sha256"]}]
    assert [(f.path, f.size, f.sha256) for f in parsed.files] == [
        (e["path"], e.get("size"), e["sha256"].lower()) for e in listed
    ]
    assert parsed.gguf.path == "m.gguf"


@pytest.mark.parametrize("raw", BAD)
def test_a_broken_manifest_is_refused_naming_the_entry_and_the_fix(raw):
    with pytest.raises(manifest.ManifestError) as caught:
        manifest.parse(raw)
    message = str(caught.value)
    assert message.startswith(manifest.MANIFEST_NAME)
    assert any(
        word in message for word in ("files[", "gguf", "tokenizer", "both", "neither", "empty", "JSON object")
    ), message


@pytest.mark.parametrize("raw", BAD[:3])
def test_each_room_refuses_as_its_own_error_with_the_contract_message(raw):
    with pytest.raises(manifest.ManifestError) as contract:
        manifest.parse(raw)
    with pytest.raises(ModelFilesError, match=re.escape(str(contract.value))):
        adapter_parse(raw)
    with pytest.raises(ManifestInvalid, match=re.escape(str(contract.value))):
        client_parse(raw)


def test_the_workshop_shape_names_its_gguf_by_model_file_then_role():
    files = [
        {"path": "a.json", "size": 1, "sha256": DIGEST},
        {"path": "w.gguf", "size": 2, "sha256": DIGEST, "role": "gguf"},
    ]
    assert manifest.parse({"files": files}).gguf.path == "w.gguf"
    assert manifest.parse({"files": files, "model": {"file": "a.json"}}).gguf.path == "a.json"
    assert manifest.parse({"files": files[:1]}).gguf.path == "a.json"


def test_a_calibration_entry_reads_back_as_a_listed_file():
    entry = manifest.calibration_entry(12, DIGEST)
    parsed = manifest.parse({"files": [{"path": "m.gguf", "size": 1, "sha256": DIGEST}, entry]})
    assert parsed.files[1].role == manifest.CALIBRATION_ROLE and parsed.files[1].path == manifest.CALIBRATION_NAME


def test_the_digest_of_a_file(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    assert manifest.sha256_of(path, chunk=2) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

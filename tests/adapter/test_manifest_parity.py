"""The manifest rules in both rooms agree: what the adapter refuses, check_manifest refuses, and back.

The adapter (decision_adapter.model_files) and the client (workshop_lib.packaging) each keep the rules
in their own room; this test holds the two parsers to the same verdict on the same manifests.
"""

from __future__ import annotations

import pytest

from decision_adapter.model_files import ModelFilesError
from decision_adapter.model_files import parse_manifest as adapter_parse
from workshop_lib.packaging import ManifestInvalid
from workshop_lib.packaging import parse_manifest as client_parse

DIGEST = "ab" * 32


def _files(*entries) -> dict:
    return {"files": [{"path": "m.gguf", "size": 10, "sha256": DIGEST}, *entries]}


GOOD = [
    pytest.param(_files(), id="workshop"),
    pytest.param(_files({"path": "tok/t.json", "size": 0, "sha256": DIGEST.upper(), "repo": "r"}), id="workshop-2"),
    pytest.param(_files({"path": "calibration.json", "role": "calibration", "size": 5, "sha256": DIGEST}),
                 id="calibration"),
    pytest.param({"gguf": {"file": "m.gguf", "sha256": DIGEST}, "tokenizer": {"repo": "r", "revision": "v"}},
                 id="sample"),
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


@pytest.mark.parametrize("manifest", GOOD)
def test_both_rooms_accept_the_same_manifests_in_the_same_shape(manifest):
    adapter, client = adapter_parse(manifest), client_parse(manifest)
    assert adapter.shape == client.shape
    assert [(e.path, e.size, e.sha256) for e in adapter.entries] == [(f.path, f.size, f.sha256) for f in client.files]


@pytest.mark.parametrize("manifest", BAD)
def test_both_rooms_refuse_the_same_manifests_naming_the_same_entry(manifest):
    with pytest.raises(ModelFilesError) as adapter:
        adapter_parse(manifest)
    with pytest.raises(ManifestInvalid) as client:
        client_parse(manifest)
    for label in ("files[1]", "gguf.file", "gguf (", "both", "neither", "empty", "not a JSON object", "'tokenizer'"):
        assert (label in str(adapter.value)) == (label in str(client.value)), (adapter.value, client.value)

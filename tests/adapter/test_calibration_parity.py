"""The calibration.json rules in both rooms agree: what the adapter refuses, check_document refuses, and back.

The adapter (decision_adapter.calibration) reads the file at start-up; the client
(workshop_lib.bench.profiles) checks what `workshop calibrate` writes and what packaging carries. Each
room keeps its own rules; this test holds the two to the same verdict on the same documents.
"""

from __future__ import annotations

import copy

import pytest

from decision_adapter.calibration import CalibrationError
from decision_adapter.calibration import parse as adapter_parse
from workshop_lib.bench.profiles import CalibrationFileError
from workshop_lib.bench.profiles import check_document as client_check

SHA = "ab" * 32
FIGURES = {"nll_before": 1.2, "nll_after": 1.0, "ece_before": 0.5, "ece_after": 0.2, "brier_before": 0.7,
           "brier_after": 0.6}
BASE = {"format": "decision-calibration/1", "fit_for": {"gguf_sha256": SHA, "prompt_version": "decision-prompt/1"},
        "order": "as_given",
        "profiles": {"choice/3-4": {"temperature": 2.0, "kept": True, "fit_n": 30, "heldout_n": 13,
                                    "heldout": FIGURES},
                     "noul/2": {"temperature": 0.5, "kept": False, "fit_n": 3, "heldout_n": 0, "heldout": None}},
        "data": {"tasks": "packaged", "fit_n": 33, "heldout_n": 13}, "created": "2026-12-01T00:00:00+00:00"}


def doc(path: str = "", value=None, *, drop: bool = False) -> dict:
    """BASE with the field at ``path`` (dot-separated) set to ``value``, or removed with ``drop``."""
    out = copy.deepcopy(BASE)
    if not path:
        return out
    *parents, last = path.split(".")
    node = out
    for key in parents:
        node = node[key]
    if drop:
        del node[last]
    else:
        node[last] = value
    return out


GOOD = [
    pytest.param(doc(), id="as-written"),
    pytest.param(doc("order", "rotations"), id="rotations"),
    pytest.param(doc("profiles", {}), id="no-profiles"),
    pytest.param(doc("profiles.choice/3-4.temperature", 100), id="temperature-at-most"),
    pytest.param(doc("profiles.noul/2.temperature", 0.0011), id="temperature-just-above-least"),
    pytest.param(doc("profiles.noul/2.heldout", FIGURES), id="not-kept-with-figures"),
    pytest.param(doc("profiles.score/17+", {"temperature": 1, "kept": False, "fit_n": 0, "heldout_n": 0}),
                 id="open-band-heldout-absent"),
    pytest.param(doc("extra", {"anything": True}), id="unknown-top-level-field"),
    pytest.param(doc("profiles.noul/2.reason", "only 3 held-out answers"), id="reason"),
    pytest.param(doc("profiles.choice/3-4.reason", None), id="reason-null"),
]

BAD = [
    pytest.param([BASE], id="not-object"),
    pytest.param(doc("format", "decision-calibration/2"), id="format"),
    pytest.param(doc("fit_for", SHA), id="fit-for-not-object"),
    pytest.param(doc("fit_for.gguf_sha256", SHA.upper()), id="sha-uppercase"),
    pytest.param(doc("fit_for.gguf_sha256", SHA[:-1]), id="sha-short"),
    pytest.param(doc("fit_for.prompt_version", ""), id="prompt-version-empty"),
    pytest.param(doc("fit_for.prompt_version", drop=True), id="prompt-version-missing"),
    pytest.param(doc("order", "sideways"), id="order"),
    pytest.param(doc("profiles", []), id="profiles-list"),
    pytest.param(doc("profiles.choice/3", {**BASE["profiles"]["noul/2"]}), id="profile-band"),
    pytest.param(doc("profiles.yesno/2", {**BASE["profiles"]["noul/2"]}), id="profile-type"),
    pytest.param(doc("profiles.noul/2", 0.5), id="profile-not-object"),
    pytest.param(doc("profiles.noul/2.temperature", 0), id="temperature-zero"),
    pytest.param(doc("profiles.noul/2.temperature", 0.001), id="temperature-at-least"),
    pytest.param(doc("profiles.noul/2.temperature", 100.5), id="temperature-too-high"),
    pytest.param(doc("profiles.noul/2.temperature", True), id="temperature-bool"),
    pytest.param(doc("profiles.noul/2.temperature", "2"), id="temperature-string"),
    pytest.param(doc("profiles.noul/2.kept", drop=True), id="kept-missing"),
    pytest.param(doc("profiles.noul/2.kept", 1), id="kept-int"),
    pytest.param(doc("profiles.noul/2.reason", 3), id="reason-int"),
    pytest.param(doc("profiles.noul/2.fit_n", -1), id="fit-n-negative"),
    pytest.param(doc("profiles.noul/2.heldout_n", 2.0), id="heldout-n-float"),
    pytest.param(doc("profiles.choice/3-4.heldout", None), id="kept-without-figures"),
    pytest.param(doc("profiles.choice/3-4.heldout", [1.0]), id="figures-list"),
    pytest.param(doc("profiles.choice/3-4.heldout.ece_after", float("nan")), id="figure-nan"),
    pytest.param(doc("profiles.choice/3-4.heldout.nll_before", drop=True), id="figure-missing"),
    pytest.param(doc("data", drop=True), id="data-missing"),
    pytest.param(doc("data.tasks", 3), id="data-tasks"),
    pytest.param(doc("data.fit_n", None), id="data-fit-n"),
    pytest.param(doc("created", 20261201), id="created"),
]


def _verdicts(document) -> tuple[bool, bool]:
    try:
        client_check(document)
        client = True
    except CalibrationFileError:
        client = False
    try:
        adapter_parse(document, "calibration.json", "00" * 32)
        adapter = True
    except CalibrationError:
        adapter = False
    return client, adapter


@pytest.mark.parametrize("document", GOOD)
def test_both_rooms_accept(document):
    assert _verdicts(document) == (True, True)


@pytest.mark.parametrize("document", BAD)
def test_both_rooms_refuse(document):
    assert _verdicts(document) == (False, False)


def test_what_both_accept_means_the_same_temperatures():
    served = adapter_parse(doc(), "calibration.json", "00" * 32)
    kept = {name for name, p in client_check(doc())["profiles"].items() if p["kept"]}
    assert set(served.temperatures) == kept == {"choice/3-4"}

"""The calibration contract (decision_contract.calibration): one set of rules, read by both rooms.

The adapter loads calibration.json with ``parse`` at start-up; the client checks what `workshop
calibrate` writes and what packaging carries with the same ``parse`` (profiles.check_document).
"""

from __future__ import annotations

import copy

import pytest

from decision_adapter import served_calibration as served
from decision_contract import calibration
from workshop_lib.evaluation.profiles import CalibrationFileError, check_document

SHA = "ab" * 32
FIGURES = {
    "nll_before": 1.2,
    "nll_after": 1.0,
    "ece_before": 0.5,
    "ece_after": 0.2,
    "brier_before": 0.7,
    "brier_after": 0.6,
}
BASE = {
    "format": "decision-calibration/1",
    "fit_for": {"gguf_sha256": SHA, "prompt_version": "decision-prompt/1"},
    "order": "as_given",
    "profiles": {
        "choice/3-4": {"temperature": 2.0, "kept": True, "fit_n": 30, "heldout_n": 13, "heldout": FIGURES},
        "noul/2": {"temperature": 0.5, "kept": False, "fit_n": 3, "heldout_n": 0, "heldout": None},
    },
    "data": {"tasks": "packaged", "fit_n": 33, "heldout_n": 13},
    "created": "2026-12-01T00:00:00+00:00",
}


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
    pytest.param(
        doc("profiles.score/17+", {"temperature": 1, "kept": False, "fit_n": 0, "heldout_n": 0}),
        id="open-band-heldout-absent",
    ),
    pytest.param(doc("extra", {"anything": True}), id="unknown-top-level-field"),
    pytest.param(doc("profiles.noul/2.reason", "only 3 held-out answers"), id="reason"),
    pytest.param(doc("profiles.choice/3-4.reason", None), id="reason-null"),
]

BAD = [
    pytest.param([BASE], id="not-object"),
    pytest.param(doc("format", "decision-calibration/9"), id="format"),
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


@pytest.mark.parametrize("document", GOOD)
def test_a_valid_file_is_read(document):
    parsed = calibration.parse(document, "calibration.json", "00" * 32)
    assert parsed.order == document["order"] and parsed.sha256 == "00" * 32
    assert set(parsed.temperatures) == {name for name, p in document["profiles"].items() if p["kept"]}
    assert check_document(document) == document


@pytest.mark.parametrize("document", BAD)
def test_a_broken_file_is_refused_by_both_rooms(document):
    with pytest.raises(calibration.CalibrationError) as caught:
        calibration.parse(document, "calibration.json")
    assert str(caught.value).startswith("calibration.json: ") and "workshop calibrate" in str(caught.value)
    with pytest.raises(CalibrationFileError):
        check_document(document)


def test_only_kept_profiles_carry_a_temperature():
    parsed = calibration.parse(doc())
    assert parsed.temperatures == {"choice/3-4": 2.0}
    assert parsed.profiles == ("choice/3-4", "noul/2")
    assert parsed.describe()["temperatures"] == {"choice/3-4": 2.0}


def test_a_file_fit_for_another_build_or_prompt_names_both():
    parsed = calibration.parse(doc())
    with pytest.raises(calibration.CalibrationError, match=f"{SHA}.*{'cd' * 32}"):
        parsed.check_fit("cd" * 32, "model.gguf", "decision-prompt/1")
    with pytest.raises(calibration.CalibrationError, match="decision-prompt/1.*decision-prompt/2"):
        parsed.check_fit(SHA, "model.gguf", "decision-prompt/2")
    parsed.check_fit(SHA.upper(), "model.gguf", "decision-prompt/1")


@pytest.mark.parametrize(
    "n, band",
    [(2, "2"), (3, "3-4"), (4, "3-4"), (5, "5-8"), (8, "5-8"), (9, "9-16"), (16, "9-16"), (17, "17+"), (255, "17+")],
)
def test_every_option_count_falls_in_one_band(n, band):
    assert calibration.band_of(n) == band
    assert calibration.profile_name("score", n) == f"score/{band}"


@pytest.mark.parametrize("bad", [1, 0, True, 2.0, "3"])
def test_a_count_below_two_or_not_an_integer_has_no_band(bad):
    with pytest.raises(ValueError):
        calibration.band_of(bad)


def test_an_unknown_question_type_has_no_profile():
    with pytest.raises(ValueError, match="question_type"):
        calibration.profile_name("yesno", 2)


def test_the_adapter_serves_a_kept_profile_only_in_the_order_it_was_fitted_in():
    parsed = calibration.parse(doc())
    assert served.in_force(parsed, "choice", 3, "as_given", None)[0] == 2.0
    assert served.in_force(parsed, "choice", 3, "rotations", None)[1]["source"] == "none"


# -- format 2: the readout, alpha and the prediction-set thresholds -------------------------------------------------

SETS = {
    "threshold": 0.7,
    "kept": True,
    "reason": None,
    "heldout_n": 13,
    "temperature": 2.0,
    "fit_coverage": 0.9,
    "fit_set_size": 1.8,
}
V2 = {**copy.deepcopy(BASE), "format": calibration.FORMAT, "readout": "letters", "alpha": 0.1}
V2["profiles"]["choice/3-4"]["conformal"] = SETS
V2["profiles"]["noul/2"]["conformal"] = {
    **SETS,
    "threshold": None,
    "kept": False,
    "reason": "0 held-out answers; a set covering 1 - alpha = 0.9 needs at least 9",
}


def test_a_format_1_file_still_loads_as_fitted_for_the_letters_readout():
    parsed = calibration.parse(doc())
    assert BASE["format"] != calibration.FORMAT
    assert (parsed.readout, parsed.alpha, parsed.thresholds) == ("letters", None, {})
    parsed.check_fit(SHA, "model.gguf", "decision-prompt/1")  # the adapter serves letters


def test_a_format_2_file_carries_its_readout_alpha_and_the_kept_thresholds_only():
    parsed = calibration.parse(copy.deepcopy(V2))
    assert (parsed.readout, parsed.alpha) == ("letters", 0.1)
    assert parsed.thresholds == {"choice/3-4": 0.7}
    assert parsed.describe()["set_thresholds"] == {"choice/3-4": 0.7}
    assert check_document(copy.deepcopy(V2)) == V2


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda d: d.pop("readout"), "readout"),
        (lambda d: d.update(readout="Letters!"), "readout"),
        (lambda d: d.pop("alpha"), "alpha"),
        (lambda d: d.update(alpha=0), "alpha"),
        (lambda d: d.update(alpha=True), "alpha"),
        (lambda d: d["profiles"]["choice/3-4"].update(conformal=0.7), "conformal"),
        (lambda d: d["profiles"]["choice/3-4"]["conformal"].update(threshold=-0.1), "conformal.threshold"),
        (lambda d: d["profiles"]["choice/3-4"]["conformal"].update(threshold=None), "without a threshold"),
        (lambda d: d["profiles"]["choice/3-4"]["conformal"].update(kept="yes"), "conformal.kept"),
        (lambda d: d["profiles"]["choice/3-4"]["conformal"].update(heldout_n=-2), "conformal.heldout_n"),
        (lambda d: d["profiles"]["choice/3-4"]["conformal"].update(fit_coverage=float("inf")), "fit_coverage"),
        (lambda d: d["profiles"]["choice/3-4"]["conformal"].update(temperature=1.0), "serves temperature 2"),
        (lambda d: d["profiles"]["choice/3-4"].update(kept=False), "serves temperature 1"),
    ],
)
def test_a_broken_format_2_field_is_refused_naming_it(change, field):
    broken = copy.deepcopy(V2)
    change(broken)
    with pytest.raises(calibration.CalibrationError, match=field.replace(".", r"\.")):
        calibration.parse(broken)


def test_a_file_fit_for_a_readout_this_side_does_not_serve_is_refused_naming_both():
    parsed = calibration.parse({**copy.deepcopy(V2), "readout": "cloze"})
    with pytest.raises(calibration.CalibrationError, match="readout 'cloze'.*serves letters"):
        parsed.check_fit(SHA, "model.gguf", "decision-prompt/1", readouts=("letters",))
    with pytest.raises(calibration.CalibrationError, match="readout 'tea-leaves'"):  # none the adapter knows
        calibration.parse({**copy.deepcopy(V2), "readout": "tea-leaves"}).check_fit(SHA, "m.gguf", "decision-prompt/1")
    parsed.check_fit(SHA, "model.gguf", "decision-prompt/1", readouts=("letters", "cloze"))
    assert not parsed.applies("as_given", "letters") and parsed.applies("as_given", "cloze")


def test_a_prediction_set_holds_every_option_at_or_above_one_minus_the_threshold_in_the_given_order():
    probabilities = [0.05, 0.5, 0.15, 0.3]
    assert calibration.prediction_set(probabilities, 0.7) == [1, 3]  # p >= 0.3, the boundary included
    assert calibration.prediction_set(probabilities[::-1], 0.7) == [0, 2]
    assert calibration.prediction_set(probabilities, 1.0) == [0, 1, 2, 3]
    assert calibration.prediction_set(probabilities, 0.4) == []  # nothing reaches 0.6: the set may be empty


def test_the_adapter_serves_a_set_only_for_the_files_readout_and_order_without_a_request_temperature():
    parsed = calibration.parse(copy.deepcopy(V2))
    p = [0.5, 0.3, 0.2]
    assert served.set_of(parsed, "choice", "as_given", None, p) == [0, 1]
    assert served.set_of(parsed, "choice", "as_given", None, p, readout="cloze") is None
    assert served.set_of(parsed, "choice", "rotations", None, p) is None
    assert served.set_of(parsed, "choice", "as_given", 1.0, p) is None  # the request's own temperature
    assert served.set_of(parsed, "noul", "as_given", None, [0.6, 0.4]) is None  # not kept
    assert served.set_of(None, "choice", "as_given", None, p) is None
    assert served.in_force(parsed, "choice", 3, "as_given", None, readout="cloze")[1]["source"] == "none"

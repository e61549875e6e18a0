"""The one rule for which readout a local adapter on the embedded model serves (rehearsal endpoints,
``workshop serve``, ``make demo``): cloze, unless the environment it was declared with names a readout."""

from __future__ import annotations

from workshop_lib.local import rehearsal


def test_nothing_declared_gets_cloze_and_a_declared_readout_wins():
    assert rehearsal.readout_env({}) == {"DECISION_ADAPTER_READOUT": "cloze"}
    assert rehearsal.readout_env({"OTHER": "x"}) == {"DECISION_ADAPTER_READOUT": "cloze"}
    assert rehearsal.readout_env({"DECISION_ADAPTER_READOUT": "letters"}) == {}


def test_the_rule_hands_out_a_copy():
    added = rehearsal.readout_env({})
    added["DECISION_ADAPTER_READOUT"] = "letters"
    assert rehearsal.readout_env({}) == {"DECISION_ADAPTER_READOUT": "cloze"}

"""Answers of the adapter's scoring core built by hand, for tests of what renders or meters them."""

from __future__ import annotations

from decision_adapter.answer_record import AnswerRecord


def record(probabilities, **fields) -> AnswerRecord:
    """An answer of the scoring core with plain values wherever the test does not set one."""
    values = dict(
        readout="letters",
        method="letter-slots",
        option_logits=None,
        order="as_given",
        order_sensitivity=None,
        prior=None,
        calibration={},
        temperature=1.0,
        min_answer_mass=0.0,
        abstained=False,
        prediction_set=None,
        allowed_token_mass=0.9,
        forward_passes=1,
        input_tokens=20,
        read_tokens=20,
        top_token=1,
        top_token_text="A",
        label_tokens=(),
        prompt_sha256="0" * 64,
        question_eval_ms=1.0,
    )
    return AnswerRecord(probabilities=tuple(probabilities), **{**values, **fields})

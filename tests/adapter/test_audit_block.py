"""System One's audit block (apis/audit.py) without a model: which answer tokens a question's readout reads (slots.py),
and the block built from per-question facts and the model info."""

from __future__ import annotations

import hashlib
import json

from decision_adapter import slots
from decision_adapter.apis import audit

LETTERS = tuple(range(100, 116))  # 16 answer-letter token ids
GROUPS, DIGITS = tuple(range(200, 226)), tuple(range(300, 310))
INFO = {
    "sha256": "a" * 64,
    "quantization": "Q4_1",
    "gpu_layers_offloaded": 0,
    "calibration": None,
    "runtime": {"llama_cpp_python": "0.3.35"},
}


def test_letters_up_to_sixteen_then_the_groups_in_use_and_the_digits():
    assert slots.label_tokens(LETTERS, (GROUPS, DIGITS), 2) == LETTERS[:2]
    assert slots.label_tokens(LETTERS, (GROUPS, DIGITS), 16) == LETTERS
    assert slots.label_tokens(LETTERS, (GROUPS, DIGITS), 17) == GROUPS[:2] + DIGITS
    assert slots.label_tokens(LETTERS, (GROUPS, DIGITS), 20) == GROUPS[:2] + DIGITS
    assert slots.label_tokens(LETTERS, (GROUPS, DIGITS), 21) == GROUPS[:3] + DIGITS


def test_the_block_lists_per_question_facts_in_order():
    questions = [
        {"prompt_sha256": "1" * 64, "allowed_tokens": LETTERS[:2], "input_tokens": 30},
        {"prompt_sha256": "2" * 64, "allowed_tokens": LETTERS[:3], "input_tokens": 41},
    ]
    block = audit.audit_block(questions, INFO)
    assert block["model_hash"] == "a" * 64 and block["calibration_version"] == "none"
    assert block["prompt_template_sha256"] == ["1" * 64, "2" * 64] and block["input_tokens"] == [30, 41]
    assert block["allowed_token_set_hash"] == [
        hashlib.sha256(json.dumps(list(t)).encode()).hexdigest() for t in (LETTERS[:2], LETTERS[:3])
    ]
    assert block["backend"] == "llama.cpp cpu" and block["precision"] == "Q4_1" and "0.3.35" in block["build"]
    on_gpu = audit.audit_block(questions, {**INFO, "gpu_layers_offloaded": 31, "calibration": {"sha256": "c" * 64}})
    assert on_gpu["backend"] == "llama.cpp gpu" and on_gpu["calibration_version"] == "c" * 64


def test_a_combined_hash_depends_on_every_part_and_its_order():
    a, b = "1" * 64, "2" * 64
    assert audit.combined_sha256([a, b]) != audit.combined_sha256([b, a]) != audit.combined_sha256([a])

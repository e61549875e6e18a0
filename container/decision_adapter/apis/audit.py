"""The ``audit`` block of a System One answer: what produced it, so that it can be replayed.

Jev's client libraries require it (avrik-sdk's ``Audit``): the model's hash, the calibration version, and
per question (in question order) the rendered prompt's sha256, the hash of the answer tokens the readout
was restricted to, and the input tokens read; then the backend, the build and the precision. The same
hashes on the same backend and precision give the same answers.

A ``multi_label`` question is several prompts (a yes/no per label): its prompt hash is the sha256 of its
labels' prompt hashes joined in label order, and its input tokens their sum.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

UNCALIBRATED = "none"  # the calibration version when no calibration.json is in force


def token_set_hash(tokens: Iterable[int]) -> str:
    return hashlib.sha256(json.dumps(list(tokens)).encode("ascii")).hexdigest()


def combined_sha256(hashes: list[str]) -> str:
    return hashlib.sha256("\n".join(hashes).encode("ascii")).hexdigest()


def calibration_version(info: dict[str, Any]) -> str:
    """The sha256 of the calibration.json in force, or ``none``."""
    calibration = info.get("calibration") or {}
    return calibration.get("sha256") or UNCALIBRATED


def audit_block(per_question: list[dict[str, Any]], info: dict[str, Any]) -> dict[str, Any]:
    """``per_question``: {prompt_sha256, allowed_tokens, input_tokens} per question, in question order."""
    runtime = info.get("runtime") or {}
    return {
        "model_hash": info["sha256"],
        "adapter_hash": None,
        "calibration_version": calibration_version(info),
        "prompt_template_sha256": [q["prompt_sha256"] for q in per_question],
        "allowed_token_set_hash": [token_set_hash(q["allowed_tokens"]) for q in per_question],
        "input_tokens": [int(q["input_tokens"]) for q in per_question],
        "backend": "llama.cpp " + ("gpu" if info.get("gpu_layers_offloaded") else "cpu"),
        "build": f"llama-cpp-python {runtime.get('llama_cpp_python', 'unknown')}",
        "precision": info.get("quantization") or "unknown",
    }

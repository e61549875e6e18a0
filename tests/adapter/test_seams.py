"""The engine's seams: nothing below the engine may take it, so every parameter that carries the engine or one
of its seams is typed (``Engine``, or a protocol of seams.py), and the engine answers those protocols."""

from __future__ import annotations

import ast
from pathlib import Path

import decision_adapter
from decision_adapter import seams
from decision_adapter.engine import Engine
from decision_adapter.model import Model

ADAPTER = Path(decision_adapter.__file__).parent
CARRIERS = {"engine", "scorer", "evaluator", "labels"}  # the names the adapter gives the engine and its seams


def untyped_carriers(source: str) -> list[str]:
    """``line: function(parameter)`` for each parameter named as a carrier without an annotation."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            for arg in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
                if arg.arg in CARRIERS and arg.annotation is None:
                    found.append(f"{node.lineno}: {node.name}({arg.arg})")
    return found


def test_no_function_of_the_adapter_takes_an_untyped_engine():
    found = {
        str(path.relative_to(ADAPTER)): untyped_carriers(path.read_text()) for path in sorted(ADAPTER.rglob("*.py"))
    }
    assert {path: where for path, where in found.items() if where} == {}


def test_the_check_finds_an_untyped_engine():
    assert untyped_carriers("def f(engine, n: int):\n    pass\n") == ["1: f(engine)"]
    assert untyped_carriers("def f(engine: Engine):\n    pass\n") == []


def test_the_engine_answers_the_seams_the_core_is_handed():
    for protocol in (seams.Scorer, seams.Evaluator):
        for name in (n for n in dir(protocol) if not n.startswith("_")):
            assert hasattr(Engine, name) or name in {"model", "settings", "calibration", "priors"}, name  # set per lane
    for name in (n for n in dir(seams.Labels) if not n.startswith("_")):
        assert hasattr(Model, name), name

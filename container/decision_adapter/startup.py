"""The worker's start-up as the gunicorn arbiter sees it: loading, proving, ready.

A model can load and still kill its process on the first forward pass (a CPU
kernel that crashes). The worker therefore scores one decision before ``/ping``
says ready (``Engine.prove``), and records in a small JSON file how far it got.
When a worker exits before "ready", the arbiter (serve.py) reads the record,
logs one line that says what was running and what to try, and stops the whole
server with a non-zero status: SageMaker then marks the endpoint failed instead
of waiting for a worker that gunicorn would boot, and lose, again and again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

LOADING, PROVING, READY = "loading", "proving", "ready"

_WHAT_DIED = {
    LOADING: "while llama.cpp loaded the model",
    PROVING: "during its start-up decision (the first forward pass)",
}


class StartupRecord:
    """One JSON file, rewritten whole at each stage (rename is atomic, so a reader never sees half)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def write(self, stage: str, **details: object) -> None:
        record = {**(self.read() or {}), **details, "stage": stage, "pid": os.getpid()}
        partial = self.path.with_suffix(".partial")
        partial.write_text(json.dumps(record), encoding="utf-8")
        os.replace(partial, self.path)

    def read(self) -> dict[str, Any] | None:
        try:
            record = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) else None


def failure_line(record: dict[str, Any]) -> str:
    """The one log line for a worker that exited before it was ready."""
    stage = record.get("stage", LOADING)
    features = " ".join(record.get("cpu_features") or []) or "unknown"
    if record.get("extra_buffers"):
        advice = "set DECISION_ADAPTER_EXTRA_BUFFERS=off and start again"
    else:
        advice = (
            "extra buffer types were already off, so the llama.cpp build itself fails on this CPU: "
            "install llama-cpp-python built for a portable baseline (README: 'Works on every x86 machine')"
        )
    return (
        f"decision adapter did not start: the worker died {_WHAT_DIED.get(stage, 'before it was ready')} "
        f"on {record.get('model', 'the model')}; llama-cpp-python {record.get('llama_cpp_python', '?')}, "
        f"llama.cpp CPU features: {features}; extra buffer types "
        f"{record.get('extra_buffers_reason', 'unknown')}; {advice}"
    )

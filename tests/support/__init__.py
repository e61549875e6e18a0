"""Helpers the test rooms share, in one place (imported, never taken from a conftest).

Here: the adapter settings the in-process tests use, and running an outside command with its output
in a file; a model directory made of hard links, and a file cut short (no test copies the GGUF).
``http_client``: the one HTTP helper for tests that talk to a real adapter process.
``buildspec``: running a buildspec's commands with fakes for what CodeBuild provides.
``adapters``: the one place that starts adapter processes (the pool behind the conftest's fixtures).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

THREADS = 2


def adapter_settings(model_dir: Path, **env):
    from decision_adapter.settings import load_settings

    base = {"SM_MODEL_DIR": str(model_dir), "SM_LLAMA_CPP_THREADS": str(THREADS), "SM_LLAMA_CPP_CTX_SIZE": "2048"}
    base.update({k: str(v) for k, v in env.items()})
    return load_settings(base)


def console_script(name: str) -> str:
    """A console script installed next to this interpreter (the venv's), else on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        pytest.fail(
            f"{name} is not installed; run `make test` (it installs the dev extra) or "
            f"`.venv/bin/pip install -e '.[dev]'`"
        )
    return found


def run_tool(args: list[str], log_path: Path, *, timeout_s: float, env: dict | None = None) -> int:
    """Run a command with its output in a file; on timeout it is killed and the test fails."""
    with open(log_path, "wb") as log:
        try:
            return subprocess.run(
                args,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=timeout_s,
                env=env,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            pytest.fail(f"{Path(args[0]).name} did not finish within {timeout_s:g} s; see {log_path}")


def model_dir_view(model_dir: Path, target: Path) -> Path:
    """``target`` holding model_dir's files as hard links (the 98 MB GGUF is never copied; a symlink
    would lead out of the directory, which the adapter refuses), except ``model-manifest.json``, which
    is a copy the test may change. Replace a link with a file of its own before writing to it: writing
    through one would change the session's model."""
    target.mkdir(parents=True)
    for source in sorted(Path(model_dir).iterdir()):
        if source.name == "model-manifest.json":
            shutil.copyfile(source, target / source.name)
        elif source.is_dir():
            shutil.copytree(source, target / source.name, copy_function=os.link)
        else:
            os.link(source, target / source.name)
    return target


def partial_copy(source: Path, target: Path, size: int) -> Path:
    """The first ``size`` bytes of ``source`` as a file of its own at ``target`` (a symlink there is replaced)."""
    with open(source, "rb") as handle:
        head = handle.read(size)
    target.unlink(missing_ok=True)
    target.write_bytes(head)
    return target


def recorded_groups(registry_path: Path) -> list[int]:
    """The process groups a rehearsal's registry (rehearsal.json) records: its endpoints', then the emulator's."""
    import json

    data = json.loads(registry_path.read_text())
    return [e["pgid"] for e in data["endpoints"].values()] + ([data["emulator"]["pgid"]] if data["emulator"] else [])

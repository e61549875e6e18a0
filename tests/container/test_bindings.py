"""decision_adapter.bindings, which the Dockerfiles run at image build time, run here for real.

Here the pair is the Makefile's, built as the CPU image builds its own: llama-cpp-python's bindings
without a llama.cpp of their own (the CPU image's version) over the checkout's llama.cpp build in
.llama.cpp/bin, so the proof must pass; faults are introduced on purpose to see it fail.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from decision_adapter.bindings import BindingsMismatch, bindings_path, drop_bindings
from workshop_lib.models import embedded_gguf_path

pytestmark = pytest.mark.slow

# The Makefile's llama.cpp build, laid out as the DLC's /opt/llama.cpp/bin, and its venv (the stamp).
LOCAL_BUILD = Path(__file__).resolve().parents[2] / ".llama.cpp" / "bin"
makefile_venv = pytest.mark.skipif(
    not (Path(sys.prefix) / ".installed").exists(),
    reason="not the Makefile's venv (environment.yml's bindings carry their own llama.cpp)",
)


def llama_libraries(maps: str) -> list[Path]:
    """llama.cpp's libraries in a /proc/<pid>/maps text, as the kernel names them (links resolved)."""
    paths = {line.split(None, 5)[5].strip() for line in maps.splitlines() if len(line.split(None, 5)) == 6}
    return sorted(Path(p) for p in paths if Path(p).name.startswith(("libllama", "libggml", "libmtmd")))


def without(*names: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in names}


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "decision_adapter.bindings", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def prove_with_patched_bindings(tmp_path, patch: str) -> subprocess.CompletedProcess:
    """The proof with ``patch`` run first in its interpreter (as sitecustomize), to fake a faulty library."""
    (tmp_path / "sitecustomize.py").write_text(patch)
    return run("prove", "--model", str(embedded_gguf_path()), env={"PYTHONPATH": str(tmp_path)})


def test_the_local_build_passes_the_proof_the_image_build_runs():
    result = run("prove", "--model", str(embedded_gguf_path()))
    assert result.returncode == 0, result.stderr
    assert "bindings proof passed" in result.stdout
    # this build passes the check of prompts cut into calls, so flash attention (auto) is served, with reuse
    assert re.search(
        r"start-up check on this library: a prompt cut into calls answers within \S+ of it whole; "
        r"served with flash attention on, prefix reuse trim",
        result.stdout,
    ), result.stdout


@makefile_venv
def test_every_python_of_the_venv_loads_the_checkouts_build_without_being_told():
    """No LLAMA_CPP_LIB_PATH in the environment: the venv's .pth sets it, and the bindings, ggml's own
    loader and what they pull in all come from .llama.cpp/bin, as the image's come from /opt/llama.cpp/bin."""
    code = (
        "import json, os, llama_cpp, llama_cpp._ggml\n"
        "print(json.dumps({'env': os.environ.get('LLAMA_CPP_LIB_PATH'), 'lib': llama_cpp.llama_cpp._lib._name,"
        " 'maps': open('/proc/self/maps').read()}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=without("LLAMA_CPP_LIB_PATH", "LD_LIBRARY_PATH"),
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["env"], "the venv's .pth file did not set LLAMA_CPP_LIB_PATH (make .venv/.installed writes it)"
    assert Path(seen["env"]).resolve() == LOCAL_BUILD.resolve()
    assert Path(seen["lib"]) == Path(seen["env"]) / "libllama.so"
    mapped = llama_libraries(seen["maps"])
    assert {p.name.split(".so")[0] for p in mapped} >= {"libllama", "libggml", "libggml-base", "libggml-cpu"}
    assert all(p.parent == LOCAL_BUILD.resolve() for p in mapped), mapped


def _process_group(pgid: int) -> list[int]:
    members = []
    for proc in Path("/proc").iterdir():
        try:  # the fields after the command name: state, ppid, pgrp
            if proc.name.isdigit() and int((proc / "stat").read_text().rsplit(")", 1)[1].split()[2]) == pgid:
                members.append(int(proc.name))
        except (OSError, IndexError, ValueError):
            pass  # gone meanwhile
    return members


@makefile_venv
def test_a_started_adapter_runs_on_the_checkouts_libllama(adapter):
    """The adapter processes the tests start (here the shared one) map libllama from .llama.cpp/bin only."""
    group = _process_group(adapter.process.pid)
    mapped = [p for pid in group for p in llama_libraries(Path(f"/proc/{pid}/maps").read_text())]
    assert [p for p in mapped if p.name.startswith("libllama.so")], f"no process of {group} maps libllama"
    assert all(p.parent == LOCAL_BUILD.resolve() for p in mapped), mapped


@makefile_venv
def test_the_build_folder_finds_its_libraries_wherever_it_is(tmp_path):
    """llama-server and libllama find their libraries next to themselves ($ORIGIN), as in /opt/llama.cpp/bin."""
    moved = tmp_path / "bin"
    shutil.copytree(LOCAL_BUILD, moved, symlinks=True)
    for binary in ("llama-server", "libllama.so"):
        ldd = subprocess.run(
            ["ldd", str(moved / binary)], capture_output=True, text=True, timeout=60, env=without("LD_LIBRARY_PATH")
        )
        assert ldd.returncode == 0, ldd.stderr
        ours = {
            name.strip(): where.split(" (")[0].strip()
            for name, where in (line.split(" => ") for line in ldd.stdout.splitlines() if " => " in line)
            if name.strip().startswith(("libllama", "libggml", "libmtmd"))
        }
        assert "libggml.so.0" in ours and all(Path(w).parent == moved for w in ours.values()), ldd.stdout
    version = subprocess.run(
        [str(moved / "llama-server"), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        env=without("LD_LIBRARY_PATH"),
    )
    assert version.returncode == 0 and "version" in version.stdout + version.stderr, version.stderr


@pytest.mark.parametrize("readout, key", [("letters", "probabilities"), ("cloze", "cloze_probabilities")])
def test_probabilities_that_differ_from_the_reference_fail_the_proof(tmp_path, readout, key):
    from decision_adapter.bindings import REFERENCE

    reference = json.loads(REFERENCE.read_text())
    reference[key] = list(reversed(reference[key]))
    (tmp_path / "ref.json").write_text(json.dumps(reference))
    result = run("prove", "--model", str(embedded_gguf_path()), "--reference", str(tmp_path / "ref.json"))
    assert result.returncode == 1 and f"bindings proof FAILED: the decision read with {readout} scored" in result.stderr
    assert result.stderr.count("the decision read with") == 1, result.stderr  # the other readout still matches


def test_defaults_read_through_a_shifted_struct_fail_the_proof(tmp_path):
    """What a misaligned llama_context_params looks like from Python: the fields read other values."""
    result = prove_with_patched_bindings(
        tmp_path,
        (
            "import llama_cpp\n"
            "real = llama_cpp.llama_context_default_params\n"
            "def shifted():\n"
            "    p = real(); p.n_batch, p.n_ubatch = p.n_ubatch, p.n_seq_max; return p\n"
            "llama_cpp.llama_context_default_params = shifted\n"
        ),
    )
    assert result.returncode == 1
    assert "llama_context_default_params().n_batch reads 512, llama.cpp's default is 2048" in result.stderr


def test_sequence_states_that_do_not_round_trip_fail_the_proof(tmp_path):
    """What a library whose state calls disagree with the bindings could do: save bytes that load as other
    values. Here the last 1 % of every saved sequence (values of the last layer; the headers before them stay
    intact, so it loads) is overwritten after llama.cpp wrote it."""
    result = prove_with_patched_bindings(
        tmp_path,
        (
            "import ctypes, llama_cpp\n"
            "real = llama_cpp.llama_state_seq_get_data_ext\n"
            "def garbled(ctx, dst, size, seq_id, flags):\n"
            "    written = real(ctx, dst, size, seq_id, flags)\n"
            "    ctypes.memset(ctypes.addressof(dst) + written - written // 100, 0x3c, written // 100)\n"
            "    return written\n"
            "llama_cpp.llama_state_seq_get_data_ext = garbled\n"
        ),
    )
    assert result.returncode == 1
    assert "bindings proof FAILED: through restore the decision scored" in result.stderr
    assert "the decision scored" not in result.stderr.replace("through restore the decision scored", "")


def test_drop_removes_exactly_the_named_bindings():
    source = bindings_path().read_text(encoding="utf-8")
    trimmed = drop_bindings(source, ["llama_adapter_meta_val_str", "llama_get_logits_ith"])
    names = {getattr(n, "name", None) for n in ast.parse(trimmed).body}
    assert "llama_adapter_meta_val_str" not in names and "llama_get_logits_ith" not in names
    assert {"llama_adapter_meta_count", "llama_get_logits", "llama_decode"} <= names
    assert len(source.splitlines()) - len(trimmed.splitlines()) > 20
    with pytest.raises(BindingsMismatch, match="llama_not_a_function"):
        drop_bindings(source, ["llama_not_a_function"])


def test_the_drop_command_edits_the_installed_bindings_and_they_still_import(tmp_path):
    """The Dockerfile's step on a copy of the installed package (as the image's pip put it)."""
    package = bindings_path().parent
    shutil.copytree(package, tmp_path / "llama_cpp", ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PYTHONPATH": str(tmp_path)}
    result = run("drop", "llama_adapter_meta_val_str", env=env)
    assert result.returncode == 0, result.stderr
    assert str(tmp_path / "llama_cpp" / "llama_cpp.py") in result.stdout
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            "import llama_cpp; print(llama_cpp.__file__, "
            "hasattr(llama_cpp, 'llama_adapter_meta_val_str'), hasattr(llama_cpp, 'llama_decode'))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
    assert check.returncode == 0, check.stderr
    where, dropped_present, kept_present = check.stdout.split()
    assert Path(where).is_relative_to(tmp_path) and (dropped_present, kept_present) == ("False", "True")

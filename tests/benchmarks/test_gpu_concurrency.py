"""The GPU script's parts that need no GPU: the shell script's plan (--dry-run) and lint, and the Python
entry's plan, offload check and report on synthetic figures. The GPU run itself is not tested here."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import concurrency, gpu_concurrency

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_concurrency.sh"


def makefile_var(name: str) -> str:
    return re.search(rf"^{name} := (.*)$", (ROOT / "Makefile").read_text(), re.M).group(1)


def dry_run(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {
        "PATH": "/usr/bin:/bin",
        "GPU_MODEL_STAGE": str(tmp_path / "stage"),
        "HOME": str(tmp_path),
        "PYTHON": sys.executable,
    }
    return subprocess.run(
        [str(SCRIPT), "--dry-run", *args], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path
    )


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="no shellcheck (apt-get install shellcheck)")
def test_the_script_is_shellcheck_clean():
    result = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout


def test_the_dry_run_builds_llama_cpp_for_cuda_with_the_makefiles_flags_and_runs_the_table(tmp_path):
    result = dry_run("--", "--seconds", "15", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    configure = next(line for line in lines if line.startswith("+ cmake -S"))
    assert "-DGGML_CUDA=on" in configure and "-DCMAKE_CUDA_ARCHITECTURES=90" in configure
    for flag in makefile_var("LLAMA_SERVER_ARGS").split() + makefile_var("LLAMA_CMAKE_ARGS").split():
        assert flag in configure.split()
    assert any(line.startswith("+ cmake --build") and "--target llama-server" in line for line in lines)
    table = next(line for line in lines if "-m benchmarks.gpu_concurrency" in line)
    assert "LLAMA_CPP_LIB_PATH=" in table and "WORKSHOP_LLAMA_SERVER=" in table and table.endswith("--seconds 15")
    # steps are printed, never run: the stage folder it names is not made
    assert f"+ mkdir -p {tmp_path / 'stage'}" in lines and not (tmp_path / "stage").exists()


def test_the_dry_run_of_prepare_downloads_the_locked_versions_for_the_gpu_machines_python(tmp_path):
    result = dry_run("prepare", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    download = next(line for line in result.stdout.splitlines() if "pip download" in line)
    assert "--python-version 3.12" in download and "--only-binary=:all:" in download
    lock = (ROOT / "container" / "requirements.lock").read_text()
    for name in ("flask", "gunicorn", "pydantic", "pydantic-core"):
        version = re.search(rf"^{name}==(\S+)", lock, re.M).group(1)
        assert f"{name}=={version}" in download.split()


def test_an_unknown_argument_is_refused_naming_the_choices(tmp_path):
    result = dry_run("bogus", tmp_path=tmp_path)
    assert result.returncode == 2 and "unknown argument 'bogus'" in result.stderr and "prepare" in result.stderr


def test_the_python_entrys_dry_run_prints_the_plan(capsys):
    assert gpu_concurrency.main(["--dry-run", "--levels", "1,8", "--seconds", "5"]) == 0
    out = capsys.readouterr().out
    assert "cells: 6" in out and "C = 1, 8" in out and "-ngl 999" in out and "C=8 throughput >= 3x C=1's" in out


@pytest.mark.parametrize("text", ["1,x", "0,2", ""])
def test_bad_levels_are_refused(text):
    with pytest.raises(SystemExit):
        gpu_concurrency.main(["--dry-run", "--levels", text])


def test_the_offload_check_reads_each_server_log(tmp_path):
    (tmp_path / "llama-server-np8.log").write_text("load_tensors: offloaded 31/31 layers to GPU\n")
    (tmp_path / "adapter-default.log").write_text("loaded x.gguf in 0.2 s; llama.cpp offloaded 0/31 layers to GPU\n")
    (tmp_path / "adapter-parallel-8.log").write_text("nothing about layers\n")
    assert gpu_concurrency.offload(tmp_path) == {
        "adapter-default": "0/31",
        "adapter-parallel-8": None,
        "llama-server-np8": "31/31",
    }


def test_the_gpu_report_gives_the_verdict_and_warns_about_a_server_left_on_the_cpu():
    def cell(per_s):
        return {"per_s": per_s, "p50_ms": 10.0, "p95_ms": 20.0, "busy_503": 0, "decisions": 100}

    rows = {name: {"1": cell(10.0), "8": cell(per_s)} for name, per_s in zip(concurrency.ROWS, (35.0, 12.0, 40.0))}
    table = {
        "levels": [1, 8],
        "tasks_per_cell": 1000,
        "seconds_per_cell": 10.0,
        "prompts": 48,
        "threads": 2,
        "gpu_layers": 999,
        "rows": rows,
        **concurrency.summarise(rows),
        "start_up_checks": {
            "adapter-default": ["0 with flash attention off"],
            "adapter-parallel-8": [
                "0.4 with flash attention on",
                "flash attention left off",
                "0 with flash attention off",
            ],
        },
    }
    figures = {
        "machine": {"gpu": "NVIDIA H200, 580", "cpu": "x", "cores": 16, "llama_server_build": "b1"},
        "model": "m.gguf",
        "offloaded": {"adapter-default": "31/31", "llama-server-np8": None},
        "concurrency": table,
    }
    text = gpu_concurrency.report(figures)
    assert "NVIDIA H200" in text and "999 GPU layers" in text
    assert f"{concurrency.ROWS['adapter_parallel']}: C=8 throughput 3.50x C=1's (meets >= 3x on a GPU)" in text
    assert f"{concurrency.ROWS['adapter_deployed']}: C=8 throughput 1.20x C=1's (MISSES >= 3x on a GPU)" in text
    assert "WARNING: llama-server-np8 did not report offloading" in text
    assert (
        "per adapter: adapter-default 0 with flash attention off; adapter-parallel-8 0.4 with flash "
        "attention on, flash attention left off, 0 with flash attention off"
    ) in text
    assert "NOTE: the check turned something off in adapter-parallel-8:" in text

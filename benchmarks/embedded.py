"""The decision benchmark on the embedded model: ``python -m benchmarks.embedded``.

Packages the embedded model (SmolLM2-135M) as SageMaker receives it, starts the
real adapter on a local port with 2 threads, runs ``workshop_lib.evaluation`` over the
packaged task set (decision readout and calibration on every task; generation
baseline, option-order test and debiased readout on ``--study-limit`` of them),
writes report.json, report.md and the PNGs to ``--out`` and stops the adapter.

The embedded model is tiny: the figures show the mechanics and the costs, not the
accuracy of the pinned 4B model.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

from workshop_lib.client import EndpointClient
from workshop_lib.demo import prepare_model_dir
from workshop_lib.evaluation import run_benchmark
from workshop_lib.local import AdapterProcess

THREADS = 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.embedded", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="benchmarks/results/embedded")
    parser.add_argument("--work-dir", default=".workshop/bench-embedded")
    parser.add_argument("--limit", type=int, help="tasks for the decision readout (default: all)")
    parser.add_argument("--study-limit", type=int, help="tasks for the baseline and order studies (default: all)")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    work = Path(args.work_dir).resolve()
    model_dir, _ = prepare_model_dir(work)
    with AdapterProcess(model_dir, log_path=work / "adapter.log", threads=THREADS) as adapter:
        client = EndpointClient.local(adapter.url)
        report = run_benchmark(
            client,
            limit=args.limit,
            study_limit=args.study_limit,
            baseline=True,
            bias=True,
            debias=True,
            calibrate=True,
            label="embedded",
            title="Decision benchmark: embedded SmolLM2-135M, local adapter, 2 threads",
        )
    elapsed = time.perf_counter() - started
    report.notes.append(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, no GPU, load average at the end "
        f"{os.getloadavg()[0]:.1f}; whole run {elapsed / 60:.1f} min"
    )
    paths = report.save(args.out)
    print(report.to_markdown())
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

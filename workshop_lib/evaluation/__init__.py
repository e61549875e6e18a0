"""Decisions measured against labelled tasks: validity, accuracy, latency, a generation baseline,
position bias and calibration, against any ``EndpointClient`` (notebook 06, ``workshop bench``).

    from workshop_lib.evaluation import run_notebook_benchmark
    report = run_notebook_benchmark(client, limit=20)   # packaged tasks, every study on
    report.plot(); report.save("bench-results")

Modules, each importing only those above it in this list:

* ``tasks`` (JevBench / decision records -> requests), ``scoring`` (validity, argmax, ties),
  ``temperature`` (temperature scaling: the fit, NLL, ECE, Brier);
* ``runner`` (sequential or N concurrent clients; ``TaskResult`` and ``Run``);
* ``profiles`` (the per-profile temperature fit and ``calibration.json``), ``bias`` (order test,
  flip rate), ``baseline`` (generation through chat), ``logprobs`` (letter probabilities from the
  standard endpoint);
* ``served`` (tasks in one of the adapter's order modes, ``calibrate``);
* ``order_study`` (the order modes side by side), ``report`` (the numbers of one benchmark, as data);
* ``markdown`` and ``plots`` (rendering a report), then ``report_view`` (a report that shows and saves
  itself);
* ``suite`` (all of it in one call).

Pure computations are kept apart from the functions that call the endpoint. The project's own
performance benchmarks of the adapter are elsewhere: the top-level ``benchmarks`` package.
"""

from .report import BenchReport, compare, load_comparison, percentile, summarize
from .report_view import ReportView
from .runner import Run, TaskResult, run_decisions
from .suite import run_benchmark, run_notebook_benchmark
from .tasks import Task, TaskFormatError, default_tasks_path, load_tasks, resolve_tasks

__all__ = [
    "BenchReport",
    "ReportView",
    "Run",
    "Task",
    "TaskFormatError",
    "TaskResult",
    "compare",
    "default_tasks_path",
    "load_comparison",
    "load_tasks",
    "percentile",
    "resolve_tasks",
    "run_benchmark",
    "run_decisions",
    "run_notebook_benchmark",
    "summarize",
]

"""The decision benchmark: validity, accuracy, latency, a generation baseline,
position bias and calibration, against any ``EndpointClient``.

    from workshop_lib.bench import run_notebook_benchmark
    report = run_notebook_benchmark(client, limit=20)   # packaged tasks, every study on
    report.plot(); report.save("bench-results")

Modules: ``tasks`` (JevBench / decision records -> requests), ``scoring`` (validity,
argmax, ties), ``runner`` (sequential or N concurrent clients), ``report`` (the numbers,
side by side, JSON), ``markdown`` and ``plots`` (rendering a report), ``report_view`` (a
report that shows and saves itself), ``baseline`` (generation through chat),
``bias`` (order test, flip rate), ``calibration`` (temperature, ECE, Brier),
``suite`` (all of it in one call); for the adapter's own order modes and served
calibration: ``served`` (tasks in an order mode, ``calibrate``), ``profiles`` (the
per-profile temperature fit and ``calibration.json``) and ``order_study`` (the modes
side by side). Pure computations are kept apart from the functions that call the endpoint.
"""

from .report import BenchReport, compare, load_comparison, percentile, summarize
from .report_view import ReportView
from .runner import Run, TaskResult, run_decisions
from .suite import run_benchmark, run_notebook_benchmark
from .tasks import Task, TaskFormatError, default_tasks_path, load_tasks, resolve_tasks

__all__ = ["BenchReport", "ReportView", "Run", "Task", "TaskFormatError", "TaskResult", "compare", "default_tasks_path",
           "load_comparison", "load_tasks", "percentile", "resolve_tasks", "run_benchmark", "run_decisions",
           "run_notebook_benchmark", "summarize"]

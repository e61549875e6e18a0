"""The whole benchmark in one call: decision readout, then the opt-in studies.

Order of the phases (each one a sequential pass unless noted):

1. the decision readout over all tasks (``concurrency`` clients; 1 = as the blog);
2. ``bias``: the same tasks with the options reversed (the order test);
3. ``debias``: the order-debiased readout, for the original and the reversed order;
4. ``baseline``: the generation baseline through the chat schema (last, because a
   chat request resets the adapter's cached prefix);
5. ``calibrate``: computed from the decision readout, no extra requests.

The studies run on the first ``study_limit`` tasks (all by default), so a quick run
can keep them small.
"""

from __future__ import annotations

from pathlib import Path

from .baseline import MAX_TOKENS, run_generation_baseline
from .bias import run_debiased, run_order_test
from .report import BenchReport
from .runner import run_decisions, run_systemone
from .tasks import Task, default_tasks_path, load_tasks, select


def resolve_tasks(tasks=None, limit: int | None = None) -> tuple[list[Task], str]:
    """(tasks, where they came from) from a path, a list of tasks, or None (the packaged set)."""
    if tasks is None:
        return load_tasks(None, limit=limit), "the packaged task set (workshop_lib/bench/data/tasks.jsonl)"
    if isinstance(tasks, (str, Path)):
        return load_tasks(tasks, limit=limit), str(tasks)
    return select(list(tasks), limit), "the given tasks"


def run_benchmark(client, tasks=None, *, limit: int | None = None, concurrency: int = 1,
                  baseline: bool = False, bias: bool = False, debias: bool = False, calibrate: bool = False,
                  rotations: int | None = None, study_limit: int | None = None, order: str = "reversed",
                  max_tokens: int = MAX_TOKENS, label: str = "decision", compare_with: dict | None = None,
                  title: str = "Decision benchmark", progress: bool = True, schema: str = "decision") -> BenchReport:
    """Run the benchmark against ``client`` (any ``EndpointClient``) and return a ``BenchReport``.

    ``tasks``: a JSONL path, a list of ``Task`` or None for the packaged set; ``limit`` keeps
    that many, spread across families. ``rotations``: k for the debiased readout (default:
    as many as the task has options). ``compare_with``: ``report.load_comparison(path)``.
    ``schema``: "decision" (the project's schema) or "systemone" (the same tasks as Jev questions);
    the studies (baseline, order, calibration) always use the decision schema.
    """
    chosen, source = resolve_tasks(tasks, limit)
    studied = select(chosen, study_limit)
    if schema not in ("decision", "systemone"):
        raise ValueError(f"schema must be 'decision' or 'systemone', not {schema!r}")
    main = run_systemone if schema == "systemone" else run_decisions
    runs = {"decision": main(client, chosen, concurrency=concurrency, progress=progress, label=label)}
    if bias or debias:
        runs["decision_reversed"] = run_order_test(client, studied, order=order, progress=progress, label=label)
    if debias:
        runs["debiased"] = run_debiased(client, studied, order="original", rotations=rotations, progress=progress)
        runs["debiased_reversed"] = run_debiased(client, studied, order=order, rotations=rotations,
                                                 progress=progress)
    if baseline:
        runs["generation"] = run_generation_baseline(client, studied, max_tokens=max_tokens, progress=progress)
    notes = []
    if len(studied) < len(chosen) and (bias or debias or baseline):
        notes.append(f"baseline / order studies on {len(studied)} of the {len(chosen)} tasks")
    return BenchReport(runs=runs, title=title, tasks_source=source, calibrate=calibrate,
                       compare_with=compare_with, notes=notes)


def run_notebook_benchmark(client, tasks=None, limit: int | None = None, *, baseline: bool = True,
                           bias: bool = True, debias: bool = True, calibrate: bool = True, **options) -> BenchReport:
    """Notebook 06's one call: every study switched on; ``report.plot()`` draws the figures,
    ``report.to_markdown()`` (or just showing ``report``) gives the tables, ``report.save(dir)`` writes them."""
    return run_benchmark(client, tasks, limit=limit, baseline=baseline, bias=bias, debias=debias,
                         calibrate=calibrate, **options)


__all__ = ["default_tasks_path", "resolve_tasks", "run_benchmark", "run_notebook_benchmark"]

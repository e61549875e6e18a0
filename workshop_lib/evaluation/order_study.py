"""The adapter's order modes side by side: accuracy, flips under reversal, order sensitivity, cost,
calibration on a held-out split, and risk against coverage when low-mass answers abstain.

``ask_in_each_mode(client, body)`` asks one decision in each mode and shows the answers side by side
(notebook 05). ``measure_order_modes(client, tasks)`` sends every task in each order mode twice (options as
declared, then reversed), at temperature 1, and returns an ``OrderStudy``: its figures, and the
``calibration.json`` each mode's run would give (``study.calibration("as_given")``). The rest of the
module is pure arithmetic on runs, tested on fixed inputs:

* ``flip_stats`` (bias.py): the share of tasks whose top option changes when only the order of the options changes;
* ``mean_sensitivity``: the rotations' own measure of disagreement (``order_sensitivity``);
* ``per_token_ms`` and ``rotation_cost``: rotations evaluate the state and question once and one
  options block per rotation; their extra time is compared with what their extra tokens cost at
  the engine's per-token rate (a measured rate, else the ``as_given`` answers' evaluation time per
  token they evaluated, or per token read when nobody counted those);
* ``heldout_calibration``: NLL, ECE and Brier before and after the fitted profiles, on the held-out tasks;
* ``risk_coverage``: for each ``min_answer_mass`` threshold, the share of tasks answered (the
  answer letters held at least that much of the next-token mass) and the error rate among them.

Figures are printed, never asserted: speed on a shared machine is noise, and a small model's accuracy is not the point.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..client.endpoint import EndpointClient
from ..display import DecisionView
from ..errors import WorkshopError
from .bias import flip_stats
from .profiles import LETTERS, ORDER_MODES, calibration_document, labelled, write_document
from .runner import Run, TaskResult, evaluated_tokens, progress_bar
from .served import run_mode
from .tasks import Task, resolve_tasks
from .temperature import metrics, split_for_calibration

THRESHOLDS = (0.0, 0.05, 0.1, 0.2, 0.5, 0.8, 0.9, 0.95, 0.98)  # small models put little mass on the letters
ROTATION_COST_TARGET = 1.05  # rotations' extra time over what their extra tokens cost
RATE_SOURCES = {
    "given": "the rate given",
    "evaluated": "as_given's time per token evaluated, the kept head left out",
    "read": "as_given's time per token read, the kept head included: the ratio is an upper bound",
}


def _ms(result: TaskResult) -> float | None:
    return result.server_ms if isinstance(result.server_ms, (int, float)) else result.client_latency_ms


def _measured(result: TaskResult) -> tuple[float, int] | None:
    """(milliseconds, evaluated tokens) of a valid answer that has both."""
    ms, tokens = _ms(result), evaluated_tokens(result)
    return (ms, tokens) if result.valid and ms is not None and tokens is not None else None


def accuracy(results: Sequence[TaskResult]) -> float | None:
    return sum(r.correct for r in results) / len(results) if results else None


def mean_sensitivity(results: Iterable[TaskResult]) -> dict[str, Any]:
    """Mean ``max_spread`` and the share of ``top_changes`` over the answers that report ``order_sensitivity``."""
    found = [
        r.extra["order_sensitivity"]
        for r in results
        if r.valid and isinstance(r.extra.get("order_sensitivity"), Mapping)
    ]
    if not found:
        return {"n": 0, "max_spread": None, "top_changes": None, "presentations": None}
    return {
        "n": len(found),
        "max_spread": statistics.mean(float(s["max_spread"]) for s in found),
        "top_changes": sum(bool(s["top_changes"]) for s in found) / len(found),
        "presentations": statistics.mean(float(s["presentations"]) for s in found),
    }


def per_token_ms(tokens: Sequence[float], ms: Sequence[float]) -> float | None:
    """The slope of time against tokens (least squares): what one more evaluated token costs."""
    if len(tokens) < 2 or len(set(tokens)) < 2:
        return None
    slope, _ = np.polyfit(np.asarray(tokens, dtype=float), np.asarray(ms, dtype=float), 1)
    return float(slope)


def rotation_cost(
    base: Sequence[TaskResult],
    rotations: Sequence[TaskResult],
    rate_ms: float | None = None,
    head_tokens: int | None = None,
) -> dict[str, Any]:
    """Rotations' extra time against what their extra tokens cost at ``rate_ms`` per token.

    Tasks answered in both runs are paired; ``ratio`` is the summed extra milliseconds over the summed
    extra tokens times the rate (None when it cannot be formed). Without ``rate_ms`` the rate is read
    from ``base``: its evaluation time over the tokens it evaluated, summed over the answers. Each answer
    read the fixed head that the server keeps between requests without evaluating it: with
    ``head_tokens`` (its length, which an in-process engine fed the same requests shows) those are
    left out; without, the rate is too low and the ratio too high (``rate_source`` says which).
    """
    by_id = {r.task_id: (r, m) for r in base if (m := _measured(r))}
    pairs = [(by_id[r.task_id][1], m) for r in rotations if r.task_id in by_id and (m := _measured(r))]
    source = "given"
    if rate_ms is None:
        usable = list(by_id.values())
        source = "read" if head_tokens is None else "evaluated"
        spent = sum(float(r.timing.get("evaluate_ms", ms)) for r, (ms, _) in usable)
        read = sum(tokens - (head_tokens or 0) for _, (_, tokens) in usable)
        rate_ms = spent / read if usable and read > 0 else None
    extra_ms = sum(r_ms - b_ms for (b_ms, _), (r_ms, _) in pairs)
    extra_tokens = sum(r_tokens - b_tokens for (_, b_tokens), (_, r_tokens) in pairs)
    cost = rate_ms * extra_tokens if rate_ms is not None else None
    ratio = extra_ms / cost if pairs and cost and cost > 0 else None
    return {
        "pairs": len(pairs),
        "rate_ms_per_token": rate_ms,
        "rate_source": source,
        "extra_ms": extra_ms,
        "extra_tokens": extra_tokens,
        "token_cost_ms": cost,
        "ratio": ratio,
        "target": ROTATION_COST_TARGET,
    }


def risk_coverage(results: Sequence[TaskResult], thresholds: Sequence[float] = THRESHOLDS) -> list[dict[str, Any]]:
    """Per threshold: answered (mass at least the threshold), coverage (answered / tasks) and risk (wrong /
    answered). An invalid or failed answer counts as a task never answered; an answer without
    ``allowed_token_mass`` is answered only at threshold 0."""
    total = len(results)
    rows = []
    for t in thresholds:
        answered = [
            r
            for r in results
            if r.valid
            and (
                t <= 0
                or (isinstance(r.extra.get("allowed_token_mass"), (int, float)) and r.extra["allowed_token_mass"] >= t)
            )
        ]
        wrong = sum(not r.correct for r in answered)
        rows.append(
            {
                "min_answer_mass": t,
                "answered": len(answered),
                "tasks": total,
                "coverage": len(answered) / total if total else None,
                "risk": wrong / len(answered) if answered else None,
            }
        )
    return rows


def heldout_calibration(results: Sequence[TaskResult], doc: Mapping[str, Any]) -> dict[str, Any]:
    """NLL, ECE, Brier and accuracy on the held-out answers at temperature 1 and with the file's kept profiles."""
    _, heldout, _ = split_for_calibration(results)
    rows = [row for row in map(labelled, heldout) if row is not None]
    if not rows:
        return {"n": 0}
    temps = {name: (p["temperature"] if p["kept"] else 1.0) for name, p in doc["profiles"].items()}
    before = [list(r.log_probs) for r in rows]
    after = [[v / temps.get(r.profile, 1.0) for v in r.log_probs] for r in rows]
    targets = [r.target for r in rows]
    b, a = metrics(before, targets, 1.0), metrics(after, targets, 1.0)
    keys = ("nll", "ece", "brier", "accuracy")
    return {
        "n": len(rows),
        "before": {k: b[k] for k in keys},
        "after": {k: a[k] for k in keys},
        "kept": sorted(name for name, p in doc["profiles"].items() if p["kept"]),
    }


def set_figures(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The prediction sets of a calibration document, over its kept thresholds: alpha, and the coverage and
    mean set size on the fitting split (each profile's threshold was fitted on the held-out one), weighted by
    each profile's fitting answers."""
    kept = {name: p for name, p in doc["profiles"].items() if (p.get("conformal") or {}).get("kept")}
    n = sum(p["fit_n"] for p in kept.values())
    if not n:
        return {"alpha": doc.get("alpha"), "n": 0, "kept": []}
    return {
        "alpha": doc.get("alpha"),
        "n": n,
        "kept": sorted(kept),
        "coverage": sum(p["conformal"]["fit_coverage"] * p["fit_n"] for p in kept.values()) / n,
        "mean_size": sum(p["conformal"]["fit_set_size"] * p["fit_n"] for p in kept.values()) / n,
    }


def mode_figures(original: Run, reversed_run: Run, base: Run | None = None) -> dict[str, Any]:
    """One order mode's figures; ``base`` is the ``as_given`` run its latency is compared with."""
    results = original.results
    ms = [m for r in results if r.valid and (m := _ms(r)) is not None]
    tokens = [n for r in results if r.valid and (n := evaluated_tokens(r)) is not None]
    figures: dict[str, Any] = {
        "mode": original.settings.get("order_mode"),
        "tasks": len(results),
        "valid": sum(r.valid for r in results),
        "accuracy": accuracy(results),
        "flips": flip_stats(results, reversed_run.results),
        "sensitivity": mean_sensitivity(results),
        "p50_ms": statistics.median(ms) if ms else None,
        "tokens_mean": statistics.mean(tokens) if tokens else None,
        "risk_coverage": risk_coverage(results),
    }
    if base is not None and base is not original:
        base_ms = [m for r in base.results if r.valid and (m := _ms(r)) is not None]
        figures["p50_over_as_given"] = (
            figures["p50_ms"] / statistics.median(base_ms)
            if ms and base_ms and statistics.median(base_ms) > 0
            else None
        )
    return figures


@dataclass
class OrderStudy:
    """The runs of ``measure_order_modes`` and what they show; ``text()`` prints it."""

    by_mode: dict[str, tuple[Run, Run]]  # mode -> (options as declared, reversed)
    tasks: str = "tasks"
    head_tokens: int | None = None  # the fixed head the server keeps between requests, if known
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        base = self.by_mode.get("as_given", (None, None))[0]
        for mode, (original, reversed_run) in self.by_mode.items():
            row = mode_figures(original, reversed_run, base)
            doc = self.calibration(mode)
            row["calibration"] = heldout_calibration(original.results, doc) if doc else {"n": 0}
            row["prediction_sets"] = set_figures(doc) if doc else {"alpha": None, "n": 0, "kept": []}
            if mode == "rotations" and base is not None:
                row["rotation_cost"] = rotation_cost(base.results, original.results, head_tokens=self.head_tokens)
            self.figures[mode] = row

    @property
    def ok(self) -> bool:
        """Every request of every mode came back as a valid answer."""
        return bool(self.by_mode) and all(
            r.valid for pair in self.by_mode.values() for run in pair for r in run.results
        )

    @property
    def problem(self) -> str:
        bad = {
            f"{mode} ({which})": sum(not r.valid for r in run.results)
            for mode, pair in self.by_mode.items()
            for which, run in zip(("options as declared", "reversed"), pair)
        }
        bad = {k: n for k, n in bad.items() if n}
        return "; ".join(f"{n} invalid or failed answers in {k}" for k, n in bad.items())

    @property
    def summary(self) -> str:
        n = sum(len(run.results) for pair in self.by_mode.values() for run in pair)
        return f"{n} answers in {len(self.by_mode)} order modes, each valid" if self.ok else self.problem

    def save_calibration(self, path: str | Path, mode: str = "as_given") -> Path:
        """Write the ``calibration.json`` of ``mode``'s run to ``path`` (a folder gets the file inside it)."""
        doc = self.calibration(mode)
        if doc is None:
            raise WorkshopError(
                f"the {mode} run has no valid answer among its fitting tasks (split dev, or half "
                "the tasks by a hash of their id): run more tasks"
            )
        return write_document(doc, path)

    def calibration(self, mode: str = "as_given") -> dict[str, Any] | None:
        """The ``calibration.json`` this study's run in ``mode`` gives (None when it has nothing to fit)."""
        if mode not in self.by_mode:
            return None
        try:
            return calibration_document(self.by_mode[mode][0].results, order=mode, tasks=self.tasks)
        except ValueError:  # CalibrationFileError: no valid fitting answer, or answers from several models
            return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": self.tasks,
            "figures": self.figures,
            "runs": [run.to_dict() for pair in self.by_mode.values() for run in pair],
        }

    def text(self) -> str:
        return format_study(self.figures)

    def __str__(self) -> str:
        return self.text()

    def _repr_markdown_(self) -> str:
        return "```\n" + self.text() + "\n```"


def _pct(value: float | None) -> str:
    return "   -  " if value is None else f"{100 * value:5.1f}%"


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_study(figures: Mapping[str, Mapping[str, Any]]) -> str:
    """The figures as a few aligned lines per mode."""
    lines = ["order mode   accuracy  flips (reversed)  mean spread  top changes  p50 ms  vs as_given  tokens"]
    for mode, f in figures.items():
        flips = f["flips"]
        flip_text = f"{flips['flips']}/{flips['compared']} {_pct(flips['rate'])}"
        s = f["sensitivity"]
        ratio = f.get("p50_over_as_given")
        lines.append(
            f"{mode:<12} {_pct(f['accuracy'])}   {flip_text:<16}  {_num(s['max_spread']):>11}  "
            f"{_pct(s['top_changes']):>11}  {_num(f['p50_ms'], 1):>6}  "
            f"{(_num(ratio, 2) + 'x') if ratio is not None else '-':>11}  {_num(f['tokens_mean'], 1)}"
        )
    for mode, f in figures.items():
        cost = f.get("rotation_cost")
        if cost:
            lines.append(
                f"{mode}: extra time {_num(cost['extra_ms'], 1)} ms for {cost['extra_tokens']} extra tokens "
                f"over {cost['pairs']} tasks; at {_num(cost['rate_ms_per_token'], 4)} ms/token "
                f"({RATE_SOURCES[cost['rate_source']]}) they cost "
                f"{_num(cost['token_cost_ms'], 1)} ms: extra time / token cost = "
                f"{_num(cost['ratio'], 2)}x (target <= {cost['target']})"
            )
    lines.append("calibration on the held-out split (temperature 1 -> fitted profiles, kept ones applied)")
    for mode, f in figures.items():
        c = f["calibration"]
        if not c.get("n"):
            lines.append(f"  {mode:<10} no held-out answers to judge a fit on")
            continue
        b, a = c["before"], c["after"]
        lines.append(
            f"  {mode:<10} n={c['n']:<3} NLL {b['nll']:.3f} -> {a['nll']:.3f}  ECE {b['ece']:.3f} -> "
            f"{a['ece']:.3f}  Brier {b['brier']:.3f} -> {a['brier']:.3f}  kept: "
            f"{', '.join(c['kept']) or 'none'}"
        )
    lines.append(
        "prediction sets on the fitting split (thresholds fitted on the held-out split; target coverage 1 - alpha)"
    )
    for mode, f in figures.items():
        sets = f.get("prediction_sets") or {}
        if not sets.get("n"):
            lines.append(f"  {mode:<10} no kept threshold (too few held-out answers per profile)")
            continue
        lines.append(
            f"  {mode:<10} n={sets['n']:<3} coverage {_pct(sets['coverage']).strip()} (1 - alpha = "
            f"{1 - sets['alpha']:.0%})  mean size {sets['mean_size']:.2f}  kept: {', '.join(sets['kept'])}"
        )
    lines.append("risk / coverage over min_answer_mass (answered share, error rate among the answered)")
    for mode, f in figures.items():
        cells = [
            f"{row['min_answer_mass']:g}: {_pct(row['coverage']).strip()} / {_pct(row['risk']).strip()}"
            for row in f["risk_coverage"]
        ]
        lines.append(f"  {mode:<10} " + ", ".join(cells))
    return "\n".join(lines)


class OrderModesView(DecisionView):
    """One decision asked in each order mode: a chart each, and what each mode reports."""

    def lines(self) -> list[str]:
        # prior and rotations are the letters readout's: the modes are asked with letters whatever the server's
        # default readout is, and the view says so rather than switch readouts unseen.
        out = [f"order modes, read with {LETTERS} (the readout the order modes belong to)", *super().lines()]
        for decision in self.decisions:
            raw = decision.raw or {}
            mode, sensitivity, prior = raw.get("order"), raw.get("order_sensitivity"), raw.get("prior")
            if sensitivity:
                out.append(
                    f"{mode}: {sensitivity['presentations']} presentations of {sensitivity['of']} options; "
                    f"the largest spread "
                    f"of one option's probability across them {sensitivity['max_spread']:.3f}; the top "
                    f"option {'changes' if sensitivity['top_changes'] else 'stays the same'}"
                )
            elif prior:
                out.append(f"{mode}: the content-free prior per position " + ", ".join(f"{p:.3f}" for p in prior))
        return out


def ask_in_each_mode(
    client: EndpointClient, body: Mapping[str, Any], modes: Sequence[str] = ORDER_MODES
) -> OrderModesView:
    """The decision ``body`` asked once in each order mode (its id gets the mode), read with letters whatever the
    server's default readout, shown side by side."""
    answers = [
        client.decide({**body, "id": f"{body.get('id', 'decision')} ({mode})", "order": mode, "readout": LETTERS})
        for mode in modes
    ]
    return OrderModesView(answers, latency=False)


def warm_priors(client: EndpointClient, tasks: Sequence[Task]) -> list[int]:
    """One untimed ``prior`` decision per option count among ``tasks`` (the first task of each), so that the
    adapter has scored and cached each count's content-free prior before a timed run: an adapter whose
    default is ``prior`` measures them at start-up, and the first request of a count would otherwise pay."""
    first: dict[int, Task] = {}
    for task in tasks:
        first.setdefault(len(task.options), task)
    for _, task in sorted(first.items()):
        client.decide(
            {
                **task.request(request_id=f"{task.id}@warm-prior"),
                "order": "prior",
                "readout": LETTERS,
                "question_type": task.type,
            }
        )
    return sorted(first)


def measure_order_modes(
    client: EndpointClient,
    tasks: str | Path | Iterable[Task] | None = None,
    *,
    modes: Sequence[str] = ORDER_MODES,
    limit: int | None = None,
    head_tokens: int | None = None,
    progress: bool = True,
) -> OrderStudy:
    """Every task in each order mode, options as declared and reversed, at temperature 1, task by task
    (``_interleaved``); the priors of the tasks' option counts are warmed first (``warm_priors``), so no timed
    request scores one. ``head_tokens``, when known, prices the rotations' extra tokens exactly
    (``rotation_cost``)."""
    unknown = [m for m in modes if m not in ORDER_MODES]
    if unknown:
        raise ValueError(f"unknown order modes {unknown}; choose from {', '.join(ORDER_MODES)}")
    task_list, name = resolve_tasks(tasks, limit)
    ordered = sorted(dict.fromkeys(modes), key=ORDER_MODES.index)
    if "prior" in ordered:
        warm_priors(client, task_list)
    return OrderStudy(_interleaved(client, task_list, ordered, progress), tasks=name, head_tokens=head_tokens)


def _interleaved(
    client: EndpointClient, tasks: Sequence[Task], modes: Sequence[str], progress: bool
) -> dict[str, tuple[Run, Run]]:
    """(as declared, reversed) runs per mode, made task by task: each task is asked in every mode and order
    before the next one, so a latency ratio between modes compares requests made moments apart (a shared
    machine's load changes over a mode's whole pass)."""
    combos = [(mode, order) for mode in modes for order in ("original", "reversed")]
    parts: dict[tuple[str, str], list[Run]] = {combo: [] for combo in combos}
    bar = progress_bar(len(tasks) * len(combos), "order modes", progress)
    try:
        for task in tasks:
            for mode, order in combos:
                parts[(mode, order)].append(run_mode(client, [task], mode, order=order, progress=False))
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return {
        mode: (join_runs(parts[(mode, "original")], mode), join_runs(parts[(mode, "reversed")], f"{mode} (reversed)"))
        for mode in modes
    }


def join_runs(runs: list[Run], label: str) -> Run:
    """One run from single-task runs of one mode and order, in task order."""
    first = runs[0]
    return Run(
        label=label,
        kind=first.kind,
        results=[r for run in runs for r in run.results],
        endpoint=first.endpoint,
        concurrency=first.concurrency,
        wall_s=sum(run.wall_s for run in runs),
        started_at=first.started_at,
        model=next((run.model for run in runs if run.model), {}),
        settings=dict(first.settings),
    )


__all__ = [
    "THRESHOLDS",
    "OrderModesView",
    "OrderStudy",
    "accuracy",
    "ask_in_each_mode",
    "format_study",
    "heldout_calibration",
    "join_runs",
    "mean_sensitivity",
    "measure_order_modes",
    "mode_figures",
    "per_token_ms",
    "risk_coverage",
    "rotation_cost",
    "set_figures",
    "warm_priors",
]

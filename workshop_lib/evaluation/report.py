"""Benchmark reports: the numbers (pure), two runs side by side, and the report as JSON.

``summarize(run)`` gives valid responses, accuracy overall / by family / by type,
client latency p50 / p95 / max (answered requests only: a request that failed
fast would otherwise make the endpoint look quick), server time, throughput
(tasks per second of wall time), 503s met, input tokens, two reference points
(chance, and "always pick the first option shown") and which position the
predicted option had. ``compare`` puts two summaries side by side with the ratio
A / B, as in the blog's CPU vs GPU table.

``BenchReport`` holds the runs of one benchmark (decision readout, and optionally
the reversed-order run, the debiased readout, the generation baseline) and derives
the order test, the letter baseline's agreement and the calibration from them, as
plain values. Rendering them is elsewhere: ``markdown`` (tables), ``plots``
(figures) and ``report_view`` (a report that shows and saves itself).
"""

from __future__ import annotations

import datetime
import json
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .bias import flip_stats
from .logprobs import agreement
from .runner import Run, TaskResult, evaluated_tokens
from .temperature import calibrate_results

RUN_TITLES = {
    "decision": "decision readout",
    "decision_reversed": "decision readout, options reversed",
    "debiased": "debiased readout",
    "debiased_reversed": "debiased readout, options reversed",
    "generation": "generation baseline (chat)",
    "logprobs": "letter-probability baseline (standard endpoint, top_logprobs)",
}


# -- numbers ----------------------------------------------------------------------------


def percentile(values: Iterable[float | None], q: float) -> float | None:
    """The q-th percentile (0-100) with linear interpolation between order statistics
    (numpy's default method); ``None`` for no values."""
    data = sorted(float(v) for v in values if v is not None)
    if not data:
        return None
    if not 0 <= q <= 100:
        raise ValueError("q must be between 0 and 100")
    pos = (len(data) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def latency_stats(values_ms: Iterable[float | None]) -> dict[str, Any]:
    data = [float(v) for v in values_ms if v is not None]
    if not data:
        return {"n": 0, "p50": None, "p95": None, "max": None, "mean": None}
    return {
        "n": len(data),
        "p50": percentile(data, 50),
        "p95": percentile(data, 95),
        "max": max(data),
        "mean": statistics.fmean(data),
    }


def _group(results: Sequence[TaskResult], key: Callable[[TaskResult], str]) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[TaskResult]] = {}
    for r in results:
        groups.setdefault(key(r), []).append(r)
    return {name: _counts(rs) for name, rs in sorted(groups.items())}


def _counts(results: Sequence[TaskResult]) -> dict[str, Any]:
    n = len(results)
    correct = sum(r.correct for r in results)
    return {
        "n": n,
        "valid": sum(r.valid for r in results),
        "correct": correct,
        "accuracy": correct / n if n else None,
        "chance": statistics.fmean(1 / len(r.labels) for r in results) if n else None,
    }


def summarize(run: Run) -> dict[str, Any]:
    """The headline numbers of one run (pure)."""
    results = run.results
    n = len(results)
    answered = [r for r in results if r.answered]
    tokens = [r.input_tokens for r in results if isinstance(r.input_tokens, int)]
    positions: dict[str, int] = {}
    for r in results:
        if r.valid and r.predicted_position is not None:
            positions[str(r.predicted_position + 1)] = positions.get(str(r.predicted_position + 1), 0) + 1
    counts = _counts(results)
    return {
        "label": run.label,
        "kind": run.kind,
        "endpoint": run.endpoint,
        "concurrency": run.concurrency,
        "settings": run.settings,
        "model": run.model,
        "tasks": n,
        "answered": len(answered),
        "valid": counts["valid"],
        "correct": counts["correct"],
        "accuracy": counts["accuracy"],
        "accuracy_of_valid": counts["correct"] / counts["valid"] if counts["valid"] else None,
        "by_family": _group(results, lambda r: r.family),
        "by_type": _group(results, lambda r: r.type),
        "client_latency_ms": latency_stats(r.client_latency_ms for r in answered),
        "server_ms": latency_stats(r.server_ms for r in answered),
        "wall_s": run.wall_s,
        "throughput_per_s": n / run.wall_s if run.wall_s else None,
        "busy": {
            "retried_after_503": sum(r.attempts > 1 for r in results),
            "failed_with_503": sum(r.busy for r in results),
        },
        "errors": sum(not r.answered for r in results),
        "input_tokens": {"mean": statistics.fmean(tokens) if tokens else None, "max": max(tokens, default=None)},
        "reference": {
            "chance": counts["chance"],
            "first_option": sum(bool(r.presented) and r.presented[0] == r.expected for r in results) / n if n else None,
        },
        "predicted_position": dict(sorted(positions.items(), key=lambda kv: int(kv[0]))),
    }


COMPARED = (
    ("valid responses", "valid", "count"),
    ("accuracy", "accuracy", "percent"),
    ("client p50", ("client_latency_ms", "p50"), "latency"),
    ("client p95", ("client_latency_ms", "p95"), "latency"),
    ("client max", ("client_latency_ms", "max"), "latency"),
    ("server p50", ("server_ms", "p50"), "latency"),
    ("throughput (tasks/s)", "throughput_per_s", "rate"),
)


def _get(summary: Mapping[str, Any], key: str | tuple[str, ...]) -> Any:
    if isinstance(key, tuple):
        value: Any = summary  # a JSON object, then whatever its keys lead to
        for k in key:
            value = (value or {}).get(k)
        return value
    return summary.get(key)


def compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows ``{metric, a, b, ratio = a / b}`` for two summaries (e.g. CPU vs GPU)."""
    rows = []
    for name, key, kind in COMPARED:
        va, vb = _get(a, key), _get(b, key)
        ratio = va / vb if isinstance(va, (int, float)) and isinstance(vb, (int, float)) and vb else None
        row = {"metric": name, "a": va, "b": vb, "ratio": ratio, "kind": kind}
        if kind == "count":
            row["a_total"], row["b_total"] = a.get("tasks"), b.get("tasks")
        rows.append(row)
    return rows


# -- the report object -------------------------------------------------------------------


@dataclass
class BenchReport:
    """One benchmark: its runs, and everything derived from them."""

    runs: dict[str, Run]
    title: str = "Decision benchmark"
    tasks_source: str = ""
    calibrate: bool = False
    compare_with: dict[str, Any] | None = None  # {"label": ..., "summary": {...}} of another run
    notes: list[str] = field(default_factory=list)
    created: str = field(
        default_factory=lambda: datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    )

    # -- derived --

    @property
    def decision(self) -> Run:
        return self.runs["decision"]

    @property
    def summaries(self) -> dict[str, dict[str, Any]]:
        return {key: summarize(run) for key, run in self.runs.items()}

    @property
    def summary(self) -> dict[str, Any]:
        """The decision readout's summary (the headline numbers)."""
        return summarize(self.decision)

    @property
    def order_test(self) -> dict[str, Any] | None:
        if "decision_reversed" not in self.runs:
            return None
        subset = {r.task_id for r in self.runs["decision_reversed"].results}
        plain = [r for r in self.decision.results if r.task_id in subset]
        out = {
            "order": self.runs["decision_reversed"].settings.get("order", "reversed"),
            "plain": flip_stats(plain, self.runs["decision_reversed"].results),
        }
        out["plain"]["accuracy_original"] = _accuracy(plain)
        out["plain"]["accuracy_reordered"] = _accuracy(self.runs["decision_reversed"].results)
        out["plain"]["client_latency_ms"] = latency_stats(r.client_latency_ms for r in plain if r.answered)
        out["plain"]["input_tokens_mean"] = _mean(r.input_tokens for r in plain)
        if "debiased" in self.runs:
            deb = self.runs["debiased"].results
            section = (
                flip_stats(deb, self.runs["debiased_reversed"].results) if "debiased_reversed" in self.runs else {}
            )
            section["accuracy_original"] = _accuracy(deb)
            if "debiased_reversed" in self.runs:
                section["accuracy_reordered"] = _accuracy(self.runs["debiased_reversed"].results)
            section["client_latency_ms"] = latency_stats(r.client_latency_ms for r in deb if r.answered)
            shown = {r.task_id: _presentations(r) for r in deb}
            section["presentations_mean"] = _mean(shown.values())
            section["evaluated_tokens_mean"] = _mean(evaluated_tokens(r) for r in deb if r.valid)
            # What k separate plain decisions would have cost: k x that task's plain latency and tokens.
            by_id = {r.task_id: r for r in plain}
            est = [
                latency * k
                for r in deb
                if r.answered
                and r.task_id in by_id
                and (latency := by_id[r.task_id].client_latency_ms)
                and (k := shown[r.task_id])
            ]
            section["k_separate_estimate_ms"] = latency_stats(est)
            section["k_separate_tokens_mean"] = _mean(
                tokens * k
                for r in deb
                if r.task_id in by_id
                and isinstance(tokens := by_id[r.task_id].input_tokens, int)
                and (k := shown[r.task_id])
            )
            out["debiased"] = section
        return out

    @property
    def letter_baseline(self) -> dict[str, Any] | None:
        """The letter-probability baseline against the decision readout on the same tasks."""
        if "logprobs" not in self.runs:
            return None
        run = self.runs["logprobs"]
        ids = {r.task_id for r in run.results}
        out = agreement(self.decision.results, run.results)
        out["top_logprobs"] = run.settings.get("top_logprobs")
        out["client_latency_ms"] = latency_stats(r.client_latency_ms for r in run.results if r.answered)
        out["decision_client_latency_ms"] = latency_stats(
            r.client_latency_ms for r in self.decision.results if r.answered and r.task_id in ids
        )
        return out

    @property
    def calibration(self) -> dict[str, Any] | None:
        return calibrate_results(self.decision.results) if self.calibrate else None

    @property
    def comparison(self) -> list[dict[str, Any]] | None:
        if not self.compare_with:
            return None
        return compare(self.compare_with["summary"], self.summary)

    # -- output --

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "created": self.created,
            "tasks_source": self.tasks_source,
            "endpoint": self.decision.endpoint,
            "model": self.decision.model,
            "notes": self.notes,
            "summary": self.summaries,
            "order_test": self.order_test,
            "calibration": self.calibration,
            "letter_baseline": self.letter_baseline,
            "compare_with": self.compare_with,
            "comparison": self.comparison,
            "runs": {key: run.to_dict() for key, run in self.runs.items()},
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchReport:
        return cls(
            runs={k: Run.from_dict(v) for k, v in data["runs"].items()},
            title=data.get("title", ""),
            tasks_source=data.get("tasks_source", ""),
            calibrate=data.get("calibration") is not None,
            compare_with=data.get("compare_with"),
            notes=list(data.get("notes") or []),
            created=data.get("created", ""),
        )

    @classmethod
    def load(cls, path: str | Path) -> BenchReport:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


def _accuracy(results: Sequence[TaskResult]) -> float | None:
    return sum(r.correct for r in results) / len(results) if results else None


def _presentations(result: TaskResult) -> int | None:
    """How many option orders the served rotations mode averaged for this answer (None when not told)."""
    sensitivity = result.extra.get("order_sensitivity")
    count = sensitivity.get("presentations") if isinstance(sensitivity, Mapping) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def _mean(values: Iterable[object]) -> float | None:
    data = [v for v in values if isinstance(v, (int, float))]
    return statistics.fmean(data) if data else None


def load_comparison(path: str | Path) -> dict[str, Any]:
    """``{"label", "summary"}`` of the decision run in a saved report.json, for ``compare_with``."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    summary = (data.get("summary") or {}).get("decision")
    if summary is None and "runs" in data:
        summary = summarize(Run.from_dict(data["runs"]["decision"]))
    if summary is None:
        raise ValueError(f"{path} is not a benchmark report.json (no decision run)")
    return {"label": summary.get("label") or Path(path).parent.name, "summary": summary, "path": str(path)}


__all__ = ["RUN_TITLES", "BenchReport", "compare", "latency_stats", "load_comparison", "percentile", "summarize"]

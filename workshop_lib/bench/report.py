"""Benchmark reports: the numbers (pure), two runs side by side, JSON and Markdown.

``summarize(run)`` gives valid responses, accuracy overall / by family / by type,
client latency p50 / p95 / max (answered requests only: a request that failed
fast would otherwise make the endpoint look quick), server time, throughput
(tasks per second of wall time), 503s met, input tokens, two reference points
(chance, and "always pick the first option shown") and which position the
predicted option had. ``compare`` puts two summaries side by side with the ratio
A / B, as in the blog's CPU vs GPU table.

``BenchReport`` holds the runs of one benchmark (decision readout, and optionally
the reversed-order run, the debiased readout, the generation baseline), derives
the order test and the calibration from them, and writes ``report.json``,
``report.md`` and PNG figures.
"""

from __future__ import annotations

import datetime
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from .bias import flip_stats
from .calibration import MIN_TASKS, calibrate_results
from .logprobs import agreement
from .runner import Run, TaskResult

RUN_TITLES = {
    "decision": "decision readout",
    "decision_reversed": "decision readout, options reversed",
    "debiased": "debiased readout",
    "debiased_reversed": "debiased readout, options reversed",
    "generation": "generation baseline (chat)",
    "logprobs": "letter-probability baseline (standard endpoint, top_logprobs)",
}


# -- numbers ----------------------------------------------------------------------------


def percentile(values: Iterable[float], q: float) -> float | None:
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


def latency_stats(values_ms: Iterable[float]) -> dict:
    data = [float(v) for v in values_ms if v is not None]
    if not data:
        return {"n": 0, "p50": None, "p95": None, "max": None, "mean": None}
    return {"n": len(data), "p50": percentile(data, 50), "p95": percentile(data, 95), "max": max(data),
            "mean": statistics.fmean(data)}


def _group(results: Sequence[TaskResult], key) -> dict:
    groups: dict[str, list[TaskResult]] = {}
    for r in results:
        groups.setdefault(key(r), []).append(r)
    return {name: _counts(rs) for name, rs in sorted(groups.items())}


def _counts(results: Sequence[TaskResult]) -> dict:
    n = len(results)
    correct = sum(r.correct for r in results)
    return {"n": n, "valid": sum(r.valid for r in results), "correct": correct,
            "accuracy": correct / n if n else None,
            "chance": statistics.fmean(1 / len(r.labels) for r in results) if n else None}


def summarize(run: Run) -> dict:
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
        "label": run.label, "kind": run.kind, "endpoint": run.endpoint, "concurrency": run.concurrency,
        "settings": run.settings, "model": run.model,
        "tasks": n, "answered": len(answered), "valid": counts["valid"], "correct": counts["correct"],
        "accuracy": counts["accuracy"],
        "accuracy_of_valid": counts["correct"] / counts["valid"] if counts["valid"] else None,
        "by_family": _group(results, lambda r: r.family),
        "by_type": _group(results, lambda r: r.type),
        "client_latency_ms": latency_stats(r.client_latency_ms for r in answered),
        "server_ms": latency_stats(r.server_ms for r in answered),
        "wall_s": run.wall_s,
        "throughput_per_s": n / run.wall_s if run.wall_s else None,
        "busy": {"retried_after_503": sum(r.attempts > 1 for r in results),
                 "failed_with_503": sum(r.busy for r in results)},
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


def _get(summary: Mapping, key):
    if isinstance(key, tuple):
        value = summary
        for k in key:
            value = (value or {}).get(k)
        return value
    return summary.get(key)


def compare(a: Mapping, b: Mapping) -> list[dict]:
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


# -- formatting --------------------------------------------------------------------------


def fmt_s(ms: float | None) -> str:
    return "–" if ms is None else f"{ms / 1000.0:.3f} s"


def fmt_pct(x: float | None) -> str:
    return "–" if x is None else f"{100.0 * x:.1f} %"


def fmt_ratio(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}×"


def _fmt(kind: str, value, total=None) -> str:
    if value is None:
        return "–"
    if kind == "count":
        return f"{value}/{total}" if total is not None else str(value)
    if kind == "percent":
        return fmt_pct(value)
    if kind == "latency":
        return fmt_s(value)
    return f"{value:.2f}"


def table(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _headline(s: Mapping) -> list:
    lat = s["client_latency_ms"]
    return [f"{s['valid']}/{s['tasks']}", f"{s['correct']}/{s['tasks']} ({fmt_pct(s['accuracy'])})",
            fmt_s(lat["p50"]), fmt_s(lat["p95"]), fmt_s(lat["max"]),
            "–" if s["throughput_per_s"] is None else f"{s['throughput_per_s']:.2f}"]


HEADLINE = ("valid", "correct (accuracy)", "client p50", "client p95", "client max", "tasks/s")


def comparison_markdown(rows: Sequence[Mapping], label_a: str, label_b: str) -> str:
    body = [[r["metric"], _fmt(r["kind"], r["a"], r.get("a_total")), _fmt(r["kind"], r["b"], r.get("b_total")),
             fmt_ratio(r["ratio"])] for r in rows]
    return table(["", label_a, label_b, f"ratio {label_a} / {label_b}"], body)


# -- the report object -------------------------------------------------------------------


@dataclass
class BenchReport:
    """One benchmark: its runs, and everything derived from them."""

    runs: dict[str, Run]
    title: str = "Decision benchmark"
    tasks_source: str = ""
    calibrate: bool = False
    compare_with: dict | None = None  # {"label": ..., "summary": {...}} of another run
    notes: list[str] = field(default_factory=list)
    created: str = field(default_factory=lambda: datetime.datetime.now(datetime.timezone.utc)
                         .isoformat(timespec="seconds"))

    # -- derived --

    @property
    def decision(self) -> Run:
        return self.runs["decision"]

    @property
    def summaries(self) -> dict[str, dict]:
        return {key: summarize(run) for key, run in self.runs.items()}

    @property
    def summary(self) -> dict:
        """The decision readout's summary (the headline numbers)."""
        return summarize(self.decision)

    @property
    def order_test(self) -> dict | None:
        if "decision_reversed" not in self.runs:
            return None
        subset = {r.task_id for r in self.runs["decision_reversed"].results}
        plain = [r for r in self.decision.results if r.task_id in subset]
        out = {"order": self.runs["decision_reversed"].settings.get("order", "reversed"),
               "plain": flip_stats(plain, self.runs["decision_reversed"].results)}
        out["plain"]["accuracy_original"] = _accuracy(plain)
        out["plain"]["accuracy_reordered"] = _accuracy(self.runs["decision_reversed"].results)
        out["plain"]["client_latency_ms"] = latency_stats(r.client_latency_ms for r in plain if r.answered)
        out["plain"]["input_tokens_mean"] = _mean(r.input_tokens for r in plain)
        if "debiased" in self.runs:
            deb = self.runs["debiased"].results
            section = flip_stats(deb, self.runs["debiased_reversed"].results) \
                if "debiased_reversed" in self.runs else {}
            section["accuracy_original"] = _accuracy(deb)
            if "debiased_reversed" in self.runs:
                section["accuracy_reordered"] = _accuracy(self.runs["debiased_reversed"].results)
            section["client_latency_ms"] = latency_stats(r.client_latency_ms for r in deb if r.answered)
            section["rotations_mean"] = _mean(r.extra.get("rotations") for r in deb)
            section["evaluated_tokens_mean"] = _mean(r.extra.get("evaluated_tokens") for r in deb)
            # What k separate plain decisions would have cost: k x that task's plain latency and tokens.
            by_id = {r.task_id: r for r in plain}
            est = [by_id[r.task_id].client_latency_ms * r.extra["rotations"] for r in deb
                   if r.answered and r.task_id in by_id and by_id[r.task_id].client_latency_ms
                   and r.extra.get("rotations")]
            section["k_separate_estimate_ms"] = latency_stats(est)
            section["k_separate_tokens_mean"] = _mean(
                by_id[r.task_id].input_tokens * r.extra["rotations"] for r in deb
                if r.task_id in by_id and isinstance(by_id[r.task_id].input_tokens, int) and r.extra.get("rotations"))
            out["debiased"] = section
        return out

    @property
    def letter_baseline(self) -> dict | None:
        """The letter-probability baseline against the decision readout on the same tasks."""
        if "logprobs" not in self.runs:
            return None
        run = self.runs["logprobs"]
        ids = {r.task_id for r in run.results}
        out = agreement(self.decision.results, run.results)
        out["top_logprobs"] = run.settings.get("top_logprobs")
        out["client_latency_ms"] = latency_stats(r.client_latency_ms for r in run.results if r.answered)
        out["decision_client_latency_ms"] = latency_stats(
            r.client_latency_ms for r in self.decision.results if r.answered and r.task_id in ids)
        return out

    @property
    def calibration(self) -> dict | None:
        return calibrate_results(self.decision.results) if self.calibrate else None

    @property
    def comparison(self) -> list[dict] | None:
        if not self.compare_with:
            return None
        return compare(self.compare_with["summary"], self.summary)

    # -- output --

    def to_dict(self) -> dict:
        return {"title": self.title, "created": self.created, "tasks_source": self.tasks_source,
                "endpoint": self.decision.endpoint, "model": self.decision.model, "notes": self.notes,
                "summary": self.summaries, "order_test": self.order_test, "calibration": self.calibration,
                "letter_baseline": self.letter_baseline,
                "compare_with": self.compare_with, "comparison": self.comparison,
                "runs": {key: run.to_dict() for key, run in self.runs.items()}}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: Mapping) -> BenchReport:
        return cls(runs={k: Run.from_dict(v) for k, v in data["runs"].items()}, title=data.get("title", ""),
                   tasks_source=data.get("tasks_source", ""), calibrate=data.get("calibration") is not None,
                   compare_with=data.get("compare_with"), notes=list(data.get("notes") or []),
                   created=data.get("created", ""))

    @classmethod
    def load(cls, path: str | Path) -> BenchReport:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    def to_markdown(self) -> str:
        return render_markdown(self)

    def save(self, out_dir: str | Path, *, figures: bool = True) -> dict[str, Path]:
        """Write report.json, report.md and (if matplotlib is installed) the PNGs; returns the paths."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"json": out / "report.json", "markdown": out / "report.md"}
        paths["json"].write_text(self.to_json() + "\n", encoding="utf-8")
        paths["markdown"].write_text(self.to_markdown() + "\n", encoding="utf-8")
        if figures:
            try:
                from .plots import save_figures
            except ImportError:  # matplotlib is an optional dependency (the notebooks extra)
                self.notes.append("matplotlib is not installed: no figures")
            else:
                paths.update(save_figures(self, out))
        return paths

    def plot(self):
        """The three figures in one matplotlib figure (pyplot, so notebooks show it)."""
        from .plots import plot_report

        return plot_report(self)

    def _repr_markdown_(self) -> str:
        return self.to_markdown()


def _accuracy(results: Sequence[TaskResult]) -> float | None:
    return sum(r.correct for r in results) / len(results) if results else None


def _mean(values) -> float | None:
    data = [v for v in values if isinstance(v, (int, float))]
    return statistics.fmean(data) if data else None


def load_comparison(path: str | Path) -> dict:
    """``{"label", "summary"}`` of the decision run in a saved report.json, for ``compare_with``."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    summary = (data.get("summary") or {}).get("decision")
    if summary is None and "runs" in data:
        summary = summarize(Run.from_dict(data["runs"]["decision"]))
    if summary is None:
        raise ValueError(f"{path} is not a benchmark report.json (no decision run)")
    return {"label": summary.get("label") or Path(path).parent.name, "summary": summary, "path": str(path)}


# -- markdown ----------------------------------------------------------------------------


def _model_line(model: Mapping) -> str:
    if not model:
        return "model: (not reported)"
    parts = [str(model.get("file", "?"))]
    if model.get("quantization"):
        parts.append(str(model["quantization"]))
    if model.get("threads") is not None:
        parts.append(f"{model['threads']} threads")
    if model.get("gpu_layers_offloaded") is not None:
        parts.append(f"{model['gpu_layers_offloaded']} GPU layers")
    return "model: " + ", ".join(parts)


def render_markdown(report: BenchReport) -> str:
    s = report.summaries
    d = s["decision"]
    out = [f"# {report.title}", ""]
    out.append(f"- endpoint: `{d['endpoint']}`; {_model_line(d['model'])}")
    mode = "sequential" if d["concurrency"] == 1 else f"{d['concurrency']} concurrent clients"
    out.append(f"- tasks: {d['tasks']} from {report.tasks_source or '(given)'}; {mode}; run {report.created}")
    out.append("- latency is client-side (includes the network and any retries), over answered requests")
    for note in report.notes:
        out.append(f"- {note}")
    out += ["", "## Decision readout", "", table(HEADLINE, [_headline(d)]), ""]
    ref = d["reference"]
    out.append(f"Reference points: chance {fmt_pct(ref['chance'])}; always picking the first option shown "
               f"{fmt_pct(ref['first_option'])}. Server time p50 {fmt_s(d['server_ms']['p50'])}; "
               f"input tokens mean {d['input_tokens']['mean'] or 0:.0f}; 503s: "
               f"{d['busy']['retried_after_503']} tasks retried, {d['busy']['failed_with_503']} failed.")
    if d["predicted_position"]:
        pos = ", ".join(f"#{k}: {v}" for k, v in d["predicted_position"].items())
        out.append(f"Position of the predicted option as shown: {pos}.")
    out += ["", "By type (choice: pick one option; noul: a yes/no question answered `no` or `yes`; score: a rating "
            "from `0` up):", "", table(["type", "tasks", "valid", "correct", "accuracy", "chance"],
                                      [[k, v["n"], v["valid"], v["correct"], fmt_pct(v["accuracy"]),
                                        fmt_pct(v["chance"])] for k, v in d["by_type"].items()])]
    out += ["", "By family:", "", table(["family", "tasks", "valid", "correct", "accuracy", "chance"],
                                        [[k, v["n"], v["valid"], v["correct"], fmt_pct(v["accuracy"]),
                                          fmt_pct(v["chance"])] for k, v in d["by_family"].items()])]

    if "generation" in s:
        g = s["generation"]
        ids = {r.task_id for r in report.runs["generation"].results}
        same = summarize(Run("decision", "decision", [r for r in report.decision.results if r.task_id in ids],
                             wall_s=0.0))
        parses: dict[str, int] = {}
        for r in report.runs["generation"].results:
            parses[r.extra.get("parse", "error")] = parses.get(r.extra.get("parse", "error"), 0) + 1
        rows = [["decision readout (one forward pass)", *_headline(same)[:5]],
                ["generation baseline (chat, parse the reply)", *_headline(g)[:5]]]
        out += ["", "## Decision readout vs generation baseline", "",
                f"The same {g['tasks']} tasks on the same server; the baseline asks through the chat schema "
                f"for an option id (temperature 0, at most {report.runs['generation'].settings.get('max_tokens')} "
                "tokens) and parses the reply.", "",
                table(["", *HEADLINE[:5]], rows), "",
                "Baseline replies: " + ", ".join(f"{k} {v}" for k, v in sorted(parses.items())) +
                " (exact = the reply is an id; found = exactly one id in the reply; none/ambiguous = invalid)."]
        if g["tasks"] < MIN_STUDIED:
            out += ["", too_few_note(g["tasks"], "asked both ways", "either accuracy")]

    letters = report.letter_baseline
    if letters is not None:
        out += ["", *letter_section(report, letters)]

    order = report.order_test
    if order:
        plain = order["plain"]
        rows = [["plain (one decision per order)", "1 decision", fmt_pct(plain["accuracy_original"]),
                 fmt_pct(plain["accuracy_reordered"]), _flips(plain), fmt_s(plain["client_latency_ms"]["p50"]),
                 f"{plain['input_tokens_mean'] or 0:.0f}"]]
        if "debiased" in order:
            deb = order["debiased"]
            k = deb.get("rotations_mean") or 0
            rows.append([f"debiased (averaged over every rotation of the options; {k:.1f} per task on average)",
                         "1 shared-state request",
                         fmt_pct(deb["accuracy_original"]), fmt_pct(deb.get("accuracy_reordered")),
                         _flips(deb) if "compared" in deb else "–", fmt_s(deb["client_latency_ms"]["p50"]),
                         f"{deb['evaluated_tokens_mean'] or 0:.0f}"])
            rows.append(["(k separate decisions, estimated)", f"{k:.1f} decisions", "", "", "",
                         fmt_s(deb["k_separate_estimate_ms"]["p50"]), f"{deb['k_separate_tokens_mean'] or 0:.0f}"])
        out += ["", "## Option order", "",
                f"The same tasks with the options {order['order']}: how often does the top choice change?", "",
                table(["readout", "requests per task", "accuracy (original order)",
                       f"accuracy ({order['order']})", "top-choice flips", "client p50",
                       "tokens evaluated per task"], rows)]
        if plain["compared"] < MIN_STUDIED:
            out += ["", too_few_note(plain["compared"], "compared in both orders", "the flip rate")]

    cal = report.calibration
    if cal is not None:
        out += ["", "## Calibration", ""]
        if "error" in cal:
            out.append(f"Not computed: {cal['error']} (split: {cal['split']}).")
        else:
            b, a = cal["before"], cal["after"]
            out.append(f"Temperature fitted on {cal['fit_tasks']} tasks (by {cal['split']}) by minimising the NLL; "
                       f"reported on the other {cal['report_tasks']} tasks."
                       + BOUND_NOTES.get(cal.get("at_search_bound"), ""))
            out += ["", table(["", "temperature", "NLL", "ECE", "Brier", "accuracy"],
                              [["before", "1", f"{b['nll']:.3f}", f"{b['ece']:.3f}", f"{b['brier']:.3f}",
                                fmt_pct(b["accuracy"])],
                               ["after", fmt_temperature(cal), f"{a['nll']:.3f}", f"{a['ece']:.3f}",
                                f"{a['brier']:.3f}", fmt_pct(a["accuracy"])]])]
            if min(cal["fit_tasks"], cal["report_tasks"]) < MIN_TASKS:
                out += ["", too_few_calibration_note(cal)]

    if report.compare_with:
        label_a = report.compare_with["label"]
        label_b = d["label"] if d["label"] != label_a else f"{d['label']} (this run)"
        out += ["", "## Side by side", "", comparison_markdown(report.comparison, label_a, label_b)]
    return "\n".join(out)


def letter_section(report: BenchReport, letters: Mapping) -> list[str]:
    """Markdown lines: the decision readout, the generation baseline (if run) and the letter probabilities."""
    run = report.runs["logprobs"]
    n, k = letters["tasks"], letters["top_logprobs"]
    ids = {r.task_id for r in run.results}
    same = [r for r in report.decision.results if r.task_id in ids]
    dec_valid = sum(r.valid for r in same)

    def lat(stats):
        return [fmt_s(stats["p50"]), fmt_s(stats["p95"])]

    agree = f"{letters['agree']}/{letters['compared']}" if letters["compared"] else "–"
    diff = "–" if letters["max_abs_diff"] is None else f"{letters['max_abs_diff']:.3f}"
    rows = [["decision readout (every option's logit)", f"{dec_valid}/{n}", "(itself)", "–",
             *lat(letters["decision_client_latency_ms"])]]
    if "generation" in report.runs:
        gen = [r for r in report.runs["generation"].results if r.task_id in ids]
        by_id = {r.task_id: r for r in same}
        gen_agree = sum(r.valid and r.task_id in by_id and by_id[r.task_id].valid
                        and r.predicted == by_id[r.task_id].predicted for r in gen)
        rows.append(["generation baseline (chat, parse the reply)", f"{sum(r.valid for r in gen)}/{len(gen)}",
                     f"{gen_agree}/{len(gen)}", "(no probabilities)",
                     *lat(latency_stats(r.client_latency_ms for r in gen if r.answered))])
    rows.append([f"letter probabilities (standard endpoint, top {k})", f"{letters['valid']}/{n}", agree, diff,
                 *lat(letters["client_latency_ms"])])
    lines = ["## Decision readout vs letter probabilities from the standard endpoint", "",
             f"The same decision prompt sent to `{run.endpoint}` as a chat completion with `max_tokens: 1, "
             f"logprobs: true, top_logprobs: {k}`; the option letters among the returned first tokens are "
             "renormalised. A task is valid only when every option's letter came back: a letter outside the "
             f"top {k} has no probability, and is not guessed.", "",
             table(["", "valid", "top option agrees with the decision readout", "largest probability difference",
                    "client p50", "client p95"], rows), "",
             f"Options missing from the top {k}: {letters['missing_options_mean']:.1f} per task on average."]
    if letters["median_task_diff"] is not None:
        lines[-1] += (f" Of the {letters['compared']} tasks valid in both, the median task's largest difference is "
                      f"{letters['median_task_diff']:.3f} (largest: {letters['max_abs_diff_task']}).")
    return lines


BOUND_NOTES = {
    "flatten": " The fit ran to the largest temperature searched: on the fitting tasks the model's ranking does "
               "no better than a uniform guess, so the best it can do is flatten every answer.",
    "sharpen": " The fit ran to the smallest temperature searched: every fitting task was answered right, so "
               "sharper is always better there; the value says little.",
}


# Fewer studied tasks than this and an order-test rate is a handful of coin flips (one flip moves it by
# 100/n points); notebook 06's quick defaults study 2.
MIN_STUDIED = 20


def too_few_note(n: int, counted: str, rate: str) -> str:
    """The caveat under a study table that has too few tasks to mean anything."""
    return (f"Too few to mean anything: {n} task{'s' if n != 1 else ''} {counted}, so each task is "
            f"{100 / max(n, 1):.0f} points of {rate}. Study at least {MIN_STUDIED} tasks (notebook 06's "
            "*Studied* slider, `study_limit=`) before reading it.")


def too_few_calibration_note(cal: Mapping) -> str:
    """The caveat under the calibration table when either side has too few tasks."""
    return (f"Too few to mean anything: fitted on {cal['fit_tasks']} and reported on {cal['report_tasks']} "
            f"tasks; with fewer than {MIN_TASKS} on either side a fitted temperature, ECE or Brier score is "
            "noise. Run more tasks (notebook 06's *Tasks* slider, `limit=`) before reading it.")


def fmt_temperature(cal: Mapping) -> str:
    """The fitted temperature, marked when the search stopped at its bound (the value is then the bound)."""
    text = f"{cal['temperature']:.3g}"
    return f"{text} (search bound)" if cal.get("at_search_bound") else text


def _flips(section: Mapping) -> str:
    if section.get("rate") is None:
        return "–"
    return f"{section['flips']}/{section['compared']} ({fmt_pct(section['rate'])})"


__all__ = ["BenchReport", "MIN_STUDIED", "compare", "comparison_markdown", "fmt_pct", "fmt_s", "latency_stats", "load_comparison",
           "percentile", "render_markdown", "summarize", "table"]

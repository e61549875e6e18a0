"""A benchmark report as Markdown: the headline table, each run's breakdown, the comparison with
another report, the order test, the letter-probability baseline and calibration, with the notes that
say when too few tasks were studied to read a rate. It reads a ``report.BenchReport`` and computes nothing
the report does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .report import BenchReport, latency_stats, summarize
from .runner import Run
from .temperature import MIN_TASKS


def fmt_s(ms: float | None) -> str:
    return "–" if ms is None else f"{ms / 1000.0:.3f} s"


def fmt_pct(x: float | None) -> str:
    return "–" if x is None else f"{100.0 * x:.1f} %"


def fmt_ratio(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}×"


def _fmt(kind: str, value: Any, total: object = None) -> str:
    if value is None:
        return "–"
    if kind == "count":
        return f"{value}/{total}" if total is not None else str(value)
    if kind == "percent":
        return fmt_pct(value)
    if kind == "latency":
        return fmt_s(value)
    return f"{value:.2f}"


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _headline(s: Mapping[str, Any]) -> list[str]:
    lat = s["client_latency_ms"]
    return [
        f"{s['valid']}/{s['tasks']}",
        f"{s['correct']}/{s['tasks']} ({fmt_pct(s['accuracy'])})",
        fmt_s(lat["p50"]),
        fmt_s(lat["p95"]),
        fmt_s(lat["max"]),
        "–" if s["throughput_per_s"] is None else f"{s['throughput_per_s']:.2f}",
    ]


HEADLINE = ("valid", "correct (accuracy)", "client p50", "client p95", "client max", "tasks/s")


def comparison_markdown(rows: Sequence[Mapping[str, Any]], label_a: str, label_b: str) -> str:
    body = [
        [
            r["metric"],
            _fmt(r["kind"], r["a"], r.get("a_total")),
            _fmt(r["kind"], r["b"], r.get("b_total")),
            fmt_ratio(r["ratio"]),
        ]
        for r in rows
    ]
    return table(["", label_a, label_b, f"ratio {label_a} / {label_b}"], body)


def _model_line(model: Mapping[str, Any]) -> str:
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
    out.append(
        f"Reference points: chance {fmt_pct(ref['chance'])}; always picking the first option shown "
        f"{fmt_pct(ref['first_option'])}. Server time p50 {fmt_s(d['server_ms']['p50'])}; "
        f"input tokens mean {d['input_tokens']['mean'] or 0:.0f}; 503s: "
        f"{d['busy']['retried_after_503']} tasks retried, {d['busy']['failed_with_503']} failed."
    )
    if d["predicted_position"]:
        pos = ", ".join(f"#{k}: {v}" for k, v in d["predicted_position"].items())
        out.append(f"Position of the predicted option as shown: {pos}.")
    out += [
        "",
        "By type (choice: pick one option; noul: a yes/no question answered `no` or `yes`; score: a rating "
        "from `0` up):",
        "",
        table(
            ["type", "tasks", "valid", "correct", "accuracy", "chance"],
            [
                [k, v["n"], v["valid"], v["correct"], fmt_pct(v["accuracy"]), fmt_pct(v["chance"])]
                for k, v in d["by_type"].items()
            ],
        ),
    ]
    out += [
        "",
        "By family:",
        "",
        table(
            ["family", "tasks", "valid", "correct", "accuracy", "chance"],
            [
                [k, v["n"], v["valid"], v["correct"], fmt_pct(v["accuracy"]), fmt_pct(v["chance"])]
                for k, v in d["by_family"].items()
            ],
        ),
    ]

    if "generation" in s:
        g = s["generation"]
        ids = {r.task_id for r in report.runs["generation"].results}
        same = summarize(
            Run("decision", "decision", [r for r in report.decision.results if r.task_id in ids], wall_s=0.0)
        )
        parses: dict[str, int] = {}
        for r in report.runs["generation"].results:
            parses[r.extra.get("parse", "error")] = parses.get(r.extra.get("parse", "error"), 0) + 1
        rows = [
            ["decision readout (one forward pass)", *_headline(same)[:5]],
            ["generation baseline (chat, parse the reply)", *_headline(g)[:5]],
        ]
        out += [
            "",
            "## Decision readout vs generation baseline",
            "",
            f"The same {g['tasks']} tasks on the same server; the baseline asks through the chat schema "
            f"for an option id (temperature 0, at most {report.runs['generation'].settings.get('max_tokens')} "
            "tokens) and parses the reply.",
            "",
            table(["", *HEADLINE[:5]], rows),
            "",
            "Baseline replies: "
            + ", ".join(f"{k} {v}" for k, v in sorted(parses.items()))
            + " (exact = the reply is an id; found = exactly one id in the reply; none/ambiguous = invalid).",
        ]
        if g["tasks"] < MIN_STUDIED:
            out += ["", too_few_note(g["tasks"], "asked both ways", "either accuracy")]

    letters = report.letter_baseline
    if letters is not None:
        out += ["", *letter_section(report, letters)]

    order = report.order_test
    if order:
        plain = order["plain"]
        rows = [
            [
                "plain (one decision per order)",
                "1 decision",
                fmt_pct(plain["accuracy_original"]),
                fmt_pct(plain["accuracy_reordered"]),
                _flips(plain),
                fmt_s(plain["client_latency_ms"]["p50"]),
                f"{plain['input_tokens_mean'] or 0:.0f}",
            ]
        ]
        if "debiased" in order:
            deb = order["debiased"]
            k = deb.get("presentations_mean") or 0
            rows.append(
                [
                    f"debiased (the served rotations mode: {k:.1f} option orders averaged per task on average)",
                    "1 decision",
                    fmt_pct(deb["accuracy_original"]),
                    fmt_pct(deb.get("accuracy_reordered")),
                    _flips(deb) if "compared" in deb else "–",
                    fmt_s(deb["client_latency_ms"]["p50"]),
                    f"{deb['evaluated_tokens_mean'] or 0:.0f}",
                ]
            )
            rows.append(
                [
                    "(k separate decisions, estimated)",
                    f"{k:.1f} decisions",
                    "",
                    "",
                    "",
                    fmt_s(deb["k_separate_estimate_ms"]["p50"]),
                    f"{deb['k_separate_tokens_mean'] or 0:.0f}",
                ]
            )
        out += [
            "",
            "## Option order",
            "",
            f"The same tasks with the options {order['order']}: how often does the top choice change?",
            "",
            table(
                [
                    "readout",
                    "requests per task",
                    "accuracy (original order)",
                    f"accuracy ({order['order']})",
                    "top-choice flips",
                    "client p50",
                    "tokens evaluated per task",
                ],
                rows,
            ),
        ]
        if plain["compared"] < MIN_STUDIED:
            out += ["", too_few_note(plain["compared"], "compared in both orders", "the flip rate")]

    cal = report.calibration
    if cal is not None:
        out += ["", "## Calibration", ""]
        if "error" in cal:
            out.append(f"Not computed: {cal['error']} (split: {cal['split']}).")
        else:
            b, a = cal["before"], cal["after"]
            out.append(
                f"Temperature fitted on {cal['fit_tasks']} tasks (by {cal['split']}) by minimising the NLL; "
                f"reported on the other {cal['report_tasks']} tasks." + BOUND_NOTES.get(cal.get("at_search_bound"), "")
            )
            out += [
                "",
                table(
                    ["", "temperature", "NLL", "ECE", "Brier", "accuracy"],
                    [
                        [
                            "before",
                            "1",
                            f"{b['nll']:.3f}",
                            f"{b['ece']:.3f}",
                            f"{b['brier']:.3f}",
                            fmt_pct(b["accuracy"]),
                        ],
                        [
                            "after",
                            fmt_temperature(cal),
                            f"{a['nll']:.3f}",
                            f"{a['ece']:.3f}",
                            f"{a['brier']:.3f}",
                            fmt_pct(a["accuracy"]),
                        ],
                    ],
                ),
            ]
            if min(cal["fit_tasks"], cal["report_tasks"]) < MIN_TASKS:
                out += ["", too_few_calibration_note(cal)]

    if report.compare_with and (comparison := report.comparison) is not None:
        label_a = report.compare_with["label"]
        label_b = d["label"] if d["label"] != label_a else f"{d['label']} (this run)"
        out += ["", "## Side by side", "", comparison_markdown(comparison, label_a, label_b)]
    return "\n".join(out)


def letter_section(report: BenchReport, letters: Mapping[str, Any]) -> list[str]:
    """Markdown lines: the decision readout, the generation baseline (if run) and the letter probabilities."""
    run = report.runs["logprobs"]
    n, k = letters["tasks"], letters["top_logprobs"]
    ids = {r.task_id for r in run.results}
    same = [r for r in report.decision.results if r.task_id in ids]
    dec_valid = sum(r.valid for r in same)

    def lat(stats: Mapping[str, Any]) -> list[str]:
        return [fmt_s(stats["p50"]), fmt_s(stats["p95"])]

    agree = f"{letters['agree']}/{letters['compared']}" if letters["compared"] else "–"
    diff = "–" if letters["max_abs_diff"] is None else f"{letters['max_abs_diff']:.3f}"
    rows = [
        [
            "decision readout (every option's logit)",
            f"{dec_valid}/{n}",
            "(itself)",
            "–",
            *lat(letters["decision_client_latency_ms"]),
        ]
    ]
    if "generation" in report.runs:
        gen = [r for r in report.runs["generation"].results if r.task_id in ids]
        by_id = {r.task_id: r for r in same}
        gen_agree = sum(
            r.valid and r.task_id in by_id and by_id[r.task_id].valid and r.predicted == by_id[r.task_id].predicted
            for r in gen
        )
        rows.append(
            [
                "generation baseline (chat, parse the reply)",
                f"{sum(r.valid for r in gen)}/{len(gen)}",
                f"{gen_agree}/{len(gen)}",
                "(no probabilities)",
                *lat(latency_stats(r.client_latency_ms for r in gen if r.answered)),
            ]
        )
    rows.append(
        [
            f"letter probabilities (standard endpoint, top {k})",
            f"{letters['valid']}/{n}",
            agree,
            diff,
            *lat(letters["client_latency_ms"]),
        ]
    )
    lines = [
        "## Decision readout vs letter probabilities from the standard endpoint",
        "",
        f"The same decision prompt sent to `{run.endpoint}` as a chat completion with `max_tokens: 1, "
        f"logprobs: true, top_logprobs: {k}`; the option letters among the returned first tokens are "
        "renormalised. A task is valid only when every option's letter came back: a letter outside the "
        f"top {k} has no probability, and is not guessed.",
        "",
        table(
            [
                "",
                "valid",
                "top option agrees with the decision readout",
                "largest probability difference",
                "client p50",
                "client p95",
            ],
            rows,
        ),
        "",
        f"Options missing from the top {k}: {letters['missing_options_mean']:.1f} per task on average.",
    ]
    if letters["median_task_diff"] is not None:
        lines[-1] += (
            f" Of the {letters['compared']} tasks valid in both, the median task's largest difference is "
            f"{letters['median_task_diff']:.3f} (largest: {letters['max_abs_diff_task']})."
        )
    return lines


BOUND_NOTES: dict[str | None, str] = {  # by the fit's at_search_bound, None when inside the range
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
    return (
        f"Too few to mean anything: {n} task{'s' if n != 1 else ''} {counted}, so each task is "
        f"{100 / max(n, 1):.0f} points of {rate}. Study at least {MIN_STUDIED} tasks (notebook 06's "
        "*Studied* slider, `study_limit=`) before reading it."
    )


def too_few_calibration_note(cal: Mapping[str, Any]) -> str:
    """The caveat under the calibration table when either side has too few tasks."""
    return (
        f"Too few to mean anything: fitted on {cal['fit_tasks']} and reported on {cal['report_tasks']} "
        f"tasks; with fewer than {MIN_TASKS} on either side a fitted temperature, ECE or Brier score is "
        "noise. Run more tasks (notebook 06's *Tasks* slider, `limit=`) before reading it."
    )


def fmt_temperature(cal: Mapping[str, Any]) -> str:
    """The fitted temperature, marked when the search stopped at its bound (the value is then the bound)."""
    text = f"{cal['temperature']:.3g}"
    return f"{text} (search bound)" if cal.get("at_search_bound") else text


def _flips(section: Mapping[str, Any]) -> str:
    if section.get("rate") is None:
        return "–"
    return f"{section['flips']}/{section['compared']} ({fmt_pct(section['rate'])})"


__all__ = [
    "MIN_STUDIED",
    "comparison_markdown",
    "fmt_pct",
    "fmt_ratio",
    "fmt_s",
    "letter_section",
    "render_markdown",
    "table",
]

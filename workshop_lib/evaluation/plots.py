"""Figures of a benchmark report, drawn with matplotlib.

* latency distribution: client latency of each run (histogram, p50 and p95 marked);
* accuracy by family: one bar per run, chance marked;
* reliability diagram: top-option probability vs observed accuracy, per bin,
  before (and after) temperature scaling.

``save_figures`` renders PNGs with the Agg canvas directly (no pyplot, no
display, nothing global); ``plot_report`` draws the three panels on a pyplot
figure so a notebook shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .report import RUN_TITLES, BenchReport, percentile
from .runner import Run
from .temperature import reliability_bins

if TYPE_CHECKING:  # matplotlib is imported only where a figure is made (_matplotlib)
    from matplotlib.axes import Axes
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

COLORS = {
    "decision": "#1f77b4",
    "generation": "#d62728",
    "debiased": "#2ca02c",
    "decision_reversed": "#9467bd",
    "debiased_reversed": "#8c564b",
}
SHOWN = ("decision", "debiased", "generation")  # runs drawn in the latency and accuracy panels


def _runs(report: BenchReport) -> list[tuple[str, Run]]:
    return [(key, report.runs[key]) for key in SHOWN if key in report.runs]


def draw_latency(ax: Axes, report: BenchReport) -> None:
    series = [
        (key, [r.client_latency_ms / 1000.0 for r in run.results if r.answered and r.client_latency_ms])
        for key, run in _runs(report)
    ]
    series = [(k, v) for k, v in series if v]
    if not series:
        ax.text(0.5, 0.5, "no answered requests", ha="center", transform=ax.transAxes)
        return
    low = min(min(v) for _, v in series)
    high = max(max(v) for _, v in series)
    if high / max(low, 1e-9) > 20:
        edges = np.geomspace(low * 0.95, high * 1.05, 30)
        ax.set_xscale("log")
    else:
        edges = np.linspace(low * 0.95, high * 1.05, 30)
    bins: list[float] = edges.tolist()  # matplotlib's annotations take a sequence (an array works too)
    for key, values in series:
        color = COLORS.get(key)
        ax.hist(
            values,
            bins=bins,
            histtype="step",
            linewidth=1.8,
            color=color,
            label=f"{RUN_TITLES.get(key, key)} (n={len(values)})",
        )
        for q, style in ((50, "--"), (95, ":")):
            at = percentile(values, q)
            if at is not None:  # always: every series kept has values
                ax.axvline(at, color=color, linestyle=style, linewidth=1)
    ax.set_xlabel("client latency (s); dashed p50, dotted p95")
    ax.set_ylabel("tasks")
    ax.set_title("Latency distribution")
    ax.legend(fontsize=9)


def draw_accuracy_by_family(ax: Axes, report: BenchReport) -> None:
    summaries = report.summaries
    shown = [key for key, _ in _runs(report)]
    families = list(summaries["decision"]["by_family"])
    x = np.arange(len(families))
    width = 0.8 / max(1, len(shown))
    for i, key in enumerate(shown):
        fam = summaries[key]["by_family"]
        values = [(fam.get(f) or {}).get("accuracy") or 0.0 for f in families]
        ax.bar(
            x + (i - (len(shown) - 1) / 2) * width,
            values,
            width,
            color=COLORS.get(key),
            label=f"{RUN_TITLES.get(key, key)} ({summaries[key]['tasks']} tasks)",
        )
    chance = [summaries["decision"]["by_family"][f]["chance"] for f in families]
    ax.scatter(x, chance, marker="_", s=400, color="black", zorder=3, label="chance")
    ax.set_xticks(
        x,
        [f"{f}\n(n={summaries['decision']['by_family'][f]['n']})" for f in families],
        fontsize=9,
        rotation=30,
        ha="right",
    )
    ax.set_ylim(0, 1.3)
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_ylabel("accuracy")
    ax.set_title("Accuracy by family")
    ax.legend(fontsize=9, ncol=2, loc="upper center")


def draw_reliability(ax: Axes, report: BenchReport) -> None:
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfectly calibrated")
    cal = report.calibration
    if cal and "error" not in cal:
        curves = [
            ("before", cal["before"]["bins"], "#1f77b4", f"T = 1 (ECE {cal['before']['ece']:.3f})"),
            ("after", cal["after"]["bins"], "#ff7f0e", f"T = {cal['temperature']:.2g} (ECE {cal['after']['ece']:.3f})"),
        ]
        title = f"Reliability ({cal['report_tasks']} held-out tasks)"
    else:
        valid = [r for r in report.decision.results if r.valid]
        scored = [(p, r.correct) for r in valid if (p := r.top_probability) is not None]  # those with probabilities
        bins = reliability_bins([p for p, _ in scored], [right for _, right in scored])
        curves = [("all", bins, "#1f77b4", f"decision readout ({len(valid)} tasks)")]
        title = "Reliability"
    for _, bins, color, label in curves:
        used = [b for b in bins if b["n"]]
        if not used:
            continue
        conf = [b["confidence"] for b in used]
        acc = [b["accuracy"] for b in used]
        sizes = [20 + 180 * b["n"] / max(x["n"] for x in used) for b in used]
        ax.plot(conf, acc, color=color, linewidth=1, alpha=0.7)
        ax.scatter(conf, acc, s=sizes, color=color, alpha=0.8, label=label)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("top-option probability (bin mean; dot size = tasks)")
    ax.set_ylabel("observed accuracy")
    ax.set_title(title)
    ax.legend(fontsize=9, loc="upper left")


def _matplotlib() -> tuple[type[Figure], type[FigureCanvasAgg]]:
    # matplotlib is optional (the notebooks extra) and slow to import: only the functions that make a
    # figure import it, so the report's tables and JSON work without it.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    return Figure, FigureCanvasAgg


PANELS: dict[str, Callable[[Axes, BenchReport], None]] = {
    "latency": draw_latency,
    "accuracy_by_family": draw_accuracy_by_family,
    "reliability": draw_reliability,
}


def save_figures(report: BenchReport, out_dir: str | Path, dpi: int = 120) -> dict[str, Path]:
    """One PNG per panel in ``out_dir``: latency.png, accuracy_by_family.png, reliability.png.

    Raises ImportError where matplotlib is not installed."""
    Figure, FigureCanvasAgg = _matplotlib()
    out = Path(out_dir)
    paths = {}
    for name, draw in PANELS.items():
        fig = Figure(figsize=(6.4, 4.4), layout="constrained")
        FigureCanvasAgg(fig)
        draw(fig.add_subplot(), report)
        path = out / f"{name}.png"
        fig.savefig(path, dpi=dpi)
        paths[name] = path
    return paths


def plot_report(report: BenchReport) -> Figure:
    """The three panels one above the other, sized for a notebook's width (text stays readable
    without scaling down); a Figure outside pyplot, so a notebook shows it exactly once."""
    Figure, FigureCanvasAgg = _matplotlib()
    fig = Figure(figsize=(7.5, 13.5), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    for ax, draw in zip(fig.subplots(3, 1), PANELS.values()):
        draw(ax, report)
    return fig


__all__ = ["draw_accuracy_by_family", "draw_latency", "draw_reliability", "plot_report", "save_figures"]

"""A benchmark report that shows and saves itself: what ``run_benchmark`` returns to a notebook or the CLI.

``ReportView`` is a ``report.BenchReport`` (the runs and the numbers derived from them) with its
renderings attached: shown as Markdown in a notebook (``markdown.render_markdown``), drawn
(``plots.plot_report``) and saved as report.json, report.md and PNG figures (``plots.save_figures``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .markdown import render_markdown
from .plots import plot_report, save_figures
from .report import BenchReport

if TYPE_CHECKING:  # matplotlib is an optional dependency
    from matplotlib.figure import Figure


class ReportView(BenchReport):
    """One benchmark's report, shown as Markdown in a notebook; ``plot()`` draws it, ``save(dir)`` writes it."""

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
                paths.update(save_figures(self, out))
            except ImportError:  # matplotlib is an optional dependency (the notebooks extra)
                self.notes.append("matplotlib is not installed: no figures")
        return paths

    def plot(self) -> Figure:
        """The three figures in one matplotlib figure, for a notebook to show."""
        return plot_report(self)

    def _repr_markdown_(self) -> str:
        return self.to_markdown()


__all__ = ["ReportView"]

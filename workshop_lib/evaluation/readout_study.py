"""The adapter's two readouts side by side: ``letters`` (the answer letters' logits after a prompt that
lists the options) and ``cloze`` (each option's own text scored as what follows the state and the question).

``ask_each_readout(client, body)`` asks one decision with each readout and shows the answers side by side
(notebook 05). ``measure_readouts(client, tasks)`` sends every task with each readout twice (options as
declared, then reversed), at temperature 1, and returns a ``ReadoutStudy``: per readout the accuracy
against chance, the flips under reversal, the median time against the tokens evaluated, NLL and ECE on the
held-out tasks before and after the fitted temperatures, and the prediction sets' coverage and size where
a profile keeps one (notebook 06). The figures come from ``order_study`` and ``profiles``; nothing here
is asserted about them: a small model's accuracy is not the point.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from decision_contract.names import CLOZE, READOUTS

from ..client import EndpointClient
from ..display import DecisionView
from ..errors import WorkshopError
from . import conformal
from .order_study import heldout_calibration, mode_figures
from .profiles import DEFAULT_ALPHA, CalibrationFileError, calibration_document, labelled, write_document
from .runner import Run, TaskResult, run_decisions
from .tasks import Task, resolve_tasks
from .temperature import softmax


def _check(readouts: Sequence[str]) -> list[str]:
    unknown = [r for r in readouts if r not in READOUTS]
    if unknown:
        raise ValueError(f"unknown readouts {unknown}; choose from {', '.join(READOUTS)}")
    return list(dict.fromkeys(readouts))


class ReadoutsView(DecisionView):
    """One decision asked with each readout: a chart each, and what each readout read."""

    def lines(self) -> list[str]:
        out = super().lines()
        for decision in self.decisions:
            raw = decision.raw or {}
            if decision.readout == CLOZE:
                out.append(
                    f"cloze: {raw['input_tokens']} input tokens; each option's text read as "
                    f"{', '.join(map(str, raw['option_tokens']))} tokens, scores normalised by "
                    f"{raw.get('normalize')}"
                )
            else:
                out.append(
                    f"letters: {raw.get('input_tokens')} input tokens; the answer letters held "
                    f"{raw.get('allowed_token_mass', 0.0):.3f} of the next-token probability"
                )
        return out


def ask_each_readout(
    client: EndpointClient, body: Mapping[str, Any], readouts: Sequence[str] = READOUTS
) -> ReadoutsView:
    """The decision ``body`` asked once with each readout (its id gets the readout's name), side by side."""
    answers = [
        client.decide({**body, "id": f"{body.get('id', 'decision')} ({r})", "readout": r}) for r in _check(readouts)
    ]
    return ReadoutsView(answers, latency=False)


def run_readout(
    client: EndpointClient, tasks: Sequence[Task], readout: str, *, order: str = "original", progress: bool = True
) -> Run:
    """Every task once with ``readout`` in order mode ``as_given`` (whatever the server's default mode), the
    options presented in ``order``, at temperature 1 (no profile)."""
    run = run_decisions(
        client,
        tasks,
        order=order,
        temperature=1.0,
        progress=progress,
        label=readout if order == "original" else f"{readout} ({order})",
        fields=lambda task: {"order": "as_given", "readout": readout, "question_type": task.type},
    )
    run.settings["order_mode"], run.settings["readout"] = "as_given", readout
    return run


def chance(tasks: Sequence[Task]) -> float | None:
    """The accuracy of a uniform random pick over each task's options."""
    return statistics.mean(1.0 / len(t.options) for t in tasks) if tasks else None


def prediction_sets(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The kept prediction sets of a calibration document: how many profiles keep one, and their coverage and
    mean size on the fitting answers (weighted by the held-out answers each was fitted on)."""
    kept = [p["conformal"] for p in doc["profiles"].values() if (p.get("conformal") or {}).get("kept")]
    if not kept:
        return {"kept": 0, "coverage": None, "set_size": None, "alpha": doc.get("alpha")}
    weights = [c["heldout_n"] for c in kept]

    def mean(key: str) -> float:
        return float(sum(c[key] * w for c, w in zip(kept, weights)) / sum(weights))

    return {
        "kept": len(kept),
        "coverage": mean("fit_coverage"),
        "set_size": mean("fit_set_size"),
        "alpha": doc.get("alpha"),
    }


def resampled_sets(results: Iterable[TaskResult], doc: Mapping[str, Any]) -> dict[str, float | int] | None:
    """The prediction sets' coverage judged on answers their threshold was not fitted on
    (``conformal.resampled_coverage``): every labelled answer of the run, by profile, at the temperature the
    document serves for it; the served split's 18 or so fitting answers are too few to read a coverage on."""
    served = {name: p["temperature"] if p["kept"] else 1.0 for name, p in doc["profiles"].items()}
    groups: dict[str, tuple[list[np.ndarray], list[int]]] = {}
    for row in filter(None, map(labelled, results)):
        rows, targets = groups.setdefault(row.profile, ([], []))
        rows.append(softmax(row.log_probs, served.get(row.profile, 1.0)))
        targets.append(row.target)
    return conformal.resampled_coverage(list(groups.values()), doc["alpha"])


@dataclass(repr=False)
class ReadoutStudy:
    """The runs of ``measure_readouts`` and what they show; ``text()`` prints it."""

    by_readout: dict[str, tuple[Run, Run]]  # readout -> (options as declared, reversed)
    tasks: str
    chance: float | None
    alpha: float = DEFAULT_ALPHA

    def calibration(self, readout: str) -> dict[str, Any] | None:
        """The ``calibration.json`` this readout's run gives, or None when it has nothing to fit on."""
        try:
            return calibration_document(
                self.by_readout[readout][0].results,
                order="as_given",
                tasks=self.tasks,
                alpha=self.alpha,
                readout=readout,
            )
        except CalibrationFileError:
            return None

    @property
    def ok(self) -> bool:
        """Every request with every readout came back as a valid answer (notebook 06's closing check)."""
        return bool(self.by_readout) and all(
            r.valid for pair in self.by_readout.values() for run in pair for r in run.results
        )

    @property
    def problem(self) -> str:
        bad = {
            f"{readout} ({which})": sum(not r.valid for r in run.results)
            for readout, pair in self.by_readout.items()
            for which, run in zip(("options as declared", "reversed"), pair)
        }
        return "; ".join(f"{n} invalid or failed answers in {k}" for k, n in bad.items() if n)

    @property
    def summary(self) -> str:
        n = sum(len(run.results) for pair in self.by_readout.values() for run in pair)
        return f"{n} answers with {len(self.by_readout)} readouts, each valid" if self.ok else self.problem

    def save_calibration(self, path: str | Path, readout: str) -> Path:
        """Write ``readout``'s ``calibration.json`` to ``path`` (a folder gets the file inside it)."""
        doc = self.calibration(readout) if readout in self.by_readout else None
        if doc is None:
            raise WorkshopError(
                f"the {readout} run has no valid answer among its fitting tasks (split dev, or half "
                "the tasks by a hash of their id): run more tasks, with that readout among them"
            )
        return write_document(doc, path)

    @cached_property
    def figures(self) -> dict[str, dict[str, Any]]:
        """Per readout: its runs' figures, the calibration it gives and that calibration's sets (fitted and
        resampled once: ``text()``, the benchmark and the notebook read them again)."""
        out: dict[str, dict[str, Any]] = {}
        for readout, (original, reversed_run) in self.by_readout.items():
            f = mode_figures(original, reversed_run)
            f.pop("sensitivity", None), f.pop("risk_coverage", None), f.pop("mode", None)
            f["ms_per_token"] = f["p50_ms"] / f["tokens_mean"] if f["p50_ms"] is not None and f["tokens_mean"] else None
            doc = self.calibration(readout)
            f["heldout"] = heldout_calibration(original.results, doc) if doc else {"n": 0}
            f["sets"] = (
                prediction_sets(doc) if doc else {"kept": 0, "coverage": None, "set_size": None, "alpha": self.alpha}
            )
            f["sets"]["resampled"] = resampled_sets(original.results, doc) if doc else None
            out[readout] = f
        return out

    def text(self) -> str:
        def num(v: float | None, fmt: str = ".3f") -> str:
            return "-" if v is None else format(v, fmt)

        lines = [
            f"{self.tasks}: each readout, options as declared and reversed, temperature 1; "
            f"chance {num(self.chance, '.0%')}"
        ]
        for readout, f in self.figures.items():
            flips = f["flips"]
            lines.append(
                f"  {readout:<8} accuracy {num(f['accuracy'], '.0%')} of {f['tasks']} "
                f"({f['valid']} valid); flips {flips.get('flips', 0)}/{flips.get('compared', 0)}; "
                f"p50 {num(f['p50_ms'], '.0f')} ms for {num(f['tokens_mean'], '.0f')} tokens evaluated "
                f"({num(f['ms_per_token'], '.1f')} ms/token)"
            )
            h = f["heldout"]
            if h.get("n"):
                b, a = h["before"], h["after"]
                lines.append(
                    f"  {'':<8} held-out n={h['n']}: NLL {b['nll']:.3f} -> {a['nll']:.3f}, "
                    f"ECE {b['ece']:.3f} -> {a['ece']:.3f} (profiles kept: {', '.join(h['kept']) or 'none'})"
                )
            else:
                lines.append(f"  {'':<8} no held-out answers to judge a calibration on")
            s = f["sets"]
            lines.append(
                f"  {'':<8} prediction sets (1 - alpha = {1 - (s['alpha'] or self.alpha):g}): "
                + (
                    f"{s['kept']} profile(s), coverage {s['coverage']:.0%}, mean size {s['set_size']:.2f}"
                    if s["kept"]
                    else "none kept (too few held-out tasks)"
                )
            )
            r = s.get("resampled")
            if r:
                lines.append(
                    f"  {'':<8} over {r['rounds']} random half splits of {r['answers']} answers in "
                    f"{r['groups']} profile(s): coverage {r['coverage']:.0%}, mean size {r['set_size']:.2f}"
                )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def _repr_markdown_(self) -> str:
        return "```text\n" + self.text() + "\n```"


def measure_readouts(
    client: EndpointClient,
    tasks: str | Path | Iterable[Task] | None = None,
    *,
    readouts: Sequence[str] = READOUTS,
    limit: int | None = None,
    progress: bool = True,
    alpha: float = DEFAULT_ALPHA,
) -> ReadoutStudy:
    """Every task with each readout, options as declared and reversed, at temperature 1."""
    chosen = _check(readouts)
    task_list, name = resolve_tasks(tasks, limit)
    runs = {
        r: (
            run_readout(client, task_list, r, progress=progress),
            run_readout(client, task_list, r, order="reversed", progress=progress),
        )
        for r in chosen
    }
    return ReadoutStudy(runs, tasks=name, chance=chance(task_list), alpha=alpha)

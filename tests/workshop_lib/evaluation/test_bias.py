"""Order test and the debiased readout's report section, on fixed inputs."""

import pytest

from workshop_lib.evaluation.bias import flip_stats
from workshop_lib.evaluation.report import BenchReport
from workshop_lib.evaluation.runner import Run, TaskResult


def _tr(task_id, predicted, valid=True, **measured):
    return TaskResult(
        task_id=task_id,
        family="f",
        type="choice",
        expected="a",
        labels=["a", "b"],
        valid=valid,
        predicted=predicted if valid else None,
        correct=valid and predicted == "a",
        **measured,
    )


def test_flip_stats_counts_changed_top_choices_on_valid_pairs():
    base = [_tr("1", "a"), _tr("2", "a"), _tr("3", "b"), _tr("4", "a"), _tr("5", "a")]
    other = [_tr("1", "a"), _tr("2", "b"), _tr("3", "a"), _tr("4", None, valid=False)]
    stats = flip_stats(base, other)
    assert stats == {
        "compared": 3,
        "flips": 2,
        "rate": pytest.approx(2 / 3),
        "not_comparable": 1,
        "flipped_tasks": ["2", "3"],
    }
    assert flip_stats([], [])["rate"] is None


def _served(task_id, predicted, presentations, evaluated):
    """An answer of the adapter's rotations mode: it says how many orders it averaged and what it evaluated."""
    return _tr(
        task_id,
        predicted,
        client_latency_ms=50.0 * presentations,
        input_tokens=10 * presentations,
        timing={"input_tokens": evaluated},
        extra={
            "order": "rotations",
            "order_sensitivity": {"presentations": presentations, "of": 2, "max_spread": 0.1, "top_changes": False},
        },
    )


def _run(key, results):
    return Run(label=key, kind="decision", results=results)


def test_the_debiased_section_reads_the_served_rotations_answers():
    plain = [
        _tr("1", "a", client_latency_ms=100.0, input_tokens=40),
        _tr("2", "b", client_latency_ms=80.0, input_tokens=30),
    ]
    reversed_ = [_tr("1", "b"), _tr("2", "b")]
    debiased = [_served("1", "a", 2, 50), _served("2", "a", 6, 90)]
    debiased_reversed = [_served("1", "a", 2, 50), _served("2", "b", 6, 90)]
    report = BenchReport(
        runs={
            "decision": _run("decision", plain),
            "decision_reversed": _run("r", reversed_),
            "debiased": _run("d", debiased),
            "debiased_reversed": _run("dr", debiased_reversed),
        }
    )
    section = report.order_test["debiased"]
    assert (section["compared"], section["flips"], section["flipped_tasks"]) == (2, 1, ["2"])
    assert section["presentations_mean"] == 4 and section["evaluated_tokens_mean"] == 70
    # k separate plain decisions: each task's plain figures times the orders its answer averaged.
    assert section["k_separate_tokens_mean"] == (40 * 2 + 30 * 6) / 2
    assert section["k_separate_estimate_ms"]["max"] == 80.0 * 6
    assert section["accuracy_original"] == 1.0 and section["accuracy_reordered"] == 0.5
    assert report.order_test["plain"]["flips"] == 1

"""Benchmark results and a client made by hand, for tests of calibration and of what reads a served readout."""

from __future__ import annotations

from workshop_lib.client.endpoint import Decision
from workshop_lib.evaluation.runner import TaskResult

SHA = "ab" * 32


def task_result(
    i,
    *,
    split,
    kind="choice",
    labels=("a", "b", "c"),
    p=(0.7, 0.2, 0.1),
    expected="a",
    sha=SHA,
    version="decision-prompt/1",
    mass=0.99,
    correct=None,
):
    probabilities = dict(zip(labels, p))
    top = max(probabilities, key=probabilities.get)
    return TaskResult(
        task_id=f"task-{i}",
        family="f",
        type=kind,
        expected=expected,
        labels=list(labels),
        split=split,
        valid=True,
        predicted=top,
        correct=(top == expected) if correct is None else correct,
        probabilities=probabilities,
        extra={"model_sha256": sha, "prompt_version": version, "allowed_token_mass": mass},
    )


def mixed_results() -> list[TaskResult]:
    """24 choice and 24 predicate results, a third of them in the dev split."""
    out = []
    for i in range(24):
        split = "dev" if i % 3 == 0 else "test"
        expected = "a" if i % 2 else "b"
        out.append(task_result(i, split=split, expected=expected))
        out.append(
            task_result(
                100 + i,
                split=split,
                kind="noul",
                labels=("no", "yes"),
                p=(0.95, 0.05),
                expected="yes" if i % 4 == 0 else "no",
            )
        )
    return out


class AnsweringClient:
    """A client whose answers report ``reported`` as the server's readout in their model block."""

    def __init__(self, reported, readout=None):
        self.reported, self.readout, self.sent = reported, readout, []

    def decide(self, body):
        self.sent.append(body)
        ids = [o["id"] for o in body["options"]]
        model = {} if self.reported is None else {"readout": self.reported}
        return Decision(body["id"], tuple(ids), tuple(1 / len(ids) for _ in ids), model=model)

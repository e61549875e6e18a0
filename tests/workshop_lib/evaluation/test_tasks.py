"""Task records -> decision requests: JevBench and decision formats, orders, selection, the packaged set."""

import json
from collections import Counter

import pytest

from workshop_lib.evaluation.tasks import (
    Task,
    TaskFormatError,
    load_tasks,
    parse_tasks,
    permutation,
    rotation,
    select,
    task_from_record,
)

CHOICE = {
    "id": "c1",
    "family": "routing",
    "state": "Charged twice.",
    "question": {
        "type": "choice",
        "instructions": "Which team?",
        "criteria": {"billing": "Billing: charges", "tech": None, "sales": "Sales"},
    },
    "labels": ["billing", "tech", "sales"],
    "expected": "billing",
    "split": "dev",
    "group": "g1",
    "provenance": "test",
}


def test_choice_record_keeps_label_order_and_uses_the_id_when_the_description_is_null():
    task = task_from_record(CHOICE)
    assert task.type == "choice" and task.family == "routing" and task.split == "dev" and task.group == "g1"
    assert task.options == (("billing", "Billing: charges"), ("tech", "tech"), ("sales", "Sales"))
    assert task.request() == {
        "id": "c1",
        "state": "Charged twice.",
        "question": "Which team?",
        "options": [
            {"id": "billing", "text": "Billing: charges"},
            {"id": "tech", "text": "tech"},
            {"id": "sales", "text": "Sales"},
        ],
    }


def test_choice_labels_decide_the_order_not_the_criteria():
    record = dict(CHOICE, labels=["sales", "billing", "tech"])
    assert task_from_record(record).labels == ("sales", "billing", "tech")


def test_choice_without_labels_takes_the_criteria_order():
    record = {k: v for k, v in CHOICE.items() if k != "labels"}
    assert task_from_record(record).labels == ("billing", "tech", "sales")


def test_noul_maps_to_no_then_yes_with_descriptions():
    record = {
        "id": "n1",
        "state": "s",
        "expected": True,
        "labels": ["no", "yes"],
        "question": {
            "type": "noul",
            "instructions": "Refund allowed?",
            "criteria": {"true": "the refund is allowed", "false": "it is not"},
        },
    }
    task = task_from_record(record)
    assert task.labels == ("no", "yes") and task.expected == "yes" and task.family == "noul"
    assert task.options == (("no", "no: it is not"), ("yes", "yes: the refund is allowed"))
    assert task_from_record(dict(record, expected="no")).expected == "no"
    assert task_from_record(dict(record, expected=False)).expected == "no"


def test_noul_without_criteria_shows_plain_yes_and_no():
    task = task_from_record(
        {"id": "n2", "state": "s", "expected": "yes", "question": {"type": "noul", "instructions": "Is it?"}}
    )
    assert task.options == (("no", "no"), ("yes", "yes"))


def test_score_maps_to_ordered_levels_and_an_int_expected():
    record = {
        "id": "s1",
        "state": "s",
        "expected": 2,
        "labels": ["0", "1", "2"],
        "question": {"type": "score", "instructions": "How bad?", "criteria": ["fine", "bad", "awful"]},
    }
    task = task_from_record(record)
    assert task.labels == ("0", "1", "2") and task.expected == "2"
    assert [o["text"] for o in task.request()["options"]] == ["fine", "bad", "awful"]


def test_decision_format_record():
    task = task_from_record(
        {
            "id": "d1",
            "state": {"ticket": 7},
            "question": "Which?",
            "expected": "b",
            "options": ["a", {"id": "b", "text": "Bee"}],
        }
    )
    assert task.type == "choice" and task.family == "choice" and task.split == "test"
    assert task.options == (("a", "a"), ("b", "Bee")) and task.state == {"ticket": 7}


@pytest.mark.parametrize(
    "change, message",
    [
        ({"expected": "nope"}, "not one of the labels"),
        ({"expected": None}, "expected"),
        ({"state": ""}, "state"),
        ({"labels": ["billing", "tech"]}, "not labels"),
        ({"question": {"type": "ranking", "instructions": "x"}}, "question.type"),
        ({"question": {"type": "noul", "instructions": "x"}, "labels": ["yes", "no"]}, '["no", "yes"]'),
        (
            {
                "question": {"type": "score", "instructions": "x", "criteria": ["a", "b"]},
                "labels": ["1", "2"],
                "expected": 1,
            },
            "labels",
        ),
        ({"question": {"type": "score", "instructions": "x", "criteria": ["a"]}}, "2 to 10"),
        (
            {
                "question": {"type": "choice", "instructions": "x", "criteria": {"a": None}},
                "labels": ["a"],
                "expected": "a",
            },
            "2 to 16",
        ),
    ],
)
def test_bad_records_are_refused_with_the_reason(change, message):
    with pytest.raises(TaskFormatError, match=message.replace("[", r"\[").replace("]", r"\]")):
        task_from_record(dict(CHOICE, **change), "tasks.jsonl:3")


def test_parse_errors_name_the_line():
    with pytest.raises(TaskFormatError, match="f.jsonl:2"):
        parse_tasks([json.dumps(CHOICE), "{not json"], "f.jsonl")
    with pytest.raises(TaskFormatError, match="duplicate task id"):
        parse_tasks([json.dumps(CHOICE), "", json.dumps(CHOICE)], "f.jsonl")


def test_named_orders_and_rotations():
    assert permutation("original", 4) == (0, 1, 2, 3)
    assert permutation("reversed", 4) == (3, 2, 1, 0)
    assert permutation("rotated", 4) == (1, 2, 3, 0)
    assert rotation((3, 2, 1, 0), 1) == (2, 1, 0, 3)
    task = task_from_record(CHOICE)
    assert [o["id"] for o in task.request("reversed")["options"]] == ["sales", "tech", "billing"]
    assert [o["id"] for o in task.question_body("q", (1, 2, 0))["options"]] == ["tech", "sales", "billing"]
    with pytest.raises(ValueError):
        permutation("shuffled", 3)


def test_select_spreads_a_limit_across_families_and_keeps_file_order():
    tasks = [
        Task(f"{fam}{i}", fam, "choice", "s", "q", (("a", "a"), ("b", "b")), "a") for fam in "xyz" for i in range(3)
    ]
    picked = select(tasks, 4)
    assert [t.id for t in picked] == ["x0", "x1", "y0", "z0"]
    assert select(tasks, None) == tasks and select(tasks, 99) == tasks


def test_to_record_round_trips():
    for record in (
        CHOICE,
        {
            "id": "s1",
            "state": "s",
            "expected": 1,
            "question": {"type": "score", "instructions": "q", "criteria": ["a", "b"]},
        },
        {
            "id": "n1",
            "state": "s",
            "expected": "no",
            "question": {"type": "noul", "instructions": "q", "criteria": {"true": "T", "false": "F"}},
        },
    ):
        task = task_from_record(record)
        assert task_from_record(json.loads(json.dumps(task.to_record()))) == task


def test_the_packaged_task_set():
    tasks = load_tasks()
    assert len(tasks) >= 60
    families = Counter(t.family for t in tasks)
    assert set(families) >= {"routing", "intent", "priority", "tool_selection", "policy", "extraction", "scoring"}
    assert all(n >= 8 for n in families.values())
    assert {t.type for t in tasks} == {"choice", "noul", "score"}
    assert all(t.expected in t.labels for t in tasks)
    assert {t.split for t in tasks} == {"dev", "test"}
    # Tasks about one state share a split, so calibration never fits on a state it reports on.
    splits_per_group = {}
    for t in tasks:
        if t.group:
            splits_per_group.setdefault(t.group, set()).add(t.split)
    assert splits_per_group and all(len(s) == 1 for s in splits_per_group.values())
    # The right answer is not parked in one position (which would flatter a position-biased model).
    first = sum(t.labels[0] == t.expected for t in tasks if t.type == "choice") / sum(t.type == "choice" for t in tasks)
    assert first < 0.4


def test_load_tasks_limit_and_family_filter(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(dict(CHOICE, id=f"c{i}")) for i in range(5)) + "\n")
    assert len(load_tasks(path, limit=2)) == 2
    assert load_tasks(path, families=["nothing"]) == []

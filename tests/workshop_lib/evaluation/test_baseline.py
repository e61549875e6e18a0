"""The generation baseline's prompt and reply parsing."""

import pytest

from workshop_lib.evaluation.baseline import generation_messages, generation_result, parse_answer
from workshop_lib.evaluation.tasks import Task

LABELS = ["billing", "tech_support", "account_security"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("billing", ("billing", "exact")),
        ("  `Tech_Support`.\n", ("tech_support", "exact")),
        ("tech support", ("tech_support", "exact")),
        ("**account-security**", ("account_security", "exact")),
        ("The answer is billing.", ("billing", "found")),
        ("- tech_support: Technical support", ("tech_support", "found")),
        ("billing or tech_support", (None, "ambiguous")),
        ("I cannot tell.", (None, "none")),
        ("", (None, "none")),
        ("billingual", (None, "none")),  # whole words only
    ],
)
def test_parse_answer(text, expected):
    assert parse_answer(text, LABELS) == expected


def test_yes_no_and_levels():
    assert parse_answer("Yes.", ["no", "yes"]) == ("yes", "exact")
    assert parse_answer("Nothing to add", ["no", "yes"]) == (None, "none")
    assert parse_answer("No, yes", ["no", "yes"]) == (None, "ambiguous")
    assert parse_answer("Level 2", ["0", "1", "2"]) == ("2", "found")
    assert parse_answer("INV-20931", ["INV-20391", "INV-20931"]) == ("INV-20931", "exact")


def test_messages_list_every_id_and_the_state():
    task = Task(
        "t",
        "routing",
        "choice",
        {"ticket": "refund please"},
        "Which team?",
        (("billing", "Billing: money"), ("sales", "sales")),
        "billing",
    )
    system, user = generation_messages(task)
    assert system["role"] == "system" and "id" in system["content"]
    assert '{"ticket": "refund please"}' in user["content"] and "Which team?" in user["content"]
    assert "- billing: Billing: money\n- sales\n" in user["content"]
    assert user["content"].endswith("billing, sales")
    assert "- sales\n- billing" in generation_messages(task, "reversed")[1]["content"]


def test_generation_result():
    task = Task("t", "routing", "choice", "s", "q", (("a", "A"), ("b", "B")), "b")
    good = generation_result(task, "b", client_latency_ms=50.0)
    assert good.valid and good.correct and good.extra["parse"] == "exact" and good.probabilities is None
    bad = generation_result(task, "maybe")
    assert bad.answered and not bad.valid and not bad.correct and "none" in bad.error

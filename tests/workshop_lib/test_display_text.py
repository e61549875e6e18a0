"""Notebook text that breaks only between words, widgets that keep a participant's choice, and a
name left undefined by a kernel restart shown as one line with what to do."""

from __future__ import annotations

import re

import pytest

from workshop_lib import display, steps
from workshop_lib.config import WorkshopConfig


def test_rows_wrap_between_words_under_their_detail_column():
    head = "FAIL quotas         "
    detail = (
        "ml.g6e.xlarge: 0, ml.g6.2xlarge: 0, ml.g5.2xlarge: unknown - request an increase in Service "
        "Quotas (Amazon SageMaker) before deploying"
    )
    lines = display.row(head, detail, width=60).splitlines()
    assert len(lines) > 1 and lines[0].startswith(head)
    assert all(len(line) <= 60 for line in lines)
    assert all(line.startswith(" " * len(head)) and not line[len(head)].isspace() for line in lines[1:])
    assert " ".join(" ".join(lines).split()) == " ".join((head + detail).split())  # every word whole, in order


def test_shorten_cuts_at_a_word_and_excerpt_at_a_line(tmp_path):
    text = "endpoint decision-workshop-cpu: InService after 312.4 s (SageMaker) with every layer offloaded"
    short = display.shorten(text, 40)
    assert len(short) <= 40 and short.endswith(" …") and text.startswith(short[:-2])
    assert short[:-2].split()[-1] in text.split()  # the last word kept is a whole word
    policy = tmp_path / "policy.json"
    policy.write_text("\n".join(f'  "line {i}": "{"x" * 90}",' for i in range(50)))
    shown = display.excerpt(policy, lines=10).splitlines()
    assert shown[:10] == policy.read_text().splitlines()[:10]
    assert shown[10] == f"… 40 more lines in {policy}"
    assert display.excerpt(policy, lines=50) == policy.read_text()


class FakeWidget:
    """ipywidgets' value/observe protocol, enough for keep_choice."""

    def __init__(self, value, options=None):
        self.value, self._observers = value, []
        if options is not None:
            self.options = options

    def observe(self, handler, names):
        assert names == "value"
        self._observers.append(handler)

    def choose(self, value):  # what a participant's click does
        old, self.value = self.value, value
        for handler in self._observers:
            handler({"name": "value", "old": old, "new": value})


def test_a_kept_widget_starts_at_the_last_choice_unless_the_environment_says(tmp_path, monkeypatch):
    monkeypatch.delenv("WORKSHOP_DEPLOY_PATH", raising=False)
    workshop = steps.Workshop(WorkshopConfig(mode="local"), tmp_path / "config.json")
    first = steps.keep_choice(
        workshop, "deploy_path", FakeWidget("standard", ("standard", "decision-gpu")), env="WORKSHOP_DEPLOY_PATH"
    )
    first.choose("decision-gpu")
    assert workshop.outputs()["choices"] == {"deploy_path": "decision-gpu"}
    # Run All builds the widget again at its default: it comes back at the choice.
    again = steps.Workshop(WorkshopConfig(mode="local"), tmp_path / "config.json")
    rebuilt = steps.keep_choice(
        again, "deploy_path", FakeWidget("standard", ("standard", "decision-gpu")), env="WORKSHOP_DEPLOY_PATH"
    )
    assert rebuilt.value == "decision-gpu"
    gone = steps.keep_choice(again, "deploy_path", FakeWidget("standard", ("standard",)))  # no longer offered
    assert gone.value == "standard"
    monkeypatch.setenv("WORKSHOP_DEPLOY_PATH", "standard")  # unattended runs choose through the environment
    assert (
        steps.keep_choice(
            again, "deploy_path", FakeWidget("standard", ("standard", "decision-gpu")), env="WORKSHOP_DEPLOY_PATH"
        ).value
        == "standard"
    )


def test_the_builder_request_reads_the_kept_text_so_it_runs_after_a_restart(tmp_path, monkeypatch):
    for name in ("WORKSHOP_BUILDER_STATE", "WORKSHOP_BUILDER_QUESTION", "WORKSHOP_BUILDER_OPTIONS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WORKSHOP_CONFIG", str(tmp_path / "config.json"))
    workshop = steps.Workshop.load()
    default = steps.builder_request(workshop)
    assert default["question"] == steps.builder_default("question")
    question = steps.keep_choice(workshop, "builder_question", FakeWidget(steps.builder_default("question")))
    options = steps.keep_choice(workshop, "builder_options", FakeWidget(steps.builder_default("options")))
    question.choose("Is the customer angry?")
    options.choose("angry: Angry\ncalm: Calm\n")
    later = steps.builder_request()  # a new kernel: nothing but the saved workshop
    assert later["question"] == "Is the customer angry?"
    assert [o["id"] for o in later["options"]] == ["angry", "calm"]
    assert later["state"] == default["state"]


@pytest.fixture
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    made = InteractiveShell.instance()  # one per process: other tests may have defined names in it
    made.reset(new_session=False)
    assert display.install_error_handler(made)
    yield made
    made.set_custom_exc((), None)


def test_a_name_a_restart_forgot_is_one_line_saying_to_run_the_cells_above(shell, capsys, tmp_path, monkeypatch):
    assert not shell.run_cell("steps.show_decision(route)").success
    shown = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out).strip().splitlines()
    assert shown == [
        f"NameError: name 'steps' is not defined: a cell above has not run in this kernel (a restart "
        f"forgets them); {display.RUN_ABOVE}"
    ]
    # A NameError raised in a module's code is a bug there, not an unrun cell: its traceback is kept.
    (tmp_path / "broken_module.py").write_text("def call():\n    return missing_name\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert not shell.run_cell("import broken_module\nbroken_module.call()").success
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert "Traceback" in out and "broken_module.py" in out and display.RUN_ABOVE not in out

"""What the notebooks show and check: decision charts, one-line expected errors, closing outcome checks."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from workshop_lib import display, steps
from workshop_lib.client import ChatResult, Decision, UnprocessableRequest
from workshop_lib.client.policy import Policy
from workshop_lib.config import WorkshopConfig

ROUTE = Decision(
    "ticket-1",
    ("billing", "tech_support", "sales"),
    (0.465, 0.35, 0.185),
    timing={"total_ms": 250.0},
    client_latency_ms=260.0,
)
ANSWERS = [
    Decision(q, ("no", "yes"), (0.8, 0.2), timing={"total_ms": 900.0}, client_latency_ms=910.0)
    for q in ("refund", "urgent", "angry")
]


def config(mode: str) -> steps.Workshop:
    return steps.Workshop(WorkshopConfig(mode=mode))


def test_a_decision_is_text_for_logs_and_a_chart_for_people():
    view = steps.show_decision(ROUTE)
    text = str(view)
    assert text.splitlines()[0] == "ticket-1:" and "billing" in text.splitlines()[1]
    assert text.endswith("client 260 ms, server 250 ms")
    png = view._repr_png_()
    assert png.startswith(b"\x89PNG") and len(png) > 5000


def test_shared_state_answers_show_the_request_time_once():
    text = str(steps.show_decisions(ANSWERS))
    assert text.count("910 ms") == 1 and text.count("ms") == 2  # client and server, once
    assert text.startswith("one request, 3 questions about the same state")
    assert [line for line in text.splitlines() if line.endswith(":")] == ["refund:", "urgent:", "angry:"]


def test_a_policy_shows_its_outcome_once_and_marks_it_on_the_chart():
    policy = Policy(threshold=0.6, fallback="needs_review")
    view = steps.show_decision(ROUTE, policy=policy)
    line = [line for line in str(view).splitlines() if "needs_review" in line]
    assert line == ["  fall back to needs_review: billing has p=0.465, below the threshold 0.600"]
    ax = view.figure().axes[0]
    assert "fall back to needs_review" in ax.get_title(loc="left")
    assert any(line.get_xdata()[0] == 0.6 for line in ax.get_lines())  # the threshold line
    accepted = steps.show_outcome(Policy(threshold=0.4).apply(ROUTE))
    assert accepted.startswith("act on billing: billing accepted with p=0.465")


def test_options_this_user_may_not_act_on_are_greyed():
    view = steps.show_decision(ROUTE, policy=Policy().allowing({"sales"}))
    bars = view.figure().axes[0].patches
    grey = [b for b in bars if b.get_facecolor()[:3] == pytest.approx((176 / 255,) * 3, abs=1e-3)]
    assert len(grey) == 2  # billing and tech_support


def test_check_outcome_passes_real_results_and_says_what_it_checked():
    chat = ChatResult("A model that picks one of the options it is given.")
    checks = steps.check_outcome(
        config("local"), "05", route=ROUTE, answers=ANSWERS, answer=chat, note=steps.Text("done")
    )
    assert checks.ok
    assert "3 probabilities summing to 1.000, top billing" in str(checks)
    assert "an answer of 11 words" in str(checks)


@pytest.mark.parametrize(
    "name, value, why",
    [
        ("answer", ChatResult("   "), "the chat answer is empty"),
        ("route", Decision("t", ("a", "b"), (0.9, 0.9)), "not a probability vector"),
        ("answers", [], "none"),
        (
            "deleted",
            steps.Text("endpoint x: already gone", problem="no endpoint was there to delete"),
            "no endpoint was there to delete",
        ),
        (
            "report",
            SimpleNamespace(
                runs={"decision": SimpleNamespace(results=[SimpleNamespace(answered=False)])},
                summary={"tasks": 1, "valid": 0},
            ),
            "requests failed in decision (1)",
        ),
    ],
)
def test_check_outcome_stops_a_local_run_that_did_not_get_there(name, value, why):
    with pytest.raises(steps.StepError, match="notebook 06 did not get where it should") as failed:
        steps.check_outcome(config("local"), "06", **{name: value})
    assert why in str(failed.value)
    # On AWS the participant reads the same rows; nothing is raised.
    checks = steps.check_outcome(config("aws"), "06", **{name: value})
    assert not checks.ok and "FAIL" in str(checks)


def test_an_unknown_result_is_a_bug_not_a_pass():
    with pytest.raises(TypeError):
        steps.check_outcome(config("local"), "05", something=object())


@pytest.fixture
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    made = InteractiveShell.instance()
    assert display.install_error_handler(made)
    yield made
    made.set_custom_exc((), None)


def strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def run(shell, code: str, capsys) -> tuple[bool, str]:
    result = shell.run_cell(code)
    return result.success, capsys.readouterr().out


def test_an_expected_mistake_prints_one_line_and_still_fails_the_cell(shell, capsys):
    shell.user_ns.update(steps=steps, UnprocessableRequest=UnprocessableRequest)
    ok, out = run(shell, "raise steps.StepError('no model data url recorded yet: run 01_package_model first')", capsys)
    assert not ok  # Run All stops here, and nbmake fails
    expected = "StepError: no model data url recorded yet: run 01_package_model first"
    assert strip_ansi(out).strip().splitlines() == [expected]
    ok, out = run(shell, "raise UnprocessableRequest('at least 2 options', status=422, field='options')", capsys)
    assert not ok and len(out.strip().splitlines()) == 1 and "at least 2 options" in out


def test_a_real_bug_keeps_its_traceback(shell, capsys):
    ok, out = run(shell, "def f():\n    return {}['missing']\nf()", capsys)
    assert not ok and "Traceback" in out and "KeyError" in out and len(out.splitlines()) > 3


def test_only_refusals_and_quotas_count_as_expected_aws_errors():
    from botocore.exceptions import ClientError

    def error(code):
        return ClientError({"Error": {"Code": code, "Message": "m"}}, "CreateEndpoint")

    assert display.is_expected(error("ResourceLimitExceeded")) and display.is_expected(error("AccessDenied"))
    assert not display.is_expected(error("ValidationException"))  # a request the library built wrongly
    assert not display.is_expected(KeyError("x"))


def bench_report(*, failed: bool = False):
    from workshop_lib.evaluation import ReportView
    from workshop_lib.evaluation.runner import Run, TaskResult

    def result(task_id, answered=True):
        return TaskResult(
            task_id=task_id,
            family="routing",
            type="choice",
            expected="a",
            labels=["a", "b"],
            presented=["a", "b"],
            answered=answered,
            valid=answered,
            predicted="a" if answered else None,
            correct=answered,
            probabilities={"a": 0.7, "b": 0.3} if answered else None,
            client_latency_ms=900.0 if answered else None,
            server_ms=850.0 if answered else None,
            error=None if answered else "EndpointBusy: 503",
        )

    results = [result("t1"), result("t2", answered=not failed)]
    return ReportView(runs={"decision": Run(label="cpu", kind="decision", results=results, endpoint="x", wall_s=2.0)})


def test_a_benchmark_passes_only_when_every_request_was_answered():
    assert "2/2 decisions valid" in str(steps.check_outcome(config("local"), "06", report=bench_report()))
    with pytest.raises(steps.StepError, match=r"1/2 decisions valid; requests failed in decision \(1\)"):
        steps.check_outcome(config("local"), "06", report=bench_report(failed=True))


def test_the_benchmark_figure_is_drawn_once_and_fits_a_notebook():
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    fig = bench_report().plot()
    assert plt.get_fignums() == before  # not a pyplot figure: the notebook shows the returned one only
    width, height = fig.get_size_inches()
    assert width <= 8 and len(fig.axes) == 3 and height > width  # stacked, readable at notebook width


def readout_study(*, failed: bool = False):
    from workshop_lib.evaluation.readout_study import ReadoutStudy
    from workshop_lib.evaluation.runner import Run

    def run(readout, broken=False):
        results = bench_report(failed=broken).runs["decision"].results
        return Run(label=readout, kind="decision", results=results, endpoint="x", wall_s=1.0)

    pairs = {"letters": (run("letters"), run("letters")), "cloze": (run("cloze"), run("cloze", broken=failed))}
    return ReadoutStudy(pairs, tasks="2 tasks", chance=0.5)


def test_the_studies_have_their_own_closing_check():
    """Notebook 06's Part 2 ends with a check of its studies alone (Part 1's report and rate are checked
    before it), so the check passes on the studies' answers and names the run that failed."""
    checks = steps.check_outcome(config("local"), "06", readouts=readout_study())
    assert checks.ok and "8 answers with 2 readouts, each valid" in str(checks)
    with pytest.raises(steps.StepError, match=r"1 invalid or failed answers in cloze \(reversed\)"):
        steps.check_outcome(config("local"), "06", readouts=readout_study(failed=True))

"""The benchmark's tasks sent through Jev's /v1/systemone schema instead of the decision schema."""

import pytest

from workshop_lib.client import EndpointClient
from workshop_lib.evaluation import load_tasks, run_benchmark
from workshop_lib.evaluation.runner import systemone_question
from workshop_lib.evaluation.tasks import Task


def test_each_task_type_maps_to_its_jev_question():
    choice = Task("c", "routing", "choice", "s", "Which team?", (("billing", "Billing"), ("tech", "Tech")), "tech")
    noul = Task("n", "policy", "noul", "s", "Refund asked?", (("no", "No"), ("yes", "Yes")), "yes")
    score = Task("s", "scoring", "score", "s", "How urgent?", (("0", "Low"), ("1", "Mid"), ("2", "High")), "2")
    assert systemone_question(choice) == {
        "type": "choice",
        "instructions": "Which team?",
        "criteria": {"billing": "Billing", "tech": "Tech"},
    }
    assert systemone_question(noul) == {"type": "noul", "instructions": "Refund asked?"}
    assert systemone_question(score) == {
        "type": "score",
        "instructions": "How urgent?",
        "criteria": ["Low", "Mid", "High"],
    }


def test_unknown_schema_is_refused():
    with pytest.raises(ValueError, match="schema"):
        run_benchmark(EndpointClient.local("http://127.0.0.1:9"), limit=2, schema="soap", progress=False)


@pytest.mark.slow
def test_the_bench_runs_through_systemone_against_the_real_adapter(adapter):
    tasks = [t for t in load_tasks() if t.type in ("choice", "noul", "score")]
    chosen = [next(t for t in tasks if t.type == kind) for kind in ("choice", "noul", "score")]
    report = run_benchmark(EndpointClient.local(adapter.url), chosen, schema="systemone", progress=False)
    results = report.runs["decision"].results
    assert [r.task_id for r in results] == [t.id for t in chosen]
    for task, result in zip(chosen, results):
        assert result.valid, result.error
        assert set(result.probabilities) == set(task.labels)
        assert sum(result.probabilities.values()) == pytest.approx(1.0, abs=1e-3)
        assert result.predicted in task.labels and result.input_tokens > 0

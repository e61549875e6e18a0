"""The notebooks' widgets (workshop_lib.widgets): each one's headless default comes from its environment
variable, a kept choice comes back when none is set, and changes are kept."""

from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets")

from workshop_lib import widgets
from workshop_lib.config import WorkshopConfig
from workshop_lib.steps import Workshop

# What each helper makes, and a value its environment variable may choose (as the variable spells it).
MADE = {
    "deploy_path": (lambda ws: widgets.deploy_path(ws), "decision-gpu", "decision-gpu"),
    "reset_rehearsal": (lambda ws: widgets.reset_rehearsal(), "1", True),
    "endpoint_ttl_hours": (lambda ws: widgets.endpoint_ttl(ws), "3.5", 3.5),
    "codebuild_role_arn": (
        lambda ws: widgets.codebuild_role(ws),
        "arn:aws:iam::111122223333:role/cb",
        "arn:aws:iam::111122223333:role/cb",
    ),
    "follow_dlc_tag": (lambda ws: widgets.follow_dlc_tag(), "yes", "yes"),
    "builder_question": (lambda ws: widgets.decision_builder(ws).children[1], "Is it late?", "Is it late?"),
    "builder_options": (lambda ws: widgets.decision_builder(ws).children[2], "a: A\nb: B", "a: A\nb: B"),
    "builder_state": (lambda ws: widgets.decision_builder(ws).children[0], "a state", "a state"),
    "capture_percent": (lambda ws: widgets.capture_percent(ws), "25", 25),
    "bench_limit": (lambda ws: widgets.bench_limits(ws)[0], "9", 9),
    "bench_study_limit": (lambda ws: widgets.bench_limits(ws)[1], "3", 3),
    "delete_bucket": (lambda ws: widgets.delete_bucket("amzn-s3-demo-bucket"), "1", True),
    "scaling_target": (lambda ws: widgets.scaling_target(ws), "30", 30.0),
    "throughput_p95_ms": (lambda ws: widgets.throughput_p95(ws), "750", 750.0),
}


@pytest.fixture
def workshop(tmp_path, monkeypatch):
    for variable in widgets.ENV.values():
        monkeypatch.delenv(variable, raising=False)
    return Workshop(WorkshopConfig(mode="local"), tmp_path / "config.json")


def test_every_widget_has_its_environment_variable():
    assert set(MADE) == set(widgets.ENV)


@pytest.mark.parametrize("key", sorted(MADE))
def test_the_environment_chooses_the_headless_default(key, workshop, monkeypatch):
    make, spelled, value = MADE[key]
    default = make(workshop).value
    monkeypatch.setenv(widgets.ENV[key], spelled)
    chosen = make(workshop).value
    assert chosen == value and chosen != default


@pytest.mark.parametrize("key", ["deploy_path", "endpoint_ttl_hours", "bench_limit", "builder_question"])
def test_a_kept_choice_comes_back_unless_the_environment_chooses(key, workshop, monkeypatch):
    make, _spelled, value = MADE[key]
    first = make(workshop)
    first.value = value  # the participant's change is written at once
    assert workshop.outputs()["choices"][key] == value
    again = Workshop.load(workshop.path)
    assert make(again).value == value
    if key == "deploy_path":
        monkeypatch.setenv(widgets.ENV[key], "standard")
        assert make(again).value == "standard"


def test_choices_asked_each_time_are_not_kept(workshop):
    reset = widgets.reset_rehearsal()
    reset.value = True
    assert "choices" not in workshop.outputs() and widgets.reset_rehearsal().value is False


def test_the_bucket_checkbox_names_the_bucket():
    assert "amzn-s3-demo-bucket" in widgets.delete_bucket("amzn-s3-demo-bucket").description


def test_the_scaling_target_starts_from_the_rate_06_kept(workshop):
    from workshop_lib import steps
    from workshop_lib.aws import scaling

    assert widgets.scaling_target(workshop).value == scaling.target_invocations_per_minute(steps.scale.DEFAULT_SECONDS)
    workshop.remember(**{steps.scale.RATE_KEY: {steps.decision_endpoint(workshop): 0.5}})
    assert widgets.scaling_target(workshop).value == scaling.target_invocations_per_minute(0.5) == 84.0


def test_the_scaling_target_starts_from_06s_sustainable_rate_when_one_was_kept(workshop):
    from workshop_lib import steps
    from workshop_lib.aws import scaling

    name = steps.decision_endpoint(workshop)
    workshop.remember(
        **{
            steps.scale.RATE_KEY: {name: 0.5},
            steps.scale.THROUGHPUT_KEY: {name: {"decisions_per_s": 3.5, "concurrency": 4}},
        }
    )
    assert widgets.scaling_target(workshop).value == scaling.target_from_rate(3.5) == 147.0


def test_the_p95_to_keep_defaults_to_07s_latency_alarm(workshop):
    from workshop_lib.evaluation.throughput import DEFAULT_P95_MS

    assert widgets.throughput_p95(workshop).value == DEFAULT_P95_MS == 2000.0

"""Notebook 05: a client for an endpoint, and decisions shown as charts (text for logs).
"""

from __future__ import annotations

from ..display import DecisionView, outcome_line
from .context import StepError, Text, Workshop


def client(workshop: Workshop, name: str):
    """An EndpointClient for endpoint ``name``: SageMaker runtime on AWS, the local adapter's URL locally."""
    from ..client import EndpointClient

    config = workshop.config
    if config.mode == "local":
        return EndpointClient.local(workshop.rehearsal.endpoint_url(name))
    return EndpointClient.sagemaker(name, config.region)


def decision_endpoint(workshop: Workshop) -> str:
    """The decision endpoint notebooks 05 and 06 use: GPU on the GPU path, else CPU."""
    config = workshop.config
    if config.deploy_path == "decision-gpu":
        return config.gpu_endpoint_name
    if config.mode == "aws" and config.deploy_path == "standard":
        raise StepError("the deploy path is 'standard' (notebook 00), which has no decision endpoint: go on to "
                        "07_cleanup, or choose decision-cpu or decision-gpu in 00 and run 03 and 04")
    return config.cpu_endpoint_name


def show_decision(decision, *, latency: bool = True, policy=None) -> DecisionView:
    """A client.Decision's probabilities as a bar chart (text in logs), most probable first, then its
    latency; with ``policy`` (a ``decisions.Policy``) also its threshold and what the application does."""
    return DecisionView([decision], policy=policy, latency=latency)


def show_decisions(answers) -> DecisionView:
    """The answers of one shared-state request: a chart each, and the request's time once."""
    return DecisionView(answers, shared=True)


def show_outcome(outcome) -> Text:
    """A decisions.Outcome in one line: what the application does, and why."""
    return Text(outcome_line(outcome))


def parse_options(text: str) -> list[dict]:
    """Options from widget text, one per line: ``id: description`` (or just ``id``)."""
    options = []
    for line in text.splitlines():
        if line.strip():
            oid, _, description = line.partition(":")
            options.append({"id": oid.strip(), "text": description.strip() or oid.strip()})
    return options

"""Notebook 05: a client for the decision endpoint, which endpoint the next cells call, and decisions
shown as charts (text for logs).

Each of notebook 05's cells can run on its own (after a kernel restart, say): ``decision_client()``
and ``builder_request()`` load the saved workshop themselves, and the builder's widgets remember
their text in ``outputs.json`` (``keep_choice``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..client.endpoint import Decision, EndpointClient, decision
from ..deploy_paths import DECISION_NOTEBOOK
from ..display import DecisionView, outcome_line
from ..errors import StepNotRun, WorkshopError
from ..examples import SUPPORT_TICKET
from ..local.rehearsal import LLAMA_SERVER, RehearsalError
from .context import Text, Workshop, decision_endpoint, short_errors
from .endpoint_clients import client, endpoint_kind, served_locally

if TYPE_CHECKING:
    from ..client.policy import Outcome, Policy


def _loaded(workshop: Workshop | None) -> Workshop:
    """``workshop``, else the saved one loaded as a notebook's first cell loads it (expected mistakes
    shown in one line), so a cell that starts with a step also runs after a kernel restart."""
    if workshop is not None:
        return workshop

    short_errors()
    return Workshop.load()


def decision_client(workshop: Workshop | None = None) -> EndpointClient:
    """A client for the decision endpoint notebooks 05 and 06 use (``decision_endpoint``), checked to be
    serving; with no ``workshop``, the saved one (so the cell also runs after a kernel restart)."""
    workshop = _loaded(workshop)
    return client(workshop, decision_endpoint(workshop))


def openai_base_url(workshop: Workshop | None = None) -> str | None:
    """The ``base_url`` the ``openai`` library takes for the local decision endpoint (its ``/v1``), or None on
    AWS, where no URL reaches the endpoint unsigned (EndpointClient signs the InvokeEndpoint call)."""
    workshop = _loaded(workshop)
    if workshop.config.mode != "local":
        return None
    name = decision_endpoint(workshop)
    try:
        return workshop.rehearsal.endpoint_url(name).rstrip("/") + "/v1"
    except RehearsalError:
        raise StepNotRun(DECISION_NOTEBOOK, f"the decision endpoint, {name}, is not running locally") from None


def standard_client(workshop: Workshop) -> EndpointClient | None:
    """A client for the standard endpoint (notebook 06's letter-probability baseline), or None, with why in one
    line, where it is not serving."""
    try:
        return client(workshop, workshop.config.standard_endpoint_name)
    except WorkshopError as exc:
        print(f"letter-probability baseline skipped: {exc}")
        return None


def which_endpoint(workshop: Workshop | None = None, name: str | None = None) -> Text:
    """Which endpoint the next cells call, in one line (default: the decision endpoint)."""
    workshop = _loaded(workshop)
    config = workshop.config
    name = name or decision_endpoint(workshop)
    kind, _ = endpoint_kind(workshop, name)
    why = f"the deploy path is {config.deploy_path!r} (notebook 00)"
    if config.mode == "local":
        path = config.path_of(name)
        where = "a local adapter process" + (" standing in on the CPU" if path and path.gpu else "")
        if path and not path.decision and served_locally(workshop, name)["server"] == LLAMA_SERVER:
            where = "llama-server behind nginx, started by the DLC entrypoint's rules"
        return Text(f"calling {kind}: {name}, served by {where}; {why}")
    return Text(f"calling {kind}: {name} in {config.region}; {why}")


def show_decision(decision: Decision, *, latency: bool = True, policy: Policy | None = None) -> DecisionView:
    """A client.Decision's probabilities as a bar chart (text in logs), most probable first, then its
    latency; with ``policy`` (a ``decisions.Policy``) also its threshold and what the application does."""
    return DecisionView([decision], policy=policy, latency=latency)


def show_decisions(answers: Sequence[Decision]) -> DecisionView:
    """The answers of one shared-state request: a chart each, and the request's time once."""
    return DecisionView(answers, shared=True)


def show_outcome(outcome: Outcome) -> Text:
    """A decisions.Outcome in one line: what the application does, and why."""
    return Text(outcome_line(outcome))


# The decision builder's widgets in notebook 05: field -> (key kept in outputs.json, environment variable).
BUILDER_FIELDS = {
    "state": ("builder_state", "WORKSHOP_BUILDER_STATE"),
    "question": ("builder_question", "WORKSHOP_BUILDER_QUESTION"),
    "options": ("builder_options", "WORKSHOP_BUILDER_OPTIONS"),
}


def builder_default(field: str) -> str:
    """The example a builder widget starts with when its environment variable is not set."""
    return {
        "state": SUPPORT_TICKET,
        "question": "Does the customer ask for money back?",
        "options": "yes: Yes, money back\nno: No refund asked",
    }[field]


def builder_request(workshop: Workshop | None = None, request_id: str = "builder-1") -> dict[str, Any]:
    """The decision request the builder's widgets hold: their last text (``keep_choice`` writes it to
    outputs.json as it is typed), else their environment variables, else the example; so the cell that
    sends it also runs after a kernel restart."""
    workshop = _loaded(workshop)
    kept = workshop.outputs().get("choices", {})
    text = {}
    for field, (key, variable) in BUILDER_FIELDS.items():
        given = os.environ.get(variable, "").strip()
        text[field] = given if given else kept.get(key, builder_default(field))
    return decision(request_id, text["state"], text["question"], parse_options(text["options"]))


def parse_options(text: str) -> list[dict[str, str]]:
    """Options from widget text, one per line: ``id: description`` (or just ``id``)."""
    options = []
    for line in text.splitlines():
        if line.strip():
            oid, _, description = line.partition(":")
            options.append({"id": oid.strip(), "text": description.strip() or oid.strip()})
    return options

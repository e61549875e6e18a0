"""Notebook 05: a client for an endpoint, and decisions shown as charts (text for logs); notebook 02's
check that its chat answer came from llama-server (``answered_by``).

Each of notebook 05's cells can run on its own (after a kernel restart, say): ``decision_client()``
and ``builder_request()`` load the saved workshop themselves, and the builder's widgets remember
their text in ``outputs.json`` (``keep_choice``).
"""

from __future__ import annotations

import os

from botocore.exceptions import ClientError

from ..client.endpoint import EndpointClient, decision
from ..display import DecisionView, outcome_line
from ..errors import StepNotRun, WorkshopError
from ..examples import SUPPORT_TICKET
from ..local import dlc_server
from ..local.capture import capture_locally
from ..local.rehearsal import LLAMA_SERVER, RehearsalError, RoutedTransport
from .context import StepError, Text, Workshop, short_errors

STANDARD_NOTEBOOK = "02_deploy_standard_endpoint"
DECISION_NOTEBOOK = "04_deploy_decision_endpoints"


def _kind(workshop: Workshop, name: str) -> tuple[str, str]:
    """(what endpoint ``name`` is, the notebook that deploys it)."""
    config = workshop.config
    if name == config.standard_endpoint_name:
        return "the standard endpoint (the DLC, chat schema)", STANDARD_NOTEBOOK
    if name == config.gpu_endpoint_name:
        return "the GPU decision endpoint (ordered GPU instance pools)", DECISION_NOTEBOOK
    if name == config.cpu_endpoint_name:
        return "the CPU decision endpoint (one CPU instance type)", DECISION_NOTEBOOK
    return f"endpoint {name}", "the notebook that deploys it"


def client(workshop: Workshop, name: str):
    """An EndpointClient for endpoint ``name``: SageMaker runtime on AWS, the local adapter's URL locally.

    An endpoint that is not serving stops here in one line naming the notebook that deploys it.
    """
    config = workshop.config
    kind, notebook = _kind(workshop, name)
    if config.mode == "local":
        workshop.clients  # no emulator: notebook 00 comes first, and this says so
        try:
            # follows the local endpoint through an update, which replaces its process (workshop update)
            made = EndpointClient(RoutedTransport(workshop.rehearsal, name))
        except RehearsalError:
            raise StepNotRun(notebook, f"{kind}, {name}, is not running locally") from None
        # SageMaker captures on AWS; locally the stand-in does, on the client's side (local/capture.py)
        return capture_locally(made, workshop.clients.sm, workshop.clients.s3, name,
                               acting_as=workshop.clients.acting_as)
    _require_in_service(workshop, name, kind, notebook)
    return EndpointClient.sagemaker(name, config.region)


def _require_in_service(workshop: Workshop, name: str, kind: str, notebook: str) -> None:
    try:
        status = workshop.clients.sm.describe_endpoint(EndpointName=name)["EndpointStatus"]
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") == "ValidationException" and "not find" in error.get("Message", ""):
            raise StepNotRun(notebook, f"{kind}, {name}, does not exist") from None
        raise
    if status != "InService":
        raise StepError(f"{kind}, {name}, is {status}, not InService: wait for it (Creating and Updating take "
                        f"minutes), or run notebook {notebook} again if it Failed")


def _loaded(workshop: Workshop | None) -> Workshop:
    """``workshop``, else the saved one loaded as a notebook's first cell loads it (expected mistakes
    shown in one line), so a cell that starts with a step also runs after a kernel restart."""
    if workshop is not None:
        return workshop

    short_errors()
    return Workshop.load()


def decision_client(workshop: Workshop | None = None):
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


def standard_client(workshop: Workshop):
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
    kind, _ = _kind(workshop, name)
    why = f"the deploy path is {config.deploy_path!r} (notebook 00)"
    if config.mode == "local":
        where = "a local adapter process" + (" standing in on the CPU" if name == config.gpu_endpoint_name else "")
        if name == config.standard_endpoint_name and _served_locally(workshop, name)["server"] == LLAMA_SERVER:
            where = "llama-server behind nginx, started by the DLC entrypoint's rules"
        return Text(f"calling {kind}: {name}, served by {where}; {why}")
    return Text(f"calling {kind}: {name} in {config.region}; {why}")


def _served_locally(workshop: Workshop, name: str) -> dict:
    try:
        return workshop.rehearsal.endpoint_server(name)
    except RehearsalError:
        return {"server": None, "fallback": "", "private_url": None}


def answered_by(workshop: Workshop, reply, name: str | None = None) -> tuple[bool, str]:
    """Whether chat ``reply`` (a ChatResult) from endpoint ``name`` (default: the standard endpoint) came
    from llama-server, and what showed it.

    Locally the rehearsal records what serves the endpoint. Where that is the launcher's llama-server,
    the reply must carry that server's build as ``system_fingerprint`` and its model (both read from its
    ``/props`` on its private port), and the endpoint's ``/ping`` must give ``/health``'s answer through
    nginx. Where the decision adapter stood in (no llama-server or nginx here), that is the rehearsal's
    announced fallback, said in the row. On AWS only the reply's own shape can tell: llama-server writes
    its build and its timings into every completion.
    """
    config = workshop.config
    name = name or config.standard_endpoint_name
    raw = getattr(reply, "raw", reply)
    if config.mode != "local":
        problem = dlc_server.answer_problem(raw)
        return not problem, problem or f"a llama-server answer (build {raw['system_fingerprint']})"
    served = _served_locally(workshop, name)
    if served["server"] != LLAMA_SERVER:
        if served["server"] is not None and served["fallback"]:
            return True, f"the decision adapter stood in for llama-server ({served['fallback']})"
        return False, f"{name} is served by {served['server'] or 'nothing that is running'}, not llama-server"
    try:
        identity = dlc_server.fetch_identity(served["private_url"])
        ping = dlc_server.get_json(workshop.rehearsal.endpoint_url(name) + "/ping")
    except dlc_server.LauncherError as exc:
        return False, f"llama-server behind {name} did not say who it is: {exc}"
    problem = dlc_server.answer_problem(raw, identity)
    if not problem and ping != {"status": "ok"}:
        problem = f"/ping answered {ping!r}, not llama-server's /health"
    return not problem, problem or (f"llama-server {identity.build} answered with its model "
                                    f"{os.path.basename(identity.model)}; /ping gave its /health through nginx")


def decision_endpoint(workshop: Workshop) -> str:
    """The decision endpoint notebooks 05 and 06 use: GPU on the GPU path, else CPU."""
    config = workshop.config
    if config.deploy_path == "decision-gpu":
        return config.gpu_endpoint_name
    if config.mode == "aws" and config.deploy_path == "standard":
        raise StepError("the deploy path is 'standard' (notebook 00), which has no decision endpoint: go on to "
                        "08_cleanup, or choose decision-cpu or decision-gpu in 00 and run 03 and 04")
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


# The decision builder's widgets in notebook 05: field -> (key kept in outputs.json, environment variable).
BUILDER_FIELDS = {
    "state": ("builder_state", "WORKSHOP_BUILDER_STATE"),
    "question": ("builder_question", "WORKSHOP_BUILDER_QUESTION"),
    "options": ("builder_options", "WORKSHOP_BUILDER_OPTIONS"),
}


def builder_default(field: str) -> str:
    """The example a builder widget starts with when its environment variable is not set."""
    return {"state": SUPPORT_TICKET, "question": "Does the customer ask for money back?",
            "options": "yes: Yes, money back\nno: No refund asked"}[field]


def builder_request(workshop: Workshop | None = None, request_id: str = "builder-1") -> dict:
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


def parse_options(text: str) -> list[dict]:
    """Options from widget text, one per line: ``id: description`` (or just ``id``)."""
    options = []
    for line in text.splitlines():
        if line.strip():
            oid, _, description = line.partition(":")
            options.append({"id": oid.strip(), "text": description.strip() or oid.strip()})
    return options

"""A client for each of the workshop's endpoints (SageMaker runtime on AWS, the local adapter's URL
locally), an ``openai`` client through SageMaker's OpenAI-compatible route (``route_client``), what each endpoint
is, and whether a chat answer came from llama-server (``answered_by``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import boto3
from botocore.exceptions import ClientError

from ..client.endpoint import ChatResult, EndpointClient
from ..client.openai_route import ROUTE_PATH, openai_client
from ..errors import StepError, StepNotRun
from ..local import dlc_server
from ..local.capture_stand_in import capture_locally
from ..local.modes import emulator_session
from ..local.rehearsal import LLAMA_SERVER, RehearsalError, RoutedTransport
from .context import Workshop


def endpoint_kind(workshop: Workshop, name: str) -> tuple[str, str]:
    """(what endpoint ``name`` is, the notebook that deploys it)."""
    path = workshop.config.path_of(name)
    if path is None:
        return f"endpoint {name}", "the notebook that deploys it"
    return path.described, path.notebook


def client(workshop: Workshop, name: str) -> EndpointClient:
    """An EndpointClient for endpoint ``name``: SageMaker runtime on AWS, the local adapter's URL locally.

    An endpoint that is not serving stops here in one line naming the notebook that deploys it.
    """
    config = workshop.config
    kind, notebook = endpoint_kind(workshop, name)
    if config.mode == "local":
        workshop.clients  # no emulator: notebook 00 comes first, and this says so
        try:
            # follows the local endpoint through an update, which replaces its process (workshop update)
            made = EndpointClient(RoutedTransport(workshop.rehearsal, name))
        except RehearsalError:
            raise StepNotRun(notebook, f"{kind}, {name}, is not running locally") from None
        # SageMaker captures on AWS; locally the stand-in does, on the client's side (local/capture_stand_in.py)
        captured: EndpointClient = capture_locally(
            made, workshop.clients.sm, workshop.clients.s3, name, acting_as=workshop.clients.acting_as
        )
        return captured
    require_in_service(workshop, name, kind, notebook)
    return EndpointClient.sagemaker(name, config.region)


def route_client(workshop: Workshop, name: str, **options: Any) -> Any:
    """An ``openai.OpenAI`` client for endpoint ``name`` through SageMaker's OpenAI-compatible route, with a bearer
    token: on AWS the route itself, the token minted from the default credentials; locally the rehearsal's stand-in
    for the route (local/route_stand_in.py), the token minted the same way from the emulator's credentials.
    ``options``: the ``openai.OpenAI`` arguments (``max_retries``, ``timeout``)."""
    config = workshop.config
    if config.mode == "local":
        workshop.clients  # no emulator: notebook 00 comes first, and this says so
        try:
            front = workshop.rehearsal.openai_route_url()
        except RehearsalError as exc:
            kind, notebook = endpoint_kind(workshop, name)
            raise StepNotRun(notebook, f"{kind}, {name}, is not reachable through the route: {exc}") from None
        return openai_client(
            name, config.region, emulator_session(), base_url=front + ROUTE_PATH.format(name=name), **options
        )
    return openai_client(name, config.region, boto3.session.Session(region_name=config.region), **options)


def require_in_service(workshop: Workshop, name: str, kind: str, notebook: str) -> None:
    try:
        status = workshop.clients.sm.describe_endpoint(EndpointName=name)["EndpointStatus"]
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") == "ValidationException" and "not find" in error.get("Message", ""):
            raise StepNotRun(notebook, f"{kind}, {name}, does not exist") from None
        raise
    if status != "InService":
        raise StepError(
            f"{kind}, {name}, is {status}, not InService: wait for it (Creating and Updating take "
            f"minutes), or run notebook {notebook} again if it Failed"
        )


def served_locally(workshop: Workshop, name: str) -> dict[str, Any]:
    """What the rehearsal records serving local endpoint ``name`` (its server, fallback and private URL)."""
    try:
        return workshop.rehearsal.endpoint_server(name)
    except RehearsalError:
        return {"server": None, "fallback": "", "private_url": None}


def answered_by(workshop: Workshop, reply: ChatResult | Mapping[str, Any], name: str | None = None) -> tuple[bool, str]:
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
    raw = reply.raw if isinstance(reply, ChatResult) else reply
    if config.mode != "local":
        problem = dlc_server.answer_problem(raw)
        return not problem, problem or f"a llama-server answer (build {raw['system_fingerprint']})"
    served = served_locally(workshop, name)
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
    return not problem, problem or (
        f"llama-server {identity.build} answered with its model "
        f"{os.path.basename(identity.model)}; /ping gave its /health through nginx"
    )

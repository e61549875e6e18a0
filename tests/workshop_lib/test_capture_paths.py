"""Every client workshop_lib makes for an endpoint, and why those that bypass local data capture may.

Locally the stand-in captures on the client's side (local.capture_stand_in.capture_locally, applied by steps.client),
so a client made any other way would invoke a local endpoint without a capture record. This test
reads workshop_lib's source for every place that builds a client or a transport and holds it to the
list docs/operate.md gives: a new place fails here until it goes through steps.client or is
documented there.
"""

from __future__ import annotations

import ast
from pathlib import Path

import workshop_lib

ROOT = Path(workshop_lib.__file__).resolve().parent
DOCS = ROOT.parent / "docs" / "operate.md"
CLIENTS = {"EndpointClient", "LocalTransport", "RoutedTransport", "SageMakerTransport", "ChatCompletionsTransport"}

# (module, function) -> why it may build a client that does not capture locally.
ALLOWED = {
    ("steps/endpoint_clients.py", "client"): "steps.client: the rehearsal's client, wrapped by "
    "capture_stand_in.capture_locally",
    ("local/routed_transport.py", "_follow"): "RoutedTransport re-pointed after an update: the same transport, "
    "still wrapped",
    ("steps/scale_to_zero.py", "_client"): "the scale-to-zero endpoint's config captures nothing, on AWS or here",
    ("client/endpoint.py", "local"): "EndpointClient.local itself",
    ("client/endpoint.py", "sagemaker"): "EndpointClient.sagemaker itself: SageMaker captures on its side",
    ("cli_commands.py", "_endpoint_client"): "--url: a bare adapter URL, no endpoint config to capture by",
    ("evaluation/logprobs.py", "url_client"): "--standard-url: the standard endpoint, which never captures",
    ("demo.py", "run"): "make demo's own adapter process, not a workshop endpoint",
}


def _calls() -> set[tuple[str, str]]:
    found = set()
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, ast.Call):
                    continue
                f = node.func
                name = (
                    f.id
                    if isinstance(f, ast.Name)
                    else f.value.id
                    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                    else None
                )
                if name in CLIENTS:
                    found.add((path.relative_to(ROOT).as_posix(), fn.name))
    return found


def test_every_client_workshop_lib_builds_is_steps_client_or_a_documented_exception():
    found = _calls()
    assert found == set(ALLOWED), (
        f"new: {sorted(found - set(ALLOWED))}; gone: {sorted(set(ALLOWED) - found)}: "
        "go through steps.client, or say in docs/operate.md why it does not capture"
    )
    assert ("steps/endpoint_clients.py", "client") in found


def test_operate_md_names_each_path_that_does_not_capture_locally():
    text = DOCS.read_text(encoding="utf-8")
    for phrase in ("steps.client", "`--url`", "`--standard-url`", "make demo", "scale-to-zero", "route", "curl"):
        assert phrase in text, phrase

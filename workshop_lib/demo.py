"""``python -m workshop_lib demo``: the decision path rehearsed on this machine.

Packages the embedded model as SageMaker receives it (tarball, then extracted
into a model directory with its manifest), starts the real adapter on a local
port, sends a decision, a shared-state batch and a chat message through
``EndpointClient`` (the client the notebooks use), prints the answers and stops
the server.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import examples
from .client.endpoint import Decision, EndpointClient
from .display import DecisionView
from .local.processes import AdapterProcess
from .local.rehearsal import READOUT_WHY, readout_env
from .models import EMBEDDED_MODEL, embedded_gguf_path
from .packaging import extract_model, package_local


def format_decision(decision: Decision, *, latency: bool = True) -> str:
    """The notebooks' bar chart (``steps.show_decision``), then what the model read, indented."""
    raw = decision.raw
    if raw.get("option_tokens"):  # cloze: each option's text was read after the prompt
        read = f"options read as {'+'.join(str(n) for n in raw['option_tokens'])} tokens ({raw.get('normalize')})"
    else:
        read = f"allowed-token mass {raw['allowed_token_mass']:.3f}"
    lines = [
        *str(DecisionView([decision], latency=latency)).splitlines(),
        f"  {raw['input_tokens']} input tokens, {read}",
    ]
    return "\n".join("   " + line for line in lines)


def prepare_model_dir(work_dir: Path) -> tuple[Path, dict[str, Any]]:
    gguf = embedded_gguf_path()
    package = package_local(EMBEDDED_MODEL, {EMBEDDED_MODEL.gguf.path: gguf}, work_dir / "package")
    model_dir = extract_model(package.tarball, work_dir / "model")
    return model_dir, package.manifest


def run(work_dir: str | Path = ".workshop/demo") -> int:
    work_dir = Path(work_dir).resolve()
    started = time.perf_counter()
    print(f"1. Packaging the embedded model ({EMBEDDED_MODEL.name}) ...")
    model_dir, manifest = prepare_model_dir(work_dir)
    gguf = manifest["files"][0]
    print(f"   model.tar.gz extracted to {model_dir}")
    print(f"   manifest: {gguf['path']}, {gguf['size']:,} bytes, sha256 {gguf['sha256'][:16]}...")

    print("2. Starting the decision adapter (nginx + gunicorn + llama.cpp) on a local port ...")
    # Declared with nothing, as a local endpoint of the embedded model is (the adapter reads no setting of the shell).
    added = readout_env({})
    with AdapterProcess(model_dir, log_path=work_dir / "adapter.log", env=added) as adapter:
        print(f"   ready at {adapter.url} (log: {adapter.log_path})")
        if added:
            print(f"   {READOUT_WHY}")
        client = EndpointClient.local(adapter.url)

        print(f"3. Decision: {examples.SUPPORT_ROUTE['question']}")
        print(format_decision(client.decide(examples.SUPPORT_ROUTE)))

        shared: Mapping[str, Any] = examples.SHARED_STATE
        print(f"4. Shared-state request: {len(shared['questions'])} questions, state evaluated once")
        answers = client.decide_batch(shared["id"], shared["state"], shared["questions"])
        for answer in answers:
            print(format_decision(answer, latency=False))
        t = answers[0].timing
        print(
            f"   shared prefix {t['shared_prefix_tokens']} tokens; whole request: client "
            f"{answers[0].client_latency_ms:.0f} ms, server {t['total_ms']:.0f} ms"
        )

        print("5. Chat (OpenAI schema on the same /invocations):")
        chat: Mapping[str, Any] = examples.CHAT
        print("   " + client.chat(**chat).content.strip().replace("\n", "\n   "))
        print("6. Stopping the adapter ...")
    assert adapter.process is not None  # the with block started it
    print(f"   stopped (exit status {adapter.process.returncode}). Demo took {time.perf_counter() - started:.1f} s.")
    print("   The embedded model is tiny: its answers show the mechanics, not the 4B model's quality.")
    return 0

"""``python -m workshop_lib demo``: the decision path rehearsed on this machine.

Packages the embedded model as SageMaker receives it (tarball, then extracted
into a model directory with its manifest), starts the real adapter on a local
port, sends a decision, a shared-state batch and a chat message, prints the
answers and stops the server.
"""

from __future__ import annotations

import time
from pathlib import Path

from . import examples
from .local import AdapterProcess, post_json
from .models import EMBEDDED_MODEL, embedded_gguf_path
from .packaging import extract_model, package_local


def _bar(p: float, width: int = 24) -> str:
    filled = round(p * width)
    return "#" * filled + "." * (width - filled)


def format_decision(result: dict) -> str:
    lines = []
    for oid, p in sorted(zip(result["option_ids"], result["probabilities"]), key=lambda x: -x[1]):
        lines.append(f"    {oid:<18} {p:6.3f}  {_bar(p)}")
    t = result.get("timing", {})
    extra = f"    {result['input_tokens']} input tokens, allowed-token mass {result['allowed_token_mass']:.3f}"
    if t:
        extra += f", {t['total_ms']:.0f} ms server time"
    return "\n".join(lines + [extra])


def prepare_model_dir(work_dir: Path) -> tuple[Path, dict]:
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

    print("2. Starting the decision adapter (gunicorn + llama.cpp) on a local port ...")
    with AdapterProcess(model_dir, log_path=work_dir / "adapter.log") as adapter:
        print(f"   ready at {adapter.url} (log: {adapter.log_path})")

        print(f"3. Decision: {examples.SUPPORT_ROUTE['question']}")
        status, body = post_json(adapter.url + "/invocations", examples.SUPPORT_ROUTE)
        if status != 200:
            raise RuntimeError(f"decision failed with {status}: {body}")
        print(format_decision(body["result"]))

        print(f"4. Shared-state request: {len(examples.SHARED_STATE['questions'])} questions, state evaluated once")
        status, body = post_json(adapter.url + "/invocations", examples.SHARED_STATE)
        if status != 200:
            raise RuntimeError(f"shared-state request failed with {status}: {body}")
        for result in body["results"]:
            print(f"   {result['id']}:")
            print(format_decision(result))
        t = body["timing"]
        print(f"   shared prefix {t['shared_prefix_tokens']} tokens; whole request {t['total_ms']:.0f} ms")

        print("5. Chat (OpenAI schema on the same /invocations):")
        status, body = post_json(adapter.url + "/invocations", examples.CHAT)
        if status != 200:
            raise RuntimeError(f"chat failed with {status}: {body}")
        print("   " + body["choices"][0]["message"]["content"].strip().replace("\n", "\n   "))
        print("6. Stopping the adapter ...")
    print(f"   stopped (exit status {adapter.process.returncode}). Demo took {time.perf_counter() - started:.1f} s.")
    print("   The embedded model is tiny: its answers show the mechanics, not the 4B model's quality.")
    return 0

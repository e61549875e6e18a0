"""What the benchmarks start and time: llama-server as a local process (the baseline's tests use it too),
and one timed request to any of the servers.

Found as the workshop finds it (``dlc_server.find_llama_server``): ``$WORKSHOP_LLAMA_SERVER``, then the
checkout's ``.llama.cpp/bin/llama-server`` (shaped like the DLC's ``/opt/llama.cpp/bin``), then
``llama-server`` on PATH. Started plainly (``-m <gguf> -t <threads> -c <context>``, loopback) in its own
process group with its output in a file, as every ``workshop_lib.local.ServerProcess``; the DLC
launcher's rules (workshop_lib/local/dlc_server.py) are not needed to measure the server itself.
"""

from __future__ import annotations

import time
from pathlib import Path

from workshop_lib.local import ServerProcess, dlc_server, post_json


def find_llama_server() -> Path | None:
    """The llama-server binary the workshop would use (dlc_server.find_llama_server), or None where there is none."""
    try:
        return dlc_server.find_llama_server()
    except dlc_server.LauncherError:
        return None


class LlamaServerProcess(ServerProcess):
    """llama-server on a loopback port; ready when ``/health`` answers 200 (503 while it loads)."""

    ready_path = "/health"

    def __init__(
        self,
        binary: Path,
        gguf: Path,
        *,
        log_path,
        threads: int = 2,
        context: int = 4096,
        extra_args: tuple[str, ...] = (),
        port: int | None = None,
    ):
        super().__init__(log_path=log_path, port=port)
        self.binary, self.gguf, self.threads, self.context = Path(binary), Path(gguf), threads, context
        self.extra_args = tuple(extra_args)

    def command(self) -> list[str]:
        return [
            str(self.binary),
            "-m",
            str(self.gguf),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "-t",
            str(self.threads),
            "-c",
            str(self.context),
            *self.extra_args,
        ]

    def __repr__(self) -> str:
        return f"LlamaServerProcess({self.url}, {self.gguf.name})"


def timed_post(url: str, body: dict) -> tuple[float, dict]:
    """POST ``body`` as JSON: (milliseconds to the whole reply, the reply); anything but 200 raises."""
    start = time.perf_counter()
    status, reply = post_json(url, body)
    elapsed = (time.perf_counter() - start) * 1000.0
    if status != 200:
        raise RuntimeError(f"HTTP {status}: {reply}")
    return elapsed, reply

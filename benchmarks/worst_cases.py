"""The load run's worst cases: each single body at the documented limits, sent one at a time to an adapter
with the default settings while connections hold half a header, ``/ping`` sampled meanwhile.

The bodies: a state filling the context, 64 questions on one long state, a 255-option Jev choice, and chat up
to its token cap.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from benchmarks.load_clients import STATES
from workshop_lib.client import decision, question
from workshop_lib.evaluation.report import percentile
from workshop_lib.local import AdapterProcess

FILLER = " ".join(STATES)  # about 4.5 characters per token with the embedded model's tokenizer


def _options_n(n: int, tag: str) -> list[dict]:
    return [{"id": f"o{i}-{tag}", "text": f"Option {i}: {STATES[i % len(STATES)][9:60]}"} for i in range(n)]


def worst_case_bodies() -> list[tuple[str, str, Callable[[float], dict]]]:
    """(label, route, body at a scale): at scale 1 each is as costly as one body may be with the default
    settings, or beyond what the context holds, in which case a smaller scale is tried."""
    long_state = (FILLER * 200)[:40_000]
    shared_state = (FILLER * 100)[:12_000]
    return [
        (
            "decision, state near the context size",
            "/invocations",
            lambda scale: decision(
                "w-ctx",
                long_state[: int(40_000 * scale)],
                "Which team should handle this ticket?",
                _options_n(16, "ctx"),
            ),
        ),
        (
            "64 questions x 16 options on one state",
            "/invocations",
            lambda scale: {
                "id": "w-shared",
                "state": shared_state[: int(12_000 * scale)],
                "questions": [
                    question(f"q{i}", f"Question {i}: which option fits best?", _options_n(16, f"q{i}"))
                    for i in range(64)
                ],
            },
        ),
        (
            "Jev choice with 255 options",
            "/v1/systemone",
            lambda scale: {
                "state": shared_state[: int(2000 * scale)],
                "questions": {
                    "pick": {
                        "type": "choice",
                        "instructions": "Pick the best.",
                        "criteria": {f"c{i}": f"Criterion {i}" for i in range(255)},
                    }
                },
            },
        ),
        (
            "chat up to its token cap",
            "/invocations",
            lambda scale: {
                "messages": [{"role": "user", "content": long_state[: int(20_000 * scale)] + " Summarise at length."}],
                "max_tokens": 256,
            },
        ),
    ]


def _post(url: str, body: dict, timeout_s: float) -> tuple[int, float]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as reply:
            reply.read()
            status = reply.status
    except urllib.error.HTTPError as exc:
        exc.read()
        status = exc.code
    return status, time.monotonic() - started


def worst_cases(work: Path, model_dir: Path, *, threads: int, half_open: int = 16) -> dict:
    pings: list[float] = []
    failed_pings = 0
    results = []
    with (
        AdapterProcess(model_dir, log_path=work / "adapter-worst.log", threads=threads) as server,
        ExitStack() as sockets,
    ):
        for _ in range(half_open):  # slow clients: each has sent half a header and waits
            sock = sockets.enter_context(socket.create_connection(("127.0.0.1", server.port), timeout=10))
            sock.sendall(b"POST /invocations HTTP/1.1\r\nHost: adapter\r\nContent-Le")
        stop = threading.Event()

        def ping():
            nonlocal failed_pings
            while not stop.wait(0.1):
                started = time.monotonic()
                try:
                    with urllib.request.urlopen(server.url + "/ping", timeout=5) as reply:
                        reply.read()
                    pings.append(time.monotonic() - started)
                except OSError:
                    failed_pings += 1

        pinger = threading.Thread(target=ping, daemon=True)
        pinger.start()
        try:
            for label, route, make in worst_case_bodies():
                scale = 1.0
                body = make(scale)
                status, seconds = _post(server.url + route, body, timeout_s=120)
                while status == 422 and scale > 0.05:  # too long for the context: each refusal takes milliseconds
                    scale *= 0.95
                    body = make(scale)
                    status, seconds = _post(server.url + route, body, timeout_s=120)
                size = len(json.dumps(body))
                results.append({"body": label, "route": route, "bytes": size, "status": status, "seconds": seconds})
        finally:
            stop.set()
            pinger.join(10)
    return {
        "requests": results,
        "half_open_connections": half_open,
        "ping": {
            "count": len(pings),
            "failed": failed_pings,
            "p50_s": percentile(pings, 50),
            "p95_s": percentile(pings, 95),
            "max_s": max(pings) if pings else None,
        },
        "slowest": max(results, key=lambda r: r["seconds"]) if results else None,
    }

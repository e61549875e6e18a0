"""Load run against a real local adapter: ``python -m benchmarks.load``.

Starts the adapter (nginx + gunicorn + llama.cpp, the embedded model, loopback only) and
lets N concurrent clients send a mix of single decisions, shared-state requests
and chat messages for a fixed time or a fixed number of requests, whichever comes
first. Each client is the library's ``EndpointClient`` with retries on 503, so
every request should end answered. Hostile clients run alongside them (bounded in
number, for the run's time, loopback only): connections that send a header a byte at
a time, oversized bodies trickled a byte at a time, and a few hundred half-open
connections. Reported:

* requests sent and answered; HTTP attempts including retries; 503s, each checked
  for a ``Retry-After`` header; any other non-2xx (target: none);
* answers checked against their own request: the id, option ids and question ids
  (target: no crossed answers), and "probe" requests whose probabilities must equal
  those of the same request sent alone before the run;
* client latency p50/p95 (including retries) per kind, and throughput;
* the gunicorn worker's resident memory (VmRSS, from /proc) after warm-up and at
  the end, and its peak (target: growth under 5 %);
* what the hostile clients got (413s, connections the server closed) and ``/ping``'s
  latency while they ran (target: p95 under 1 s, none failed; SageMaker allows 2 s);
* worst cases, on a second adapter with the documented defaults (8192-token context,
  30 s request limit): the slowest request each single body at the documented limits
  causes (a state filling the context, 64 questions on one long state, a 255-option Jev
  choice, chat up to its token cap), sent one at a time while 16 connections sit on half
  a header, and ``/ping``'s latency meanwhile (target: p95 under 1 s; SageMaker allows 2 s).

It prints a table and writes the figures as JSON (``--out``). Speed is reported,
not asserted: the exit status is 1 only when a correctness target is missed
(unanswered, crossed or non-2xx answers, a 503 without Retry-After). Every
process it starts is stopped before it returns.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import socket
import statistics
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from workshop_lib.client import (
    EndpointBusy,
    EndpointClient,
    EndpointError,
    InvalidResponse,
    LocalTransport,
    decision,
    question,
)
from workshop_lib.demo import prepare_model_dir
from workshop_lib.evaluation.report import percentile
from workshop_lib.local import AdapterProcess

THREADS = 2
KINDS = ("decision", "shared", "chat")
KIND_LABELS = {
    "decision": "single decision",
    "shared": "shared state (3 q)",
    "chat": "chat (8 tokens)",
    "probe": "probe (vs lone run)",
}
# How long past the run's end a client may still be finishing its last request (retries included).
DRAIN_S = 240.0

STATES = [
    "Subject: charged twice\nMy card shows two charges of 49 EUR for the Pro plan on 3 March. Refund one?",
    "Subject: cannot log in\nSince this morning the app says my password is wrong, but I reset it twice.",
    "Subject: upgrade\nWe are 40 people now and want the Team plan with yearly billing. Can you send a quote?",
    "Subject: outage\nThe API returns 502 for every request from eu-west-1 since 09:12 UTC. Urgent, production.",
    "Subject: parcel\nOrder 7731 was marked delivered but nothing arrived. The neighbour has not seen it either.",
    "Subject: invoice address\nPlease put our new VAT number on the invoices from next month onwards.",
]
TEAMS = [
    ("billing", "Billing: charges, refunds, invoices"),
    ("tech", "Technical support: errors, outages"),
    ("security", "Account security: logins, passwords"),
    ("sales", "Sales: plans, upgrades, quotes"),
]


# ---- the requests -------------------------------------------------------------------------------


def _options(pairs, tag: str) -> list[dict]:
    """Option ids unique to this request, so an answer meant for another request cannot pass as ours."""
    return [{"id": f"{oid}-{tag}", "text": text} for oid, text in pairs]


def decision_request(tag: str, rng: random.Random) -> dict:
    state = f"{rng.choice(STATES)}\nTicket {tag}."
    return decision(f"d-{tag}", state, "Which team should handle this ticket?", _options(TEAMS, tag))


def shared_request(tag: str, rng: random.Random) -> tuple[str, str, list[dict]]:
    state = f"{rng.choice(STATES)}\nTicket {tag}."
    return (
        f"s-{tag}",
        state,
        [
            question(f"route-{tag}", "Which team should handle this ticket?", _options(TEAMS, tag)),
            question(
                f"urgent-{tag}",
                "How urgent is it?",
                _options([("low", "Low"), ("normal", "Normal"), ("high", "High")], tag),
            ),
            question(
                f"refund-{tag}", "Does the customer ask for money back?", _options([("no", "No"), ("yes", "Yes")], tag)
            ),
        ],
    )


def chat_request(tag: str, rng: random.Random) -> list[dict]:
    return [{"role": "user", "content": f"Ticket {tag}: {rng.choice(STATES).splitlines()[1]} Reply in one line."}]


PROBES = [
    decision(f"probe-{i}", STATES[i], "Which team should handle this ticket?", _options(TEAMS, f"p{i}"))
    for i in range(3)
]


# ---- counting what crosses the wire ----------------------------------------------------------------


@dataclass
class Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    attempts: int = 0
    busy: int = 0
    busy_with_retry_after: int = 0
    other_non_2xx: dict = field(default_factory=dict)
    sent: dict = field(default_factory=lambda: {k: 0 for k in (*KINDS, "probe")})
    answered: dict = field(default_factory=lambda: {k: 0 for k in (*KINDS, "probe")})
    latencies_ms: dict = field(default_factory=lambda: {k: [] for k in (*KINDS, "probe")})
    crossed: list = field(default_factory=list)
    failed: list = field(default_factory=list)
    probe_equal: int = 0
    probe_max_diff: float = 0.0

    def add(self, name: str, value=1) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + value)


class CountingTransport(LocalTransport):
    """``LocalTransport`` that counts every HTTP attempt and checks each 503 for Retry-After."""

    def __init__(self, url: str, tally: Tally, timeout_s: float):
        super().__init__(url, timeout_s=timeout_s)
        self.tally = tally

    def invoke(self, body: bytes, **options) -> bytes:
        self.tally.add("attempts")
        try:
            return super().invoke(body, **options)
        except EndpointBusy as exc:
            if exc.status == 503:
                self.tally.add("busy")
                if exc.retry_after is not None:
                    self.tally.add("busy_with_retry_after")
            else:
                self._other(exc.status)
            raise
        except EndpointError as exc:
            self._other(exc.status)
            raise

    def _other(self, status) -> None:
        with self.tally.lock:
            key = str(status) if status is not None else "no response"
            self.tally.other_non_2xx[key] = self.tally.other_non_2xx.get(key, 0) + 1


# ---- the server's memory ----------------------------------------------------------------------------


def worker_pids(arbiter_pid: int) -> list[int]:
    """The gunicorn workers under the arbiter (nginx, its other child, left out)."""
    try:
        children = [int(p) for p in Path(f"/proc/{arbiter_pid}/task/{arbiter_pid}/children").read_text().split()]
    except OSError:
        return []
    return [pid for pid in children if _command(pid) != "nginx"]


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def vm_rss_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def worker_rss(server: AdapterProcess) -> tuple[int | None, int | None]:
    """(worker pid, its VmRSS) for the one gunicorn worker under the arbiter."""
    pids = worker_pids(server.process.pid)
    if len(pids) != 1:
        return None, None
    return pids[0], vm_rss_bytes(pids[0])


# ---- the run --------------------------------------------------------------------------------------


def _check_decision(made, probabilities_count: int) -> None:
    if (
        len(made.probabilities) != probabilities_count
        or not all(math.isfinite(p) for p in made.probabilities)
        or not math.isclose(sum(made.probabilities), 1.0, abs_tol=1e-6)
    ):
        raise InvalidResponse(
            f"probabilities {made.probabilities} are not a distribution over {probabilities_count} options"
        )


def one_request(
    client: EndpointClient, kind: str, tag: str, rng: random.Random, tally: Tally, references: dict
) -> None:
    started = time.perf_counter()
    with tally.lock:
        tally.sent[kind] += 1
    try:
        if kind == "decision":
            body = decision_request(tag, rng)
            _check_decision(client.decide(body), len(body["options"]))
        elif kind == "shared":
            rid, state, questions = shared_request(tag, rng)
            for made, asked in zip(client.decide_batch(rid, state, questions), questions):
                _check_decision(made, len(asked["options"]))
        elif kind == "chat":
            reply = client.chat(chat_request(tag, rng), max_tokens=8)
            if reply.raw.get("object") != "chat.completion":
                raise InvalidResponse(f"not a chat completion: {str(reply.raw)[:200]}")
        else:  # a probe: the same request as before the run, so the same probabilities
            body = PROBES[rng.randrange(len(PROBES))]
            made = client.decide(body)
            _check_decision(made, len(body["options"]))
            diff = max(abs(a - b) for a, b in zip(made.probabilities, references[body["id"]]))
            with tally.lock:
                tally.probe_max_diff = max(tally.probe_max_diff, diff)
                tally.probe_equal += diff == 0.0
    except InvalidResponse as exc:
        with tally.lock:
            tally.crossed.append(f"{kind} {tag}: {exc}")
        return
    except EndpointError as exc:
        with tally.lock:
            tally.failed.append(f"{kind} {tag}: {exc}")
        return
    with tally.lock:
        tally.answered[kind] += 1
        tally.latencies_ms[kind].append((time.perf_counter() - started) * 1000.0)


def run_client(index: int, url: str, args, tally: Tally, references: dict, deadline: float, budget: Budget) -> None:
    rng = random.Random(1000 + index)
    client = EndpointClient(CountingTransport(url, tally, timeout_s=70.0), retries=args.retries)
    weights = [args.decision_weight, args.shared_weight, args.chat_weight]
    n = 0
    while time.monotonic() < deadline and budget.take():
        # Every client sends a probe as its 2nd request and every probe_every-th after that.
        probe = args.probe_every > 0 and n % args.probe_every == 1
        kind = "probe" if probe else rng.choices(KINDS, weights=weights)[0]
        one_request(client, kind, f"c{index}-{n}", rng, tally, references)
        n += 1


class Budget:
    """The request-count bound, shared by the clients."""

    def __init__(self, total: int):
        self.left = total
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            if self.left <= 0:
                return False
            self.left -= 1
            return True


# ---- hostile clients alongside the load, and /ping meanwhile ----------------------------------------


class PingSampler:
    """``GET /ping`` on a fresh connection every ``every_s``: latencies, and the failures (no 200 within 5 s)."""

    def __init__(self, url: str, every_s: float = 0.1):
        self.url, self.every_s = url + "/ping", every_s
        self.latencies_s: list[float] = []
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ping-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            started = time.monotonic()
            try:
                with urllib.request.urlopen(self.url, timeout=5) as reply:
                    reply.read()
                self.latencies_s.append(time.monotonic() - started)
            except OSError:
                self.failed += 1

    def __enter__(self) -> PingSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)

    def figures(self) -> dict:
        pings = self.latencies_s
        return {
            "count": len(pings),
            "failed": self.failed,
            "p50_s": percentile(pings, 50),
            "p95_s": percentile(pings, 95),
            "max_s": max(pings) if pings else None,
        }


class HostileClients:
    """What an attacker on the network would run, bounded: a fixed number of sockets to 127.0.0.1, for as long
    as the ``with`` block lasts, each reopened when the server closes it (at most once a second).

    * slow headers: a request header sent a byte every half second, never finished;
    * trickled bodies: a body announced one byte over the limit, then sent a byte every 0.1 s;
    * half-open: connections that send nothing at all.
    """

    def __init__(
        self,
        port: int,
        *,
        slow_headers: int = 16,
        tricklers: int = 4,
        half_open: int = 200,
        max_body_bytes: int = 1_048_576,
    ):
        self.port = port
        self.groups = {"slow_header": slow_headers, "trickled_body": tricklers, "half_open": half_open}
        self.oversized = (
            b"POST /invocations HTTP/1.1\r\nHost: adapter\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (max_body_bytes + 1)
        )
        self.counts = {"opened": 0, "closed_by_server": 0, "refused_413": 0, "other_answers": 0, "bytes_sent": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hostile-clients", daemon=True)

    def _open(self, kind: str) -> dict | None:
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        except OSError:
            return None
        sock.setblocking(False)
        self.counts["opened"] += 1
        conn = {"kind": kind, "sock": sock, "opened": time.monotonic(), "next": time.monotonic(), "answer": b""}
        if kind == "trickled_body":
            self._send(conn, self.oversized)
        elif kind == "slow_header":
            self._send(conn, b"POST /invocations HTTP/1.1\r\nHost: adapter\r\nX-Slow: ")
        return conn

    def _send(self, conn: dict, data: bytes) -> bool:
        try:
            self.counts["bytes_sent"] += conn["sock"].send(data)
            return True
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False

    def _alive(self, conn: dict) -> bool:
        """Read what the server sent; False once it closed the connection."""
        try:
            data = conn["sock"].recv(65536)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        if not data:
            return False
        conn["answer"] += data
        return True

    def _tick(self, conn: dict, now: float) -> bool:
        if now >= conn["next"]:
            if conn["kind"] == "slow_header":
                conn["next"] = now + 0.5
                if not self._send(conn, b"a"):
                    return False
            elif conn["kind"] == "trickled_body":
                conn["next"] = now + 0.1
                if not self._send(conn, b"x"):
                    return False
        return self._alive(conn)

    def _close(self, conn: dict) -> None:
        answer = conn["answer"]
        if answer.startswith((b"HTTP/1.1 413", b"HTTP/1.0 413")):
            self.counts["refused_413"] += 1
        elif answer:
            self.counts["other_answers"] += 1
        self.counts["closed_by_server"] += 1
        conn["sock"].close()

    def _run(self) -> None:
        conns = [c for kind, n in self.groups.items() for c in (self._open(kind) for _ in range(n)) if c]
        reopen_after: dict[str, float] = {}
        while not self._stop.wait(0.05):
            now = time.monotonic()
            still = []
            for conn in conns:
                if self._tick(conn, now):
                    still.append(conn)
                else:
                    self._close(conn)
                    reopen_after.setdefault(conn["kind"], now + 1.0)
            for kind in [k for k, at in reopen_after.items() if at <= now]:
                del reopen_after[kind]
                missing = self.groups[kind] - sum(c["kind"] == kind for c in still)
                still += [c for c in (self._open(kind) for _ in range(missing)) if c]
            conns = still
        for conn in conns:
            conn["sock"].close()

    def __enter__(self) -> HostileClients:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)

    def figures(self) -> dict:
        return {**self.groups, **self.counts}


# ---- worst cases: one body at a time at the documented limits, /ping sampled meanwhile ----------

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


def worst_cases(work: Path, model_dir: Path, half_open: int = 16) -> dict:
    pings: list[float] = []
    failed_pings = 0
    results = []
    with (
        AdapterProcess(model_dir, log_path=work / "adapter-worst.log", threads=THREADS) as server,
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


def run(args) -> dict:
    with tempfile.TemporaryDirectory(prefix="load-run-") as work:  # the packaged model copy goes with it
        return _run(args, Path(work))


def _run(args, work: Path) -> dict:
    model_dir, _ = prepare_model_dir(work)
    env = {
        "SM_LLAMA_CPP_CTX_SIZE": "2048",
        "DECISION_ADAPTER_MAX_QUEUE": str(args.max_queue),
        "DECISION_ADAPTER_RETRY_AFTER": "1",
    }
    tally = Tally()
    samples: list[tuple[float, int]] = []
    with AdapterProcess(model_dir, log_path=work / "adapter.log", threads=THREADS, env=env) as server:
        warm = EndpointClient.local(server.url, retries=args.retries)
        rng = random.Random(7)
        for i in range(args.warmup):  # every kind, so buffers of every shape exist before the first sample
            warm.decide(decision_request(f"w{i}", rng))
            warm.decide_batch(*shared_request(f"w{i}", rng))
            warm.chat(chat_request(f"w{i}", rng), max_tokens=8)
        references = {p["id"]: warm.decide(p).probabilities for p in PROBES}
        pid_start, rss_start = worker_rss(server)
        model = warm.ping().get("model") or _status(server.url).get("model")  # /ping names it to key holders only

        stop_sampling = threading.Event()

        def sample():
            while not stop_sampling.wait(1.0):
                _, rss = worker_rss(server)
                if rss:
                    samples.append((time.monotonic(), rss))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        deadline = started + args.duration
        budget = Budget(args.max_requests)
        hostile = HostileClients(server.port, half_open=args.half_open) if args.hostile else ExitStack()
        with ThreadPoolExecutor(max_workers=args.clients) as pool, hostile, PingSampler(server.url) as pings:
            futures = [
                pool.submit(run_client, i, server.url, args, tally, references, deadline, budget)
                for i in range(args.clients)
            ]
            done, pending = wait(futures, timeout=args.duration + DRAIN_S)
            if pending:  # a client stuck past the drain time: stopping the server ends its request
                server.stop()
                wait(futures, timeout=30)
        elapsed = time.monotonic() - started
        fronted = "in front on" in server.log_path.read_text(errors="replace")
        stop_sampling.set()
        sampler.join(5)
        for future in done:
            future.result()  # a bug in a client shows here rather than as missing counts
        pid_end, rss_end = worker_rss(server)
        log_tail = server.log_tail(5)
    worst = worst_cases(work, model_dir) if args.worst_cases else None
    answered = sum(tally.answered.values())
    sent = sum(tally.sent.values())
    all_latencies = [v for values in tally.latencies_ms.values() for v in values]
    peak = max([rss for _, rss in samples] + [rss_start or 0, rss_end or 0])
    figures = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "load_average_at_end": os.getloadavg(),
        },
        "settings": {
            "clients": args.clients,
            "duration_s": args.duration,
            "max_requests": args.max_requests,
            "client_retries": args.retries,
            "adapter_threads": THREADS,
            "max_queue": args.max_queue,
            "retry_after_s": 1,
            "mix": {
                "decision": args.decision_weight,
                "shared": args.shared_weight,
                "chat": args.chat_weight,
                "probe_every": args.probe_every,
            },
            "model": model,
        },
        "elapsed_s": elapsed,
        "requests_sent": sent,
        "requests_answered": answered,
        "http_attempts": tally.attempts,
        "busy_503": tally.busy,
        "busy_503_with_retry_after": tally.busy_with_retry_after,
        "other_non_2xx": tally.other_non_2xx,
        "unanswered": tally.failed,
        "crossed_answers": tally.crossed,
        "probes": {
            "sent": tally.sent["probe"],
            "equal_to_lone_run": tally.probe_equal,
            "max_abs_difference": tally.probe_max_diff,
        },
        "by_kind": {
            k: {
                "sent": tally.sent[k],
                "answered": tally.answered[k],
                "p50_ms": percentile(tally.latencies_ms[k], 50),
                "p95_ms": percentile(tally.latencies_ms[k], 95),
            }
            for k in (*KINDS, "probe")
        },
        "latency_ms": {
            "p50": percentile(all_latencies, 50),
            "p95": percentile(all_latencies, 95),
            "mean": statistics.fmean(all_latencies) if all_latencies else None,
        },
        "throughput_per_s": answered / elapsed if elapsed else None,
        "worker_rss_bytes": {
            "pid_start": pid_start,
            "pid_end": pid_end,
            "start_after_warmup": rss_start,
            "end": rss_end,
            "peak": peak,
            "samples": len(samples),
            # one sample per ~5 s: (seconds into the run, bytes), to tell growth from a plateau
            "timeline": [(round(t - started, 1), rss) for t, rss in samples[::5]],
            "growth_fraction": (rss_end - rss_start) / rss_start if rss_start and rss_end else None,
        },
        "adapter_log_tail": log_tail.splitlines(),
        "nginx_in_front": fronted,
        "hostile_clients": hostile.figures() if args.hostile else None,
        "ping_during_load": pings.figures(),
        "worst_cases": worst,
    }
    figures["targets"] = {
        "every_request_answered": answered == sent and not tally.failed,
        "no_other_non_2xx": not tally.other_non_2xx,
        "every_503_has_retry_after": tally.busy == tally.busy_with_retry_after,
        "no_crossed_answers": not tally.crossed,
        "probes_equal_lone_run": tally.probe_equal == tally.answered["probe"],
        "same_worker_throughout": pid_start is not None and pid_start == pid_end,
        "rss_growth_under_5_percent": figures["worker_rss_bytes"]["growth_fraction"] is not None
        and figures["worker_rss_bytes"]["growth_fraction"] < 0.05,
    }
    ping = figures["ping_during_load"]
    figures["targets"]["ping_p95_under_1_s_during_load"] = (
        not ping["failed"] and ping["p95_s"] is not None and ping["p95_s"] < 1.0
    )
    if worst:
        figures["targets"]["ping_p95_under_1_s_during_worst_cases"] = (
            not worst["ping"]["failed"] and worst["ping"]["p95_s"] is not None and worst["ping"]["p95_s"] < 1.0
        )
    return figures


def _status(url: str) -> dict:
    """GET /status (the adapter's details), or nothing where it has no such route."""
    try:
        with urllib.request.urlopen(url + "/status", timeout=10) as reply:
            return json.loads(reply.read())
    except (OSError, ValueError):
        return {}


def _ms(value) -> str:
    return f"{value:8.0f}" if value is not None else "       -"


def report(f: dict) -> str:
    s, rss, t = f["settings"], f["worker_rss_bytes"], f["targets"]
    verdict = lambda ok: "meets target" if ok else "MISSES target"  # noqa: E731
    mib = lambda b: f"{b / 2**20:.1f} MiB" if b else "-"  # noqa: E731
    lines = [
        f"Load run: {s['clients']} clients for {s['duration_s']:g} s (at most {s['max_requests']} requests) "
        f"against the local adapter ({s['model']}, {s['adapter_threads']} threads, max queue {s['max_queue']})",
        f"machine: {f['machine']['cpus']} CPUs, load average at the end "
        f"{', '.join(f'{x:.1f}' for x in f['machine']['load_average_at_end'])}",
        "",
        f"  {'kind':<22}{'sent':>6}{'answered':>10}{'p50 ms':>9}{'p95 ms':>9}",
    ]
    for kind, row in f["by_kind"].items():
        lines.append(
            f"  {KIND_LABELS[kind]:<22}{row['sent']:>6}{row['answered']:>10} {_ms(row['p50_ms'])} {_ms(row['p95_ms'])}"
        )
    lines += [
        f"  {'all':<22}{f['requests_sent']:>6}{f['requests_answered']:>10} {_ms(f['latency_ms']['p50'])} "
        f"{_ms(f['latency_ms']['p95'])}",
        "",
        f"  HTTP attempts (incl. retries)   {f['http_attempts']}",
        f"  503 busy                        {f['busy_503']} ({f['busy_503_with_retry_after']} with Retry-After: "
        f"{verdict(t['every_503_has_retry_after'])})",
        f"  other non-2xx                   {sum(f['other_non_2xx'].values())} {f['other_non_2xx'] or ''} "
        f"({verdict(t['no_other_non_2xx'])}: none)",
        f"  unanswered after retries        {len(f['unanswered'])} ({verdict(t['every_request_answered'])}: none)",
        f"  crossed answers                 {len(f['crossed_answers'])} ({verdict(t['no_crossed_answers'])}: none)",
        f"  probes equal to a lone run      {f['probes']['equal_to_lone_run']}/{f['by_kind']['probe']['answered']} "
        f"(max |diff| {f['probes']['max_abs_difference']:.1e})",
        f"  throughput                      {f['throughput_per_s']:.2f} answered requests/s over "
        f"{f['elapsed_s']:.1f} s",
        f"  worker RSS after warm-up / end  {mib(rss['start_after_warmup'])} / {mib(rss['end'])} "
        f"(peak {mib(rss['peak'])}; growth {100 * (rss['growth_fraction'] or 0):+.2f} %: "
        f"{verdict(t['rss_growth_under_5_percent'])} < 5 %)",
        "  worker RSS during the run       "
        + ", ".join(f"{mib(b)} at {t:.0f} s" for t, b in rss["timeline"][:: max(1, len(rss["timeline"]) // 6)]),
        f"  same gunicorn worker throughout {'yes' if t['same_worker_throughout'] else 'NO'} "
        f"(pid {rss['pid_start']} -> {rss['pid_end']})",
    ]
    for problem in (f["crossed_answers"] + f["unanswered"])[:5]:
        lines.append(f"    ! {problem}")
    ping, hostile = f.get("ping_during_load"), f.get("hostile_clients")  # runs recorded before they existed: none
    if ping or hostile:
        lines.append("")
    if hostile:
        lines += [
            f"Hostile clients alongside ({'nginx in front' if f['nginx_in_front'] else 'gunicorn alone'}): "
            f"{hostile['slow_header']} slow headers, {hostile['trickled_body']} trickled oversized bodies, "
            f"{hostile['half_open']} half-open connections",
            f"  {hostile['opened']} connections opened, {hostile['closed_by_server']} closed by the server, "
            f"{hostile['refused_413']} answered 413, {hostile['other_answers']} other answers",
        ]
    if ping:
        lines.append(
            f"  /ping during the load: {ping['count']} answered, {ping['failed']} failed; p50 "
            f"{1000 * (ping['p50_s'] or 0):.0f} ms, p95 {1000 * (ping['p95_s'] or 0):.0f} ms, max "
            f"{1000 * (ping['max_s'] or 0):.0f} ms ({verdict(t['ping_p95_under_1_s_during_load'])}: "
            "p95 < 1 s)"
        )
    worst = f.get("worst_cases")
    if worst:
        ping = worst["ping"]
        lines += [
            "",
            f"Worst cases, one at a time on an adapter with the default settings, "
            f"{worst['half_open_connections']} connections holding half a header throughout:",
            f"  {'body':<42}{'bytes':>9}{'status':>8}{'seconds':>9}",
        ]
        lines += [f"  {r['body']:<42}{r['bytes']:>9}{r['status']:>8}{r['seconds']:>9.1f}" for r in worst["requests"]]
        lines.append(
            f"  /ping meanwhile: {ping['count']} answered, {ping['failed']} failed; p50 "
            f"{1000 * (ping['p50_s'] or 0):.0f} ms, p95 {1000 * (ping['p95_s'] or 0):.0f} ms, max "
            f"{1000 * (ping['max_s'] or 0):.0f} ms ({verdict(t['ping_p95_under_1_s_during_worst_cases'])}: "
            f"p95 < 1 s)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (default 8)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load (default 60)")
    parser.add_argument("--max-requests", type=int, default=5000, help="stop after this many requests (default 5000)")
    parser.add_argument("--retries", type=int, default=150, help="client retries on 503 (default 150)")
    parser.add_argument("--max-queue", type=int, default=4, help="DECISION_ADAPTER_MAX_QUEUE (default 4)")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up rounds of each kind (default 3)")
    parser.add_argument("--decision-weight", type=float, default=0.6)
    parser.add_argument("--shared-weight", type=float, default=0.25)
    parser.add_argument("--chat-weight", type=float, default=0.15)
    parser.add_argument(
        "--probe-every",
        type=int,
        default=6,
        help="each client's 2nd request and every Nth after it is a probe (default 6; 0: none)",
    )
    parser.add_argument(
        "--no-hostile",
        dest="hostile",
        action="store_false",
        help="skip the hostile clients (slow headers, trickled bodies, half-open connections)",
    )
    parser.add_argument("--half-open", type=int, default=200, help="half-open connections held (default 200)")
    parser.add_argument(
        "--no-worst-cases",
        dest="worst_cases",
        action="store_false",
        help="skip the worst-case bodies and the /ping sampling during them",
    )
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/load.json"))
    args = parser.parse_args(argv)
    if args.clients < 1 or args.duration <= 0 or args.max_requests < 1:
        parser.error("--clients, --duration and --max-requests must be positive")
    figures = run(args)
    print(report(figures))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"\nfigures written to {args.out}")
    hard = (
        "every_request_answered",
        "no_other_non_2xx",
        "every_503_has_retry_after",
        "no_crossed_answers",
        "probes_equal_lone_run",
    )  # speed and memory are reported, never a failure
    return 0 if all(figures["targets"][k] for k in hard) else 1


if __name__ == "__main__":
    raise SystemExit(main())

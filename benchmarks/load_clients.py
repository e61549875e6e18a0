"""The load run's clients: the requests they send, and how each checks and counts what comes back.

Every request carries ids unique to it (the request's, its options', its questions'), so an answer meant for
another request cannot pass as its own; probes repeat a request sent alone before the run, whose
probabilities must come back unchanged under load.
"""

from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import dataclass, field

from workshop_lib.client import (
    EndpointBusy,
    EndpointClient,
    EndpointError,
    InvalidResponse,
    LocalTransport,
    decision,
    question,
)

KINDS = ("decision", "shared", "chat")

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


# ---- one client's requests ----------------------------------------------------------------------


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

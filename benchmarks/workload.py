"""What the adapter and llama-server benchmarks send: synthetic support tickets and the questions asked
about them, as single decisions or as one shared-state request."""

from __future__ import annotations

QUESTIONS = [
    ("route", "Which team should handle this ticket?", ["billing", "tech", "security", "sales"]),
    ("priority", "How urgent is it?", ["low", "normal", "high"]),
    ("refund", "Does the customer ask for money back?", ["no", "yes"]),
    ("angry", "Is the customer angry?", ["no", "yes"]),
    ("churn", "Does the customer threaten to cancel?", ["no", "yes"]),
    ("language", "Which language is the ticket in?", ["english", "german", "french", "other"]),
    ("product", "Which product is concerned?", ["pro plan", "team plan", "api", "unknown"]),
    ("followup", "Does the ticket need a call back?", ["no", "yes"]),
]


def ticket(n: int, sentences: int = 8) -> str:
    """A synthetic support ticket (~400 tokens at 8 sentences); n makes it unique."""
    lines = [f"Ticket {n}. Customer account {4000 + n}, Pro plan since 2021."]
    for i in range(sentences):
        lines.append(
            f"Note {i}: on day {i + 1} the customer reported that invoice {n}-{i} was charged twice "
            f"and asked support to check the card ending {1000 + (n * 7 + i) % 9000}."
        )
    return " ".join(lines)


def shared(n: int, k: int) -> dict:
    """One shared-state request: ticket ``n`` and the first ``k`` questions."""
    return {
        "id": f"batch-{n}",
        "state": ticket(n),
        "questions": [{"id": q, "question": text, "options": opts} for q, text, opts in QUESTIONS[:k]],
    }


def single(n: int) -> dict:
    """One decision on ticket ``n``: the routing question."""
    rid, text, opts = QUESTIONS[0]
    return {"id": f"{rid}-{n}", "state": ticket(n), "question": text, "options": opts}

"""What the adapter and llama-server benchmarks send: synthetic support tickets and the questions asked
about them, as single decisions or as one shared-state request; and short tickets, one routing question
each, for the concurrency table on short prompts."""

from __future__ import annotations

from workshop_lib.evaluation.tasks import Task

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


# Short tickets: a subject and one sentence (6 to 30 tokens with the embedded model's tokenizer), routed among
# the first 2 to 5 teams; the subjects, sentences and option counts cycle at co-prime periods.
SHORT_SUBJECTS = (
    "Charged twice",
    "Login fails",
    "Parcel late",
    "Refund please",
    "App crashes on start",
    "Wrong size delivered",
    "Password reset link expired",
)
SHORT_SENTENCES = (
    "My card was billed two times for the same order.",
    "I cannot sign in since Monday.",
    "The order has not arrived yet.",
    "Send my money back.",
    "It closes whenever I open the settings page, on my phone and on my laptop.",
    "The shoes are too small.",
    "Where is my invoice for March?",
    "Please stop my subscription at the end of this month and confirm it by email.",
    "Pages take ages to load.",
    "The box came crushed and the glass inside is broken.",
    "I want the bigger plan.",
)
SHORT_TEAMS = (
    ("billing", "Billing: charges, refunds, invoices"),
    ("tech", "Technical support"),
    ("shipping", "Shipping and delivery"),
    ("sales", "Sales and plans"),
    ("returns", "Returns"),
)


def short_tickets(n: int = 60) -> list[Task]:
    """``n`` one-question decisions on short tickets, 2 to 5 options each, every state different."""
    return [
        Task(
            f"short-{i}",
            "short",
            "choice",
            f"{SHORT_SUBJECTS[i % len(SHORT_SUBJECTS)]}: {SHORT_SENTENCES[i % len(SHORT_SENTENCES)]}",
            "Which team should handle this ticket?",
            SHORT_TEAMS[: 2 + i % 4],
            SHORT_TEAMS[0][0],
        )
        for i in range(n)
    ]

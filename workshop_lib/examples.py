"""Example requests used by the README, the demo and the notebooks."""

from __future__ import annotations

from typing import Any

SUPPORT_TICKET = (
    "Subject: charged twice this month\n"
    "Hi, my card statement shows two charges of 49.00 EUR for the Pro plan on 3 March. "
    "I only have one workspace. Can you refund the duplicate? Order ref PRO-88231."
)

# JSON request bodies: each value is whatever the wire format holds there.
SUPPORT_ROUTE: dict[str, Any] = {
    "id": "ticket-88231",
    "state": SUPPORT_TICKET,
    "question": "Which team should handle this ticket?",
    "options": [
        {"id": "billing", "text": "Billing: charges, refunds, invoices"},
        {"id": "tech_support", "text": "Technical support: bugs, errors, outages"},
        {"id": "account_security", "text": "Account security: login, password, suspicious access"},
        {"id": "sales", "text": "Sales: new plans, upgrades, quotes"},
    ],
}

SHARED_STATE: dict[str, Any] = {
    "id": "ticket-88231-triage",
    "state": SUPPORT_TICKET,
    "questions": [
        {"id": "route", "question": SUPPORT_ROUTE["question"], "options": SUPPORT_ROUTE["options"]},
        {
            "id": "priority",
            "question": "How urgent is this ticket?",
            "options": [
                {"id": "low", "text": "Low: no deadline"},
                {"id": "normal", "text": "Normal: answer within two working days"},
                {"id": "high", "text": "High: money or access is affected now"},
            ],
        },
        {
            "id": "refund_requested",
            "question": "Does the customer ask for money back?",
            "options": [{"id": "no", "text": "No"}, {"id": "yes", "text": "Yes"}],
        },
    ],
}

CHAT: dict[str, Any] = {
    "messages": [
        {"role": "system", "content": "You are a concise assistant."},
        {"role": "user", "content": "In one sentence: why route support tickets automatically?"},
    ],
    "max_tokens": 48,
    "temperature": 0,
}


# The published SemIf sample's request format (``{"decision": ...}`` / ``{"decisions": [...]}``,
# options with ``description``), which the decision adapter answers as the sample's server does.
LOCKED_OUT = "A user writes that the password reset link never reaches their inbox and they cannot log in."

SAMPLE_DECISION = {
    "decision": {
        "id": "queue-choice",
        "state": LOCKED_OUT,
        "question": "Which support queue should take this?",
        "options": [
            {"id": "account_access", "description": "Sign-in, passwords and account recovery."},
            {"id": "billing", "description": "Invoices, charges and refunds."},
            {"id": "sales", "description": "Plans, pricing and trials."},
        ],
    }
}

SAMPLE_SHARED = {
    "decisions": [
        {
            "id": "queue-choice",
            "state": LOCKED_OUT,
            "question": "Which support queue should take this?",
            "options": [
                {"id": "account-access", "description": "Sign-in and recovery."},
                {"id": "billing", "description": "Charges and refunds."},
            ],
        },
        {
            "id": "urgency",
            "state": LOCKED_OUT,
            "question": "How urgent is it?",
            "options": [
                {"id": "urgent", "description": "The user cannot use the product at all."},
                {"id": "standard", "description": "The user can keep working meanwhile."},
            ],
        },
    ]
}

SAMPLE_CHAT = {
    "messages": [
        {
            "role": "user",
            "content": "A user never receives the password reset email. Name the support queue that should handle it.",
        }
    ],
    "max_tokens": 64,
    "stream": False,
}

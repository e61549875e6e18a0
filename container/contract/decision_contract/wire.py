"""The wire between the rooms: which version of the decision answers an adapter speaks, the fields an answer
names its readout and its options in, and the one rule every answer follows.

The adapter writes answers and the client reads them; both take these names and rules from here.

**Version.** ``WIRE_VERSION`` names what this module describes. The adapter says it on every response, in
``VERSION_HEADER``: SageMaker's ``InvokeEndpoint`` hands its caller no response header of the container's
but this one (as ``CustomAttributes``), so the same header serves a local caller and one through SageMaker.
A client reads it with ``version_in`` and compares it with its own with ``version_problem``. An answer
without it comes from an adapter that predates the header, which spoke ``FIRST_VERSION``.

**Readouts and methods.** A readout (``names.READOUTS``: ``letters``, ``cloze``) is how a question is put to
the model; a method is how one presentation was read: ``letter-slots`` and ``two-level-codes`` (more than 16
options) are the letters readout's, ``cloze`` the cloze readout's (``METHODS``). The dialects say which
produced an answer in different fields, named here with what each holds (``READOUT_FIELDS``). In this version
this project's schema (and the sample's) names only cloze's: an answer of theirs that names none was read with
letters (``UNNAMED_READOUT``); ``readout_of`` is the one place that applies that rule.

**The validity rule.** An answer is one distribution over exactly the options sent: the ids as sent (in their
order where the wire carries a list), one probability per option, each a finite number in [0, 1], summing to 1
within ``SUM_TOLERANCE`` (``answer_problem``, made of ``ids_problem`` and ``distribution_problem``).

**Readout and order.** An order mode that moves the options (``prior``, ``rotations``) needs a prompt that
lists them, which only the letters readout has (``order_problem``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .names import AS_GIVEN, CLOZE, LETTERS, ORDER_MODES, READOUTS

WIRE_VERSION = "decision-wire/1"
FIRST_VERSION = "decision-wire/1"  # what an adapter that sends no VERSION_HEADER speaks
VERSION_PREFIX = "decision-wire/"
VERSION_HEADER = "X-Amzn-SageMaker-Custom-Attributes"

# How far the probabilities of one answer may sum from 1: room for float rounding in a server's softmax and
# in the decimal text JSON carries, far below any difference a caller acts on.
SUM_TOLERANCE = 1e-4

# The methods a readout reads with, keyed by the names the System One dialect's ``x_readout`` gives.
LETTER_SLOTS, TWO_LEVEL_CODES = "letter-slots", "two-level-codes"
METHODS = {LETTER_SLOTS: LETTERS, TWO_LEVEL_CODES: LETTERS, CLOZE: CLOZE}

# -- the fields of an answer --------------------------------------------------------------------------------

# This project's schema (and the published sample's): a ``result``, or ``results`` of a batch, each with
# these fields.
RESULT, RESULTS = "result", "results"
ID, OPTION_IDS, PROBABILITIES = "id", "option_ids", "probabilities"
READOUT_NAME = "readout_name"  # the readout's name (cloze answers only, in this version: UNNAMED_READOUT)
METHOD_TEXT = "readout"  # a description of the method, for a reader
ALLOWED_TOKEN_MASS, ABSTAINED, PREDICTION_SET = "allowed_token_mass", "abstained", "prediction_set"
# Jev's System One API and the OpenAI Decisions API: the adapter's fields beside theirs.
X_READOUT, X_PREDICTION_SET = "x_readout", "x_prediction_set"

# Per dialect (by the name the adapter's API registry gives it), the field that says what read an answer, and
# what it holds: a readout's name or a method's.
READOUT_FIELDS = {
    "decision": (READOUT_NAME, "readout"),
    "sample": (READOUT_NAME, "readout"),
    "systemone": (X_READOUT, "method"),
    "openai_decisions": (X_READOUT, "readout"),
}
# Per dialect, the readout of an answer that names none where this version says which: the letters, as the only
# readout the published sample has; System One's and the Decisions API's answers from other servers do not say.
UNNAMED_READOUT = {"decision": LETTERS, "sample": LETTERS}


class WireError(ValueError):
    """An answer, or the version an adapter reports, that breaks this contract; the message says how."""


# -- the version --------------------------------------------------------------------------------------------


def version_in(header: str | None) -> str | None:
    """The wire version a ``VERSION_HEADER`` value names (it may hold other attributes beside it, separated by
    commas or semicolons), or None where there is none."""
    for part in (header or "").replace(";", ",").split(","):
        part = part.strip()
        if part.startswith(VERSION_PREFIX):
            return part
    return None


def version_problem(spoken: str | None, *, expected: str | None = None) -> str | None:
    """What stands between a client of version ``expected`` (this module's) and an adapter speaking ``spoken``
    (None: the adapter sent no version, so it speaks ``FIRST_VERSION``), or None where they speak the same."""
    spoken, expected = spoken or FIRST_VERSION, expected or WIRE_VERSION
    if spoken == expected:
        return None
    return (
        f"the endpoint's adapter speaks {spoken}, this client {expected}: its answers may not mean what this "
        "client reads them as. Use the client and the adapter image of one checkout: update this client "
        "(`pip install -U` the workshop library and decision-contract, or `make setup` in the checkout), or "
        "build and deploy the adapter image of the client's checkout (`workshop build-image`, then `workshop deploy`)"
    )


# -- readouts -----------------------------------------------------------------------------------------------


def readout_of_method(method: str) -> str:
    """The readout a method (``x_readout`` of a System One answer) belongs to."""
    if method not in METHODS:
        raise WireError(f"{method!r} is not a method this contract knows ({', '.join(METHODS)})")
    return METHODS[method]


def readout_of(answer: Mapping[str, Any], dialect: str = "decision") -> str | None:
    """The readout that produced ``answer``, read from the field its dialect names it in (``READOUT_FIELDS``); for
    an answer that names none, the dialect's ``UNNAMED_READOUT`` (letters, for this project's schema and the
    sample's), or None where the dialect does not say (System One's or the Decisions API's from another server)."""
    if dialect not in READOUT_FIELDS:
        raise WireError(f"{dialect!r} is not a dialect of this contract ({', '.join(READOUT_FIELDS)})")
    key, holds = READOUT_FIELDS[dialect]
    value = answer.get(key)
    if value is None:
        return UNNAMED_READOUT.get(dialect)
    if not isinstance(value, str):
        raise WireError(f"{key} is {value!r}, not a {holds}'s name")
    if holds == "method":
        return readout_of_method(value)
    if value not in READOUTS:
        raise WireError(f"{key} is {value!r}, not a readout of this contract ({', '.join(READOUTS)})")
    return value


def order_problem(readout: str, order: str | None) -> str | None:
    """Why ``order`` cannot apply to ``readout`` (None: the server's default order), or None where it can."""
    if readout not in READOUTS:
        return f"readout must be one of {', '.join(READOUTS)}, not {readout!r}"
    if order is not None and order not in ORDER_MODES:
        return f"order must be one of {', '.join(ORDER_MODES)}, not {order!r}"
    if order not in (None, AS_GIVEN) and readout != LETTERS:
        return (
            f"order {order!r} moves the options, which only the {LETTERS} readout's prompt lists: use "
            f"{AS_GIVEN!r} with the {readout} readout"
        )
    return None


# -- the validity rule --------------------------------------------------------------------------------------


def probability_problem(value: Any) -> str | None:
    """Why ``value`` is not a probability (a finite number in [0, 1]), as "is ...", or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"is {value!r}, not a number"
    if not math.isfinite(value):
        return f"is {value!r}, not a finite number"
    if not 0.0 <= value <= 1.0:
        return f"is {value!r}, outside [0, 1]"
    return None


def distribution_problem(option_ids: Sequence[str], probabilities: Sequence[Any]) -> str | None:
    """What keeps ``probabilities`` from being one distribution over ``option_ids``, or None."""
    if not option_ids:
        return "it names no options"
    if len(probabilities) != len(option_ids):
        return f"{len(probabilities)} probabilities for {len(option_ids)} option ids"
    for option_id, p in zip(option_ids, probabilities):
        problem = probability_problem(p)
        if problem:
            return f"the probability of {option_id!r} {problem}"
    total = math.fsum(probabilities)
    if abs(total - 1.0) > SUM_TOLERANCE:
        return f"the probabilities sum to {total!r}, not 1 (within {SUM_TOLERANCE:g})"
    return None


def ids_problem(sent: Sequence[str], got: Sequence[str], *, ordered: bool = True) -> str | None:
    """How the answer's option ids differ from those sent (exactly those; in the order sent where ``ordered``),
    or None."""
    sent, got = list(sent), list(got)
    if got == sent:
        return None
    doubled = sorted({i for i in got if got.count(i) > 1})
    missing = [i for i in sent if i not in got]
    extra = list(dict.fromkeys(i for i in got if i not in sent))
    wrong = [
        *([f"lists {doubled} more than once"] if doubled else []),
        *([f"lacks the options {missing}"] if missing else []),
        *([f"has {extra}, which were not sent"] if extra else []),
    ]
    if wrong:
        return "it " + " and ".join(wrong)
    if ordered:  # the very ids sent, each once: only their order differs
        return f"it lists the options as {got}, not in the order sent {sent}"
    return None


def answer_problem(
    sent: Sequence[str], got: Sequence[str], probabilities: Sequence[Any], *, ordered: bool = True
) -> str | None:
    """The one rule: the ids sent, and one distribution over them. What breaks it, or None."""
    return ids_problem(sent, got, ordered=ordered) or distribution_problem(got, probabilities)

"""Hostile request bodies for the fuzz tests (hypothesis strategies), and small process helpers.

Three input classes once made the adapter fail with a 500 (or a NaN answer);
``KNOWN_GAPS`` names them, and each has an explicit test in test_hostile_input.py /
test_hostile_http.py:

* integers beyond float range where a number is expected (``temperature: 1e400`` as
  an integer literal: OverflowError), and integer literals over 4,300 digits
  (Python's int-parsing limit: ValueError out of ``json.loads``);
* unpaired UTF-16 surrogate escapes (``"\\ud800"``) in strings that reach the model
  or the reply (UnicodeEncodeError when tokenizing or encoding the response);
* positive temperatures so small that logits / temperature overflow (NaN probabilities).

The adapter now refuses all of them with a 4xx (explicit tests cover each); the random
strategies still leave them out so that their examples exercise the rest of the grammar.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import strategies as st

KNOWN_GAPS = ("integers beyond float range or over 4300 digits", "unpaired surrogate escapes",
              "temperatures below ~1e-300")

# Keys the adapter reads, so random objects often look almost like requests.
KEYS = ("id", "state", "question", "questions", "options", "text", "temperature", "messages", "role",
        "content", "stream", "max_tokens", "max_completion_tokens", "top_p", "seed", "stop")
INVALID_UTF8 = (b"\xff", b"\xfe", b"\xc3", b"\xc0\xaf", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80")
NON_FINITE = (b"NaN", b"Infinity", b"-Infinity")

# Integers stay inside float range (known gap: OverflowError beyond it).
safe_ints = st.integers(min_value=-(10 ** 300), max_value=10 ** 300)
# Floats stay away from the tiny positives that overflow logits / temperature (known gap: NaN answers).
safe_floats = st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=False).filter(
    lambda x: x == 0 or abs(x) > 1e-300)
# Text without surrogates (hypothesis's default alphabet), and text that may carry them.
texts = st.text(max_size=40)
texts_with_surrogates = st.text(st.characters() | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
                                max_size=40)
keys = st.sampled_from(KEYS) | st.text(max_size=8)


def json_values(text=texts, max_leaves: int = 20):
    scalars = st.none() | st.booleans() | safe_ints | safe_floats | text
    return st.recursive(scalars, lambda c: st.lists(c, max_size=5) | st.dictionaries(keys, c, max_size=5),
                        max_leaves=max_leaves)


def _or_any(good, text=texts):
    """Mostly a plausible value, sometimes any JSON value at all."""
    return st.one_of(good, good, json_values(text, max_leaves=8))


def decision_like(text=texts):
    option = st.one_of(text, st.fixed_dictionaries({"id": _or_any(text, text)}, optional={"text": _or_any(text, text)}))
    options = st.lists(_or_any(option, text), max_size=24)
    temperature = _or_any(safe_floats | safe_ints, text)
    question = st.fixed_dictionaries({}, optional={"id": _or_any(text, text), "question": _or_any(text, text),
                                                   "options": _or_any(options, text), "temperature": temperature})
    state = st.one_of(text, json_values(text))
    return st.fixed_dictionaries({}, optional={
        "id": _or_any(text, text), "state": state, "question": _or_any(text, text), "options": _or_any(options, text),
        "temperature": temperature, "questions": _or_any(st.lists(question, max_size=36), text)})


def chat_like(text=texts):
    message = st.fixed_dictionaries({}, optional={"role": _or_any(st.sampled_from(["system", "user", "assistant",
                                                                                    "tool", "root"]), text),
                                                  "content": _or_any(text, text)})
    number = _or_any(safe_floats | safe_ints, text)
    return st.fixed_dictionaries({"messages": _or_any(st.lists(message, max_size=4), text)}, optional={
        "stream": json_values(text, 3), "max_tokens": number, "max_completion_tokens": number,
        "temperature": number, "top_p": number, "seed": number, "stop": json_values(text, 4)})


def dumps(value) -> bytes:
    return json.dumps(value).encode("utf-8")


VALID = {"id": "fuzz-valid", "state": "The parcel never arrived.", "question": "Which team?",
         "options": [{"id": "refunds", "text": "Refunds"}, {"id": "shipping", "text": "Shipping"}]}


def _insert(body: bytes, piece: bytes, at: int) -> bytes:
    at = at % (len(body) + 1)
    return body[:at] + piece + body[at:]


def _duplicate_key_object(pairs, repeated) -> bytes:
    key, first, second = repeated
    items = [(key, first), *pairs, (key, second)]
    return ("{" + ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in items) + "}").encode("utf-8")


def _nest(depth: int, kind: str) -> bytes:
    if kind == "array":
        return b"[" * depth + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


def jev_like(text=texts):
    """Jev System One shapes: questions keyed by id, each with a type, instructions and criteria."""
    criteria = st.one_of(st.lists(_or_any(text, text), max_size=12),
                         st.dictionaries(text, st.none() | text, max_size=12), json_values(text, 6))
    question = st.fixed_dictionaries({}, optional={
        "type": _or_any(st.sampled_from(["noul", "choice", "score", "essay"]), text),
        "instructions": _or_any(text, text), "criteria": criteria, "extra": json_values(text, 3)})
    return st.fixed_dictionaries({"questions": _or_any(st.dictionaries(text, _or_any(question, text), max_size=4),
                                                       text)},
                                 optional={"state": st.one_of(text, json_values(text)), "model": json_values(text, 3)})


def raw_bodies(text=texts, huge_max: int = 2_000_000):
    """Bytes as they might arrive on POST /invocations: malformed, mistyped, deep, huge, duplicated."""
    valid_bytes = dumps(VALID)
    return st.one_of(
        json_values(text).map(dumps),
        decision_like(text).map(dumps),
        chat_like(text).map(dumps),
        jev_like(text).map(dumps),
        st.binary(max_size=300),
        st.builds(_insert, st.just(valid_bytes), st.sampled_from(INVALID_UTF8), st.integers(0, 10_000)),
        st.builds(lambda lit, where: {
            0: valid_bytes[:-1] + b', "temperature": ' + lit + b"}",
            1: b'{"id": "x", "state": {"score": ' + lit + b'}, "question": "q", "options": ["a", "b"]}',
            2: b'{"messages": [{"role": "user", "content": "hi"}], "top_p": ' + lit + b"}",
            3: lit}[where], st.sampled_from(NON_FINITE), st.integers(0, 3)),
        st.builds(_duplicate_key_object, st.lists(st.tuples(keys, json_values(text, 4)), max_size=4),
                  st.tuples(st.sampled_from(KEYS), json_values(text, 4), json_values(text, 4))),
        st.builds(_nest, st.integers(1, 5000), st.sampled_from(["array", "object"])),
        st.builds(lambda depth, kind: b'{"id": "x", "state": ' + _nest(depth, kind)
                  + b', "question": "q", "options": ["a", "b"]}', st.integers(900, 5000),
                  st.sampled_from(["array", "object"])),
        st.builds(lambda n: dumps(dict(VALID, state="word " * n)), st.integers(10_000, huge_max // 5)),
        st.builds(lambda n: dumps(dict(VALID, options=[f"option {i}" for i in range(n)])), st.integers(0, 200)),
        st.builds(lambda n: dumps({"id": "x", "state": "s", "questions": [
            {"id": f"q{i}", "question": "q", "options": ["a", "b"]} for i in range(n)]}), st.integers(33, 100)),
    )


# ---- process helpers ---------------------------------------------------------------------------


def worker_pids(arbiter_pid: int) -> list[int]:
    """The gunicorn workers: the arbiter's children, as /proc lists them (nginx, its other child, aside)."""
    try:
        text = Path(f"/proc/{arbiter_pid}/task/{arbiter_pid}/children").read_text()
    except OSError:
        return []
    return [int(pid) for pid in text.split() if _command(int(pid)) != "nginx"]


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""

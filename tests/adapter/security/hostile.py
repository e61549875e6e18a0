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

KNOWN_GAPS = (
    "integers beyond float range or over 4300 digits",
    "unpaired surrogate escapes",
    "temperatures below ~1e-300",
)

# Keys the adapter reads, so random objects often look almost like requests.
KEYS = (
    "id",
    "state",
    "question",
    "questions",
    "options",
    "text",
    "temperature",
    "messages",
    "role",
    "content",
    "stream",
    "max_tokens",
    "max_completion_tokens",
    "top_p",
    "seed",
    "stop",
)
INVALID_UTF8 = (b"\xff", b"\xfe", b"\xc3", b"\xc0\xaf", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80")
NON_FINITE = (b"NaN", b"Infinity", b"-Infinity")

# Integers stay inside float range (known gap: OverflowError beyond it).
safe_ints = st.integers(min_value=-(10**300), max_value=10**300)
# Floats stay away from the tiny positives that overflow logits / temperature (known gap: NaN answers).
safe_floats = st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=False).filter(
    lambda x: x == 0 or abs(x) > 1e-300
)
# Text without surrogates (hypothesis's default alphabet), and text that may carry them.
texts = st.text(max_size=40)
texts_with_surrogates = st.text(
    st.characters() | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=40
)
keys = st.sampled_from(KEYS) | st.text(max_size=8)


def json_values(text=texts, max_leaves: int = 20):
    scalars = st.none() | st.booleans() | safe_ints | safe_floats | text
    return st.recursive(
        scalars, lambda c: st.lists(c, max_size=5) | st.dictionaries(keys, c, max_size=5), max_leaves=max_leaves
    )


def _or_any(good, text=texts):
    """Mostly a plausible value, sometimes any JSON value at all."""
    return st.one_of(good, good, json_values(text, max_leaves=8))


def decision_like(text=texts):
    option = st.one_of(text, st.fixed_dictionaries({"id": _or_any(text, text)}, optional={"text": _or_any(text, text)}))
    options = st.lists(_or_any(option, text), max_size=24)
    temperature = _or_any(safe_floats | safe_ints, text)
    question = st.fixed_dictionaries(
        {},
        optional={
            "id": _or_any(text, text),
            "question": _or_any(text, text),
            "options": _or_any(options, text),
            "temperature": temperature,
        },
    )
    state = st.one_of(text, json_values(text))
    return st.fixed_dictionaries(
        {},
        optional={
            "id": _or_any(text, text),
            "state": state,
            "question": _or_any(text, text),
            "options": _or_any(options, text),
            "temperature": temperature,
            "questions": _or_any(st.lists(question, max_size=36), text),
        },
    )


def chat_like(text=texts):
    message = st.fixed_dictionaries(
        {},
        optional={
            "role": _or_any(st.sampled_from(["system", "user", "assistant", "tool", "root"]), text),
            "content": _or_any(text, text),
        },
    )
    number = _or_any(safe_floats | safe_ints, text)
    return st.fixed_dictionaries(
        {"messages": _or_any(st.lists(message, max_size=4), text)},
        optional={
            "stream": json_values(text, 3),
            "max_tokens": number,
            "max_completion_tokens": number,
            "temperature": number,
            "top_p": number,
            "seed": number,
            "stop": json_values(text, 4),
        },
    )


def dumps(value) -> bytes:
    return json.dumps(value).encode("utf-8")


VALID = {
    "id": "fuzz-valid",
    "state": "The parcel never arrived.",
    "question": "Which team?",
    "options": [{"id": "refunds", "text": "Refunds"}, {"id": "shipping", "text": "Shipping"}],
}


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
    criteria = st.one_of(
        st.lists(_or_any(text, text), max_size=12),
        st.dictionaries(text, st.none() | text, max_size=12),
        json_values(text, 6),
    )
    question = st.fixed_dictionaries(
        {},
        optional={
            "type": _or_any(st.sampled_from(["noul", "choice", "score", "multi_label", "essay"]), text),
            "instructions": _or_any(text, text),
            "criteria": criteria,
            "extra": json_values(text, 3),
            "labels": _or_any(st.lists(text, max_size=6), text),
            "threshold": _or_any(safe_floats | safe_ints, text),
        },
    )
    return st.fixed_dictionaries(
        {"questions": _or_any(st.dictionaries(text, _or_any(question, text), max_size=4), text)},
        optional={"state": st.one_of(text, json_values(text)), "model": json_values(text, 3)},
    )


def decisions_like(text=texts):
    """OpenAI Decisions shapes: every input item the library types (messages of four roles, tool calls and
    their outputs, naming calls that may or may not be there), parts of every kind, three question types;
    mostly well formed, so that some are accepted."""
    words = text.filter(lambda s: s.strip())

    def _mostly(good, text):  # each field is wrong now and then (1 in 12), so that whole bodies are often right
        return st.integers(0, 11).flatmap(lambda roll: good if roll else json_values(text, 4))

    loose = json_values(text, 4)
    part = st.one_of(
        st.fixed_dictionaries(
            {"type": st.just("input_text"), "text": _mostly(words, text)},
            optional={"prompt_cache_breakpoint": _mostly(st.just({"mode": "explicit"}), text)},
        ),
        st.fixed_dictionaries(
            {"type": st.just("input_json"), "data": _mostly(st.dictionaries(words, loose, max_size=3), text)}
        ),
        st.fixed_dictionaries(
            {"type": st.sampled_from(["input_image", "output_text", "refusal", "input_audio"])},
            optional={"image_url": text, "text": text, "refusal": text},
        ),
    )
    content = st.one_of(words, st.lists(part, min_size=1, max_size=3))
    call_id = _mostly(st.sampled_from(["call_1", "call_2"]), text)
    message = st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "user", "system", "developer", "assistant", "tool"]),
            "content": _mostly(content, text),
        },
        optional={"type": _mostly(st.just("message"), text)},
    )
    assistant = st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": _mostly(content, text)},
        optional={"phase": _mostly(st.sampled_from(["commentary", "final_answer"]), text)},
    )
    call = st.fixed_dictionaries(
        {
            "type": st.sampled_from(["function_call", "custom_tool_call"]),
            "call_id": call_id,
            "name": _mostly(words, text),
            "arguments": text,
            "input": text,
        }
    )
    output = st.fixed_dictionaries(
        {
            "type": st.sampled_from(["function_call_output", "custom_tool_call_output"]),
            "call_id": call_id,
            "output": _mostly(content, text),
        },
        optional={"status": _mostly(st.just("completed"), text)},
    )
    items = st.lists(st.one_of(message, message, assistant, call.map(_one_call_field), output), min_size=1, max_size=5)
    question = st.one_of(
        st.fixed_dictionaries(
            {"type": st.just("predicate"), "instructions": _mostly(content, text)}, optional={"name": words}
        ),
        st.fixed_dictionaries(
            {
                "type": st.just("choice"),
                "instructions": _mostly(content, text),
                "choices": st.lists(
                    st.fixed_dictionaries({"value": _mostly(words | st.booleans(), text)}), min_size=1, max_size=4
                ),
            }
        ),
        st.fixed_dictionaries(
            {
                "type": st.sampled_from(["score", "box"]),
                "instructions": words,
                "levels": st.lists(st.fixed_dictionaries({"label": _mostly(words, text)}), min_size=1, max_size=4),
            }
        ),
    )
    return st.fixed_dictionaries(
        {
            "input": _mostly(st.one_of(words, items), text),
            "questions": _mostly(st.lists(question, min_size=1, max_size=3), text),
        },
        optional={
            "model": st.one_of(st.just("jev-latest"), st.just("jev-latest"), loose),
            "safety_identifier": _mostly(text, text),
            "prompt_cache_key": _mostly(text, text),
            "prompt_cache_options": _mostly(st.just({"mode": "implicit"}), text),
        },
    )


def _one_call_field(call: dict) -> dict:
    """A function call has arguments, a custom tool call input: the other is dropped."""
    drop = "input" if call["type"] == "function_call" else "arguments"
    return {k: v for k, v in call.items() if k != drop}


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
        st.builds(
            lambda lit, where: {
                0: valid_bytes[:-1] + b', "temperature": ' + lit + b"}",
                1: b'{"id": "x", "state": {"score": ' + lit + b'}, "question": "q", "options": ["a", "b"]}',
                2: b'{"messages": [{"role": "user", "content": "hi"}], "top_p": ' + lit + b"}",
                3: lit,
            }[where],
            st.sampled_from(NON_FINITE),
            st.integers(0, 3),
        ),
        st.builds(
            _duplicate_key_object,
            st.lists(st.tuples(keys, json_values(text, 4)), max_size=4),
            st.tuples(st.sampled_from(KEYS), json_values(text, 4), json_values(text, 4)),
        ),
        st.builds(_nest, st.integers(1, 5000), st.sampled_from(["array", "object"])),
        st.builds(
            lambda depth, kind: (
                b'{"id": "x", "state": ' + _nest(depth, kind) + b', "question": "q", "options": ["a", "b"]}'
            ),
            st.integers(900, 5000),
            st.sampled_from(["array", "object"]),
        ),
        st.builds(lambda n: dumps(dict(VALID, state="word " * n)), st.integers(10_000, huge_max // 5)),
        st.builds(lambda n: dumps(dict(VALID, options=[f"option {i}" for i in range(n)])), st.integers(0, 200)),
        st.builds(
            lambda n: dumps(
                {
                    "id": "x",
                    "state": "s",
                    "questions": [{"id": f"q{i}", "question": "q", "options": ["a", "b"]} for i in range(n)],
                }
            ),
            st.integers(33, 100),
        ),
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

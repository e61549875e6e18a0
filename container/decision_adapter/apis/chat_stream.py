"""A streamed chat completion (``stream: true`` on POST /v1/chat/completions): its chunks from the engine's
pieces, as server-sent events, in a body that holds the model until the stream ends or the client leaves."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence

from .. import chat_completion
from ..caller_errors import AdapterError
from ..chat_completion import Piece
from ..questions import ChatRequest
from .decisions import error_body as openai_error
from .dialect import Body


def chunk(
    head: Body,
    delta: Body,
    *,
    logprobs: Sequence[Mapping[str, object]] | None = None,
    finish_reason: str | None = None,
    usage: bool = False,
) -> Body:
    """One ``chat.completion.chunk``; ``head``: the stream's id, created and model; ``usage``: the stream
    ends with a usage chunk, so every other chunk says ``usage: null`` (as OpenAI's)."""
    body = {
        **head,
        "object": "chat.completion.chunk",
        "choices": [
            {
                "index": 0,
                "delta": delta,
                "logprobs": None if logprobs is None else {"content": logprobs},
                "finish_reason": finish_reason,
            }
        ],
    }
    if usage:
        body["usage"] = None
    return body


def chunks(chat: ChatRequest, pieces: Iterable[Piece], model_name: str) -> Iterator[Body]:
    """The chunks of a streamed completion, from the engine's pieces (chat_completion.py's ``Piece``)."""
    head = {"id": chat_completion.completion_id(), "created": int(time.time()), "model": model_name}
    wants = chat.top_logprobs is not None
    yield chunk(head, {"role": "assistant", "content": ""}, logprobs=[] if wants else None, usage=chat.include_usage)
    for piece in pieces:
        if piece.finish_reason is not None:
            yield chunk(head, {}, finish_reason=piece.finish_reason, usage=chat.include_usage)
            if chat.include_usage:
                yield {**head, "object": "chat.completion.chunk", "choices": [], "usage": piece.usage}
            return
        yield chunk(head, {"content": piece.text}, logprobs=piece.logprobs if wants else None, usage=chat.include_usage)


def event(payload: object) -> bytes:
    # ASCII only: a generated U+2028, U+0085 or U+001C is a line break to readers that split lines as Python's
    # str.splitlines does, which would cut the event's JSON in two.
    return b"data: " + json.dumps(payload).encode("ascii") + b"\n\n"


DONE = b"data: [DONE]\n\n"


class EventStream:
    """A streamed answer's body, holding the model until it ends or is closed: the WSGI server closes it when
    the client goes away (its next write fails), which stops generation and lets the next request in."""

    def __init__(self, events: Generator[bytes, None, None], release: Callable[[], None]) -> None:
        self._events = events
        self._release: Callable[[], None] | None = release

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> bytes:
        try:
            return next(self._events)
        except BaseException:  # the end, or a failure: either way the model is free now
            self.close()
            raise

    def close(self) -> None:
        try:
            self._events.close()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


def events(chat: ChatRequest, pieces: Iterator[Piece], model_name: str) -> Generator[bytes, None, None]:
    """Server-sent events: ``data: {chunk}`` each, ``data: [DONE]`` at the end; an error once the answer has
    started (the time limit) is a last ``data: {"error": ...}`` event in OpenAI's shape."""
    try:
        for body in chunks(chat, pieces, model_name):
            yield event(body)
    except AdapterError as exc:
        yield event(openai_error(exc)[0])
        return
    finally:
        close = getattr(pieces, "close", None)  # the engine's generator: stops generation
        if close is not None:
            close()
    yield DONE

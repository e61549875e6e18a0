"""Chat completions on the decision model: the conversation's tokens, the completion's arguments and the
answer in the OpenAI shape. The engine runs the completion between them (``Engine.chat``).

Message contents are tokenized as plain text, as a decision's caller text is: a message cannot open a
turn of another role by writing its control tokens.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

import numpy as np
import numpy.typing as npt

from .caller_errors import InvalidValue, PromptTooLong
from .prompt import ChatTemplate, TemplateError
from .questions import ChatRequest

if TYPE_CHECKING:
    from llama_cpp import Llama

Tokenize = Callable[[str, tuple[tuple[int, int], ...]], list[int]]  # text and the caller's spans in it -> tokens


class TopLogprob(TypedDict):
    token: str
    logprob: float
    bytes: list[int]


class TokenLogprob(TopLogprob):
    """OpenAI's logprobs entry of one sampled token."""

    top_logprobs: list[TopLogprob]


class Usage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class SamplingArgs(TypedDict):
    """The sampling arguments of llama-cpp-python's ``Llama.generate``."""

    temp: float
    top_p: float
    top_k: int
    min_p: float
    typical_p: float
    repeat_penalty: float
    frequency_penalty: float
    presence_penalty: float


def conversation_tokens(
    request: ChatRequest, template: ChatTemplate, tokenize: Tokenize, control_re: re.Pattern[str] | None, n_ctx: int
) -> list[int]:
    """The rendered conversation's tokens; a 422 naming the field when it cannot be kept as sent."""
    messages = list(request.messages)
    try:
        text, spans = template.render_with_spans(messages)
    except TemplateError as exc:
        raise InvalidValue(f"the model's chat template refused the conversation: {exc}", "messages") from None
    if spans is None:  # the template rewrites contents: control text in them cannot be told apart
        for i, message in enumerate(messages):
            if control_re and control_re.search(message["content"]):
                raise InvalidValue(
                    "this model's chat template rewrites message contents, so control-token "
                    "text in them cannot be kept as plain text; remove it",
                    f"messages[{i}].content",
                )
    tokens = tokenize(text, spans or ())
    if len(tokens) >= n_ctx:
        raise PromptTooLong(
            f"the conversation is {len(tokens)} tokens but the context holds {n_ctx}; "
            "shorten it (it is never truncated)",
            "messages",
        )
    return tokens


def seed_of(request: ChatRequest) -> int:
    # llama-cpp-python keeps a seed it was given for later calls: give every request its own, so an
    # unseeded request never samples from the previous caller's seed.
    return request.seed if request.seed is not None else secrets.randbits(31)


def sampling_kwargs(request: ChatRequest) -> SamplingArgs:
    """The arguments of llama-cpp-python's ``generate`` (its ``create_completion`` defaults otherwise)."""
    return {
        "temp": request.temperature,
        "top_p": request.top_p,
        "top_k": 40,
        "min_p": 0.05,
        "typical_p": 1.0,
        "repeat_penalty": 1.0,
        "frequency_penalty": request.frequency_penalty,
        "presence_penalty": request.presence_penalty,
    }


def free_sampler(llm: Llama) -> None:
    """Close the sampler chain the last completion left behind."""
    # llama-cpp-python keeps it in the private ``_sampler``, inside a reference cycle that only a full
    # garbage collection breaks, holding llama.cpp memory per chain: a worker's memory would grow with
    # every chat until Python happened to collect. No public call frees it.
    sampler, llm._sampler = llm._sampler, None
    if sampler is not None:
        sampler.close()


def decoded(data: bytes) -> str:
    """The text of ``data`` up to a multi-byte character cut at its end (the next token completes it)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data":
            return data[: exc.start].decode("utf-8", errors="replace")
        return data.decode("utf-8", errors="replace")


def held_back(text: str, stops: tuple[str, ...]) -> int:
    """How many characters at the end of ``text`` could be the start of a stop sequence."""
    longest = 0
    for stop in stops:
        for n in range(min(len(stop) - 1, len(text)), longest, -1):
            if text.endswith(stop[:n]):
                longest = n
                break
    return longest


def token_logprobs(
    logits: npt.NDArray[np.float32], token: int, top: int, text_of: Callable[[int], str]
) -> TokenLogprob:
    """OpenAI's logprobs entry for ``token`` sampled after ``logits``, with its ``top`` most likely rivals."""
    values = logits.astype(np.float64)
    peak = values.max()
    logprobs = values - (peak + np.log(np.exp(values - peak).sum()))

    def entry(t: int) -> TopLogprob:
        text = text_of(t)
        return {"token": text, "logprob": float(logprobs[t]), "bytes": list(text.encode("utf-8"))}

    best: list[TopLogprob] = []
    if top:
        candidates = np.argpartition(-logprobs, top)[:top]
        best = [entry(int(t)) for t in sorted(candidates, key=lambda t: (-logprobs[t], t))]
    return {**entry(token), "top_logprobs": best}


@dataclass
class Piece:
    """A stretch of the completion: its new text and tokens' logprobs, or how it ended (last piece)."""

    text: str = ""
    logprobs: list[TokenLogprob] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None


def generate(
    llm: Llama,
    request: ChatRequest,
    prompt: list[int],
    *,
    is_end: Callable[[int], bool],
    last_logits: Callable[[], npt.NDArray[np.float32]],
    text_of: Callable[[int], str],
) -> Generator[Piece, None, None]:
    """The completion as it is sampled, token by token: each piece carries text no stop sequence can
    still claim; the last one says why it ended and the usage. Closing the iterator stops sampling."""
    llm.set_seed(seed_of(request))
    made: list[int] = []
    shown = 0  # characters of the completion already given out
    pending: list[TokenLogprob] = []
    finish = "length"
    text = ""
    try:
        for token in llm.generate(prompt, **sampling_kwargs(request)):
            if is_end(token):
                finish = "stop"
                break
            if request.top_logprobs is not None:
                pending.append(token_logprobs(last_logits(), token, request.top_logprobs, text_of))
            made.append(token)
            text = decoded(llm.detokenize(made, prev_tokens=prompt))
            cut = min((text.find(s) for s in request.stop if s in text), default=-1)
            if cut >= 0:
                text, finish = text[:cut], "stop"
                break
            end = len(text) - held_back(text, request.stop)
            if len(made) >= request.max_tokens:
                break
            if end > shown:
                yield Piece(text[shown:end], pending)
                shown, pending = end, []
    finally:
        free_sampler(llm)
    usage: Usage = {
        "prompt_tokens": len(prompt),
        "completion_tokens": len(made),
        "total_tokens": len(prompt) + len(made),
    }
    if len(text) > shown or pending:
        yield Piece(text[shown:], pending)
    yield Piece(finish_reason=finish, usage=usage)


def completion_id() -> str:
    return "chatcmpl-" + secrets.token_hex(12)


def chat_response(pieces: Iterator[Piece], model_name: str, logprobs: bool) -> dict[str, object]:
    """The whole completion as an OpenAI chat completion."""
    text: list[str] = []
    entries: list[TokenLogprob] = []
    last = Piece()
    for piece in pieces:
        text.append(piece.text)
        entries.extend(piece.logprobs)
        last = piece
    return {
        "id": completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model_name,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "".join(text)},
                "logprobs": {"content": entries} if logprobs else None,
                "finish_reason": last.finish_reason,
            }
        ],
        "usage": last.usage,
    }

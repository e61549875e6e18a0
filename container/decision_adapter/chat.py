"""Chat completions on the decision model: the conversation's tokens, the completion's arguments and the
answer in the OpenAI shape. The engine runs the completion between them (``Engine.chat``).

Message contents are tokenized as plain text, as a decision's caller text is: a message cannot open a
turn of another role by writing its control tokens.
"""

from __future__ import annotations

import secrets

from .errors import InvalidValue, PromptTooLong
from .prompt import TemplateError
from .questions import ChatRequest


def conversation_tokens(request: ChatRequest, template, tokenize, control_re, n_ctx: int) -> list[int]:
    """The rendered conversation's tokens; a 422 naming the field when it cannot be kept as sent."""
    messages = list(request.messages)
    try:
        text, spans = template.render_with_spans(messages)
    except TemplateError as exc:
        raise InvalidValue(f"the model's chat template refused the conversation: {exc}", "messages") from None
    if spans is None:  # the template rewrites contents: control text in them cannot be told apart
        for i, message in enumerate(messages):
            if control_re and control_re.search(message["content"]):
                raise InvalidValue("this model's chat template rewrites message contents, so control-token "
                                   "text in them cannot be kept as plain text; remove it",
                                   f"messages[{i}].content")
    tokens = tokenize(text, spans or ())
    if len(tokens) >= n_ctx:
        raise PromptTooLong(
            f"the conversation is {len(tokens)} tokens but the context holds {n_ctx}; "
            "shorten it (it is never truncated)", "messages")
    return tokens


def completion_kwargs(request: ChatRequest, tokens: list[int]) -> dict:
    """The arguments of llama-cpp-python's ``create_completion`` for this request."""
    kwargs = {"prompt": tokens, "max_tokens": request.max_tokens, "temperature": request.temperature,
              "top_p": request.top_p, "stream": False}
    # llama-cpp-python keeps a seed it was given for later calls: give every request its own, so an
    # unseeded request never samples from the previous caller's seed.
    kwargs["seed"] = request.seed if request.seed is not None else secrets.randbits(31)
    if request.stop:
        kwargs["stop"] = list(request.stop)
    return kwargs


def free_sampler(llm) -> None:
    """Close the sampler chain the last completion left behind."""
    # llama-cpp-python keeps it in the private ``_sampler``, inside a reference cycle that only a full
    # garbage collection breaks, holding llama.cpp memory per chain: a worker's memory would grow with
    # every chat until Python happened to collect. No public call frees it.
    sampler, llm._sampler = llm._sampler, None
    if sampler is not None:
        sampler.close()


def chat_response(completion: dict, model_name: str) -> dict:
    """The completion as an OpenAI chat completion."""
    choice = completion["choices"][0]
    return {
        "id": "chat" + completion["id"],
        "object": "chat.completion",
        "created": completion["created"],
        "model": model_name,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": choice["text"]},
                     "logprobs": None, "finish_reason": choice["finish_reason"]}],
        "usage": completion["usage"],
    }

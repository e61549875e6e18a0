"""OpenAI chat-completion answers, described for the OpenAPI document (apis/chat.py builds them as plain
dicts): the completion, a streamed chunk, and the decision a completion carries when one was asked."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from .common import Answer, ReadoutChoice
from .decisions_answers import (
    DecisionsChoiceAnswer,
    DecisionsPredicateAnswer,
    DecisionsRefusalAnswer,
    DecisionsScoreAnswer,
)
from .own_answers import SingleResult


class AssistantMessage(BaseModel):
    role: Literal["assistant"]
    content: str | None
    refusal: str | None = Field(
        None, description="Only where a Decisions question asked through chat was abstained on: why (content null)."
    )


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChoiceLogprobs(BaseModel):
    content: list[TokenLogprob] | None


class ChatChoice(BaseModel):
    index: int = Field(ge=0)
    message: AssistantMessage
    logprobs: ChoiceLogprobs | None = None
    finish_reason: str | None


class ChatUsage(Answer):
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    total_tokens: int = Field(ge=0)


class ChatDecisionResult(SingleResult):
    """A decision's result as this project's schema answers it, with the chosen option and the readout named."""

    choice: str = Field(description="The chosen option's id: the likeliest, the first of equals.")
    readout_name: ReadoutChoice = Field(description="The readout that read it: letters or cloze.")


class ChatCompletion(Answer):
    """An OpenAI-style chat completion (one choice); 'model' names the served GGUF file, whatever the request
    named."""

    model_config = ConfigDict(title="Chat completion answer")
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice] = Field(min_length=1)
    usage: ChatUsage
    decision: (
        ChatDecisionResult
        | Annotated[
            Union[DecisionsPredicateAnswer, DecisionsChoiceAnswer, DecisionsScoreAnswer, DecisionsRefusalAnswer],
            Field(discriminator="type"),
        ]
        | None
    ) = Field(
        None,
        description="Only when the request asked a decision: its result as POST /invocations answers it, or, for "
        "an OpenAI Decisions question, the answer POST /v1/decisions gives it.",
    )


class ChunkDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChunkChoice(BaseModel):
    index: int = Field(ge=0)
    delta: ChunkDelta
    logprobs: ChoiceLogprobs | None = None
    finish_reason: str | None


class ChatCompletionChunk(Answer):
    """One server-sent event of a streamed chat (``data: {chunk}``); the stream ends with ``data: [DONE]``."""

    model_config = ConfigDict(title="Chat completion chunk")
    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: ChatUsage | None = Field(
        None, description="Only on the last chunk, with stream_options.include_usage (its choices are empty)."
    )

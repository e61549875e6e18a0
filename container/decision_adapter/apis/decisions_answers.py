"""The OpenAI Decisions API's answers and errors, described for the OpenAPI document (apis/decisions.py
writes them as plain dicts)."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from .common import Answer, ReadoutChoice

Probability = Annotated[float, Field(ge=0, le=1)]
ReadoutUsed = Annotated[
    ReadoutChoice,
    Field(description="This adapter's extension: the readout that read the answer (DECISION_ADAPTER_READOUT)."),
]
SET_DESCRIPTION = (
    "This adapter's extension, only where a kept calibration threshold q applied (as the own "
    "schema's prediction_set): the {what} whose probability is at least 1 - q, in request order."
)


class DecisionsPredicateAnswer(BaseModel):
    model_config = ConfigDict(title="predicate answer")
    type: Literal["predicate"]
    name: str | None
    probability: Probability = Field(description="The probability that the predicate holds (yes).")
    x_readout: ReadoutUsed
    x_prediction_set: list[bool] | None = Field(
        None, description=SET_DESCRIPTION.format(what="answers (true: yes, false: no)")
    )


class DecisionsChoiceProbability(BaseModel):
    value: str | bool
    probability: Probability


class DecisionsChoiceAnswer(BaseModel):
    model_config = ConfigDict(title="choice answer")
    type: Literal["choice"]
    name: str | None
    choice: str | bool = Field(description="The most probable value.")
    confidence: Probability
    probabilities: list[DecisionsChoiceProbability] = Field(description="One per choice, in the order sent.")
    x_readout: ReadoutUsed
    x_prediction_set: list[str | bool] | None = Field(None, description=SET_DESCRIPTION.format(what="values"))


class DecisionsScoreProbability(BaseModel):
    value: int = Field(ge=0, description="The level's index, 0 first.")
    label: str
    probability: Probability


class DecisionsScoreAnswer(BaseModel):
    model_config = ConfigDict(title="score answer")
    type: Literal["score"]
    name: str | None
    score: float = Field(ge=0, description="The expected level index: the sum of value * probability.")
    confidence: Probability
    probabilities: list[DecisionsScoreProbability] = Field(description="One per level, in order.")
    x_readout: ReadoutUsed
    x_prediction_set: list[Annotated[int, Field(ge=0)]] | None = Field(
        None, description=SET_DESCRIPTION.format(what="levels' values")
    )


class DecisionsRefusalAnswer(BaseModel):
    model_config = ConfigDict(title="refusal answer")
    type: Literal["refusal"]
    name: str | None
    refusal: str | None = Field(
        None,
        description="Why: the answer labels held less of the next-token probability "
        "than DECISION_ADAPTER_MIN_ANSWER_MASS.",
    )
    x_readout: ReadoutUsed


class InputTokensDetails(BaseModel):
    cached_tokens: int = Field(ge=0, description="Input tokens an earlier question of this request had evaluated.")
    cache_write_tokens: int = Field(ge=0)


class OutputTokensDetails(BaseModel):
    reasoning_tokens: int = Field(ge=0)


class DecisionsUsage(BaseModel):
    input_tokens: int = Field(ge=0)
    input_tokens_details: InputTokensDetails
    output_tokens: int = Field(ge=0)
    output_tokens_details: OutputTokensDetails
    total_tokens: int = Field(ge=0)


class DecisionsResponse(Answer):
    model_config = ConfigDict(title="OpenAI Decisions answer")
    model: str = Field(description="The served model's name (the GGUF file name without .gguf).")
    answers: list[
        Annotated[
            Union[DecisionsPredicateAnswer, DecisionsChoiceAnswer, DecisionsScoreAnswer, DecisionsRefusalAnswer],
            Field(discriminator="type"),
        ]
    ] = Field(min_length=1, description="One answer per question, in question order.")
    usage: DecisionsUsage


class OpenAIErrorDetail(BaseModel):
    message: str
    type: Literal["invalid_request_error", "server_error"]
    param: str | None
    code: str | None


class OpenAIError(BaseModel):
    """OpenAI's error shape."""

    error: OpenAIErrorDetail

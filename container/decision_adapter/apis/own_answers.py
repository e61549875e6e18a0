"""This project's decision schema's answers and errors, described for the OpenAPI document (apis/own.py
writes them as plain dicts)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from .answers import CalibrationUsed, ModelInfo, OrderSensitivity, Timing
from .common import Answer, NormalizationChoice, OtherReadoutChoice


class TopToken(BaseModel):
    id: int
    text: str


class DecisionResult(Answer):
    """One answer: a probability per option id, in the order the options were sent; they sum to 1."""

    id: str = Field(description="The decision's id, or the question's id in a batch.")
    option_ids: list[str]
    probabilities: list[Annotated[float, Field(ge=0, le=1)]]
    option_logits: list[float] | None
    answer_token_ids: list[int]
    answer_slots: list[str] = Field(description="The letter each option was shown under (A, B, ...).")
    input_tokens: int = Field(ge=1)
    allowed_token_mass: float = Field(
        ge=0, le=1, description="The share of the whole vocabulary's probability that fell on the answer slots."
    )
    top_vocab_token: TopToken | None = None
    temperature: float = Field(
        description="The temperature in force: the request's, the calibration profile's, or 1 (see calibration.source)."
    )
    prompt_sha256: str = Field(pattern="^[0-9a-f]{64}$")
    prompt_version: str
    readout: str
    question_eval_ms: float | None = None
    order: Literal["as_given", "prior", "rotations"] | None = Field(None, description="The order mode used.")
    order_sensitivity: OrderSensitivity | None = Field(
        None, description="With rotations: how much the presentations disagree."
    )
    prior: list[Annotated[float, Field(ge=0, le=1)]] | None = Field(
        None, description="With prior: the content-free prior per position that the readout was divided by."
    )
    calibration: CalibrationUsed | None = None
    abstained: bool | None = Field(
        None,
        description="Whether allowed_token_mass fell below min_answer_mass (the probabilities are given all the same).",
    )
    min_answer_mass: float | None = Field(None, ge=0, le=1, description="The abstention threshold in force.")
    readout_name: OtherReadoutChoice | None = Field(None, description="cloze answers only: the readout's name.")
    normalize: NormalizationChoice | None = Field(None, description="cloze: the normalisation used.")
    option_tokens: list[int] | None = Field(None, description="cloze: the tokens of each option's text.")
    prediction_set: list[str] | None = Field(
        None,
        description="The option ids (in request order) of the split-conformal prediction set: every option "
        "whose probability is at least 1 - the profile's threshold, which covered the labelled "
        "answer in at least 1 - alpha of the held-out tasks (calibration.json). Present only "
        "when a kept threshold applies: the file's readout and order mode, no request "
        "temperature. One id: a clear answer; more (or none): one for review.",
    )


class SingleResult(DecisionResult):
    timing: Timing
    model: ModelInfo


class DecisionResponse(Answer):
    model_config = ConfigDict(title="Decision answer")
    result: SingleResult


class BatchResponse(Answer):
    model_config = ConfigDict(title="Shared-state batch answer")
    id: str
    results: list[DecisionResult] = Field(min_length=1, description="One result per question, in request order.")
    timing: Timing
    model: ModelInfo


class ErrorDetail(BaseModel):
    code: str = Field(description="invalid_type, invalid_value, prompt_too_long, busy, ...")
    message: str = Field(description="What went wrong and what to send instead.")
    field: str | None = Field(description="The request field at fault (e.g. options[2].id), or null.")


class Error(Answer):
    """The error shape of the project's own routes and bodies."""

    error: ErrorDetail
    retryable: bool | None = None

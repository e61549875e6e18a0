"""Jev System One's answers and errors as pydantic models: what ``GET /openapi.json`` describes for
``/v1/systemone`` and ``/v1/models`` (apis/systemone.py builds the answers themselves)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from .common import Answer
from .answers import CalibrationUsed, ModelInfo, OrderSensitivity, Timing


class _Extras(Answer):
    x_readout: str | None = None
    x_forward_passes: int | None = Field(None, ge=1)
    x_input_tokens: int | None = Field(None, ge=1)
    x_allowed_token_mass: float | None = Field(None, ge=0, le=1)
    x_prompt_sha256: str | None = Field(None, pattern="^[0-9a-f]{64}$")
    x_order: Literal["as_given", "prior", "rotations"] | None = None
    x_order_sensitivity: OrderSensitivity | None = None
    x_prior: list[Annotated[float, Field(ge=0, le=1)]] | None = None
    x_calibration: CalibrationUsed | None = None
    x_abstained: bool | None = Field(None, description="Whether the answer labels held less of the next-token "
                                                       "probability than x_min_answer_mass.")
    x_min_answer_mass: float | None = Field(None, ge=0, le=1)
    x_normalize: Literal["pmi", "sum", "mean"] | None = Field(None, description="cloze: the normalisation used.")
    x_option_tokens: list[int] | None = Field(None, description="cloze: the tokens of each option's text.")
    x_prediction_set: list[str] | None = Field(
        None, description="The criteria names (in request order) of the split-conformal prediction set, present "
                          "when a kept calibration threshold applies (see the own schema's prediction_set).")


Probability = Annotated[float, Field(ge=0, le=1)]


class NoulAnswer(_Extras):
    model_config = ConfigDict(title="noul answer")
    type: Literal["noul"]
    noul: Probability = Field(description="The probability of yes.")


class ChoiceAnswer(_Extras):
    model_config = ConfigDict(title="choice answer")
    type: Literal["choice"]
    choice: str = Field(description="The most probable option name.")
    probabilities: dict[str, Probability] = Field(min_length=2, description="A probability per option name.")
    confidence: Probability


class ScoreAnswer(_Extras):
    model_config = ConfigDict(title="score answer")
    type: Literal["score"]
    score: float = Field(ge=0, description="The expected level: the sum of i * p_i.")
    legend: dict[str, Any] = Field(description="Each level's description, keyed 0..n-1.")
    probabilities: dict[str, Probability] = Field(min_length=2, description="A probability per level, keyed 0..n-1.")
    confidence: Probability


JevAnswer = Annotated[Union[NoulAnswer, ChoiceAnswer, ScoreAnswer], Field(discriminator="type")]


class JevUsage(BaseModel):
    input_tokens: int = Field(ge=0)
    output_tokens: Literal[0] = Field(description="Nothing is generated.")


class SystemOneResponse(Answer):
    model_config = ConfigDict(title="Jev System One answer")
    model: str = Field(description="The served model's name (the GGUF file name without .gguf).")
    answers: dict[str, JevAnswer] = Field(min_length=1, description="One answer per question id.")
    usage: JevUsage
    x_prompt_version: str | None = None
    x_readout_methods: dict[str, str] | None = None
    x_timing: Timing | None = None
    x_model: ModelInfo | None = None


class ListedModel(BaseModel):
    name: str
    description: str
    release_date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")


class ModelList(BaseModel):
    models: list[ListedModel] = Field(min_length=1)


class JevProblem(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class JevValidationErrorBody(BaseModel):
    """Jev's list of validation problems."""

    model_config = ConfigDict(title="JevValidationError")
    detail: list[JevProblem] = Field(min_length=1)


class JevErrorDetail(BaseModel):
    error_type: str
    message: str


class JevError(BaseModel):
    """Jev's error shape for everything but validation."""

    detail: JevErrorDetail

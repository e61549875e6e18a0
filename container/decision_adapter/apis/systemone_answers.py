"""Jev System One's answers and errors as pydantic models: what ``GET /openapi.json`` describes for
``/v1/systemone`` and ``/v1/models`` (apis/systemone.py builds the answers themselves)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from .answers import CalibrationUsed, ModelInfo, OrderSensitivity, Timing
from .common import Answer, NormalizationChoice


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
    x_abstained: bool | None = Field(
        None, description="Whether the answer labels held less of the next-token probability than x_min_answer_mass."
    )
    x_min_answer_mass: float | None = Field(None, ge=0, le=1)
    x_normalize: NormalizationChoice | None = Field(None, description="cloze: the normalisation used.")
    x_option_tokens: list[int] | None = Field(None, description="cloze: the tokens of each option's text.")
    x_prediction_set: list[str] | None = Field(
        None,
        description="The criteria names (in request order) of the split-conformal prediction set, present "
        "when a kept calibration threshold applies (see the own schema's prediction_set).",
    )


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


class MultiLabelAnswer(Answer):
    model_config = ConfigDict(title="multi_label answer")
    type: Literal["multi_label"]
    scores: dict[str, Probability] = Field(min_length=1, description="P(yes) per label, each read on its own.")
    threshold: Probability = Field(description="The question's threshold (0.7 unless it set one).")
    selected: list[str] = Field(description="The labels whose score is at or above the threshold, in label order.")
    abstained: list[str] = Field(description="The labels whose read abstained (x_min_answer_mass).")
    x_labels: list[_Extras] | None = Field(None, description="Each label's read, in label order.")


JevAnswer = Annotated[Union[NoulAnswer, ChoiceAnswer, ScoreAnswer, MultiLabelAnswer], Field(discriminator="type")]


Sha256 = Annotated[str, Field(pattern="^[0-9a-f]{64}$")]


class Audit(BaseModel):
    """What produced the answers, enough to replay them; the lists follow question order."""

    model_hash: Sha256 = Field(description="The GGUF's sha256.")
    adapter_hash: str | None = None
    calibration_version: str = Field(description="The sha256 of the calibration.json in force, or 'none'.")
    prompt_template_sha256: list[Sha256] = Field(
        description="Per question, the sha256 of its rendered prompt (multi_label: of its labels' prompt hashes)."
    )
    allowed_token_set_hash: list[Sha256] = Field(
        description="Per question, the sha256 of the JSON list of answer-token ids its readout read."
    )
    input_tokens: list[Annotated[int, Field(ge=0)]] = Field(description="Per question, the prompt tokens read.")
    backend: str = Field(description="'llama.cpp cpu' or 'llama.cpp gpu'.")
    build: str = Field(description="The llama-cpp-python version the adapter runs.")
    precision: str = Field(description="The GGUF's quantization.")


class JevUsage(BaseModel):
    input_tokens: int = Field(ge=0)
    output_tokens: Literal[0] = Field(description="Nothing is generated.")


class SystemOneResponse(Answer):
    model_config = ConfigDict(title="Jev System One answer")
    model: str = Field(description="The served model's name (the GGUF file name without .gguf).")
    answers: dict[str, JevAnswer] = Field(min_length=1, description="One answer per question id.")
    usage: JevUsage
    audit: Audit = Field(
        description="The one field beside Jev's without the x_ prefix, deliberately: avrik-sdk's "
        "Decision requires it under this name."
    )
    x_request_id: str | None = Field(
        None, description="The request's id, as in the X-Request-Id header (the other APIs' request_id)."
    )
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

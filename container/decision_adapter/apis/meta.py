"""What ``/ping`` and ``/status`` answer (served by app.py), and OpenAI's half of ``/v1/models`` (apis/systemone.py
serves it), described for the OpenAPI document."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class StartupProbe(BaseModel):
    """The decision the worker scored at start-up before reporting ready."""

    input_tokens: int
    options: int
    seconds: float
    prompt_tokens_per_s: float


class PingReady(BaseModel):
    status: Literal["ready"]
    model: str | None = Field(None, description="The served GGUF file (to a caller holding the key).")
    extra_buffer_types: bool | None = Field(
        None, description="Whether llama.cpp's extra buffer types (weight repacking, AMX kernels) are in use."
    )
    startup_probe: StartupProbe | None = None
    busy: bool | None = Field(None, description="Whether a request holds the model right now.")
    waiting: int | None = Field(None, ge=0, description="Requests waiting for the model.")
    in_flight: int | None = Field(None, ge=0, description="Requests being evaluated now, one per context.")
    lanes: int | None = Field(
        None,
        ge=1,
        description="Requests the model evaluates at once: its contexts (SM_LLAMA_CPP_PARALLEL, as many as fit).",
    )
    order: str | None = Field(None, description="The default order mode (DECISION_ADAPTER_ORDER).")
    order_priors: dict[str, list[float]] | None = Field(
        None, description="Content-free priors measured so far, by option count (the decision prompt)."
    )
    order_priors_jev: dict[str, list[float]] | None = Field(None, description="The same for the Jev prompt.")
    calibration: dict[str, Any] | None = Field(None, description="calibration.json in use, or null.")


class PingLoading(BaseModel):
    status: Literal["loading"]


class Status(BaseModel):
    """What runs here and whether a request holds the model."""

    status: Literal["ready"]
    model: str = Field(description="The served GGUF file.")
    extra_buffer_types: bool = Field(
        description="Whether llama.cpp's extra buffer types (weight repacking, AMX "
        "kernels) are in use (DECISION_ADAPTER_EXTRA_BUFFERS)."
    )
    startup_probe: StartupProbe
    busy: bool = Field(description="Whether a request holds the model right now.")
    waiting: int = Field(ge=0, description="Requests waiting for the model.")
    in_flight: int = Field(ge=0, description="Requests being evaluated now, one per context.")
    lanes: int = Field(
        ge=1,
        description="Requests the model evaluates at once: its contexts (SM_LLAMA_CPP_PARALLEL, "
        "as many as fit in DECISION_ADAPTER_MAX_KV_MIB).",
    )
    order: str | None = Field(None, description="The default order mode (DECISION_ADAPTER_ORDER).")
    order_priors: dict[str, list[float]] | None = None
    order_priors_jev: dict[str, list[float]] | None = None
    calibration: dict[str, Any] | None = None


class OpenAIModel(BaseModel):
    id: str = Field(description="A name the endpoint answers to: the served model's, or the jev-latest alias.")
    object: Literal["model"]
    created: int = Field(description="Unix time of the model's release date (GGUF metadata, else packaging).")
    owned_by: str = Field(description="The GGUF's general.organization, else 'decision-adapter'.")


class OpenAIModelList(BaseModel):
    """OpenAI's list of models, which GET /v1/models answers beside Jev's 'models'."""

    object: Literal["list"]
    data: list[OpenAIModel] = Field(min_length=1)

"""The answer models the decision APIs share (own, the sample's, System One's ``x_`` fields): how an order
mode, a calibration, the timing and the served model are described, for the OpenAPI document (the
answers themselves are built as plain dicts)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from .common import Answer, ReadoutChoice


class OrderSensitivity(BaseModel):
    presentations: int = Field(
        ge=1,
        description="The option orders averaged: the cyclic rotations of the options "
        "as given and reversed (2n; 2 for two options; past "
        "DECISION_ADAPTER_MAX_ROTATIONS options, that many rotations "
        "each way).",
    )
    of: int = Field(ge=2, description="The number of options.")
    max_spread: float = Field(
        ge=0,
        le=1,
        description="The largest difference, over options, between an option's "
        "highest and lowest probability across the presentations.",
    )
    top_changes: bool = Field(description="Whether the most probable option differs between presentations.")


class CalibrationUsed(BaseModel):
    profile: str | None = Field(description="The calibration profile applied (<question_type>/<band>), or null.")
    temperature: float
    source: Literal["calibration", "request", "none"]


class Timing(Answer):
    """Server-side timings in milliseconds, and counts of the tokens evaluated."""

    queue_wait_ms: float = Field(ge=0, description="Time spent waiting for the model's one context.")
    tokenize_ms: float | None = Field(None, ge=0)
    prefix_eval_ms: float | None = Field(None, ge=0)
    evaluate_ms: float | None = Field(None, ge=0)
    total_ms: float = Field(ge=0)
    shared_prefix_tokens: int | None = Field(None, ge=0)
    input_tokens: int | None = Field(None, ge=0)
    distinct_prompts: int | None = Field(None, ge=1)


class ModelInfo(Answer):
    """The model this answer came from, as pinned in the model package."""

    file: str
    sha256: str = Field(pattern="^[0-9a-f]{64}$")
    size_bytes: int = Field(ge=0)
    source_repo: str | None = None
    source_revision: str | None = None
    manifest_verified: bool
    architecture: str | None = None
    name: str | None = None
    quantization: str | None = None
    context_size: int = Field(ge=1)
    gpu_layers_requested: int | None = None
    gpu_layers_offloaded: int | None = Field(None, ge=0)
    gpu_offload_supported: bool | None = None
    threads: int | None = None
    recurrent_or_hybrid: bool | None = None
    prefix_reuse: str | None = None
    runtime: dict[str, Any] | None = None
    parallel: dict[str, Any] | None = Field(
        None,
        description="How many requests are evaluated at once (lanes: one llama.cpp "
        "context each, SM_LLAMA_CPP_PARALLEL), how they share the CPU "
        "threads (shared or fixed, by the start-up check) and each "
        "context's KV memory in MiB.",
    )
    order: str | None = Field(None, description="The server's default order mode (DECISION_ADAPTER_ORDER).")
    readout: ReadoutChoice | None = Field(  # the contract's readouts, in its order
        None, description="The server's default readout (DECISION_ADAPTER_READOUT)."
    )
    order_priors: dict[str, list[float]] | None = Field(
        None, description="The content-free priors measured so far for the decision prompt, by option count."
    )
    order_priors_jev: dict[str, list[float]] | None = Field(
        None, description="The same for the prompt of System One and the OpenAI Decisions API."
    )
    calibration: dict[str, Any] | None = Field(
        None,
        description="calibration.json in use: fit_for, order, readout, alpha, "
        "profiles, temperatures, set_thresholds, sha256; null when "
        "none.",
    )

"""The start-up check of how prompts are cut into llama.cpp calls, and what it settles.

Every reuse of evaluated cells (the held head, a request's state shared by its questions, the opt-in
cross-request reuse and state cache, ``restore`` mode) and flash attention's 64-token floor (splits.py) rest on
one property of the llama.cpp build that runs: a token gets the same logits however its prompt was cut into
calls. It holds bit for bit for this project's CPU build, but it belongs to the kernels a build picks for a call
of a given size (a GPU's, a repacked model's), so ``Engine.prove`` measures it (``check_splits``: the start of the
start-up prompt whole against it cut as the engine cuts prompts, in the answer letters' probabilities) and
settles what is served:

* flash attention asked for and the check fails: ``auto`` leaves it off (a new context on the loaded model) and
  checks again, ``on`` stops the start-up; it is never served where a memory cannot be cut back (hybrid or
  recurrent models, ``restore``) or the batch cannot hold the floor;
* the check fails without flash attention: ``DECISION_ADAPTER_PREFIX_REUSE=auto`` turns reuse off, so every prompt
  is evaluated whole from its first token, in the same calls whatever else is asked; ``trim`` and ``restore``
  stop the start-up.

Here as functions of the context they settle (llama_context.py) and the model whose start-up prompt they cut.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from . import runtime, splits
from .llama_context import Context
from .model import Model
from .scores import logsumexp
from .seams import EngineError
from .slots import PROBE_QUESTIONS, PROBE_STATE

log = logging.getLogger(__name__)

SPLIT_TOLERANCE = 1e-4  # the answers' tolerance, on each answer letter's probability
# check_splits evaluates the start-up prompt's first tokens: enough for a first call past the flash-attention
# floor, a middle one over it and the shortest last one (each evaluation adds to the start-up)
SPLIT_CHECK_TOKENS = 2 * splits.FLASH_ATTENTION_LEAST + 8


def flash_attention_blocker(context: Context) -> str | None:
    """Why this context cannot serve flash attention whatever the build's kernels do, if it cannot."""
    step = min(context.llm.n_batch, context.llm.context_params.n_ubatch)
    if not context.cuts_back:
        return (
            "a hybrid or recurrent model's memory cannot be cut back (nor does "
            "DECISION_ADAPTER_PREFIX_REUSE=restore cut it) to evaluate a held prompt's last tokens again, so "
            "answers would depend on how a prompt was cut into evaluations"
        )
    if step < 2 * context.least_tokens:
        return (
            f"evaluation calls must hold {2 * context.least_tokens} tokens, but SM_LLAMA_CPP_BATCH_SIZE / "
            f"SM_LLAMA_CPP_UBATCH_SIZE allow {step}"
        )
    return None


def settle_flash_attention(context: Context, unfit: str | None) -> None:
    """Serve flash attention only where an answer cannot depend on how its prompt was cut into calls
    (``unfit`` says why not): otherwise ``on`` stops the start-up, and ``auto`` gives the context flash
    attention off."""
    if unfit is None:
        return
    if context.settings.flash_attn == "on":
        raise EngineError(f"SM_LLAMA_CPP_FLASH_ATTN=on: with flash attention {unfit}; set it to auto or off")
    log.info("SM_LLAMA_CPP_FLASH_ATTN=auto: flash attention left off, as %s", unfit)
    context.replace(flash_attn_type=runtime.FLASH_ATTN_TYPES["off"])
    context.flash_attention = "off"


def check_splits(context: Context, model: Model) -> float:
    """The largest difference in the answer letters' probabilities (the answer's space and tolerance, not the
    last digits of logits no answer reads) between the start of the start-up prompt evaluated whole and cut as
    the context cuts a prompt into calls: a short first call (a held head's end), and the shortest last one
    after held cells (a question after its shared state)."""
    tokens = model.prompt_tokens(model.template.render_decision(PROBE_STATE, PROBE_QUESTIONS[0]))[:SPLIT_CHECK_TOKENS]

    def letters(*cuts: int) -> np.ndarray:
        context.start_afresh()
        for first, end in zip((0, *cuts), (*cuts, len(tokens))):
            context.eval(tokens[first:end])
        logits = context.last_logits().astype(np.float64)[list(model.slot_tokens)]
        return np.exp(logits - logsumexp(logits))

    n = len(tokens)
    worst = float(np.abs(letters(min(context.least_tokens + 1, n - 4), n - splits.PLAIN_LEAST) - letters()).max())
    context.start_afresh()
    return worst


def check_and_settle(context: Context, model: Model, info: dict[str, Any]) -> float:
    """The start-up check of how prompts are cut into calls: with flash attention (which ``auto`` leaves off
    where it fails), then without it (where that fails, ``auto`` turns prefix reuse off). ``info``: the model
    info, which reports what was settled. Returns the last difference measured."""
    worst = _measure(context, model)
    if context.flash_attention != "off" and worst > SPLIT_TOLERANCE:
        settle_flash_attention(
            context, f"{_finding(worst, model)}, so an answer would depend on what else was evaluated with it"
        )
        info["runtime"]["flash_attention"] = context.flash_attention
        worst = _measure(context, model)
    if worst > SPLIT_TOLERANCE:
        _settle_prefix_reuse(
            context,
            f"{_finding(worst, model)}, so an answer would depend on the other questions "
            "of its request and on what the context held before it",
        )
        info["prefix_reuse"] = context.prefix_mode
    return worst


def _measure(context: Context, model: Model) -> float:
    worst = check_splits(context, model)
    log.info(
        "the start-up prompt cut into evaluations differs from it whole by %.3g (flash attention %s)",
        worst,
        context.flash_attention,
    )
    return worst


def _finding(worst: float, model: Model) -> str:
    return (
        f"this llama.cpp build gives answers up to {worst:.3g} apart for the same prompt cut into "
        f"different evaluations ({model.runtime.system_info})"
    )


def _settle_prefix_reuse(context: Context, why: str) -> None:
    """Where this build answers a prompt cut into calls otherwise than whole, evaluate every prompt whole from
    its first token, in the same calls in every request (``auto``); an explicit mode stops the start-up."""
    mode = context.settings.prefix_reuse
    if mode != "auto":
        raise EngineError(f"DECISION_ADAPTER_PREFIX_REUSE={mode}: {why}; set it to auto (or off)")
    log.warning(
        "DECISION_ADAPTER_PREFIX_REUSE=auto: prefix reuse turned off, as %s: every prompt is evaluated "
        "whole, from its first token%s",
        why,
        "; the state cache with it" if context.state_cache else "",
    )
    context.prefix_mode = "off"
    context.state_cache = None
    context.start_afresh()

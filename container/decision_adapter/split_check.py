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

``SplitCheck`` is a base class of ``Engine``, as ``PrefixReuse`` is.
"""

from __future__ import annotations

import logging

import numpy as np

from . import runtime, splits
from .scores import logsumexp
from .slots import PROBE_QUESTIONS, PROBE_STATE, EngineError

log = logging.getLogger(__name__)

SPLIT_TOLERANCE = 1e-4  # the answers' tolerance, on each answer letter's probability
# check_splits evaluates the start-up prompt's first tokens: enough for a first call past the flash-attention
# floor, a middle one over it and the shortest last one (each evaluation adds to the start-up)
SPLIT_CHECK_TOKENS = 2 * splits.FLASH_ATTENTION_LEAST + 8


class SplitCheck:
    """Flash attention's floor, and the start-up check of cut prompts with what it turns off."""

    # Provided by Engine: llm, _llama_cpp, settings, runtime, info, flash_attention, split_check, prefix_mode,
    # state_cache, slot_tokens, template, _cuts_back, _deadline, prompt_tokens, start_afresh, _eval, _last_logits.

    @property
    def least_tokens(self) -> int:
        """The fewest tokens one llama_decode call of a prompt may hold (splits.py); "auto" with no verdict from
        llama.cpp counts as on."""
        return splits.PLAIN_LEAST if self.flash_attention == "off" else splits.FLASH_ATTENTION_LEAST

    def _flash_attention_blocker(self) -> str | None:
        """Why this engine cannot serve flash attention whatever the build's kernels do, if it cannot."""
        step = min(self.llm.n_batch, self.llm.context_params.n_ubatch)
        if not self._cuts_back:
            return ("a hybrid or recurrent model's memory cannot be cut back (nor does "
                    "DECISION_ADAPTER_PREFIX_REUSE=restore cut it) to evaluate a held prompt's last tokens again, so "
                    "answers would depend on how a prompt was cut into evaluations")
        if step < 2 * self.least_tokens:
            return (f"evaluation calls must hold {2 * self.least_tokens} tokens, but SM_LLAMA_CPP_BATCH_SIZE / "
                    f"SM_LLAMA_CPP_UBATCH_SIZE allow {step}")
        return None

    def _settle_flash_attention(self, unfit: str | None) -> None:
        """Serve flash attention only where an answer cannot depend on how its prompt was cut into calls
        (``unfit`` says why not): otherwise ``on`` stops the start-up, and ``auto`` gives the context flash
        attention off."""
        if unfit is None:
            return
        if self.settings.flash_attn == "on":
            raise EngineError(f"SM_LLAMA_CPP_FLASH_ATTN=on: with flash attention {unfit}; set it to auto or off")
        log.info("SM_LLAMA_CPP_FLASH_ATTN=auto: flash attention left off, as %s", unfit)
        runtime.replace_context(self.llm, flash_attn_type=runtime.FLASH_ATTN_TYPES["off"])
        self._deadline.install(self._llama_cpp, self.llm.ctx)
        self.flash_attention = "off"
        self.start_afresh()

    def check_splits(self) -> float:
        """The largest difference in the answer letters' probabilities (the answer's space and tolerance, not the
        last digits of logits no answer reads) between the start of the start-up prompt evaluated whole and cut as
        the engine cuts a prompt into calls: a short first call (a held head's end), and the shortest last one
        after held cells (a question after its shared state)."""
        tokens = self.prompt_tokens(self.template.render_decision(PROBE_STATE, PROBE_QUESTIONS[0]))[:SPLIT_CHECK_TOKENS]

        def letters(*cuts: int) -> np.ndarray:
            self.start_afresh()
            for first, end in zip((0, *cuts), (*cuts, len(tokens))):
                self._eval(tokens[first:end])
            logits = self._last_logits().astype(np.float64)[list(self.slot_tokens)]
            return np.exp(logits - logsumexp(logits))

        n = len(tokens)
        worst = float(np.abs(letters(min(self.least_tokens + 1, n - 4), n - splits.PLAIN_LEAST) - letters()).max())
        self.start_afresh()
        return worst

    def _check_splits(self) -> None:
        """The start-up check of how prompts are cut into calls: with flash attention (which ``auto`` leaves off
        where it fails), then without it (where that fails, ``auto`` turns prefix reuse off)."""
        self._measure_splits()
        if self.flash_attention != "off" and self.split_check > SPLIT_TOLERANCE:
            self._settle_flash_attention(f"{self._split_finding()}, so an answer would depend on what else was "
                                         "evaluated with it")
            self.info["runtime"]["flash_attention"] = self.flash_attention
            self._measure_splits()
        if self.split_check > SPLIT_TOLERANCE:
            self._settle_prefix_reuse()

    def _measure_splits(self) -> None:
        self.split_check = self.check_splits()
        log.info("the start-up prompt cut into evaluations differs from it whole by %.3g (flash attention %s)",
                 self.split_check, self.flash_attention)

    def _split_finding(self) -> str:
        return (f"this llama.cpp build gives answers up to {self.split_check:.3g} apart for the same prompt cut into "
                f"different evaluations ({self.runtime.system_info})")

    def _settle_prefix_reuse(self) -> None:
        """Where this build answers a prompt cut into calls otherwise than whole, evaluate every prompt whole from
        its first token, in the same calls in every request (``auto``); an explicit mode stops the start-up."""
        why = (f"{self._split_finding()}, so an answer would depend on the other questions of its request and on "
               "what the context held before it")
        if self.settings.prefix_reuse != "auto":
            raise EngineError(f"DECISION_ADAPTER_PREFIX_REUSE={self.settings.prefix_reuse}: {why}; set it to auto "
                              "(or off)")
        log.warning("DECISION_ADAPTER_PREFIX_REUSE=auto: prefix reuse turned off, as %s: every prompt is evaluated "
                    "whole, from its first token%s", why, "; the state cache with it" if self.state_cache else "")
        self.prefix_mode = self.info["prefix_reuse"] = "off"
        self.state_cache = None
        self.start_afresh()

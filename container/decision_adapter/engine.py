"""One lane of the model: the shared read-only model, a context of its own, and scoring items evaluated on it.

A decision is one forward pass: the rendered prompt ends where the model would
write its answer, and the logits at that last position, restricted to the
answer-slot tokens (the letters A, B, ...), give one score per option.
Nothing is generated. Beyond 16 options the labels are codes read in two steps.

An engine composes three parts, by how long each lives:

* ``model`` (model.py): the weights, tokenizer, template, answer labels and calibration, loaded once and
  shared read-only by every lane;
* ``context`` (llama_context.py): one llama.cpp context, what it holds (the prefix, the saved heads) and its
  time limit, one per lane;
* ``priors`` (priors.py): the content-free priors of the order mode and the cloze readout, one cache for
  every lane, handed to scoring (each readout measures the priors it needs through the ``Evaluator`` seam).

``score_items`` is the one way scoring items reach a context (scoring.py calls it for a request, a readout
for a prior): it checks each prompt fits, reads identical prompts once, evaluates the
shared prefix once and each prompt from it, and has each item's readout (readout.py) read its logits. What
it returns is raw: order modes, temperatures and calibration are scoring.py's. The engine answers the
seams of seams.py (``Scorer``); nothing below it receives the engine itself.

Start-up (``prove``): the check of prompts cut into calls (split_check.py), one decision through the real
path, and with ``DECISION_ADAPTER_ORDER=prior`` the priors of 2 to 16 options. More requests at once take
other lanes on the same model (``twin``), one each (scheduler.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from decision_contract.calibration import Calibration
from decision_contract.names import PRIOR

from . import chat_completion, readouts, runtime, slots, split_check
from .caller_errors import InvalidValue, PromptTooLong
from .deadline import Deadline
from .llama_context import Context
from .model import Model
from .model_files import ModelFiles
from .prefix_cache import shared_prefix
from .priors import Priors
from .prompt import DIGITS
from .questions import ChatRequest, Loc, RenderedPrompt, ScoringItem
from .readouts import READOUTS
from .scores import Reading, logsumexp
from .seams import EngineError, Timing
from .settings import Settings
from .slots import PROBE_QUESTIONS, PROBE_STATE
from .state_cache import StateCache

log = logging.getLogger(__name__)


class Engine:
    """A lane: the model, its own context, the shared priors, and the settings and calibration in force."""

    def __init__(self, settings: Settings, files: ModelFiles, rt: runtime.Runtime | None = None):
        """Load the model and make its first lane (its context settled: flash attention where it is fit)."""
        model = Model(settings, files, rt)
        state_cache = StateCache(settings.state_cache_mib * 2**20) if settings.state_cache_mib else None
        context = Context(
            model.llama_cpp,
            model.llm,
            settings,
            recurrent=model.recurrent,
            flash_attention=model.flash_attention,
            threads=model.loaded_threads,
            state_cache=state_cache,
        )
        self._compose(model, context, Priors(settings.cloze_prior_cache, report=model.report_prior), 0)
        log.info("flash attention: %s (SM_LLAMA_CPP_FLASH_ATTN=%s)", context.flash_attention, settings.flash_attn)
        log.info(
            "loaded %s in %.2f s; llama.cpp offloaded %d/%d layers to GPU; prefix reuse: %s",
            files.gguf.name,
            model.load_seconds,
            model.offloaded_layers,
            model.offloadable_layers,
            context.prefix_mode,
        )
        if settings.cross_request_reuse:
            log.warning(
                "DECISION_ADAPTER_CROSS_REQUEST_REUSE=on: a request reuses what the previous one sent, so "
                "its timing tells a caller whether it guessed the previous caller's state; serve one "
                "tenant only"
            )
        if context.flash_attention != "off":
            split_check.settle_flash_attention(context, split_check.flash_attention_blocker(context))
        model.info.update(model.describe(context.prefix_mode, context.flash_attention))

    def _compose(self, model: Model, context: Context, priors: Priors, lane: int) -> None:
        self.model = model
        self.context = context
        self.priors = priors
        self.lane = lane  # which of the model's contexts this is
        self.settings: Settings = model.settings
        self.calibration: Calibration | None = model.calibration
        self.split_check: float | None = None  # the start-up check's finding (prove; none with prefix reuse off)
        self.startup_probe: dict[str, Any] | None = None

    def twin(self, lane: int) -> Engine:
        """Another lane on this engine's model, for one more request at a time (scheduler.py): the same model
        and priors, a context of its own with nothing held. What it answers depends only on the model and the
        request, as on this one: the scheduler proves that at start-up."""
        twin = Engine.__new__(Engine)
        twin._compose(self.model, self.context.another(self.model.loaded_threads), self.priors, lane)
        twin.settings, twin.calibration = self.settings, self.calibration
        twin.split_check, twin.startup_probe = self.split_check, self.startup_probe
        return twin

    @property
    def info(self) -> dict[str, Any]:
        """Model info: what every answer reports of the model served (shared by the lanes)."""
        return self.model.info

    @property
    def llm(self) -> Any:
        """This lane's ``Llama`` (its context on the model's weights)."""
        return self.context.llm

    def time_limit(self, seconds: float | None) -> AbstractContextManager[Deadline]:
        """Context manager: evaluations inside it stop with TimedOut once ``seconds`` have passed."""
        return self.context.time_limit(seconds)

    def start_afresh(self) -> None:
        """Forget what the context holds (its cells, the held prefix), as a fresh server would."""
        self.context.start_afresh()

    # -- the start-up proof ------------------------------------------------------

    def prove(self) -> dict[str, Any]:
        """Score one decision through the real path; the server is ready only after this returned.

        A model can load and still fail on its first forward pass (a CPU kernel that
        crashes, a backend that returns NaN); serving it would turn a failed start into
        failed requests. A crash ends the process here, before ``/ping`` said ready.
        First the check of prompts cut into calls (split_check.py), which may leave flash
        attention or prefix reuse off.
        """
        started = time.perf_counter()
        if self.context.prefix_mode != "off":  # with it off, a prompt is evaluated in the same calls in every request
            self.split_check = split_check.check_and_settle(self.context, self.model, self.info)
        question = PROBE_QUESTIONS[0]
        prompt = self.model.template.render_decision(PROBE_STATE, question)
        readings, timing = self.score_items([ScoringItem(prompt, len(question.options))])
        probabilities = readings[0].scores.probabilities(1.0)
        if not (np.all(np.isfinite(probabilities)) and abs(float(probabilities.sum()) - 1.0) < 1e-6):
            raise EngineError(
                f"the start-up decision returned unusable probabilities {probabilities.tolist()}; "
                f"llama.cpp: {self.model.runtime.system_info}"
            )
        if self.settings.order == PRIOR:
            readouts.readout_letters.measure_startup_priors(self, self.model, self.priors)
        self.start_afresh()  # the probe's prompt is not worth keeping as a cached prefix
        if self.context.state_cache is not None:
            self.context.state_cache.clear()
        self.startup_probe = {
            "input_tokens": readings[0].input_tokens,
            "options": len(question.options),
            "seconds": round(time.perf_counter() - started, 4),
            "prompt_tokens_per_s": round(readings[0].input_tokens / max(timing["evaluate_ms"] / 1000.0, 1e-9), 1),
        }
        self.info["startup_probe"] = self.startup_probe
        log.info(
            "start-up decision scored: %d tokens, %d options, %.3f s",
            self.startup_probe["input_tokens"],
            self.startup_probe["options"],
            self.startup_probe["seconds"],
        )
        return self.startup_probe

    # -- scoring items (the Evaluator seam) ---------------------------------------------

    def score_items(self, items: list[ScoringItem]) -> tuple[list[Reading], Timing]:
        """What each item's readout reads at its prompt's end; every item shares the prefix up to the state.

        The one evaluation path: decisions and Jev questions, letter slots and two-level codes.
        An item's reading depends only on its own prompt: identical prompts are evaluated once,
        and each prompt is evaluated from the same cached prefix whatever else is in the list.
        Returns (one reading per item, timing incl. ``input_tokens``: the tokens the model read,
        shared prefix once, plus the code tokens of two-level readouts).
        """
        t0 = time.perf_counter()
        token_lists = []
        for item in items:
            tokens = self._tokens_that_fit(item.prompt, item.field, loc=item.loc)
            if item.continuations:  # cloze: the longest option follows the prompt; no labels to check
                self._check_fits(
                    item.prompt,
                    tokens,
                    item.field,
                    loc=item.loc,
                    extra=max(len(c) for c in item.continuations),
                    letters=False,
                )
            else:
                coded = item.n_options > len(self.model.slot_tokens)
                self._check_fits(
                    item.prompt, tokens, item.field, loc=item.loc, extra=1 if coded else 0, n_options=item.n_options
                )
            token_lists.append(tokens)
        # An item is its prompt and what its readout reads after it: identical ones are read once.
        unique: dict[tuple[tuple[int, ...], tuple[tuple[int, ...], ...]], int] = {}
        first_item: dict[int, ScoringItem] = {}
        for tokens, item in zip(token_lists, items):
            first_item.setdefault(unique.setdefault((tuple(tokens), item.continuations), len(unique)), item)
        distinct = [list(t) for t, _ in unique]
        prefix = self._prefix_tokens(items[0].prompt, distinct)  # distinct[0] is items[0]'s prompt
        self._check_budget(prefix, distinct, list(first_item.values()))
        t1 = time.perf_counter()

        def visit(index: int, tokens: list[int], logits: np.ndarray, eval_ms: float) -> Reading:
            started = time.perf_counter()
            reading = self.read(first_item[index], tokens, logits)
            return dataclasses.replace(reading, question_eval_ms=eval_ms + (time.perf_counter() - started) * 1000.0)

        computed, timing = self._evaluate(items[0].prompt, prefix, distinct, visit)
        readings = [
            dataclasses.replace(
                computed[unique[(tuple(tokens), item.continuations)]],
                prompt_sha256=hashlib.sha256(item.prompt.text.encode("utf-8")).hexdigest(),
            )
            for item, tokens in zip(items, token_lists)
        ]
        read = len(prefix) + sum(len(t) - len(prefix) + r.appended_tokens for t, r in zip(distinct, computed))
        return readings, {
            "tokenize_ms": (t1 - t0) * 1000.0,
            **timing,
            "input_tokens": read,
            "distinct_prompts": len(distinct),
        }

    def _evaluate(
        self,
        first: RenderedPrompt,
        prefix: tuple[int, ...],
        token_lists: list[list[int]],
        visit: Callable[[int, list[int], np.ndarray, float], Reading],
    ) -> tuple[list[Reading], Timing]:
        """Evaluate the shared prefix once, then each prompt from it; ``visit`` reads each result."""
        context = self.context
        t1 = time.perf_counter()
        prefix_reused = context.enter_prefix(first, prefix, token_lists[0], self.model.prompt_tokens)
        t2 = time.perf_counter()
        held = context.prefix
        assert held is not None  # enter_prefix leaves the context at the prefix
        results = []
        for index, tokens in enumerate(token_lists):
            q_start = time.perf_counter()
            kept, context.first_logits = context.first_logits, None
            if index or not context.holds(tokens):  # trim mode evaluated the first prompt whole
                context.rewind(prefix, held.state)
                context.eval(tokens[len(prefix) :])
                logits = context.last_logits()
            else:
                logits = kept[1] if kept is not None and kept[0] == tuple(tokens) else context.last_logits()
            results.append(visit(index, tokens, logits, (time.perf_counter() - q_start) * 1000.0))
        t3 = time.perf_counter()
        # Whether the cached prefix was reused says whether the previous caller sent the same state: it goes
        # to the log, never into a response.
        log.debug("prefix of %d tokens %s", len(prefix), "reused from the cache" if prefix_reused else "evaluated")
        return results, {
            "prefix_eval_ms": (t2 - t1) * 1000.0,
            "evaluate_ms": (t3 - t1) * 1000.0,
            "shared_prefix_tokens": len(prefix),  # follows from this request's own prompts
        }

    def read(self, item: ScoringItem, tokens: list[int], logits: np.ndarray) -> Reading:
        """The item's readout at its prompt's end; what it evaluates past the prompt starts from the prompt."""
        context = self.context
        checkpoint: list[bytearray | None] = []

        def rewind() -> None:
            if not checkpoint:  # a recurrent memory cannot be cut back: save the sequence after the prompt once
                checkpoint.append(
                    context.save_sequence(partial=True)
                    if context.recurrent or context.prefix_mode == "restore"
                    else None
                )
            context.rewind(tokens, checkpoint[0])

        def logits_after(appended: list[int]) -> np.ndarray:
            rewind()
            context.eval(appended, appended=True)
            return context.last_logits()

        def log_probs_after(continuation: tuple[int, ...]) -> tuple[list[float], int]:
            """(each token's log-probability after the prompt and the tokens before it, but the first's (read
            at the prompt's end), the tokens evaluated): the option's tokens evaluated from the prompt together,
            read at each position. All but the last would do, but never one alone: llama.cpp's CPU kernels
            for a single token can differ from those for several (by up to a logit on one machine of this
            project's kind, not on another), and a prompt is always evaluated as several."""
            if len(continuation) < 2:
                return [], 0
            ahead = continuation if len(continuation) == 2 else continuation[:-1]
            rewind()
            rows = context.eval_reading_each(ahead, appended=True)
            return [float(row[token]) - logsumexp(row) for row, token in zip(rows, continuation[1:])], len(ahead)

        got = READOUTS[item.readout].read(self.model, logits, item, logits_after, log_probs_after)
        if checkpoint and checkpoint[0] is None:  # cut off what was appended (read in calls of its own)
            context.rewind(tokens, None)  # so that no later prompt starts from its cells
        return Reading(
            **vars(got),
            input_tokens=len(tokens),
            top_token=int(np.argmax(logits)),
            option_tokens=tuple(len(c) for c in item.continuations),
        )

    # -- the checks before evaluating -----------------------------------------------------

    def _tokens_that_fit(self, prompt: RenderedPrompt, field: str | None, *, loc: Loc | None = None) -> list[int]:
        """The prompt's tokens, with the cheap checks first: the time limit (checked between prompts, as
        tokenizing runs in Python time the abort callback cannot stop), and a text too long to tokenize."""
        self.context.stop_if_expired()
        self.model.check_length(prompt, field, loc)
        return self.model.prompt_tokens(prompt)

    def _check_fits(
        self,
        prompt: RenderedPrompt,
        tokens: list[int],
        field: str | None,
        *,
        loc: Loc | None = None,
        extra: int = 0,
        n_options: int = 0,
        letters: bool = True,
    ) -> None:
        model, limit = self.model, self.llm.n_ctx()
        if len(tokens) + extra >= limit:
            raise PromptTooLong(
                f"the prompt is {len(tokens)} tokens but the context holds {limit}; shorten the state or "
                "question (prompts are never truncated) or raise SM_LLAMA_CPP_CTX_SIZE",
                field,
                loc=loc,
            )
        if letters and tuple(tokens[-len(model.tail) :]) != model.tail:
            # The request's text merged with the template's tail; check the slots directly, on the prompt's
            # last characters only (an answer letter can only merge with what comes just before it), so a
            # long state is not tokenized again for each of up to 16 letters and 260 codes.
            tail = slots.tail_of(prompt)
            tail_tokens = model.prompt_tokens(tail)
            try:
                slots.check_letters(tail, tail_tokens, model.prompt_tokens, model.llm.detokenize)
                if n_options > len(model.slot_tokens):
                    slots.check_codes(
                        tail, tail_tokens, -(-n_options // len(DIGITS)), model.prompt_tokens, model.llm.detokenize
                    )
            except EngineError as exc:
                raise InvalidValue(f"this prompt cannot be read with answer letters: {exc}", field, loc=loc) from None

    def _check_budget(self, prefix: tuple[int, ...], distinct: list[list[int]], items: list[ScoringItem]) -> None:
        """Refuse, before evaluating anything, a request whose prompts pass DECISION_ADAPTER_MAX_REQUEST_TOKENS,
        naming the question that passes it."""
        limit, total = self.settings.max_request_tokens, len(prefix)
        for tokens, item in zip(distinct, items):
            total += len(tokens) - len(prefix)
            if total > limit:
                raise PromptTooLong(
                    f"the request's prompts come to more than {limit} tokens by this question (the request's "
                    "budget, DECISION_ADAPTER_MAX_REQUEST_TOKENS); send fewer questions or a shorter state, or "
                    "raise the limit",
                    None,
                    loc=item.loc,
                )

    def _prefix_tokens(self, first: RenderedPrompt, token_lists: list[list[int]]) -> tuple[int, ...]:
        if self.context.prefix_mode == "off":
            return ()
        return shared_prefix(first, token_lists, self.model.tokenizer, self.model.prompt_tokens)

    # -- chat ------------------------------------------------------------------

    def chat_pieces(self, request: ChatRequest) -> Iterator[chat_completion.Piece]:
        """Generate an answer, piece by piece (chat_completion.py's ``Piece``); message contents are tokenized as plain
        text, as decisions are. The conversation is checked now (a 422 before anything is generated);
        closing the iterator stops generation at once and clears the context."""
        self.start_afresh()  # the decision prefix cache is not chat's
        tokens = chat_completion.conversation_tokens(
            request, self.model.template, self.model.tokenize, self.model.tokenizer.control_re, self.llm.n_ctx()
        )
        return self._generate(request, tokens)

    def _generate(self, request: ChatRequest, tokens: list[int]) -> Iterator[chat_completion.Piece]:
        context, llama_cpp = self.context, self.model.llama_cpp
        vocab = self.llm._model.vocab
        pieces = chat_completion.generate(
            self.llm,
            request,
            tokens,
            is_end=lambda t: llama_cpp.llama_vocab_is_eog(vocab, t),
            last_logits=context.last_logits,
            text_of=self.model.token_text,
        )
        try:
            while True:
                with context.within_limit():
                    piece = context.on_share(lambda: next(pieces, None))
                if piece is None:
                    return
                yield piece
        finally:
            pieces.close()
            context.reset()

    def chat(self, request: ChatRequest) -> dict[str, object]:
        """The whole answer as an OpenAI chat completion."""
        return chat_completion.chat_response(
            self.chat_pieces(request), self.model.files.gguf.name, request.top_logprobs is not None
        )

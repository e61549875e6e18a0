"""The one llama.cpp context, and scoring items evaluated on it.

A decision is one forward pass: the rendered prompt ends where the model would
write its answer, and the logits at that last position, restricted to the
answer-slot tokens (the letters A, B, ...), give one score per option.
Nothing is generated. Beyond 16 options the labels are codes read in two steps.

The engine loads the model, checks it (GPU offload, answer slots, a start-up
decision), reads lists of prompts (``score_items``) under a time limit, and holds
the context's state. The pieces it composes, each in its own module:

* tokens.py: prompt text to tokens, the caller's text kept as plain text;
* slots.py: the answer labels' tokens, found at start-up and checked per prompt;
* readout.py: from the logits at a prompt's end to raw scores per option (the readout each item names);
* prefix_cache.py: evaluating a request's shared prefix once, and what is kept of it;
* splits.py: how an evaluation is cut into llama.cpp calls, so that the cut never changes a logit (with
  flash attention too, opt-in);
* split_check.py: the start-up check that a cut prompt answers as a whole one on the build that runs, and what
  it turns off where not (flash attention, prefix reuse);
* chat.py: chat completions' tokens, arguments and answer;
* calibration.py: calibration.json, read and checked against the model here; order.py keeps the
  content-free priors it measures in ``order_priors``.

``score_items`` is the one way scoring items reach the context (scoring.py calls it for a request, order.py
for a prior); what it returns is raw: order modes, temperatures and calibration are scoring.py's.

Time limit: ``with engine.time_limit(seconds):`` stops llama.cpp mid-graph once
the limit passes (deadline.py), forgets the cached prefix and clears the
context, so the next request starts as on a fresh server.

An engine is one context and is not thread-safe: the app lets one request at a time use it. More requests
at once take other contexts on the same loaded model (``twin``), one each (scheduler.py).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import logging
import re
import time
from contextlib import contextmanager

import numpy as np

from decision_contract.names import PRIOR

from . import calibration as calibration_file
from . import chat as chat_completion
from . import order, runtime, slots, splits
from .cloze_priors import PriorCache
from .deadline import Deadline
from .errors import InvalidValue, PromptTooLong, TimedOut
from .model_files import ModelFiles
from .prefix_cache import Prefix, PrefixReuse, shared_prefix
from .prompt import DIGITS, GROUP_LETTERS, PROMPT_VERSION, ChatTemplate, option_labels
from .questions import ChatRequest, RenderedPrompt, ScoringItem
from .readout import READOUTS, Reading
from .scores import logsumexp
from .settings import Settings
from .slots import PROBE_QUESTIONS, PROBE_STATE, EngineError
from .split_check import SplitCheck
from .state_cache import StateCache
from .tokens import PromptTokenizer, longest_token_chars

log = logging.getLogger(__name__)

_QUANT_RE = re.compile(r"(?:^|[._-])((?:IQ|Q)\d[A-Z0-9_]*?|BF16|F16|F32)(?:\.gguf$|[.-])", re.IGNORECASE)


def quantization_of(file_name: str, metadata: dict) -> str | None:
    match = _QUANT_RE.search(file_name)
    if match:
        return match.group(1).upper()
    return metadata.get("general.file_type")


class Engine(PrefixReuse, SplitCheck):
    """The loaded model, its one llama.cpp context and what that context holds (``PrefixReuse``), and the
    start-up check of how its prompts are cut into calls (``SplitCheck``)."""

    def __init__(self, settings: Settings, model: ModelFiles, rt: runtime.Runtime | None = None):
        import llama_cpp

        self._llama_cpp = llama_cpp
        self.settings = settings
        self.model_files = model
        self.runtime = rt or runtime.inspect(settings.extra_buffers)
        log.info("llama.cpp system info: %s", self.runtime.system_info)
        log.info("extra buffer types: %s", self.runtime.extra_buffers_reason)
        try:  # before the model loads: a file fit for another build stops the start-up at once
            self.calibration = calibration_file.load(model.calibration, model.sha256, model.gguf.name, PROMPT_VERSION,
                                                     settings.calibration)
        except calibration_file.CalibrationError as exc:
            raise EngineError(str(exc)) from None
        self.order_priors: dict[tuple[str, int], np.ndarray] = {}  # (prompt version, n) -> prior (order.py)
        self.cloze_priors = PriorCache(settings.cloze_prior_cache)  # the cloze readout's pmi priors (cloze_priors.py)
        self.gpu_offload = bool(llama_cpp.llama_supports_gpu_offload())
        if settings.n_gpu_layers and not self.gpu_offload:
            raise EngineError(
                f"GPU offload is requested (SM_LLAMA_CPP_N_GPU_LAYERS or SEMIF_N_GPU_LAYERS = "
                f"{settings.n_gpu_layers}) but llama.cpp loaded no GPU backend ({self.runtime.system_info}); a GPU "
                "instance must not serve from its CPU: deploy the GPU image (container/Dockerfile.gpu) on a GPU "
                "instance, or set the layers to 0 for a CPU endpoint")
        started = time.perf_counter()
        try:
            with runtime.model_params(llama_cpp, use_extra_bufts=self.runtime.extra_buffers), \
                    runtime.context_params(llama_cpp, flash_attn_type=runtime.FLASH_ATTN_TYPES[settings.flash_attn]), \
                    runtime.llama_log(llama_cpp) as load_log:
                self.llm = llama_cpp.Llama(
                    model_path=str(model.gguf), logits_all=False, verbose=False, **settings.llama_kwargs()
                )
        except ValueError as exc:  # llama.cpp only says "Failed to load model from file"
            raise EngineError(
                f"llama.cpp could not load {model.gguf.name} ({exc}); the file is not a valid GGUF for this "
                "llama.cpp (truncated or corrupt?): re-extract model.tar.gz or rebuild the model package"
            ) from None
        self.load_seconds = time.perf_counter() - started
        self.metadata = dict(self.llm.metadata)
        template_source = self.metadata.get("tokenizer.chat_template")
        if not template_source:
            raise EngineError(
                f"{model.gguf.name} carries no chat template (tokenizer.chat_template); "
                "use an instruction-tuned GGUF"
            )
        vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        self.n_vocab = self.llm.n_vocab()
        self.tokenizer = PromptTokenizer(llama_cpp, self.llm)
        eos_id = self.llm.token_eos()
        eos_text = llama_cpp.llama_vocab_get_text(vocab, eos_id).decode() if eos_id >= 0 else ""
        self.template = ChatTemplate(template_source, self.tokenizer.bos_text, eos_text)
        self._max_token_chars = longest_token_chars(llama_cpp, vocab, self.n_vocab)
        self._deadline = Deadline()
        self._deadline.install(llama_cpp, self.llm.ctx)

        self.recurrent = bool(llama_cpp.llama_model_is_recurrent(self.llm.model)) or bool(
            llama_cpp.llama_model_is_hybrid(self.llm.model))
        mode = settings.prefix_reuse
        if mode == "auto":
            mode = "restore" if self.recurrent else "trim"
        if mode == "trim" and self.recurrent:
            raise EngineError(
                "DECISION_ADAPTER_PREFIX_REUSE=trim cannot work on a hybrid or recurrent model; "
                "use auto or restore"
            )
        self.prefix_mode = mode
        # Whether an evaluation may cut the held cells back to evaluate the last ones again (splits.py): not in a
        # recurrent memory, nor in restore mode, which keeps its own saved states.
        self._cuts_back = not self.recurrent and mode != "restore"
        self._prefix: Prefix | None = None  # what the context holds from cell 0 on (prefix_cache.py)
        # The head's text -> its tokens, and in restore mode the sequence saved after them.
        self._heads: dict[str, Prefix] = {}
        # Recent requests' sequences (opt-in; settings require cross-request reuse for it).
        self.state_cache = StateCache(settings.state_cache_mib * 2**20) if settings.state_cache_mib else None
        # (tokens, logits) of a prompt the state cache answered whole; read only for exactly those tokens.
        self._first_logits: tuple[tuple[int, ...], np.ndarray] | None = None
        self._short_cells = False  # the cells held may come from a call of fewer than least_tokens (splits.py)
        self.tokens_evaluated = 0  # every token given to llama.cpp for decisions, for the benchmark

        self.slot_tokens, self._tail = slots.find_slots(self.template, self.prompt_tokens, self.llm.detokenize)
        self.code_tokens, self.codes_unavailable = slots.find_codes(self.template, self.prompt_tokens,
                                                                    self.llm.detokenize)
        self.n_layer = llama_cpp.llama_model_n_layer(self.llm.model)
        # What llama.cpp itself says it put on the GPU (it logs nothing about it without a GPU backend).
        self.offloaded_layers, self.offloadable_layers = (
            runtime.offloaded_layers("".join(load_log)) or (0, self.n_layer + 1))
        self.flash_attention = runtime.flash_attention("".join(load_log), settings.flash_attn)
        self.context_mib = runtime.context_memory_mib("".join(load_log))  # this context's KV (and recurrent) memory
        self.lane = 0  # which of the model's contexts this is (scheduler.py makes the others with ``twin``)
        self.loaded_threads = (self.llm.context_params.n_threads, self.llm.context_params.n_threads_batch)
        self._threads = self.loaded_threads
        self.threads_now = None  # scheduler.py: () -> the threads of this context's next evaluation
        log.info("flash attention: %s (SM_LLAMA_CPP_FLASH_ATTN=%s)", self.flash_attention, settings.flash_attn)
        if settings.n_gpu_layers and self.offloaded_layers == 0:
            raise EngineError(
                f"GPU offload is requested ({settings.n_gpu_layers} layers) but llama.cpp offloaded none of "
                f"{self.offloadable_layers} ({self.runtime.system_info}); a GPU instance must not serve from its "
                "CPU: check that the instance has a GPU and the image is the GPU one (container/Dockerfile.gpu)")
        log.info("loaded %s in %.2f s; llama.cpp offloaded %d/%d layers to GPU; prefix reuse: %s",
                 model.gguf.name, self.load_seconds, self.offloaded_layers, self.offloadable_layers,
                 self.prefix_mode)
        if settings.cross_request_reuse:
            log.warning("DECISION_ADAPTER_CROSS_REQUEST_REUSE=on: a request reuses what the previous one sent, so "
                        "its timing tells a caller whether it guessed the previous caller's state; serve one "
                        "tenant only")
        self.split_check: float | None = None  # check_splits at start-up (prove; none with prefix reuse off)
        if self.flash_attention != "off":
            self._settle_flash_attention(self._flash_attention_blocker())
        self.startup_probe: dict | None = None
        self.info = self._model_info()

    # -- more contexts on the model ------------------------------------------------

    def twin(self, lane: int) -> "Engine":
        """Another context on this engine's loaded model, for one more request at a time (scheduler.py).

        It shares what does not change per request (the model, tokenizer, template, answer slots,
        calibration, the content-free priors, the opt-in state cache) and has its own context, time
        limit and what that context holds (cached prefix, saved heads). What it answers depends only on
        the model and the request, as on this one: the scheduler proves that at start-up.
        """
        llama_cpp = self._llama_cpp
        twin = copy.copy(self)
        with runtime.context_params(llama_cpp, flash_attn_type=runtime.FLASH_ATTN_TYPES[
                    "off" if self.flash_attention == "off" else "on"]), \
                runtime.llama_log(llama_cpp):
            twin.llm = runtime.another_context(self.llm)
        twin.lane = lane
        twin._deadline = Deadline()
        twin._deadline.install(llama_cpp, twin.llm.ctx)
        twin._prefix, twin._heads, twin._first_logits = None, {}, None
        twin._threads = self.loaded_threads
        twin.tokens_evaluated = 0
        return twin

    def start_afresh(self) -> None:
        """Forget what the context holds (its cells, the cached prefix), as a fresh server would."""
        self._reset_context()
        self._prefix = None

    def _take_thread_share(self) -> None:
        if self.threads_now is not None:
            self.set_threads(self.threads_now())

    def set_threads(self, threads: tuple[int, int]) -> None:
        """The CPU threads (generation, prompt evaluation) of this context's next evaluations."""
        if threads != self._threads:
            self._llama_cpp.llama_set_n_threads(self.llm.ctx, *threads)
            self._threads = threads

    # -- the start-up proof ------------------------------------------------------

    def prove(self) -> dict:
        """Score one decision through the real path; the server is ready only after this returned.

        A model can load and still fail on its first forward pass (a CPU kernel that
        crashes, a backend that returns NaN); serving it would turn a failed start into
        failed requests. A crash ends the process here, before ``/ping`` said ready.
        First the check of prompts cut into calls (split_check.py), which may leave flash
        attention or prefix reuse off.
        """
        started = time.perf_counter()
        if self.prefix_mode != "off":  # with it off, a prompt is evaluated in the same calls in every request
            self._check_splits()
        question = PROBE_QUESTIONS[0]
        prompt = self.template.render_decision(PROBE_STATE, question)
        readings, timing = self.score_items([ScoringItem(prompt, len(question.options))])
        probabilities = readings[0].scores.probabilities(1.0)
        if not (np.all(np.isfinite(probabilities)) and abs(float(probabilities.sum()) - 1.0) < 1e-6):
            raise EngineError(f"the start-up decision returned unusable probabilities {probabilities.tolist()}; "
                              f"llama.cpp: {self.runtime.system_info}")
        if self.settings.order == PRIOR:
            order.measure_startup_priors(self)
        self.start_afresh()  # the probe's prompt is not worth keeping as a cached prefix
        if self.state_cache is not None:
            self.state_cache.clear()
        self.startup_probe = {"input_tokens": readings[0].input_tokens, "options": len(question.options),
                              "seconds": round(time.perf_counter() - started, 4),
                              "prompt_tokens_per_s": round(readings[0].input_tokens / max(
                                  timing["evaluate_ms"] / 1000.0, 1e-9), 1)}
        self.info["startup_probe"] = self.startup_probe
        log.info("start-up decision scored: %d tokens, %d options, %.3f s", self.startup_probe["input_tokens"],
                 self.startup_probe["options"], self.startup_probe["seconds"])
        return self.startup_probe

    # -- tokens ----------------------------------------------------------------

    def tokenize(self, text: str, protect: tuple[tuple[int, int], ...] = ()) -> list[int]:
        """The prompt's tokens; control-token text counts as a control token only outside ``protect``
        (the spans of caller-supplied text; ``PromptTokenizer.tokenize``)."""
        return self.tokenizer.tokenize(text, protect)

    def prompt_tokens(self, prompt: RenderedPrompt, end: int | None = None) -> list[int]:
        """Tokens of ``prompt.text[:end]``, the caller's content kept as plain text."""
        return self.tokenizer.prompt_tokens(prompt, end)

    def token_text(self, token: int) -> str:
        """One token's text, control tokens as their text."""
        return self.llm.detokenize([token], special=True).decode("utf-8", errors="replace")

    # -- what is served ----------------------------------------------------------

    def _model_info(self) -> dict:
        llama_cpp = self._llama_cpp
        source = self.model_files.source
        entry = self.model_files.entry  # the verified manifest entry of the file loaded
        return {
            "file": self.model_files.gguf.name,
            "sha256": self.model_files.sha256,
            "size_bytes": self.model_files.size,
            "source_repo": entry.get("repo") or source.get("repo"),
            "source_revision": entry.get("revision") or source.get("revision"),
            "manifest_verified": self.model_files.manifest is not None,
            "architecture": self.metadata.get("general.architecture"),
            "name": self.metadata.get("general.name"),
            "quantization": quantization_of(self.model_files.gguf.name, self.metadata),
            "context_size": self.llm.n_ctx(),
            "gpu_layers_requested": self.settings.n_gpu_layers,
            "gpu_layers_offloaded": self.offloaded_layers,
            "gpu_offload_supported": self.gpu_offload,
            "threads": self.llm.context_params.n_threads,
            "recurrent_or_hybrid": self.recurrent,
            "prefix_reuse": self.prefix_mode,
            "order": self.settings.order,
            "readout": self.settings.readout,
            "order_priors": {},
            "calibration": None if self.calibration is None else {
                **self.calibration.describe(), "manifest_verified": self.model_files.calibration_listed},
            "runtime": {"llama_cpp_python": getattr(llama_cpp, "__version__", "unknown"),
                        "llama_cpp_system": self.runtime.system_info,
                        "extra_buffer_types": self.runtime.extra_buffers,
                        "flash_attention": self.flash_attention},
        }

    # -- decisions -------------------------------------------------------------

    def _evaluate(self, first: RenderedPrompt, prefix: tuple[int, ...], token_lists: list[list[int]],
                  visit) -> tuple[list, dict]:
        """Evaluate the shared prefix once, then each prompt from it; ``visit`` reads each result."""
        t1 = time.perf_counter()
        prefix_reused = self._enter_prefix(first, prefix, token_lists[0])
        t2 = time.perf_counter()
        results = []
        for index, tokens in enumerate(token_lists):
            q_start = time.perf_counter()
            kept, self._first_logits = self._first_logits, None
            if index or not self._holds(tokens):  # trim mode evaluated the first prompt whole
                self._rewind(prefix, self._prefix.state)
                self._eval(tokens[len(prefix):])
                logits = self._last_logits()
            else:
                logits = kept[1] if kept is not None and kept[0] == tuple(tokens) else self._last_logits()
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

    # -- labelled prompts (any number of options the labels cover) -----------------

    @property
    def max_options(self) -> int:
        return len(GROUP_LETTERS) * len(DIGITS) if self.code_tokens else len(self.slot_tokens)

    def option_labels(self, n: int, loc: tuple = ()) -> tuple[str, ...]:
        """Labels to show for n options; a clear 422 when this model cannot read that many."""
        if n > len(self.slot_tokens) and not self.code_tokens:
            raise InvalidValue(f"{n} options: this model reads at most {len(self.slot_tokens)} "
                               f"({self.codes_unavailable})", None, loc=loc)
        if n > self.max_options:
            raise InvalidValue(f"{n} options: at most {self.max_options} can be labelled", None, loc=loc)
        return option_labels(n)

    def score_items(self, items: list[ScoringItem]) -> tuple[list[Reading], dict]:
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
                self._check_fits(item.prompt, tokens, item.field, loc=item.loc,
                                 extra=max(len(c) for c in item.continuations), letters=False)
            else:
                coded = item.n_options > len(self.slot_tokens)
                self._check_fits(item.prompt, tokens, item.field, loc=item.loc, extra=1 if coded else 0,
                                 n_options=item.n_options)
            token_lists.append(tokens)
        # An item is its prompt and what its readout reads after it: identical ones are read once.
        unique: dict[tuple, int] = {}
        first_item = {}
        for tokens, item in zip(token_lists, items):
            first_item.setdefault(unique.setdefault((tuple(tokens), item.continuations), len(unique)), item)
        distinct = [list(t) for t, _ in unique]
        prefix = self._prefix_tokens(items[0].prompt, distinct)  # distinct[0] is items[0]'s prompt
        self._check_budget(prefix, distinct, list(first_item.values()))
        t1 = time.perf_counter()

        def visit(index: int, tokens: list[int], logits: np.ndarray, eval_ms: float) -> Reading:
            started = time.perf_counter()
            reading = self._read(first_item[index], tokens, logits)
            return dataclasses.replace(reading, question_eval_ms=eval_ms + (time.perf_counter() - started) * 1000.0)

        computed, timing = self._evaluate(items[0].prompt, prefix, distinct, visit)
        readings = [dataclasses.replace(computed[unique[(tuple(tokens), item.continuations)]],
                                        prompt_sha256=hashlib.sha256(item.prompt.text.encode("utf-8")).hexdigest())
                    for item, tokens in zip(items, token_lists)]
        read = len(prefix) + sum(len(t) - len(prefix) + r.appended_tokens for t, r in zip(distinct, computed))
        return readings, {"tokenize_ms": (t1 - t0) * 1000.0, **timing, "input_tokens": read,
                          "distinct_prompts": len(distinct)}

    def _read(self, item: ScoringItem, tokens: list[int], logits: np.ndarray) -> Reading:
        """The item's readout at its prompt's end; what it evaluates past the prompt starts from the prompt."""
        checkpoint: list = []

        def rewind() -> None:
            if not checkpoint:  # a recurrent memory cannot be cut back: save the sequence after the prompt once
                checkpoint.append(self._save_sequence(partial=True) if self.recurrent or self.prefix_mode == "restore"
                                  else None)
            self._rewind(tokens, checkpoint[0])

        def logits_after(appended: list[int]) -> np.ndarray:
            rewind()
            self._eval(appended, appended=True)
            return self._last_logits()

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
            rows = self._eval_reading_each(ahead, appended=True)
            return [float(row[token]) - logsumexp(row) for row, token in zip(rows, continuation[1:])], len(ahead)

        got = READOUTS[item.readout].read(self, logits, item, logits_after, log_probs_after)
        if checkpoint and checkpoint[0] is None:  # cut off what was appended (read in calls of its own)
            self._rewind(tokens, None)           # so that no later prompt starts from its cells
        return Reading(**vars(got), input_tokens=len(tokens), top_token=int(np.argmax(logits)),
                       option_tokens=tuple(len(c) for c in item.continuations))

    def continuation_tokens(self, text: str, loc: tuple = ()) -> tuple[int, ...]:
        """An option's text as the tokens that follow a cloze prompt: plain text, no BOS."""
        tokens = tuple(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))
        if not tokens:
            raise InvalidValue(f"an option's text {text!r} has no tokens to score; give it words", None, loc=loc)
        return tokens

    def _tokens_that_fit(self, prompt: RenderedPrompt, field: str, *, loc: tuple | None = None) -> list[int]:
        """The prompt's tokens, with the cheap checks first: the time limit (checked between prompts, as
        tokenizing runs in Python time the abort callback cannot stop), and a text so long that not even
        the context's worth of the vocabulary's longest tokens could hold it is refused untokenized."""
        self._stop_if_expired()
        limit = self.llm.n_ctx()
        if len(prompt.text) > limit * self._max_token_chars:
            raise PromptTooLong(
                f"the prompt is {len(prompt.text)} characters, more than a {limit}-token context can hold (no "
                f"token of this model is longer than {self._max_token_chars} characters); shorten the state or "
                "question (prompts are never truncated)", field, loc=loc)
        return self.prompt_tokens(prompt)

    def _check_fits(self, prompt: RenderedPrompt, tokens: list[int], field: str, *, loc: tuple | None = None,
                    extra: int = 0, n_options: int = 0, letters: bool = True) -> None:
        limit = self.llm.n_ctx()
        if len(tokens) + extra >= limit:
            raise PromptTooLong(
                f"the prompt is {len(tokens)} tokens but the context holds {limit}; shorten the state or "
                "question (prompts are never truncated) or raise SM_LLAMA_CPP_CTX_SIZE",
                field, loc=loc,
            )
        if letters and tuple(tokens[-len(self._tail):]) != self._tail:
            # The request's text merged with the template's tail; check the slots directly, on the prompt's
            # last characters only (an answer letter can only merge with what comes just before it), so a
            # long state is not tokenized again for each of up to 16 letters and 260 codes.
            tail = slots.tail_of(prompt)
            tail_tokens = self.prompt_tokens(tail)
            try:
                slots.check_letters(tail, tail_tokens, self.prompt_tokens, self.llm.detokenize)
                if n_options > len(self.slot_tokens):
                    slots.check_codes(tail, tail_tokens, -(-n_options // len(DIGITS)), self.prompt_tokens,
                                      self.llm.detokenize)
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
                    "raise the limit", None, loc=item.loc)

    def _prefix_tokens(self, first: RenderedPrompt, token_lists: list[list[int]]) -> tuple[int, ...]:
        if self.prefix_mode == "off":
            return ()
        return shared_prefix(first, token_lists, self.tokenizer, self.prompt_tokens)

    # -- time limit --------------------------------------------------------------

    def time_limit(self, seconds: float | None):
        """Context manager: evaluations inside it stop with TimedOut once ``seconds`` have passed."""
        return self._deadline.limit(seconds)

    @contextmanager
    def _within_limit(self):
        """Run llama.cpp work; past the time limit, raise TimedOut (before it, or when it was aborted).

        Whatever else goes wrong inside, the context and the cached prefix are dropped too: a half-written
        cache must never be reused by the next request.
        """
        self._stop_if_expired()
        try:
            yield
        except BaseException:  # llama-cpp-python: "llama_decode returned 2" when the callback aborted
            self._stop_if_expired()
            self.start_afresh()
            raise

    def _eval(self, tokens, *, appended: bool = False) -> None:
        """Evaluate ``tokens`` after what the context holds, in calls cut as splits.py says. What a readout
        ``appended`` to a whole prompt is evaluated in the same calls in every request, so it needs no floor
        but two tokens, and never evaluates the prompt's cells again (another kernel would rewrite them)."""
        self._decode(tokens, appended, each=False)

    def _eval_reading_each(self, tokens, *, appended: bool = False) -> np.ndarray:
        """As ``_eval``, returning the logits at each of the tokens' positions (one float32 row per token).
        ``Llama.eval`` keeps only the last position's logits unless the whole model was loaded with ``logits_all``."""
        return self._decode(tokens, appended, each=True)

    def _decode(self, tokens, appended: bool, *, each: bool) -> np.ndarray | None:
        llm, rows = self.llm, []
        if not len(tokens):
            return np.empty((0, self.n_vocab), np.float32) if each else None
        least = splits.PLAIN_LEAST if appended else self.least_tokens
        back = (splits.back_up(llm.n_tokens, len(tokens), least, short=self._short_cells)
                if self._cuts_back and not appended else 0)
        start = llm.n_tokens - back
        run = [*llm.input_ids[start:llm.n_tokens].tolist(), *tokens]
        points = splits.cuts(len(run), min(llm.n_batch, llm.context_params.n_ubatch), least)
        self._take_thread_share()
        with self._within_limit():
            self._set_position(start)
            for first, end in zip(points, points[1:]):
                chunk = run[first:end]
                if not each:
                    llm.eval(chunk)
                    continue
                llm._ctx.kv_cache_seq_rm(-1, llm.n_tokens, -1)  # as Llama.eval: nothing past the position survives
                llm._batch.set_batch(batch=chunk, n_past=llm.n_tokens, logits_all=True)
                llm._ctx.decode(llm._batch)
                llm.input_ids[llm.n_tokens:llm.n_tokens + len(chunk)] = chunk
                llm.n_tokens += len(chunk)
                pointer = self._llama_cpp.llama_get_logits(llm.ctx)
                rows.append(np.ctypeslib.as_array(pointer, shape=(len(chunk), self.n_vocab)).copy())
        if not appended:  # a call from a later cell held at least ``least`` tokens (splits.back_up)
            self._short_cells = start == 0 and len(run) < least
        self.tokens_evaluated += len(run)
        return np.concatenate(rows)[back:] if each else None

    def _stop_if_expired(self) -> None:
        if not self._deadline.expired:
            return
        # What an aborted evaluation left in the context is not worth keeping: start afresh.
        self.start_afresh()
        raise TimedOut(
            f"the request held the model for more than {self._deadline.seconds:g} s and was stopped "
            "(DECISION_ADAPTER_REQUEST_TIMEOUT); send a shorter state or fewer questions, or raise the limit")

    def _last_logits(self) -> np.ndarray:
        """The last position's logits over the vocabulary, float32 as llama.cpp wrote them (a copy: the next
        evaluation overwrites its buffer); readouts take the slots' logits as float64."""
        pointer = self._llama_cpp.llama_get_logits_ith(self.llm.ctx, -1)
        return np.ctypeslib.as_array(pointer, shape=(self.n_vocab,)).copy()

    # -- chat ------------------------------------------------------------------

    def chat_pieces(self, request: ChatRequest):
        """Generate an answer, piece by piece (chat.py's ``Piece``); message contents are tokenized as plain
        text, as decisions are. The conversation is checked now (a 422 before anything is generated);
        closing the iterator stops generation at once and clears the context."""
        self._take_thread_share()
        self.start_afresh()  # the decision prefix cache is not chat's
        tokens = chat_completion.conversation_tokens(request, self.template, self.tokenize,
                                                     self.tokenizer.control_re, self.llm.n_ctx())
        return self._generate(request, tokens)

    def _generate(self, request: ChatRequest, tokens: list[int]):
        vocab = self.llm._model.vocab
        pieces = chat_completion.generate(
            self.llm, request, tokens, is_end=lambda t: self._llama_cpp.llama_vocab_is_eog(vocab, t),
            last_logits=self._last_logits, text_of=self.token_text)
        try:
            while True:
                with self._within_limit():
                    piece = next(pieces, None)
                if piece is None:
                    return
                yield piece
        finally:
            pieces.close()
            self._reset_context()

    def chat(self, request: ChatRequest) -> dict:
        """The whole answer as an OpenAI chat completion."""
        return chat_completion.chat_response(self.chat_pieces(request), self.model_files.gguf.name,
                                             request.top_logprobs is not None)

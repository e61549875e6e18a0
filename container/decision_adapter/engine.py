"""The one llama.cpp context and the decision readout on top of it.

A decision is one forward pass: the rendered prompt ends where the model would
write its answer, and the logits at that last position, restricted to the
answer-slot tokens (the letters A, B, ...), give one probability per option.
Nothing is generated.

Prefix reuse: every question about a state shares the prompt up to the end of
that state, and every prompt shares the fixed head before the state (system
prompt, the opening of the user turn). The engine evaluates the state's prefix
once and then each question from it. Across requests it keeps only the fixed
head, which holds nothing a caller wrote: a caller's state is reused inside its
own request only, so what a request costs does not depend on what the previous
caller sent (reusing it would let the next caller time a guess of it).
``DECISION_ADAPTER_CROSS_REQUEST_REUSE=on`` (single-tenant endpoints) reuses the
previous request's tokens too, as far as they match; with ``DECISION_ADAPTER_STATE_CACHE_MIB``
also those of recent requests before it (state_cache.py: their saved sequences, LRU, bounded
in MiB): ``trim`` loads the cached sequence that shares the longest prefix with the request's
first prompt, ``restore`` the one saved after exactly the request's state. How the head is kept:

* ``trim`` (attention-only models): keep the KV cache up to the longest common
  prefix with what is cached, but no further than the head (with the opt-in: no
  limit), cut the rest, evaluate only what follows;
* ``restore``: hybrid and recurrent models (Qwen3.5) need this, because llama.cpp
  cannot cut the tail of a recurrent memory. The sequence is saved right after
  the fixed head (once per head, the decision head at start-up by ``prove``)
  and loaded back for each request; the request's state prefix is then
  evaluated and its recurrent part saved too. Before each of its questions that
  part is loaded back and the attention cells past the state are cut (they can
  be): the state's own attention cells stay where they are, so a snapshot holds
  the recurrent states only, of one size whatever the state's length.

``auto`` picks ``restore`` for hybrid/recurrent models and ``trim`` otherwise.
With ``trim`` the first prompt of a request is evaluated whole from where it
departs from the cache (one llama_decode call per batch-size of tokens), so
``prefix_eval_ms`` includes it. How a prompt is split into calls does not change
its answer beyond rounding (the tests hold every mode to 1e-4 of a fresh
evaluation; on the CPU build it is bit-identical), except that a lone token in
a batch takes another path in llama.cpp: ``trim`` never evaluates a prompt's
last token alone (the two-level readout reads its appended letter alone in
every mode alike).

Readouts. Up to 16 options: the letters A-P, one forward pass ("letter-slots").
More options (the Jev API allows 255): each option gets a code, a group letter
and a digit ("A0", "A1", ... "Z9"), and the readout takes two steps
("two-level-codes"): the letter logits at the last prompt position give
P(group), restricted to the groups in use; then, for each group, the group's
letter is appended (one more token, evaluated from the cached prompt) and the
digit logits give P(member | group), restricted to that group's members. An
option's probability is P(group) x P(member | group), a proper distribution
over exactly the declared options. Cost: one prompt pass plus one single-token
evaluation per group in use (ceil(n / 10), at most 26).

Caller text is never parsed for control tokens: text such as ``<|im_end|>``
inside a state, question, option or chat message stays text, so a request
cannot close its own turn and open a system or assistant turn
(``Engine.tokenize``).

Time limit: ``with engine.time_limit(seconds):`` stops llama.cpp mid-graph once
the limit passes (deadline.py), forgets the cached prefix and clears the
context, so the next request starts as on a fresh server.

The engine is not thread-safe; the app lets one request at a time use it.
"""

from __future__ import annotations

import bisect
import ctypes
import hashlib
import logging
import re
import secrets
import time
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from . import runtime
from .deadline import Deadline
from .errors import InvalidValue, PromptTooLong, TimedOut
from .model_files import ModelFiles
from .prompt import (DIGITS, GROUP_LETTERS, LETTERS, PROMPT_VERSION, ChatTemplate, RenderedPrompt, TemplateError,
                     option_labels)
from .schema import ChatRequest, DecisionBatch, Option, Question
from .settings import Settings
from .state_cache import CachedState, StateCache

log = logging.getLogger(__name__)

# Used once at start-up to find the slot tokens and the template's fixed tail.
_PROBE_STATE = "probe state"
_PROBE_QUESTIONS = (
    Question("probe-1", "Which option fits?", tuple(Option(l, f"option {l}") for l in LETTERS)),
    Question("probe-2", "Pick one, please.", tuple(Option(l, f"choice number {i}") for i, l in enumerate(LETTERS))),
)

_QUANT_RE = re.compile(r"(?:^|[._-])((?:IQ|Q)\d[A-Z0-9_]*?|BF16|F16|F32)(?:\.gguf$|[.-])", re.IGNORECASE)


READOUT_LETTER_SLOTS = "letter-slots"
READOUT_TWO_LEVEL = "two-level-codes"
READOUT_METHODS = {
    READOUT_LETTER_SLOTS: (
        "One forward pass over the rendered prompt; the logits at the last position, restricted to the "
        "answer-letter tokens of the declared options (A, B, ...), divided by the temperature, softmaxed. "
        "No tokens were generated."
    ),
    READOUT_TWO_LEVEL: (
        "Options are labelled with codes (a group letter and a digit: A0, A1, ... Z9). Step 1: the logits "
        "at the last prompt position, restricted to the group letters in use, divided by the temperature, "
        "softmaxed: P(group). Step 2: for each group, its letter is appended and evaluated from the cached "
        "prompt; the logits restricted to that group's digits, divided by the temperature, softmaxed: "
        "P(member | group). P(option) = P(group) x P(member | group), a "
        "distribution over exactly the declared options. Cost: one prompt pass plus one single-token "
        "evaluation per group in use. No tokens were generated."
    ),
}


class EngineError(RuntimeError):
    """The model cannot be served by the decision readout (e.g. no usable answer slots)."""


@dataclass
class _Prefix:
    """The tokens the context holds from cell 0 on. Whatever evaluates over those cells forgets it (sets the
    engine's ``_prefix`` to None): a partial snapshot is only valid on top of those very cells."""

    tokens: tuple[int, ...]
    state: bytearray | None  # restore mode: the recurrent part of the sequence after the prefix (_save_sequence)


MAX_HEADS = 4  # heads kept, tokenized and (restore mode) saved: one per system prompt and template


@dataclass(frozen=True)
class ScoringItem:
    """One prompt to score over ``n_options`` labelled options (labels from ``Engine.option_labels``)."""

    prompt: RenderedPrompt
    n_options: int
    loc: tuple = ()  # where an error about this item points, e.g. ("body", "questions", "q1")
    temperature: float = 1.0
    field: str = "state"  # the field an error about this item names


def _softmax(values: np.ndarray) -> np.ndarray:
    return np.exp(values - _logsumexp(values))


def _logsumexp(values: np.ndarray) -> float:
    # A vocabulary's float32 logits stay float32 through exp (4x faster here than float64 for 49k values,
    # ~1e-8 off in the result) and are summed in float64.
    peak = values.max()
    return float(peak) + float(np.log(np.sum(np.exp(values - peak), dtype=np.float64)))


TAIL_CHECK_CHARS = 256


def _tail_of(prompt: RenderedPrompt, chars: int) -> RenderedPrompt:
    """The prompt's last ``chars`` characters, with the caller's span moved along (for slot checks)."""
    cut = max(0, len(prompt.text) - chars)
    span = prompt.content_span
    if span is not None:
        span = (max(0, span[0] - cut), max(0, span[1] - cut))
    return RenderedPrompt(prompt.text[cut:], None, span)


def _common_prefix_len(a, b) -> int:
    n = min(len(a), len(b))
    differ = np.flatnonzero(np.asarray(a[:n], dtype=np.int64) != np.asarray(b[:n], dtype=np.int64))
    return int(differ[0]) if differ.size else n


def quantization_of(file_name: str, metadata: dict) -> str | None:
    match = _QUANT_RE.search(file_name)
    if match:
        return match.group(1).upper()
    return metadata.get("general.file_type")


class Engine:
    def __init__(self, settings: Settings, model: ModelFiles, rt: runtime.Runtime | None = None):
        import llama_cpp

        self._llama_cpp = llama_cpp
        self.settings = settings
        self.model_files = model
        self.runtime = rt or runtime.inspect(settings.extra_buffers)
        log.info("llama.cpp system info: %s", self.runtime.system_info)
        log.info("extra buffer types: %s", self.runtime.extra_buffers_reason)
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
        self._vocab = vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        self.n_vocab = self.llm.n_vocab()
        self._bos_id = llama_cpp.llama_vocab_bos(vocab)
        self._add_bos = llama_cpp.llama_vocab_get_add_bos(vocab)
        eos_id = self.llm.token_eos()
        bos_text = llama_cpp.llama_vocab_get_text(vocab, self._bos_id).decode() if self._bos_id >= 0 else ""
        eos_text = llama_cpp.llama_vocab_get_text(vocab, eos_id).decode() if eos_id >= 0 else ""
        self.template = ChatTemplate(template_source, bos_text, eos_text)
        self._bos_text = bos_text
        self._piece_bytes = self._token_byte_lengths()
        self._control_tokens, self._control_re = self._find_control_tokens()
        self._head_tokens: dict[str, list[int]] = {}  # fixed text before the caller's -> its tokens (tokenize)
        self._max_token_chars = max(1, max(len(llama_cpp.llama_vocab_get_text(vocab, t))
                                           for t in range(self.n_vocab)))
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
        self._prefix: _Prefix | None = None
        # The head's text -> its tokens, and in restore mode the sequence saved after them.
        self._heads: dict[str, _Prefix] = {}
        # Recent requests' sequences (opt-in; settings require cross-request reuse for it).
        self.state_cache = StateCache(settings.state_cache_mib * 2**20) if settings.state_cache_mib else None
        # (tokens, logits) of a prompt the state cache answered whole; read only for exactly those tokens.
        self._first_logits: tuple[tuple[int, ...], np.ndarray] | None = None
        self.tokens_evaluated = 0  # every token given to llama.cpp for decisions, for the benchmark

        self.slot_tokens, self._tail = self._find_slots()
        self.code_tokens, self.codes_unavailable = self._find_codes()
        self.n_layer = llama_cpp.llama_model_n_layer(self.llm.model)
        # What llama.cpp itself says it put on the GPU (it logs nothing about it without a GPU backend).
        self.offloaded_layers, self.offloadable_layers = (
            runtime.offloaded_layers("".join(load_log)) or (0, self.n_layer + 1))
        self.flash_attention = runtime.flash_attention("".join(load_log), settings.flash_attn)
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
        self.startup_probe: dict | None = None
        self.info = self._model_info()

    # -- the start-up proof ------------------------------------------------------

    def prove(self) -> dict:
        """Score one decision through the real path; the server is ready only after this returned.

        A model can load and still fail on its first forward pass (a CPU kernel that
        crashes, a backend that returns NaN); serving it would turn a failed start into
        failed requests. A crash ends the process here, before ``/ping`` said ready.
        """
        started = time.perf_counter()
        question = _PROBE_QUESTIONS[0]
        results, timing = self.decide(DecisionBatch("startup-probe", _PROBE_STATE, (question,), single=True))
        probabilities = np.asarray(results[0]["probabilities"])
        if not (np.all(np.isfinite(probabilities)) and abs(float(probabilities.sum()) - 1.0) < 1e-6):
            raise EngineError(f"the start-up decision returned unusable probabilities {probabilities.tolist()}; "
                              f"llama.cpp: {self.runtime.system_info}")
        self._reset_context()  # the probe's prompt is not worth keeping as a cached prefix
        self._prefix = None
        if self.state_cache is not None:
            self.state_cache.clear()
        self.startup_probe = {"input_tokens": results[0]["input_tokens"], "options": len(question.options),
                              "seconds": round(time.perf_counter() - started, 4),
                              "prompt_tokens_per_s": round(results[0]["input_tokens"] / max(
                                  timing["evaluate_ms"] / 1000.0, 1e-9), 1)}
        self.info["startup_probe"] = self.startup_probe
        log.info("start-up decision scored: %d tokens, %d options, %.3f s", self.startup_probe["input_tokens"],
                 self.startup_probe["options"], self.startup_probe["seconds"])
        return self.startup_probe

    # -- tokens ----------------------------------------------------------------

    def _find_control_tokens(self) -> tuple[dict[str, int], re.Pattern | None]:
        """Texts that llama.cpp turns into control tokens when asked to parse special tokens."""
        llama_cpp, vocab = self._llama_cpp, self._vocab
        wanted = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
        texts: dict[str, int] = {}
        for token in range(self.n_vocab):
            if llama_cpp.llama_vocab_get_attr(vocab, token) & wanted:
                text = llama_cpp.llama_vocab_get_text(vocab, token).decode("utf-8", errors="replace")
                if text:
                    texts.setdefault(text, token)
        if not texts:
            return texts, None
        longest_first = sorted(texts, key=len, reverse=True)  # as llama.cpp matches them
        return texts, re.compile("|".join(map(re.escape, longest_first)))

    def _token_byte_lengths(self) -> np.ndarray:
        """How many bytes of text each token spells (control tokens as their text), to cut prompts by offset."""
        llama_cpp, buffer = self._llama_cpp, ctypes.create_string_buffer(256)
        lengths = [llama_cpp.llama_token_to_piece(self._vocab, t, buffer, len(buffer), 0, True)
                   for t in range(self.n_vocab)]
        return np.asarray([n if n >= 0 else 10**9 for n in lengths], dtype=np.int64)  # < 0: longer than 256

    def tokenize(self, text: str, protect: tuple[tuple[int, int], ...] = ()) -> list[int]:
        """The prompt's tokens; control-token text counts as a control token only outside ``protect``.

        ``protect`` holds the spans of caller-supplied text. When no control-token text
        overlaps them (the usual case) llama.cpp tokenizes the whole text at once. Otherwise
        the text is split as llama.cpp splits it, at control-token text outside the spans,
        and each piece in between is tokenized as plain text, the spans' control text included.

        The fixed text before the caller's (the system prompt and the template up to the user
        turn, about half of a decision's tokens) is tokenized once: llama.cpp tokenizes the text
        between control tokens piece by piece, so the text is cut after the last control token
        before the caller's span, the head's tokens are taken from a cache and only the rest is
        tokenized. The first prompt with a new head checks the cut against tokenizing it whole;
        a head whose cut changes any token is never cut.
        """
        cut = self._head_cut(text, protect)
        if not cut:
            return self._with_bos(self._tokenize_pieces(text, protect))
        head = self._head_tokens.get(text[:cut])
        if head == []:  # checked before: this head is never cut
            return self._with_bos(self._tokenize_pieces(text, protect))
        rest = self._tokenize_pieces(text[cut:], tuple((a - cut, b - cut) for a, b in protect))
        if head is None:
            head = self._with_bos(self._tokenize_pieces(text[:cut], ()))
            whole = self._with_bos(self._tokenize_pieces(text, protect))
            if len(self._head_tokens) >= MAX_HEADS:
                self._head_tokens.pop(next(iter(self._head_tokens)))
            self._head_tokens[text[:cut]] = head if whole == head + rest else []
            return whole
        return head + rest

    def _head_cut(self, text: str, protect: tuple[tuple[int, int], ...]) -> int:
        """The end of the last control token before the caller's first span, if fixed text follows it (else 0)."""
        if not protect or self._control_re is None:
            return 0
        first = min(start for start, _ in protect)
        ends = [match.end() for match in self._control_re.finditer(text, 0, first)]
        return ends[-1] if ends and ends[-1] < first else 0

    def _with_bos(self, tokens: list[int]) -> list[int]:
        if self._add_bos and self._bos_id >= 0 and (not tokens or tokens[0] != self._bos_id):
            tokens.insert(0, self._bos_id)
        return tokens

    def _tokenize_pieces(self, text: str, protect: tuple[tuple[int, int], ...]) -> list[int]:
        spans = sorted(protect)
        starts = [start for start, _ in spans]

        def callers(match) -> bool:
            # The spans do not overlap: only the last span starting before the match's end can overlap it.
            i = bisect.bisect_left(starts, match.end()) - 1
            return i >= 0 and match.start() < spans[i][1]

        matches = list(self._control_re.finditer(text)) if self._control_re and protect else []
        if not any(map(callers, matches)):
            return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        tokens, at = [], 0
        for match in matches:
            if callers(match):
                continue
            if match.start() > at:
                tokens += self.llm.tokenize(text[at:match.start()].encode("utf-8"), add_bos=False, special=False)
            tokens.append(self._control_tokens[match.group()])
            at = match.end()
        if at < len(text):
            tokens += self.llm.tokenize(text[at:].encode("utf-8"), add_bos=False, special=False)
        return tokens

    def prompt_tokens(self, prompt: RenderedPrompt, end: int | None = None) -> list[int]:
        """Tokens of ``prompt.text[:end]``, the caller's content kept as plain text."""
        text = prompt.text if end is None else prompt.text[:end]
        span = prompt.content_span
        return self.tokenize(text, ((span[0], min(span[1], len(text))),) if span else ())

    # -- start-up checks -------------------------------------------------------

    def _find_slots(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Check that every letter is one distinct token appended without re-tokenizing.

        The check runs on probe prompts; the template's fixed tail (end of the user
        turn plus the generation prompt) is recorded so that each request only has
        to show it ends with that same tail for the check to carry over.
        """
        probes = []
        for question in _PROBE_QUESTIONS:
            rendered = self.template.render_decision(_PROBE_STATE, question)
            probes.append(self.prompt_tokens(rendered))
        first = self.template.render_decision(_PROBE_STATE, _PROBE_QUESTIONS[0])
        if first.content_span is None:
            log.warning("the chat template does not copy the user turn verbatim; control-token text in "
                        "requests cannot be told apart from the template's own")
        slots = self._check_letters(first, probes[0])
        tail_len = _common_prefix_len(probes[0][::-1], probes[1][::-1])
        if tail_len == 0:
            raise EngineError("the chat template leaves no fixed tail after the user turn")
        return slots, tuple(probes[0][-tail_len:])

    def _find_codes(self) -> tuple[tuple[tuple[int, ...], tuple[int, ...]] | None, str | None]:
        """Group-letter and digit tokens for the two-level readout, or (None, why not)."""
        prompt = self.template.render_decision(_PROBE_STATE, _PROBE_QUESTIONS[0])
        try:
            return self._check_codes(prompt, self.prompt_tokens(prompt), len(GROUP_LETTERS)), None
        except EngineError as exc:
            log.warning("more than %d options are not available with this model: %s", len(LETTERS), exc)
            return None, str(exc)

    def _appended_token(self, prompt: RenderedPrompt, tokens: list[int], piece: str, after: str = "") -> int:
        """The one token ``piece`` adds after ``prompt.text + after`` (whose tokens are ``tokens``): appending
        it must leave those tokens as they are and add exactly one that decodes back to ``piece``."""
        extended = self._tokens_after(prompt, after + piece)
        if extended[:-1] != tokens or len(extended) != len(tokens) + 1:
            raise EngineError(f"appending {after + piece!r} to the prompt re-tokenizes it or takes more than one "
                              "token per character; this model's tokenizer cannot use these answer labels")
        token = extended[-1]
        if self.llm.detokenize([token]).decode("utf-8", errors="replace") != piece:
            raise EngineError(f"the token for {piece!r} does not decode back to {piece!r}")
        return token

    def _check_letters(self, prompt: RenderedPrompt, tokens: list[int]) -> tuple[int, ...]:
        slots = tuple(self._appended_token(prompt, tokens, letter) for letter in LETTERS)
        if len(set(slots)) != len(slots):
            raise EngineError("two answer letters map to the same token")
        return slots

    def _check_codes(self, prompt: RenderedPrompt, tokens: list[int], n_groups: int):
        """Each code (group letter + digit) must be exactly those two tokens appended to the prompt."""
        groups, digits = [], None
        for letter in GROUP_LETTERS[:n_groups]:
            group = self._appended_token(prompt, tokens, letter)
            row = tuple(self._appended_token(prompt, tokens + [group], digit, after=letter) for digit in DIGITS)
            if digits is None:
                digits = row
            elif row != digits:
                raise EngineError(f"the digits after {letter!r} are tokenized differently from those after 'A'")
            groups.append(group)
        if len(set(groups)) != len(groups) or len(set(digits)) != len(digits):
            raise EngineError("two group letters or two digits map to the same token")
        return tuple(groups), digits

    def _tokens_after(self, prompt: RenderedPrompt, answer: str) -> list[int]:
        return self.prompt_tokens(RenderedPrompt(prompt.text + answer, prompt.state_end, prompt.content_span))

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
            "runtime": {"llama_cpp_python": getattr(llama_cpp, "__version__", "unknown"),
                        "llama_cpp_system": self.runtime.system_info,
                        "extra_buffer_types": self.runtime.extra_buffers,
                        "flash_attention": self.flash_attention},
        }

    # -- decisions -------------------------------------------------------------

    def decide(self, batch: DecisionBatch) -> tuple[list[dict], dict]:
        """Score every question of the batch; returns (results, batch timing in ms)."""
        items = [ScoringItem(self._render(batch, i, q), len(q.options), temperature=q.temperature,
                             field="state") for i, q in enumerate(batch.questions)]
        scored, timing = self.score_items(items)
        results = []
        for question, result in zip(batch.questions, scored):
            n = len(question.options)
            top = result.pop("top_token")
            results.append({
                "id": question.id if not batch.single else batch.id,
                "option_ids": [o.id for o in question.options],
                "probabilities": result["probabilities"],
                "option_logits": result["option_logits"],
                "answer_token_ids": list(self.slot_tokens[:n]),
                "answer_slots": list(LETTERS[:n]),
                "input_tokens": result["input_tokens"],
                "allowed_token_mass": result["allowed_token_mass"],
                "top_vocab_token": {"id": top, "text": self.llm.detokenize([top], special=True)
                                    .decode("utf-8", errors="replace")},
                "temperature": question.temperature,
                "prompt_sha256": result["prompt_sha256"],
                "prompt_version": PROMPT_VERSION,
                "readout": READOUT_METHODS[result["readout"]],
                "question_eval_ms": result["question_eval_ms"],
            })
        return results, {k: timing[k] for k in ("tokenize_ms", "prefix_eval_ms", "evaluate_ms",
                                                "shared_prefix_tokens")}

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

    def score_items(self, items: list[ScoringItem]) -> tuple[list[dict], dict]:
        """Probabilities over each item's options; every item shares the prefix up to the state.

        The one evaluation path: decisions and Jev questions, letter slots and two-level codes.
        An item's result depends only on its own prompt: identical prompts are evaluated once,
        and each prompt is evaluated from the same cached prefix whatever else is in the list.
        Returns (one result per item, timing incl. ``input_tokens``: the tokens the model read,
        shared prefix once, plus the code tokens of two-level readouts).
        """
        t0 = time.perf_counter()
        token_lists = []
        for item in items:
            tokens = self._tokens_that_fit(item.prompt, item.field, loc=item.loc)
            coded = item.n_options > len(self.slot_tokens)
            self._check_fits(item.prompt, tokens, item.field, loc=item.loc, extra=1 if coded else 0,
                             n_options=item.n_options)
            token_lists.append(tokens)
        unique: dict[tuple[tuple[int, ...], float], int] = {}
        for tokens, item in zip(token_lists, items):
            unique.setdefault((tuple(tokens), item.temperature), len(unique))
        distinct = [list(t) for t, _ in unique]
        prefix = self._prefix_tokens(items[0].prompt, distinct)  # distinct[0] is items[0]'s prompt
        first_item = {}
        for tokens, item in zip(token_lists, items):
            first_item.setdefault(unique[(tuple(tokens), item.temperature)], item)
        t1 = time.perf_counter()

        def visit(index: int, tokens: list[int], logits: np.ndarray, eval_ms: float) -> dict:
            started = time.perf_counter()
            item = first_item[index]
            result = self._read(tokens, logits, item.n_options, item.temperature)
            result["question_eval_ms"] = eval_ms + (time.perf_counter() - started) * 1000.0
            return result

        computed, timing = self._evaluate(items[0].prompt, prefix, distinct, visit)
        results = []
        for item, tokens in zip(items, token_lists):
            result = dict(computed[unique[(tuple(tokens), item.temperature)]])
            result["prompt_sha256"] = hashlib.sha256(item.prompt.text.encode("utf-8")).hexdigest()
            results.append(result)
        read = len(prefix) + sum(len(t) - len(prefix) + r["forward_passes"] - 1 for t, r in zip(distinct, computed))
        return results, {"tokenize_ms": (t1 - t0) * 1000.0, **timing, "input_tokens": read,
                         "distinct_prompts": len(distinct)}

    def _read(self, tokens: list[int], logits: np.ndarray, n: int, temperature: float) -> dict:
        """The readout at the prompt's end: letter slots for up to 16 options, else two-level codes."""
        if n <= len(self.slot_tokens):
            slot_logits = logits[list(self.slot_tokens[:n])].astype(np.float64)
            probabilities = _softmax(slot_logits / temperature)
            mass = float(np.exp(_logsumexp(slot_logits) - _logsumexp(logits)))
            method, passes, reported = READOUT_LETTER_SLOTS, 1, [float(v) for v in slot_logits]
        else:
            probabilities, mass, passes = self._two_level(tokens, logits, n, temperature)
            method, reported = READOUT_TWO_LEVEL, None
        return {
            "probabilities": [float(p) for p in probabilities],
            "option_logits": reported,
            "readout": method,
            "forward_passes": passes,
            "input_tokens": len(tokens),
            "allowed_token_mass": mass,
            "top_token": int(np.argmax(logits)),
        }

    def _two_level(self, tokens: list[int], logits: np.ndarray, n: int,
                   temperature: float) -> tuple[np.ndarray, float, int]:
        """P(group) at the prompt's end, then P(member | group) after each group letter."""
        groups, digits = self.code_tokens
        width = len(digits)
        n_groups = -(-n // width)
        group_logits = logits[list(groups[:n_groups])].astype(np.float64)
        p_group = _softmax(group_logits / temperature)
        log_total = _logsumexp(logits)
        # A recurrent memory cannot be cut back by one token: save the sequence after the prompt.
        checkpoint = self._save_sequence(partial=True) if self.recurrent or self.prefix_mode == "restore" else None
        probabilities, mass = [], 0.0
        for g in range(n_groups):
            members = min(width, n - g * width)
            self._rewind(tokens, checkpoint)
            self._eval([groups[g]])
            after = self._last_logits()
            digit_logits = after[list(digits[:members])].astype(np.float64)
            probabilities.extend(p_group[g] * _softmax(digit_logits / temperature))
            mass += float(np.exp(group_logits[g] - log_total + _logsumexp(digit_logits) - _logsumexp(after)))
        return np.asarray(probabilities), mass, 1 + n_groups

    def _render(self, batch: DecisionBatch, index: int, question: Question) -> RenderedPrompt:
        if len(question.options) > len(self.slot_tokens):
            raise InvalidValue(f"at most {len(self.slot_tokens)} options fit the answer slots",
                               self._field(batch, index, "options"))
        try:
            return self.template.render_decision(batch.state, question)
        except TemplateError as exc:
            raise InvalidValue(f"the model's chat template refused the prompt: {exc}", None) from None

    @staticmethod
    def _field(batch: DecisionBatch, index: int, name: str) -> str:
        return name if batch.single else f"questions[{index}].{name}"

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
                    extra: int = 0, n_options: int = 0) -> None:
        limit = self.llm.n_ctx()
        if len(tokens) + extra >= limit:
            raise PromptTooLong(
                f"the prompt is {len(tokens)} tokens but the context holds {limit}; shorten the state or "
                "question (prompts are never truncated) or raise SM_LLAMA_CPP_CTX_SIZE",
                field, loc=loc,
            )
        if tuple(tokens[-len(self._tail):]) != self._tail:
            # The request's text merged with the template's tail; check the slots directly, on the prompt's
            # last characters only (an answer letter can only merge with what comes just before it), so a
            # long state is not tokenized again for each of up to 16 letters and 260 codes.
            tail = _tail_of(prompt, TAIL_CHECK_CHARS)
            tail_tokens = self.prompt_tokens(tail)
            try:
                self._check_letters(tail, tail_tokens)
                if n_options > len(self.slot_tokens):
                    self._check_codes(tail, tail_tokens, -(-n_options // len(DIGITS)))
            except EngineError as exc:
                raise InvalidValue(f"this prompt cannot be read with answer letters: {exc}", field, loc=loc) from None

    def _prefix_tokens(self, first: RenderedPrompt, token_lists: list[list[int]]) -> tuple[int, ...]:
        if self.prefix_mode == "off" or first.state_end is None:
            return ()
        own = token_lists[0]
        ends = np.cumsum(self._piece_bytes[own])
        if own and own[0] == self._bos_id and not first.text.startswith(self._bos_text):
            ends -= ends[0]  # the BOS the engine added spells nothing of the text
        if len(own) and ends[-1] == len(first.text.encode("utf-8")):
            # The tokens spell the text byte for byte: the cut is at the last one that ends within the state
            # (the same in every prompt about it, as the same fixed text follows the state in all).
            length = int(np.searchsorted(ends, len(first.text[: first.state_end].encode("utf-8")), side="right"))
        else:
            # One token of margin: the last token of the state's own tokens may merge with what follows.
            length = max(0, len(self.prompt_tokens(first, first.state_end)) - 1)
        for tokens in token_lists[1:]:
            length = min(length, _common_prefix_len(own, tokens))
        return tuple(own[: min(length, len(own) - 1)])

    def _enter_prefix(self, first: RenderedPrompt, prefix: tuple[int, ...], tokens: list[int]) -> bool:
        """Bring the context to the end of the shared prefix, evaluating only what is not cached.

        With ``trim`` the first prompt (``tokens``) is evaluated whole from where it departs from the
        cache, in as few llama_decode calls as the batch size allows; the others are cut back to the
        prefix. ``restore`` evaluates up to the prefix and saves the sequence there first, as a recurrent
        memory cannot be cut back to it afterwards. Unless cross-request reuse is on, nothing past the
        fixed head is taken from an earlier request: ``trim`` cuts the cache back to the head at most,
        ``restore`` starts from the head's saved sequence. Returns whether the whole prefix came from
        an earlier request (for the log only).
        """
        across = self.settings.cross_request_reuse
        if self.prefix_mode == "trim" and prefix:
            cached = self.llm.input_ids[: self.llm.n_tokens]
            # At least two new tokens: llama.cpp's CPU kernels take another path for a one-token batch, and a
            # prompt's last token read alone can differ from the same token read with others (~1e-3 in a logit).
            common = max(0, min(_common_prefix_len(cached, tokens), len(tokens) - 2))
            if not across:
                head = self._head(first, prefix)
                common = min(common, len(head.tokens) if head is not None else 0)
            self._prefix = None
            if self.state_cache is not None:
                hit = self.state_cache.longest(tokens, more_than=common)
                if hit is not None:  # a recent request shares more than the context holds: start from there
                    entry, shared = hit
                    self._reset_context()
                    self._load_sequence(entry.state)
                    if entry.logits is not None and shared == len(entry.tokens) == len(tokens):
                        self._set_position(len(tokens), tokens)  # this very prompt: read its kept logits
                        self._first_logits = (entry.tokens, entry.logits)
                        self._prefix = _Prefix(prefix, None)
                        return True
                    common = min(shared, len(tokens) - 2)
                    self._set_position(common, tokens[:common])
            self._set_position(common)  # eval() removes the KV cells past it
            self._eval(tokens[common:])
            self._prefix = _Prefix(prefix, None)
            if self.state_cache is not None and self.state_cache.get(tokens) is None:
                self.state_cache.put(CachedState(tuple(tokens), self._save_sequence(), logits=self._last_logits()))
            return common >= len(prefix)
        if across and self._prefix is not None and self._prefix.tokens == prefix and prefix:
            return True
        cached = self.state_cache.get(prefix) if self.state_cache is not None and prefix else None
        if cached is not None:
            self._reset_context()
            self._prefix = None
            self._load_sequence(cached.state)
            self._set_position(len(prefix), prefix)
            self._prefix = _Prefix(prefix, cached.partial)
            return True
        head = self._head(first, prefix) if self.prefix_mode == "restore" and prefix else None
        self._reset_context()
        self._prefix = None
        start = 0
        if head is not None:
            self._load_sequence(head.state)
            self._set_position(len(head.tokens), head.tokens)
            start = len(head.tokens)
        if start < len(prefix):
            self._eval(list(prefix[start:]))
        state = self._save_sequence(partial=True) if self.prefix_mode == "restore" and prefix else None
        self._prefix = _Prefix(prefix, state)
        if self.state_cache is not None and prefix:
            self.state_cache.put(CachedState(prefix, self._save_sequence(), state))
        return False

    def _head(self, prompt: RenderedPrompt, prefix: tuple[int, ...]) -> _Prefix | None:
        """The prompt's fixed head, if its tokens begin this request's prefix: its tokens, and with
        ``restore`` the sequence saved after them (evaluated and saved on first use)."""
        if prompt.state_start is None:
            return None
        text = prompt.text[: prompt.state_start]  # the system prompt and template only: no caller text
        head = self._heads.get(text)
        if head is None:
            # One token of margin, as at the state's end: the head's last token may merge with the state.
            tokens = tuple(self.prompt_tokens(prompt, prompt.state_start)[:-1])
            if not tokens or prefix[: len(tokens)] != tokens:
                return None
            state = None
            if self.prefix_mode == "restore":
                self._reset_context()
                self._prefix = None
                self._eval(list(tokens))
                state = self._save_sequence()
            head = _Prefix(tokens, state)
            if len(self._heads) >= MAX_HEADS:
                self._heads.pop(next(iter(self._heads)))
            self._heads[text] = head
        return head if prefix[: len(head.tokens)] == head.tokens else None

    def _rewind(self, tokens, saved: bytearray | None) -> None:
        """Return to the state right after ``tokens``: cut the KV cache back, or load the recurrent part saved
        there (a partial snapshot) and cut the attention cells past ``tokens``."""
        if self._holds(tokens):
            return  # nothing evaluated past them yet
        if not tokens:
            self._reset_context()
        elif saved is None:
            self._set_position(len(tokens))  # eval() removes the KV cells past it
        else:
            self._load_sequence(saved, partial=True)
            self._set_position(len(tokens), tokens)  # eval() removes the attention cells past it

    def _holds(self, tokens) -> bool:
        """Whether the context holds exactly ``tokens``. The same length is not enough: with ``restore`` a
        cached state may be followed by another question of the same length."""
        n = self.llm.n_tokens
        return n == len(tokens) and (n == 0 or bool(np.array_equal(self.llm.input_ids[:n], tokens)))

    def _set_position(self, n: int, tokens=None) -> None:
        # Llama.eval() continues from n_tokens and records what it evaluated in input_ids; it has no public
        # way to move back but reset() (to 0), so the engine sets them (and only here and in _reset_context).
        if tokens is not None:
            self.llm.input_ids[:n] = tokens
        self.llm.n_tokens = n

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
            self._reset_context()
            self._prefix = None
            raise

    def _eval(self, tokens: list[int]) -> None:
        with self._within_limit():
            self.llm.eval(tokens)
        self.tokens_evaluated += len(tokens)

    def _stop_if_expired(self) -> None:
        if not self._deadline.expired:
            return
        # What an aborted evaluation left in the context is not worth keeping: start afresh.
        self._reset_context()
        self._prefix = None
        raise TimedOut(
            f"the request held the model for more than {self._deadline.seconds:g} s and was stopped "
            "(DECISION_ADAPTER_REQUEST_TIMEOUT); send a shorter state or fewer questions, or raise the limit")

    def _reset_context(self) -> None:
        self.llm.reset()
        memory = self._llama_cpp.llama_get_memory(self.llm.ctx)
        if memory is not None:
            # Forget every cell but leave the buffers' bytes: llama.cpp zeroed them once at start-up, empty
            # cells are masked out of attention and a recurrent state starts from zeros when its sequence
            # starts, so zeroing again changes no answer; it would write the whole KV buffer (23 KiB per
            # token of context with the embedded model: 4 ms at 4096) for each restored question.
            self._llama_cpp.llama_memory_clear(memory, False)

    def _save_sequence(self, *, partial: bool = False) -> bytearray:
        """Sequence 0's state: whole, or (``partial``) only the part that cannot be cut back, the recurrent
        states of a hybrid or recurrent memory (llama.cpp writes a plain KV cache whole either way)."""
        llama_cpp, ctx = self._llama_cpp, self.llm.ctx
        flags = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY if partial else 0
        size = llama_cpp.llama_state_seq_get_size_ext(ctx, 0, flags)
        state = bytearray(size)  # llama.cpp writes straight into it: no second copy of a state of megabytes
        written = llama_cpp.llama_state_seq_get_data_ext(ctx, (ctypes.c_uint8 * size).from_buffer(state), size, 0,
                                                         flags)
        if written == 0:
            raise EngineError("llama.cpp could not save the sequence state for prefix reuse")
        del state[written:]
        return state

    def _load_sequence(self, state: bytearray, *, partial: bool = False) -> None:
        """Replace sequence 0's state (``partial``: its recurrent part) with a saved one."""
        llama_cpp = self._llama_cpp
        flags = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY if partial else 0
        # llama.cpp only reads it: point at the saved bytes themselves instead of copying them per question.
        data = (ctypes.c_uint8 * len(state)).from_buffer(state)
        if llama_cpp.llama_state_seq_set_data_ext(self.llm.ctx, data, len(state), 0, flags) == 0:
            raise EngineError("llama.cpp could not restore the sequence state for prefix reuse")

    def _last_logits(self) -> np.ndarray:
        """The last position's logits over the vocabulary, float32 as llama.cpp wrote them (a copy: the next
        evaluation overwrites its buffer); readouts take the slots' logits as float64."""
        pointer = self._llama_cpp.llama_get_logits_ith(self.llm.ctx, -1)
        return np.ctypeslib.as_array(pointer, shape=(self.n_vocab,)).copy()

    # -- chat ------------------------------------------------------------------

    def _free_sampler(self) -> None:
        # llama-cpp-python keeps the last completion's sampler chain in the private ``_sampler``, inside a
        # reference cycle that only a full garbage collection breaks, with ~0.5 MiB of llama.cpp's memory per
        # chain: a worker's RSS grew with every chat until Python happened to collect. No public call frees it.
        sampler, self.llm._sampler = self.llm._sampler, None
        if sampler is not None:
            sampler.close()

    def chat(self, request: ChatRequest) -> dict:
        """Generate an answer; message contents are tokenized as plain text, as decisions are."""
        self._reset_context()  # start clean: the decision prefix cache is not chat's
        self._prefix = None
        messages = list(request.messages)
        try:
            text, spans = self.template.render_with_spans(messages)
        except TemplateError as exc:
            raise InvalidValue(f"the model's chat template refused the conversation: {exc}", "messages") from None
        if spans is None:  # the template rewrites contents: control text in them cannot be told apart
            for i, message in enumerate(messages):
                if self._control_re and self._control_re.search(message["content"]):
                    raise InvalidValue("this model's chat template rewrites message contents, so control-token "
                                       "text in them cannot be kept as plain text; remove it",
                                       f"messages[{i}].content")
        tokens = self.tokenize(text, spans or ())
        if len(tokens) >= self.llm.n_ctx():
            raise PromptTooLong(
                f"the conversation is {len(tokens)} tokens but the context holds {self.llm.n_ctx()}; "
                "shorten it (it is never truncated)", "messages")
        kwargs = {"prompt": tokens, "max_tokens": request.max_tokens, "temperature": request.temperature,
                  "top_p": request.top_p, "stream": False}
        # llama-cpp-python keeps a seed it was given for later calls: give every request its own, so an
        # unseeded request never samples from the previous caller's seed.
        kwargs["seed"] = request.seed if request.seed is not None else secrets.randbits(31)
        if request.stop:
            kwargs["stop"] = list(request.stop)
        try:
            with self._within_limit():
                completion = self.llm.create_completion(**kwargs)
        finally:
            self._free_sampler()
        self._reset_context()
        choice = completion["choices"][0]
        return {
            "id": "chat" + completion["id"],
            "object": "chat.completion",
            "created": completion["created"],
            "model": self.model_files.gguf.name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": choice["text"]},
                         "logprobs": None, "finish_reason": choice["finish_reason"]}],
            "usage": completion["usage"],
        }

"""The one llama.cpp context and the decision readout on top of it.

A decision is one forward pass: the rendered prompt ends where the model would
write its answer, and the logits at that last position, restricted to the
answer-slot tokens (the letters A, B, ...), give one probability per option.
Nothing is generated.

Prefix reuse: every question about a state shares the prompt up to the end of
that state. The engine evaluates that prefix once and then each question from
it. Two ways to get back to the prefix:

* ``trim``: cut the KV cache back to the prefix length (attention-only models);
* ``restore``: snapshot the sequence's whole state after the prefix and load it
  back before each question. Hybrid and recurrent models (Qwen3.5) need this,
  because llama.cpp cannot cut the tail of a recurrent memory.

``auto`` picks ``restore`` for hybrid/recurrent models and ``trim`` otherwise.
Single decisions take the same path (prefix, then question), so a question
scored alone and the same question scored in a batch see identical chunking.

The engine is not thread-safe; the app lets one request at a time use it.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import re
import time
from dataclasses import dataclass

import numpy as np

from .errors import InvalidValue, PromptTooLong
from .model_files import ModelFiles
from .prompt import LETTERS, PROMPT_VERSION, ChatTemplate, RenderedPrompt, TemplateError
from .schema import ChatRequest, DecisionBatch, Option, Question
from .settings import Settings

log = logging.getLogger(__name__)

READOUT = (
    "One forward pass over the rendered prompt; the logits at the last position, restricted to "
    "the answer-slot tokens of the declared options, softmaxed (divided by the temperature). "
    "No tokens were generated."
)

# Used once at start-up to find the slot tokens and the template's fixed tail.
_PROBE_STATE = "probe state"
_PROBE_QUESTIONS = (
    Question("probe-1", "Which option fits?", tuple(Option(l, f"option {l}") for l in LETTERS)),
    Question("probe-2", "Pick one, please.", tuple(Option(l, f"choice number {i}") for i, l in enumerate(LETTERS))),
)

_QUANT_RE = re.compile(r"(?:^|[._-])((?:IQ|Q)\d[A-Z0-9_]*?|BF16|F16|F32)(?:\.gguf$|[.-])", re.IGNORECASE)


class EngineError(RuntimeError):
    """The model cannot be served by the decision readout (e.g. no usable answer slots)."""


@dataclass
class _Prefix:
    tokens: tuple[int, ...]
    state: bytes | None  # restore mode: the sequence state after the prefix


def _logsumexp(values: np.ndarray) -> float:
    peak = float(np.max(values))
    return peak + float(np.log(np.sum(np.exp(values - peak))))


def _common_prefix_len(a, b) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def quantization_of(file_name: str, metadata: dict) -> str | None:
    match = _QUANT_RE.search(file_name)
    if match:
        return match.group(1).upper()
    return metadata.get("general.file_type")


class Engine:
    def __init__(self, settings: Settings, model: ModelFiles):
        import llama_cpp

        self._llama_cpp = llama_cpp
        self.settings = settings
        self.model_files = model
        started = time.perf_counter()
        self.llm = llama_cpp.Llama(
            model_path=str(model.gguf), logits_all=False, verbose=False, **settings.llama_kwargs()
        )
        self.load_seconds = time.perf_counter() - started
        self.metadata = dict(self.llm.metadata)
        template_source = self.metadata.get("tokenizer.chat_template")
        if not template_source:
            raise EngineError(
                f"{model.gguf.name} carries no chat template (tokenizer.chat_template); "
                "use an instruction-tuned GGUF"
            )
        vocab_model = self.llm._model
        self.n_vocab = self.llm.n_vocab()
        self._bos_id = vocab_model.token_bos()
        self._add_bos = vocab_model.add_bos_token()
        bos_text = vocab_model.token_get_text(self._bos_id) if self._bos_id >= 0 else ""
        eos_text = vocab_model.token_get_text(self.llm.token_eos()) if self.llm.token_eos() >= 0 else ""
        self.template = ChatTemplate(template_source, bos_text, eos_text)

        self.recurrent = bool(llama_cpp.llama_model_is_recurrent(vocab_model.model)) or bool(
            llama_cpp.llama_model_is_hybrid(vocab_model.model))
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

        self.slot_tokens, self._tail = self._find_slots()
        self.n_layer = llama_cpp.llama_model_n_layer(vocab_model.model)
        gpu = bool(llama_cpp.llama_supports_gpu_offload())
        requested = settings.n_gpu_layers_for_llama
        wanted = self.n_layer + 1 if requested < 0 else requested  # +1: the output layer
        self.offloaded_layers = min(wanted, self.n_layer + 1) if gpu else 0
        self.info = self._model_info(gpu)
        log.info("llama.cpp system info: %s", llama_cpp.llama_print_system_info().decode(errors="replace").strip())
        log.info("loaded %s in %.2f s; offloaded %d/%d layers to GPU; prefix reuse: %s",
                 model.gguf.name, self.load_seconds, self.offloaded_layers, self.n_layer + 1, self.prefix_mode)

    # -- start-up checks -------------------------------------------------------

    def tokenize(self, text: str) -> list[int]:
        tokens = self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        if self._add_bos and self._bos_id >= 0 and (not tokens or tokens[0] != self._bos_id):
            tokens.insert(0, self._bos_id)
        return tokens

    def _find_slots(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Check that every letter is one distinct token appended without re-tokenizing.

        The check runs on probe prompts; the template's fixed tail (end of the user
        turn plus the generation prompt) is recorded so that each request only has
        to show it ends with that same tail for the check to carry over.
        """
        probes = []
        for question in _PROBE_QUESTIONS:
            rendered = self.template.render_decision(_PROBE_STATE, question)
            probes.append(self.tokenize(rendered.text))
        first = self.template.render_decision(_PROBE_STATE, _PROBE_QUESTIONS[0]).text
        slots = self._check_letters(first, probes[0])
        tail_len = _common_prefix_len(probes[0][::-1], probes[1][::-1])
        if tail_len == 0:
            raise EngineError("the chat template leaves no fixed tail after the user turn")
        return slots, tuple(probes[0][-tail_len:])

    def _check_letters(self, text: str, tokens: list[int]) -> tuple[int, ...]:
        slots = []
        for letter in LETTERS:
            extended = self.tokenize(text + letter)
            if extended[:-1] != tokens or len(extended) != len(tokens) + 1:
                raise EngineError(
                    f"appending {letter!r} to the prompt re-tokenizes it or takes more than one token; "
                    "this model's tokenizer cannot use letter answer slots"
                )
            token = extended[-1]
            if self.llm.detokenize([token]).decode("utf-8", errors="replace") != letter:
                raise EngineError(f"the answer-slot token for {letter!r} does not decode back to {letter!r}")
            slots.append(token)
        if len(set(slots)) != len(slots):
            raise EngineError("two answer letters map to the same token")
        return tuple(slots)

    def _model_info(self, gpu: bool) -> dict:
        llama_cpp = self._llama_cpp
        source = self.model_files.source
        entry = next((e for e in (self.model_files.manifest or {}).get("files", [])
                      if e.get("path") == self.model_files.gguf.name), {})
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
            "gpu_offload_supported": gpu,
            "threads": self.llm.context_params.n_threads,
            "recurrent_or_hybrid": self.recurrent,
            "prefix_reuse": self.prefix_mode,
            "runtime": {"llama_cpp_python": getattr(llama_cpp, "__version__", "unknown"),
                        "llama_cpp_system": llama_cpp.llama_print_system_info().decode(errors="replace").strip()},
        }

    # -- decisions -------------------------------------------------------------

    def decide(self, batch: DecisionBatch) -> tuple[list[dict], dict]:
        """Score every question of the batch; returns (results, batch timing in ms)."""
        t0 = time.perf_counter()
        rendered = [self._render(batch, i, q) for i, q in enumerate(batch.questions)]
        token_lists = [self.tokenize(r.text) for r in rendered]
        for i, tokens in enumerate(token_lists):
            self._check_fits(batch, i, tokens)
        prefix = self._prefix_tokens(rendered[0], token_lists)
        t1 = time.perf_counter()

        prefix_reused = self._enter_prefix(prefix)
        t2 = time.perf_counter()
        results = []
        for question, r, tokens in zip(batch.questions, rendered, token_lists):
            q_start = time.perf_counter()
            self._rewind_to_prefix(prefix)
            self.llm.eval(tokens[len(prefix):])
            logits = self._last_logits()
            q_eval = time.perf_counter()
            results.append(self._readout(batch, question, r.text, tokens, logits,
                                         eval_ms=(q_eval - q_start) * 1000.0))
        t3 = time.perf_counter()
        timing = {
            "tokenize_ms": (t1 - t0) * 1000.0,
            "prefix_eval_ms": (t2 - t1) * 1000.0,
            "evaluate_ms": (t3 - t1) * 1000.0,
            "shared_prefix_tokens": len(prefix),
            "prefix_reused_from_cache": prefix_reused,
        }
        return results, timing

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

    def _check_fits(self, batch: DecisionBatch, index: int, tokens: list[int]) -> None:
        limit = self.llm.n_ctx()
        if len(tokens) >= limit:
            raise PromptTooLong(
                f"the prompt is {len(tokens)} tokens but the context holds {limit}; shorten the state or "
                "question (prompts are never truncated) or raise SM_LLAMA_CPP_CTX_SIZE",
                "state",
            )
        if tuple(tokens[-len(self._tail):]) != self._tail:
            # The request's text merged with the template's tail; check the slots directly.
            self._check_letters(self.llm.detokenize(tokens, special=True).decode("utf-8", errors="replace"), tokens)

    def _prefix_tokens(self, first: RenderedPrompt, token_lists: list[list[int]]) -> tuple[int, ...]:
        if self.prefix_mode == "off" or first.state_end is None:
            return ()
        cut = self.tokenize(first.text[: first.state_end])
        # One token of margin: the last token of the cut may merge with what follows.
        length = max(0, len(cut) - 1)
        for tokens in token_lists:
            length = min(length, _common_prefix_len(cut, tokens), len(tokens) - 1)
        return tuple(token_lists[0][:length])

    def _enter_prefix(self, prefix: tuple[int, ...]) -> bool:
        """Evaluate the shared prefix, unless the cached one is the same."""
        if self._prefix is not None and self._prefix.tokens == prefix and prefix:
            return True
        self._reset_context()
        self._prefix = None
        if prefix:
            self.llm.eval(list(prefix))
        state = self._save_sequence() if self.prefix_mode == "restore" and prefix else None
        self._prefix = _Prefix(prefix, state)
        return False

    def _rewind_to_prefix(self, prefix: tuple[int, ...]) -> None:
        if self.llm.n_tokens == len(prefix):
            return  # nothing evaluated past the prefix yet
        if self.prefix_mode == "restore" and prefix:
            self._reset_context()
            self._load_sequence(self._prefix.state)
            self.llm.input_ids[: len(prefix)] = prefix
            self.llm.n_tokens = len(prefix)
        elif prefix:
            self.llm.n_tokens = len(prefix)  # eval() removes the KV cells past n_tokens
        else:
            self._reset_context()

    def _reset_context(self) -> None:
        self.llm.n_tokens = 0
        memory = self._llama_cpp.llama_get_memory(self.llm._ctx.ctx)
        if memory is not None:
            self._llama_cpp.llama_memory_clear(memory, True)

    def _save_sequence(self) -> bytes:
        llama_cpp, ctx = self._llama_cpp, self.llm._ctx.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, 0)
        if written == 0:
            raise EngineError("llama.cpp could not save the sequence state for prefix reuse")
        return bytes(buffer[:written])

    def _load_sequence(self, state: bytes) -> None:
        buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if self._llama_cpp.llama_state_seq_set_data(self.llm._ctx.ctx, buffer, len(state), 0) == 0:
            raise EngineError("llama.cpp could not restore the sequence state for prefix reuse")

    def _last_logits(self) -> np.ndarray:
        pointer = self._llama_cpp.llama_get_logits_ith(self.llm._ctx.ctx, -1)
        return np.ctypeslib.as_array(pointer, shape=(self.n_vocab,)).astype(np.float64, copy=True)

    def _readout(self, batch: DecisionBatch, question: Question, text: str, tokens: list[int],
                 logits: np.ndarray, eval_ms: float) -> dict:
        n = len(question.options)
        slot_ids = list(self.slot_tokens[:n])
        slot_logits = logits[slot_ids]
        scaled = slot_logits / question.temperature
        probabilities = np.exp(scaled - _logsumexp(scaled))
        top = int(np.argmax(logits))
        return {
            "id": question.id if not batch.single else batch.id,
            "option_ids": [o.id for o in question.options],
            "probabilities": [float(p) for p in probabilities],
            "option_logits": [float(v) for v in slot_logits],
            "answer_token_ids": slot_ids,
            "answer_slots": list(LETTERS[:n]),
            "input_tokens": len(tokens),
            "allowed_token_mass": float(np.exp(_logsumexp(slot_logits) - _logsumexp(logits))),
            "top_vocab_token": {"id": top, "text": self.llm.detokenize([top], special=True)
                                .decode("utf-8", errors="replace")},
            "temperature": question.temperature,
            "prompt_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            "prompt_version": PROMPT_VERSION,
            "readout": READOUT,
            "question_eval_ms": eval_ms,
        }

    # -- chat ------------------------------------------------------------------

    def chat(self, request: ChatRequest) -> dict:
        self._reset_context()  # start clean: the decision prefix cache is not chat's
        self._prefix = None
        kwargs = {"messages": list(request.messages), "max_tokens": request.max_tokens,
                  "temperature": request.temperature, "top_p": request.top_p, "stream": False}
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.stop:
            kwargs["stop"] = list(request.stop)
        prompt_tokens = len(self.tokenize(self.template.render(list(request.messages))))
        if prompt_tokens >= self.llm.n_ctx():
            raise PromptTooLong(
                f"the conversation is {prompt_tokens} tokens but the context holds {self.llm.n_ctx()}; "
                "shorten it (it is never truncated)", "messages")
        completion = self.llm.create_chat_completion(**kwargs)
        self._reset_context()
        completion["model"] = self.model_files.gguf.name
        return completion

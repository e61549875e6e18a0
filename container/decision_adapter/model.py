"""The loaded model, read-only once started and shared by every context (lane) of it: the weights, the
tokenizer, the chat template, the answer labels' tokens (slots.py), the calibration in force, and what
model info says of them.

Loading checks what would otherwise fail later: a calibration fit for another model, GPU offload asked of a
build without a GPU backend (or one that offloaded nothing), a GGUF llama.cpp cannot load, a model without a
chat template, a tokenizer that cannot read the answer letters. The ``Llama`` object that loads the weights
also holds the first context (llama-cpp-python makes one per load); llama_context.py's ``Context`` takes it over,
and ``runtime.another_context`` makes the others on the same weights.

The model answers the ``Labels`` seam (seams.py): what a readout renders a question with and reads.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any

import numpy as np

from . import runtime, served_calibration, slots
from .caller_errors import InvalidValue, PromptTooLong
from .model_files import ModelFiles
from .prompt import DIGITS, GROUP_LETTERS, PROMPT_VERSION, ChatTemplate, option_labels
from .questions import Loc, RenderedPrompt
from .seams import CodeTokens, EngineError
from .settings import Settings
from .tokens import PromptTokenizer, longest_token_chars

log = logging.getLogger(__name__)

_QUANT_RE = re.compile(r"(?:^|[._-])((?:IQ|Q)\d[A-Z0-9_]*?|BF16|F16|F32)(?:\.gguf$|[.-])", re.IGNORECASE)


def quantization_of(file_name: str, metadata: dict[str, Any]) -> str | None:
    match = _QUANT_RE.search(file_name)
    if match:
        return match.group(1).upper()
    return metadata.get("general.file_type")


class Model:
    """The weights, tokenizer, template and answer labels; ``info`` is what model info reports of them."""

    def __init__(self, settings: Settings, files: ModelFiles, rt: runtime.Runtime | None = None):
        import llama_cpp

        self.llama_cpp = llama_cpp
        self.settings = settings
        self.files = files
        self.runtime = rt or runtime.inspect(settings.extra_buffers)
        log.info("llama.cpp system info: %s", self.runtime.system_info)
        log.info("extra buffer types: %s", self.runtime.extra_buffers_reason)
        try:  # before the model loads: a file fit for another build stops the start-up at once
            self.calibration = served_calibration.load(
                files.calibration, files.sha256, files.gguf.name, PROMPT_VERSION, settings.calibration
            )
        except served_calibration.CalibrationError as exc:
            raise EngineError(str(exc)) from None
        self.gpu_offload = bool(llama_cpp.llama_supports_gpu_offload())
        if settings.n_gpu_layers and not self.gpu_offload:
            raise EngineError(
                f"GPU offload is requested (SM_LLAMA_CPP_N_GPU_LAYERS or SEMIF_N_GPU_LAYERS = "
                f"{settings.n_gpu_layers}) but llama.cpp loaded no GPU backend ({self.runtime.system_info}); a GPU "
                "instance must not serve from its CPU: deploy the GPU image (container/Dockerfile.gpu) on a GPU "
                "instance, or set the layers to 0 for a CPU endpoint"
            )
        started = time.perf_counter()
        try:
            with (
                runtime.model_params(llama_cpp, use_extra_bufts=self.runtime.extra_buffers),
                runtime.context_params(llama_cpp, flash_attn_type=runtime.FLASH_ATTN_TYPES[settings.flash_attn]),
                runtime.llama_log(llama_cpp) as load_log,
            ):
                self.llm = llama_cpp.Llama(
                    model_path=str(files.gguf),
                    logits_all=False,
                    verbose=False,
                    **settings.llama_kwargs(),  # type: ignore[arg-type]  # Llama types each keyword apart
                )
        except ValueError as exc:  # llama.cpp only says "Failed to load model from file"
            raise EngineError(
                f"llama.cpp could not load {files.gguf.name} ({exc}); the file is not a valid GGUF for this "
                "llama.cpp (truncated or corrupt?): re-extract model.tar.gz or rebuild the model package"
            ) from None
        self.load_seconds = time.perf_counter() - started
        self.metadata = dict(self.llm.metadata)
        template_source = self.metadata.get("tokenizer.chat_template")
        if not template_source:
            raise EngineError(
                f"{files.gguf.name} carries no chat template (tokenizer.chat_template); use an instruction-tuned GGUF"
            )
        vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        self.n_vocab = self.llm.n_vocab()
        self.tokenizer = PromptTokenizer(llama_cpp, self.llm)
        eos_id = self.llm.token_eos()
        eos_text = llama_cpp.llama_vocab_get_text(vocab, eos_id).decode() if eos_id >= 0 else ""
        self._template = ChatTemplate(template_source, self.tokenizer.bos_text, eos_text)
        self.max_token_chars = longest_token_chars(llama_cpp, vocab, self.n_vocab)
        self.recurrent = bool(llama_cpp.llama_model_is_recurrent(self.llm.model)) or bool(
            llama_cpp.llama_model_is_hybrid(self.llm.model)
        )
        self._slot_tokens, self.tail = slots.find_slots(self._template, self.prompt_tokens, self.llm.detokenize)
        self._code_tokens, self.codes_unavailable = slots.find_codes(
            self._template, self.prompt_tokens, self.llm.detokenize
        )
        self.n_layer = llama_cpp.llama_model_n_layer(self.llm.model)
        # What llama.cpp itself says it put on the GPU (it logs nothing about it without a GPU backend).
        offloaded: tuple[int, int] = runtime.offloaded_layers("".join(load_log)) or (0, self.n_layer + 1)
        self.offloaded_layers, self.offloadable_layers = offloaded
        self.flash_attention = runtime.flash_attention("".join(load_log), settings.flash_attn)  # the first context's
        self.context_mib = runtime.context_memory_mib("".join(load_log))  # a context's KV (and recurrent) memory
        self.loaded_threads = (self.llm.context_params.n_threads, self.llm.context_params.n_threads_batch)
        if settings.n_gpu_layers and self.offloaded_layers == 0:
            raise EngineError(
                f"GPU offload is requested ({settings.n_gpu_layers} layers) but llama.cpp offloaded none of "
                f"{self.offloadable_layers} ({self.runtime.system_info}); a GPU instance must not serve from its "
                "CPU: check that the instance has a GPU and the image is the GPU one (container/Dockerfile.gpu)"
            )
        self.info: dict[str, Any] = {}  # model info: filled by the engine once its context is settled
        self._info_lock = threading.Lock()  # the lanes report priors into it

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

    def continuation_tokens(self, text: str, loc: Loc = ()) -> tuple[int, ...]:
        """An option's text as the tokens that follow a cloze prompt: plain text, no BOS."""
        tokens = tuple(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))
        if not tokens:
            raise InvalidValue(f"an option's text {text!r} has no tokens to score; give it words", None, loc=loc)
        return tokens

    def check_length(self, prompt: RenderedPrompt, field: str | None, loc: Loc | None) -> None:
        """Refuse untokenized a text so long that not even the context's worth of the vocabulary's longest
        tokens could hold it."""
        limit = self.llm.n_ctx()
        if len(prompt.text) > limit * self.max_token_chars:
            raise PromptTooLong(
                f"the prompt is {len(prompt.text)} characters, more than a {limit}-token context can hold (no "
                f"token of this model is longer than {self.max_token_chars} characters); shorten the state or "
                "question (prompts are never truncated)",
                field,
                loc=loc,
            )

    # -- the answer labels (the Labels seam) -------------------------------------

    @property
    def template(self) -> ChatTemplate:
        return self._template

    @property
    def slot_tokens(self) -> tuple[int, ...]:
        return self._slot_tokens

    @property
    def code_tokens(self) -> CodeTokens | None:
        return self._code_tokens

    @property
    def max_options(self) -> int:
        return len(GROUP_LETTERS) * len(DIGITS) if self._code_tokens else len(self._slot_tokens)

    def option_labels(self, n: int, loc: Loc = ()) -> tuple[str, ...]:
        """Labels to show for n options; a clear 422 when this model cannot read that many."""
        if n > len(self._slot_tokens) and not self._code_tokens:
            raise InvalidValue(
                f"{n} options: this model reads at most {len(self._slot_tokens)} ({self.codes_unavailable})",
                None,
                loc=loc,
            )
        if n > self.max_options:
            raise InvalidValue(f"{n} options: at most {self.max_options} can be labelled", None, loc=loc)
        return option_labels(n)

    def label_tokens(self, n: int) -> tuple[int, ...]:
        """The answer labels' tokens a letters readout of n options reads."""
        return slots.label_tokens(self._slot_tokens, self._code_tokens, n)

    # -- what is served ----------------------------------------------------------

    def describe(self, prefix_mode: str, flash_attention: str) -> dict[str, Any]:
        """Model info as first reported, with the first context's prefix reuse and flash attention."""
        source = self.files.source
        entry = self.files.entry  # the verified manifest entry of the file loaded
        return {
            "file": self.files.gguf.name,
            "sha256": self.files.sha256,
            "size_bytes": self.files.size,
            "source_repo": entry.get("repo") or source.get("repo"),
            "source_revision": entry.get("revision") or source.get("revision"),
            "manifest_verified": self.files.manifest is not None,
            "architecture": self.metadata.get("general.architecture"),
            "name": self.metadata.get("general.name"),
            "quantization": quantization_of(self.files.gguf.name, self.metadata),
            "context_size": self.llm.n_ctx(),
            "gpu_layers_requested": self.settings.n_gpu_layers,
            "gpu_layers_offloaded": self.offloaded_layers,
            "gpu_offload_supported": self.gpu_offload,
            "threads": self.llm.context_params.n_threads,
            "recurrent_or_hybrid": self.recurrent,
            "prefix_reuse": prefix_mode,
            "order": self.settings.order,
            "readout": self.settings.readout,
            "order_priors": {},
            "calibration": None
            if self.calibration is None
            else {**self.calibration.describe(), "manifest_verified": self.files.calibration_listed},
            "runtime": {
                "llama_cpp_python": getattr(self.llama_cpp, "__version__", "unknown"),
                "llama_cpp_system": self.runtime.system_info,
                "extra_buffer_types": self.runtime.extra_buffers,
                "flash_attention": flash_attention,
            },
        }

    def report_prior(self, field: str, n: int, value: np.ndarray) -> None:
        """Show the order prior of ``n`` options in model info (priors.py) unless it already does. The check
        reads the info itself, so what it shows follows the cache whichever context measured the prior."""
        with self._info_lock:
            reported = self.info.get(field) or {}
            if str(n) in reported:
                return
            reported = {**reported, str(n): [float(v) for v in value]}
            # Replaced, never changed in place: an answer being written out may hold the old one.
            self.info[field] = dict(sorted(reported.items(), key=lambda kv: int(kv[0])))

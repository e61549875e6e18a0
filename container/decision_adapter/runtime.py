"""What llama.cpp runs on: the CPU features it reports and its extra buffer types.

ggml can keep weights in *extra buffer types* that lay them out for faster CPU
kernels: ``CPU_REPACK`` (AVX2/AVX-512 layouts for Q4_0, Q4_K, IQ4_NL, ...) and, in
a build that compiled Intel AMX, the ``AMX`` buffer type. On the AVX-512 + AMX
machines this project is built and tested on, the AMX path kills the process on
the first forward pass (SIGSEGV in ``ggml_backend_amx_mul_mat``). ml.c7i, m7i and
r7i instances are AMX CPUs too, and the DLC's llama.cpp picks an AMX-enabled CPU
variant there at run time.

``DECISION_ADAPTER_EXTRA_BUFFERS``: ``auto`` (the default) turns extra buffer types
off when llama.cpp reports AMX and leaves them on otherwise, so repacking still
speeds up AVX2 and AVX-512 machines; ``on`` and ``off`` force it. Whatever is
chosen, the worker proves it with a real forward pass before ``/ping`` says ready
(``Engine.prove``).
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llama_cpp import Llama

_OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
# what a context's memory takes, from its start-up log: the KV cache and, in a hybrid or recurrent model, the
# recurrent states ("CPU KV buffer size =    45.00 MiB", "CUDA0 RS buffer size = ...")
_CONTEXT_BUFFER = re.compile(r"\b(?:KV|RS) buffer size =\s*([0-9.]+) MiB")
# llama.cpp's verdict on --flash-attn auto, from the context's start-up log
_FLASH_ATTN_RESOLVED = re.compile(r"Flash Attention (enabled|not supported, set to disabled)")
FLASH_ATTN_TYPES = {"auto": -1, "off": 0, "on": 1}  # llama_flash_attn_type (llama.h)


@dataclass(frozen=True)
class Runtime:
    """The llama.cpp build this process runs, and the extra-buffer choice made for it."""

    llama_cpp_python: str
    system_info: str
    cpu_features: tuple[str, ...]
    extra_buffers: bool
    extra_buffers_reason: str

    def describe(self) -> dict[str, object]:
        return {
            "llama_cpp_python": self.llama_cpp_python,
            "cpu_features": list(self.cpu_features),
            "extra_buffers": self.extra_buffers,
            "extra_buffers_reason": self.extra_buffers_reason,
        }


def inspect(extra_buffers_mode: str) -> Runtime:
    """Initialise llama.cpp's backends and read what it reports (nothing is loaded yet)."""
    import llama_cpp

    llama_cpp.llama_backend_init()  # in the DLC this loads ggml's backend libraries, so the report is complete
    info = system_info(llama_cpp)
    features = cpu_features(info)
    use, reason = extra_buffers(extra_buffers_mode, features)
    return Runtime(getattr(llama_cpp, "__version__", "unknown"), info, features, use, reason)


def system_info(llama_cpp: ModuleType) -> str:
    """llama.cpp's own one-line report of its backends and the CPU features it was built to use."""
    report: bytes = llama_cpp.llama_print_system_info()
    return report.decode("utf-8", errors="replace").strip()


def cpu_features(info: str) -> tuple[str, ...]:
    """The features a system-info line reports as on, e.g. ('AVX2', 'FMA', 'AMX_INT8')."""
    features = []
    for part in info.replace("\n", "|").split("|"):
        name, sep, value = part.rpartition("=")
        if sep and value.strip() == "1":
            features.append(name.split(":")[-1].strip())
    return tuple(dict.fromkeys(features))


def extra_buffers(mode: str, features: tuple[str, ...]) -> tuple[bool, str]:
    """Whether to use extra buffer types, and why (for the start-up log and /ping)."""
    if mode == "on":
        return True, "on (DECISION_ADAPTER_EXTRA_BUFFERS=on)"
    if mode == "off":
        return False, "off (DECISION_ADAPTER_EXTRA_BUFFERS=off)"
    if any(name.startswith("AMX") for name in features):
        return False, "off (auto: llama.cpp reports AMX, whose buffer type crashes on this project's test CPUs)"
    return True, "on (auto: no AMX reported; weight repacking kept)"


@contextmanager
def model_params(llama_cpp: ModuleType, **fields: object) -> Iterator[None]:
    """Make ``Llama(...)`` load the model with these ``llama_model_params`` fields set.

    ``Llama`` has no argument for e.g. ``use_extra_bufts``; it takes its model
    parameters from ``llama_model_default_params()``, so that function is wrapped
    for the duration of the (single-threaded) model load.
    """
    bindings = llama_cpp.llama_cpp
    original = bindings.llama_model_default_params

    def with_fields() -> object:
        params = original()
        for name, value in fields.items():
            setattr(params, name, value)
        return params

    bindings.llama_model_default_params = with_fields
    try:
        yield
    finally:
        bindings.llama_model_default_params = original


@contextmanager
def context_params(llama_cpp: ModuleType, **fields: object) -> Iterator[None]:
    """Make ``Llama(...)`` create its context with these ``llama_context_params`` fields set.

    ``Llama`` reduces flash attention to on or off and cannot ask for llama.cpp's ``auto`` (llama-server's
    default), so the context constructor is wrapped for the duration of the (single-threaded) load, as
    ``model_params`` wraps the model's defaults. Fields an older binding does not know are left alone.
    """
    bindings = llama_cpp.llama_cpp
    original = bindings.llama_init_from_model
    known = {name for name, _ in type(bindings.llama_context_default_params())._fields_}

    def with_fields(model: object, params: object) -> object:
        for name, value in fields.items():
            if name in known:
                setattr(params, name, value)
        return original(model, params)

    bindings.llama_init_from_model = with_fields
    try:
        yield
    finally:
        bindings.llama_init_from_model = original


def flash_attention(log_text: str, mode: str) -> str:
    """What the context uses: "on" or "off" (auto as llama.cpp resolved it, from its log)."""
    if mode != "auto":
        return mode
    match = _FLASH_ATTN_RESOLVED.search(log_text)
    if match is None:
        return "auto (llama.cpp logged no verdict)"
    return "on" if match.group(1) == "enabled" else "off"


def context_memory_mib(log_text: str) -> float:
    """The MiB a context's KV cache and recurrent states take, as llama.cpp logged them when it made them."""
    return sum(float(size) for size in _CONTEXT_BUFFER.findall(log_text))


def another_context(llm: Llama) -> Llama:
    """A second ``Llama`` over ``llm``'s loaded model with a context, batch and token record of its own.

    ``Llama`` makes one context per model load; loading the model again for a second context would hold
    the weights twice wherever they are copied (repacked CPU weights, GPU memory). The copy shares the
    model, vocabulary and settings and frees only its own context and batch; it keeps ``llm`` (which frees
    the model) alive for as long as it lives.
    """
    import contextlib

    import numpy as np
    from llama_cpp import _internals as internals

    twin = object.__new__(type(llm))  # not copy.copy: Llama pickles (and so copies) by loading the model anew
    twin.__dict__.update(llm.__dict__)
    twin._stack = contextlib.ExitStack()
    twin._ctx = twin._stack.enter_context(
        contextlib.closing(internals.LlamaContext(model=llm._model, params=llm.context_params, verbose=llm.verbose))
    )
    twin._batch = twin._stack.enter_context(
        contextlib.closing(
            internals.LlamaBatch(n_tokens=llm.n_batch, embd=0, n_seq_max=llm.context_params.n_ctx, verbose=llm.verbose)
        )
    )
    twin._candidates = internals.LlamaTokenDataArray(n_vocab=llm.n_vocab())
    twin.input_ids = np.zeros_like(llm.input_ids)
    twin.scores = np.zeros_like(llm.scores)
    twin.n_tokens = 0
    twin._loaded_by = llm  # type: ignore[attr-defined]  # our own attribute on llama-cpp-python's object
    return twin


def replace_context(llm: Llama, **fields: object) -> None:
    """Give ``llm`` a new context on its loaded model, made with these ``llama_context_params`` fields, in place of
    the one it has (freed first: two would hold two KV caches). What the old one held is gone."""
    import llama_cpp
    from llama_cpp import _internals as internals

    llm._ctx.close()  # idempotent: Llama's own close finds it freed
    with context_params(llama_cpp, **fields), llama_log(llama_cpp):
        llm._ctx = internals.LlamaContext(model=llm._model, params=llm.context_params, verbose=llm.verbose)
    llm.n_tokens = 0


def host_cpu_flags(path: str = "/proc/cpuinfo") -> tuple[str, ...]:
    """The vector and matrix extensions the host CPU reports (Linux), for logs and benchmarks."""
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16")
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    present = set(line.split(":", 1)[1].split())
                    return tuple(flag for flag in wanted if flag in present)
    except OSError:
        pass
    return ()


@contextmanager
def llama_log(llama_cpp: ModuleType) -> Iterator[list[str]]:
    """Collect what llama.cpp logs inside the block (e.g. while loading), then give logging back."""
    pieces: list[str] = []

    def collect(level: int, text: bytes, user_data: object) -> None:
        pieces.append(text.decode("utf-8", errors="replace"))

    callback = llama_cpp.llama_log_callback(collect)  # kept referenced while llama.cpp may call it
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
    try:
        yield pieces
    finally:
        from llama_cpp import _logger  # llama-cpp-python's own callback, set when it was imported

        llama_cpp.llama_log_set(_logger.llama_log_callback, ctypes.c_void_p(0))


def offloaded_layers(log_text: str) -> tuple[int, int] | None:
    """(offloaded, total) from llama.cpp's "offloaded N/M layers to GPU" line, None when it logged none."""
    match = _OFFLOADED.search(log_text)
    return (int(match.group(1)), int(match.group(2))) if match else None

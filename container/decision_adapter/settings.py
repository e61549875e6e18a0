"""The adapter's one configuration object, read from the environment.

llama.cpp settings use the DLC's own names (``SM_LLAMA_CPP_THREADS``,
``SM_LLAMA_CPP_N_GPU_LAYERS``, ``SM_LLAMA_CPP_CTX_SIZE``, ...) so that one deploy
code path configures both the standard DLC and this child image. Settings that
only the adapter understands carry the ``DECISION_ADAPTER_`` prefix.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Mapping

LLAMA_PREFIX = "SM_LLAMA_CPP_"
ADAPTER_PREFIX = "DECISION_ADAPTER_"

# SM_LLAMA_CPP_* names the adapter maps onto llama-cpp-python's Llama(...).
# Anything else with that prefix is a llama-server flag the adapter does not
# use; it is logged once at start-up, never silently dropped.
_LLAMA_INT_SETTINGS = {
    "CTX_SIZE": "n_ctx",
    "THREADS": "n_threads",
    "THREADS_BATCH": "n_threads_batch",
    "N_GPU_LAYERS": "n_gpu_layers",
    "BATCH_SIZE": "n_batch",
    "UBATCH_SIZE": "n_ubatch",
}
# Read by the entrypoint or meaningless for a single-context adapter.
_LLAMA_HANDLED_ELSEWHERE = {"MODEL", "MODEL_DIR", "PORT", "HOST", "PARALLEL", "HF_REPO", "HF_FILE"}

PREFIX_REUSE_MODES = ("auto", "trim", "restore", "off")
EXTRA_BUFFER_MODES = ("auto", "on", "off")  # runtime.py says what each means


class SettingsError(ValueError):
    """An environment variable holds a value the adapter cannot use."""


@dataclass(frozen=True)
class Settings:
    model_dir: str = "/opt/ml/model"
    model_file: str | None = None  # SM_LLAMA_CPP_MODEL: explicit path or name
    n_ctx: int = 4096
    n_threads: int | None = None  # None: llama.cpp's default (physical cores)
    n_threads_batch: int | None = None
    n_gpu_layers: int = 0
    n_batch: int = 512
    n_ubatch: int = 512
    port: int = 8080
    max_queue: int = 4  # requests that may wait for the context
    queue_timeout_s: float = 30.0  # longest wait before a 503
    request_timeout_s: float = 30.0  # longest time one request may hold the model; 0: no limit
    retry_after_s: int = 1
    max_body_bytes: int = 1_000_000
    prefix_reuse: str = "auto"  # auto | trim | restore | off
    extra_buffers: str = "auto"  # auto | on | off: llama.cpp's extra (repacking, AMX) buffer types
    chat_max_tokens: int = 256
    log_level: str = "INFO"
    ignored_llama_settings: tuple[str, ...] = field(default=())
    # DECISION_ADAPTER_API_KEY: when set, every route but /ping needs ``Authorization: Bearer <key>``.
    api_key: str | None = field(default=None, repr=False)

    @property
    def n_gpu_layers_for_llama(self) -> int:
        # llama-server treats 999 as "all"; llama-cpp-python uses -1.
        return -1 if self.n_gpu_layers >= 999 else self.n_gpu_layers

    def llama_kwargs(self) -> dict:
        kwargs = {
            "n_ctx": self.n_ctx,
            "n_gpu_layers": self.n_gpu_layers_for_llama,
            "n_batch": self.n_batch,
            "n_ubatch": self.n_ubatch,
        }
        if self.n_threads is not None:
            kwargs["n_threads"] = self.n_threads
        if self.n_threads_batch is not None or self.n_threads is not None:
            kwargs["n_threads_batch"] = self.n_threads_batch or self.n_threads
        return kwargs


def _int(env: Mapping[str, str], name: str, default, minimum: int | None = None):
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not an integer; set it to a whole number or unset it") from None
    if minimum is not None and value < minimum:
        raise SettingsError(f"{name}={value} is below {minimum}; set it to at least {minimum}")
    return value


def _float(env: Mapping[str, str], name: str, default: float, minimum: float = 0.0) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a number; set it to a number of seconds or unset it") from None
    if not value >= minimum:
        raise SettingsError(f"{name}={value} is below {minimum}; set it to at least {minimum}")
    return value


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    """One of ``choices`` (the first is the default)."""
    value = (env.get(name) or "").strip().lower() or choices[0]
    if value not in choices:
        raise SettingsError(f"{name}={value!r} is not one of {', '.join(choices)}")
    return value


def _api_key(env: Mapping[str, str], name: str) -> str | None:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return None
    key = raw.strip()
    if not key.isascii() or not key.isprintable() or " " in key:
        raise SettingsError(f"{name} must be printable ASCII without spaces (it travels in an HTTP header)")
    return key


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from an environment mapping (``os.environ`` by default)."""
    env = os.environ if env is None else env
    L, A = LLAMA_PREFIX, ADAPTER_PREFIX

    n_gpu_layers = _int(env, L + "N_GPU_LAYERS", 0)
    if n_gpu_layers < 0:
        n_gpu_layers = 999  # -1 means "all layers", as in llama-cpp-python
    prefix_reuse = _choice(env, A + "PREFIX_REUSE", PREFIX_REUSE_MODES)
    extra_buffers = _choice(env, A + "EXTRA_BUFFERS", EXTRA_BUFFER_MODES)
    ignored = sorted(
        name for name in env
        if name.startswith(L)
        and name[len(L):] not in _LLAMA_INT_SETTINGS
        and name[len(L):] not in _LLAMA_HANDLED_ELSEWHERE
    )
    return Settings(
        model_dir=env.get("SM_MODEL_DIR") or env.get(L + "MODEL_DIR") or "/opt/ml/model",
        model_file=env.get(L + "MODEL") or None,
        n_ctx=_int(env, L + "CTX_SIZE", 4096, minimum=64),
        n_threads=_int(env, L + "THREADS", None, minimum=1),
        n_threads_batch=_int(env, L + "THREADS_BATCH", None, minimum=1),
        n_gpu_layers=n_gpu_layers,
        n_batch=_int(env, L + "BATCH_SIZE", 512, minimum=1),
        n_ubatch=_int(env, L + "UBATCH_SIZE", 512, minimum=1),
        port=_int(env, "SAGEMAKER_BIND_TO_PORT", 8080, minimum=1),
        max_queue=_int(env, A + "MAX_QUEUE", 4, minimum=0),
        queue_timeout_s=_float(env, A + "QUEUE_TIMEOUT", 30.0),
        request_timeout_s=_float(env, A + "REQUEST_TIMEOUT", 30.0),
        retry_after_s=_int(env, A + "RETRY_AFTER", 1, minimum=1),
        max_body_bytes=_int(env, A + "MAX_BODY_BYTES", 1_000_000, minimum=1024),
        prefix_reuse=prefix_reuse,
        extra_buffers=extra_buffers,
        chat_max_tokens=_int(env, A + "CHAT_MAX_TOKENS", 256, minimum=1),
        log_level=(env.get(A + "LOG_LEVEL") or "INFO").upper(),
        ignored_llama_settings=tuple(ignored),
        api_key=_api_key(env, A + "API_KEY"),
    )


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )

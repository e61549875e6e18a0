"""The adapter's one configuration object, read from the environment.

llama.cpp settings use the DLC's own names (``SM_LLAMA_CPP_THREADS``,
``SM_LLAMA_CPP_N_GPU_LAYERS``, ``SM_LLAMA_CPP_CTX_SIZE``, ...) so that one deploy
code path configures both the standard DLC and this child image. Settings that
only the adapter understands carry the ``DECISION_ADAPTER_`` prefix.

The published SemIf sample's ``SEMIF_*`` names work too, as aliases of these
(``SEMIF_ALIASES``): a deployment made with the sample's scripts starts with the
same meaning. Both spellings set to different values stop the start-up naming
both; a ``SEMIF_*`` name this adapter does not know is logged, never dropped
silently.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Mapping

from decision_contract.names import ORDER_MODES

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
_LLAMA_HANDLED_ELSEWHERE = {"MODEL", "MODEL_DIR", "PORT", "HOST", "PARALLEL", "HF_REPO", "HF_FILE", "FLASH_ATTN"}

def _positive(raw: str, name: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not an integer; set it to a whole number or unset it") from None
    if value < 1:
        raise SettingsError(f"{name}={value} is below 1; set it to at least 1")
    return value


# The published sample's names -> (this adapter's name, the sample's value in our terms).
SEMIF_ALIASES = {
    "SEMIF_MODEL_DIR": ("SM_MODEL_DIR", str),
    "SEMIF_GGUF_PATH": (LLAMA_PREFIX + "MODEL", str),
    "SEMIF_THREADS": (LLAMA_PREFIX + "THREADS", str),
    "SEMIF_N_GPU_LAYERS": (LLAMA_PREFIX + "N_GPU_LAYERS", str),  # -1 = all, as 999 is
    "SEMIF_MAX_TOKENS": (LLAMA_PREFIX + "CTX_SIZE", str),  # the longest prompt, so the context
    # The sample admits this many requests at once and answers the rest 503; here one request holds
    # the model and up to MAX_QUEUE wait, so n in flight is n - 1 waiting.
    "SEMIF_MAX_IN_FLIGHT": (ADAPTER_PREFIX + "MAX_QUEUE", lambda v: str(_positive(v, "SEMIF_MAX_IN_FLIGHT") - 1)),
    "SEMIF_MAX_SHARED_DECISIONS": (ADAPTER_PREFIX + "MAX_SHARED_DECISIONS", str),
    "SEMIF_MAX_BODY_BYTES": (ADAPTER_PREFIX + "MAX_BODY_BYTES", str),
    "SEMIF_PORT": ("SAGEMAKER_BIND_TO_PORT", str),
}
# Sample settings with no counterpart here: accepted, and the log says why they change nothing.
SEMIF_UNUSED = {
    "SEMIF_TOKENIZER_REVISION": "the adapter tokenizes with the GGUF's own vocabulary",
    "SEMIF_TOKENIZER_SOURCE": "the adapter tokenizes with the GGUF's own vocabulary",
    "SEMIF_LLAMA_CPP_LIB_DIR": "llama-cpp-python finds libllama through LLAMA_CPP_LIB_PATH",
    "SEMIF_MAX_REQUEST_TOKENS": "a prompt is limited by the context size (SM_LLAMA_CPP_CTX_SIZE)",
}

PREFIX_REUSE_MODES = ("auto", "trim", "restore", "off")
CROSS_REQUEST_REUSE_MODES = ("off", "on")
EXTRA_BUFFER_MODES = ("auto", "on", "off")  # runtime.py says what each means
NGINX_MODES = ("auto", "on", "off")  # nginx in front: if found, required, never (serve.py)
# SM_LLAMA_CPP_FLASH_ATTN, as llama-server's --flash-attn (auto: llama.cpp enables it where the device
# holding the layers supports it). The adapter's default is off, not llama-server's auto: llama.cpp's CPU
# flash attention makes a prompt's probabilities depend on how its tokens were split between evaluations,
# so a question asked alone and the same question in a shared-state batch would differ.
FLASH_ATTN_MODES = ("off", "on", "auto")
# DECISION_ADAPTER_ORDER: how a decision's options are read (order.py): as sent, divided by the
# content-free prior of their positions, or averaged over rotations of the options (ORDER_MODES, the
# contract's names).
CALIBRATION_MODES = ("auto", "off")  # calibration.json in the model folder: used when present, or never
_FLASH_ATTN_SPELLINGS = {"true": "on", "1": "on", "enabled": "on", "false": "off", "0": "off", "disabled": "off"}


class SettingsError(ValueError):
    """An environment variable holds a value the adapter cannot use."""


@dataclass(frozen=True)
class Settings:
    model_dir: str = "/opt/ml/model"  # where SageMaker extracts model.tar.gz; the GGUF is found here
    model_file: str | None = None  # SM_LLAMA_CPP_MODEL: explicit path or name
    n_ctx: int = 8192  # holds a 255-option Jev choice (about 5,400 tokens with the embedded model)
    n_threads: int | None = None  # None: llama.cpp's default (physical cores)
    n_threads_batch: int | None = None
    n_gpu_layers: int = 0
    n_batch: int = 512
    n_ubatch: int = 512
    port: int = 8080  # the port SageMaker sends requests to (nginx listens there)
    max_queue: int = 4  # requests that may wait for the context
    queue_timeout_s: float = 30.0  # longest wait before a 503
    request_timeout_s: float = 30.0  # longest time one request may hold the model; 0: no limit
    retry_after_s: int = 1  # the Retry-After seconds on a 503
    read_timeout_s: float = 10.0  # to receive a whole request, headers and body (nginx.py)
    max_body_bytes: int = 1_048_576  # 1 MiB, as the published sample
    max_shared_decisions: int = 64  # questions (or the sample's decisions) in one shared-state request
    prefix_reuse: str = "auto"  # auto | trim | restore | off
    # DECISION_ADAPTER_CROSS_REQUEST_REUSE: a request may reuse what the previous request left in the
    # context (its state), not only the fixed head. A timing oracle across callers: single-tenant only.
    cross_request_reuse: bool = False
    # DECISION_ADAPTER_STATE_CACHE_MIB: with cross-request reuse on, also keep the states of recent requests
    # (LRU, at most this many MiB), not only the last one; 0 = off. The same timing oracle, wider.
    state_cache_mib: int = 0
    extra_buffers: str = "auto"  # auto | on | off: llama.cpp's extra (repacking, AMX) buffer types
    flash_attn: str = "off"  # off | on | auto (SM_LLAMA_CPP_FLASH_ATTN)
    chat_max_tokens: int = 256  # the default and the cap of chat's max_tokens
    nginx: str = "auto"  # DECISION_ADAPTER_NGINX: auto | on | off
    log_level: str = "INFO"  # Python logging level name
    # DECISION_ADAPTER_ORDER: the order mode of a request that names none (as_given: the readout as sent;
    # prior: divided by the content-free decision's probabilities per position; rotations: the mean
    # log-probabilities over the cyclic rotations of the options as given and reversed)
    order: str = "as_given"
    # DECISION_ADAPTER_MAX_ROTATIONS: rotations evaluated at most in each direction (options as given and
    # reversed) per question in the rotations mode; past this many options, evenly spaced ones (the answer
    # says how many)
    max_rotations: int = 16
    # DECISION_ADAPTER_MIN_ANSWER_MASS: the share of the next-token probability the answer labels must hold
    # (allowed_token_mass); below it an answer says abstained (0: never abstain)
    min_answer_mass: float = 0.0
    # DECISION_ADAPTER_CALIBRATION: auto uses calibration.json from the model folder when present (its
    # temperatures per question type and option count); off ignores it
    calibration: str = "auto"
    # DECISION_ADAPTER_ENDPOINT_NAME: the SageMaker endpoint the adapter serves, as its metric lines'
    # endpoint dimension (the deploy sets it; SageMaker names the endpoint in no variable of its own)
    endpoint_name: str = "local"
    ignored_llama_settings: tuple[str, ...] = field(default=())
    notes: tuple[str, ...] = field(default=())  # how SEMIF_* names were read, for the start-up log
    unknown_sample_settings: tuple[str, ...] = field(default=())  # SEMIF_* names neither sample nor adapter has
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
        raise SettingsError(f"{name}={raw!r} is not a number; set it to a number (seconds, for the time limits) "
                            "or unset it") from None
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


def _meaning(value: str, name: str):
    """A value as it will be used, so that "-1" and "999" GPU layers (both "all") compare equal."""
    value = value.strip()
    try:
        number = int(value)
    except ValueError:
        return os.path.normpath(value)
    return "all" if name.endswith("N_GPU_LAYERS") and (number < 0 or number >= 999) else number


def with_sample_aliases(env: Mapping[str, str]) -> tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]:
    """The environment with the sample's SEMIF_* names read as ours; a note per known SEMIF_* name,
    and the SEMIF_* names nobody knows."""
    merged, notes, unknown = dict(env), [], []
    for name in sorted(n for n in env if n.startswith("SEMIF_")):
        raw = env[name]
        if name in SEMIF_UNUSED:
            notes.append(f"{name} is the published sample's setting; not used here: {SEMIF_UNUSED[name]}")
            continue
        if name not in SEMIF_ALIASES:
            unknown.append(name)
            continue
        ours, convert = SEMIF_ALIASES[name]
        value = convert(raw.strip())
        if env.get(ours, "").strip() and _meaning(env[ours], ours) != _meaning(value, ours):
            raise SettingsError(f"{name}={raw} (the published sample's name) and {ours}={env[ours]} disagree; "
                                "set one of them")
        merged[ours] = value
        notes.append(f"{name}={raw} (the published sample's name) read as {ours}={value}")
    return merged, tuple(notes), tuple(unknown)


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from an environment mapping (``os.environ`` by default)."""
    env, notes, unknown = with_sample_aliases(os.environ if env is None else env)
    L, A = LLAMA_PREFIX, ADAPTER_PREFIX

    n_gpu_layers = _int(env, L + "N_GPU_LAYERS", 0)
    if n_gpu_layers < 0:
        n_gpu_layers = 999  # -1 means "all layers", as in llama-cpp-python
    prefix_reuse = _choice(env, A + "PREFIX_REUSE", PREFIX_REUSE_MODES)
    cross_request_reuse = _choice(env, A + "CROSS_REQUEST_REUSE", CROSS_REQUEST_REUSE_MODES) == "on"
    extra_buffers = _choice(env, A + "EXTRA_BUFFERS", EXTRA_BUFFER_MODES)
    flash_attn = (env.get(L + "FLASH_ATTN") or "").strip().lower()
    flash_attn = _choice({L + "FLASH_ATTN": _FLASH_ATTN_SPELLINGS.get(flash_attn, flash_attn)}, L + "FLASH_ATTN",
                         FLASH_ATTN_MODES)
    state_cache_mib = _int(env, A + "STATE_CACHE_MIB", 0, minimum=0)
    min_answer_mass = _float(env, A + "MIN_ANSWER_MASS", 0.0)
    if min_answer_mass > 1:
        raise SettingsError(f"{A}MIN_ANSWER_MASS={min_answer_mass} is above 1; it is a share of probability "
                            "(0 to 1, 0 never abstains)")
    if state_cache_mib and not cross_request_reuse:
        raise SettingsError(
            f"{A}STATE_CACHE_MIB={state_cache_mib} keeps earlier callers' states for later requests, which is "
            f"cross-request reuse: set {A}CROSS_REQUEST_REUSE=on as well (single-tenant endpoints only), or set "
            "the cache to 0")
    if state_cache_mib and prefix_reuse == "off":
        raise SettingsError(f"{A}STATE_CACHE_MIB={state_cache_mib} needs prefix reuse, but {A}PREFIX_REUSE=off; "
                            "set it to auto, or the cache to 0")
    ignored = sorted(
        name for name in env
        if name.startswith(L)
        and name[len(L):] not in _LLAMA_INT_SETTINGS
        and name[len(L):] not in _LLAMA_HANDLED_ELSEWHERE
    )
    return Settings(
        model_dir=env.get("SM_MODEL_DIR") or env.get(L + "MODEL_DIR") or "/opt/ml/model",
        model_file=env.get(L + "MODEL") or None,
        n_ctx=_int(env, L + "CTX_SIZE", Settings.n_ctx, minimum=64),
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
        read_timeout_s=_float(env, A + "READ_TIMEOUT", Settings.read_timeout_s, minimum=0.1),
        max_body_bytes=_int(env, A + "MAX_BODY_BYTES", Settings.max_body_bytes, minimum=1024),
        max_shared_decisions=_int(env, A + "MAX_SHARED_DECISIONS", Settings.max_shared_decisions, minimum=1),
        prefix_reuse=prefix_reuse,
        cross_request_reuse=cross_request_reuse,
        state_cache_mib=state_cache_mib,
        extra_buffers=extra_buffers,
        flash_attn=flash_attn,
        chat_max_tokens=_int(env, A + "CHAT_MAX_TOKENS", 256, minimum=1),
        nginx=_choice(env, A + "NGINX", NGINX_MODES),
        log_level=(env.get(A + "LOG_LEVEL") or "INFO").upper(),
        order=_choice(env, A + "ORDER", ORDER_MODES),
        max_rotations=_int(env, A + "MAX_ROTATIONS", Settings.max_rotations, minimum=2),
        min_answer_mass=min_answer_mass,
        calibration=_choice(env, A + "CALIBRATION", CALIBRATION_MODES),
        endpoint_name=(env.get(A + "ENDPOINT_NAME") or "").strip() or Settings.endpoint_name,
        ignored_llama_settings=tuple(ignored),
        notes=notes,
        unknown_sample_settings=unknown,
        api_key=_api_key(env, A + "API_KEY"),
    )


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )

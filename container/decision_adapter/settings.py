"""The adapter's one configuration object, read from the environment.

Each setting is declared once, as a field of ``Settings`` made by ``setting(...)``: its environment
variable, default, bounds or choices, the published sample's alias and one line of documentation.
``load_settings`` reads the environment from those declarations, and the docs site's settings page
is generated from the same declarations (``declared()``). How one setting is declared, read and checked is
setting_spec.py's; reading the published sample's names is sample_aliases.py's.

llama.cpp settings use the DLC's own names (``SM_LLAMA_CPP_THREADS``, ``SM_LLAMA_CPP_CTX_SIZE``, ...)
so that one deploy code path configures both the standard DLC and this child image. Settings that
only the adapter understands carry the ``DECISION_ADAPTER_`` prefix.

The published SemIf sample's ``SEMIF_*`` names work too, as aliases of these: a deployment made with
the sample's scripts starts with the same meaning. Both spellings set to different values stop the
start-up naming both; a ``SEMIF_*`` name this adapter does not know is logged, never dropped
silently.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from decision_contract.names import LETTERS, ORDER_MODES, READOUTS

from .sample_aliases import IN_FLIGHT, divide_in_flight, in_flight, read_as_ours
from .setting_spec import ADAPTER_PREFIX, LLAMA_PREFIX, Setting, read, setting
from .setting_spec import SettingsError as SettingsError  # what load_settings raises, importable from here

L, A = LLAMA_PREFIX, ADAPTER_PREFIX

# SM_LLAMA_CPP_* names that the entrypoint reads, or that mean nothing for the adapter.
# Any other SM_LLAMA_CPP_* name no setting declares is a llama-server flag the adapter does not use:
# it is logged once at start-up, never silently dropped.
LLAMA_HANDLED_ELSEWHERE = {"PORT", "HOST", "HF_REPO", "HF_FILE"}
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


@dataclass(frozen=True)
class Settings:
    model_dir: str = setting(
        "SM_MODEL_DIR",
        "/opt/ml/model",
        "where SageMaker extracts model.tar.gz; the GGUF is found here",
        also=(L + "MODEL_DIR",),
        sample="SEMIF_MODEL_DIR",
    )
    model_file: str | None = setting(
        L + "MODEL",
        None,
        "the GGUF's path, or its name in the model folder (unset: found there)",
        kind="text",
        sample="SEMIF_GGUF_PATH",
    )
    n_ctx: int = setting(
        L + "CTX_SIZE",
        8192,
        "the context in tokens; it holds a 255-option Jev choice (about 5,400 tokens with the embedded model)",
        minimum=64,
        llama="n_ctx",
        sample="SEMIF_MAX_TOKENS",
    )
    n_threads: int | None = setting(
        L + "THREADS",
        None,
        "CPU threads (unset: llama.cpp's default, the physical cores)",
        kind="int",
        minimum=1,
        llama="n_threads",
        sample="SEMIF_THREADS",
    )
    n_threads_batch: int | None = setting(
        L + "THREADS_BATCH",
        None,
        "CPU threads for prompt evaluation (unset: as many as the threads)",
        kind="int",
        minimum=1,
        llama="n_threads_batch",
    )
    n_gpu_layers: int = setting(
        L + "N_GPU_LAYERS",
        0,
        "layers offloaded to the GPU; 999 or -1 for all",
        llama="n_gpu_layers",
        sample="SEMIF_N_GPU_LAYERS",
    )
    n_batch: int = setting(L + "BATCH_SIZE", 512, "tokens per evaluation call", minimum=1, llama="n_batch")
    n_ubatch: int = setting(L + "UBATCH_SIZE", 512, "tokens per physical batch", minimum=1, llama="n_ubatch")
    flash_attn: str = setting(
        L + "FLASH_ATTN",
        "off",
        "flash attention in llama.cpp, as llama-server's --flash-attn. With it every "
        "prompt is evaluated in calls of 64 tokens or more, so that how a prompt was cut cannot change its answer "
        "(checked at start-up: auto leaves it off where that cannot hold, on refuses to start): on a CPU a new "
        "prompt a few percent faster, a shared-state batch of short questions up to a third slower. Off by default; "
        "the workshop's CPU endpoint sets auto",
        choices=("off", "on", "auto"),
        spellings={"true": "on", "1": "on", "enabled": "on", "false": "off", "0": "off", "disabled": "off"},
    )
    port: int = setting(
        "SAGEMAKER_BIND_TO_PORT",
        8080,
        "the port SageMaker sends requests to (nginx listens there)",
        minimum=1,
        sample="SEMIF_PORT",
    )
    parallel: int = setting(
        L + "PARALLEL",
        1,
        "requests evaluated at once, each on its own llama.cpp context over the one loaded "
        "model (llama-server's --parallel; scheduler.py), the threads shared between them. The workshop's "
        "endpoints set 4: on a CPU, two requests at once on a thread each answer more per second than one at a "
        "time on two. Unlike llama-server, each context holds the whole "
        "SM_LLAMA_CPP_CTX_SIZE: the contexts' memory together is bounded by DECISION_ADAPTER_MAX_KV_MIB",
        minimum=1,
        maximum=64,
    )
    max_kv_mib: int = setting(
        A + "MAX_KV_MIB",
        4096,
        "the memory all contexts' KV caches (and recurrent states) may take together, in "
        "MiB; the first context is always made, further ones only while they fit (the log says how many)",
        minimum=1,
    )
    max_queue: int = setting(
        A + "MAX_QUEUE",
        4,
        "requests that may wait for a context when every one is busy",
        minimum=0,
        sample=IN_FLIGHT,
        sample_value=in_flight,
    )
    queue_timeout_s: float = setting(A + "QUEUE_TIMEOUT", 30.0, "seconds a request may wait before a 503", minimum=0.0)
    request_timeout_s: float = setting(
        A + "REQUEST_TIMEOUT", 30.0, "seconds one request may hold the model; 0: no limit", minimum=0.0
    )
    retry_after_s: int = setting(A + "RETRY_AFTER", 1, "the Retry-After seconds on a 503", minimum=1)
    read_timeout_s: float = setting(
        A + "READ_TIMEOUT", 10.0, "seconds to receive a whole request, headers and body (nginx)", minimum=0.1
    )
    max_body_bytes: int = setting(
        A + "MAX_BODY_BYTES",
        1_048_576,
        "the largest request body (1 MiB, as the published sample)",
        minimum=1024,
        sample="SEMIF_MAX_BODY_BYTES",
    )
    max_request_tokens: int = setting(
        A + "MAX_REQUEST_TOKENS",
        65536,
        "tokens one decision request may have the model read: its prompts past "
        "the shared prefix, and the prefix once; a request over it is refused before anything is evaluated",
        minimum=64,
    )
    max_shared_decisions: int = setting(
        A + "MAX_SHARED_DECISIONS",
        64,
        "questions (or the sample's decisions) in one shared-state request",
        minimum=1,
        sample="SEMIF_MAX_SHARED_DECISIONS",
    )
    prefix_reuse: str = setting(
        A + "PREFIX_REUSE",
        "auto",
        "how the evaluated prefix is reused between prompts (engine.py). auto: restore "
        "for hybrid or recurrent models, else trim; off where the start-up check finds this build answering a "
        "prompt cut into calls otherwise than whole (trim and restore refuse to start there)",
        choices=("auto", "trim", "restore", "off"),
    )
    cross_request_reuse: bool = setting(
        A + "CROSS_REQUEST_REUSE",
        False,
        "a request may reuse what the previous request left in the context "
        "(its state), not only the fixed head: a timing oracle across callers, for single-tenant endpoints only",
    )
    state_cache_mib: int = setting(
        A + "STATE_CACHE_MIB",
        0,
        "with cross-request reuse on, also keep the states of recent requests (LRU, at "
        "most this many MiB), not only the last one; 0: off. The same timing oracle, wider",
        minimum=0,
    )
    extra_buffers: str = setting(
        A + "EXTRA_BUFFERS",
        "auto",
        "the extra buffer types of llama.cpp (repacking, AMX; runtime.py)",
        choices=("auto", "on", "off"),
    )
    chat_max_tokens: int = setting(
        A + "CHAT_MAX_TOKENS", 256, "the default and the cap of chat's max_tokens", minimum=1
    )
    strict_model_names: bool = setting(
        A + "STRICT_MODEL_NAMES",
        False,
        "off: a request naming any model is answered by the served one, whose "
        "name the answer carries (as llama-server does); on: names other than the served model's get 404",
    )
    nginx: str = setting(
        A + "NGINX",
        "auto",
        "whether nginx fronts gunicorn: auto when found, on (required) or off",
        choices=("auto", "on", "off"),
    )
    log_level: str = setting(A + "LOG_LEVEL", "INFO", "the Python logging level", kind="level", choices=LOG_LEVELS)
    order: str = setting(
        A + "ORDER",
        ORDER_MODES[0],
        "the order mode of a request that names none (as_given: the readout as sent; "
        "prior: divided by the content-free decision's probabilities per position; rotations: the mean "
        "log-probabilities over the cyclic rotations of the options as given and reversed)",
        choices=ORDER_MODES,
    )
    readout: str = setting(
        A + "READOUT",
        LETTERS,
        "the readout of a request that names none: letters (the options listed under "
        "letters, the letters' logits read; the published method) or cloze (each option's own text scored as "
        "what follows the state and the question)",
        choices=READOUTS,
    )
    cloze_prior_cache: int = setting(
        A + "CLOZE_PRIOR_CACHE",
        4096,
        "the cloze readout's content-free priors kept (an LRU of this many "
        "(prompt version, question, option text) entries) for its pmi normalisation; 0: none kept between "
        "requests, so no caller can tell from its own answer's tokens or time which questions others asked",
        minimum=0,
    )
    max_rotations: int = setting(
        A + "MAX_ROTATIONS",
        16,
        "rotations evaluated at most in each direction (options as given and reversed) "
        "per question in the rotations mode; past this many options, evenly spaced ones (the answer says how "
        "many)",
        minimum=2,
    )
    min_answer_mass: float = setting(
        A + "MIN_ANSWER_MASS",
        0.0,
        "the share of the next-token probability the answer labels must hold "
        "(allowed_token_mass); below it an answer says abstained (0: never abstain)",
        minimum=0.0,
        maximum=1.0,
    )
    calibration: str = setting(
        A + "CALIBRATION",
        "auto",
        "calibration.json in the model folder (its temperatures per question type "
        "and option count): auto uses it when present, off ignores it",
        choices=("auto", "off"),
    )
    endpoint_name: str = setting(
        A + "ENDPOINT_NAME",
        "local",
        "the SageMaker endpoint the adapter serves, as its metric lines' endpoint "
        "dimension (the deploy sets it; SageMaker names the endpoint in no variable of its own)",
    )
    api_key: str | None = setting(
        A + "API_KEY", None, "when set, every route but /ping needs Authorization: Bearer <key>", kind="key"
    )
    # What loading found, for the start-up log; no variable sets these.
    ignored_llama_settings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # how SEMIF_* names were read
    unknown_sample_settings: tuple[str, ...] = ()  # SEMIF_* names neither the sample nor the adapter has

    @property
    def n_gpu_layers_for_llama(self) -> int:
        # llama-server treats 999 as "all"; llama-cpp-python uses -1.
        return -1 if self.n_gpu_layers >= 999 else self.n_gpu_layers

    def llama_kwargs(self) -> dict[str, int]:
        kwargs = {
            "n_ctx": self.n_ctx,
            "n_gpu_layers": self.n_gpu_layers_for_llama,
            "n_batch": self.n_batch,
            "n_ubatch": self.n_ubatch,
        }
        if self.n_threads is not None:
            kwargs["n_threads"] = self.n_threads
        threads_batch = self.n_threads_batch or self.n_threads
        if threads_batch is not None:
            kwargs["n_threads_batch"] = threads_batch
        return kwargs


def declared() -> tuple[Setting, ...]:
    """Every setting an environment variable sets, in declaration order, each with its field's name."""
    return tuple(
        dataclasses.replace(f.metadata["setting"], name=f.name)
        for f in dataclasses.fields(Settings)
        if "setting" in f.metadata
    )


# Sample settings with no counterpart here: accepted, and the log says why they change nothing.
SEMIF_UNUSED = {
    "SEMIF_TOKENIZER_REVISION": "the adapter tokenizes with the GGUF's own vocabulary",
    "SEMIF_TOKENIZER_SOURCE": "the adapter tokenizes with the GGUF's own vocabulary",
    "SEMIF_LLAMA_CPP_LIB_DIR": "llama-cpp-python finds libllama through LLAMA_CPP_LIB_PATH",
    "SEMIF_MAX_REQUEST_TOKENS": "a prompt is limited by the context size (SM_LLAMA_CPP_CTX_SIZE)",
}
# The published sample's names -> (this adapter's name, the sample's value in our terms).
SEMIF_ALIASES: dict[str, tuple[str, Callable[[str], str]]] = {
    s.sample: (s.env, s.sample_value or str) for s in declared() if s.sample
}


def with_sample_aliases(env: Mapping[str, str]) -> tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]:
    """The environment with the sample's SEMIF_* names read as ours (sample_aliases.py); a note per known
    SEMIF_* name, and the SEMIF_* names nobody knows."""
    return read_as_ours(env, SEMIF_ALIASES, SEMIF_UNUSED)


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from an environment mapping (``os.environ`` by default)."""
    given = os.environ if env is None else env
    env, notes, unknown = with_sample_aliases(given)
    specs = declared()
    values: dict[str, Any] = {spec.name: read(spec, env) for spec in specs}  # each of its field's type
    if IN_FLIGHT in given:
        notes += (divide_in_flight(given, values),)
    if values["n_gpu_layers"] < 0:
        values["n_gpu_layers"] = 999  # -1 means "all layers", as in llama-cpp-python
    if values["state_cache_mib"] and not values["cross_request_reuse"]:
        raise SettingsError(
            f"{A}STATE_CACHE_MIB={values['state_cache_mib']} keeps earlier callers' states for later requests, "
            f"which is cross-request reuse: set {A}CROSS_REQUEST_REUSE=on as well (single-tenant endpoints only), "
            "or set the cache to 0"
        )
    if values["state_cache_mib"] and values["prefix_reuse"] == "off":
        raise SettingsError(
            f"{A}STATE_CACHE_MIB={values['state_cache_mib']} needs prefix reuse, but "
            f"{A}PREFIX_REUSE=off; set it to auto, or the cache to 0"
        )
    ours = {name for spec in specs for name in (spec.env, *spec.also)}
    ignored = sorted(
        name
        for name in env
        if name.startswith(L) and name not in ours and name[len(L) :] not in LLAMA_HANDLED_ELSEWHERE
    )
    return Settings(**values, ignored_llama_settings=tuple(ignored), notes=notes, unknown_sample_settings=unknown)


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )

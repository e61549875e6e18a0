import dataclasses

import pytest

from decision_adapter.settings import Settings, SettingsError, declared, load_settings


def test_defaults_follow_the_dlc():
    s = load_settings({})
    assert s.model_dir == "/opt/ml/model"
    assert s.port == 8080
    assert s.n_gpu_layers == 0
    assert s.prefix_reuse == "auto"
    assert s.cross_request_reuse is False  # no caller's state is reused for the next caller
    assert s.request_timeout_s == 30.0  # one request may hold the model at most this long


def test_cross_request_reuse_is_an_opt_in():
    assert load_settings({"DECISION_ADAPTER_CROSS_REQUEST_REUSE": "on"}).cross_request_reuse is True
    assert load_settings({"DECISION_ADAPTER_CROSS_REQUEST_REUSE": "OFF"}).cross_request_reuse is False
    assert load_settings({"DECISION_ADAPTER_CROSS_REQUEST_REUSE": ""}).cross_request_reuse is False


def test_a_zero_request_timeout_turns_the_limit_off():
    assert load_settings({"DECISION_ADAPTER_REQUEST_TIMEOUT": "0"}).request_timeout_s == 0
    assert load_settings({"DECISION_ADAPTER_REQUEST_TIMEOUT": "2.5"}).request_timeout_s == 2.5


def test_dlc_names_configure_llama():
    s = load_settings(
        {
            "SM_MODEL_DIR": "/m",
            "SM_LLAMA_CPP_THREADS": "32",
            "SM_LLAMA_CPP_N_GPU_LAYERS": "999",
            "SM_LLAMA_CPP_CTX_SIZE": "8192",
            "SAGEMAKER_BIND_TO_PORT": "9000",
        }
    )
    kwargs = s.llama_kwargs()
    assert kwargs["n_threads"] == 32 and kwargs["n_threads_batch"] == 32
    assert kwargs["n_gpu_layers"] == -1  # 999 = all layers
    assert kwargs["n_ctx"] == 8192
    assert (s.model_dir, s.port) == ("/m", 9000)


def test_minus_one_gpu_layers_means_all():
    assert load_settings({"SM_LLAMA_CPP_N_GPU_LAYERS": "-1"}).llama_kwargs()["n_gpu_layers"] == -1


def test_unknown_llama_flags_are_reported_not_dropped_silently():
    s = load_settings(
        {
            "SM_LLAMA_CPP_CONT_BATCHING": "true",
            "SM_LLAMA_CPP_THREADS": "2",
            "SM_LLAMA_CPP_PORT": "8080",
            "SM_LLAMA_CPP_FLASH_ATTN": "true",
        }
    )
    assert s.ignored_llama_settings == ("SM_LLAMA_CPP_CONT_BATCHING",)


@pytest.mark.parametrize(
    "env, needle",
    [
        ({"SM_LLAMA_CPP_THREADS": "many"}, "SM_LLAMA_CPP_THREADS"),
        ({"SM_LLAMA_CPP_THREADS": "0"}, "at least 1"),
        ({"DECISION_ADAPTER_PREFIX_REUSE": "sometimes"}, "PREFIX_REUSE"),
        ({"DECISION_ADAPTER_CROSS_REQUEST_REUSE": "yes"}, "CROSS_REQUEST_REUSE='yes' is not one of off, on"),
        ({"DECISION_ADAPTER_QUEUE_TIMEOUT": "-1"}, "QUEUE_TIMEOUT"),
        ({"DECISION_ADAPTER_REQUEST_TIMEOUT": "-5"}, "REQUEST_TIMEOUT"),
        ({"DECISION_ADAPTER_REQUEST_TIMEOUT": "soon"}, "REQUEST_TIMEOUT"),
    ],
)
def test_bad_values_name_the_variable(env, needle):
    with pytest.raises(SettingsError, match=needle):
        load_settings(env)


# -- the published sample's SEMIF_* names ------------------------------------------------------


def test_the_sample_names_work_as_aliases():
    s = load_settings(
        {
            "SEMIF_MODEL_DIR": "/m",
            "SEMIF_GGUF_PATH": "/m/x.gguf",
            "SEMIF_THREADS": "32",
            "SEMIF_N_GPU_LAYERS": "-1",
            "SEMIF_MAX_TOKENS": "4096",
            "SEMIF_MAX_IN_FLIGHT": "1",
            "SEMIF_MAX_SHARED_DECISIONS": "8",
            "SEMIF_PORT": "9090",
            "SEMIF_MAX_BODY_BYTES": "262144",
        }
    )
    assert (s.model_dir, s.model_file, s.n_threads, s.n_gpu_layers, s.n_ctx) == ("/m", "/m/x.gguf", 32, 999, 4096)
    assert (s.max_queue, s.max_shared_decisions, s.port, s.max_body_bytes) == (0, 8, 9090, 262144)
    assert s.parallel == 1  # one in flight in all: one context, nobody waiting
    assert any("SEMIF_THREADS=32 (the published sample's name) read as SM_LLAMA_CPP_THREADS=32" in n for n in s.notes)


@pytest.mark.parametrize(
    "env, parallel, queue",
    [
        ({"SEMIF_MAX_IN_FLIGHT": "4"}, 1, 3),  # the default context, the rest of the four waiting
        ({"SEMIF_MAX_IN_FLIGHT": "4", "SM_LLAMA_CPP_PARALLEL": "3"}, 3, 1),
        ({"SEMIF_MAX_IN_FLIGHT": "2", "SM_LLAMA_CPP_PARALLEL": "2"}, 2, 0),  # every one evaluated, none waiting
        ({"SEMIF_MAX_IN_FLIGHT": "4", "SM_LLAMA_CPP_PARALLEL": "2"}, 2, 2),
        # all three set, adding up: 8 in flight as 4 contexts and 4 waiting
        ({"SEMIF_MAX_IN_FLIGHT": "8", "SM_LLAMA_CPP_PARALLEL": "4", "DECISION_ADAPTER_MAX_QUEUE": "4"}, 4, 4),
        ({"SEMIF_MAX_IN_FLIGHT": "8", "DECISION_ADAPTER_MAX_QUEUE": "7"}, 1, 7),  # the default context and 7 waiting
        ({"SEMIF_MAX_IN_FLIGHT": "3", "SM_LLAMA_CPP_PARALLEL": "3", "DECISION_ADAPTER_MAX_QUEUE": "0"}, 3, 0),
        ({}, 1, 4),
    ],
)
def test_the_samples_requests_in_flight_are_divided_between_contexts_and_the_line(env, parallel, queue):
    s = load_settings(env)
    assert (s.parallel, s.max_queue) == (parallel, queue)
    if env:
        assert any(
            f"read as SM_LLAMA_CPP_PARALLEL={parallel} evaluated and DECISION_ADAPTER_MAX_QUEUE={queue} waiting" in note
            for note in s.notes
        )


@pytest.mark.parametrize(
    "env, named, fix",
    [
        # the default context and 4 waiting make 5, not 8
        (
            {"SEMIF_MAX_IN_FLIGHT": "8", "DECISION_ADAPTER_MAX_QUEUE": "4"},
            ("DECISION_ADAPTER_MAX_QUEUE=4",),
            "DECISION_ADAPTER_MAX_QUEUE=7 or SM_LLAMA_CPP_PARALLEL=4 or SEMIF_MAX_IN_FLIGHT=5",
        ),
        (
            {"SEMIF_MAX_IN_FLIGHT": "8", "SM_LLAMA_CPP_PARALLEL": "4", "DECISION_ADAPTER_MAX_QUEUE": "2"},
            ("SM_LLAMA_CPP_PARALLEL=4", "DECISION_ADAPTER_MAX_QUEUE=2"),
            "DECISION_ADAPTER_MAX_QUEUE=4 or SM_LLAMA_CPP_PARALLEL=6 or SEMIF_MAX_IN_FLIGHT=6",
        ),
        # more contexts than requests in flight
        (
            {"SEMIF_MAX_IN_FLIGHT": "2", "SM_LLAMA_CPP_PARALLEL": "4"},
            ("SM_LLAMA_CPP_PARALLEL=4",),
            "SEMIF_MAX_IN_FLIGHT to at least 4 or SM_LLAMA_CPP_PARALLEL to at most 2",
        ),
        (
            {"SEMIF_MAX_IN_FLIGHT": "2", "SM_LLAMA_CPP_PARALLEL": "4", "DECISION_ADAPTER_MAX_QUEUE": "0"},
            ("SM_LLAMA_CPP_PARALLEL=4", "DECISION_ADAPTER_MAX_QUEUE=0"),
            "SM_LLAMA_CPP_PARALLEL=2 or SEMIF_MAX_IN_FLIGHT=4",
        ),
    ],
)
def test_requests_in_flight_that_the_contexts_and_the_line_do_not_add_up_to_stop_the_start(env, named, fix):
    with pytest.raises(SettingsError) as caught:
        load_settings(env)
    message = str(caught.value)
    assert message.startswith(f"SEMIF_MAX_IN_FLIGHT={env['SEMIF_MAX_IN_FLIGHT']} ")
    assert all(name in message for name in named) and fix in message


def test_defaults_hold_a_255_option_choice_and_the_sample_limits():
    s = load_settings({})
    assert s.n_ctx == 8192 and s.max_shared_decisions == 64 and s.max_body_bytes == 1_048_576


@pytest.mark.parametrize(
    "env",
    [
        {"SEMIF_N_GPU_LAYERS": "-1", "SM_LLAMA_CPP_N_GPU_LAYERS": "999"},  # both mean "all layers"
        {"SEMIF_THREADS": "8", "SM_LLAMA_CPP_THREADS": "8"},
        {"SEMIF_MODEL_DIR": "/opt/ml/model/", "SM_MODEL_DIR": "/opt/ml/model"},
    ],
)
def test_both_spellings_that_agree_are_fine(env):
    load_settings(env)


@pytest.mark.parametrize(
    "env, ours",
    [
        ({"SEMIF_THREADS": "4", "SM_LLAMA_CPP_THREADS": "8"}, "SM_LLAMA_CPP_THREADS"),
        ({"SEMIF_N_GPU_LAYERS": "10", "SM_LLAMA_CPP_N_GPU_LAYERS": "999"}, "SM_LLAMA_CPP_N_GPU_LAYERS"),
        ({"SEMIF_MAX_IN_FLIGHT": "3", "DECISION_ADAPTER_MAX_QUEUE": "4"}, "DECISION_ADAPTER_MAX_QUEUE"),
        ({"SEMIF_MAX_TOKENS": "4096", "SM_LLAMA_CPP_CTX_SIZE": "8192"}, "SM_LLAMA_CPP_CTX_SIZE"),
    ],
)
def test_both_spellings_that_disagree_stop_the_start_naming_both(env, ours):
    semif = next(k for k in env if k.startswith("SEMIF_"))
    with pytest.raises(SettingsError, match=f"{semif}=.*{ours}="):
        load_settings(env)


def test_unknown_sample_names_are_reported_and_known_unused_ones_explained():
    s = load_settings({"SEMIF_THREAD": "4", "SEMIF_TOKENIZER_REVISION": "851bf6e8"})
    assert s.unknown_sample_settings == ("SEMIF_THREAD",)
    assert s.n_threads is None
    assert any("SEMIF_TOKENIZER_REVISION" in n and "not used" in n for n in s.notes)


@pytest.mark.parametrize("value", ["0", "many"])
def test_bad_sample_values_name_the_sample_variable(value):
    with pytest.raises(SettingsError, match="SEMIF_MAX_IN_FLIGHT"):
        load_settings({"SEMIF_MAX_IN_FLIGHT": value})


# -- each setting declared once --------------------------------------------------------------


def test_every_field_a_variable_sets_is_declared_once_with_its_own_variable():
    specs = declared()
    derived = {"ignored_llama_settings", "notes", "unknown_sample_settings"}
    assert {s.name for s in specs} | derived == {f.name for f in dataclasses.fields(Settings)}
    names = [n for s in specs for n in (s.env, *s.also)]
    assert len(names) == len(set(names)), "two settings read one variable"
    assert all(s.doc for s in specs)


def test_each_declared_default_is_what_an_empty_environment_loads():
    loaded = load_settings({})
    for spec in declared():
        assert getattr(loaded, spec.name) == spec.default, spec.name


@pytest.mark.parametrize("spec", declared(), ids=lambda s: s.env)
def test_each_declared_bound_and_choice_is_enforced(spec):
    if spec.minimum is not None:
        below = spec.minimum - 1 if spec.kind == "int" else spec.minimum - 0.05
        with pytest.raises(SettingsError, match=f"{spec.env}=.* is below"):
            load_settings({spec.env: str(below)})
    if spec.maximum is not None:
        with pytest.raises(SettingsError, match=f"{spec.env}=.* is above"):
            load_settings({spec.env: str(spec.maximum + 1)})
    if spec.choices:
        with pytest.raises(SettingsError, match=f"{spec.env}=.* is not one of"):
            load_settings({spec.env: "neither"})
        for choice in spec.choices:
            load_settings({spec.env: choice})


def test_the_log_level_is_one_python_knows():
    assert load_settings({"DECISION_ADAPTER_LOG_LEVEL": "debug"}).log_level == "DEBUG"
    with pytest.raises(SettingsError, match="DECISION_ADAPTER_LOG_LEVEL='LOUD' is not one of DEBUG"):
        load_settings({"DECISION_ADAPTER_LOG_LEVEL": "loud"})


def test_the_flash_attention_spellings_of_llama_server_are_read():
    assert load_settings({"SM_LLAMA_CPP_FLASH_ATTN": "true"}).flash_attn == "on"
    assert load_settings({"SM_LLAMA_CPP_FLASH_ATTN": "disabled"}).flash_attn == "off"
    assert load_settings({"SM_LLAMA_CPP_FLASH_ATTN": "auto"}).flash_attn == "auto"

import pytest

from decision_adapter.settings import SettingsError, load_settings


def test_defaults_follow_the_dlc():
    s = load_settings({})
    assert s.model_dir == "/opt/ml/model"
    assert s.port == 8080
    assert s.n_gpu_layers == 0
    assert s.prefix_reuse == "auto"
    assert s.request_timeout_s == 30.0  # one request may hold the model at most this long


def test_a_zero_request_timeout_turns_the_limit_off():
    assert load_settings({"DECISION_ADAPTER_REQUEST_TIMEOUT": "0"}).request_timeout_s == 0
    assert load_settings({"DECISION_ADAPTER_REQUEST_TIMEOUT": "2.5"}).request_timeout_s == 2.5


def test_dlc_names_configure_llama():
    s = load_settings({"SM_MODEL_DIR": "/m", "SM_LLAMA_CPP_THREADS": "32", "SM_LLAMA_CPP_N_GPU_LAYERS": "999",
                       "SM_LLAMA_CPP_CTX_SIZE": "8192", "SAGEMAKER_BIND_TO_PORT": "9000"})
    kwargs = s.llama_kwargs()
    assert kwargs["n_threads"] == 32 and kwargs["n_threads_batch"] == 32
    assert kwargs["n_gpu_layers"] == -1  # 999 = all layers
    assert kwargs["n_ctx"] == 8192
    assert (s.model_dir, s.port) == ("/m", 9000)


def test_minus_one_gpu_layers_means_all():
    assert load_settings({"SM_LLAMA_CPP_N_GPU_LAYERS": "-1"}).llama_kwargs()["n_gpu_layers"] == -1


def test_unknown_llama_flags_are_reported_not_dropped_silently():
    s = load_settings({"SM_LLAMA_CPP_FLASH_ATTN": "true", "SM_LLAMA_CPP_THREADS": "2", "SM_LLAMA_CPP_PORT": "8080"})
    assert s.ignored_llama_settings == ("SM_LLAMA_CPP_FLASH_ATTN",)


@pytest.mark.parametrize("env, needle", [
    ({"SM_LLAMA_CPP_THREADS": "many"}, "SM_LLAMA_CPP_THREADS"),
    ({"SM_LLAMA_CPP_THREADS": "0"}, "at least 1"),
    ({"DECISION_ADAPTER_PREFIX_REUSE": "sometimes"}, "PREFIX_REUSE"),
    ({"DECISION_ADAPTER_QUEUE_TIMEOUT": "-1"}, "QUEUE_TIMEOUT"),
    ({"DECISION_ADAPTER_REQUEST_TIMEOUT": "-5"}, "REQUEST_TIMEOUT"),
    ({"DECISION_ADAPTER_REQUEST_TIMEOUT": "soon"}, "REQUEST_TIMEOUT"),
])
def test_bad_values_name_the_variable(env, needle):
    with pytest.raises(SettingsError, match=needle):
        load_settings(env)

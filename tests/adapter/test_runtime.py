"""What llama.cpp runs on: CPU features, the extra-buffer choice, the portable build in force."""

import platform

import pytest

from decision_adapter import runtime
from decision_adapter.settings import SettingsError, load_settings

NATIVE_AMX = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
    "AVX512 = 1 | AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | "
    "OPENMP = 1 | REPACK = 1 | "
)
PORTABLE = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | REPACK = 1 | "


def test_cpu_features_are_read_from_the_system_info_line():
    assert runtime.cpu_features(PORTABLE) == ("SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2", "REPACK")
    assert "AMX_INT8" in runtime.cpu_features(NATIVE_AMX)
    assert runtime.cpu_features("CPU : AVX = 0 | AVX2 = 0") == ()


def test_auto_turns_extra_buffers_off_only_where_llama_cpp_reports_amx():
    on, why_on = runtime.extra_buffers("auto", runtime.cpu_features(PORTABLE))
    off, why_off = runtime.extra_buffers("auto", runtime.cpu_features(NATIVE_AMX))
    assert (on, off) == (True, False)
    assert "AMX" in why_off and "auto" in why_on


@pytest.mark.parametrize("mode, expected", [("on", True), ("off", False)])
def test_on_and_off_win_over_what_llama_cpp_reports(mode, expected):
    for info in (PORTABLE, NATIVE_AMX):
        assert runtime.extra_buffers(mode, runtime.cpu_features(info))[0] is expected


def test_the_setting_is_read_and_checked():
    assert load_settings({}).extra_buffers == "auto"
    assert load_settings({"DECISION_ADAPTER_EXTRA_BUFFERS": "OFF"}).extra_buffers == "off"
    with pytest.raises(SettingsError, match="DECISION_ADAPTER_EXTRA_BUFFERS"):
        load_settings({"DECISION_ADAPTER_EXTRA_BUFFERS": "sometimes"})


def test_model_params_sets_the_field_for_the_load_and_restores_the_default():
    import llama_cpp

    before = llama_cpp.llama_cpp.llama_model_default_params().use_extra_bufts
    with runtime.model_params(llama_cpp, use_extra_bufts=not before):
        assert llama_cpp.llama_cpp.llama_model_default_params().use_extra_bufts is (not before)
    assert llama_cpp.llama_cpp.llama_model_default_params().use_extra_bufts is before


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the portable baseline is x86-64's")
def test_the_installed_llama_cpp_is_the_portable_build():
    """The Makefile's build compiles no AVX-512 and no AMX code, whatever CPU built it.

    A native build on an AMX machine reports AMX_INT8 here (and crashes on its first
    forward pass there); one built on an AVX-512 machine dies with SIGILL on an AVX2-only one.
    """
    info = runtime.inspect("auto").system_info
    features = runtime.cpu_features(info)
    assert "AVX2" in features, info
    assert not [f for f in features if f.startswith(("AVX512", "AMX"))], info


@pytest.mark.parametrize(
    "raw, mode",
    [
        (None, "off"),
        ("", "off"),
        ("auto", "auto"),
        ("ON", "on"),
        ("true", "on"),
        ("1", "on"),
        ("false", "off"),
        ("disabled", "off"),
    ],
)
def test_flash_attention_is_read_as_llama_server_spells_it(raw, mode):
    env = {} if raw is None else {"SM_LLAMA_CPP_FLASH_ATTN": raw}
    settings = load_settings(env)
    assert settings.flash_attn == mode
    assert "SM_LLAMA_CPP_FLASH_ATTN" not in settings.ignored_llama_settings


def test_a_bad_flash_attention_value_names_the_variable():
    with pytest.raises(SettingsError, match="SM_LLAMA_CPP_FLASH_ATTN='sometimes' is not one of off, on, auto"):
        load_settings({"SM_LLAMA_CPP_FLASH_ATTN": "sometimes"})


def test_context_params_sets_known_fields_for_the_load_only():
    import llama_cpp

    bindings = llama_cpp.llama_cpp
    original, seen = bindings.llama_init_from_model, []

    def stub(model, params):
        seen.append(params)
        return "ctx"

    bindings.llama_init_from_model = stub
    try:
        with runtime.context_params(llama_cpp, flash_attn_type=runtime.FLASH_ATTN_TYPES["auto"], no_such_field=1):
            assert bindings.llama_init_from_model is not stub
            assert bindings.llama_init_from_model(None, bindings.llama_context_default_params()) == "ctx"
        assert bindings.llama_init_from_model is stub
    finally:
        bindings.llama_init_from_model = original
    assert seen[0].flash_attn_type == -1 and not hasattr(seen[0], "no_such_field")


def test_flash_attention_reports_what_llama_cpp_resolved():
    assert runtime.flash_attention("llama_context: Flash Attention enabled\n", "auto") == "on"
    assert runtime.flash_attention("x: Flash Attention not supported, set to disabled\n", "auto") == "off"
    assert runtime.flash_attention("nothing about it", "auto").startswith("auto")
    assert runtime.flash_attention("llama_context: Flash Attention enabled\n", "off") == "off"

"""The DLC's entrypoint rules (workshop_lib.local.dlc_rules) and llama-server behind nginx started by them.

The flag mapping and model discovery are checked row by row against the DLC's entrypoint
(``scripts/docker/llama_cpp/sagemaker_entrypoint.sh`` in github.com/aws/deep-learning-containers); the real
server is this checkout's llama-server on the embedded model, reached only through nginx's
/ping and /invocations, and stopped by its fixture.
"""

from __future__ import annotations

import json
import os
import stat
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support import THREADS
from workshop_lib import steps
from workshop_lib.client import EndpointClient
from workshop_lib.local import dlc_rules, dlc_server, group_alive
from workshop_lib.local.dlc_rules import LauncherError, find_model, flags, launch_plan

P = dlc_rules.PREFIX

# (variable, value, the flags the DLC makes of it): the entrypoint's rules, one row each.
FLAG_RULES = [
    ("CTX_SIZE", "4096", ["--ctx-size", "4096"]),
    ("N_GPU_LAYERS", "999", ["--n-gpu-layers", "999"]),
    ("THREADS", "2", ["--threads", "2"]),
    ("HF_REPO", "org/model-GGUF", ["--hf-repo", "org/model-GGUF"]),
    ("NO_MMAP", "true", ["--no-mmap"]),
    ("NO_MMAP", "TRUE", ["--no-mmap"]),
    ("CONT_BATCHING", "", ["--cont-batching"]),  # empty: a bare flag
    ("FLASH_ATTN", "false", []),  # false: dropped
    ("FLASH_ATTN", "False", []),
    ("ALIAS", "two words", ["--alias", "two words"]),  # one argument, never split
    ("PORT", "8080", []),  # nginx's port, not passed on
    ("MODEL_DIR", "/opt/ml/model", []),  # the entrypoint's own: where it looks for the model
    ("MODEL", "/opt/ml/model/m.gguf", []),  # becomes --model by discovery, not by this rule
]


@pytest.mark.parametrize("name, value, expected", FLAG_RULES)
def test_each_variable_becomes_the_flag_the_dlc_passes(name, value, expected):
    assert flags({P + name: value}) == expected


@pytest.mark.parametrize("name, value, expected", [r for r in FLAG_RULES if r[0] not in ("MODEL", "MODEL_DIR")])
def test_notebook_02s_settings_list_says_what_the_launcher_passes(name, value, expected):
    [line] = steps.llama_settings({P + name: value})
    shown = line.split("->  llama-server ", 1)[1]
    if expected:
        assert shown == " ".join(expected)
    else:
        assert shown.startswith(("dropped", "not passed on"))


def test_other_variables_are_left_alone_and_flags_come_in_name_order():
    env = {
        P + "THREADS": "2",
        "DECISION_ADAPTER_MAX_QUEUE": "4",
        "PATH": "/bin",
        P + "CTX_SIZE": "512",
        "sm_llama_cpp_threads": "9",
    }
    assert flags(env) == ["--ctx-size", "512", "--threads", "2"]


def test_a_variable_with_no_name_is_refused():
    with pytest.raises(LauncherError, match="SM_LLAMA_CPP_"):
        flags({P: "x"})


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF")
    return path


def test_the_model_is_the_variable_then_the_first_gguf_then_the_first_in_a_subfolder(tmp_path):
    touch(tmp_path / "b.gguf")
    touch(tmp_path / "a.gguf")
    touch(tmp_path / "0" / "z.gguf")
    assert find_model({}, tmp_path) == str(tmp_path / "a.gguf")  # top level first, alphabetically
    assert find_model({P + "MODEL": "/x/given.gguf"}, tmp_path) == "/x/given.gguf"  # as given, not looked for
    sub = tmp_path / "only-sub"
    touch(sub / "m" / "b.gguf")
    touch(sub / "m" / "a.gguf")
    assert find_model({P + "MODEL_DIR": str(sub)}, tmp_path) == str(sub / "m" / "a.gguf")
    assert find_model({P + "MODEL_DIR": str(tmp_path / "empty")}, tmp_path) is None


def test_the_command_line_listens_privately_whatever_the_settings_say(tmp_path):
    model = touch(tmp_path / "m.gguf")
    plan = launch_plan(
        {P + "HOST": "0.0.0.0", P + "PORT": "8080", P + "THREADS": "2"},
        program="ls",
        port=8081,
        default_model_dir=tmp_path,
    )
    assert plan.argv[:3] == ("ls", "--model", str(model))
    assert plan.argv[-4:] == ("--host", "127.0.0.1", "--port", "8081")  # last: these win
    assert "8080" not in plan.argv and plan.notes == ()


def test_the_pitfalls_are_reproduced_and_said(tmp_path):
    touch(tmp_path / "b.gguf")
    touch(tmp_path / "a.gguf")
    both = launch_plan({P + "HF_REPO": "org/r"}, default_model_dir=tmp_path)
    assert "--model" in both.argv and "--hf-repo" in both.argv  # what the DLC does with both
    assert any("HF_REPO" in n and "both" in n for n in both.notes)
    assert any("alphabetically first, a.gguf" in n and "b.gguf" in n for n in both.notes)
    chosen = launch_plan({P + "MODEL": str(tmp_path / "b.gguf")}, default_model_dir=tmp_path)
    assert chosen.notes == ()  # SM_LLAMA_CPP_MODEL chose: nothing to warn about
    hub_only = launch_plan({P + "HF_REPO": "org/r"}, default_model_dir=tmp_path / "empty")
    assert "--model" not in hub_only.argv and hub_only.model is None


def test_no_model_anywhere_names_the_setting(tmp_path):
    with pytest.raises(LauncherError, match="SM_LLAMA_CPP_MODEL"):
        launch_plan({}, default_model_dir=tmp_path)


def test_the_containers_model_folder_moves_to_the_local_one(tmp_path):
    settings, changed = dlc_rules.local_settings(
        {P + "MODEL": "/opt/ml/model/sub/m.gguf", P + "THREADS": "2"}, tmp_path
    )
    assert settings[P + "MODEL"] == f"{tmp_path}/sub/m.gguf" and settings[P + "MODEL_DIR"] == str(tmp_path)
    assert settings[P + "THREADS"] == "2" and set(changed) == {P + "MODEL", P + "MODEL_DIR"}
    elsewhere, _ = dlc_rules.local_settings({P + "MODEL_DIR": "/data/models"}, tmp_path)
    assert elsewhere[P + "MODEL_DIR"] == "/data/models"  # not the container's folder: left as it is


def test_the_server_is_found_by_setting_then_checkout_then_path(tmp_path):
    program = tmp_path / "llama-server"
    program.write_text("#!/bin/sh\n")
    with pytest.raises(LauncherError, match=dlc_server.SERVER_ENV):
        dlc_server.find_llama_server({dlc_server.SERVER_ENV: str(program)})  # not executable yet
    assert dlc_server.SERVER_ENV in dlc_server.missing({dlc_server.SERVER_ENV: str(program), "PATH": ""})
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    assert dlc_server.find_llama_server({dlc_server.SERVER_ENV: str(program)}) == program
    if not os.access(dlc_server.CHECKOUT_SERVER, os.X_OK):
        assert dlc_server.find_llama_server({"PATH": str(tmp_path)}) == program


def test_answers_are_told_apart_by_what_llama_server_writes():
    identity = dlc_server.identity_from_props(
        {"build_info": "b9-abc", "model_alias": "/m/x.gguf", "total_slots": 4, "default_generation_settings": {}}
    )
    reply = {
        "model": "/m/x.gguf",
        "system_fingerprint": "b9-abc",
        "timings": {"prompt_n": 3, "predicted_n": 1},
        "choices": [],
    }
    assert dlc_server.answer_problem(reply, identity) == ""
    adapter_shaped = {k: v for k, v in reply.items() if k not in ("system_fingerprint", "timings")}
    assert "system_fingerprint" in dlc_server.answer_problem(adapter_shaped)
    assert "build" in dlc_server.answer_problem({**reply, "system_fingerprint": "b8-def"}, identity)
    assert "model" in dlc_server.answer_problem({**reply, "model": "other"}, identity)
    with pytest.raises(LauncherError, match="build_info"):
        dlc_server.identity_from_props({"status": "ok"})


@pytest.mark.skipif(dlc_server.find_nginx() is None, reason="nginx is not installed")
def test_nginx_accepts_the_configuration(tmp_path):
    from tests.support import run_tool

    config = tmp_path / "nginx.conf"
    config.write_text(dlc_rules.nginx_config(port=1, upstream_port=2, prefix=tmp_path, run_as=dlc_rules.run_as()))
    status = run_tool(
        [str(dlc_server.find_nginx()), "-t", "-p", str(tmp_path), "-e", "stderr", "-c", str(config)],
        tmp_path / "nginx-t.log",
        timeout_s=30,
    )
    assert status == 0, (tmp_path / "nginx-t.log").read_text()


# ---- the real pair --------------------------------------------------------------------------------

ENDPOINT_SETTINGS = {
    P + "CTX_SIZE": "2048",
    P + "THREADS": str(THREADS),
    P + "N_GPU_LAYERS": "0",
    P + "PORT": "8080",
    P + "FLASH_ATTN": "false",
}


@pytest.fixture
def served(model_dir, tmp_path):
    reason = dlc_server.missing()
    if reason:
        pytest.skip(reason)
    process = dlc_server.LlamaServerProcess(
        model_dir, log_path=tmp_path / "serve.log", settings=ENDPOINT_SETTINGS, work_dir=tmp_path / "serve"
    )
    try:
        yield process.start(timeout_s=180)
    finally:
        process.stop()


def get(url: str) -> tuple[int, dict, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


@pytest.mark.slow
def test_llama_server_behind_nginx_answers_ping_and_invocations(served, model_dir, tmp_path):
    status, headers, body = get(served.url + "/ping")
    assert status == 200 and json.loads(body) == json.loads(get(served.private_url + "/health")[2])
    assert headers.get("Server", "").startswith("nginx")  # nginx faces the caller
    assert get(served.url + "/props")[0] == 404  # only SageMaker's two routes go through
    assert get(served.url + "/invocations")[0] == 405
    # The command line it runs is the one the rules make of the endpoint's settings.
    log = (tmp_path / "serve.log").read_text(errors="replace")
    assert f"serve: llama-server: {' '.join(served.plan().argv)}" in log
    assert served.plan().model == str(sorted(model_dir.glob("*.gguf"))[0])
    assert "--flash-attn" not in served.plan().argv and "8080" not in served.plan().argv
    # Notebook 02's own call: thinking off, a small max_tokens.
    reply = EndpointClient.local(served.url).chat("In one sentence: what is a decision model?", max_tokens=8)
    assert isinstance(reply.content, str) and 0 < reply.usage["completion_tokens"] <= 8
    assert dlc_server.answer_problem(reply.raw, dlc_server.fetch_identity(served.private_url)) == ""


@pytest.mark.slow
def test_stopping_ends_both_programs_and_removes_the_private_folder(served, tmp_path):
    pgid = served.process.pid
    assert group_alive(pgid) and (tmp_path / "serve" / "nginx.conf").is_file()
    served.stop()
    assert not group_alive(pgid)
    for url in (served.url + "/ping", served.private_url + "/health"):
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(url, timeout=2)
    assert not (tmp_path / "serve").exists()

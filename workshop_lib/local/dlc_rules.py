"""The llama.cpp DLC entrypoint's rules, as pure functions: what its ``/usr/bin/serve`` decides before
anything runs (``scripts/docker/llama_cpp/sagemaker_entrypoint.sh`` in github.com/aws/deep-learning-containers).

* ``find_model``: which GGUF the model folder offers;
* ``flags``: every ``SM_LLAMA_CPP_*`` variable as a llama-server flag (but those the entrypoint reads itself);
* ``launch_plan``: the whole llama-server command line, and the pitfalls the settings walk into;
* ``local_settings``: the container's model folder moved to where the rehearsal unpacked the model;
* ``nginx_config``: nginx in front of llama-server, SageMaker's two routes mapped onto llama-server's own.

dlc_server.py runs what these decide.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidInput

PREFIX = "SM_LLAMA_CPP_"
DEFAULT_MODEL_DIR = "/opt/ml/model"
# Read by the entrypoint itself, never passed to llama-server: the model's choice and nginx's port.
CONSUMED = ("MODEL", "MODEL_DIR", "PORT")
PRIVATE_HOST = "127.0.0.1"
UPSTREAM_TIMEOUT_S = 120  # local endpoints share two cores: slower than SageMaker's 60 s allows
MAX_BODY = "25m"


class LauncherError(InvalidInput):
    """The DLC's rules cannot start llama-server from these settings; the message says which and why."""


def flag_name(variable: str) -> str:
    """``SM_LLAMA_CPP_FOO_BAR`` -> ``--foo-bar``."""
    if not variable.startswith(PREFIX) or len(variable) == len(PREFIX):
        raise LauncherError(f"{variable!r} is not an {PREFIX}<NAME> variable")
    return "--" + variable[len(PREFIX) :].lower().replace("_", "-")


def flags(environ: Mapping[str, str]) -> list[str]:
    """The llama-server flags the DLC makes of ``environ``'s ``SM_LLAMA_CPP_*`` variables, by name.

    ``v`` becomes ``--foo-bar v``; ``true`` and the empty string a bare ``--foo-bar``; ``false``
    nothing (the words in any case, as ``steps.llama_settings`` shows them). MODEL, MODEL_DIR
    and PORT are the entrypoint's own (``CONSUMED``); every other variable is left alone.
    """
    out: list[str] = []
    for variable in sorted(environ):
        if not variable.startswith(PREFIX) or variable[len(PREFIX) :] in CONSUMED:
            continue
        value = environ[variable]
        if value.lower() == "false":
            continue
        out.append(flag_name(variable))
        if value != "" and value.lower() != "true":
            out.append(value)
    return out


def find_model(environ: Mapping[str, str], default_dir: str | Path = DEFAULT_MODEL_DIR) -> str | None:
    """``SM_LLAMA_CPP_MODEL`` as given; else the alphabetically first ``*.gguf`` of
    ``SM_LLAMA_CPP_MODEL_DIR`` (default ``default_dir``), then of its subfolders (``*/*.gguf``)."""
    given = environ.get(PREFIX + "MODEL", "")
    if given:
        return given
    folder = Path(environ.get(PREFIX + "MODEL_DIR") or default_dir)
    for pattern in ("*.gguf", "*/*.gguf"):
        found = sorted(str(p) for p in folder.glob(pattern))
        if found:
            return found[0]
    return None


@dataclass(frozen=True)
class LaunchPlan:
    argv: tuple[str, ...]  # llama-server's command line, the program first
    model: str | None  # the GGUF passed as --model (None: llama-server downloads one)
    notes: tuple[str, ...] = ()  # the entrypoint's pitfalls these settings walk into

    def lines(self) -> list[str]:
        return [f"llama-server: {' '.join(self.argv)}", *(f"  note: {n}" for n in self.notes)]


def launch_plan(
    environ: Mapping[str, str],
    *,
    program: str = "llama-server",
    port: int = 8081,
    default_model_dir: str | Path = DEFAULT_MODEL_DIR,
) -> LaunchPlan:
    """llama-server's command line under the DLC's rules, listening on ``127.0.0.1:port``.

    The listening address comes last, so a ``SM_LLAMA_CPP_HOST`` or ``_PORT`` cannot move
    llama-server off its private port (nginx alone faces callers).
    """
    model = find_model(environ, default_model_dir)
    hf_repo = environ.get(PREFIX + "HF_REPO", "")
    if model is None and not hf_repo:
        folder = environ.get(PREFIX + "MODEL_DIR") or default_model_dir
        raise LauncherError(
            f"no model for llama-server: {PREFIX}MODEL is unset and {folder} holds no *.gguf (nor "
            f"*/*.gguf); package a GGUF in the model tarball or set {PREFIX}MODEL to its path"
        )
    notes = []
    if model is not None and hf_repo:
        notes.append(
            f"{PREFIX}HF_REPO={hf_repo} is set beside a model file, so llama-server gets both --model and "
            "--hf-repo (the DLC's pitfall): set one of them"
        )
    if not environ.get(PREFIX + "MODEL") and model is not None:
        folder = Path(model).parent
        others = sorted(p.name for p in folder.glob("*.gguf") if str(p) != model)
        if others:
            notes.append(
                f"{folder} holds several GGUF files; the alphabetically first, {Path(model).name}, was "
                f"taken over {', '.join(others)} (set {PREFIX}MODEL to choose)"
            )
    argv = [
        program,
        *(["--model", model] if model is not None else []),
        *flags(environ),
        "--host",
        PRIVATE_HOST,
        "--port",
        str(port),
    ]
    return LaunchPlan(tuple(argv), model, tuple(notes))


def local_settings(environ: Mapping[str, str], model_dir: str | Path) -> tuple[dict[str, str], dict[str, str]]:
    """``environ`` with the container's model folder (``/opt/ml/model``) moved to ``model_dir``,
    where the rehearsal unpacked the tarball; returns (settings, {variable: what changed})."""
    here = str(Path(model_dir))
    settings = dict(environ)
    changed = {}
    for name in ("MODEL_DIR", "MODEL"):
        value = settings.get(PREFIX + name, "")
        if value == DEFAULT_MODEL_DIR or value.startswith(DEFAULT_MODEL_DIR + "/"):
            settings[PREFIX + name] = here + value[len(DEFAULT_MODEL_DIR) :]
            changed[PREFIX + name] = f"{value} -> {settings[PREFIX + name]}"
    if not settings.get(PREFIX + "MODEL_DIR"):
        settings[PREFIX + "MODEL_DIR"] = here
        changed[PREFIX + "MODEL_DIR"] = f"(unset, {DEFAULT_MODEL_DIR}) -> {here}"
    return settings, changed


def run_as() -> str:
    """Started as root, nginx gives its workers to "nobody", who may not write this private folder."""
    if os.geteuid() != 0:
        return "# not root: the workers run as this user"
    import grp
    import pwd

    return f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};"


def nginx_config(
    *,
    port: int,
    upstream_port: int,
    prefix: str | Path,
    timeout_s: int = UPSTREAM_TIMEOUT_S,
    run_as: str = "# not root: the workers run as this user",
) -> str:
    """nginx.conf for SageMaker's routes on ``127.0.0.1:port`` onto llama-server on ``upstream_port``."""
    return f"""\
# nginx in front of llama-server as the llama.cpp DLC runs it: SageMaker's two routes mapped onto
# llama-server's own, every other path refused. Written by workshop_lib/local/dlc_server.py.
{run_as}
worker_processes 1;
pid {prefix}/nginx.pid;
error_log stderr error;

events {{
    worker_connections 256;
}}

http {{
    server_tokens off;
    default_type application/json;
    client_body_temp_path {prefix}/client_body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    log_format route '$remote_addr [$time_local] "$request_method $uri" $status $body_bytes_sent $request_time';
    access_log /dev/stdout route;
    client_max_body_size {MAX_BODY};

    upstream llama_server {{
        server {PRIVATE_HOST}:{upstream_port};
        keepalive 4;
    }}

    server {{
        listen {PRIVATE_HOST}:{port};
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_connect_timeout 5s;
        proxy_read_timeout {timeout_s}s;

        location = /ping {{
            if ($request_method != GET) {{
                return 405;
            }}
            proxy_pass http://llama_server/health;
        }}

        location = /invocations {{
            if ($request_method != POST) {{
                return 405;
            }}
            # an answer asked for with "stream": true reaches the caller as llama-server writes it
            proxy_buffering off;
            proxy_pass http://llama_server/v1/chat/completions;
        }}

        location / {{
            return 404;
        }}
    }}
}}
"""


# ---- where the programs are -------------------------------------------------------------------

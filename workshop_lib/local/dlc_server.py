"""The llama.cpp DLC's own server, on this machine: llama-server behind nginx, started by its rules.

The standard endpoint runs the AWS llama.cpp DLC unchanged. Its entrypoint (``/usr/bin/serve``:
``scripts/docker/llama_cpp/sagemaker_entrypoint.sh`` in github.com/aws/deep-learning-containers)
chooses the model, turns every ``SM_LLAMA_CPP_*`` variable into a llama-server flag, starts
llama-server on a private loopback port and puts nginx in front of it on the endpoint's port, with
SageMaker's two routes mapped onto llama-server's own: ``GET /ping`` -> ``/health`` and
``POST /invocations`` -> ``/v1/chat/completions``.
Local rehearsal stands in for that image with this module:

* pure rules: ``find_model`` (model discovery), ``flags`` (variables -> argv), ``launch_plan``
  (the whole llama-server command line and the pitfalls it walks into), ``nginx_config``;
* where the programs are: ``find_llama_server`` (``WORKSHOP_LLAMA_SERVER``, then the checkout's
  ``.llama.cpp/bin/llama-server``, laid out like the DLC's ``/opt/llama.cpp/bin``, then ``PATH``)
  and ``find_nginx``; ``missing`` says in one line why the pair cannot run here;
* the process: ``LlamaServerProcess`` (a ``local.ServerProcess``) runs ``serve`` below, the
  stand-in for ``/usr/bin/serve``, as one process group that holds llama-server and nginx;
* what tells llama-server's answers apart: ``identity_from_props`` (its ``/props``) and
  ``answer_problem`` (a chat completion carries the build as ``system_fingerprint`` and its
  ``timings``; the decision adapter's carries neither).

What the image adds and this does not reproduce is ``NOT_REPRODUCED``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidInput
from .processes import ServerProcess, free_port

PREFIX = "SM_LLAMA_CPP_"
DEFAULT_MODEL_DIR = "/opt/ml/model"
# Read by the entrypoint itself, never passed to llama-server: the model's choice and nginx's port.
CONSUMED = ("MODEL", "MODEL_DIR", "PORT")
PRIVATE_HOST = "127.0.0.1"
SERVER_ENV = "WORKSHOP_LLAMA_SERVER"
CHECKOUT_SERVER = Path(__file__).resolve().parents[2] / ".llama.cpp" / "bin" / "llama-server"
SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/sbin")  # nginx lives here, often off a user's PATH
UPSTREAM_TIMEOUT_S = 120  # local endpoints share two cores: slower than SageMaker's 60 s allows
MAX_BODY = "25m"

NOT_REPRODUCED = (
    "the DLC image itself: its /usr/bin/serve (its documented rules were applied instead), its "
    "llama.cpp build b10433 with a CPU variant per micro-architecture, its nginx settings and Amazon "
    "Linux 2023; this checkout's llama-server ran behind nginx in its place"
)


class LauncherError(InvalidInput):
    """The DLC's rules cannot start llama-server from these settings; the message says which and why."""


# ---- the entrypoint's rules (pure) ------------------------------------------------------------


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


def _run_as() -> str:
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


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_llama_server(environ: Mapping[str, str] | None = None) -> Path:
    """``$WORKSHOP_LLAMA_SERVER``, else the checkout's ``.llama.cpp/bin/llama-server``, else ``PATH``'s."""
    environ = os.environ if environ is None else environ
    given = environ.get(SERVER_ENV, "").strip()
    if given:
        if not _executable(Path(given)):
            raise LauncherError(
                f"{SERVER_ENV}={given} is not an executable file; point it at a llama-server binary or unset it"
            )
        return Path(given)
    if _executable(CHECKOUT_SERVER):
        return CHECKOUT_SERVER
    found = shutil.which("llama-server", path=environ.get("PATH"))
    if found:
        return Path(found)
    raise LauncherError(
        f"no llama-server: {CHECKOUT_SERVER} is missing (`make` builds it) and none is on PATH "
        f"({SERVER_ENV} names another)"
    )


def find_nginx(environ: Mapping[str, str] | None = None) -> Path | None:
    environ = os.environ if environ is None else environ
    search = os.pathsep.join([environ.get("PATH", ""), *SBIN_DIRS])
    found = shutil.which("nginx", path=search)
    return Path(found) if found else None


def missing(environ: Mapping[str, str] | None = None) -> str:
    """Why llama-server behind nginx cannot run here, in one line; empty when it can."""
    try:
        find_llama_server(environ)
    except LauncherError as exc:
        return str(exc)
    if find_nginx(environ) is None:
        return "nginx is not installed (apt-get install nginx; `make test` installs it as root)"
    return ""


# ---- telling llama-server's answers apart (pure, and one GET) -----------------------------------


@dataclass(frozen=True)
class ServerIdentity:
    build: str  # llama-server's build_info, e.g. b1-4df29be: its chat answers' system_fingerprint
    model: str  # the model's alias (its path unless --alias): its answers' "model"
    slots: int


def identity_from_props(props) -> ServerIdentity:
    """llama-server's ``GET /props`` read; LauncherError naming what is missing when it is not one."""
    if not isinstance(props, dict):
        raise LauncherError(f"/props answered {type(props).__name__}, not llama-server's object")
    lacking = [key for key in ("build_info", "model_alias", "total_slots") if key not in props]
    if lacking or not isinstance(props.get("default_generation_settings"), dict):
        raise LauncherError(
            "/props is not llama-server's: it lacks " + ", ".join(lacking or ["default_generation_settings"])
        )
    return ServerIdentity(str(props["build_info"]), str(props["model_alias"]), int(props["total_slots"]))


def answer_problem(reply, identity: ServerIdentity | None = None) -> str:
    """Why a chat completion did not come from llama-server (from that one, with ``identity``); empty if it did."""
    if not isinstance(reply, dict):
        return "the reply is not a JSON object"
    fingerprint, timings = reply.get("system_fingerprint"), reply.get("timings")
    if not fingerprint:
        return "the reply has no system_fingerprint (llama-server writes its build there)"
    if not isinstance(timings, dict) or not {"prompt_n", "predicted_n"} <= set(timings):
        return "the reply has no llama-server timings (prompt_n, predicted_n)"
    if identity is not None:
        if fingerprint != identity.build:
            return f"the reply's system_fingerprint {fingerprint!r} is not the server's build {identity.build!r}"
        if reply.get("model") != identity.model:
            return f"the reply names model {reply.get('model')!r}, the server serves {identity.model!r}"
    return ""


def get_json(url: str, timeout_s: float = 5.0):
    """GET ``url`` on a loopback server and parse its JSON; LauncherError if it does not answer 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise LauncherError(f"GET {url} answered {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise LauncherError(f"GET {url} failed: {exc}") from None


def fetch_identity(private_url: str) -> ServerIdentity:
    """The identity of the llama-server on ``private_url`` (its own port: nginx does not pass /props on)."""
    return identity_from_props(get_json(private_url.rstrip("/") + "/props"))


# ---- the process ------------------------------------------------------------------------------


class LlamaServerProcess(ServerProcess):
    """llama-server behind nginx for a model dir laid out like /opt/ml/model, under the DLC's rules.

    ``settings`` are the endpoint's container environment (its ``SM_LLAMA_CPP_*`` variables); the
    caller's own ``SM_LLAMA_CPP_*`` and ``LLAMA_ARG_*`` variables (which llama-server also reads)
    are left out. nginx answers on ``port`` (``url``); llama-server on ``private_port``.
    """

    ready_path = "/ping"

    def __init__(
        self,
        model_dir: str | Path,
        *,
        log_path: str | Path,
        port: int | None = None,
        settings: Mapping[str, str] | None = None,
        llama_server: str | Path | None = None,
        nginx: str | Path | None = None,
        work_dir: str | Path | None = None,
        keep_alive_s: float | None = None,
        timeout_s: int = UPSTREAM_TIMEOUT_S,
    ):
        super().__init__(log_path=log_path, port=port, keep_alive_s=keep_alive_s)
        self.model_dir = Path(model_dir)
        self.settings, self.moved = local_settings(settings or {}, self.model_dir)
        self.llama_server = Path(llama_server) if llama_server else find_llama_server()
        found = Path(nginx) if nginx else find_nginx()
        if found is None:
            raise LauncherError(missing() or "nginx is not installed")
        self.nginx = found
        self.private_port = free_port()
        self.work_dir = Path(work_dir) if work_dir else self.log_path.with_suffix(".serve")
        self.timeout_s = timeout_s

    @property
    def private_url(self) -> str:
        return f"http://{PRIVATE_HOST}:{self.private_port}"

    def plan(self) -> LaunchPlan:
        return launch_plan(
            self.settings, program=str(self.llama_server), port=self.private_port, default_model_dir=self.model_dir
        )

    def command(self) -> list[str]:
        self.plan()  # refuses settings the rules cannot start here, before anything runs
        return [
            sys.executable,
            "-m",
            "workshop_lib.local.dlc_server",
            "--port",
            str(self.port),
            "--private-port",
            str(self.private_port),
            "--model-dir",
            str(self.model_dir),
            "--llama-server",
            str(self.llama_server),
            "--nginx",
            str(self.nginx),
            "--work-dir",
            str(self.work_dir),
            "--timeout",
            str(self.timeout_s),
        ]

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith((PREFIX, "LLAMA_ARG_"))}
        env.update(self.settings)
        # As in the DLC, llama.cpp's folder is on the library path: its shared libraries sit beside the binary.
        libs = str(self.llama_server.resolve().parent)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (libs, env.get("LD_LIBRARY_PATH", "")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def __repr__(self) -> str:
        return f"LlamaServerProcess({self.url}, model_dir={str(self.model_dir)!r})"


def _say(text: str) -> None:
    print(f"serve: {text}", flush=True)


def _end(process: subprocess.Popen | None, signum: int, timeout_s: float = 10.0) -> None:
    if process is None or process.poll() is not None:
        return
    process.send_signal(signum)
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


def serve(argv: Sequence[str] | None = None) -> int:
    """The stand-in for the DLC's ``/usr/bin/serve``: llama-server and nginx until either ends or SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m workshop_lib.local.dlc_server")
    parser.add_argument("--port", type=int, required=True, help="nginx's port (SageMaker's 8080)")
    parser.add_argument("--private-port", type=int, required=True, help="llama-server's loopback port (8081)")
    parser.add_argument("--model-dir", default=DEFAULT_MODEL_DIR)
    parser.add_argument("--llama-server", required=True)
    parser.add_argument("--nginx", required=True)
    parser.add_argument("--work-dir", required=True, help="nginx's private folder, removed at the end")
    parser.add_argument("--timeout", type=int, default=UPSTREAM_TIMEOUT_S)
    args = parser.parse_args(argv)

    stopping = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda n, _frame: stopping.append(n))
    try:
        plan = launch_plan(
            os.environ, program=args.llama_server, port=args.private_port, default_model_dir=args.model_dir
        )
    except LauncherError as exc:
        _say(str(exc))
        return 2
    for line in plan.lines():
        _say(line)
    work = Path(args.work_dir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, mode=0o700)
    config = work / "nginx.conf"
    config.write_text(
        nginx_config(
            port=args.port, upstream_port=args.private_port, prefix=work, timeout_s=args.timeout, run_as=_run_as()
        )
    )
    llama = front = None
    status = 0
    try:
        llama = subprocess.Popen(list(plan.argv), stdin=subprocess.DEVNULL)
        front = subprocess.Popen(
            [args.nginx, "-p", str(work), "-e", "stderr", "-c", str(config), "-g", "daemon off;"],
            stdin=subprocess.DEVNULL,
        )
        _say(
            f"nginx on {PRIVATE_HOST}:{args.port}: GET /ping -> /health, POST /invocations -> "
            f"/v1/chat/completions on {PRIVATE_HOST}:{args.private_port}"
        )
        while not stopping:
            for name, process in (("llama-server", llama), ("nginx", front)):
                if process.poll() is not None:
                    _say(f"{name} exited with status {process.returncode}")
                    status = process.returncode or 1
                    break
            else:
                time.sleep(0.2)
                continue
            break
    finally:
        _end(front, signal.SIGQUIT)  # graceful: requests in flight finish
        _end(llama, signal.SIGTERM)
        shutil.rmtree(work, ignore_errors=True)
    if stopping:
        _say("stopped")
    return status


if __name__ == "__main__":
    sys.exit(serve())

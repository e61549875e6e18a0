"""The llama.cpp DLC's own server, on this machine: llama-server behind nginx, started by its rules.

The standard endpoint runs the AWS llama.cpp DLC unchanged. Its entrypoint (``/usr/bin/serve``:
``scripts/docker/llama_cpp/sagemaker_entrypoint.sh`` in github.com/aws/deep-learning-containers)
chooses the model, turns every ``SM_LLAMA_CPP_*`` variable into a llama-server flag, starts
llama-server on a private loopback port and puts nginx in front of it on the endpoint's port, with
SageMaker's two routes mapped onto llama-server's own: ``GET /ping`` -> ``/health`` and
``POST /invocations`` -> ``/v1/chat/completions``.
Local rehearsal stands in for that image with this module:

* the entrypoint's rules, pure (dlc_rules.py): model discovery, variables -> flags, the launch plan,
  nginx's configuration;
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
from typing import Any

from .dlc_rules import (
    DEFAULT_MODEL_DIR,
    PREFIX,
    PRIVATE_HOST,
    UPSTREAM_TIMEOUT_S,
    LaunchPlan,
    launch_plan,
    local_settings,
    nginx_config,
    run_as,
)
from .dlc_rules import LauncherError as LauncherError  # raised here too: callers catch it from here
from .processes import ServerProcess, free_port

SERVER_ENV = "WORKSHOP_LLAMA_SERVER"
CHECKOUT_SERVER = Path(__file__).resolve().parents[2] / ".llama.cpp" / "bin" / "llama-server"
SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/sbin")  # nginx lives here, often off a user's PATH

NOT_REPRODUCED = (
    "the DLC image itself: its /usr/bin/serve (its documented rules were applied instead), its "
    "llama.cpp build b10433 with a CPU variant per micro-architecture, its nginx settings and Amazon "
    "Linux 2023; this checkout's llama-server ran behind nginx in its place"
)


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


def identity_from_props(props: object) -> ServerIdentity:
    """llama-server's ``GET /props`` read; LauncherError naming what is missing when it is not one."""
    if not isinstance(props, dict):
        raise LauncherError(f"/props answered {type(props).__name__}, not llama-server's object")
    lacking = [key for key in ("build_info", "model_alias", "total_slots") if key not in props]
    if lacking or not isinstance(props.get("default_generation_settings"), dict):
        raise LauncherError(
            "/props is not llama-server's: it lacks " + ", ".join(lacking or ["default_generation_settings"])
        )
    return ServerIdentity(str(props["build_info"]), str(props["model_alias"]), int(props["total_slots"]))


def answer_problem(reply: object, identity: ServerIdentity | None = None) -> str:
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


def get_json(url: str, timeout_s: float = 5.0) -> Any:
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


def _end(process: subprocess.Popen[bytes] | None, signum: int, timeout_s: float = 10.0) -> None:
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
            port=args.port, upstream_port=args.private_port, prefix=work, timeout_s=args.timeout, run_as=run_as()
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

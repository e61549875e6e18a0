"""``serve``: the container entrypoint, gunicorn in front of the decision adapter.

SageMaker starts the image as ``docker run <image> serve``. One worker holds the
one llama.cpp context; its threads keep ``/ping`` answering while a decision
runs and let a few requests wait at the gate. The model loads inside the worker
(no preload), so a killed worker is replaced by one that loads it afresh,
except during start-up: a worker that dies before it has scored its first
decision stops the whole server with one log line (startup.py).

Timeouts follow SageMaker's contract: invocations may take 60 s, so the worker
timeout is above that; SIGTERM is followed by SIGKILL after 30 s, so the
graceful timeout is below that and the request in flight can still finish.
Requests are read whole before they take a thread, so slow clients cannot hold
the threads /ping needs (worker.py). glibc's malloc arenas are capped before the
worker is forked (``limit_malloc_arenas``).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import sys
import tempfile
from pathlib import Path

from gunicorn.app.base import BaseApplication
from gunicorn.errors import HaltServer

from .app import WORKER_BOOT_ERROR, create_app
from .settings import Settings, SettingsError, configure_logging, load_settings
from .startup import READY, StartupRecord, failure_line
from .worker import CONNECTIONS

MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # glibc's mallopt parameter number

WORKER_TIMEOUT_S = 120
GRACEFUL_TIMEOUT_S = 25
SPARE_THREADS = 2  # for /ping while one request runs and max_queue wait


def gunicorn_options(settings: Settings, host: str = "0.0.0.0") -> dict:
    return {
        "bind": f"{host}:{settings.port}",
        "workers": 1,
        # gthread that reads each request whole before it takes a thread (worker.py)
        "worker_class": "decision_adapter.worker.BufferedThreadWorker",
        "threads": settings.max_queue + 1 + SPARE_THREADS,
        "worker_connections": CONNECTIONS,
        "timeout": WORKER_TIMEOUT_S,
        "graceful_timeout": GRACEFUL_TIMEOUT_S,
        "keepalive": 5,
        "preload_app": False,
        "worker_tmp_dir": "/dev/shm" if os.path.isdir("/dev/shm") else None,
        "accesslog": "-",
        "errorlog": "-",
        "loglevel": settings.log_level.lower(),
        "limit_request_line": 8190,
        # gunicorn >= 24 opens a control socket in $HOME; the adapter needs none.
        "control_socket_disable": True,
    }


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc arenas in this process and the workers it forks; True if capped here.

    glibc gives each thread that allocates an arena of its own, up to eight per core, and
    keeps what they held: as gthread's request threads take turns, a worker's RSS crept up
    under load (benchmarks/load.py, one run each: +3.7 % over 60 s, +1.7 % with two arenas).
    ``MALLOC_ARENA_MAX`` in the environment wins (glibc reads it itself); a C library without
    ``mallopt`` is left alone.
    """
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    return bool(mallopt and mallopt(_M_ARENA_MAX, arenas))


class DecisionServer(BaseApplication):
    def __init__(self, settings: Settings, options: dict):
        self.settings = settings
        self.options = options
        self.startup = StartupRecord(Path(tempfile.mkdtemp(prefix="decision-adapter-")) / "startup.json")
        super().__init__()

    def load_config(self):
        for key, value in self.options.items():
            if value is not None and key in self.cfg.settings:  # skip settings this gunicorn lacks
                self.cfg.set(key, value)
        self.cfg.set("child_exit", self.child_exit)

    def load(self):
        configure_logging(self.settings.log_level)
        return create_app(self.settings, load="background", startup_record=self.startup)

    def child_exit(self, arbiter, worker) -> None:
        """In the arbiter: a worker that died before it was ready ends the server (startup.py)."""
        record = self.startup.read()
        if record is None or record.get("stage") == READY or record.get("pid") != worker.pid:
            return  # never started loading, or died while serving: gunicorn boots a new worker
        arbiter.log.critical(failure_line(record))
        raise HaltServer("worker died before it was ready", WORKER_BOOT_ERROR)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="decision-adapter-serve",
        description="Serve decisions from a GGUF model with llama.cpp: gunicorn in front of the decision adapter, "
                    "SageMaker's container contract (GET /ping, POST /invocations) plus POST /v1/systemone. "
                    "SageMaker starts it as `serve`; every setting comes from the environment "
                    "(SM_LLAMA_CPP_*, DECISION_ADAPTER_*, or the published sample's SEMIF_* names), and the "
                    "flags below override the matching variable.",
        epilog="Main variables: SM_MODEL_DIR (default /opt/ml/model), SM_LLAMA_CPP_MODEL, SM_LLAMA_CPP_THREADS, "
               "SM_LLAMA_CPP_CTX_SIZE (8192), SM_LLAMA_CPP_N_GPU_LAYERS (0; 999 or -1 = all), "
               "SAGEMAKER_BIND_TO_PORT (8080), DECISION_ADAPTER_MAX_QUEUE, DECISION_ADAPTER_REQUEST_TIMEOUT, "
               "DECISION_ADAPTER_EXTRA_BUFFERS, DECISION_ADAPTER_API_KEY. The project README lists them all.")
    parser.add_argument("command", nargs="?", choices=("serve",), help="what SageMaker passes; optional")
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    parser.add_argument("--port", type=int, help="port (default SAGEMAKER_BIND_TO_PORT, else 8080)")
    model = parser.add_mutually_exclusive_group()
    model.add_argument("--model", metavar="GGUF", help="the GGUF file to serve (SM_LLAMA_CPP_MODEL)")
    model.add_argument("--model-dir", metavar="DIR", help="a directory laid out like /opt/ml/model (SM_MODEL_DIR)")
    parser.add_argument("--threads", type=int, help="llama.cpp threads (SM_LLAMA_CPP_THREADS)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    overrides = {"SAGEMAKER_BIND_TO_PORT": args.port, "SM_MODEL_DIR": args.model_dir,
                 "SM_LLAMA_CPP_THREADS": args.threads}
    if args.model:
        overrides.update(SM_LLAMA_CPP_MODEL=os.path.abspath(args.model),
                         SM_MODEL_DIR=os.path.dirname(os.path.abspath(args.model)))
    env = {**os.environ, **{k: str(v) for k, v in overrides.items() if v is not None}}
    try:
        settings = load_settings(env)
    except SettingsError as exc:
        print(f"decision adapter: {exc}", file=sys.stderr)
        return 2
    limit_malloc_arenas()
    server = DecisionServer(settings, gunicorn_options(settings, args.host))
    try:
        server.run()
    finally:
        shutil.rmtree(server.startup.path.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

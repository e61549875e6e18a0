"""``serve``: the container entrypoint, nginx in front of gunicorn in front of the decision adapter.

SageMaker starts the image as ``docker run <image> serve``. nginx listens on the port and
reads every request whole, under deadlines and a size limit, before it passes it to gunicorn
over a unix socket in a private directory (nginx.py): a slow or hostile client holds one of
nginx's connections, never one of the worker's threads, so ``/ping`` keeps answering. The
pair is the DLC's own (nginx in front of llama-server) and that of SageMaker's
bring-your-own-container example (nginx in front of gunicorn). Where nginx is missing, or
``DECISION_ADAPTER_NGINX=off``, gunicorn listens on the port itself and the log says, in
one line, that slow clients are not contained.

gunicorn runs its stock threaded worker: one worker holds the model and its llama.cpp contexts
(``SM_LLAMA_CPP_PARALLEL``, scheduler.py); its threads serve a request on each context, keep ``/ping``
answering meanwhile and let a few requests wait at the gate. The model loads inside the worker (no preload), so a killed worker is replaced by one
that loads it afresh, except during start-up: a worker that dies before it has scored its
first decision stops the whole server with one log line (startup.py).

The gunicorn arbiter owns nginx: it starts it once its own socket is listening, a SIGTERM
reaches both (nginx stops listening and finishes what it has; the worker refuses its waiting
line at once and lets the request holding the model finish), and if nginx stops on its own,
gunicorn is stopped too and ``serve`` exits non-zero.

Timeouts follow SageMaker's contract: invocations may take 60 s, so the worker timeout is
above that; SIGTERM is followed by SIGKILL after 30 s, so the graceful timeout is below that
and the request in flight can still finish. glibc's malloc arenas are capped before the
worker is forked (``limit_malloc_arenas``).
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import math
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Protocol

from gunicorn.app.base import BaseApplication
from gunicorn.errors import HaltServer

from .app import WORKER_BOOT_ERROR, create_app
from .nginx import NginxProcess, find_nginx, render_config, stdout_reopenable
from .settings import Settings, SettingsError, configure_logging, load_settings
from .startup import READY, StartupRecord, failure_line

if TYPE_CHECKING:
    from flask import Flask
    from gunicorn.arbiter import Arbiter  # gunicorn ships no types: these name its objects for the reader
    from gunicorn.workers.base import Worker

    from .admission import Gate

MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # glibc's mallopt parameter number

WORKER_TIMEOUT_S = 120
GRACEFUL_TIMEOUT_S = 25
SPARE_THREADS = 2  # for /ping while every context is held and max_queue wait
NGINX_FAILED = 1  # serve's exit status when nginx stopped on its own
# Nothing that identifies a caller: no user name from Basic auth (%(u)s), no query string
# (%(r)s, %(q)s), no referer, user agent or other header; the answer's request id (app.py) last.
ACCESS_LOG_FORMAT = '%(t)s "%(m)s %(U)s %(H)s" %(s)s %(B)s %(M)sms %({x-request-id}o)s'
SHUTDOWN_LINE = (
    "shutting down: the request holding the model did not finish within {seconds:g} s of "
    "SIGTERM; it is stopped now and its caller gets 502"
)


def upstream_timeout_s(settings: Settings) -> int:
    """How long nginx waits for gunicorn's answer: a request's longest legitimate wait (the queue,
    then its own time limit) with a margin, never below the worker timeout; no limit: an hour."""
    if not settings.request_timeout_s:
        return 3600
    return max(WORKER_TIMEOUT_S, math.ceil(settings.queue_timeout_s + settings.request_timeout_s) + 30)


def gunicorn_options(
    settings: Settings, host: str = "0.0.0.0", socket_path: str | Path | None = None
) -> dict[str, object]:
    """gunicorn's settings: on ``socket_path`` behind nginx, else on ``host``:port by itself."""
    options: dict[str, object] = {
        "bind": f"unix:{socket_path}" if socket_path else f"{host}:{settings.port}",
        "workers": 1,
        "worker_class": "gthread",
        "threads": settings.parallel + settings.max_queue + SPARE_THREADS,
        "timeout": WORKER_TIMEOUT_S,
        "graceful_timeout": GRACEFUL_TIMEOUT_S,
        "keepalive": 5,
        "preload_app": False,
        "worker_tmp_dir": "/dev/shm" if os.path.isdir("/dev/shm") else None,
        "accesslog": "-",
        "access_log_format": ACCESS_LOG_FORMAT,
        "errorlog": "-",
        "loglevel": settings.log_level.lower(),
        "limit_request_line": 8190,
        # gunicorn >= 24 opens a control socket in $HOME; the adapter needs none.
        "control_socket_disable": True,
    }
    if socket_path:
        # nginx has already held the request line and headers to its own limits (16 KiB a line,
        # 64 KiB in all); gunicorn's smaller defaults would refuse some of them in a shape of its own.
        options.update(limit_request_line=0, limit_request_field_size=16384, limit_request_fields=32768)
    return options


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc arenas in this process and the workers it forks; True if capped here.

    glibc gives each thread that allocates an arena of its own, up to eight per core, and
    keeps what they held, so a worker whose request threads take turns grows under load
    (docs/benchmarks.md has the load runs).
    ``MALLOC_ARENA_MAX`` in the environment wins (glibc reads it itself); a C library without
    ``mallopt`` is left alone.
    """
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    return bool(mallopt and mallopt(_M_ARENA_MAX, arenas))


class NoQueryStrings(logging.Filter):
    """gunicorn's warning about a malformed request quotes its request line: drop the query string,
    where callers put keys (``?api_key=...``), before the line is written."""

    _QUERY = re.compile(r"\?[^\s'\"]*")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "?" in message:
            record.msg, record.args = self._QUERY.sub("?(query left out)", message), ()
        return True


def uncontained_line(why: str, host: str, port: int) -> str:
    return (
        f"nginx is not in front ({why}): gunicorn listens on {host}:{port} itself and slow clients are not "
        "contained (a few connections that send slowly can hold every worker thread, /ping's included); "
        "install nginx or put it on PATH"
    )


def plan_front(settings: Settings, host: str, workdir: Path) -> tuple[NginxProcess | None, str | None]:
    """(nginx to start, None) or (None, why gunicorn listens alone); SettingsError if nginx is required."""
    if settings.nginx == "off":
        return None, "DECISION_ADAPTER_NGINX=off"
    executable = find_nginx()
    if executable is None:
        if settings.nginx == "on":
            raise SettingsError(
                "DECISION_ADAPTER_NGINX=on but no nginx is on PATH (nor in /usr/sbin); install "
                "nginx or set DECISION_ADAPTER_NGINX=auto"
            )
        return None, "no nginx on PATH"
    config = render_config(
        settings,
        host=host,
        port=settings.port,
        socket_path=workdir / "gunicorn.sock",
        prefix=workdir,
        upstream_timeout_s=upstream_timeout_s(settings),
        shutdown_s=GRACEFUL_TIMEOUT_S + 2,
        access_log=stdout_reopenable(),
    )
    return NginxProcess(executable, workdir, config), None


class Log(Protocol):
    def warning(self, msg: str, *args: object) -> None: ...


class ShutdownGuard:
    """In the worker, on SIGTERM: refuse the waiting line at once, give the holder until the deadline.

    gunicorn's own SIGTERM handling then runs as before (the worker stops accepting and waits for
    its requests). A request still holding the model ``deadline_s`` after SIGTERM is stopped by
    ending the worker, with one log line, before the arbiter's SIGKILL does the same unannounced.
    """

    def __init__(self, gate: Gate, log: Log, deadline_s: float, exit: Callable[[int], object] = os._exit) -> None:
        self.gate = gate
        self.log = log
        self.deadline_s = deadline_s
        self.exit = exit

    def install(self, signum: int = signal.SIGTERM) -> None:
        previous = signal.getsignal(signum)

        def on_signal(sig: int, frame: FrameType | None) -> None:
            self.begin()
            if callable(previous):
                previous(sig, frame)

        signal.signal(signum, on_signal)
        signal.siginterrupt(signum, False)

    def begin(self) -> threading.Thread | None:
        if self.gate.closed:
            return None
        self.gate.close("the server is shutting down")
        watcher = threading.Thread(target=self._watch, name="shutdown-deadline", daemon=True)
        watcher.start()
        return watcher

    def _watch(self) -> None:
        if self.gate.wait_idle(self.deadline_s):
            return
        self.log.warning(SHUTDOWN_LINE.format(seconds=self.deadline_s))
        self.exit(1)


class DecisionServer(BaseApplication):  # type: ignore[misc]  # gunicorn ships no types
    def __init__(
        self,
        settings: Settings,
        options: dict[str, object],
        workdir: Path,
        front: NginxProcess | None = None,
        alone_because: str | None = None,
        host: str = "0.0.0.0",
    ) -> None:
        self.settings = settings
        self.options = options
        self.front = front
        self.alone_because = alone_because
        self.host = host
        self.stopping = False  # a stop signal arrived: workers leaving now are not failing to start
        self.startup = StartupRecord(workdir / "startup.json")
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            if value is not None and key in self.cfg.settings:  # skip settings this gunicorn lacks
                self.cfg.set(key, value)
        for hook in ("child_exit", "when_ready", "on_exit", "post_worker_init"):
            self.cfg.set(hook, getattr(self, hook))

    def load(self) -> Flask:
        configure_logging(self.settings.log_level)
        return create_app(self.settings, load="background", startup_record=self.startup)

    # -- in the arbiter ------------------------------------------------------------------------

    def when_ready(self, arbiter: Arbiter) -> None:
        """gunicorn is listening: start nginx in front, and tie the two together."""
        logging.getLogger("gunicorn.error").addFilter(NoQueryStrings())  # the workers inherit it
        self._chain(signal.SIGTERM, lambda: self._stop_requested(graceful=True))
        self._chain(signal.SIGINT, lambda: self._stop_requested(graceful=False))
        self._chain(signal.SIGQUIT, lambda: self._stop_requested(graceful=False))
        if self.front is None:
            arbiter.log.warning(uncontained_line(self.alone_because or "not asked", self.host, self.settings.port))
            return
        self._chain(signal.SIGCHLD, self._nginx_gone)  # first: an nginx that fails at once is seen too
        self.front.start()
        arbiter.log.info(
            "nginx %s (pid %s) in front on %s:%s, gunicorn behind it on %s",
            self.front.executable,
            self.front.pid,
            self.host,
            self.settings.port,
            self.options["bind"],
        )

    def _stop_requested(self, graceful: bool) -> None:
        self.stopping = True
        if self.front is not None and graceful:
            self.front.quit()  # stop listening, finish what has been read
        elif self.front is not None:
            self.front.terminate()

    @staticmethod
    def _chain(signum: int, first: Callable[[], None]) -> None:
        """Run ``first`` in the arbiter's signal handler, then gunicorn's own."""
        previous = signal.getsignal(signum)

        def handler(sig: int, frame: FrameType | None) -> None:
            first()
            if callable(previous):
                previous(sig, frame)

        signal.signal(signum, handler)

    def _nginx_gone(self) -> None:
        front = self.front
        if front is None or front.process is None or front.stopping or not front.exited():
            return
        front.failed = front.process.returncode
        front.stopping = True
        os.kill(os.getpid(), signal.SIGTERM)  # gunicorn stops as on any SIGTERM; main() reports the failure

    def on_exit(self, arbiter: Arbiter) -> None:
        if self.front is None:
            return
        if self.front.failed is not None:
            arbiter.log.critical(
                "nginx stopped on its own (exit status %s; its own lines above say why); the adapter stops with it",
                self.front.failed,
            )
        self.front.stop(timeout_s=2)  # gunicorn is done: nginx only relays its last answers

    def child_exit(self, arbiter: Arbiter, worker: Worker) -> None:
        """In the arbiter: a worker that died before it was ready ends the server (startup.py)."""
        record = self.startup.read()
        if record is None or record.get("stage") == READY or record.get("pid") != worker.pid:
            return  # never started loading, or died while serving: gunicorn boots a new worker
        if self.stopping:
            return  # told to stop while it was loading
        arbiter.log.critical(failure_line(record))
        raise HaltServer("worker died before it was ready", WORKER_BOOT_ERROR)

    # -- in the worker ---------------------------------------------------------------------------

    def post_worker_init(self, worker: Worker) -> None:
        gate = worker.wsgi.extensions.get("decision_adapter.gate")
        if gate is not None:
            ShutdownGuard(gate, worker.log, GRACEFUL_TIMEOUT_S - 1).install()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="decision-adapter-serve",
        description="Serve decisions from a GGUF model with llama.cpp: nginx and gunicorn in front of the decision "
        "adapter, SageMaker's container contract (GET /ping, POST /invocations) plus POST /v1/systemone. "
        "SageMaker starts it as `serve`; every setting comes from the environment "
        "(SM_LLAMA_CPP_*, DECISION_ADAPTER_*, or the published sample's SEMIF_* names), and the "
        "flags below override the matching variable.",
        epilog="Main variables: SM_MODEL_DIR (default /opt/ml/model), SM_LLAMA_CPP_MODEL, SM_LLAMA_CPP_THREADS, "
        "SM_LLAMA_CPP_CTX_SIZE (8192), SM_LLAMA_CPP_N_GPU_LAYERS (0; 999 or -1 = all), "
        "SAGEMAKER_BIND_TO_PORT (8080), DECISION_ADAPTER_MAX_QUEUE, DECISION_ADAPTER_REQUEST_TIMEOUT, "
        "DECISION_ADAPTER_EXTRA_BUFFERS, DECISION_ADAPTER_API_KEY, DECISION_ADAPTER_NGINX (auto: nginx in "
        "front when it is installed; off). docs/settings.md lists them all.",
    )
    parser.add_argument("command", nargs="?", choices=("serve",), help="what SageMaker passes; optional")
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    parser.add_argument("--port", type=int, help="port (default SAGEMAKER_BIND_TO_PORT, else 8080)")
    model = parser.add_mutually_exclusive_group()
    model.add_argument("--model", metavar="GGUF", help="the GGUF file to serve (SM_LLAMA_CPP_MODEL)")
    model.add_argument("--model-dir", metavar="DIR", help="a directory laid out like /opt/ml/model (SM_MODEL_DIR)")
    parser.add_argument("--threads", type=int, help="llama.cpp threads (SM_LLAMA_CPP_THREADS)")
    return parser


def _workdir() -> Path:
    """A private directory for gunicorn's socket, nginx's files and the start-up record."""
    workdir = Path(tempfile.mkdtemp(prefix="decision-adapter-"))
    if len(str(workdir / "gunicorn.sock")) > 100:  # a unix socket path holds at most 107 bytes
        shutil.rmtree(workdir, ignore_errors=True)
        workdir = Path(tempfile.mkdtemp(prefix="decision-adapter-", dir="/tmp"))
    return workdir


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    overrides = {
        "SAGEMAKER_BIND_TO_PORT": args.port,
        "SM_MODEL_DIR": args.model_dir,
        "SM_LLAMA_CPP_THREADS": args.threads,
    }
    if args.model:
        # The real file and its own folder: a GGUF linked from elsewhere (a hub cache) stays servable.
        overrides.update(
            SM_LLAMA_CPP_MODEL=os.path.realpath(args.model), SM_MODEL_DIR=os.path.dirname(os.path.realpath(args.model))
        )
    env = {**os.environ, **{k: str(v) for k, v in overrides.items() if v is not None}}
    workdir, arbiter_pid = _workdir(), os.getpid()
    try:
        try:
            settings = load_settings(env)
            front, alone_because = plan_front(settings, args.host, workdir)
        except SettingsError as exc:
            print(f"decision adapter: {exc}", file=sys.stderr)
            return 2
        limit_malloc_arenas()
        socket_path = workdir / "gunicorn.sock" if front else None
        server = DecisionServer(
            settings, gunicorn_options(settings, args.host, socket_path), workdir, front, alone_because, args.host
        )
        status = 0
        try:
            server.run()
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if os.getpid() != arbiter_pid:
            return status  # a worker leaving gunicorn's loop: nginx and the directory are the arbiter's
        if front is not None:
            front.stop(timeout_s=2)  # gunicorn's arbiter may have ended without its on_exit hook
            if front.failed is not None and status == 0:
                status = NGINX_FAILED
        return status
    finally:
        if os.getpid() == arbiter_pid:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

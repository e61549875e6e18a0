"""Local servers for rehearsal and tests: the adapter and the AWS emulator as real processes.

Each server runs in its own process group with its output in a log file (never
the caller's pipe). ``stop()`` ends the whole group. By default an ``atexit``
hook stops anything still running when the Python process exits, so a failed
test or demo leaves nothing behind; on Linux a server also gets SIGTERM when the
process that started it dies without exiting (killed by a signal, where atexit
never runs). Servers that must outlive one notebook
kernel (local rehearsal spans several notebooks) are started with
``keep_alive_s``: they run under ``timeout`` and end by themselves after that
long even if nobody stops them.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..errors import WorkshopError

_RUNNING: set[ServerProcess] = set()
_Server = TypeVar("_Server", bound="ServerProcess")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class ServerFailedToStart(WorkshopError, RuntimeError):
    pass


AdapterFailedToStart = ServerFailedToStart


def _proc_groups() -> dict[int, list[str]] | None:
    """pgid -> states of its processes, from /proc (None where there is no /proc)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    groups: dict[int, list[str]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2:
            groups.setdefault(int(fields[2]), []).append(fields[0])
    return groups


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except (ChildProcessError, OSError):
        pass


def group_alive(pgid: int | None) -> bool:
    """True while any process of the group runs (zombies, left unreaped by some inits, do not count)."""
    if not pgid:
        return False
    _reap(pgid)
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    groups = _proc_groups()
    if groups is None:
        return True
    return any(state != "Z" for state in groups.get(pgid, []))


def stop_process_group(pgid: int, timeout_s: float = 30.0) -> bool:
    """SIGTERM a process group, SIGKILL what is left after timeout_s; False if nothing was running."""
    if not group_alive(pgid):
        return False
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    give_up_at = time.monotonic() + timeout_s
    while time.monotonic() < give_up_at:
        if not group_alive(pgid):
            return True
        time.sleep(0.1)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return True


def _libc_prctl() -> Callable[..., object] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _libc_prctl()  # looked up here, not in the forked child
_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    """Run in the child before exec: SIGTERM when ``parent`` dies, however it dies (a parent gone before
    this ran is a server nobody would stop: it exits at once)."""
    if _PRCTL is None:
        return
    _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os._exit(1)


class ServerProcess:
    """A loopback HTTP server in its own process group; subclasses say what to run."""

    ready_path = "/"

    def __init__(
        self,
        *,
        log_path: str | Path,
        port: int | None = None,
        env: dict[str, str] | None = None,
        keep_alive_s: float | None = None,
    ):
        self.log_path = Path(log_path)
        self.port = port or free_port()
        self.extra_env = dict(env or {})
        self.keep_alive_s = keep_alive_s
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.extra_env)
        return env

    def is_ready(self) -> bool:
        return self.ping() == 200

    @property
    def pid(self) -> int:
        """The server's process id, which is also its process group's (``start_new_session``)."""
        if self.process is None:
            raise ServerFailedToStart(f"{self!r} was never started")
        return self.process.pid

    def start(self: _Server, timeout_s: float = 120.0) -> _Server:
        """Launch the server and wait until it says it is ready."""
        self.launch()
        try:
            self.wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def launch(self: _Server) -> _Server:
        """Launch the server without waiting for it."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        try:
            command = self.command()
            if self.keep_alive_s is not None:
                command = ["timeout", "--kill-after=30", str(int(self.keep_alive_s)), *command]
            # A server that must outlive this process (keep_alive_s) ends by itself; any other dies with it.
            tied = functools.partial(_die_with, os.getpid()) if self.keep_alive_s is None else None
            self.process = subprocess.Popen(
                command,
                env=self.environment(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() ends the server and its workers
                preexec_fn=tied,
            )
        finally:
            log.close()
        if self.keep_alive_s is None:
            _RUNNING.add(self)
        return self

    def wait_ready(self, timeout_s: float) -> None:
        process = self.process
        if process is None:
            raise ServerFailedToStart(f"{self!r} was never started")
        give_up_at = time.monotonic() + timeout_s
        while time.monotonic() < give_up_at:
            if process.poll() is not None:
                raise ServerFailedToStart(
                    f"{self!r} exited with status {process.returncode}; last log lines:\n{self.log_tail()}"
                )
            if self.is_ready():
                return
            time.sleep(0.1)
        raise ServerFailedToStart(f"{self!r} was not ready after {timeout_s:g} s; last log lines:\n{self.log_tail()}")

    def ping(self) -> int | None:
        """The HTTP status of GET ready_path, or None if nothing answers."""
        try:
            with urllib.request.urlopen(self.url + self.ready_path, timeout=2) as response:
                status: int = response.status
                return status
        except urllib.error.HTTPError as exc:
            return exc.code
        except (urllib.error.URLError, OSError):
            return None

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def signal(self, signum: int) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signum)

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM the process group, SIGKILL it if it is still there after timeout_s."""
        process = self.process
        _RUNNING.discard(self)
        if process is None:
            return None
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
            except ProcessLookupError:
                pass
        try:  # the worker may outlive the arbiter for a moment
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return process.returncode

    def __enter__(self: _Server) -> _Server:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url})"


class AdapterProcess(ServerProcess):
    """The decision adapter (nginx + gunicorn + llama.cpp) for a model dir laid out like /opt/ml/model."""

    ready_path = "/ping"

    def __init__(
        self,
        model_dir: str | Path,
        *,
        log_path: str | Path,
        port: int | None = None,
        threads: int = 2,
        env: dict[str, str] | None = None,
        keep_alive_s: float | None = None,
    ):
        super().__init__(log_path=log_path, port=port, env=env, keep_alive_s=keep_alive_s)
        self.model_dir = Path(model_dir)
        self.threads = threads

    def command(self) -> list[str]:
        return [sys.executable, "-m", "decision_adapter.serve", "--host", "127.0.0.1"]

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_LLAMA_CPP_", "DECISION_ADAPTER_"))}
        env.update(
            {
                "SM_MODEL_DIR": str(self.model_dir),
                "SAGEMAKER_BIND_TO_PORT": str(self.port),
                "SM_LLAMA_CPP_THREADS": str(self.threads),
                "SM_LLAMA_CPP_N_GPU_LAYERS": "0",
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.update(self.extra_env)
        return env

    def __repr__(self) -> str:
        return f"AdapterProcess({self.url}, model_dir={str(self.model_dir)!r})"


class EmulatorProcess(ServerProcess):
    """The local AWS emulator (moto in server mode) on a loopback port.

    It stands in for AWS's control plane and S3 in local rehearsal; requests to
    it are still built and validated by botocore against the real service models.
    """

    ready_path = "/moto-api/"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]

    def environment(self) -> dict[str, str]:
        env = super().environment()
        env.setdefault("PYTHONUNBUFFERED", "1")
        # AWS's managed policies exist in every account: the rehearsal's Studio role carries one.
        env["MOTO_IAM_LOAD_MANAGED_POLICIES"] = "true"
        return env


class RouteProcess(ServerProcess):
    """SageMaker's OpenAI-compatible route for a rehearsal's local endpoints (``route_stand_in``): it reads the
    rehearsal's ``registry`` for each request, so it follows the endpoints as they start, stop and are replaced."""

    ready_path = "/ping"

    def __init__(self, registry: str | Path, region: str, **options: Any) -> None:
        super().__init__(**options)
        self.registry, self.region = Path(registry), region

    def command(self) -> list[str]:
        return [
            sys.executable,
            *("-m", "workshop_lib.local.route_stand_in", "--registry", str(self.registry)),
            *("--region", self.region, "--port", str(self.port)),
        ]

    def environment(self) -> dict[str, str]:
        env = super().environment()
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env


def post_json(url: str, payload: Any, timeout: float = 70.0) -> tuple[int, dict[str, Any]]:
    """POST JSON, return (status, parsed body) for any status. A tiny helper for demos and tests."""
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode("utf-8"), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


@atexit.register
def _stop_all() -> None:
    for process in list(_RUNNING):
        process.stop(timeout_s=10)

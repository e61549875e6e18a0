"""nginx in front of gunicorn: the configuration it runs with, and the process that runs it.

The DLC puts nginx in front of llama-server, and SageMaker's bring-your-own-container example
puts it in front of gunicorn, for the reason that matters here too: a threaded WSGI server
hands a connection to a thread as soon as it opens, and a few clients that send slowly (or
not at all) hold every thread, ``/ping``'s included. nginx reads each request whole, under a
header deadline, a body deadline and a size limit, and only then passes it to gunicorn over
a unix socket (``nginx.conf.template`` says what each directive does).

``render_config`` is pure: settings and paths in, the text of nginx.conf out, with nginx's
own refusals answered in the adapter's JSON error shapes (``error_pages``). ``NginxProcess``
starts nginx in the foreground from a private directory, as the user serve runs as, and
stops it; serve.py ties its life to gunicorn's.
"""

from __future__ import annotations

import ctypes
import grp
import json
import os
import pwd
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources as package_files
from pathlib import Path
from typing import BinaryIO

from werkzeug.http import HTTP_STATUS_CODES

from .apis.registry import DIALECTS, INVOCATIONS, Registry
from .caller_errors import AdapterError
from .settings import Settings, load_settings

CONNECTIONS = 2048  # open at once, clients and upstream together
IN_FLIGHT = 128  # API requests past their header at once (each may be reading its body)
KEEPALIVE_S = 5  # an idle kept-alive client connection is closed after this
SEND_TIMEOUT_S = 10  # a client that stops reading its answer is dropped after this
BACKLOG = 511
SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/sbin")  # often missing from a user's PATH
ERROR_PREFIX = "/_adapter/errors"
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Refusal:
    """One status nginx answers by itself: what it means to the caller and what to do."""

    status: int  # what nginx decides (494: its "header too large")
    answer_status: int  # what the adapter's shape reports
    message: str
    retry_after_s: int | None = None


def refusals(
    settings: Settings, upstream_timeout_s: int, in_flight: int = IN_FLIGHT, dialects: Registry = DIALECTS
) -> list[Refusal]:
    return [
        Refusal(
            400,
            400,
            "the request is not valid HTTP/1.1 (request line, headers or chunked framing); send a well-formed request",
        ),
        Refusal(404, 404, f"no such route; use {dialects.described(meta=False)}"),
        Refusal(405, 405, "this method is not allowed here; use GET or POST"),
        Refusal(
            413,
            413,
            f"the body is larger than {settings.max_body_bytes} bytes; send a smaller state "
            "or raise DECISION_ADAPTER_MAX_BODY_BYTES",
        ),
        Refusal(
            414, 414, "the request line is longer than 16 KiB; the API takes its input in the body, send a shorter URL"
        ),
        Refusal(
            494,
            431,
            "the request headers are too large (one line at most 16 KiB, all of them at most "
            "64 KiB); send fewer or shorter headers",
        ),
        Refusal(500, 500, "the adapter failed on this request; see the endpoint logs"),
        Refusal(501, 501, "this Transfer-Encoding is not supported; send chunked or a Content-Length"),
        Refusal(
            502,
            502,
            "the adapter behind nginx is not answering (starting, restarting after a crash, "
            "or shutting down); retry shortly",
            retry_after_s=5,
        ),
        Refusal(
            503,
            503,
            f"too many requests are open on this instance at once (at most {in_flight}); "
            f"retry after {settings.retry_after_s} s or add instances",
            retry_after_s=settings.retry_after_s,
        ),
        Refusal(504, 504, f"the adapter did not answer within {upstream_timeout_s} s; see the endpoint logs"),
    ]


def _code(status: int) -> str:
    """The application's code names: werkzeug's reason phrase, as app.http_error makes them."""
    if status == 500:
        return "internal_error"
    if status == 503:
        return "busy"
    return HTTP_STATUS_CODES[status].lower().replace(" ", "_")


def error_pages(refusal: Refusal, dialects: Registry = DIALECTS) -> dict[str, tuple[int, Mapping[str, object]]]:
    """The answer in each error shape: ``{"sagemaker" | <each registered shape: "jev", "decisions">: (status,
    body)}``, as the app answers."""
    exc = AdapterError(refusal.message, None, status=refusal.answer_status, code=_code(refusal.answer_status))
    sagemaker = exc.to_json()
    if refusal.answer_status in (502, 503):
        sagemaker["retryable"] = True
    return {
        "sagemaker": (refusal.answer_status, sagemaker),
        **{shape: dialect.error(exc)[::-1] for shape, dialect in dialects.shapes().items()},
    }


def _quoted(body: Mapping[str, object]) -> str:
    text = json.dumps(body, ensure_ascii=True, separators=(", ", ": "))
    if any(c in text for c in "'\\$"):
        raise ValueError(f"an nginx error body must not hold ', \\ or $: {text}")
    return f"'{text}'"


def error_config(
    settings: Settings, upstream_timeout_s: int, in_flight: int = IN_FLIGHT, dialects: Registry = DIALECTS
) -> tuple[str, str]:
    """(the server's error_page lines, the internal locations that answer them)."""
    pages, locations = [], []
    for refusal in refusals(settings, upstream_timeout_s, in_flight, dialects):
        pages.append(f"        error_page {refusal.status} = {ERROR_PREFIX}/$adapter_api/{refusal.answer_status};")
        for api, (status, body) in error_pages(refusal, dialects).items():
            lines = [f"        location = {ERROR_PREFIX}/{api}/{refusal.answer_status} {{", "            internal;"]
            if refusal.retry_after_s is not None:
                lines.append(f"            add_header Retry-After {refusal.retry_after_s} always;")
            lines += [f"            return {status} {_quoted(body)};", "        }"]
            locations.append("\n".join(lines))
    return "\n".join(pages), "\n".join(locations)


def route_names(dialects: Registry) -> str:
    """The access log's map from the request line to the route it names (never the query string)."""
    paths = ["/ping", INVOCATIONS, *dialects.paths(), "/status", "/openapi.json"]
    return "\n".join(f'        "~^([A-Z]{{1,20}}) {path}(?:[? ]|$)" "$1 {path}";' for path in paths)


def error_shapes(dialects: Registry) -> str:
    """The map from the request's path to the error shape its refusals take, narrowest scope first."""
    return "\n".join(
        f"        {scope.nginx_pattern()} {api.shape};" for api in dialects.scopes() if (scope := api.scope) is not None
    )


def _listen(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _file_limits(connections: int) -> tuple[int, int]:
    """(open files nginx asks for, worker connections that fit in them)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2 * connections + 64  # a client, its upstream and a body file each, and some spare
    ceiling = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
    return ceiling, max(64, min(connections, (ceiling - 64) // 2))


def _run_as() -> str:
    """nginx started as root hands its workers to "nobody", who cannot open this private directory."""
    if os.geteuid() != 0:
        return "# (not root: the workers run as this user)"
    return f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};"


def render_config(
    settings: Settings,
    *,
    host: str,
    port: int,
    socket_path: str | Path,
    prefix: str | Path,
    upstream_timeout_s: int,
    shutdown_s: int,
    access_log: bool = True,
    in_flight: int = IN_FLIGHT,
    dialects: Registry = DIALECTS,
) -> str:
    """nginx.conf for serving ``host:port`` in front of gunicorn on ``socket_path``, from ``prefix``; the routes
    and error shapes are ``dialects``'."""
    nofile, connections = _file_limits(CONNECTIONS)
    pages, locations = error_config(settings, upstream_timeout_s, in_flight, dialects)
    access = (
        "access_log /dev/stdout adapter_route if=$adapter_log_here;"
        if access_log
        else "access_log off;  # this process cannot reopen its standard output"
    )
    fields = {
        "USER": _run_as(),
        "NOFILE": str(nofile),
        "CONNECTIONS": str(connections),
        "SHUTDOWN_S": str(shutdown_s),
        "PREFIX": str(prefix),
        "ACCESS_LOG": access,
        "READ_TIMEOUT_S": f"{settings.read_timeout_s:g}",
        "KEEPALIVE_S": str(KEEPALIVE_S),
        "SEND_TIMEOUT_S": str(SEND_TIMEOUT_S),
        "MAX_BODY_BYTES": str(settings.max_body_bytes),
        "IN_FLIGHT": str(in_flight),
        "SOCKET": str(socket_path),
        "LISTEN": _listen(host, port),
        "BACKLOG": str(BACKLOG),
        "UPSTREAM_TIMEOUT_S": str(upstream_timeout_s),
        "ERROR_PAGES": pages,
        "ERROR_LOCATIONS": locations,
        "ROUTE_NAMES": route_names(dialects),
        "ERROR_SHAPES": error_shapes(dialects),
    }
    template = package_files.files(__package__).joinpath("nginx.conf.template").read_text(encoding="utf-8")
    return re.sub(r"@([A-Z_]+)@", lambda field: fields[field.group(1)], template)


def find_nginx(path: str | None = None) -> str | None:
    """nginx on PATH, else in the sbin directories a user's PATH often lacks."""
    search = os.pathsep.join([path if path is not None else os.environ.get("PATH", ""), *SBIN_DIRS])
    return shutil.which("nginx", path=search)


def stdout_reopenable() -> bool:
    """Whether /dev/stdout can be opened for writing here (nginx opens its log by name)."""
    try:
        os.close(os.open("/dev/stdout", os.O_WRONLY | os.O_APPEND))
    except OSError:
        return False
    return True


def _own_group_and_die_with_parent() -> None:  # runs in the child between fork and exec
    os.setpgid(0, 0)  # nginx's master and workers: one group that stop() can end whole
    try:
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (AttributeError, OSError):
        pass


class NginxProcess:
    """nginx in the foreground (``daemon off``), from its own directory, output on ours."""

    def __init__(self, executable: str, prefix: str | Path, config: str):
        self.executable = executable
        self.prefix = Path(prefix)
        self.config = config
        self.process: subprocess.Popen[bytes] | None = None
        self.stopping = False
        self.failed: int | None = None  # nginx's exit status when it stopped on its own

    @property
    def config_path(self) -> Path:
        return self.prefix / "nginx.conf"

    def command(self) -> list[str]:
        return [
            self.executable,
            "-p",
            str(self.prefix),
            "-e",
            "stderr",
            "-c",
            str(self.config_path),
            "-g",
            "daemon off;",
        ]

    def start(self, output: BinaryIO | None = None) -> None:
        """Start nginx; its log goes to ``output`` (a file), else to this process's own output."""
        for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (self.prefix / name).mkdir(mode=0o700, exist_ok=True)
        self.config_path.write_text(self.config, encoding="utf-8")
        self.process = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=None if output is None else subprocess.STDOUT,
            preexec_fn=_own_group_and_die_with_parent,
        )

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def exited(self) -> bool:
        """True once nginx has stopped (reaped here or by gunicorn's arbiter)."""
        return self.process is not None and self.process.poll() is not None

    def signal(self, signum: int) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                self.process.send_signal(signum)
            except ProcessLookupError:
                pass

    def quit(self) -> None:
        """Stop listening and finish the requests in flight (nginx's graceful SIGQUIT)."""
        self.stopping = True
        self.signal(signal.SIGQUIT)

    def terminate(self) -> None:
        """Stop now (SIGTERM): open connections are closed."""
        self.stopping = True
        self.signal(signal.SIGTERM)

    def stop(self, timeout_s: float) -> None:
        """Quit (if not asked yet), wait up to ``timeout_s``, then terminate, then kill."""
        if self.process is None:
            return
        if not self.stopping:
            self.quit()
        for signum, wait_s in ((None, timeout_s), (signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
            if signum is not None:
                self.signal(signum)
            try:
                self.process.wait(wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # workers a killed master left behind
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def check(settings: Settings | None = None) -> str:
    """Render the configuration into a scratch directory and have nginx test it, as this user.

    The image build runs this (``python3 -m decision_adapter.nginx check``): the DLC's SageMaker
    image brings nginx, and this proves it is there and takes the adapter's configuration as the
    unprivileged user the container runs as. Returns nginx's version line; raises RuntimeError.
    """
    executable = find_nginx()
    if executable is None:
        raise RuntimeError(
            "no nginx on PATH (nor in /usr/sbin); the DLC's SageMaker image installs it: check "
            "BASE_IMAGE is a server-sagemaker-* image"
        )
    with tempfile.TemporaryDirectory(prefix="nginx-check-") as scratch:
        config = render_config(
            settings or load_settings({}),
            host="0.0.0.0",
            port=8080,
            socket_path=Path(scratch) / "gunicorn.sock",
            prefix=scratch,
            upstream_timeout_s=120,
            shutdown_s=27,
            access_log=stdout_reopenable(),
        )
        front = NginxProcess(executable, scratch, config)
        for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (front.prefix / name).mkdir(mode=0o700)
        front.config_path.write_text(config, encoding="utf-8")
        tested = subprocess.run(
            [executable, "-t", "-p", scratch, "-e", "stderr", "-c", str(front.config_path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if tested.returncode != 0:
            raise RuntimeError(f"nginx refuses the adapter's configuration: {tested.stderr.strip()}")
    version = subprocess.run([executable, "-v"], capture_output=True, text=True, timeout=60)
    return (version.stderr or version.stdout).strip()


if __name__ == "__main__":
    if sys.argv[1:] != ["check"]:
        sys.exit("usage: python3 -m decision_adapter.nginx check")
    try:
        print(f"{check()}: takes the adapter's configuration")
    except RuntimeError as exc:
        sys.exit(f"decision adapter: {exc}")

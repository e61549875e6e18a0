"""The nginx configuration the adapter renders, run by the real nginx in front of a stub upstream.

No model here: a small HTTP server on a unix socket stands in for gunicorn, so nginx's own
answers (502, 503, 504, deadlines) can be provoked in a second. The rendered configuration is
the one ``serve`` runs (decision_adapter/nginx.py); the served stack itself is tested in
test_slow_clients.py, test_hostile_http.py and test_shutdown.py.
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import pwd
import shutil
import signal
import socketserver
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from decision_adapter.nginx import NginxProcess, error_pages, refusals, render_config
from decision_adapter.settings import load_settings
from tests.support.adapters import NGINX, needs_nginx
from workshop_lib.local import free_port

from .raw_http import Reader, chunked_head, closed_by_peer, connect, error_of, exchange, post

SECRETS = ("basic-user-7c1f", "bearer-key-93ad", "query-key-5be2")


class _Stub(http.server.BaseHTTPRequestHandler):
    """gunicorn's stand-in: /slow answers after 3 s, anything else at once with what it received."""

    protocol_version = "HTTP/1.1"

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.path.startswith("/slow"):
            time.sleep(3)
        out = json.dumps({"path": self.path, "received": len(body)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = _answer

    def address_string(self):
        return "stub"

    def log_message(self, *args):
        pass


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def _front(tmp_path: Path, *, socket: Path, env: dict | None = None, **render) -> tuple[NginxProcess, int, Path]:
    settings = load_settings(
        {"DECISION_ADAPTER_READ_TIMEOUT": "1", "DECISION_ADAPTER_MAX_BODY_BYTES": "4096", **(env or {})}
    )
    port = free_port()
    prefix = tmp_path / "nginx"
    prefix.mkdir()
    options = {"upstream_timeout_s": 120, "shutdown_s": 2, **render}
    config = render_config(settings, host="127.0.0.1", port=port, socket_path=socket, prefix=prefix, **options)
    return NginxProcess(NGINX, prefix, config), port, tmp_path / "nginx.log"


@pytest.fixture
def front(tmp_path):
    """nginx from the rendered configuration in front of the stub; stopped (and the stub too) at the end."""
    started = []

    def start(with_upstream: bool = True, **render):
        socket = tmp_path / "upstream.sock"
        if with_upstream:
            server = _UnixServer(str(socket), _Stub)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            started.append(server)
        nginx, port, log = _front(tmp_path, socket=socket, **render)
        output = open(log, "ab")
        nginx.start(output)
        output.close()
        started.append(nginx)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                connect(port, timeout=1).close()
                break
            except OSError:
                assert nginx.process.poll() is None, log.read_text()
                time.sleep(0.05)
        return port, log

    yield start
    for thing in reversed(started):
        if isinstance(thing, NginxProcess):
            thing.stop(timeout_s=2)
        else:
            thing.shutdown()
            thing.server_close()


# -- the configuration as text ------------------------------------------------------------------------


def test_the_rendered_configuration_keeps_every_file_in_its_directory_and_the_settings_limits(tmp_path):
    settings = load_settings({"DECISION_ADAPTER_READ_TIMEOUT": "7", "DECISION_ADAPTER_MAX_BODY_BYTES": "5000"})
    text = render_config(
        settings,
        host="0.0.0.0",
        port=8080,
        socket_path=tmp_path / "g.sock",
        prefix=tmp_path,
        upstream_timeout_s=120,
        shutdown_s=27,
    )
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    for directive in (
        "pid",
        "client_body_temp_path",
        "proxy_temp_path",
        "fastcgi_temp_path",
        "uwsgi_temp_path",
        "scgi_temp_path",
    ):
        (value,) = [line.split()[1].rstrip(";") for line in lines if line.split()[0] == directive]
        assert Path(value).parent == tmp_path, (directive, value)  # writable by the adapter's own user
    assert "listen 0.0.0.0:8080 backlog=511;" in lines and f"server unix:{tmp_path / 'g.sock'};" in lines
    for directive in (
        "client_header_timeout 7s;",
        "client_body_timeout 7s;",
        "client_max_body_size 5000;",
        "proxy_request_buffering on;",
        "proxy_http_version 1.1;",
        "error_log stderr alert;",
    ):
        assert directive in lines, directive
    assert not any(field in text for field in ("@PREFIX@", "@SOCKET@", "@LISTEN@"))
    run_as = [line for line in lines if line.startswith("user ")]
    assert run_as == (["user root root;"] if os.geteuid() == 0 else [])  # the workers can open the directory
    for leak in ("$remote_user", "$http_authorization", "$args", "$query_string", "$request_uri", "$http_"):
        log_format = text[text.index("log_format") : text.index(";", text.index("log_format"))]
        assert leak not in log_format


def test_every_refusal_has_an_answer_in_each_shape_and_the_413_names_the_setting():
    settings = load_settings({})
    for refusal in refusals(settings, 120):
        answers = error_pages(refusal)
        status, body = answers["sagemaker"]
        assert status == refusal.answer_status and body["error"]["code"] and body["error"]["message"]
        jev_status, jev_body = answers["jev"]
        assert set(jev_body) == {"detail"} and jev_status == (422 if refusal.answer_status == 400 else status)
        openai_status, openai_body = answers["decisions"]
        assert openai_status == status and set(openai_body["error"]) == {"message", "type", "param", "code"}
        assert openai_body["error"]["type"] == ("server_error" if status >= 500 else "invalid_request_error")
    (too_large,) = [r for r in refusals(settings, 120) if r.status == 413]
    assert "DECISION_ADAPTER_MAX_BODY_BYTES" in too_large.message and str(settings.max_body_bytes) in too_large.message


@needs_nginx
def test_nginx_accepts_the_rendered_configuration(tmp_path):
    nginx, _, _ = _front(tmp_path, socket=tmp_path / "g.sock")
    nginx.config_path.write_text(nginx.config)
    for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (nginx.prefix / name).mkdir()
    done = subprocess.run(
        [NGINX, "-t", "-p", str(nginx.prefix), "-e", "stderr", "-c", str(nginx.config_path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr


# -- nginx's own answers, over loopback --------------------------------------------------------------


@needs_nginx
def test_a_missing_upstream_is_a_retryable_502_in_each_shape(front):
    port, _ = front(with_upstream=False)
    status, headers, body = exchange(port, post("/invocations", b"{}"))
    assert status == 502 and headers["retry-after"] == "5" and json.loads(body)["retryable"] is True
    assert error_of(body)["code"] == "bad_gateway"
    status, _, body = exchange(port, b"GET /v1/models HTTP/1.1\r\nHost: a\r\n\r\n")
    assert status == 502 and error_of(body, jev=True)["error_type"] == "api_error"
    for route in ("/v1/decisions", "/v1/chat/completions"):
        status, _, body = exchange(port, post(route, b"{}"))
        error = json.loads(body)["error"]
        assert status == 502 and (error["type"], error["code"]) == ("server_error", "bad_gateway"), route


@needs_nginx
def test_requests_past_the_connection_limit_get_503_but_ping_does_not(front):
    port, _ = front(in_flight=1)
    with connect(port) as held:
        held.sendall(post("/slow", b"{}"))  # holds the one place for 3 s
        time.sleep(0.3)
        status, headers, body = exchange(port, post("/invocations", b"{}"))
        assert status == 503 and headers["retry-after"] == "1" and error_of(body)["code"] == "busy"
        status, _, body = exchange(port, post("/v1/systemone", b"{}"))
        assert status == 503 and error_of(body, jev=True)["error_type"] == "overloaded_error"
        assert exchange(port, b"GET /ping HTTP/1.1\r\nHost: a\r\n\r\n")[0] == 200
        assert Reader(held).response()[0] == 200


@needs_nginx
def test_an_upstream_slower_than_its_deadline_is_a_504(front):
    port, _ = front(upstream_timeout_s=1)
    status, _, body = exchange(port, post("/slow", b"{}"))
    assert status == 504 and error_of(body)["code"] == "gateway_timeout"


@needs_nginx
def test_a_request_not_whole_within_the_read_timeout_is_closed_and_never_reaches_the_upstream(front):
    port, log = front()  # DECISION_ADAPTER_READ_TIMEOUT=1
    with connect(port) as header, connect(port) as body, connect(port) as silent:
        header.sendall(b"POST /invocations HTTP/1.1\r\nHost: a\r\n")
        body.sendall(b"POST /invocations HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n{")
        for sock in (header, body, silent):
            closed_after = closed_by_peer(sock, within_s=5)
            assert closed_after is not None and closed_after < 3
    time.sleep(0.2)
    assert log.read_text().count('" 408 ') >= 2  # in nginx's log; nothing was passed on


@needs_nginx
def test_nothing_that_identifies_a_caller_reaches_nginx_log(front):
    port, log = front()
    basic = base64.b64encode(f"{SECRETS[0]}:pw".encode()).decode()
    auth = (f"Authorization: Basic {basic}", f"Authorization: Bearer {SECRETS[1]}")
    for header in auth:
        for raw in (
            post(f"/invocations?api_key={SECRETS[2]}", b"{}", header),
            post(f"/invocations?api_key={SECRETS[2]}", b"x" * 5000, header),  # 413 by nginx
            f"TRACE /ping?key={SECRETS[2]} HTTP/1.1\r\nHost: a\r\n{header}\r\n\r\n".encode(),
            f"GET /nowhere/{SECRETS[2]}x{'y' * 20000} HTTP/1.1\r\nHost: a\r\n\r\n".encode(),
            chunked_head(f"/v1/systemone?k={SECRETS[2]}", header) + b"zz\r\n{}\r\n0\r\n\r\n",
        ):
            exchange(port, raw)
    time.sleep(0.3)
    text = log.read_text()
    for line in ('"POST /invocations" 413', '"TRACE /ping" 405', '"GET other" 414', '"POST /v1/systemone" 422'):
        assert line in text  # nginx logged its own answers, by route
    for secret in (*SECRETS, basic):
        assert secret not in text


@pytest.fixture
def unprivileged_dir():
    """A directory nobody owns, outside pytest's own (root's alone), removed afterwards."""
    nobody = pwd.getpwnam("nobody")
    work = Path(tempfile.mkdtemp(prefix="nginx-as-nobody-", dir="/tmp"))
    os.chown(work, nobody.pw_uid, nobody.pw_gid)
    yield work, nobody
    shutil.rmtree(work, ignore_errors=True)


@needs_nginx
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to become another user")
def test_nginx_runs_the_configuration_as_the_unprivileged_user_the_image_runs_as(unprivileged_dir, monkeypatch):
    """The image runs as user ``adapter``: nothing in the configuration may need root (paths, port, user)."""
    work, nobody = unprivileged_dir
    monkeypatch.setattr(os, "geteuid", lambda: nobody.pw_uid)  # render as that user would
    nginx, port, log = _front(work, socket=work / "absent.sock", access_log=False)
    monkeypatch.undo()
    assert not [line for line in nginx.config.splitlines() if line.startswith("user ")]
    for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (nginx.prefix / name).mkdir()
    nginx.config_path.write_text(nginx.config)
    for path in (nginx.prefix, *nginx.prefix.iterdir()):
        os.chown(path, nobody.pw_uid, nobody.pw_gid)
    as_nobody = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups", "--"]
    with open(log, "ab") as output:
        process = subprocess.Popen(
            [*as_nobody, *nginx.command()],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        answer, deadline = None, time.monotonic() + 10
        while answer is None and time.monotonic() < deadline and process.poll() is None:
            try:
                answer = exchange(port, post("/invocations", b"{}"), timeout=5)
            except OSError:
                time.sleep(0.05)
        assert answer is not None, log.read_text()
        assert answer[0] == 502 and error_of(answer[2])["code"] == "bad_gateway"  # nginx itself ran, unprivileged
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(10)


# -- serve's choice, without starting anything -------------------------------------------------------


def test_serve_puts_nginx_in_front_when_found_and_says_why_not_otherwise(tmp_path, monkeypatch):
    from decision_adapter import nginx as nginx_module
    from decision_adapter import serve
    from decision_adapter.settings import SettingsError

    front, why = serve.plan_front(load_settings({"DECISION_ADAPTER_NGINX": "off"}), "0.0.0.0", tmp_path)
    assert front is None and why == "DECISION_ADAPTER_NGINX=off"
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(nginx_module, "SBIN_DIRS", ())
    front, why = serve.plan_front(load_settings({}), "0.0.0.0", tmp_path)
    assert front is None and why == "no nginx on PATH"
    with pytest.raises(SettingsError, match="DECISION_ADAPTER_NGINX=on"):
        serve.plan_front(load_settings({"DECISION_ADAPTER_NGINX": "on"}), "0.0.0.0", tmp_path)
    line = serve.uncontained_line(why, "0.0.0.0", 8080)
    assert "slow clients are not contained" in line and "\n" not in line


def test_gunicorn_listens_on_the_socket_behind_nginx_and_logs_no_caller(tmp_path):
    from decision_adapter import serve

    settings = load_settings({})
    behind = serve.gunicorn_options(settings, "0.0.0.0", tmp_path / "g.sock")
    alone = serve.gunicorn_options(settings, "0.0.0.0")
    assert behind["bind"] == f"unix:{tmp_path / 'g.sock'}" and alone["bind"] == "0.0.0.0:8080"
    assert behind["worker_class"] == alone["worker_class"] == "gthread"  # gunicorn's own, stock
    for atom in ("%(u)s", "%(r)s", "%(q)s", "%(f)s", "%(a)s", "}i", "}e"):
        assert atom not in serve.ACCESS_LOG_FORMAT


def test_nginx_waits_for_gunicorn_as_long_as_a_request_may_legitimately_take():
    from decision_adapter.serve import WORKER_TIMEOUT_S, upstream_timeout_s

    assert upstream_timeout_s(load_settings({})) == WORKER_TIMEOUT_S  # 30 s in line + 30 s of work, with margin
    long_work = load_settings({"DECISION_ADAPTER_REQUEST_TIMEOUT": "600", "DECISION_ADAPTER_QUEUE_TIMEOUT": "45"})
    assert upstream_timeout_s(long_work) > 600 + 45  # a 255-option Jev choice allowed 600 s is not cut at 120 s
    assert upstream_timeout_s(load_settings({"DECISION_ADAPTER_REQUEST_TIMEOUT": "0"})) == 3600  # no limit set

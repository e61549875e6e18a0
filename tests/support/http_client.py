"""One small HTTP helper for tests that talk to a real adapter process."""

from __future__ import annotations

import json
import urllib.error
import urllib.request


def send(url, body: bytes | None = None, *, method=None, headers=None, timeout=70.0) -> tuple[int, dict, bytes]:
    """Send raw bytes; return (status, headers, raw body) for any status."""
    request = urllib.request.Request(url, data=body, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, dict(exc.headers), exc.read()
        finally:
            exc.close()


def call(
    url,
    body=None,
    *,
    method=None,
    headers=None,
    content_type="application/json",
    raw: bytes | None = None,
    timeout=70.0,
):
    """Send JSON (or ``raw`` bytes); return (status, headers, parsed JSON body or None) for any status."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    sent = {"Content-Type": content_type} if data is not None else {}
    sent.update(headers or {})
    status, answer_headers, payload = send(url, data, method=method, headers=sent, timeout=timeout)
    return status, answer_headers, json.loads(payload) if payload else None

"""One small HTTP helper for tests that talk to a real adapter process."""

from __future__ import annotations

import json
import urllib.error
import urllib.request


def call(url, body=None, *, method=None, headers=None, content_type="application/json",
         raw: bytes | None = None, timeout=70.0):
    """Send a request; return (status, headers, parsed JSON body or None) for any status."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    sent = {"Content-Type": content_type} if data is not None else {}
    sent.update(headers or {})
    request = urllib.request.Request(url, data=data, headers=sent, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        payload = exc.read()
        return exc.code, dict(exc.headers), json.loads(payload) if payload else None

"""A suite nobody on this project wrote, run as a subprocess against real adapter processes.

``jevcompat test`` (the pinned conformance suite): every MUST passes against an adapter with an API
key configured, the stricter of its two settings (the auth checks run only there). Its checks include
255-option choices, noise-aware invariance to question ids, batching and order, and the official
``typesafe-sdk`` parsing every answer type. The run without a key is ``make conformance``'s
(benchmarks/jev.py runs both); here ``test_systemone_http.py`` checks that a header is ignored without
one. One run keeps ``make test`` inside CI's time.

``jevbench eval`` (label-free coherence tests) runs in ``make conformance`` only: even its
one-case ``examples`` suite takes over two minutes on 2 cores, and the embedded model's scores
would not be asserted anyway.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.support import console_script, run_tool
from tests.support.adapters import JEV_API_KEY, JEV_ENV

pytestmark = pytest.mark.slow

JEVCOMPAT_TIMEOUT_S = 3600  # a whole run; a shared 2-core machine can be slow
REQUEST_TIMEOUT_S = "600"  # jevcompat's per-request timeout (a timeout would make the run "incomplete")


def _jevcompat(url: str, tmp_path, *extra: str, env: dict | None = None) -> tuple[int, dict]:
    report = tmp_path / "jevcompat.json"
    status = run_tool([console_script("jevcompat"), "test", url, "--timeout", REQUEST_TIMEOUT_S,
                       "--json", str(report), "--markdown", str(tmp_path / "jevcompat.md"), *extra],
                      tmp_path / "jevcompat.log", timeout_s=JEVCOMPAT_TIMEOUT_S, env=env)
    assert report.exists(), (tmp_path / "jevcompat.log").read_text(errors="replace")[-3000:]
    return status, json.loads(report.read_text())


def _failed_musts(report: dict) -> list[str]:
    return [f"{r['id']}: {[f['message'] for f in r['findings']][:2]}"
            for r in report["results"] if r["level"] == "MUST" and r["status"] == "fail"]


def test_jevcompat_every_must_passes_with_an_api_key(adapters, tmp_path):
    keyed = adapters.shared(**JEV_ENV, DECISION_ADAPTER_API_KEY=JEV_API_KEY)
    env = {**os.environ, "WORKSHOP_JEV_KEY": JEV_API_KEY}  # --key-env keeps the key off the command line
    status, report = _jevcompat(keyed.url, tmp_path, "--key-env", "WORKSHOP_JEV_KEY", env=env)
    summary = report["summary"]
    assert _failed_musts(report) == []
    assert summary["verdict"] == "conformant" and status == 0, (summary, report["inconclusive"])
    assert summary["MUST"]["failed"] == 0 and summary["untested_musts"] == []
    results = {r["id"]: r["status"] for r in report["results"]}
    assert results["auth.bearer"] == "pass"
    assert results["auth.missing"] == "pass" and results["auth.invalid"] == "pass"
    assert results["choice.options"] == "pass"
    assert results["dropin.sdk-python"] == "pass" and results["semantics.question-id"] == "pass"
    assert report["info"]["limits"]["choice options accepted up to"] == 255

"""The child image installs exactly what the tests ran, each file checked against a recorded hash.

container/requirements.lock is written by scripts/lock_container_deps.py from this environment;
these checks fail when a dependency moves (a new Flask in the venv, a new requirement of the
adapter) without a new lock, or when a Dockerfile stops installing it with --require-hashes.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "container" / "requirements.lock"
sys.path.insert(0, str(ROOT / "scripts"))
import lock_container_deps  # noqa: E402


def _locked() -> dict[str, tuple[str, list[str]]]:
    text = LOCK.read_text().replace("\\\n", " ")
    pins = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip() if line.lstrip().startswith("#") else line.strip()
        if not line:
            continue
        match = re.fullmatch(r"([a-z0-9-]+)==(\S+)((?:\s+--hash=sha256:[0-9a-f]{64})+)", line)
        assert match, f"not a pinned, hashed requirement: {line!r}"
        pins[match[1]] = (match[2], re.findall(r"[0-9a-f]{64}", match[3]))
    return pins


def test_every_locked_requirement_is_pinned_with_at_least_one_hash():
    pins = _locked()
    assert pins and all(hashes for _, hashes in pins.values())


def test_the_lock_holds_exactly_the_versions_this_environment_runs():
    expected = lock_container_deps.closure()
    locked = {name: pinned for name, (pinned, _) in _locked().items()}
    assert locked == expected, "run `.venv/bin/python scripts/lock_container_deps.py` and commit the lock"


def test_the_adapter_and_the_bindings_pull_in_nothing_outside_the_lock():
    names = set(lock_container_deps.closure())
    assert {"flask", "gunicorn", "numpy", "jinja2", "werkzeug"} <= names
    assert not names & lock_container_deps.BUILT_IN_IMAGE

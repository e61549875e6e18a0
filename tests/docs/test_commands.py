"""The shell commands in the README and the docs pages run as written: every command of a ```bash,
```console or ```sh block runs from the repository root, except those this machine cannot run
(``CANNOT_RUN_HERE``, each with its reason), and the files a command reads exist."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```(?:bash|console|sh)\n(.*?)^```", re.MULTILINE | re.DOTALL)

AWS_STEPS = (
    "setup|codebuild-role|package-model|verify-package|resolve-image|deploy|deploy-standard|"
    "invoke-standard|build-image|extend|deadline|placement|invoke|bench|captured|calibrate|alarms|"
    "update|delete-alarms|autoscale|transform|scale-to-zero|cleanup|delete-[a-z-]+|audit|stop-local|check"
)
CANNOT_RUN_HERE = {
    r"^aws ": "an AWS account's command",
    r"<[^>]+>": "a placeholder the reader fills in",
    r"^make\b": "a make target: minutes long (make test runs what the others check)",
    r"-m pytest\b": "the test suite itself",
    r"-m mkdocs serve\b": "a server that runs until stopped",
    r"--url http://127\.0\.0\.1": "calls the local adapter that `serve` starts",
    rf"-m workshop_lib ({AWS_STEPS})\b(?!.*--help)": "acts on an AWS account, or on the emulator notebook 00 starts",
    r"-m workshop_lib serve\b": "a server that runs until stopped",
    r"-m benchmarks\.": "a benchmark: minutes long",
    r"gpu_concurrency\.sh(?!.*--dry-run)": "needs a GPU machine (or PyPI, to prepare one)",
}
READS = ("--request", "--tasks", "--calibration", "--compare")


def commands(text: str) -> list[str]:
    """The commands of a page's shell blocks: continuation lines joined, comments and prompts dropped."""
    found = []
    for block in BLOCK.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"(^|\s)#\s.*$", "", line.removeprefix("$ ")).strip()  # a comment to its end
            if line:
                found.append(" ".join(line.split()))
    return found


def why_not(command: str) -> str | None:
    return next((why for pattern, why in CANNOT_RUN_HERE.items() if re.search(pattern, command)), None)


ALL = [(page.relative_to(ROOT).as_posix(), command) for page in PAGES for command in commands(page.read_text())]
RUNNABLE = [(page, command) for page, command in ALL if not why_not(command)]


def test_the_pages_hold_commands_and_most_kinds_run_here():
    assert len(ALL) > 20
    assert len(RUNNABLE) >= 4, RUNNABLE


def test_every_file_a_command_reads_is_in_the_repository():
    for page, command in ALL:
        words = command.split()
        for flag, value in itertools.pairwise(words):
            if flag in READS and value.endswith((".json", ".jsonl")) and not re.search(r"[<$]|^results/", value):
                assert (ROOT / value).is_file(), f"{page}: {command!r} reads {value}, which is not in the repository"


def test_the_example_requests_are_the_library_examples():
    import json

    from workshop_lib import examples

    assert json.loads((ROOT / "examples/example-request.json").read_text()) == examples.SUPPORT_ROUTE
    assert json.loads((ROOT / "examples/example-shared-request.json").read_text()) == examples.SHARED_STATE


@pytest.mark.parametrize("page,command", RUNNABLE, ids=[f"{p}: {c}" for p, c in RUNNABLE])
def test_the_command_runs_as_written(page, command, tmp_path):
    env = {**os.environ, "WORKSHOP_CONFIG": str(tmp_path / "config.json"), "WORKSHOP_MODE": "local"}
    log = tmp_path / "output.log"
    with log.open("w") as out:
        done = subprocess.run(
            command,
            shell=True,
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=60,
            start_new_session=True,
        )
    assert done.returncode == 0, f"{page}: {command!r} exited {done.returncode}:\n{log.read_text()[-2000:]}"

"""The gunicorn worker's resident memory, read from /proc: its pid under the arbiter, and its VmRSS."""

from __future__ import annotations

from pathlib import Path

from workshop_lib.local import AdapterProcess


def worker_pids(arbiter_pid: int) -> list[int]:
    """The gunicorn workers under the arbiter (nginx, its other child, left out)."""
    try:
        children = [int(p) for p in Path(f"/proc/{arbiter_pid}/task/{arbiter_pid}/children").read_text().split()]
    except OSError:
        return []
    return [pid for pid in children if _command(pid) != "nginx"]


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def vm_rss_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def worker_rss(server: AdapterProcess) -> tuple[int | None, int | None]:
    """(worker pid, its VmRSS) for the one gunicorn worker under the arbiter."""
    pids = worker_pids(server.process.pid)
    if len(pids) != 1:
        return None, None
    return pids[0], vm_rss_bytes(pids[0])

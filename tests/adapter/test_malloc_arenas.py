"""glibc's malloc arenas are capped by the server before it forks its worker: threads that allocate
then share two arenas instead of getting one each (glibc's own report, ``malloc_info``, counts them)."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CONTAINER = Path(__file__).resolve().parents[2] / "container"

COUNT_ARENAS = textwrap.dedent("""
    import ctypes, os, sys, tempfile, threading
    sys.path.insert(0, sys.argv[1])
    from decision_adapter.serve import limit_malloc_arenas
    capped = limit_malloc_arenas() if sys.argv[2] == "cap" else False
    if os.fork() == 0:  # as gunicorn forks its worker after the cap
        libc = ctypes.CDLL(None)
        libc.malloc.restype = ctypes.c_void_p
        libc.fopen.restype = ctypes.c_void_p
        start = threading.Barrier(8)

        def allocate():
            start.wait()
            for _ in range(200):
                libc.free(ctypes.c_void_p(libc.malloc(4096)))

        threads = [threading.Thread(target=allocate) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        fd, path = tempfile.mkstemp()
        os.close(fd)
        stream = libc.fopen(path.encode(), b"w")
        libc.malloc_info(0, ctypes.c_void_p(stream))
        libc.fclose(ctypes.c_void_p(stream))
        print(capped, open(path).read().count("<heap nr="), flush=True)
        os.unlink(path)
        os._exit(0)
    os.wait()
""")


def arenas(mode: str) -> tuple[str, int]:
    env = {"PATH": "/usr/bin:/bin"}  # no MALLOC_ARENA_MAX
    out = subprocess.run(
        [sys.executable, "-c", COUNT_ARENAS, str(CONTAINER), mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    return out[0], int(out[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_threads_share_two_arenas_once_capped():
    capped, count = arenas("cap")
    assert capped == "True" and count <= 2
    _, uncapped = arenas("none")
    assert uncapped > 2  # the same threads without the cap: the test can tell the difference


def test_an_arena_limit_in_the_environment_wins(monkeypatch):
    from decision_adapter.serve import limit_malloc_arenas

    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas() is False

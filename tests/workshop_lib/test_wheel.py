"""The wheel built from pyproject.toml, installed where the checkout is out of reach: every module
imports, the command line runs, the data files are in it, and code that needs the checkout says how
to get one.

The wheel is built from a copy of only what pyproject.toml packages (pyproject.toml, README.md,
workshop_lib/), so nothing else in the checkout can leak into it and nothing is written into the
checkout; the contract it depends on is a distribution of its own (container/contract), built the
same way. Both are installed with --no-deps into a fresh venv of its own; the other dependencies
(boto3, numpy, ...) come from this venv's site-packages on PYTHONPATH, which Python reads without
its .pth files, so this venv's editable installs of the checkout stay out of the way.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from workshop_lib.config import repo_root

pytestmark = pytest.mark.slow

CHECKOUT = repo_root()
PACKAGED = ("pyproject.toml", "README.md", "workshop_lib")
CONTRACT = CHECKOUT / "container" / "contract"


def _bdist_wheel_here() -> bool:
    """Whether this venv's setuptools can build a wheel without pip fetching a newer one."""
    version = tuple(int(p) for p in importlib.metadata.version("setuptools").split(".")[:2])
    try:
        importlib.metadata.version("wheel")
    except importlib.metadata.PackageNotFoundError:
        return version >= (70, 1)  # bdist_wheel is part of setuptools from 70.1 on
    return True


def _run(argv, *, env=None, cwd=None, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python of a fresh venv holding only the wheels, the environment to run it with, the workshop's wheel)."""
    work = tmp_path_factory.mktemp("wheel")
    source, contract = work / "source", work / "contract"
    source.mkdir()
    for name in PACKAGED:
        found = CHECKOUT / name
        if found.is_dir():
            shutil.copytree(found, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(found, source / name)
    shutil.copytree(CONTRACT, contract, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
    build = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--quiet",
        "--wheel-dir",
        str(work / "dist"),
        str(source),
        str(contract),
    ]
    if _bdist_wheel_here():
        build.insert(4, "--no-build-isolation")
    built = _run(build, cwd=work, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = (work / "dist").glob("decision_workshop-*.whl")
    [contract_wheel] = (work / "dist").glob("decision_contract-*.whl")

    target = work / "venv"
    venv.create(target, with_pip=False)  # pip from this venv installs into it (--python)
    python = target / "bin" / "python"
    done = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--quiet",
            str(wheel),
            str(contract_wheel),
        ],
        cwd=work,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKSHOP_", "PYTHON"))}
    env["PYTHONPATH"] = sysconfig.get_paths()["purelib"]  # dependencies only: no .pth, so no editable checkout
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    outside = work / "elsewhere"
    outside.mkdir()
    return python, env, wheel, outside


def test_the_wheel_holds_every_package_and_the_data_files(installed):
    _, _, wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    assert not [n for n in names if n.startswith("decision_contract/")]  # its own distribution's
    wanted = {
        p.relative_to(CHECKOUT).as_posix()
        for p in (CHECKOUT / "workshop_lib").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and (p.suffix == ".py" or p.parent.name == "data")
    }
    assert "workshop_lib/steps/__init__.py" in wanted and "workshop_lib/evaluation/data/tasks.jsonl" in wanted
    assert sorted(wanted - names) == []


def test_every_module_imports_from_the_installed_copy(installed):
    python, env, _, outside = installed
    code = (
        "import importlib, pkgutil, workshop_lib, decision_contract\n"
        "print(workshop_lib.__file__)\n"
        "assert decision_contract.__file__.startswith(workshop_lib.__file__.rsplit('/workshop_lib/', 1)[0])\n"
        "names = [m.name for m in pkgutil.walk_packages(workshop_lib.__path__, 'workshop_lib.')\n"
        "         if not m.name.endswith('__main__')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "print(len(names))\n"
    )
    ran = _run([str(python), "-c", code], env=env, cwd=outside)
    assert ran.returncode == 0, ran.stderr
    where, count = ran.stdout.split()
    assert Path(where).is_relative_to(python.parent.parent)  # the venv's copy, not the checkout
    assert int(count) > 30  # the walk found the subpackages (steps, evaluation), not only the top level


def test_the_command_line_runs_from_the_installed_copy(installed):
    python, env, _, outside = installed
    ran = _run([str(python.parent / "workshop"), "--help"], env=env, cwd=outside)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("usage: ") and "deploy-standard" in ran.stdout and "package-model" in ran.stdout


def test_code_that_needs_the_checkout_says_how_to_get_it(installed):
    python, env, _, outside = installed
    code = (
        "from workshop_lib.aws import codebuild\nfrom workshop_lib.errors import AwsFailure\n"
        "try:\n    print(codebuild.default_repo_root())\n"
        "except AwsFailure as exc:\n    print('refused:', exc)\n"
    )
    ran = _run([str(python), "-c", code], env=env, cwd=outside)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("refused: this needs the workshop's checkout (buildspec/, container/)")
    assert "set WORKSHOP_REPO" in ran.stdout
    given = _run([str(python), "-c", code], env={**env, "WORKSHOP_REPO": str(CHECKOUT)}, cwd=outside)
    assert given.stdout.strip() == str(CHECKOUT)
    wrong = _run([str(python), "-c", code], env={**env, "WORKSHOP_REPO": str(outside)}, cwd=outside)
    assert f"WORKSHOP_REPO={outside} has none" in wrong.stdout

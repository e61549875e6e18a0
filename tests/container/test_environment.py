"""environment.yml describes the same environment as pyproject.toml."""

import re
from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _normalise(requirement: str) -> str:
    return re.sub(r"\s+", "", requirement).lower()


def _pyproject_requirements() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = set(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements.update(extra)
    requirements -= {"decision-adapter", "decision-contract"}  # the local packages, installed from ./container
    return {_normalise(r) for r in requirements}


def _environment_pip_lines() -> list[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    return next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)


def _environment_pip_requirements() -> set[str]:
    return {_normalise(r.split(" --")[0]) for r in _environment_pip_lines() if not r.startswith("-e")}


def _makefile_variable(name: str) -> str:
    match = re.search(rf"^{name}\s*:=\s*(.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert match, f"Makefile has no {name}"
    return match.group(1).strip()


def test_llama_cpp_is_built_with_the_same_flags_by_make_and_by_conda():
    flags = _makefile_variable("LLAMA_CMAKE_ARGS").split()
    assert "-DGGML_NATIVE=OFF" in flags  # never tuned to the CPU that happens to build it
    line = next(r for r in _environment_pip_lines() if r.startswith("llama-cpp-python"))
    # conda compiles llama.cpp inside llama-cpp-python: the same baseline, without the multimodal library
    assert line.split("--config-settings=cmake.args=")[1].split(";") == [*flags, "-DLLAVA_BUILD=OFF"]
    assert line.split()[0] == f"llama-cpp-python=={_makefile_variable('LLAMA_CPP_PYTHON')}"


def test_the_server_build_is_portable_and_leaves_out_what_nothing_here_runs():
    flags = _makefile_variable("LLAMA_SERVER_ARGS").split()
    every = flags + _makefile_variable("LLAMA_CMAKE_ARGS").split()
    assert not [f for f in every if f.startswith("-DGGML_NATIVE=") and f != "-DGGML_NATIVE=OFF"]
    # BUILD_SHARED_LIBS: a libllama.so for the bindings; UI off: its build runs npm
    assert {"-DBUILD_SHARED_LIBS=ON", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_BUILD_TESTS=OFF"} <= set(flags)
    assert re.search(r"--build \S+ --target llama-server ", (ROOT / "Makefile").read_text())


def test_the_local_bindings_are_built_as_the_cpu_image_builds_them():
    """The Makefile's LLAMA_BUILD=OFF bindings take the CMAKE_ARGS of the image's bindings stage."""
    dockerfile = (ROOT / "container" / "Dockerfile").read_text()
    image = re.search(r'CMAKE_ARGS="([^"]+)"', dockerfile)[1].split()
    assert _makefile_variable("LLAMA_BINDINGS_ARGS").split() == image
    assert "-DLLAMA_BUILD=OFF" in image


def test_environment_yml_names_a_make_target_that_exists():
    """environment.yml says how conda users get llama-server; the command it gives must still work."""
    header = "\n".join(line for line in (ROOT / "environment.yml").read_text().splitlines() if line.startswith("#"))
    targets = set(re.findall(r"\bmake ([a-z][\w-]*)", header))
    assert targets, "environment.yml no longer says how to build llama-server"
    for target in targets:
        assert re.search(rf"^{re.escape(target)}:", (ROOT / "Makefile").read_text(), re.MULTILINE), target


def test_every_make_target_the_docs_name_exists_and_runs_its_own_tool():
    """README and docs name make targets; each must exist, and bench/browser must run what they say."""
    named = set()
    for page in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        named |= set(re.findall(r"`make ([a-z][\w-]*)", page.read_text()))
    assert {"demo", "test", "bench", "browser"} <= named
    makefile = (ROOT / "Makefile").read_text()
    for target in named:
        assert re.search(rf"^{re.escape(target)}:", makefile, re.MULTILINE), f"make {target} is not a target"
    recipes = dict(re.findall(r"^([a-z][\w-]*):[^\n]*\n((?:\t[^\n]*\n|\n(?=\t))*)", makefile, re.MULTILINE))
    assert "benchmarks.adapter" in recipes["bench"] and "pytest" not in recipes["bench"]
    assert "test_browser.py" in recipes["browser"] and "benchmarks" not in recipes["browser"]
    assert "--ignore=tests/notebooks/test_browser.py" in recipes["test"]


def test_environment_yml_lists_exactly_the_pyproject_requirements():
    assert _environment_pip_requirements() == _pyproject_requirements()


def test_the_local_build_is_the_cpu_images_bindings_and_the_adapter_allows_it():
    from workshop_lib.aws.images import DLC_PINS

    adapter = tomllib.loads((ROOT / "container" / "pyproject.toml").read_text())["project"]["dependencies"]
    allowed = next(r for r in adapter if r.startswith("llama-cpp-python"))
    low, high = re.fullmatch(r"llama-cpp-python>=([\d.]+),<([\d.]+)", allowed).groups()
    local = _makefile_variable("LLAMA_CPP_PYTHON")
    assert _normalise(f"llama-cpp-python=={local}") in _pyproject_requirements()
    assert DLC_PINS["cpu"].bindings == f"llama-cpp-python=={local}"  # tests run what the CPU image ships
    assert low <= local < high


def test_environment_installs_the_three_local_packages():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert {"-e ./container/contract", "-e ./container", "-e ."} <= set(pip)


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.startswith("#") and not line.startswith(("set ", "cd "))
    ]
    assert ci == ["make test"]
    assert "make test" in readme and "make demo" in readme

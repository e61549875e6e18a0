"""environment.yml describes the same environment as pyproject.toml."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _normalise(requirement: str) -> str:
    return re.sub(r"\s+", "", requirement).lower()


def _pyproject_requirements() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = set(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements.update(extra)
    requirements.discard("decision-adapter")  # the local package, installed from ./container
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
    assert line.split("--config-settings=cmake.args=")[1].split(";") == flags
    assert line.split()[0] == f"llama-cpp-python=={_makefile_variable('LLAMA_CPP_PYTHON')}"


def test_environment_yml_lists_exactly_the_pyproject_requirements():
    assert _environment_pip_requirements() == _pyproject_requirements()


def test_the_local_build_is_the_cpu_images_bindings_and_the_adapter_allows_it():
    from workshop_lib.images import DLC_PINS

    adapter = tomllib.loads((ROOT / "container" / "pyproject.toml").read_text())["project"]["dependencies"]
    allowed = next(r for r in adapter if r.startswith("llama-cpp-python"))
    low, high = re.fullmatch(r"llama-cpp-python>=([\d.]+),<([\d.]+)", allowed).groups()
    local = _makefile_variable("LLAMA_CPP_PYTHON")
    assert _normalise(f"llama-cpp-python=={local}") in _pyproject_requirements()
    assert DLC_PINS["cpu"].bindings == f"llama-cpp-python=={local}"  # tests run what the CPU image ships
    assert low <= local < high


def test_environment_installs_both_local_packages():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert "-e ./container" in pip and "-e ." in pip


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.startswith("#") and not line.startswith(("set ", "cd "))]
    assert ci == ["make test"]
    assert "make test" in readme and "make demo" in readme

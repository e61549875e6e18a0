"""The buildspecs: their shape, what the library passes them, shellcheck, and the image build's flow.

The image build runs here with fakes for `aws` and `docker` (see tests/support/buildspec.py):
no Docker engine exists on this machine, so these tests check the commands and
their order, not an image.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.support.buildspec import REPO_ROOT, load_buildspec, phase_commands, run_buildspec
from workshop_lib.aws import build_projects, codebuild
from workshop_lib.aws.images import DLC_PINS, parse_image_uri
from workshop_lib.errors import InvalidInput
from workshop_lib.models import PINNED_MODEL

MODEL_PACKAGE = REPO_ROOT / build_projects.MODEL_PACKAGE_BUILDSPEC
IMAGE_BUILD = REPO_ROOT / build_projects.IMAGE_BUILD_BUILDSPEC
REGION = "us-east-1"
BASE = f"763104351884.dkr.ecr.{REGION}.amazonaws.com/llama-cpp@sha256:" + "12" * 32
REPOSITORY = f"123456789012.dkr.ecr.{REGION}.amazonaws.com/semif-llamacpp-dlc"


def image_env(**changes) -> dict[str, str]:
    return {
        **build_projects.image_build_env(parse_image_uri(BASE), parse_image_uri(REPOSITORY), "cpu-20250101-000000"),
        **changes,
    }


@pytest.mark.parametrize("path", [MODEL_PACKAGE, IMAGE_BUILD], ids=lambda p: p.name)
def test_valid_yaml_version_0_2_with_phases(path):
    spec = load_buildspec(path)
    assert spec["version"] == 0.2
    assert spec["env"]["shell"] == "bash"
    assert phase_commands(spec, "pre_build") and phase_commands(spec, "build")
    # Uploads and pushes live in `build`, so a failure earlier skips them; no post_build to guard.
    assert "post_build" not in spec["phases"]
    assert all(isinstance(v, str) for v in spec["env"]["variables"].values())


def test_image_build_exports_the_digest_the_library_reads():
    spec = load_buildspec(IMAGE_BUILD)
    assert spec["env"]["exported-variables"] == ["IMAGE_DIGEST"]
    assert "IMAGE_DIGEST" in codebuild.exported_variables(
        {"exportedEnvironmentVariables": [{"name": "IMAGE_DIGEST", "value": "sha256:00"}]}
    )


def test_model_package_exports_the_model_data_url():
    assert load_buildspec(MODEL_PACKAGE)["env"]["exported-variables"] == ["MODEL_DATA_URL"]


def test_library_overrides_are_buildspec_variables():
    model_vars = set(load_buildspec(MODEL_PACKAGE)["env"]["variables"])
    image_vars = set(load_buildspec(IMAGE_BUILD)["env"]["variables"])
    assert set(build_projects.model_package_env(PINNED_MODEL, "s3://bucket/prefix/")) <= model_vars
    assert set(image_env()) <= image_vars


def test_model_package_defaults_are_the_pinned_model():
    defaults = load_buildspec(MODEL_PACKAGE)["env"]["variables"]
    pinned = build_projects.model_package_env(PINNED_MODEL, "s3://bucket/prefix/")
    pinned.pop("MODEL_S3_URI")
    assert {k: defaults[k] for k in pinned} == pinned


def test_buildspec_paths_and_scripts_exist():
    for relative in (
        build_projects.MODEL_PACKAGE_BUILDSPEC,
        build_projects.IMAGE_BUILD_BUILDSPEC,
        *build_projects.REQUIRED_SOURCE_FILES,
    ):
        assert (REPO_ROOT / relative).is_file(), relative
    commands = " ".join(phase_commands(load_buildspec(MODEL_PACKAGE), "build"))
    assert "bash buildspec/scripts/package_model.sh" in commands


def test_image_build_commands_match_the_reference_recipe():
    spec = load_buildspec(IMAGE_BUILD)
    pre, build = " ".join(phase_commands(spec, "pre_build")), phase_commands(spec, "build")
    assert pre.count("docker login --username AWS --password-stdin") == 2
    docker_build = next(c for c in build if c.startswith("docker build"))
    assert "--platform linux/amd64" in docker_build
    assert '--build-arg BASE_IMAGE="$BASE_IMAGE"' in docker_build
    assert docker_build.endswith(" container")  # the build context
    order = [
        next(i for i, c in enumerate(build) if c.startswith(p))
        for p in ("docker build", "docker push", "IMAGE_DIGEST=", "export IMAGE_DIGEST")
    ]
    assert order == sorted(order)
    assert "imageDetails[0].imageDigest" in build[order[2]]


# ---------------------------------------------------------------- the image build, run with fakes


def test_image_build_with_fake_aws_cli_and_docker(tmp_path):
    result = run_buildspec(IMAGE_BUILD, image_env(), tmp_path)
    assert result.returncode == 0, result.stderr
    logins = [c for c in result.calls if c[:2] == ["docker", "login"]]
    assert [c[-1] for c in logins] == [REPOSITORY.split("/")[0], BASE.split("/")[0]]
    build = next(c for c in result.calls if c[:2] == ["docker", "build"])
    assert build[build.index("--build-arg") + 1] == f"BASE_IMAGE={BASE}"
    assert build[build.index("--file") + 1] == "container/Dockerfile"
    assert build[build.index("--platform") + 1] == "linux/amd64"
    assert build[-1] == "container" and (tmp_path / "src" / "container" / "Dockerfile").is_file()
    assert ["docker", "push", f"{REPOSITORY}:cpu-20250101-000000"] in result.calls
    describe = next(c for c in result.calls if c[:3] == ["aws", "ecr", "describe-images"])
    assert describe[describe.index("--repository-name") + 1] == "semif-llamacpp-dlc"
    assert result.exported == {"IMAGE_DIGEST": "sha256:" + "ab" * 32}


def _build_args(call: list[str]) -> dict[str, str]:
    return dict(call[i + 1].split("=", 1) for i, a in enumerate(call) if a == "--build-arg")


def test_image_build_gpu_dockerfile(tmp_path):
    env = build_projects.image_build_env(
        parse_image_uri(BASE), parse_image_uri(REPOSITORY), "gpu-20250101-000000", "Dockerfile.gpu"
    )
    result = run_buildspec(IMAGE_BUILD, env, tmp_path)
    assert result.returncode == 0, result.stderr
    build = next(c for c in result.calls if c[:2] == ["docker", "build"])
    assert build[build.index("--file") + 1] == "container/Dockerfile.gpu"
    args = _build_args(build)
    assert args["LLAMA_CPP_PYTHON"] == DLC_PINS["cuda"].bindings
    assert args["DROP_BINDINGS"] == "llama_adapter_lora_init_from_file_ptr"


def test_the_cpu_build_passes_its_pinned_bindings_and_drops_nothing(tmp_path):
    result = run_buildspec(IMAGE_BUILD, image_env(), tmp_path)
    args = _build_args(next(c for c in result.calls if c[:2] == ["docker", "build"]))
    assert args["LLAMA_CPP_PYTHON"] == "llama-cpp-python==0.3.35" and args["DROP_BINDINGS"] == ""


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"BASE_IMAGE": BASE.split("@")[0] + ":server-sagemaker-cpu-v1"}, "pinned by digest"),
        ({"BASE_IMAGE": BASE.replace("763104351884", "626614931356")}, "this region's DLC registry"),
        # a look-alike host that starts like the DLC registry must not receive the ECR login
        ({"BASE_IMAGE": "763104351884.dkr.ecr.evil.example/x@sha256:" + "12" * 32}, "this region's DLC registry"),
        ({"BASE_IMAGE": BASE + "x"}, "pinned by digest"),
        ({"REPOSITORY_URI": "123456789012.dkr.ecr.us-east-1.amazonaws.com.evil.example/r"}, "this account"),
        ({"REPOSITORY_URI": REPOSITORY.replace("123456789012", "210987654321")}, "this account"),
        ({"IMAGE_TAG": "unset"}, "IMAGE_TAG"),
        ({"IMAGE_TAG": "x;y"}, "IMAGE_TAG"),
        ({"DOCKERFILE": "../Dockerfile"}, "DOCKERFILE must be"),
        ({"LLAMA_CPP_PYTHON": "unset"}, "LLAMA_CPP_PYTHON"),
    ],
    ids=[
        "tag-not-digest",
        "other-region-dlc",
        "look-alike-host",
        "digest-suffix",
        "look-alike-repo",
        "other-account-repo",
        "no-tag",
        "bad-tag",
        "bad-dockerfile",
        "no-bindings",
    ],
)
def test_image_build_refuses_bad_inputs_before_docker_runs(tmp_path, changes, message):
    result = run_buildspec(IMAGE_BUILD, image_env(**changes), tmp_path)
    assert result.returncode != 0
    assert message in result.stderr
    assert not [c for c in result.calls if c[0] == "docker"]


def test_image_build_fails_when_ecr_returns_no_digest(tmp_path):
    result = run_buildspec(IMAGE_BUILD, image_env(), tmp_path, extra_env={"FAKE_IMAGE_DIGEST": "None"})
    assert result.returncode != 0
    assert "no digest" in result.stderr


# ---------------------------------------------------------------- shellcheck


def _shellcheck(path):
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (Debian: apt-get install -y shellcheck)")
    return subprocess.run(["shellcheck", "--shell=bash", "--severity=style", str(path)], capture_output=True, text=True)


@pytest.mark.parametrize("path", sorted((REPO_ROOT / "buildspec" / "scripts").glob("*.sh")), ids=lambda p: p.name)
def test_shellcheck_scripts(path):
    result = _shellcheck(path)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("path", [MODEL_PACKAGE, IMAGE_BUILD], ids=lambda p: p.name)
def test_shellcheck_inline_commands(path, tmp_path):
    """All phases' commands as one bash script, as CodeBuild runs them in one shell."""
    spec = load_buildspec(path)
    lines = [
        "#!/usr/bin/env bash",
        "# Variables CodeBuild provides or the buildspec's env section sets:",
        'AWS_REGION="${AWS_REGION:-}" AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-}"',
    ]
    lines += [f'{name}="${{{name}:-{value}}}"' for name, value in spec["env"]["variables"].items()]
    for phase in ("install", "pre_build", "build"):
        lines += phase_commands(spec, phase)
    lines.append(" ".join(f'echo "${name}"' for name in spec["env"].get("exported-variables", [])) or ":")
    script = tmp_path / f"{path.stem}.sh"
    script.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = _shellcheck(script)
    assert result.returncode == 0, result.stdout + script.read_text()


def test_the_build_takes_the_dlc_account_from_the_regions_table():
    """buildspec/scripts/dlc_account.sh, run for every region, equals workshop_lib.aws.images."""
    from workshop_lib.aws import images

    script = REPO_ROOT / "buildspec" / "scripts" / "dlc_account.sh"
    for region in [*images.DLC_ACCOUNTS, "us-east-1", "eu-west-1"]:
        done = subprocess.run(["bash", str(script), region], capture_output=True, text=True, timeout=10)
        assert done.stdout.strip() == images.dlc_account(region), region
    refused = subprocess.run(["bash", str(script), "us-east-1; echo 1"], capture_output=True, text=True, timeout=10)
    assert refused.returncode != 0 and refused.stdout == ""
    for region in ("us-gov-west-1", "us-gov-east-1"):  # no llama.cpp DLC published there: both refuse
        refused = subprocess.run(["bash", str(script), region], capture_output=True, text=True, timeout=10)
        assert refused.returncode != 0 and refused.stdout == "" and "no llama.cpp DLC" in refused.stderr
        with pytest.raises(InvalidInput, match="no llama.cpp DLC"):
            images.dlc_account(region)

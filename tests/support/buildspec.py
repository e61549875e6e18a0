"""Running a buildspec's shell commands on this machine, with fakes for what CodeBuild provides.

``run_buildspec`` imitates how CodeBuild runs a version 0.2 buildspec: one bash
shell for the whole build, the buildspec's ``env.variables`` overridden by the
StartBuild overrides, phases in order, the first failing command ending the
build. It does not imitate the rest of CodeBuild (source download, artifacts,
post_build after failures), and refuses buildspecs that rely on those.

``aws`` and ``docker`` are replaced by small fakes on PATH that record each call:
``aws s3 cp`` copies into a local folder standing in for S3, ``aws ecr`` answers
with a fixed password and digest, ``docker`` accepts build/push/login.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from workshop_lib.aws.build_projects import source_zip

REPO_ROOT = Path(__file__).resolve().parents[2]
RUN_PHASES = ("install", "pre_build", "build")

FAKE_AWS_CLI = r'''#!{python}
"""Fake `aws` CLI for buildspec tests: records the call, fakes S3 copies and ECR answers."""
import json, os, shutil, sys
from pathlib import Path

args = sys.argv[1:]
with open(os.environ["FAKE_CALLS"], "a") as log:
    log.write(json.dumps(["aws"] + args) + "\n")
plain = [a for a in args if not a.startswith("--only-show-errors")]
if plain[:2] == ["s3", "cp"] and plain[2].startswith("s3://"):  # a download
    shutil.copyfile(Path(os.environ["FAKE_S3_ROOT"]) / plain[2][len("s3://"):], plain[3])
elif plain[:2] == ["s3", "cp"]:
    src, dest = plain[2], plain[3]
    assert dest.startswith("s3://"), dest
    target = Path(os.environ["FAKE_S3_ROOT"]) / dest[len("s3://"):]
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, target)
elif plain[:2] == ["ecr", "get-login-password"]:
    print("fake-ecr-password")
elif plain[:2] == ["ecr", "describe-images"]:
    print(os.environ["FAKE_IMAGE_DIGEST"])
else:
    sys.exit("fake aws: unexpected call " + " ".join(args))
'''

FAKE_DOCKER = r'''#!{python}
"""Fake `docker` for buildspec tests: records the call; login insists on a password on stdin."""
import json, os, sys

args = sys.argv[1:]
with open(os.environ["FAKE_CALLS"], "a") as log:
    log.write(json.dumps(["docker"] + args) + "\n")
if args[:1] == ["login"] and not sys.stdin.read().strip():
    sys.exit("fake docker: login without a password on stdin")
if args[:1] not in (["login"], ["build"], ["push"]):
    sys.exit("fake docker: unexpected call " + " ".join(args))
'''


def load_buildspec(path: str | Path) -> dict:
    return yaml.safe_load(Path(path).read_text(encoding="utf-8"))


def phase_commands(spec: dict, phase: str) -> list[str]:
    return list(((spec.get("phases") or {}).get(phase) or {}).get("commands") or [])


@dataclass
class BuildRun:
    returncode: int
    stdout: str
    stderr: str
    calls: list[list[str]] = field(default_factory=list)
    exported: dict[str, str] = field(default_factory=dict)
    s3_root: Path | None = None

    def s3_object(self, uri: str) -> Path:
        return self.s3_root / uri[len("s3://") :]


def install_fakes(bin_dir: Path) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, text in (("aws", FAKE_AWS_CLI), ("docker", FAKE_DOCKER)):
        path = bin_dir / name
        path.write_text(text.replace("{python}", sys.executable), encoding="utf-8")
        path.chmod(0o755)
    return bin_dir


def build_script(spec: dict, overrides: dict[str, str], exported_file: Path) -> str:
    """The bash script equivalent of running the buildspec's phases in one shell."""
    if (spec.get("phases") or {}).get("post_build"):
        raise NotImplementedError("run_buildspec does not imitate post_build; extend it before relying on one")
    variables = {**((spec.get("env") or {}).get("variables") or {}), **overrides}
    lines = ["set +e"]
    lines += [f"export {name}={shlex.quote(str(value))}" for name, value in variables.items()]
    for phase in RUN_PHASES:
        for command in phase_commands(spec, phase):
            lines.append(f"{{\n{command}\n}} || exit $?")
    for name in (spec.get("env") or {}).get("exported-variables") or []:
        lines.append(f'printf "%s=%s\\n" {name} "${{{name}-}}" >> {shlex.quote(str(exported_file))}')
    return "\n".join(lines) + "\n"


def run_buildspec(
    path: str | Path,
    overrides: dict[str, str],
    tmp_path: Path,
    *,
    extra_env: dict[str, str] | None = None,
    timeout: float = 120,
) -> BuildRun:
    """Run the buildspec's commands from a copy of the repository's build source in tmp_path."""
    spec = load_buildspec(path)
    src = tmp_path / "src"
    if not src.exists():
        with zipfile.ZipFile(io.BytesIO(source_zip(REPO_ROOT))) as archive:
            archive.extractall(src)
    bin_dir = install_fakes(tmp_path / "fake-bin")
    calls, exported_file, s3_root = tmp_path / "calls.jsonl", tmp_path / "exported.env", tmp_path / "s3"
    for f in (calls, exported_file):
        f.write_text("", encoding="utf-8")
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "CODEBUILD_BUILD_ID": "decision-workshop-test:00000000-0000-0000-0000-000000000000",
        "CODEBUILD_BUILD_ARN": "arn:aws:codebuild:us-east-1:123456789012:build/"
        "decision-workshop-test:00000000-0000-0000-0000-000000000000",
        "CODEBUILD_SRC_DIR": str(src),
        "FAKE_CALLS": str(calls),
        "FAKE_S3_ROOT": str(s3_root),
        "FAKE_IMAGE_DIGEST": "sha256:" + "ab" * 32,
        **(extra_env or {}),
    }
    script = build_script(spec, overrides, exported_file)
    result = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", script],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    exported = dict(line.split("=", 1) for line in exported_file.read_text().splitlines() if "=" in line)
    return BuildRun(
        result.returncode,
        result.stdout,
        result.stderr,
        [json.loads(line) for line in calls.read_text().splitlines()],
        exported,
        s3_root,
    )


def make_fake_hub(root: Path, files: dict[tuple[str, str, str], bytes]) -> str:
    """Lay files out as the hub serves them (<repo>/resolve/<revision>/<file>, and the tree listing
    api/models/<repo>/tree/<revision> as JSON); return a file:// endpoint."""
    listings: dict[tuple[str, str], list[dict]] = {}
    for (repo, revision, name), data in files.items():
        path = root / repo / "resolve" / revision / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        listings.setdefault((repo, revision), []).append({"type": "file", "path": name, "size": len(data)})
    for (repo, revision), entries in listings.items():
        listing = root / "api" / "models" / repo / "tree" / revision
        listing.parent.mkdir(parents=True, exist_ok=True)
        entries.append({"type": "directory", "path": "onnx", "size": 0})  # folders are never taken
        listing.write_text(json.dumps(entries))
    return root.resolve().as_uri()

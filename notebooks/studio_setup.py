"""Make this project importable in the running kernel: ``%run studio_setup.py`` (notebook 00's first cell).

A fresh SageMaker Studio space has neither ``workshop_lib`` nor the boto3 release that knows
instance pools. If ``workshop_lib`` cannot be imported, this installs the project (editable,
with the notebooks' extras; not the local adapter, whose llama.cpp build the AWS path does not
need) into the kernel's own Python and makes it importable without a restart. It says what it
did, and asks for a kernel restart only when a module the kernel had already loaded was upgraded.
Run locally (``make test``), the project is already installed and nothing changes.
"""

from __future__ import annotations

import importlib
import importlib.util
import site
import subprocess
import sys
from pathlib import Path

BOTO3_FLOOR = (1, 43, 1)  # the first boto3 whose SageMaker model knows InstancePools


def _version(module) -> tuple[int, ...]:
    return tuple(int(p) for p in module.__version__.split(".")[:3] if p.isdigit())


def ensure_project(root: Path) -> str:
    if importlib.util.find_spec("workshop_lib") is not None:
        import workshop_lib

        return f"workshop_lib is importable ({Path(workshop_lib.__file__).parent}); nothing to install"
    loaded_before = {name for name in ("boto3", "botocore") if name in sys.modules}
    # The contract both rooms share is a distribution of its own that no index serves: naming its folder in
    # the same command lets pip meet the workshop's dependency on it from here, never from PyPI.
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--editable",
        f"{root}/container/contract",
        "--editable",
        f"{root}[notebooks]",
    ]
    print("installing the workshop into this kernel:", " ".join(command), flush=True)
    subprocess.run(command, check=True)
    for directory in site.getsitepackages() + [site.getusersitepackages()]:
        site.addsitedir(directory)  # runs the new editable install's .pth hook in this process
    importlib.invalidate_caches()
    import decision_contract  # noqa: F401  - both fail loudly if the install did not take
    import workshop_lib

    note = f"installed {root} (editable, [notebooks] extras, with its contract) into {sys.executable}"
    if loaded_before:
        note += (
            f"; {', '.join(sorted(loaded_before))} had been imported before the install: restart the kernel "
            "(Kernel > Restart Kernel) and run this notebook again from the top"
        )
    return note


def check_boto3() -> str:
    import boto3

    if _version(boto3) < BOTO3_FLOOR:
        return (
            f"boto3 {boto3.__version__} is older than {'.'.join(map(str, BOTO3_FLOOR))} and cannot create "
            "instance pools: restart the kernel so the upgraded boto3 loads"
        )
    return f"boto3 {boto3.__version__}"


if __name__ == "__main__":
    print(ensure_project(Path(__file__).resolve().parent.parent))
    print(check_boto3())

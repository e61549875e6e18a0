"""AWS managed policies the workshop is held against, vendored as package data (``data/``).

A SageMaker Studio participant's execution role usually carries ``AmazonSageMakerFullAccess``;
the local rehearsal evaluates the participant's calls against its published document (the
``studio-default`` persona, permissions.py). Each file keeps the document with its version id,
the date it was read and where the text comes from, so a newer version is one refresh away
(the ``Source.refresh`` command) and a test sees which version it was held to.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

SAGEMAKER_FULL_ACCESS = "AmazonSageMakerFullAccess"


@dataclass(frozen=True)
class ManagedPolicy:
    name: str
    arn: str
    version_id: str  # IAM's default version when read, e.g. "v29"
    created: str  # that version's CreateDate
    source: Mapping[str, str]  # published page, where the text was read, when, how to refresh it
    document: Mapping[str, Any]

    def __str__(self) -> str:
        return f"{self.name} {self.version_id} ({self.created[:10]}, read {self.source.get('read_on', '?')})"


@cache
def load(name: str = SAGEMAKER_FULL_ACCESS) -> ManagedPolicy:
    """The vendored managed policy ``name`` (``workshop_lib/data/<name>.json``)."""
    try:
        text = resources.files("workshop_lib").joinpath("data").joinpath(f"{name}.json").read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LookupError(
            f"no vendored copy of the managed policy {name!r} in workshop_lib/data/; known: {SAGEMAKER_FULL_ACCESS}"
        ) from None
    data = json.loads(text)
    return ManagedPolicy(
        name=data["PolicyName"],
        arn=data["PolicyArn"],
        version_id=data["VersionId"],
        created=data["CreateDate"],
        source=data["Source"],
        document=data["Document"],
    )


def sagemaker_full_access() -> ManagedPolicy:
    return load(SAGEMAKER_FULL_ACCESS)


__all__ = ["SAGEMAKER_FULL_ACCESS", "ManagedPolicy", "load", "sagemaker_full_access"]

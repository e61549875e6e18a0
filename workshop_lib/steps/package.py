"""Notebook 01: the model packaged into ``model.tar.gz`` with its manifest (CodeBuild on AWS, the
embedded model locally) and verified against the manifest's checksums; notebook 07: packaged again with
a calibration, for the update to roll out (``calibrated_package``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..aws import build_projects, codebuild, hygiene
from ..evaluation.profiles import LETTERS, read_document
from ..evaluation.served import served_readout
from .context import (
    Shown,
    Text,
    Workshop,
    decision_endpoint,
    model_spec,
    require_bucket,
    require_codebuild_role,
    shows_requests,
)
from .endpoint_clients import client
from .recorded import CALIBRATED_KEY, PACKAGE_NOTEBOOK

CALIBRATED_FOLDER = "calibrated"  # under the model folder: s3://<bucket>/<prefix>/model/calibrated/


@dataclass(repr=False)
class PackageResult(Shown):
    model_data_url: str
    manifest: dict[str, Any]
    where: str
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.model_data_url and self.manifest.get("files"))

    def lines(self) -> list[str]:
        out = [
            f"{self.manifest['model']['name']} packaged {self.where} in {self.seconds:.1f} s",
            f"ModelDataUrl: {self.model_data_url}",
        ]
        for f in self.manifest["files"]:
            origin = f"from {f['repo']}@{f['revision'][:12]}" if f.get("repo") else f"the {f.get('role')} file"
            out.append(f"  {f['path']}: {f['size']:,} bytes, sha256 {f['sha256'][:16]}…, {origin}")
        return out + self.notes


@shows_requests
def package_model(
    workshop: Workshop,
    *,
    model_s3_uri: str | None = None,
    calibration: str | Path | None = None,
    progress: bool = True,
) -> PackageResult:
    """CodeBuild downloads, verifies and packages the pinned model (locally the embedded model stands in)
    into ``model_s3_uri`` (default: ``model/`` under the workshop's S3 prefix); with ``calibration`` (the
    path of a calibration.json fitted for that GGUF, from ``workshop calibrate``) packaged next to it."""
    config = workshop.config
    started = time.perf_counter()
    c = workshop.clients
    require_bucket(workshop)
    require_codebuild_role(workshop)
    if model_s3_uri:  # refused before any build: the CodeBuild role may write only the workshop's model folder
        config.check_model_uri(model_s3_uri, "model_s3_uri")
    kept = hygiene.keep_logs(c.logs, f"/aws/codebuild/{build_projects.MODEL_PACKAGE_PROJECT}")
    packaged = codebuild.package_model_in_codebuild(
        c.codebuild,
        c.s3,
        c.logs,
        model_s3_uri=model_s3_uri or config.s3_uri("model"),
        service_role_arn=config.codebuild_role_arn,
        source_bucket=config.bucket,
        source_prefix=f"{config.prefix}/{build_projects.SOURCE_PREFIX}",
        progress=progress,
        runner=c.builds,
        calibration=calibration,
        region=config.region,
    )
    workshop.remember(model_data_url=packaged.model_data_url)
    limits = c.builds.not_exercised(build_projects.MODEL_PACKAGE_PROJECT)
    return PackageResult(
        packaged.model_data_url,
        packaged.manifest,
        f"by CodeBuild (build {packaged.build_id})",
        time.perf_counter() - started,
        [note for note in (limits, kept) if note],
    )


@shows_requests
def verify_package(workshop: Workshop, model_data_url: str | None = None) -> Text:
    """Re-read the manifest from S3, check it against the pins, and check the tarball is there
    (``model_data_url``, else the one ``package_model`` recorded)."""
    c = workshop.clients
    url = model_data_url or workshop.recall("model_data_url", PACKAGE_NOTEBOOK, check=True)
    spec = model_spec(workshop)
    manifest = codebuild.check_manifest(codebuild.read_manifest(c.s3, url), spec)
    bucket, key = build_projects.parse_s3_uri(url)
    size = c.s3.head_object(Bucket=bucket, Key=key)["ContentLength"]
    text = (
        f"verified: {url} ({size:,} bytes) holds {spec.gguf.path}; the manifest is in "
        f"{codebuild.describe_manifest(manifest)}, and the GGUF's sha256 and revision match the pin in "
        "workshop_lib/models.py. The adapter re-checks the listed files before it serves."
    )
    return Text(text)


@shows_requests
def calibrated_package(workshop: Workshop, calibration: str | Path | None = None, *, progress: bool = True) -> Text:
    """Package the model again with ``calibration`` (default: the calibration.json notebook 06 saved for the
    decision endpoint, else the one ``workshop calibrate`` wrote beside the config) under ``model/calibrated/``,
    for ``update_endpoint`` to roll out; without a calibration file, or when the default one was fitted for another
    readout than the endpoint serves (``served_readout``), nothing is packaged and the update rolls to notebook 01's
    package again. A ``calibration`` named here is packaged whatever its readout."""
    if calibration:
        path = Path(calibration)
    else:
        saved_by_06 = workshop.folder("bench") / decision_endpoint(workshop) / "calibration.json"
        path = saved_by_06 if saved_by_06.is_file() else workshop.path.parent / "calibration.json"
    if not path.is_file():
        workshop.forget(CALIBRATED_KEY)
        return Text(
            f"no calibration file at {path}: the update below rolls the endpoint to notebook 01's package "
            "again (fit one with `python -m workshop_lib calibrate --tasks <labelled tasks>` to roll out a "
            "calibration)"
        )
    fitted = read_document(path).get("readout", LETTERS)
    served = served_readout(client(workshop, decision_endpoint(workshop)))
    if fitted != served and not calibration:
        workshop.forget(CALIBRATED_KEY)
        return Text(
            f"{path} was fitted for the {fitted} readout, but {decision_endpoint(workshop)} serves {served} "
            "(the adapter applies a file to answers of its own readout only): nothing is packaged, and the "
            f"update below rolls the endpoint to notebook 01's package again (fit one for {served} with "
            "notebook 06's calibration cell or `python -m workshop_lib calibrate`, or pass this file as "
            "calibration= to package it anyway)"
        )
    packaged = package_model(
        workshop,
        model_s3_uri=workshop.config.s3_uri("model", CALIBRATED_FOLDER) + "/",
        calibration=path,
        progress=progress,
    )
    workshop.remember(**{CALIBRATED_KEY: packaged.model_data_url})
    applies = (
        "the readout the endpoint serves"
        if fitted == served
        else f"it applies only to requests that ask for {fitted}; the endpoint serves {served}"
    )
    return Text(f"packaged with {path.name}, fitted for the {fitted} readout ({applies}): {packaged.model_data_url}")

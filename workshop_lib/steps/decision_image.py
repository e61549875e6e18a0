"""Notebook 03: the decision image built from the pinned DLC (CodeBuild -> ECR by immutable digest;
locally the same flow, with a stand-in image pushed to the emulator in place of the docker build), and
the deploy code refusing that image named by a tag. The DLC itself is resolved in ``recorded``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..aws import build_projects, codebuild, hygiene, images
from ..aws.deploy_spec import DeploySpec, plan_for
from ..deploy_paths import DEFAULT_DECISION, deploy_path, for_image
from .context import Shown, Text, Workshop, on_path, require_bucket, require_codebuild_role, shows_requests
from .recorded import decision_image, resolved_dlc


def _image_tag_of(ref: images.ImageRef, ecr: Any) -> str | None:
    details = ecr.describe_images(
        repositoryName=ref.repository,
        imageIds=[{"imageDigest": ref.digest}],
        **({"registryId": ref.account} if ref.account else {}),
    )["imageDetails"]
    tags = details[0].get("imageTags") or [] if details else []
    return tags[0] if tags else None


@dataclass(repr=False)
class ImageResult(Shown):
    variant: str
    image_uri: str | None
    base_image: str | None
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:  # built and pinned, or skipped on purpose (another deploy path)
        return self.image_uri is None or "@sha256:" in self.image_uri

    def lines(self) -> list[str]:
        if not self.image_uri:
            return self.notes
        return [
            f"decision image ({self.variant}): {self.image_uri}",
            f"  FROM {self.base_image}",
            f"  in {self.seconds:.1f} s",
            *self.notes,
        ]


@shows_requests
def build_decision_image(
    workshop: Workshop,
    variant: str = "cpu",
    *,
    base_image: str | None = None,
    image_tag: str | None = None,
    progress: bool = True,
) -> ImageResult:
    """CodeBuild builds container/Dockerfile (cpu) or Dockerfile.gpu FROM the pinned DLC (or ``base_image``,
    pinned by digest); returns the digest. ``image_tag`` None: ``codebuild.build_decision_image``'s default."""
    config = workshop.config
    path = for_image(variant)
    if not on_path(config, path.name):
        return ImageResult(
            variant,
            None,
            None,
            0.0,
            [f"skipped the {variant} image: the deploy path is {config.deploy_path!r} (notebook 00)"],
        )
    started = time.perf_counter()
    c = workshop.clients
    require_bucket(workshop)
    require_codebuild_role(workshop)
    base = images.parse_image_uri(base_image) if base_image else resolved_dlc(workshop, path.dlc_variant)
    kept = hygiene.keep_logs(c.logs, f"/aws/codebuild/{build_projects.IMAGE_BUILD_PROJECT}")
    assert path.dockerfile is not None  # every path with an image names its Dockerfile
    tag: dict[str, Any] = {"image_tag": image_tag} if image_tag else {}
    pinned = codebuild.build_decision_image(
        c.codebuild,
        c.ecr,
        c.s3,
        c.logs,
        base_image=base,
        region=config.region,
        service_role_arn=config.codebuild_role_arn,
        source_bucket=config.bucket,
        dockerfile=path.dockerfile,
        repository_name=config.ecr_repository,
        source_prefix=f"{config.prefix}/{build_projects.SOURCE_PREFIX}",
        progress=progress,
        runner=c.builds,
        **tag,
    )
    workshop.remember(**{f"decision_image_{variant}": pinned.uri})
    limits = c.builds.not_exercised(build_projects.IMAGE_BUILD_PROJECT)
    return ImageResult(
        variant, pinned.uri, base.uri, time.perf_counter() - started, [note for note in (limits, kept) if note]
    )


def refuse_mutable_tag(workshop: Workshop, variant: str | None = None) -> Text:
    """Show the deploy code refusing the same image named by its tag instead of its digest."""
    config = workshop.config
    chosen = deploy_path(config.deploy_path)
    if config.mode == "aws" and chosen.image_variant is None:
        return Text(f"skipped: the {chosen.name} path builds no image (notebook 00)")
    path = for_image(variant) if variant else chosen if chosen.image_variant else DEFAULT_DECISION
    assert path.image_variant is not None  # for_image's, the chosen one's (checked above) or the default's
    pinned = images.parse_image_uri(decision_image(workshop, path.image_variant))
    tagged = pinned.tagged(_image_tag_of(pinned, workshop.clients.ecr) or "latest")
    try:
        plan_for(
            DeploySpec(path.name),
            name=config.endpoint_name(path),
            role_arn=config.sagemaker_role_arn,
            region=config.region,
            image=tagged,
            model_data_url=config.model_data_url,
        )
    except images.MutableImageReference as exc:
        return Text(f"refused {tagged}:\n  {exc}")
    raise AssertionError(f"{tagged} was accepted; the deploy code must refuse tags")  # never expected

"""Notebooks 02 and 03: the pinned DLC for the region, and the decision image built from it
(CodeBuild -> ECR by immutable digest; locally the same flow, with a stand-in image pushed to the
emulator in place of the docker build).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..aws import codebuild, endpoints, hygiene, images
from .context import Text, Workshop, _Shown, _on_path, require_bucket, require_codebuild_role, shows_requests


def resolve_dlc(workshop: Workshop, variant: str = "cpu", *, follow_tag: bool = False) -> str:
    """The llama.cpp DLC for the config's region: the digest pinned with its matching bindings
    (``images.dlc_pin``), checked to be in the region's registry; ``follow_tag`` (or notebook 02's choice,
    ``check_dlc_pins``) takes the floating tag."""
    return _resolved_dlc(workshop, variant, follow_tag=follow_tag).uri


def _resolved_dlc(workshop: Workshop, variant: str, *, follow_tag: bool = False) -> images.ImageRef:
    config = workshop.config
    c = workshop.clients
    follow_tag = follow_tag or workshop.outputs().get("follow_dlc_tag") is True
    pinned = images.resolve_dlc(c.ecr, config.region, variant, follow_tag=follow_tag)
    workshop.remember(**{f"dlc_{variant}": pinned.uri})
    pin = images.dlc_pin(variant, config.region)
    note = " (a stand-in manifest in the emulated registry)" if c.local else ""
    how = f"following {images.SAGEMAKER_TAGS[variant]}" if follow_tag else f"pinned with bindings {pin.bindings}"
    print(f"{images.dlc_image_uri(config.region, variant)} ({how})\n  -> {pinned}{note}")
    return pinned


def _image_tag_of(ref: images.ImageRef, ecr) -> str | None:
    details = ecr.describe_images(repositoryName=ref.repository, imageIds=[{"imageDigest": ref.digest}],
                                  **({"registryId": ref.account} if ref.account else {}))["imageDetails"]
    tags = details[0].get("imageTags") or [] if details else []
    return tags[0] if tags else None


@dataclass(repr=False)
class ImageResult(_Shown):
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
        return [f"decision image ({self.variant}): {self.image_uri}", f"  FROM {self.base_image}",
                f"  in {self.seconds:.1f} s", *self.notes]


@shows_requests
def build_decision_image(workshop: Workshop, variant: str = "cpu", *, base_image: str | None = None,
                         image_tag: str | None = None, progress: bool = True) -> ImageResult:
    """CodeBuild builds container/Dockerfile (cpu) or Dockerfile.gpu FROM the pinned DLC (or ``base_image``,
    pinned by digest); returns the digest. ``image_tag`` None: ``codebuild.build_decision_image``'s default."""
    config = workshop.config
    kind = {"cpu": "decision-cpu", "gpu": "decision-gpu"}[variant]
    if not _on_path(config, kind):
        return ImageResult(variant, None, None, 0.0, [f"skipped the {variant} image: the deploy path is "
                                                      f"{config.deploy_path!r} (notebook 00)"])
    started = time.perf_counter()
    c = workshop.clients
    require_bucket(workshop)
    require_codebuild_role(workshop)
    base = (images.parse_image_uri(base_image) if base_image
            else _resolved_dlc(workshop, "cuda" if variant == "gpu" else "cpu"))
    kept = hygiene.keep_logs(c.logs, f"/aws/codebuild/{codebuild.IMAGE_BUILD_PROJECT}")
    pinned = codebuild.build_decision_image(
        c.codebuild, c.ecr, c.s3, c.logs, base_image=base, region=config.region,
        service_role_arn=config.codebuild_role_arn,
        source_bucket=config.bucket, dockerfile="Dockerfile.gpu" if variant == "gpu" else "Dockerfile",
        repository_name=config.ecr_repository, source_prefix=f"{config.prefix}/{codebuild.SOURCE_PREFIX}",
        progress=progress, runner=c.builds, **({"image_tag": image_tag} if image_tag else {}))
    workshop.remember(**{f"decision_image_{variant}": pinned.uri})
    limits = c.builds.not_exercised(codebuild.IMAGE_BUILD_PROJECT)
    return ImageResult(variant, pinned.uri, base.uri, time.perf_counter() - started,
                       [note for note in (limits, kept) if note])


def decision_image(workshop: Workshop, variant: str = "cpu") -> str:
    """The pinned decision image notebook 03 built, checked to be in ECR still (``Workshop.recall``)."""
    return workshop.recall(f"decision_image_{variant}", "03_build_decision_image", check=True)


def refuse_mutable_tag(workshop: Workshop, variant: str | None = None) -> Text:
    """Show the deploy code refusing the same image named by its tag instead of its digest."""
    config = workshop.config
    if config.mode == "aws" and config.deploy_path == "standard":
        return Text("skipped: the standard path builds no image (notebook 00)")
    variant = variant or ("gpu" if config.deploy_path == "decision-gpu" else "cpu")
    pinned = images.parse_image_uri(decision_image(workshop, variant))
    tagged = pinned.tagged(_image_tag_of(pinned, workshop.clients.ecr) or "latest")
    try:
        endpoints.decision_cpu_plan(config.cpu_endpoint_name, image=tagged, role_arn=config.sagemaker_role_arn,
                                    model_data_url=config.model_data_url)
    except images.MutableImageReference as exc:
        return Text(f"refused {tagged}:\n  {exc}")
    raise AssertionError(f"{tagged} was accepted; the deploy code must refuse tags")  # never expected

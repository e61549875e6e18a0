"""Container image references: the llama.cpp DLC per region, and pinning by digest.

AWS publishes only floating ``-v1`` tags for the llama.cpp DLC, so a tag can
point at a different image tomorrow. Every deploy function calls
``require_pinned`` and refuses anything but ``repo@sha256:...``.

An image reference is parsed once, where it enters (``parse_image_uri``, ``pinned_image``), into an
``ImageRef``; the builders and flows take that value and write its ``uri`` into their requests.

The decision image loads the DLC's own libllama through llama-cpp-python's ctypes
bindings, which must match it field for field. ``DLC_PINS`` holds, per variant, a
DLC digest together with the bindings known to match it; ``resolve_dlc`` returns
that digest in the region's registry. The pins are looked up per region
(``dlc_pin(variant, region)``: ``REGIONAL_DLC_PINS`` over ``DLC_PINS``), since a region's
registry may hold another build than the one the sample pinned. Where the region's registry
lacks the pinned digest, following the floating tag instead is an explicit opt-in
(``follow_tag=True``; notebook 02 asks, "no" unless told) that warns: the decision image's
build-time bindings proof (``decision_adapter.bindings``, run by the image build) then decides
whether the pair works, and stops the build when it does not.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import ClientError

from .. import name_rules
from ..errors import InvalidInput
from . import calls

DEFAULT_DLC_ACCOUNT = "763104351884"
# Regions whose DLC registry is not the default account (AWS DLC "available images" list; its region table,
# aws/deep-learning-containers docs/reference/region_availability.md, read 2026-12-06).
DLC_ACCOUNTS = {
    "af-south-1": "626614931356",
    "ap-east-1": "871362719292",
    "ap-east-2": "975050140332",
    "ap-south-2": "772153158452",
    "ap-southeast-3": "907027046896",
    "ap-southeast-4": "457447274322",
    "ap-southeast-5": "550225433462",
    "ap-southeast-6": "633930458069",
    "ap-southeast-7": "590183813437",
    "ap-northeast-3": "364406365360",
    "ca-west-1": "204538143572",
    "eu-south-1": "692866216735",
    "eu-south-2": "503227376785",
    "eu-central-2": "380420809688",
    "il-central-1": "780543022126",
    "mx-central-1": "637423239942",
    "me-south-1": "217643126080",
    "me-central-1": "914824155844",
    "me-west-1": "124382933778",
    "cn-north-1": "727897471807",
    "cn-northwest-1": "727897471807",
}
# That table lists no GovCloud (or other isolated) region: the DLCs published there (the SageMaker Python SDK
# knows registries 442386744353 and 446045086412 for other frameworks) do not include the llama.cpp image.
DLC_UNPUBLISHED = ("us-gov-", "us-iso", "eu-iso")

DLC_REPOSITORY = "llama-cpp"
DLC_ARM64_REPOSITORY = "llama-cpp-arm64"
# The SageMaker variants implement /ping and /invocations; server-cpu-v1 / server-cuda-v1 are EC2 images.
SAGEMAKER_TAGS = {"cpu": "server-sagemaker-cpu-v1", "cuda": "server-sagemaker-cuda-v1"}


@dataclass(frozen=True)
class DlcPin:
    """A llama.cpp DLC image by digest, and the llama-cpp-python bindings whose structs match its libllama."""

    variant: str
    digest: str
    bindings: str  # the pip requirement the Dockerfile installs (its LLAMA_CPP_PYTHON build argument)
    drop_bindings: tuple[str, ...] = ()  # bound functions this libllama lacks (DROP_BINDINGS)
    origin: str = ""


# The pairs the published SemIf sample deploys (its Dockerfiles pin both digests on the public mirror,
# public.ecr.aws/deep-learning-containers/llama-cpp). An image keeps its digest in every registry it is
# pushed to; resolve_dlc checks that the region's registry holds it (not verifiable from here).
# llama-cpp-python 0.3.35's llama_cpp.py is byte-identical to the sample's CPU commit 8a0810fa.
DLC_PINS = {
    "cpu": DlcPin(
        "cpu",
        "sha256:1f19c220f5f169228f20cdddca00f4838be22a3a1ce9002bc444006adc3d6d43",
        "llama-cpp-python==0.3.35",
        (),
        "server-sagemaker-cpu-v1 as pinned by the published sample, with its bindings",
    ),
    "cuda": DlcPin(
        "cuda",
        "sha256:9f2eb2d9cbdc3172c2046117c4a43401bc95dbabdc3e2aeaa35daa11565c8b36",
        "llama-cpp-python @ git+https://github.com/abetlen/llama-cpp-python@ea3b56bdc386d5a6f31120338ffe907211b0907c",
        ("llama_adapter_lora_init_from_file_ptr",),
        "server-sagemaker-cuda-v1 as pinned by the published sample, with its bindings",
    ),
}


# Per region, per variant: a pin that replaces DLC_PINS there (a region whose registry holds another build
# of the -v1 tag, with the bindings proven against that build). Regions not listed use DLC_PINS; whether
# a region's registry really holds the digest is asked at run time (pinned_dlc_present), never assumed.
REGIONAL_DLC_PINS: dict[str, dict[str, DlcPin]] = {}


class MutableImageReference(InvalidInput):
    """An image named by a tag (or by nothing, which means ':latest'): the deploys want a digest.
    Notebook 03 catches it to show the refusal."""


def dlc_account(region: str) -> str:
    """The account of ``region``'s DLC registry; InvalidInput where AWS publishes no llama.cpp DLC."""
    if region.startswith(DLC_UNPUBLISHED):
        raise InvalidInput(
            f"AWS publishes no llama.cpp DLC in {region}: its list of DLC registries has no region of that "
            "partition, and both of the workshop's endpoints start from that image. Run the workshop in a "
            "commercial or China region (us-east-1, for one)"
        )
    return DLC_ACCOUNTS.get(region, DEFAULT_DLC_ACCOUNT)


def ecr_host(account: str, region: str) -> str:
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"{account}.dkr.ecr.{region}.{suffix}"


_ECR_HOST = re.compile(r"(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class ImageRef:
    """An image reference read once (``parse_image_uri``) and passed down as it is; ``uri`` writes it back."""

    registry: str  # host, e.g. 763104351884.dkr.ecr.us-east-1.amazonaws.com
    repository: str
    tag: str | None = None
    digest: str | None = None  # "sha256:<64 hex>"
    account: str | None = None  # set for private ECR registries
    region: str | None = None

    @classmethod
    def in_ecr(
        cls, account: str, region: str, repository: str, *, tag: str | None = None, digest: str | None = None
    ) -> ImageRef:
        return cls(ecr_host(account, region), repository, tag, digest, account, region)

    @property
    def pinned(self) -> bool:
        return self.digest is not None

    @property
    def is_private_ecr(self) -> bool:
        return self.account is not None

    @property
    def uri(self) -> str:
        uri = f"{self.registry}/{self.repository}"
        if self.tag:
            uri += f":{self.tag}"
        if self.digest:
            uri += f"@{self.digest}"
        return uri

    @property
    def repository_uri(self) -> str:
        return f"{self.registry}/{self.repository}"

    def at(self, digest: str) -> ImageRef:
        """The same repository pinned to ``digest``, without a tag."""
        return replace(self, tag=None, digest=digest)

    def tagged(self, tag: str) -> ImageRef:
        """The same repository named by ``tag`` (no digest): what a mutable reference looks like."""
        return replace(self, tag=tag, digest=None)

    def __str__(self) -> str:
        return self.uri


def parse_image_uri(image_uri: str) -> ImageRef:
    """Split ``host/repo[:tag][@sha256:...]``; raise InvalidImageUri for anything else.

    This is where an image reference enters (a setting, a command-line flag, a recorded output, a
    request); everything past it takes the ``ImageRef``.
    """
    uri = (image_uri or "").strip() if isinstance(image_uri, str) else ""
    if "/" not in uri or uri != image_uri or any(c.isspace() for c in uri):
        raise InvalidInput(
            f"image URI {image_uri!r} is not a registry reference like "
            f"'<account>.dkr.ecr.<region>.amazonaws.com/<repository>@sha256:<digest>'"
        )
    registry, rest = uri.split("/", 1)
    digest = None
    if "@" in rest:
        rest, digest = rest.split("@", 1)
        if not _DIGEST.fullmatch(digest):
            raise InvalidInput(f"image URI {image_uri!r}: digest {digest!r} is not 'sha256:' + 64 hex digits")
    tag = None
    if ":" in rest:
        rest, tag = rest.rsplit(":", 1)
        if not name_rules.is_image_tag(tag):
            raise InvalidInput(f"image URI {image_uri!r}: tag {tag!r} is not a valid image tag")
    if not name_rules.IMAGE_REPOSITORY.fullmatch(rest):
        raise InvalidInput(f"image URI {image_uri!r}: repository {rest!r} is not a valid repository name")
    host = _ECR_HOST.fullmatch(registry)
    return ImageRef(
        registry=registry,
        repository=rest,
        tag=tag,
        digest=digest,
        account=host["account"] if host else None,
        region=host["region"] if host else None,
    )


def dlc_image(region: str, variant: str = "cpu", arm64: bool = False) -> ImageRef:
    """The SageMaker llama.cpp DLC for ``region`` by tag (mutable: pass it to resolve_digest)."""
    if variant not in SAGEMAKER_TAGS:
        raise InvalidInput(f"variant {variant!r} is not one of {', '.join(SAGEMAKER_TAGS)}")
    if arm64 and variant != "cpu":
        raise InvalidInput("the llama.cpp DLC for Graviton (arm64) is CPU only; use variant='cpu' or arm64=False")
    repository = DLC_ARM64_REPOSITORY if arm64 else DLC_REPOSITORY
    return ImageRef.in_ecr(dlc_account(region), region, repository, tag=SAGEMAKER_TAGS[variant])


def dlc_image_uri(region: str, variant: str = "cpu", arm64: bool = False) -> str:
    """``dlc_image``'s URI, as the docs and messages show it."""
    return dlc_image(region, variant, arm64).uri


def _describe_command(ref: ImageRef) -> str:
    return (
        f"aws ecr describe-images --region {ref.region or '<region>'} --registry-id {ref.account or '<account>'} "
        f"--repository-name {ref.repository} --image-ids imageTag={ref.tag or '<tag>'} "
        f"--query 'imageDetails[0].imageDigest' --output text"
    )


def require_pinned(image: ImageRef) -> ImageRef:
    """Return ``image`` if it names a digest; otherwise raise MutableImageReference."""
    if image.pinned:
        return image
    what = f"tag {image.tag!r}" if image.tag else "no tag or digest (that means ':latest')"
    raise MutableImageReference(
        f"image {image.uri!r} is referenced by {what}, which can move to another image later. "
        f"Pin it by digest: workshop_lib.aws.images.resolve_digest(ecr_client, {image.uri!r}), or run "
        f"`{_describe_command(image)}` and deploy {image.repository_uri}@<that digest>."
    )


def pinned_image(image_uri: str) -> ImageRef:
    """Parse ``image_uri`` and require a digest: the edge for an image a deploy is given."""
    return require_pinned(parse_image_uri(image_uri))


def check_deployable(image: ImageRef, region: str) -> ImageRef:
    """require_pinned, plus what SageMaker needs: a private ECR registry in the endpoint's region."""
    require_pinned(image)
    if not image.is_private_ecr:
        raise InvalidInput(
            f"image {image.uri!r} is not in a private ECR registry; SageMaker endpoints pull from ECR in "
            f"their own region (for the DLC use {dlc_image_uri(region)!r}, then resolve_digest)"
        )
    if image.region != region:
        raise InvalidInput(
            f"image {image.uri!r} is in {image.region} but the endpoint region is {region}; use the image from "
            f"{region} (the DLC registry is {ecr_host(dlc_account(region), region)}) or push your image there"
        )
    return image


def resolve_digest(ecr_client: Any, image: ImageRef) -> ImageRef:
    """Ask ECR which digest a tag points at now; return the image pinned to it (without its tag).

    An already pinned reference comes back pinned, without any tag, and ECR is not asked.
    """
    if image.digest is not None:
        return image.at(image.digest)
    if not image.is_private_ecr:
        raise InvalidInput(f"image {image.uri!r} is not in a private ECR registry; resolve_digest needs one")
    if (
        image.repository in (DLC_REPOSITORY, DLC_ARM64_REPOSITORY)
        and image.tag
        and not image.tag.startswith("server-sagemaker-")
    ):
        raise InvalidInput(
            f"tag {image.tag!r} of the llama.cpp DLC is the EC2 image, which lacks /ping and /invocations; "
            f"use {', '.join(SAGEMAKER_TAGS.values())} (dlc_image_uri() builds the right URI)"
        )
    tag = image.tag or "latest"
    try:
        response = ecr_client.describe_images(
            registryId=image.account, repositoryName=image.repository, imageIds=[{"imageTag": tag}]
        )
        digest = response["imageDetails"][0]["imageDigest"]
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in ("ImageNotFoundException", "RepositoryNotFoundException"):
            raise InvalidInput(
                f"ECR has no image {image.repository}:{tag} in registry {image.account} ({image.region}): "
                f"{exc.response['Error'].get('Message', code)}. Check the region, repository and tag."
            ) from None
        if code != "AccessDeniedException":
            raise
        # Some registries allow pulling but not DescribeImages; BatchGetImage is part of a pull.
        response = ecr_client.batch_get_image(
            registryId=image.account, repositoryName=image.repository, imageIds=[{"imageTag": tag}]
        )
        if not response.get("images"):
            failure = (response.get("failures") or [{}])[0]
            raise InvalidInput(
                f"ECR could not return {image.repository}:{tag} from registry {image.account}: "
                f"{failure.get('failureReason', 'no image')}"
            ) from None
        digest = response["images"][0]["imageId"]["imageDigest"]
    return image.at(digest)


def dlc_pin(variant: str, region: str | None = None) -> DlcPin:
    """The pin of ``variant`` for ``region``: the region's own (REGIONAL_DLC_PINS) or the default."""
    if variant not in DLC_PINS:
        raise InvalidInput(f"variant {variant!r} is not one of {', '.join(DLC_PINS)}")
    return REGIONAL_DLC_PINS.get(region or "", {}).get(variant, DLC_PINS[variant])


def dlc_digest_table(regions: Iterable[str]) -> dict[str, dict[str, str]]:
    """Region -> variant -> pinned digest, as the deploys would use them (for a notebook or the docs)."""
    return {region: {variant: dlc_pin(variant, region).digest for variant in DLC_PINS} for region in regions}


def pinned_dlc(region: str, variant: str = "cpu") -> ImageRef:
    """The pinned DLC digest in ``region``'s DLC registry (where SageMaker and CodeBuild pull it from)."""
    return ImageRef.in_ecr(dlc_account(region), region, DLC_REPOSITORY, digest=dlc_pin(variant, region).digest)


def pinned_dlc_uri(region: str, variant: str = "cpu") -> str:
    """``pinned_dlc``'s URI (the packaging build's environment and the notebooks show it)."""
    return pinned_dlc(region, variant).uri


def pinned_dlc_present(ecr_client: Any, region: str | None = None, variant: str = "cpu") -> bool:
    """Whether the DLC registry of ``region`` (the client's when not given) holds the pinned digest
    (DescribeImages, else BatchGetImage, which pulling needs anyway). Other errors (throttling, a broken
    endpoint) are raised."""
    ref = pinned_dlc(region or calls.region_of(ecr_client), variant)
    ids = [{"imageDigest": ref.digest}]
    try:
        ecr_client.describe_images(registryId=ref.account, repositoryName=ref.repository, imageIds=ids)
        return True
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in ("ImageNotFoundException", "RepositoryNotFoundException"):
            return False
        if code != "AccessDeniedException":  # pulling may be allowed where describing is not
            raise
    found = ecr_client.batch_get_image(registryId=ref.account, repositoryName=ref.repository, imageIds=ids)
    return bool(found.get("images"))


def resolve_dlc(
    ecr_client: Any, region: str | None = None, variant: str = "cpu", *, follow_tag: bool = False
) -> ImageRef:
    """The DLC to build and deploy on: the pinned digest, checked to exist in the registry of ``region``
    (the client's when not given).

    ``follow_tag=True`` resolves the floating SageMaker tag instead, with a warning: the bindings
    pinned for the variant were proven against the pinned digest only.
    """
    region = region or calls.region_of(ecr_client)
    pin = dlc_pin(variant, region)
    if follow_tag:
        tagged = resolve_digest(ecr_client, dlc_image(region, variant))
        if tagged.digest != pin.digest:
            warnings.warn(
                f"following {SAGEMAKER_TAGS[variant]} gives {str(tagged.digest)[:19]}..., not the pinned "
                f"{pin.digest[:19]}...: the bindings {pin.bindings!r} may not match its libllama. The image build's "
                "bindings proof stops the build if they do not.",
                stacklevel=2,
            )
        return tagged
    pinned = pinned_dlc(region, variant)
    if not pinned_dlc_present(ecr_client, variant=variant):
        raise InvalidInput(
            f"the llama.cpp DLC registry of {region} ({pinned.registry}) does not hold the pinned "
            f"{variant} image {pin.digest}. Deploy in a region whose registry holds it, or follow the floating tag "
            f"(notebook 02's choice, or resolve_dlc(..., follow_tag=True)): the decision image's build-time proof "
            f"of the bindings then decides whether they match it."
        )
    return pinned

"""What one notebook records in ``outputs.json`` for a later one, and how every step reads it back:
the model package (01, and 07's calibrated one), the pinned DLC and the decision images (02, 03), and
the versions an update made (07, deleted by 08).
"""

from __future__ import annotations

from ..aws import images
from ..deploy_paths import DeployPath, deploy_path
from .context import Workshop

PACKAGE_NOTEBOOK = "01_package_model"
DLC_NOTEBOOK = "02_deploy_standard_endpoint"
IMAGE_NOTEBOOK = "03_build_decision_image"

FOLLOW_DLC_TAG = "follow_dlc_tag"  # notebook 02's choice, read wherever the DLC is resolved
CALIBRATED_KEY = "calibrated_model_data_url"  # the calibrated package ``calibrated_package`` made
UPDATE_VERSIONS = "update_versions"  # endpoint -> the versions its updates made


def model_data_url(workshop: Workshop) -> str:
    """The package notebook 01 recorded (StepNotRun naming 01 when there is none)."""
    url: str = workshop.recall("model_data_url", PACKAGE_NOTEBOOK)
    return url


def update_package(workshop: Workshop) -> tuple[str, str]:
    """(the package an update rolls to, why): the calibrated one when ``calibrated_package`` made it, else
    notebook 01's."""
    calibrated = workshop.outputs().get(CALIBRATED_KEY)
    if isinstance(calibrated, str) and calibrated.startswith("s3://"):
        return calibrated, "the calibrated package"
    return model_data_url(workshop), (
        "notebook 01's package again (no calibrated package was made: see steps.calibrated_package)"
    )


def follows_dlc_tag(workshop: Workshop) -> bool:
    """Whether notebook 02 chose to follow the DLC's floating tag (only where the pinned digest is missing)."""
    return workshop.outputs().get(FOLLOW_DLC_TAG) is True


def resolve_dlc(workshop: Workshop, variant: str = "cpu", *, follow_tag: bool = False) -> str:
    """The llama.cpp DLC for the config's region: the digest pinned with its matching bindings
    (``images.dlc_pin``), checked to be in the region's registry; ``follow_tag`` (or notebook 02's choice,
    ``check_dlc_pins``) takes the floating tag."""
    return resolved_dlc(workshop, variant, follow_tag=follow_tag).uri


def resolved_dlc(workshop: Workshop, variant: str, *, follow_tag: bool = False) -> images.ImageRef:
    """``resolve_dlc``'s image, recorded under ``dlc_<variant>`` and shown with how it was chosen."""
    config = workshop.config
    c = workshop.clients
    follow_tag = follow_tag or follows_dlc_tag(workshop)
    pinned = images.resolve_dlc(c.ecr, config.region, variant, follow_tag=follow_tag)
    workshop.remember(**{f"dlc_{variant}": pinned.uri})
    pin = images.dlc_pin(variant, config.region)
    note = " (a stand-in manifest in the emulated registry)" if c.local else ""
    how = f"following {images.SAGEMAKER_TAGS[variant]}" if follow_tag else f"pinned with bindings {pin.bindings}"
    print(f"{images.dlc_image_uri(config.region, variant)} ({how})\n  -> {pinned}{note}")
    return pinned


def decision_image(workshop: Workshop, variant: str = "cpu") -> str:
    """The pinned decision image notebook 03 built, checked to be in ECR still (``Workshop.recall``)."""
    uri: str = workshop.recall(f"decision_image_{variant}", IMAGE_NOTEBOOK, check=True)
    return uri


def recorded_image(workshop: Workshop, path: DeployPath | str) -> images.ImageRef:
    """The image the deploy of ``path`` uses when none is given, as recorded or pinned; nothing is looked up."""
    path = path if isinstance(path, DeployPath) else deploy_path(path)
    if path.image_variant is None:  # the DLC itself
        if follows_dlc_tag(workshop):  # the floating tag's digest is known once notebook 02 resolved it
            return images.parse_image_uri(workshop.recall(f"dlc_{path.dlc_variant}", DLC_NOTEBOOK))
        return images.pinned_dlc(workshop.config.region, path.dlc_variant)
    return images.parse_image_uri(workshop.recall(f"decision_image_{path.image_variant}", IMAGE_NOTEBOOK))


def given_image(workshop: Workshop, image_uri: str | None, path: DeployPath | str) -> images.ImageRef:
    """The image a caller named (read here, once), else the one recorded for ``path``."""
    return images.parse_image_uri(image_uri) if image_uri else recorded_image(workshop, path)


def resolved_image(workshop: Workshop, path: DeployPath) -> str:
    """The image the deploy of ``path`` sends when none is given, checked against the registry (and the DLC's
    choice recorded and shown, as notebook 02 shows it)."""
    if path.image_variant is None:
        return resolve_dlc(workshop, path.dlc_variant, follow_tag=follows_dlc_tag(workshop))
    return decision_image(workshop, path.image_variant)

"""Notebooks 02 and 04: endpoints for the standard DLC and for the decision image on CPU and on an
ordered GPU instance pool (a fixed GPU type where the region offers no pools), where each one was
placed, and each endpoint's deadline: the spend guard deletes it after ``endpoint_ttl_hours`` unless
extended (``extend_deadline``, ``workshop extend``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from botocore.exceptions import ClientError

from .. import name_rules
from ..aws import capture, encryption, endpoints, hosting, hygiene, images, model_requests, spend_guard, teardown
from ..aws.component_hosting import hosts_components
from ..aws.deploy_spec import DeploySpec, plan_for
from ..aws.inference_components import component_name
from ..config import ENV_VARS, check_ttl_hours
from ..deploy_paths import DECISION_CPU, DECISION_GPU, DEPLOY_PATHS, STANDARD
from ..errors import InvalidInput, StepError
from .context import (
    Shown,
    Text,
    Workshop,
    decision_endpoint,
    endpoint_missing,
    on_path,
    short,
    shows_requests,
)
from .deadlines import give_deadline
from .recorded import FOLLOW_DLC_TAG, recorded_image, resolved_image
from .recorded import model_data_url as recorded_model


def llama_settings(environment: Mapping[str, str]) -> list[str]:
    """What each SM_LLAMA_CPP_* variable becomes: the DLC's llama-server flag (the adapter reads the same)."""
    out = []
    for key, value in sorted(environment.items()):
        if not key.startswith(model_requests.LLAMA_PREFIX):
            out.append(f"{key}={value}  (adapter setting)")
            continue
        name = key[len(model_requests.LLAMA_PREFIX) :]
        flag = "--" + name.lower().replace("_", "-")
        if name == "PORT":
            became = "not passed on (nginx listens on 8080)"
        elif value.lower() == "false":
            became = "dropped"
        elif value.lower() in ("true", ""):
            became = flag
        else:
            became = f"{flag} {value}"
        out.append(f"{key}={value}  ->  llama-server {became}")
    return out


@dataclass(repr=False)
class EndpointResult(Shown):
    name: str
    plan: endpoints.DeployPlan | None
    status: str
    where: str
    seconds: float = 0.0
    url: str | None = None
    notes: list[str] = field(default_factory=list)
    deadline: str = ""  # the spend guard's line: when the endpoint is deleted, or why it has no deadline

    @property
    def ok(self) -> bool:  # serving (locally: by a local adapter), or skipped on purpose
        if self.plan is None:
            return self.status == "skipped"
        return self.status == "InService" and (self.where == "SageMaker" or bool(self.url))

    def lines(self) -> list[str]:
        if self.plan is None:
            return self.notes
        return [
            f"endpoint {self.name}: {self.status} after {self.seconds:.1f} s ({self.where})",
            f"  image {short(self.plan.image_uri)}",
            f"  instances: {self.plan.placement}",
            *("  note: " + n for n in self.plan.notes),
            *("  " + s for s in llama_settings(self.plan.model["PrimaryContainer"].get("Environment", {}))),
            *([self.deadline] if self.deadline else []),
            *self.notes,
        ]


def _deploy(workshop: Workshop, plan: endpoints.DeployPlan, *, progress: bool, wait: bool = True) -> EndpointResult:
    started = time.perf_counter()
    c = workshop.clients
    hours = workshop.config.ttl_hours  # a bad endpoint_ttl_hours is refused here, before anything is created
    deadline: list[str] = []
    kept = hygiene.keep_logs(c.logs, hosting.log_group(plan.name))  # before SageMaker makes it without a retention
    described = hosting.deploy(
        c.sm,
        plan,
        region=workshop.config.region,
        wait=wait,
        logs_client=c.logs,
        s3_client=c.s3,
        progress=progress,
        hosting=c.hosting,
        after_create=lambda name: deadline.append(give_deadline(workshop, name, hours)),
    )
    url, notes = c.hosting.served(plan.name)
    where = "SageMaker" if url is None else "emulator + local server"
    return EndpointResult(
        plan.name,
        plan,
        described["EndpointStatus"],
        where,
        time.perf_counter() - started,
        url,
        [*notes, *([kept] if kept else [])],
        "\n".join(deadline),
    )


def _error(exc: ClientError) -> tuple[str, str]:
    error = exc.response.get("Error", {})
    return str(error.get("Code", "")), str(error.get("Message", ""))


def _workshop_endpoint(workshop: Workshop, name: str) -> None:
    """Raise StepError unless endpoint ``name`` exists and carries the workshop's tag."""
    sm = workshop.clients.sm
    try:
        arn = sm.describe_endpoint(EndpointName=name)["EndpointArn"]
    except ClientError as exc:
        if endpoint_missing(exc):
            raise StepError(f"there is no endpoint {name}: deploy it first (notebook 02 or 04)") from None
        raise
    if not teardown.is_workshop_tagged(teardown.sagemaker_tags(sm, arn)):
        raise StepError(
            f"endpoint {name} does not carry the workshop's tag: it is not the workshop's, and the "
            "workshop gives it no deadline"
        )


def set_endpoint_ttl(workshop: Workshop, hours: float | str) -> Text:
    """Save how long every endpoint the workshop creates lives before its deadline deletes it (notebook 00):
    ``hours`` (0.25 to 168) after it was created, or 0 for no deadline. ``extend_deadline`` moves one."""
    value = check_ttl_hours(hours)
    path = workshop.save(workshop.config.replace(endpoint_ttl_hours=f"{value:g}"))
    if value == 0:
        return Text(f"no deadline: the endpoints bill until notebook 08 deletes them (saved in {path})")
    return Text(
        f"each endpoint the workshop creates is deleted {value:g} h after it was created, unless extended "
        f"(python -m workshop_lib extend --name <endpoint> --hours N); saved in {path}"
    )


def set_capture_percent(workshop: Workshop, percent: int | str) -> Text:
    """Save the share of each decision endpoint's invocations SageMaker's data capture records (notebook 04):
    0 to 100, 0 for none. The decision endpoints deployed after this carry it (``DataCaptureConfig``)."""
    value = capture.check_percent(percent)
    path = workshop.save(workshop.config.replace(capture_percent=str(value)))
    if value == 0:
        return Text(f"no data capture: decision endpoints record no requests or answers (saved in {path})")
    return Text(
        f"decision endpoints record {value} % of their invocations, request and answer, under "
        f"{capture.destination_uri(workshop.config)} (saved in {path})"
    )


@shows_requests
def extend_deadline(workshop: Workshop, name: str | None = None, hours: float | None = None) -> Text:
    """Move endpoint ``name``'s deadline (default: the deploy path's endpoint) to ``hours`` from now (default:
    the config's endpoint_ttl_hours); made again if it had gone. ``workshop extend --name X --hours N``."""
    config = workshop.config
    name = name or config.endpoint_name()
    hours = config.ttl_hours if hours is None else check_ttl_hours(hours)
    if hours == 0:
        raise StepError(
            "0 hours is no deadline; to keep the endpoint without one, delete its schedule "
            f"{spend_guard.schedule_name(name)} (steps.delete_endpoint deletes both when you are done)"
        )
    _workshop_endpoint(workshop, name)
    component = component_name(name) if hosts_components(workshop.clients.sm, name) else ""
    line = give_deadline(workshop, name, hours, component=component)
    return Text(line.strip(), problem="" if "NOT SET" not in line else f"the deadline of {name} was not moved")


@shows_requests
def deadline_text(workshop: Workshop, name: str | None = None) -> Text:
    """When endpoint ``name`` (default: the decision endpoint notebook 05 calls) is deleted by its deadline, one
    line per schedule: for an endpoint that hosts the workshop's inference component (scale to zero), when the
    component goes, then when the endpoint does. Read-only."""
    name = name or decision_endpoint(workshop)
    lines = []
    for component in spend_guard.deadline_parts(name):
        try:
            found = spend_guard.read_deadline(workshop.clients.get("scheduler"), name, component)
        except ClientError as exc:
            return Text("endpoint {}: its deadline could not be read ({}: {})".format(name, *_error(exc)))
        except spend_guard.NotTheWorkshops as exc:
            lines.append(str(exc))
            continue
        if found is not None:
            lines.append(found.text())
        elif not component:
            lines.append(_no_deadline(workshop, name))
        elif hosts_components(workshop.clients.sm, name):
            lines.append(
                f"inference component {component} (on endpoint {name}) has no deadline, and while it stays SageMaker "
                f"refuses the endpoint's deletion at its deadline; set both with python -m workshop_lib extend --name "
                f"{name} --hours N"
            )
    return Text("\n".join(lines))


def _no_deadline(workshop: Workshop, name: str) -> str:
    try:
        workshop.clients.sm.describe_endpoint(EndpointName=name)
    except ClientError as exc:
        if endpoint_missing(exc):
            return f"endpoint {name} is not deployed, so it has no deadline (and bills nothing)"
        raise
    return (
        f"endpoint {name} has no deadline: it bills until it is deleted (notebook 08); set one with "
        f"python -m workshop_lib extend --name {name} --hours N"
    )


@shows_requests
def check_dlc_pins(workshop: Workshop, follow_tag: bool = False) -> Text:
    """Whether the region's DLC registry holds the pinned digests the deploy path needs (images.dlc_pin).

    Where one is missing, ``follow_tag`` True records the choice to follow the floating SageMaker tag
    instead (notebook 02's box, "no" unless told; notebook 03 and the standard deploy read it): the decision
    image's build-time proof of the bindings (the image build loads a model through the DLC's libllama)
    then decides whether they match that build, and stops the build if they do not. Where every pin is
    present the choice changes nothing and is not recorded.
    """
    config = workshop.config
    # the standard endpoint's DLC always, and the one each decision path on the way builds FROM
    variants = list(dict.fromkeys(p.dlc_variant for p in DEPLOY_PATHS if p is STANDARD or on_path(config, p.name)))
    ecr = workshop.clients.ecr
    missing = [v for v in variants if not images.pinned_dlc_present(ecr, config.region, v)]
    workshop.remember(**{FOLLOW_DLC_TAG: bool(missing and follow_tag)})
    lines = [
        f"{v}: {short(images.pinned_dlc_uri(config.region, v))} "
        f"{'MISSING from' if v in missing else 'present in'} the {config.region} DLC registry"
        for v in variants
    ]
    if not missing:
        return Text("\n".join(lines + ["the pinned digests are used (following the tag is not needed here)"]))
    tags = ", ".join(images.SAGEMAKER_TAGS[v] for v in missing)
    if follow_tag:
        return Text(
            "\n".join(
                lines
                + [
                    f"following {tags} instead, as chosen: the bindings pinned for the missing digest may not match that "
                    "build; notebook 03's image build proves them against it (it loads a model through the DLC's libllama "
                    "and scores a decision) and stops if they do not"
                ]
            )
        )
    return Text(
        "\n".join(
            lines
            + [
                f"choose 'yes' above to follow {tags} (guarded by notebook 03's build-time "
                "proof), or deploy in a region whose registry holds the pinned digests"
            ]
        ),
        problem=f"the pinned DLC digests are not in {config.region}'s registry",
    )


def deploy_plan(workshop: Workshop, spec: DeploySpec) -> endpoints.DeployPlan:
    """The requests the deploy of ``spec`` sends, built and validated; it sends, prints and writes nothing.

    The endpoint name and execution role are the config's; the image is ``spec.image_uri``, else the pinned
    DLC for ``standard`` (the digest notebook 02 recorded when it chose to follow the tag), else the decision
    image notebook 03 recorded; the model is ``spec.model_data_url``, else the one notebook 01 recorded.
    """
    config = workshop.config
    # The image first: a mutable tag is refused before anything else is asked for.
    image = images.pinned_image(spec.image_uri) if spec.image_uri else recorded_image(workshop, spec.row)
    config.require("sagemaker_role_arn")
    notes = []
    model_data_url = spec.model_data_url or recorded_model(workshop)
    if config.bucket:
        # SageMaker's role reads, and the CodeBuild role writes, only the workshop's model folder.
        model_data_url = config.check_model_uri(model_data_url, "model data URL")
        data_capture = capture.data_capture_config(capture.destination_uri(config), config.capture_percent)
    else:
        # The sample's flags alone (no workshop bucket): the model URL is the caller's, and nothing to capture to.
        if not (name_rules.split_s3_uri(model_data_url) or ("", ""))[1]:
            raise InvalidInput(f"model data URL {model_data_url!r} is not s3://<bucket>/<key> (the model.tar.gz)")
        data_capture = None
        if spec.row.decision and config.capture_percent:
            notes.append(
                f"data capture off: no workshop bucket is known to capture to (pass --bucket, or set "
                f"{ENV_VARS['bucket']}, to capture {config.capture_percent} % of requests)"
            )
    plan = plan_for(
        spec,
        name=config.endpoint_name(spec.path),
        role_arn=config.sagemaker_role_arn,
        region=config.region,
        image=image,
        model_data_url=model_data_url,
        data_capture=data_capture,
    )
    if config.kms_key_arn:
        plan = encryption.encrypted_plan(plan, config.kms_key_arn)
    return dataclasses.replace(plan, notes=(*plan.notes, *notes)) if notes else plan


@shows_requests
def deploy_endpoint(
    workshop: Workshop, spec: DeploySpec, *, wait: bool = True, progress: bool = True
) -> EndpointResult:
    """Deploy ``spec``: the image resolved (and checked to exist), the plan built (``deploy_plan``), sent,
    and waited for unless ``wait`` is False. A decision path other than the config's is skipped on AWS."""
    config = workshop.config
    if spec.row.decision and not on_path(config, spec.path):
        return EndpointResult(
            config.endpoint_name(spec.path),
            None,
            "skipped",
            "",
            notes=[f"skipped the {spec.row.label} endpoint: the deploy path is {config.deploy_path!r} (notebook 00)"],
        )
    model_data_url = spec.model_data_url or recorded_model(workshop)
    image_uri = spec.image_uri or resolved_image(workshop, spec.row)
    workshop.check_recorded("model_data_url", model_data_url, "01_package_model")  # gone after 07 or a reset?
    plan = deploy_plan(workshop, spec.with_sources(image_uri=image_uri, model_data_url=model_data_url))
    return _deploy(workshop, plan, progress=progress, wait=wait)


@shows_requests
def deploy_standard(
    workshop: Workshop,
    image_uri: str | None = None,
    *,
    instance_type: str | None = None,
    threads: int | None = None,
    ctx_size: int | None = None,
    startup_timeout_s: int | None = None,
    download_timeout_s: int | None = None,
    model_data_url: str | None = None,
    wait: bool = True,
    progress: bool = True,
) -> EndpointResult:
    """The published DLC (pinned by digest) serving the packaged model: OpenAI chat on /invocations.

    Locally llama-server behind nginx stands in for the DLC, started by its entrypoint's rules. Settings
    left at None take ``endpoints.standard_plan``'s defaults; ``wait`` False returns once SageMaker is
    creating the endpoint.
    """
    spec = DeploySpec(
        STANDARD.name,
        image_uri,
        model_data_url,
        instance_type=instance_type,
        threads=threads,
        ctx_size=ctx_size,
        startup_timeout_s=startup_timeout_s,
        download_timeout_s=download_timeout_s,
    )
    return deploy_endpoint(workshop, spec, wait=wait, progress=progress)


@shows_requests
def deploy_decision_cpu(
    workshop: Workshop,
    image_uri: str | None = None,
    *,
    instance_type: str | None = None,
    threads: int | None = None,
    ctx_size: int | None = None,
    startup_timeout_s: int | None = None,
    download_timeout_s: int | None = None,
    model_data_url: str | None = None,
    wait: bool = True,
    progress: bool = True,
) -> EndpointResult:
    """The decision image on a fixed CPU instance; llama.cpp threads = the instance's vCPUs by default
    (the settings left at None take ``endpoints.decision_cpu_plan``'s defaults)."""
    spec = DeploySpec(
        DECISION_CPU.name,
        image_uri,
        model_data_url,
        instance_type=instance_type,
        threads=threads,
        ctx_size=ctx_size,
        startup_timeout_s=startup_timeout_s,
        download_timeout_s=download_timeout_s,
    )
    return deploy_endpoint(workshop, spec, wait=wait, progress=progress)


@shows_requests
def deploy_decision_gpu(
    workshop: Workshop,
    image_uri: str | None = None,
    *,
    pools: Sequence[str] | None = None,
    n_gpu_layers: int | None = None,
    provision_timeout_s: int | None = None,
    threads: int | None = None,
    ctx_size: int | None = None,
    startup_timeout_s: int | None = None,
    download_timeout_s: int | None = None,
    model_data_url: str | None = None,
    wait: bool = True,
    progress: bool = True,
) -> EndpointResult:
    """The decision image on ordered GPU instance pools (first = first choice; default
    ``endpoints.DEFAULT_GPU_POOLS``) with every layer offloaded unless ``n_gpu_layers`` says otherwise
    (settings left at None: ``endpoints.decision_gpu_plan``'s defaults)."""
    spec = DeploySpec.of(
        DECISION_GPU.name,
        image_uri=image_uri,
        model_data_url=model_data_url,
        pools=pools,
        n_gpu_layers=n_gpu_layers,
        provision_timeout_s=provision_timeout_s,
        threads=threads,
        ctx_size=ctx_size,
        startup_timeout_s=startup_timeout_s,
        download_timeout_s=download_timeout_s,
    )
    return deploy_endpoint(workshop, spec, wait=wait, progress=progress)


@dataclass(repr=False)
class Placement(Shown):
    name: str
    placed: dict[str, int]
    offload: hosting.OffloadLine | None
    notes: list[str] = field(default_factory=list)

    @property
    def offloaded(self) -> str | None:
        """ "N/M layers" from llama.cpp's offload line."""
        return f"{self.offload.offloaded}/{self.offload.total} layers" if self.offload else None

    def lines(self) -> list[str]:
        placed = (
            ", ".join(f"{t} x{n}" for t, n in self.placed.items())
            or "no pool placement reported (a fixed instance type, or not placed yet)"
        )
        line = self.offload.message if self.offload else "(no offload line yet)"
        return [f"endpoint {self.name}: {placed}", f"  offload: {line}", *self.notes]


@shows_requests
def placement(workshop: Workshop, name: str | None = None) -> Placement | Text:
    """Which instance pool SageMaker placed the endpoint on, and llama.cpp's offload log line."""
    config = workshop.config
    gpu = next(p for p in DEPLOY_PATHS if p.gpu)
    name = name or config.endpoint_name(gpu)
    if name == config.endpoint_name(gpu) and not on_path(config, gpu.name):
        return Text(f"skipped: no GPU endpoint on the {config.deploy_path!r} path (notebook 00)")
    c = workshop.clients
    placed = hosting.placed_instance_types(c.sm.describe_endpoint(EndpointName=name))
    lines, where = c.hosting.offload_lines(c.logs, name)
    return Placement(name, placed, lines[-1] if lines else None, [f"  offload read from {where}"])

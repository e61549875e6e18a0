"""What the local emulator cannot do, done on this machine, so the AWS flows run unchanged locally.

``codebuild`` and ``endpoints`` run every request of their flows against whatever client they are
given; the two things moto cannot do are parameters of those flows, and local mode passes these:

* ``EmulatedCodeBuild`` (for ``codebuild.CodeBuildRunner``): the emulator records projects and builds
  but runs nothing, so once a build has ended this does what its buildspec would have done: the
  embedded model packaged and uploaded to emulated S3, or a stand-in image manifest pushed to
  emulated ECR (and its digest exported, as the image build does).
* ``LocalHosting`` (for ``hosting.SageMakerHosting``): the endpoint's requests go to the emulator
  (instance types it does not know mapped to ones it does, after botocore validated the real ones),
  then a real process serves what the emulator recorded for it: llama-server behind nginx for the
  DLC's image, started by the DLC entrypoint's rules (``dlc_server``), a decision adapter otherwise.

Each says, in one sentence per resource, what was not exercised. The images they push are
stand-ins too (``push_stand_in``): the emulator stores manifests, not layers; ``seed_dlc`` puts the
DLC's where AWS publishes it when a fresh emulator starts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any, cast

from botocore import xform_name
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError

from ..aws import calls, endpoints, hosting, images, instance_types, transform
from ..aws.build_projects import MODEL_PACKAGE_PROJECT, parse_s3_uri
from ..aws.codebuild import CodeBuildRunner, ensure_project, upload_package
from ..errors import AwsFailure, InvalidInput
from ..models import EMBEDDED_MODEL, ModelSpec, embedded_gguf_path
from ..packaging import CALIBRATION_NAME, package_local
from . import dlc_server, rehearsal
from .permissions import CODEBUILD, SAGEMAKER, CallLog

# The emulator's instance-type list predates these families; it receives the nearest type it knows.
EMULATOR_INSTANCE_TYPES = {"ml.c6i.2xlarge": "ml.c5.2xlarge", "ml.c6i.8xlarge": "ml.c5.9xlarge"}
EMULATOR_FAMILIES = ("c4", "c5", "c5d", "m4", "m5", "m5d", "r5", "r5d", "t2", "p2", "p3", "g4dn", "inf1")


def stand_in_manifest(description: str, content_sha256: str) -> str:
    """An OCI-style image manifest with one layer named by ``content_sha256``.

    The emulator stores manifests, not layers; the layer digest makes each
    stand-in image's digest distinct and tied to what it stands for.
    """
    config_blob = json.dumps({"description": description}).encode()
    return json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {
                "mediaType": "application/vnd.docker.container.image.v1+json",
                "size": len(config_blob),
                "digest": "sha256:" + hashlib.sha256(config_blob).hexdigest(),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                    "size": 0,
                    "digest": "sha256:" + content_sha256,
                }
            ],
        }
    )


def push_stand_in(
    ecr_client: Any,
    repository: str,
    tag: str,
    description: str,
    content_sha256: str,
    registry_id: str | None = None,
    digest: str | None = None,
) -> str:
    """PutImage of a stand-in manifest; returns its digest (what ECR would report after docker push)."""
    kwargs = {"registryId": registry_id} if registry_id else {}
    try:
        response = ecr_client.put_image(
            repositoryName=repository,
            imageTag=tag,
            imageManifest=stand_in_manifest(description, content_sha256),
            **kwargs,
            **({"imageDigest": digest} if digest else {}),
        )
        return cast(str, response["image"]["imageId"]["imageDigest"])
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ImageAlreadyExistsException":
            raise
    found = ecr_client.describe_images(repositoryName=repository, imageIds=[{"imageTag": tag}], **kwargs)
    return cast(str, found["imageDetails"][0]["imageDigest"])


def seed_dlc(ecr_client: Any) -> dict[str, str]:
    """Put stand-ins for the llama.cpp DLC's SageMaker tags into the emulated DLC registry of the client's region.

    The repository is created under the DLC's registry id, so ``images.resolve_digest``
    runs unchanged on ``images.dlc_image_uri(region)``. Returns tag -> digest.
    """
    region = calls.region_of(ecr_client)
    account = images.dlc_account(region)
    try:
        ecr_client.create_repository(
            repositoryName=images.DLC_REPOSITORY, registryId=account, imageTagMutability="MUTABLE"
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "RepositoryAlreadyExistsException":
            raise
    digests = {}
    for variant, tag in images.SAGEMAKER_TAGS.items():
        # Under the pinned digest, so images.resolve_dlc finds it (the emulator takes the digest as given;
        # real ECR derives it from the manifest).
        what = f"local stand-in for {images.DLC_REPOSITORY}:{tag} (the AWS llama.cpp DLC)"
        digests[tag] = push_stand_in(
            ecr_client,
            images.DLC_REPOSITORY,
            tag,
            what,
            hashlib.sha256(what.encode()).hexdigest(),
            registry_id=account,
            digest=images.dlc_pin(variant).digest,
        )
    return digests


class _Body:
    def __init__(self, data: bytes):
        self.data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.data


def answered_here(client: Any, operation: str, request: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """Call ``operation`` through ``client`` (validated by botocore and recorded like any call) but answer
    it here with ``answer`` instead of sending it: for the few calls the emulator does not implement."""
    event = f"before-send.{client.meta.service_model.service_id.hyphenize()}.{operation}"

    def reply(request: Any, **_: Any) -> AWSResponse:
        return AWSResponse(
            request.url, 200, {"Content-Type": "application/x-amz-json-1.1"}, _Body(json.dumps(answer).encode())
        )

    client.meta.events.register(event, reply)
    try:
        response: dict[str, Any] = getattr(client, xform_name(operation))(**request)
        return response
    finally:
        client.meta.events.unregister(event, reply)


def _acting_as(calls: CallLog | None, principal: str | None) -> contextlib.AbstractContextManager[None]:
    return calls.acting_as(principal) if calls is not None else contextlib.nullcontext()


class EmulatedCodeBuild(CodeBuildRunner):
    """Builds in the emulator, with the buildspec's effect done here once the build has ended."""

    def __init__(self, s3: Any, ecr: Any, calls: CallLog | None = None, local: rehearsal.Rehearsal | None = None):
        super().__init__(poll_s=0.2, timeout_s=60)
        self.s3, self.ecr, self.calls = s3, ecr, calls
        self.local = local or rehearsal.default()

    def ensure_project(self, codebuild: Any, request: dict[str, Any]) -> str:
        # The emulator has CreateProject but not UpdateProject: replace instead of update. The delete is
        # the emulator's housekeeping, not a call the participant makes on AWS, so it is not recorded.
        with _acting_as(self.calls, None):
            codebuild.delete_project(name=request["name"])
        return ensure_project(codebuild, request)

    def run(
        self, codebuild: Any, logs_client: Any, build_id: str, request: dict[str, Any], *, progress: bool
    ) -> dict[str, Any]:
        build = super().run(codebuild, logs_client, build_id, request, progress=False)
        env = {v["name"]: v["value"] for v in request.get("environmentVariablesOverride", [])}

        with _acting_as(self.calls, CODEBUILD):  # what the build does with its service role on AWS
            if "MODEL_S3_URI" in env:
                self._package(env["MODEL_S3_URI"], env.get("CALIBRATION_S3_URI"))
            elif "REPOSITORY_URI" in env:
                digest = self._push(env, request.get("sourceLocationOverride", ""))
                build = {**build, "exportedEnvironmentVariables": [{"name": "IMAGE_DIGEST", "value": digest}]}
        return build

    def _package(self, model_s3_uri: str, calibration_s3_uri: str | None = None) -> None:
        spec = EMBEDDED_MODEL
        calibration = None
        if calibration_s3_uri:  # what the buildspec's `aws s3 cp` of CALIBRATION_S3_URI does
            bucket, key = parse_s3_uri(calibration_s3_uri)
            calibration = self.local.home / "package-input" / CALIBRATION_NAME
            calibration.parent.mkdir(parents=True, exist_ok=True)
            calibration.write_bytes(self.s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        package = package_local(
            spec, {spec.gguf.path: embedded_gguf_path()}, self.local.home / "package", calibration=calibration
        )
        upload_package(self.s3, package, model_s3_uri)

    def _push(self, env: dict[str, str], source: str) -> str:
        # The stand-in's digest follows what the image would be built from: source zip, Dockerfile, base.
        content = hashlib.sha256(json.dumps([source, env["DOCKERFILE"], env["BASE_IMAGE"]]).encode()).hexdigest()
        repository = images.parse_image_uri(env["REPOSITORY_URI"]).repository
        return push_stand_in(
            self.ecr,
            repository,
            env["IMAGE_TAG"],
            f"local stand-in for container/{env['DOCKERFILE']} FROM {env['BASE_IMAGE']}",
            content,
        )

    def packaged(self, spec: ModelSpec) -> ModelSpec:
        return EMBEDDED_MODEL

    def not_exercised(self, project_name: str) -> str:
        if project_name == MODEL_PACKAGE_PROJECT:
            return (
                "Not exercised locally: the build's download and packaging of the pinned model (the emulator's "
                f"CodeBuild runs nothing); the embedded {EMBEDDED_MODEL.name} was packaged in its place."
            )
        return (
            "Not exercised locally: docker build and push (the emulator's CodeBuild runs no Docker); a manifest "
            "pushed to emulated ECR stands in for the image."
        )


class LocalHosting(hosting.SageMakerHosting):
    """Endpoints created in the emulator and served by a local process each: the DLC's by llama-server
    behind nginx (the decision adapter where either is missing), the decision image's by the adapter."""

    def __init__(self, s3: Any, calls: CallLog | None = None, local: rehearsal.Rehearsal | None = None):
        super().__init__(poll_s=0.2, timeout_s=60)
        self.s3, self.calls = s3, calls
        self.local = local or rehearsal.default()
        self._notes: dict[str, list[str]] = {}
        self._limits: dict[str, list[str]] = {}
        self._urls: dict[str, str] = {}
        self._servers: dict[str, str] = {}  # what serving the DLC's endpoint locally does not exercise

    def adapt(self, plan: endpoints.DeployPlan) -> endpoints.DeployPlan:
        variant = dict(plan.endpoint_config["ProductionVariants"][0])
        notes = self._notes[plan.name] = []
        limits = self._limits[plan.name] = []
        if "InstancePools" in variant:
            limits.append(
                "Not exercised locally: GPU placement from the ordered pools and full GPU offload; a CPU "
                "adapter serving the same model and settings stands in."
            )
            kept = self.local.home / f"{plan.name}.requests.json"
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(plan.to_json() + "\n")
            pools = [p["InstanceType"] for p in variant.pop("InstancePools")]
            variant.pop("VariantInstanceProvisionTimeoutInSeconds", None)
            variant["InstanceType"] = pools[0]
            notes.append(
                f"  CreateEndpointConfig with InstancePools ({' > '.join(pools)}) built and validated by "
                f"botocore and kept in {kept}; the emulator predates pools, so it was sent the first one"
            )
        wanted = variant["InstanceType"]
        if wanted.split(".")[1] not in EMULATOR_FAMILIES:
            sent = EMULATOR_INSTANCE_TYPES.get(
                wanted, "ml.g4dn.2xlarge" if instance_types.is_gpu_instance(wanted) else "ml.c5.2xlarge"
            )
            variant["InstanceType"] = sent
            notes.append(
                f"  the emulator's instance-type list predates {wanted}, so it was sent {sent} (validated for {wanted})"
            )
        if variant == plan.endpoint_config["ProductionVariants"][0]:
            return plan
        config = {**plan.endpoint_config, "ProductionVariants": [variant]}
        return endpoints.DeployPlan(
            plan.model, calls.validate("sagemaker", "CreateEndpointConfig", config), plan.endpoint
        )

    def wait(self, sm_client: Any, name: str, *, logs_client: Any = None, progress: bool = True) -> dict[str, Any]:
        described = super().wait(sm_client, name, progress=False)  # the emulator keeps no endpoint logs
        self._servers.pop(name, None)
        local = self.local.start_local_endpoint(name, sm_client, self.s3, calls=self.calls)
        self._urls[name] = local.url
        changes = local.changes_text()
        served_by = "llama-server behind nginx" if local.server == rehearsal.LLAMA_SERVER else "the decision adapter"
        self._notes.setdefault(name, []).append(
            f"  local endpoint: {local.url}, served by {served_by}" + (f" ({changes})" if changes else "")
        )
        if local.readout_note:
            self._notes[name].append(f"  {local.readout_note}")
        if local.server == rehearsal.LLAMA_SERVER:
            self._servers[name] = f"Not exercised locally: {dlc_server.NOT_REPRODUCED}."
        elif local.fallback:
            self._servers[name] = (
                f"Not exercised locally: the DLC's llama-server ({local.fallback}); the decision "
                "adapter stands in for it and answers the same OpenAI chat schema on /invocations."
            )
        return described

    def created(self, sm_client: Any, name: str) -> dict[str, Any]:
        return self.wait(sm_client, name)  # a local endpoint exists once its process runs: always waited for

    def served(self, name: str) -> tuple[str | None, list[str]]:
        server = [self._servers[name]] if name in self._servers else []
        return self._urls.get(name), [*self._notes.get(name, []), *self._limits.get(name, []), *server]

    def update_endpoint(self, sm_client: Any, request: dict[str, Any]) -> str:
        """The emulator has no UpdateEndpoint: the request is validated, recorded and answered here, the
        emulator's endpoint record is pointed at the new config, and the local endpoint's process is
        replaced once its successor is ready (``Rehearsal.start_local_endpoint(..., replace=True)``)."""
        name = request["EndpointName"]
        calls.validate("sagemaker", "UpdateEndpoint", request)
        with _acting_as(self.calls, None):
            described = sm_client.describe_endpoint(EndpointName=name)
        arn = answered_here(sm_client, "UpdateEndpoint", request, {"EndpointArn": described["EndpointArn"]})
        with _acting_as(self.calls, None):  # the emulator's housekeeping, not a call anyone makes on AWS
            tags = sm_client.list_tags(ResourceArn=described["EndpointArn"]).get("Tags", [])
            sm_client.delete_endpoint(EndpointName=name)
            sm_client.create_endpoint(
                EndpointName=name, EndpointConfigName=request["EndpointConfigName"], **({"Tags": tags} if tags else {})
            )
        local = self.local.start_local_endpoint(name, sm_client, self.s3, calls=self.calls, replace=True)
        self._urls[name] = local.url
        self._notes[name] = [
            f"  local endpoint: {local.url}, serving {local.model_name}; the previous process was stopped once "
            "this one was ready",
            "  Not exercised locally: SageMaker's blue/green rollout (the baking period, canary traffic and the "
            "automatic rollback on an alarm); the emulator has no UpdateEndpoint, so the request was validated "
            "by botocore and recorded, and the local process replaced in its place.",
        ]
        return cast(str, arn["EndpointArn"])

    def offload_lines(self, logs_client: Any, name: str) -> tuple[list[hosting.OffloadLine], str]:
        log = self.local.endpoint_log(name)
        found = (hosting.parse_offload(line, log.name) for line in log.read_text(errors="replace").splitlines())
        return [line for line in found if line], f"the local adapter's log {log} (no GPU here: 0 layers offloaded)"

    def transform(
        self,
        sm_client: Any,
        s3_client: Any,
        request: dict[str, Any],
        *,
        run: Callable[..., dict[str, Any]] | None = None,
        endpoint_name: str | None = None,
        progress: bool = True,
    ) -> tuple[dict[str, Any], list[str]]:
        """The emulator records a transform job (Completed at once) but runs nothing: here the local process
        of ``endpoint_name``, which serves the job's model, answers every record of the input in S3, one
        request each (SplitType Line, BatchStrategy SingleRecord, the job's ContentType and Accept), and
        the answers land in S3 as SageMaker writes them (``<output path>/<input file>.out``, one line each),
        with the SageMaker role's permissions."""
        if not endpoint_name:
            raise InvalidInput(
                "endpoint_name: the local stand-in runs a transform on the process of the endpoint "
                "that serves the job's model; name it"
            )
        url = self.local.endpoint_url(endpoint_name)
        transform.start_transform_job(sm_client, request)
        name = request["TransformJobName"]
        with _acting_as(self.calls, SAGEMAKER):  # what the job does with the model's execution role on AWS
            written = run_records(s3_client, request, url)
        described = transform.wait_for_transform(sm_client, name, poll_s=self.poll_s, progress=False)
        return described, [
            f"  local transform: {written} record(s) answered by {endpoint_name}'s local process ({url})",
            "  Not exercised locally: SageMaker's transform instances (the emulator records the job and reports it "
            "Completed; the local endpoint that serves the same model answered each record).",
        ]


def run_records(s3_client: Any, request: dict[str, Any], url: str) -> int:
    """Each line of each input object POSTed to ``url``/invocations, the answers written beside as ``.out``."""
    import urllib.error
    import urllib.request

    source, output = request["TransformInput"], request["TransformOutput"]
    if request.get("BatchStrategy") != "SingleRecord" or source.get("SplitType") != "Line":
        raise InvalidInput(
            "the local transform runs BatchStrategy SingleRecord with SplitType Line only (one "
            "decision per request, as the adapter answers them)"
        )
    config = request.get("ModelClientConfig", {})
    timeout_s, retries = config.get("InvocationsTimeoutInSeconds", 600), config.get("InvocationsMaxRetries", 0)
    headers = {
        "Content-Type": source.get("ContentType", "application/json"),
        "Accept": output.get("Accept", "application/json"),
    }
    uri = source["DataSource"]["S3DataSource"]["S3Uri"]
    bucket, prefix = parse_s3_uri(uri)
    listed = s3_client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    answered = 0
    for obj in listed:
        text = s3_client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read().decode("utf-8")
        answers = []
        for number, line in enumerate((ln for ln in text.splitlines() if ln.strip()), start=1):
            for attempt in range(retries + 1):
                try:
                    req = urllib.request.Request(
                        url.rstrip("/") + "/invocations", data=line.encode("utf-8"), headers=headers, method="POST"
                    )
                    with urllib.request.urlopen(req, timeout=timeout_s) as response:
                        answers.append(response.read().decode("utf-8").strip())
                    break
                except urllib.error.HTTPError as exc:
                    if exc.code < 500 or attempt == retries:
                        detail = exc.read().decode("utf-8", "replace")[:300]
                        raise AwsFailure(
                            f"transform job {request['TransformJobName']} failed: {obj['Key']} line "
                            f"{number} was answered {exc.code}: {detail}"
                        ) from None
        out_bucket, out_key = parse_s3_uri(
            transform.transform_output_uri(f"s3://{bucket}/{obj['Key']}", output["S3OutputPath"])
        )
        s3_client.put_object(Bucket=out_bucket, Key=out_key, Body=("\n".join(answers) + "\n").encode("utf-8"))
        answered += len(answers)
    return answered

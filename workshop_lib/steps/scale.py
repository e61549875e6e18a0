"""Notebook 07's capacity steps on the decision endpoint: auto scaling on invocations per instance, from
the rate notebook 06 measured (``record_throughput``: the sustainable rate under concurrent callers;
``record_rate``: the median time per decision, the fallback), and one Batch Transform job over a JSON Lines file of
decisions in S3, answers read back. Notebook 08 removes the scaling policy and target
(``remove_autoscaling``) and the job's files (``delete_transform_output``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..aws import encryption, hosting, scaling, transform
from ..aws.build_projects import parse_s3_uri
from ..aws.policy_scope import BATCH_OUTPUT_FOLDER
from ..deploy_paths import decision_paths
from ..errors import StepError
from ..examples import SHARED_STATE, SUPPORT_ROUTE
from .context import Shown, Text, Workshop, cleanup_step, decision_endpoint, require_bucket, shows_requests

if TYPE_CHECKING:
    from ..evaluation.report import BenchReport
    from ..evaluation.throughput import Sustainable

RATE_KEY = "decision_seconds"  # outputs.json: endpoint name -> seconds per decision (p50) notebook 06 measured
# outputs.json: endpoint name -> the sustainable rate notebook 06 measured under concurrent callers
# (``Sustainable.to_dict``: decisions_per_s, concurrency, p95_ms, p95_limit_ms)
THROUGHPUT_KEY = "decision_throughput"
DEFAULT_SECONDS = 2.0  # per decision, when 06 has not run: a CPU instance's pace for the pinned model
UTILISATION = 0.7  # of the measured rate: target tracking adds an instance before one is full
BATCH_INPUT_FOLDER = "batch-input"
INPUT_FILE = "decisions.jsonl"

# What notebook 07 sends through Batch Transform: a routing decision, the same ticket after a reply, and
# a shared-state request (several questions on one ticket).
TRANSFORM_DECISIONS = (
    SUPPORT_ROUTE,
    {
        **SUPPORT_ROUTE,
        "id": "ticket-88231-reply",
        "state": SUPPORT_ROUTE["state"] + "\n\nUpdate: the app also crashes when I open the invoice page.",
    },
    SHARED_STATE,
)


# ---- the rate 06 measured -----------------------------------------------------------------------


def record_rate(workshop: Workshop, report: BenchReport, name: str | None = None) -> Text:
    """Notebook 06: keep the benchmark's median seconds per decision for notebook 07's scaling target."""
    name = name or decision_endpoint(workshop)
    p50_ms = ((report.summary or {}).get("client_latency_ms") or {}).get("p50")
    if not isinstance(p50_ms, (int, float)) or p50_ms <= 0:
        return Text(
            "no answered decision to time: notebook 07's scaling target will use its default",
            problem="no latency measured",
        )
    seconds = round(p50_ms / 1000.0, 4)
    workshop.remember(**{RATE_KEY: {**workshop.outputs().get(RATE_KEY, {}), name: seconds}})
    return Text(
        f"{name}: {seconds:g} s per decision (median), kept for notebook 07's auto scaling target "
        f"({scaling_target(workshop, name):g} invocations per instance per minute)"
    )


def record_throughput(workshop: Workshop, sustainable: Sustainable, name: str | None = None) -> Text:
    """Notebook 06: keep the sustainable rate (``evaluation.throughput.Sustainable``) for notebook 07's scaling
    target. When no measured level fits the chosen p95, an earlier rate kept for the endpoint is dropped and 07
    falls back to the median time per decision."""
    name = name or decision_endpoint(workshop)
    kept = {k: v for k, v in workshop.outputs().get(THROUGHPUT_KEY, {}).items() if k != name}
    if sustainable.level is None:
        workshop.remember(**{THROUGHPUT_KEY: kept})
        seconds = measured_seconds(workshop, name)
        fallback = (
            f"its median {seconds:g} s per decision" if seconds else f"the default {DEFAULT_SECONDS:g} s per decision"
        )
        return Text(
            f"{name}: no sustainable rate at p95 within {sustainable.p95_limit_ms:g} ms, so none kept; "
            f"notebook 07's auto scaling target comes from {fallback} ({scaling_target(workshop, name):g} "
            "invocations per instance per minute)"
        )
    assert sustainable.decisions_per_s is not None  # a level fits, so it has a rate
    workshop.remember(**{THROUGHPUT_KEY: {**kept, name: sustainable.to_dict()}})
    return Text(
        f"{name}: {sustainable.decisions_per_s:.2f} decisions/s per instance kept for notebook 07's auto "
        f"scaling target ({scaling_target(workshop, name):g} invocations per instance per minute, "
        f"{UTILISATION:.0%} of {sustainable.decisions_per_s * 60:.0f} a minute)"
    )


def measured_seconds(workshop: Workshop, name: str | None = None) -> float | None:
    value = workshop.outputs().get(RATE_KEY, {}).get(name or decision_endpoint(workshop))
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def measured_throughput(workshop: Workshop, name: str | None = None) -> dict[str, Any] | None:
    """The sustainable rate 06 kept for the endpoint (decisions_per_s, concurrency, p95_ms, p95_limit_ms)."""
    kept = workshop.outputs().get(THROUGHPUT_KEY, {}).get(name or decision_endpoint(workshop))
    rate = kept.get("decisions_per_s") if isinstance(kept, dict) else None
    return kept if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0 else None


def scaling_target(workshop: Workshop, name: str | None = None) -> float:
    """Invocations per instance per minute to track: ``UTILISATION`` of the sustainable rate 06 measured under
    concurrent callers; without it, of what one instance serves one decision at a time at 06's median pace
    (``DEFAULT_SECONDS`` a decision when 06 has not run)."""
    measured = measured_throughput(workshop, name)
    if measured:
        return scaling.target_from_rate(min(max(float(measured["decisions_per_s"]), 1 / 60), 10_000), UTILISATION)
    seconds = measured_seconds(workshop, name) or DEFAULT_SECONDS
    return scaling.target_invocations_per_minute(min(max(seconds, 0.001), 60), UTILISATION)


def target_source(workshop: Workshop, name: str | None = None) -> str:
    """Where ``scaling_target`` took its rate from, in words."""
    measured = measured_throughput(workshop, name)
    if measured:
        limit = measured.get("p95_limit_ms")
        return (
            f"from notebook 06's sustainable {measured['decisions_per_s']:g} decisions/s at "
            f"C = {measured.get('concurrency')}"
            + (f", p95 within {limit:g} ms" if isinstance(limit, (int, float)) else "")
        )
    seconds = measured_seconds(workshop, name)
    return (
        f"from notebook 06's {seconds:g} s per decision"
        if seconds
        else f"default: {DEFAULT_SECONDS:g} s per decision (06 not run)"
    )


# ---- auto scaling --------------------------------------------------------------------------------


@shows_requests
def autoscale(
    workshop: Workshop,
    name: str | None = None,
    *,
    invocations_per_instance: float | None = None,
    min_instances: int = 1,
    max_instances: int = 2,
) -> Text:
    """Register the endpoint's variant with Application Auto Scaling (``min_instances`` to ``max_instances``)
    and track ``invocations_per_instance`` a minute (default: ``scaling_target``)."""
    name = name or decision_endpoint(workshop)
    target = float(invocations_per_instance) if invocations_per_instance else scaling_target(workshop, name)
    client = workshop.clients.get("application-autoscaling")
    arn = scaling.enable_autoscaling(
        client, name, invocations_per_instance=target, min_instances=min_instances, max_instances=max_instances
    )
    registered = scaling.scaling_of(client, name)
    if registered is None:
        return Text(f"{name}'s variant is not registered after RegisterScalableTarget", problem="not registered")
    why = "as given" if invocations_per_instance else target_source(workshop, name)
    lines = [
        # short enough that the closing check's table never wraps it, whatever the target's digits
        f"{name}: {registered['MinCapacity']} to {registered['MaxCapacity']} instances, tracking "
        f"{target:.0f} a minute per instance",
        f"  the target: {why}",
        f"  policy {arn}",
    ]
    if workshop.local:
        lines.append(
            "  Not exercised locally: scaling itself (the emulator keeps the registration and the policy, "
            "validated by botocore; it has no metrics and makes no target-tracking alarms)"
        )
    return Text("\n".join(lines))


@cleanup_step
@shows_requests
def remove_autoscaling(workshop: Workshop, names: Sequence[str] | None = None) -> Text:
    """Notebook 08: each decision endpoint's scaling policy, then its scalable target (safe to run twice)."""
    config = workshop.config
    client = workshop.clients.get("application-autoscaling")
    lines = []
    for name in names or [config.endpoint_name(path) for path in decision_paths()]:
        states = scaling.disable_autoscaling(client, name)
        lines.append(f"{name}: scaling policy {states['policy']}, scalable target {states['target']}")
    return Text("\n".join(lines))


# ---- Batch Transform -----------------------------------------------------------------------------


@dataclass(repr=False)
class TransformResult(Shown):
    job: dict[str, Any]
    input_uri: str
    output_uri: str
    answers: dict[str, dict[str, Any]]
    expected: int
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.job.get("TransformJobStatus") == "Completed"
            and len(self.answers) == self.expected
            and all(_valid(a) for a in self.answers.values())
        )

    def lines(self) -> list[str]:
        return [
            f"transform job {self.job['TransformJobName']}: {self.job['TransformJobStatus']}",
            f"  input  {self.input_uri}",
            f"  output {self.output_uri}",
            *(f"  {did}: {_top(answer)}" for did, answer in self.answers.items()),
            *self.notes,
        ]


def _results(answer: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if isinstance(answer.get("result"), Mapping):
        return [answer["result"]]
    return [r for r in answer.get("results") or [] if isinstance(r, Mapping)]


def _valid(answer: Mapping[str, Any]) -> bool:
    found = _results(answer)
    return bool(found) and all(
        len(r.get("probabilities") or []) == len(r.get("option_ids") or [None])
        and math.isclose(sum(r["probabilities"]), 1.0, abs_tol=1e-3)
        for r in found
    )


def _top(answer: Mapping[str, Any]) -> str:
    tops, found = [], _results(answer)
    for r in found:
        p, ids = r.get("probabilities") or [], r.get("option_ids") or []
        if p and len(p) == len(ids):
            best = max(range(len(p)), key=p.__getitem__)
            question = f"{r.get('id')}=" if len(found) > 1 else ""  # shared state: one answer per question
            tops.append(f"{question}{ids[best]} ({p[best]:.2f})")
    return ", ".join(tops) or f"no probabilities in {str(answer)[:120]}"


def _served_model(workshop: Workshop, name: str) -> tuple[str, str | None]:
    """(the model the endpoint serves now, the instance type it runs on): the job runs the same model. A pooled
    endpoint runs on the pool SageMaker placed it on (DescribeEndpoint); None when no placement is reported."""
    sm = workshop.clients.sm
    described = sm.describe_endpoint(EndpointName=name)
    variant = sm.describe_endpoint_config(EndpointConfigName=described["EndpointConfigName"])["ProductionVariants"][0]
    placed = hosting.placed_instance_types(described)
    return variant["ModelName"], variant.get("InstanceType") or max(placed, key=placed.__getitem__, default=None)


@shows_requests
def run_transform(
    workshop: Workshop,
    name: str | None = None,
    decisions: Sequence[Mapping[str, Any]] | None = None,
    *,
    instance_type: str | None = None,
    progress: bool = True,
) -> TransformResult:
    """One Batch Transform job with the model ``name`` serves, on the instance type it runs on (for ordered pools
    the one SageMaker placed it on) unless Batch Transform does not offer it: ``decisions`` (default
    ``TRANSFORM_DECISIONS``) as JSON Lines under ``batch-input/``, the
    answers from ``batch-output/`` joined back by decision id."""
    name = name or decision_endpoint(workshop)
    config = workshop.config
    bucket = require_bucket(workshop)
    decisions = list(decisions or TRANSFORM_DECISIONS)
    text = transform.decisions_to_jsonl(decisions)
    model_name, serving_type = _served_model(workshop, name)
    if instance_type is None:
        if serving_type is None:
            raise StepError(
                f"endpoint {name} reports no instance on any of its pools yet (steps.placement): run "
                "the transform once it is InService, or pass instance_type"
            )
        instance_type = transform.transform_type(serving_type)
    input_prefix = config.s3_uri(BATCH_INPUT_FOLDER) + "/"
    output_prefix = config.s3_uri(BATCH_OUTPUT_FOLDER) + "/"
    input_uri = input_prefix + INPUT_FILE
    job_name = f"{name}-batch-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}"
    request = transform.transform_job_request(
        job_name,
        model_name=model_name,
        input_s3_uri=input_prefix,
        output_s3_uri=output_prefix,
        instance_type=instance_type,
    )
    if config.kms_key_arn:
        request = encryption.encrypted_transform(request, config.kms_key_arn)
    s3 = workshop.clients.s3
    s3.put_object(
        Bucket=bucket, Key=parse_s3_uri(input_uri)[1], Body=text.encode("utf-8"), ContentType="application/jsonlines"
    )
    job, notes = workshop.clients.hosting.transform(
        workshop.clients.sm, s3, request, run=transform.run_transform_job, endpoint_name=name, progress=progress
    )
    output_uri = transform.transform_output_uri(input_uri, output_prefix)
    out_bucket, out_key = parse_s3_uri(output_uri)
    answers = transform.join_transform_output(
        text, s3.get_object(Bucket=out_bucket, Key=out_key)["Body"].read().decode("utf-8")
    )
    return TransformResult(job, input_uri, output_uri, answers, len(decisions), notes)


@cleanup_step
@shows_requests
def delete_transform_output(workshop: Workshop) -> Text:
    """Notebook 08: the transform jobs' input and output files (``batch-input/``, ``batch-output/``)."""
    config = workshop.config
    if not config.bucket:
        raise StepError("the config names no bucket, so no transform files were written")
    s3 = workshop.clients.s3
    lines = []
    for folder in (BATCH_INPUT_FOLDER, BATCH_OUTPUT_FOLDER):
        prefix = parse_s3_uri(config.s3_uri(folder) + "/")[1]
        try:
            keys = [o["Key"] for o in s3.list_objects_v2(Bucket=config.bucket, Prefix=prefix).get("Contents", [])]
        except s3.exceptions.NoSuchBucket:
            keys = []
        if keys:
            s3.delete_objects(Bucket=config.bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True})
        lines.append(
            f"s3://{config.bucket}/{prefix}: {len(keys)} object(s) deleted"
            if keys
            else f"s3://{config.bucket}/{prefix}: nothing there"
        )
    return Text("\n".join(lines))


__all__ = [
    "DEFAULT_SECONDS",
    "RATE_KEY",
    "THROUGHPUT_KEY",
    "TRANSFORM_DECISIONS",
    "UTILISATION",
    "TransformResult",
    "autoscale",
    "delete_transform_output",
    "measured_seconds",
    "measured_throughput",
    "record_rate",
    "record_throughput",
    "remove_autoscaling",
    "run_transform",
    "scaling_target",
    "target_source",
]

"""Notebook 07's capacity steps on the decision endpoint: auto scaling on invocations per instance, from
the rate notebook 06 measured (``record_rate``), and one Batch Transform job over a JSON Lines file of
decisions in S3, answers read back. Notebook 08 removes the scaling policy and target
(``remove_autoscaling``) and the job's files (``delete_transform_output``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Mapping, Sequence

from ..aws import endpoints, scaling, transform
from ..aws.build_projects import parse_s3_uri
from ..aws.policies import BATCH_OUTPUT_FOLDER
from ..errors import StepError
from ..examples import SHARED_STATE, SUPPORT_ROUTE
from .context import Text, Workshop, _Shown, cleanup_step, require_bucket, shows_requests
from .invoke import decision_endpoint

RATE_KEY = "decision_seconds"  # outputs.json: endpoint name -> seconds per decision (p50) notebook 06 measured
DEFAULT_SECONDS = 2.0  # per decision, when 06 has not run: a CPU instance's pace for the pinned model
BATCH_INPUT_FOLDER = "batch-input"
INPUT_FILE = "decisions.jsonl"

# What notebook 07 sends through Batch Transform: a routing decision, the same ticket after a reply, and
# a shared-state request (several questions on one ticket).
TRANSFORM_DECISIONS = (
    SUPPORT_ROUTE,
    {**SUPPORT_ROUTE, "id": "ticket-88231-reply",
     "state": SUPPORT_ROUTE["state"] + "\n\nUpdate: the app also crashes when I open the invoice page."},
    SHARED_STATE,
)


# ---- the rate 06 measured -----------------------------------------------------------------------


def record_rate(workshop: Workshop, report, name: str | None = None) -> Text:
    """Notebook 06: keep the benchmark's median seconds per decision for notebook 07's scaling target."""
    name = name or decision_endpoint(workshop)
    p50_ms = ((report.summary or {}).get("client_latency_ms") or {}).get("p50")
    if not isinstance(p50_ms, (int, float)) or p50_ms <= 0:
        return Text("no answered decision to time: notebook 07's scaling target will use its default",
                    problem="no latency measured")
    seconds = round(p50_ms / 1000.0, 4)
    workshop.remember(**{RATE_KEY: {**workshop.outputs().get(RATE_KEY, {}), name: seconds}})
    return Text(f"{name}: {seconds:g} s per decision (median), kept for notebook 07's auto scaling target "
                f"({scaling_target(workshop, name):g} invocations per instance per minute)")


def measured_seconds(workshop: Workshop, name: str | None = None) -> float | None:
    value = workshop.outputs().get(RATE_KEY, {}).get(name or decision_endpoint(workshop))
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def scaling_target(workshop: Workshop, name: str | None = None) -> float:
    """Invocations per instance per minute to track: 70 % of what one instance serves at the pace 06
    measured (``DEFAULT_SECONDS`` a decision when it has not run)."""
    seconds = measured_seconds(workshop, name) or DEFAULT_SECONDS
    return scaling.target_invocations_per_minute(min(max(seconds, 0.001), 60))


# ---- auto scaling --------------------------------------------------------------------------------


@shows_requests
def autoscale(workshop: Workshop, name: str | None = None, *, invocations_per_instance: float | None = None,
              min_instances: int = 1, max_instances: int = 2) -> Text:
    """Register the endpoint's variant with Application Auto Scaling (``min_instances`` to ``max_instances``)
    and track ``invocations_per_instance`` a minute (default: ``scaling_target``)."""
    name = name or decision_endpoint(workshop)
    target = float(invocations_per_instance) if invocations_per_instance else scaling_target(workshop, name)
    client = workshop.clients.get("application-autoscaling")
    arn = scaling.enable_autoscaling(client, name, invocations_per_instance=target, min_instances=min_instances,
                                     max_instances=max_instances)
    registered = scaling.scaling_of(client, name)
    if registered is None:
        return Text(f"{name}'s variant is not registered after RegisterScalableTarget", problem="not registered")
    seconds = measured_seconds(workshop, name)
    why = (f"from notebook 06's {seconds:g} s per decision" if seconds and invocations_per_instance is None
           else "as given" if invocations_per_instance else f"default: {DEFAULT_SECONDS:g} s per decision (06 not run)")
    lines = [f"{name}: {registered['MinCapacity']} to {registered['MaxCapacity']} instances, tracking "
             f"{target:g} invocations per instance per minute ({why})",
             f"  policy {arn}"]
    if workshop.local:
        lines.append("  Not exercised locally: scaling itself (the emulator keeps the registration and the policy, "
                     "validated by botocore; it has no metrics and makes no target-tracking alarms)")
    return Text("\n".join(lines))


@cleanup_step
@shows_requests
def remove_autoscaling(workshop: Workshop, names: Sequence[str] | None = None) -> Text:
    """Notebook 08: each decision endpoint's scaling policy, then its scalable target (safe to run twice)."""
    config = workshop.config
    client = workshop.clients.get("application-autoscaling")
    lines = []
    for name in names or (config.cpu_endpoint_name, config.gpu_endpoint_name):
        states = scaling.disable_autoscaling(client, name)
        lines.append(f"{name}: scaling policy {states['policy']}, scalable target {states['target']}")
    return Text("\n".join(lines))


# ---- Batch Transform -----------------------------------------------------------------------------


@dataclass(repr=False)
class TransformResult(_Shown):
    job: dict
    input_uri: str
    output_uri: str
    answers: dict[str, dict]
    expected: int
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.job.get("TransformJobStatus") == "Completed" and len(self.answers) == self.expected \
            and all(_valid(a) for a in self.answers.values())

    def lines(self) -> list[str]:
        return [f"transform job {self.job['TransformJobName']}: {self.job['TransformJobStatus']}",
                f"  input  {self.input_uri}", f"  output {self.output_uri}",
                *(f"  {did}: {_top(answer)}" for did, answer in self.answers.items()), *self.notes]


def _results(answer: Mapping) -> list[Mapping]:
    if isinstance(answer.get("result"), Mapping):
        return [answer["result"]]
    return [r for r in answer.get("results") or [] if isinstance(r, Mapping)]


def _valid(answer: Mapping) -> bool:
    found = _results(answer)
    return bool(found) and all(
        len(r.get("probabilities") or []) == len(r.get("option_ids") or [None])
        and math.isclose(sum(r["probabilities"]), 1.0, abs_tol=1e-3) for r in found)


def _top(answer: Mapping) -> str:
    tops, found = [], _results(answer)
    for r in found:
        p, ids = r.get("probabilities") or [], r.get("option_ids") or []
        if p and len(p) == len(ids):
            best = max(range(len(p)), key=p.__getitem__)
            question = f"{r.get('id')}=" if len(found) > 1 else ""  # shared state: one answer per question
            tops.append(f"{question}{ids[best]} ({p[best]:.2f})")
    return ", ".join(tops) or f"no probabilities in {str(answer)[:120]}"


def _served_model(workshop: Workshop, name: str) -> tuple[str, str]:
    """(the model the endpoint serves now, its instance type): the job runs the same model."""
    sm = workshop.clients.sm
    config_name = sm.describe_endpoint(EndpointName=name)["EndpointConfigName"]
    variant = sm.describe_endpoint_config(EndpointConfigName=config_name)["ProductionVariants"][0]
    instance = variant.get("InstanceType") or (variant.get("InstancePools") or [{}])[0].get("InstanceType")
    return variant["ModelName"], instance or endpoints.DECISION_CPU_INSTANCE


@shows_requests
def run_transform(workshop: Workshop, name: str | None = None, decisions: Sequence[Mapping] | None = None, *,
                  instance_type: str | None = None, progress: bool = True) -> TransformResult:
    """One Batch Transform job with the model ``name`` serves (its instance type unless Batch Transform does
    not offer it): ``decisions`` (default ``TRANSFORM_DECISIONS``) as JSON Lines under ``batch-input/``, the
    answers from ``batch-output/`` joined back by decision id."""
    name = name or decision_endpoint(workshop)
    config = workshop.config
    bucket = require_bucket(workshop)
    decisions = list(decisions or TRANSFORM_DECISIONS)
    text = transform.decisions_to_jsonl(decisions)
    model_name, serving_type = _served_model(workshop, name)
    if instance_type is None:
        instance_type = serving_type if serving_type in transform.transform_instance_types() \
            else endpoints.DECISION_CPU_INSTANCE
    input_prefix = config.s3_uri(BATCH_INPUT_FOLDER) + "/"
    output_prefix = config.s3_uri(BATCH_OUTPUT_FOLDER) + "/"
    input_uri = input_prefix + INPUT_FILE
    job_name = f"{name}-batch-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}"
    request = transform.transform_job_request(job_name, model_name=model_name, input_s3_uri=input_prefix,
                                              output_s3_uri=output_prefix, instance_type=instance_type)
    s3 = workshop.clients.s3
    s3.put_object(Bucket=bucket, Key=parse_s3_uri(input_uri)[1], Body=text.encode("utf-8"),
                  ContentType="application/jsonlines")
    job, notes = workshop.clients.hosting.transform(workshop.clients.sm, s3, request, run=transform.run_transform_job,
                                                    endpoint_name=name, progress=progress)
    output_uri = transform.transform_output_uri(input_uri, output_prefix)
    out_bucket, out_key = parse_s3_uri(output_uri)
    answers = transform.join_transform_output(text, s3.get_object(Bucket=out_bucket, Key=out_key)["Body"].read()
                                              .decode("utf-8"))
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
        lines.append(f"s3://{config.bucket}/{prefix}: {len(keys)} object(s) deleted" if keys
                     else f"s3://{config.bucket}/{prefix}: nothing there")
    return Text("\n".join(lines))


__all__ = ["DEFAULT_SECONDS", "RATE_KEY", "TRANSFORM_DECISIONS", "TransformResult", "autoscale",
           "delete_transform_output", "measured_seconds", "record_rate", "remove_autoscaling", "run_transform",
           "scaling_target"]

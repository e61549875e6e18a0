"""The command line's commands of notebooks 06 to 08 (measure, operate, clean up) and the local rehearsal's:
each group a function that adds its commands through ``add(name, func, help, description, aliases)``, which
``cli.build_parser`` passes."""

from __future__ import annotations

from .aws import inference_components
from .cli_commands import (
    cmd_alarms,
    cmd_audit,
    cmd_autoscale,
    cmd_bench,
    cmd_calibrate,
    cmd_captured,
    cmd_cleanup,
    cmd_delete_alarms,
    cmd_delete_artifacts,
    cmd_delete_builds,
    cmd_delete_codebuild_role,
    cmd_delete_deadline_role,
    cmd_running,
    cmd_scale_to_zero,
    cmd_stop_local,
    cmd_transform,
    cmd_update,
)
from .cli_flags import AddCommand, name_flag, target_flags, task_flags, workshop_flags


def add_measure_commands(add: AddCommand) -> None:
    """bench, captured, calibrate (06)."""
    p = add(
        "bench",
        cmd_bench,
        "benchmark a decision endpoint: validity, accuracy, latency, baselines, plots (06)",
        "Send labelled tasks (JevBench JSONL or decision records; default: the packaged set) to a decision "
        "endpoint, sequentially (as the blog) or with --concurrency N clients, and report valid responses, "
        "accuracy by family and type, client p50/p95/max and throughput. Opt-in: a generation baseline "
        "through the chat schema, an option-order test, an order-debiased readout and temperature "
        "calibration. Writes report.json, report.md and PNGs to --out; --compare puts a saved report.json "
        "beside this run (e.g. CPU vs GPU).",
    )
    workshop_flags(p)
    target_flags(p, default="the deploy path's decision endpoint")
    task_flags(p, out="output folder (default: bench/ beside the config file)")
    p.add_argument(
        "--concurrency", type=int, metavar="N", help="requests in flight for the decision run (default 1: sequential)"
    )
    p.add_argument(
        "--baseline",
        action="append",
        nargs="?",
        const="generation",
        choices=("generation", "logprobs"),
        help="also a baseline: generation (the default; chat, parse the reply) or logprobs (the decision "
        "prompt's first-token top_logprobs from the standard endpoint); repeat for both",
    )
    p.add_argument(
        "--standard-url",
        metavar="URL",
        help="the standard endpoint for --baseline logprobs: a URL serving /invocations, or a "
        "llama-server's .../v1/chat/completions (default: the config's standard endpoint)",
    )
    p.add_argument("--bias", action="store_true", help="also send the options reversed; report top-choice flips")
    p.add_argument(
        "--debias",
        action="store_true",
        help="also the order-debiased readout (the adapter's rotations mode, for the options as declared "
        "and reversed); implies --bias",
    )
    p.add_argument(
        "--study-limit",
        type=int,
        metavar="N",
        help="run the baseline and order studies on N of the tasks (default: all)",
    )
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="fit a temperature on the dev tasks; ECE and Brier before/after on the rest",
    )
    p.add_argument("--compare", metavar="REPORT_JSON", help="a saved report.json to show side by side")
    p.add_argument("--label", help="name of this run in tables, e.g. cpu, gpu (default: decision)")
    p.add_argument(
        "--schema",
        choices=("decision", "systemone"),
        help="send the tasks as decisions (default) or as Jev /v1/systemone questions",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = add(
        "captured",
        cmd_captured,
        "read a decision endpoint's captured decisions into tasks to label (06)",
        "Read what SageMaker's data capture recorded for the endpoint (locally: what the stand-in hosting wrote "
        "into the emulator's S3, in the same layout), and write its decisions as JevBench task records with an "
        "empty expected, one a line, for a person to label; labelled, they feed calibrate --tasks.",
    )
    workshop_flags(p, "bucket", "prefix")
    name_flag(p)
    task_flags(
        p,
        tasks=False,
        limit="read at most N captured invocations (oldest first)",
        out="the JSONL file to write (default: captured/<endpoint>.jsonl beside the config file)",
    )

    p = add(
        "calibrate",
        cmd_calibrate,
        "fit a temperature and a prediction-set threshold per question type and option count: calibration.json (06)",
        "Send labelled tasks (JevBench JSONL; default: the packaged set) to a decision endpoint at temperature 1 "
        "in one order mode (or read a saved run with --run), fit a temperature per <question_type>/<band> "
        "profile on the fitting split, keep it only where at least 5 held-out answers judge it and their NLL "
        "improves, fit the split-conformal threshold whose prediction sets cover the labelled answer in at "
        "least 1 - alpha of held-out tasks (kept with at least ceil(1/alpha) - 1 of them), and write "
        "calibration.json for that GGUF, prompt version and readout. `package-model --calibration "
        "PATH` puts it into the next package; the adapter applies it to requests in the same order mode.",
    )
    workshop_flags(p)
    target_flags(p, default="the deploy path's decision endpoint")
    task_flags(p, out="where to write it (default: calibration.json beside the config file)")
    p.add_argument(
        "--order",
        choices=("as_given", "prior", "rotations"),
        help="the order mode to fit for (default as_given); the adapter applies the file in that mode only",
    )
    p.add_argument(
        "--readout",
        choices=("letters", "cloze"),
        help="the readout to fit for (default: the one the endpoint serves, as its answers report it; "
        "with --run, the one the run was read with); the adapter applies the file to that readout only",
    )
    p.add_argument(
        "--alpha",
        type=float,
        help="the prediction sets' miss rate: they cover the labelled answer in at "
        "least 1 - alpha of held-out tasks (default 0.1; recorded in the file)",
    )
    p.add_argument("--run", metavar="RUN_JSON", help="a saved temperature-1 run (Run.to_dict) instead of sending tasks")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_operate_commands(add: AddCommand) -> None:
    """alarms, update, delete-alarms, autoscale, transform (07), scale-to-zero."""
    p = add(
        "alarms",
        cmd_alarms,
        "put a decision endpoint's alarms and the workshop's dashboard (07)",
        "PutMetricAlarm for the endpoint's six alarms, named <endpoint>/<what>: SageMaker's ModelLatency p95, "
        "Invocation5XXErrors and InvocationsPerInstance, the adapter's latency p95, busy 503s and time-limit "
        "stops (from its metric lines); then PutDashboard for the workshop's one dashboard. Putting them again "
        "replaces them; delete-alarms deletes exactly these names.",
    )
    workshop_flags(p)
    name_flag(p)
    p.add_argument("--latency-p95-ms", type=float, help="latency alarms' threshold in ms (default 2000)")
    p.add_argument("--errors-5xx", type=float, help="5XX errors per minute that fire the alarm (default 5)")

    p = add(
        "update",
        cmd_update,
        "roll a decision endpoint to a new model package or image, blue/green (07)",
        "Create a new version of the endpoint's model and endpoint config (<endpoint>-<UTC time>, the shape "
        "deploy makes) and send UpdateEndpoint with a blue/green deployment: traffic moves ALL_AT_ONCE (or a "
        "CANARY half first, on 2 instances or more), the new fleet is watched for --bake seconds, and the "
        "endpoint rolls back by itself if one of its rollback alarms fires (put them first with `alarms`). "
        "Waits, printing each status the endpoint passes through. Locally the stand-in replaces the local "
        "endpoint's process once the new one is ready.",
    )
    workshop_flags(p, "bucket", "sagemaker_role_arn")
    name_flag(p)
    p.add_argument(
        "--model-data-url",
        help="s3://.../model.tar.gz to roll to (default: the calibrated package "
        "notebook 07 made, else the one package-model recorded)",
    )
    p.add_argument("--image-uri", help="image pinned by digest (default: the one build-image recorded)")
    p.add_argument("--routing", choices=("ALL_AT_ONCE", "CANARY"), help="traffic routing (default ALL_AT_ONCE)")
    p.add_argument("--bake", type=int, metavar="SECONDS", help="how long the new fleet is watched (default 300)")
    p.add_argument("--ctx-size", "--context-size", type=int, help="llama.cpp context size of the new version")
    p.add_argument("--threads", type=int, help="llama.cpp threads of the new version")
    p.add_argument("--dry-run", action="store_true", help="print the validated requests, send nothing")

    p = add("delete-alarms", cmd_delete_alarms, "delete the decision endpoints' alarms and the dashboard (08)")
    workshop_flags(p)
    p.add_argument(
        "--name",
        action="append",
        metavar="NAME",
        help="an endpoint whose alarms to delete; repeat for more (default: both decision endpoints)",
    )

    p = add(
        "autoscale",
        cmd_autoscale,
        "auto scale a decision endpoint on invocations per instance (07)",
        "RegisterScalableTarget for the endpoint's variant (--min to --max instances) and PutScalingPolicy "
        "with target tracking on SageMakerVariantInvocationsPerInstance: --target invocations per instance "
        "per minute, by default 70 %% of the sustainable rate notebook 06 measured under concurrent callers "
        "(or of one instance's pace one decision at a time). --remove deletes the policy and deregisters the variant (08).",
    )
    workshop_flags(p)
    name_flag(p)
    p.add_argument(
        "--target",
        type=float,
        help="invocations per instance per minute to track (default: 70 %% "
        "of the sustainable rate 06 kept, else of its median pace one decision at a time)",
    )
    p.add_argument("--min", type=int, help="fewest instances (default 1)")
    p.add_argument("--max", type=int, help="most instances (default 2)")
    p.add_argument("--remove", action="store_true", help="delete the scaling policy and the scalable target")
    p.add_argument("--show-requests", action="store_true", help="print the AWS requests sent, secrets masked")

    p = add(
        "transform",
        cmd_transform,
        "run one Batch Transform job of decisions with the decision model (07)",
        "Upload the decisions as JSON Lines under <prefix>/batch-input/, run a transform job with the model "
        "the endpoint serves (one record per request, in order), and read the answers back from "
        "<prefix>/batch-output/decisions.jsonl.out, joined by decision id. Locally the endpoint's process "
        "answers every record. --delete-output deletes both folders (08).",
    )
    workshop_flags(p, "bucket")
    name_flag(p, what="endpoint whose model the job runs")
    p.add_argument(
        "--decisions",
        metavar="JSONL",
        help="decisions, one JSON object with an id per line (default: three example tickets)",
    )
    p.add_argument("--instance-type", help="transform instance type (default: the endpoint's, where offered)")
    p.add_argument("--delete-output", action="store_true", help="delete batch-input/ and batch-output/")
    p.add_argument("--no-progress", action="store_true", help="do not print the job's status as it changes")
    p.add_argument("--show-requests", action="store_true", help="print the AWS requests sent, secrets masked")

    p = add(
        "scale-to-zero",
        cmd_scale_to_zero,
        "deploy the decision model on an endpoint that scales to zero instances, and show it (07)",
        "Deploy the decision image's model as an inference component on an endpoint whose instances SageMaker "
        "manages down to 0 (ManagedInstanceScaling MinInstanceCount 0, the endpoint config's execution role), "
        "with the copies' scalable target from 0, target tracking on requests per copy and a step policy on the "
        "NoCapacityInvocationFailures alarm that scales out from zero; then take the copies to 0, show the "
        "decision SageMaker refuses meanwhile (retryable, with the expected wait), bring one copy back and time "
        "the cold start, and print the cost idle and busy. --dry-run prints the requests; --remove deletes it "
        "all, the component before the endpoint. Locally a stand-in runs each copy as a local process.",
    )
    workshop_flags(p, "bucket", "sagemaker_role_arn")
    name_flag(p, default=inference_components.ZERO_ENDPOINT)
    p.add_argument("--instance-type", help=f"a CPU type, c, m or r (default {inference_components.ZERO_INSTANCE})")
    p.add_argument("--max-instances", type=int, help="most instances (and copies), 1-20 (default 1)")
    p.add_argument("--image-uri", help="decision image pinned by digest (default: the one build-image recorded)")
    p.add_argument("--model-data-url", help="s3://.../model.tar.gz (default: the one package-model recorded)")
    p.add_argument("--dry-run", action="store_true", help="print the validated requests, send nothing")
    p.add_argument("--deploy-only", action="store_true", help="deploy, without the scale to zero and back")
    p.add_argument("--show-only", action="store_true", help="scale the deployed endpoint to zero and back")
    p.add_argument("--remove", action="store_true", help="delete the alarm, scaling, component and endpoint")
    p.add_argument("--show-requests", action="store_true", help="print the AWS requests sent, secrets masked")


def add_cleanup_commands(add: AddCommand) -> None:
    """cleanup, the builds, roles and artifacts, what is running, the audit, stop-local (08)."""
    p = add(
        "cleanup",
        cmd_cleanup,
        "delete endpoints with their config, model, deadline and log group (08)",
        "Delete the named endpoints (--name, repeated), by default the config's three, each with its "
        "endpoint config, model, deadline and log group, and only what carries the workshop's tag; nothing "
        "else. Locally also stop their adapter processes.",
        aliases=("delete-endpoints",),
    )
    workshop_flags(p)
    p.add_argument(
        "--name",
        action="append",
        metavar="NAME",
        help="an endpoint name (its config and model share it); repeat for more",
    )
    p.add_argument("--no-wait", action="store_true", help="do not wait until the endpoint is gone")

    p = add(
        "delete-builds",
        cmd_delete_builds,
        "delete the two CodeBuild projects and the ECR repository (08)",
        "Delete the model-packaging and image-build CodeBuild projects with their log groups, and the ECR "
        "repository with its images, each only if it carries the workshop's tag (one of the same name without "
        "it is kept, images and all, and the output says why); what is already gone is said, not raised.",
    )
    workshop_flags(p, "ecr_repository")

    p = add(
        "delete-codebuild-role",
        cmd_delete_codebuild_role,
        "delete the CodeBuild role codebuild-role created (a role given by ARN is left alone) (08)",
    )
    workshop_flags(p, "codebuild_role_arn")

    p = add(
        "delete-deadline-role",
        cmd_delete_deadline_role,
        "delete the role the endpoint deadlines run as (08, once no endpoint is left)",
    )
    workshop_flags(p)

    p = add("delete-artifacts", cmd_delete_artifacts, "delete the objects under the workshop's S3 prefix (08)")
    workshop_flags(p, "bucket", "prefix")
    p.add_argument("--delete-bucket", action="store_true", help="also the bucket, if nothing else is in it")

    p = add("running", cmd_running, "list workshop-tagged endpoints still running, with their age (08)")
    workshop_flags(p)

    p = add("audit", cmd_audit, "local mode: hold every recorded AWS call against the generated policies (08)")
    workshop_flags(p, "bucket", "prefix", "ecr_repository")

    p = add("stop-local", cmd_stop_local, "local mode: stop the local endpoints and the AWS emulator (08)")
    workshop_flags(p)

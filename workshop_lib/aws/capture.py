"""SageMaker data capture for decision endpoints: the config, the records, and reading them back.

Decision endpoints are created with a ``DataCaptureConfig`` (``data_capture_config``): SageMaker
then writes each sampled invocation's request and answer to S3 as JSON Lines, one object per line,
under ``<destination>/<endpoint>/<variant>/yyyy/mm/dd/hh/<file>.jsonl``. A record is::

    {"captureData": {"endpointInput":  {"observedContentType", "mode": "INPUT",  "data", "encoding"},
                     "endpointOutput": {"observedContentType", "mode": "OUTPUT", "data", "encoding"}},
     "eventMetadata": {"eventId", "inferenceId" (when the caller gave one), "inferenceTime"},
     "eventVersion": "0"}

``encoding`` is ``JSON`` (``data`` is the body's text) for the content types the config lists under
``CaptureContentTypeHeader.JsonContentTypes``, ``CSV`` for its CSV types, and ``BASE64`` otherwise,
SageMaker's default. The workshop lists ``application/json`` so that captures are readable as they
are; the reader decodes all three.

In local rehearsal nothing captures on the endpoint's side: ``workshop_lib.local.capture_stand_in`` writes the
same records from the client's side, and ``read_captured`` reads both alike.

``captured_tasks`` turns captured decisions into the benchmark's task records (JevBench's format,
``evaluation/tasks.py``) with an empty ``expected`` for a person to fill in.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from .. import name_rules
from ..config import WorkshopConfig, check_capture_percent
from ..errors import InvalidInput
from . import calls

CAPTURE_FOLDER = "capture"  # under the workshop prefix: the only place the SageMaker role may write captures
JSON = "application/json"
EVENT_VERSION = "0"
MODES = {"endpointInput": "INPUT", "endpointOutput": "OUTPUT"}

log = logging.getLogger(__name__)


# ---- the config (pure) -----------------------------------------------------------------------------


check_percent = check_capture_percent  # 0-100, else an InvalidInput naming WORKSHOP_CAPTURE_PERCENT


def destination_uri(config: WorkshopConfig) -> str:
    """``s3://<bucket>/<prefix>/capture``: where the workshop's endpoints capture (the SageMaker role's only write)."""
    return config.s3_uri(CAPTURE_FOLDER)


def data_capture_config(
    destination_uri: str, percent: str | int, *, json_types: Iterable[str] = (JSON,)
) -> dict[str, Any] | None:
    """The endpoint config's DataCaptureConfig: request and answer, ``percent`` of invocations, under
    ``destination_uri``; None for 0 %. Checked by botocore as a member of CreateEndpointConfig."""
    percent = check_percent(percent)
    if percent == 0:
        return None
    name_rules.split_s3_uri(destination_uri)  # an s3:// URI with a bucket
    config = {
        "EnableCapture": True,
        "InitialSamplingPercentage": percent,
        "DestinationS3Uri": destination_uri.rstrip("/"),
        "CaptureOptions": [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}],
        "CaptureContentTypeHeader": {"JsonContentTypes": list(json_types)},
    }
    calls.validate(
        "sagemaker",
        "CreateEndpointConfig",
        {
            "EndpointConfigName": "capture-check",
            "DataCaptureConfig": config,
            "ProductionVariants": [{"VariantName": "v", "ModelName": "m"}],
        },
    )
    return config


# ---- records (pure) --------------------------------------------------------------------------------


def _base_type(content_type: str) -> str:
    return content_type.split(";")[0].strip().lower()


def encode(
    body: bytes, content_type: str, *, json_types: Iterable[str] = (JSON,), csv_types: Iterable[str] = ()
) -> tuple[str, str]:
    """(data, encoding) as SageMaker records a body of ``content_type``."""
    base = _base_type(content_type)
    try:
        if base in {_base_type(t) for t in json_types}:
            return body.decode("utf-8"), "JSON"
        if base in {_base_type(t) for t in csv_types}:
            return body.decode("utf-8"), "CSV"
    except UnicodeDecodeError:
        pass
    return base64.b64encode(body).decode("ascii"), "BASE64"


def decode(part: Mapping[str, Any]) -> bytes:
    """The body one side of a record holds, whatever its encoding."""
    data: str = part.get("data", "")
    encoding = str(part.get("encoding", "")).upper()
    if encoding in ("JSON", "CSV"):
        return data.encode("utf-8")
    if encoding == "BASE64":
        return base64.b64decode(data)
    raise InvalidInput(f"a capture record has encoding {encoding!r}; SageMaker writes JSON, CSV or BASE64")


def _iso(when: dt.datetime) -> str:
    return when.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def capture_record(
    request: bytes,
    response: bytes,
    *,
    when: dt.datetime,
    event_id: str,
    inference_id: str | None = None,
    request_type: str = JSON,
    response_type: str = JSON,
    json_types: Iterable[str] = (JSON,),
    csv_types: Iterable[str] = (),
) -> dict[str, Any]:
    """One invocation as SageMaker's data capture records it."""
    json_types, csv_types = tuple(json_types), tuple(csv_types)
    parts = {}
    for side, body, content_type in (
        ("endpointInput", request, request_type),
        ("endpointOutput", response, response_type),
    ):
        data, encoding = encode(body, content_type, json_types=json_types, csv_types=csv_types)
        parts[side] = {"observedContentType": content_type, "mode": MODES[side], "data": data, "encoding": encoding}
    metadata = {
        "eventId": event_id,
        **({"inferenceId": inference_id} if inference_id else {}),
        "inferenceTime": _iso(when),
    }
    return {"captureData": parts, "eventMetadata": metadata, "eventVersion": EVENT_VERSION}


def capture_folder(destination_uri: str, endpoint: str, variant: str | None = None) -> tuple[str, str]:
    """(bucket, key prefix) of one endpoint's captures (one variant's, given ``variant``)."""
    split = name_rules.split_s3_uri(destination_uri.rstrip("/"))
    if split is None:
        raise InvalidInput(f"capture destination {destination_uri!r} is not an s3://bucket/prefix URI")
    bucket, key = split
    parts = [p for p in (key.strip("/"), endpoint, variant) if p]
    return bucket, "/".join(parts) + "/"


def capture_key(destination_uri: str, endpoint: str, variant: str, when: dt.datetime, file_id: str) -> tuple[str, str]:
    """(bucket, key) of a capture file written at ``when``: SageMaker's hourly folders."""
    bucket, folder = capture_folder(destination_uri, endpoint, variant)
    when = when.astimezone(dt.timezone.utc)
    return bucket, f"{folder}{when:%Y/%m/%d/%H}/{when:%M-%S}-{when.microsecond // 1000:03d}-{file_id}.jsonl"


@dataclass(frozen=True)
class CapturedEvent:
    """One captured invocation, read back."""

    event_id: str
    inference_id: str | None
    inference_time: str
    request: bytes
    response: bytes | None
    request_type: str
    key: str = ""

    def request_json(self) -> Any:
        return json.loads(self.request)

    def response_json(self) -> Any:
        return json.loads(self.response) if self.response else None

    @property
    def request_id(self) -> str | None:
        """The adapter's request id from the captured answer (System One's ``x_request_id``), else SageMaker's
        inference id."""
        try:
            answer = self.response_json()
        except ValueError:
            answer = None
        found = (answer.get("request_id") or answer.get("x_request_id")) if isinstance(answer, dict) else None
        return found or self.inference_id


def parse_line(line: str, key: str = "") -> CapturedEvent:
    try:
        record = json.loads(line)
        data, metadata = record["captureData"], record["eventMetadata"]
        request = data["endpointInput"]
    except (ValueError, KeyError, TypeError):
        raise InvalidInput(
            f"{key or 'a capture file'} holds a line that is not a SageMaker capture record: {line[:120]!r}"
        ) from None
    output = data.get("endpointOutput")
    return CapturedEvent(
        event_id=metadata.get("eventId", ""),
        inference_id=metadata.get("inferenceId"),
        inference_time=metadata.get("inferenceTime", ""),
        request=decode(request),
        response=decode(output) if output else None,
        request_type=request.get("observedContentType", ""),
        key=key,
    )


def parse_file(text: str, key: str = "") -> list[CapturedEvent]:
    return [parse_line(line, key) for line in text.splitlines() if line.strip()]


# ---- reading (emulator and AWS alike) --------------------------------------------------------------


def read_captured(
    s3_client: Any, destination_uri: str, endpoint: str, variant: str | None = None, *, limit: int | None = None
) -> list[CapturedEvent]:
    """Every captured invocation of ``endpoint`` under ``destination_uri``, oldest file first."""
    bucket, prefix = capture_folder(destination_uri, endpoint, variant)
    keys = []
    for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [item["Key"] for item in page.get("Contents", []) if item["Key"].endswith(".jsonl")]
    events: list[CapturedEvent] = []
    for key in sorted(keys):  # the key's hourly folders and file names sort by time
        body = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read().decode("utf-8")
        events += parse_file(body, key)
        if limit is not None and len(events) >= limit:
            return events[:limit]
    return events


# ---- captured decisions as tasks to label ----------------------------------------------------------


def _questions(body: Mapping[str, Any]) -> tuple[str, Any, list[Mapping[str, Any]]]:
    """(batch id, state, questions) of a captured decision: this project's schema or the sample's."""
    if isinstance(body.get("decision"), Mapping):
        one = body["decision"]
        return one.get("id", ""), one.get("state"), [one]
    if isinstance(body.get("decisions"), list):
        many = [d for d in body["decisions"] if isinstance(d, Mapping)]
        return "", many[0].get("state") if many else None, many
    if isinstance(body.get("questions"), list):
        return body.get("id", ""), body.get("state"), [q for q in body["questions"] if isinstance(q, Mapping)]
    if "question" in body and "options" in body:
        return "", body.get("state"), [body]
    return "", None, []  # chat, Jev or OpenAI Decisions: not decisions of this schema


def _options(question: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = []
    for option in question.get("options") or []:
        if isinstance(option, str):
            out.append((option, option))
        elif isinstance(option, Mapping) and isinstance(option.get("id"), str):
            out.append((option["id"], option.get("text") or option.get("description") or option["id"]))
    return out


def _jevbench_question(
    kind: str | None, instructions: str, options: list[tuple[str, str]]
) -> tuple[dict[str, Any], list[Any]]:
    ids = [oid for oid, _ in options]
    if kind == "noul" and ids == ["no", "yes"]:
        return {"type": "noul", "instructions": instructions}, ids
    if kind == "score" and ids == [str(i) for i in range(len(ids))]:
        return {"type": "score", "instructions": instructions, "criteria": [text for _, text in options]}, ids
    return {"type": "choice", "instructions": instructions, "criteria": dict(options)}, ids


def captured_tasks(events: Iterable[CapturedEvent]) -> list[dict[str, Any]]:
    """Captured decisions as JevBench task records (``evaluation/tasks.py``) with ``expected`` null, to be
    labelled by a person; ``provenance`` says which capture each came from. Answers of other APIs
    (chat, Jev, the OpenAI Decisions API) are skipped."""
    tasks = []
    for event in events:
        try:
            body = event.request_json()
        except ValueError:
            continue
        if not isinstance(body, Mapping):
            continue
        batch_id, state, questions = _questions(body)
        for index, question in enumerate(questions):
            options = _options(question)
            if len(options) < 2 or state in (None, ""):
                continue
            qid = str(question.get("id") or index)
            task_id = qid if len(questions) == 1 and question.get("id") else f"{batch_id or event.event_id}/{qid}"
            kind = question.get("question_type", body.get("question_type"))
            spec, labels = _jevbench_question(kind, str(question.get("question", "")), options)
            tasks.append(
                {
                    "id": task_id,
                    "family": kind or "captured",
                    "state": state,
                    "question": spec,
                    "labels": labels,
                    "expected": None,
                    "split": "test",
                    "group": None,
                    "provenance": {
                        "capture": {
                            "request_id": event.request_id,
                            "event_id": event.event_id,
                            "inference_time": event.inference_time,
                            "file": event.key,
                        }
                    },
                }
            )
    return tasks


@dataclass(frozen=True)
class Captured:
    """What ``collect`` read: the endpoint, where from, how many invocations, and the tasks they made."""

    endpoint: str
    destination: str
    events: int
    tasks: list[dict[str, Any]]

    def __str__(self) -> str:
        return (
            f"{self.events} captured invocation{'s' if self.events != 1 else ''} of {self.endpoint} under "
            f"{self.destination}: {len(self.tasks)} decision task{'s' if len(self.tasks) != 1 else ''} to label"
        )


def endpoint_capture(sm_client: Any, name: str) -> tuple[dict[str, Any], str] | None:
    """(the DataCaptureConfig, the variant name) of endpoint ``name``'s config when it captures, else None.

    Read from DescribeEndpointConfig, which holds the config as created, on AWS and in the emulator
    alike (the emulator's DescribeEndpoint lacks the sampling percentage).
    """
    config_name = sm_client.describe_endpoint(EndpointName=name)["EndpointConfigName"]
    config = sm_client.describe_endpoint_config(EndpointConfigName=config_name)
    capture = config.get("DataCaptureConfig") or {}
    if not capture.get("DestinationS3Uri") or capture.get("EnableCapture") is False:
        return None
    return capture, config["ProductionVariants"][0]["VariantName"]


def collect(
    sm_client: Any, s3_client: Any, name: str, *, default_destination: str, limit: int | None = None
) -> Captured:
    """Endpoint ``name``'s captured decisions as tasks to label; its config names where they are (the
    workshop's ``<prefix>/capture`` once the endpoint is gone)."""
    try:
        found = endpoint_capture(sm_client, name)
    except ClientError:  # deleted already: its captures stay where the workshop puts them
        found = None
    destination = found[0]["DestinationS3Uri"] if found else default_destination
    events = read_captured(s3_client, destination, name, limit=limit)
    return Captured(name, destination, len(events), captured_tasks(events))


def write_tasks(tasks: Iterable[Mapping[str, Any]], path: str | Path) -> Path:
    """The tasks as JSON Lines (one JevBench record a line), ready for a person to fill in ``expected``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(task, ensure_ascii=False) + "\n" for task in tasks), encoding="utf-8")
    return path

"""One line per API request in CloudWatch's embedded metric format (EMF), on the worker's stdout.

SageMaker sends a container's standard output to CloudWatch Logs (``/aws/sagemaker/Endpoints/<name>``),
and CloudWatch turns a log event that is an EMF object into metrics without any API call from the
container: the ``_aws`` member names the namespace, the dimension set and each metric's unit, and
the values sit at the top level beside them, with properties (``request_id``, ``order``, ``readout``,
``status``) that are searchable in the log but are not metrics. Locally the same lines land in the
endpoint's log file.

What a line holds is collected while the request is served (``RequestFacts``): the API that answered
it, how long it waited at the gate, what the scoring core answered, read from its answer records
(options summed over the request's questions, abstentions, order mode, readout), the tokens the engine
read (its count where the work's timing gives one, else the questions' prompt tokens summed) and whether it ended busy (503) or stopped at its time limit. A metric the request did not produce
(no queue wait for a refused body, no abstention field in an answer) is left out of the line, not
reported as zero; the counts ``Busy`` and ``TimeLimitStops`` are always there, as 0 or 1.

The endpoint dimension is the setting ``DECISION_ADAPTER_ENDPOINT_NAME`` (the workshop sets it to the
endpoint's name when it deploys; SageMaker itself documents no variable naming the endpoint), else
"local".
The emitting code is the format itself, a few lines of JSON: the ``aws-embedded-metrics`` package
would add an asynchronous sink and a flush per request to a threaded worker for the same line.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from .answer_record import AnswerRecord

NAMESPACE = "DecisionAdapter"
DIMENSIONS = ("endpoint", "api")
# The names request_kind gives the dialects, as the metric's api dimension spells them: what the workshop's
# alarms are set on. The line itself takes the name from the API's record (apis/registry.py); a test keeps
# the two equal.
API_NAMES = {
    "decision": "own",
    "sample": "sample",
    "systemone": "systemone",
    "openai_decisions": "openai_decisions",
    "chat": "chat",
}

# name -> (unit, the RequestFacts attribute it reads)
METRICS = {
    "Latency": ("Milliseconds", "latency_ms"),
    "QueueWait": ("Milliseconds", "queue_wait_ms"),
    "InputTokens": ("Count", "input_tokens"),
    "Options": ("Count", "options"),
    "Abstained": ("Count", "abstained"),
    "Busy": ("Count", "busy"),
    "TimeLimitStops": ("Count", "time_limit_stops"),
}

_write_lock = threading.Lock()


@dataclass
class RequestFacts:
    """What one request produced that its metric line reports; filled in as it is served."""

    request_id: str
    started: float = field(default_factory=time.perf_counter)
    api: str = "unknown"
    status: int | None = None
    latency_ms: float | None = None
    queue_wait_ms: float | None = None
    input_tokens: int | None = None
    options: int | None = None
    abstained: int | None = None
    order: str | None = None
    readout: str | None = None  # letters or cloze; "mixed" when a batch's questions used both
    busy: int = 0
    time_limit_stops: int = 0

    def finish(self, status: int) -> None:
        self.status = status
        self.latency_ms = (time.perf_counter() - self.started) * 1000.0

    def read_work(self, result: Any) -> None:
        """Read what the API's work returned: ``(answers, timing)``, the answers the scoring core's records
        (decisions) or something else (a chat completion, whose timing counts its prompt's tokens)."""
        if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], Mapping)):
            return
        answers, timing = result
        answers = [a for a in answers if isinstance(a, AnswerRecord)] if isinstance(answers, (list, tuple)) else []
        tokens = timing.get("input_tokens")
        if isinstance(tokens, (int, float)) and not isinstance(tokens, bool):
            self.input_tokens = int(tokens)
        elif answers:
            self.input_tokens = sum(a.input_tokens for a in answers)  # each question's prompt, when no count came
        if answers:
            self.options = sum(a.n_options for a in answers)
            self.abstained = sum(a.abstained for a in answers)
            self.order = answers[0].order
            readouts = {a.readout for a in answers}
            self.readout = readouts.pop() if len(readouts) == 1 else "mixed"


def emf_line(facts: RequestFacts, *, endpoint: str, timestamp_ms: int | None = None) -> dict[str, Any]:
    """The EMF object for one request (pure): declared metrics are exactly the values present."""
    values = {name: getattr(facts, attribute) for name, (_, attribute) in METRICS.items()}
    values = {name: value for name, value in values.items() if value is not None}
    line: dict[str, Any] = {
        "_aws": {
            "Timestamp": int(time.time() * 1000) if timestamp_ms is None else timestamp_ms,
            "CloudWatchMetrics": [
                {
                    "Namespace": NAMESPACE,
                    "Dimensions": [list(DIMENSIONS)],
                    "Metrics": [{"Name": name, "Unit": METRICS[name][0]} for name in values],
                }
            ],
        },
        "endpoint": endpoint,
        "api": facts.api,
        **{name: round(value, 3) if isinstance(value, float) else value for name, value in values.items()},
        "request_id": facts.request_id,
        "status": facts.status,
    }
    if facts.order is not None:
        line["order"] = facts.order
    if facts.readout is not None:
        line["readout"] = facts.readout
    return line


def write(line: dict[str, Any], stream: TextIO | None = None) -> None:
    """One line, whole: worker threads never interleave their lines."""
    text = json.dumps(line, ensure_ascii=True, separators=(",", ":")) + "\n"
    stream = stream or sys.stdout
    with _write_lock:
        stream.write(text)
        stream.flush()

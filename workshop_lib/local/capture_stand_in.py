"""The local stand-in's data capture: in local rehearsal nothing captures on the endpoint's side, so it is
done on the client's. ``capture_locally`` wraps the transport of a client for a local endpoint whose
config enables capture (``endpoint_capture`` reads it from the emulator) in a ``CapturingTransport``,
which writes each sampled invocation in SageMaker's layout (``workshop_lib.aws.capture``) into the
emulator's S3 with the SageMaker role's identity, one file per invocation (SageMaker batches several
records a file).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import random
import uuid
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from typing import Any

from botocore.exceptions import ClientError

from ..aws.capture import capture_key, capture_record, check_percent, endpoint_capture
from ..aws.policies import SAGEMAKER
from ..client.transport import Deadline, new_inference_id

log = logging.getLogger(__name__)


class CaptureWriter:
    """Writes sampled invocations of one endpoint as SageMaker would (the stand-in hosting's capture)."""

    def __init__(
        self,
        s3_client: Any,
        config: Mapping[str, Any],
        endpoint: str,
        variant: str,
        *,
        acting_as: Callable[[], Any] = nullcontext,
        sample: Callable[[], float] = random.random,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.timezone.utc),
    ) -> None:
        self.s3, self.endpoint, self.variant = s3_client, endpoint, variant
        self.destination = config["DestinationS3Uri"]
        self.percent = check_percent(
            config.get("InitialSamplingPercentage", config.get("CurrentSamplingPercentage", 0))
        )
        self.enabled = config.get("EnableCapture", True) and self.percent > 0
        header = config.get("CaptureContentTypeHeader") or {}
        self.json_types = tuple(header.get("JsonContentTypes") or ())
        self.csv_types = tuple(header.get("CsvContentTypes") or ())
        self.acting_as, self.sample, self.clock = acting_as, sample, clock

    def capture(self, request: bytes, response: bytes, *, inference_id: str | None = None) -> str | None:
        """Write one invocation if it is sampled; the S3 key written, or None."""
        if not self.enabled or self.sample() * 100 >= self.percent:
            return None
        when, event_id = self.clock(), str(uuid.uuid4())
        record = capture_record(
            request,
            response,
            when=when,
            event_id=event_id,
            inference_id=inference_id,
            json_types=self.json_types,
            csv_types=self.csv_types,
        )
        bucket, key = capture_key(self.destination, self.endpoint, self.variant, when, event_id)
        with self.acting_as():
            self.s3.put_object(
                Bucket=bucket,
                Key=key,
                Body=(json.dumps(record) + "\n").encode("utf-8"),
                ContentType="application/jsonl",
            )
        return key


class CapturingTransport:
    """A transport whose successful invocations are also captured (local rehearsal only)."""

    def __init__(self, transport: Any, writer: CaptureWriter) -> None:
        self.transport, self.writer = transport, writer
        self.failures = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)

    def invoke(self, body: bytes, *, deadline: Deadline | None = None, inference_id: str | None = None) -> bytes:
        # As SageMaker does: the invocation's id reaches the adapter and the capture record alike.
        inference_id = inference_id or new_inference_id()
        reply: bytes = self.transport.invoke(body, deadline=deadline, inference_id=inference_id)
        try:
            self.writer.capture(body, reply, inference_id=inference_id)
        except Exception as exc:
            self.failures += 1
            if self.failures == 1:
                log.warning(
                    "data capture of %s failed (the decision itself was answered): %s", self.writer.endpoint, exc
                )
        return reply


def capture_locally(
    client: Any,
    sm_client: Any,
    s3_client: Any,
    name: str,
    *,
    acting_as: Callable[[str | None], Any] | None = None,
) -> Any:
    """``client`` (for local endpoint ``name``) capturing as the endpoint's config asks; unchanged without it.

    ``acting_as(principal)``: the rehearsal's call log, so the writes count as the SageMaker role's."""
    try:
        with acting_as(None) if acting_as else nullcontext():  # the stand-in's own lookup: no call AWS would see
            found = endpoint_capture(sm_client, name)
    except ClientError as exc:  # the emulator no longer knows the endpoint: serve the calls, capture nothing
        log.warning("no data capture for %s: its endpoint config cannot be read (%s)", name, exc)
        return client
    if found is None:
        return client
    config, variant = found
    as_sagemaker = (lambda: acting_as(SAGEMAKER)) if acting_as else nullcontext
    client.transport = CapturingTransport(
        client.transport, CaptureWriter(s3_client, config, name, variant, acting_as=as_sagemaker)
    )
    return client

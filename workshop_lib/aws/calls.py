"""Small shared helpers around boto3: the one client factory, and request validation by botocore.

Builders elsewhere in the library return plain request dicts. ``validate``
checks such a dict against botocore's own service model (the same check boto3
runs before sending), so a misspelt field fails at build time, in tests and
in local rehearsal, without an AWS account. ``wait_for_status`` is the one
poll-with-progress loop the senders wait with.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from botocore.config import Config
from botocore.exceptions import ParamValidationError
from botocore.validate import ParamValidator

from ..errors import InvalidInput
from ..name_rules import operation_model


def validate(service: str, operation: str, params: dict[str, Any]) -> dict[str, Any]:
    """Return params unchanged if botocore accepts them for service.operation, else raise."""
    model = operation_model(service, operation)
    report = ParamValidator().validate(params, model.input_shape)
    if report.has_errors():
        raise InvalidInput(f"{service}.{operation}: {report.generate_report()}")
    return params


# One retry policy for every control-plane call (SageMaker, S3, ECR, CodeBuild, IAM, Logs, STS),
# from the notebooks, the command line and the rehearsal alike: botocore's standard mode, which
# retries throttling, transient 5xx and connection errors with backoff, 5 attempts in all. The
# decision client's runtime calls are the one exception: botocore makes a single attempt there and
# EndpointClient counts its own retries (client.py).
CONTROL_PLANE = Config(retries={"mode": "standard", "total_max_attempts": 5}, connect_timeout=10, read_timeout=60)


def client(
    service: str,
    region: str | None,
    *,
    endpoint_url: str | None = None,
    session: Any = None,
    config: Config | None = None,
) -> Any:
    """The library's one boto3 client factory; ``endpoint_url`` points a client at the local AWS
    emulator in local mode, ``config`` replaces the control-plane retry policy."""
    import boto3

    session = session or boto3.session.Session()
    return session.client(service, region_name=region, endpoint_url=endpoint_url, config=config or CONTROL_PLANE)


def region_of(client: Any) -> str:
    """The region a boto3 client was made for: the flows that take a client read it here, not from a caller."""
    region: str = client.meta.region_name
    return region


def wait_for_status(
    describe: Callable[[], dict[str, Any]],
    key: str,
    *,
    done: str,
    label: str,
    failure: Callable[[dict[str, Any]], Exception | None],
    timeout: Callable[[str], Exception],
    poll_s: float,
    timeout_s: float,
    progress: bool = True,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Call ``describe()`` every ``poll_s`` s until ``response[key] == done``; return that response.

    ``failure(response)`` is the exception for a status that will not reach ``done`` (None:
    keep waiting); once ``timeout_s`` s have passed, ``timeout(status)`` is raised. With
    ``progress``, one line shows "<label>: <status> [elapsed]", ending "<label>: <status> after N s".
    """
    from tqdm.auto import tqdm

    started = clock()
    status = "unknown"
    bar = tqdm(desc=label, total=None, bar_format="{desc} [{elapsed}]", disable=not progress)
    try:
        while True:
            response = describe()
            status = response[key]
            bar.set_description_str(f"{label}: {status}")
            if status == done:
                return response
            error = failure(response)
            if error is not None:
                raise error
            if clock() - started >= timeout_s:
                raise timeout(status)
            sleep(poll_s)
    finally:
        bar.set_description_str(f"{label}: {status} after {clock() - started:.0f} s")
        bar.close()


__all__ = ["ParamValidationError", "client", "operation_model", "region_of", "validate", "wait_for_status"]

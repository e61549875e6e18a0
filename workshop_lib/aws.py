"""Small shared helpers around boto3: clients, and request validation by botocore.

Builders elsewhere in the library return plain request dicts. ``validate``
checks such a dict against botocore's own service model (the same check boto3
runs before sending), so a misspelt field fails at build time, in tests and
in local rehearsal, without an AWS account.
"""

from __future__ import annotations

import botocore.session
from botocore.exceptions import ParamValidationError
from botocore.validate import ParamValidator

_session = botocore.session.get_session()


class InvalidRequest(ValueError):
    """A request dict that botocore's service model rejects."""


def operation_model(service: str, operation: str):
    return _session.get_service_model(service).operation_model(operation)


def validate(service: str, operation: str, params: dict) -> dict:
    """Return params unchanged if botocore accepts them for service.operation, else raise."""
    model = operation_model(service, operation)
    report = ParamValidator().validate(params, model.input_shape)
    if report.has_errors():
        raise InvalidRequest(f"{service}.{operation}: {report.generate_report()}")
    return params


def client(service: str, region: str, *, endpoint_url: str | None = None, session=None):
    """A boto3 client; endpoint_url points it at the local AWS emulator in local mode."""
    import boto3

    session = session or boto3.session.Session()
    return session.client(service, region_name=region, endpoint_url=endpoint_url)


__all__ = ["InvalidRequest", "ParamValidationError", "client", "operation_model", "validate"]

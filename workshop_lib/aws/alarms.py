"""CloudWatch alarms and one dashboard for the decision endpoints: pure builders, and one sender.

Two sources of metrics are watched:

* SageMaker's own, in ``AWS/SageMaker`` with the dimensions ``EndpointName`` and ``VariantName``:
  ``ModelLatency`` at p95 (microseconds), ``Invocation5XXErrors`` and ``InvocationsPerInstance``;
* the adapter's, from the one embedded-metric-format line it logs per request (namespace
  ``ADAPTER_NAMESPACE``, dimensions ``endpoint`` and ``api``): its own latency at p95, the busy 503s
  it answered and the requests its time limit stopped. The adapter publishes one series per API,
  so each of these alarms is metric math over the endpoint's series: the worst API's p95, the sum
  of the counts.

Every alarm is named ``<endpoint>/<what>`` (``alarm_name``), so the operator policy grants them by
the endpoint's name and cleanup deletes exactly these names. The dashboard is the workshop's one
(``DASHBOARD``). ``rollback_alarms`` are the ones a blue/green update watches (``updates``): errors
and latency, not load. Builders return request dicts checked by botocore's model (``calls.validate``)
plus the enums and bounds botocore leaves to the service; ``put_alarms`` sends them through a
CloudWatch client from the workshop's client factory.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import name_rules
from ..errors import InvalidInput
from . import calls
from .model_requests import check_tags, workshop_tags
from .variants import VARIANT_NAME

SAGEMAKER_NAMESPACE = "AWS/SageMaker"
# The adapter's embedded metric format lines, as container/decision_adapter/metrics.py writes them (the
# client never imports server code; tests/workshop_lib/test_alarms.py holds the two to each other):
# namespace, its one dimension set, the API names and the metrics (latency in milliseconds).
ADAPTER_NAMESPACE = "DecisionAdapter"
ADAPTER_DIMENSIONS = ("endpoint", "api")
ADAPTER_APIS = ("own", "sample", "systemone", "openai_decisions", "chat")
ADAPTER_LATENCY = "Latency"
ADAPTER_BUSY = "Busy"
ADAPTER_TIME_LIMIT = "TimeLimitStops"

DASHBOARD = name_rules.WORKSHOP_TAGS[name_rules.TAG_WORKSHOP]  # "decision-workshop"
PERIOD_S = 60
MAX_ROLLBACK_ALARMS = 10  # UpdateEndpoint's AutoRollbackConfiguration takes at most 10


@dataclass(frozen=True)
class Thresholds:
    """When each alarm fires. Latencies in milliseconds, counts per minute; the defaults suit the
    workshop's CPU decision endpoint (a decision takes well under a second there)."""

    latency_p95_ms: float = 2000.0
    errors_5xx: float = 5.0
    invocations_per_instance: float = 1200.0
    busy_503: float = 20.0
    time_limit_stops: float = 1.0

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise InvalidInput(f"Thresholds.{name} is {value!r}; it must be a number above 0")


# (suffix, namespace, metric, statistic or pNN, unit, threshold field, scale to the metric's unit, rollback?)
_ALARMS = (
    ("model-latency-p95", SAGEMAKER_NAMESPACE, "ModelLatency", "p95", "Microseconds", "latency_p95_ms", 1000, True),
    ("invocation-5xx-errors", SAGEMAKER_NAMESPACE, "Invocation5XXErrors", "Sum", "Count", "errors_5xx", 1, True),
    (
        "invocations-per-instance",
        SAGEMAKER_NAMESPACE,
        "InvocationsPerInstance",
        "Sum",
        "Count",
        "invocations_per_instance",
        1,
        False,
    ),
    ("adapter-latency-p95", ADAPTER_NAMESPACE, ADAPTER_LATENCY, "p95", "Milliseconds", "latency_p95_ms", 1, True),
    ("adapter-busy-503", ADAPTER_NAMESPACE, ADAPTER_BUSY, "Sum", "Count", "busy_503", 1, False),
    ("adapter-time-limit-stops", ADAPTER_NAMESPACE, ADAPTER_TIME_LIMIT, "Sum", "Count", "time_limit_stops", 1, True),
)
SUFFIXES = tuple(a[0] for a in _ALARMS)


def _check_choice(value: str, operation: str, member: str, what: str) -> str:
    allowed = calls.operation_model("cloudwatch", operation).input_shape.members[member].enum
    if value not in allowed:
        raise InvalidInput(f"{what} {value!r} is not one of {', '.join(allowed)}")
    return value


def alarm_name(endpoint_name: str, suffix: str) -> str:
    """``<endpoint>/<suffix>``: the endpoint's name first, so IAM grants its alarms by that prefix."""
    if suffix not in SUFFIXES:
        raise InvalidInput(f"no alarm {suffix!r}; the workshop's are {', '.join(SUFFIXES)}")
    if not endpoint_name or "/" in endpoint_name:
        raise InvalidInput(f"endpoint name {endpoint_name!r} cannot name an alarm (empty or with a /)")
    return f"{endpoint_name}/{suffix}"


def alarm_names(endpoint_name: str) -> list[str]:
    return [alarm_name(endpoint_name, s) for s in SUFFIXES]


def rollback_alarms(endpoint_name: str) -> list[str]:
    """The alarms a blue/green update of the endpoint rolls back on: errors and latency."""
    return [alarm_name(endpoint_name, a[0]) for a in _ALARMS if a[7]]


def _sagemaker_dimensions(endpoint_name: str, variant: str) -> list[dict[str, Any]]:
    return [{"Name": "EndpointName", "Value": endpoint_name}, {"Name": "VariantName", "Value": variant}]


def _adapter_metrics(endpoint_name: str, metric: str, statistic: str, period_s: int) -> list[dict[str, Any]]:
    """The endpoint's series of ``metric``, one per API, and one expression over them that the alarm
    watches: the worst p95, or the sum of counts."""
    queries = [
        {
            "Id": f"m{i}",
            "ReturnData": False,
            "MetricStat": {
                "Metric": {
                    "Namespace": ADAPTER_NAMESPACE,
                    "MetricName": metric,
                    "Dimensions": [{"Name": "endpoint", "Value": endpoint_name}, {"Name": "api", "Value": api}],
                },
                "Period": period_s,
                "Stat": statistic,
            },
        }
        for i, api in enumerate(ADAPTER_APIS)
    ]
    combine = "MAX" if statistic.startswith("p") else "SUM"
    queries.append(
        {
            "Id": "all",
            "ReturnData": True,
            "Label": f"{metric} ({statistic}) over every API",
            "Expression": f"{combine}(METRICS())",
        }
    )
    return queries


def alarm_request(
    endpoint_name: str,
    suffix: str,
    *,
    thresholds: Thresholds = Thresholds(),
    variant: str = VARIANT_NAME,
    period_s: int = PERIOD_S,
    evaluation_periods: int = 3,
    datapoints_to_alarm: int = 2,
    tags: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """PutMetricAlarm for one of the endpoint's alarms: fires when ``datapoints_to_alarm`` of the last
    ``evaluation_periods`` periods pass the threshold; no data (an idle endpoint) is not a breach."""
    spec = next((a for a in _ALARMS if a[0] == suffix), None)
    if spec is None:
        raise InvalidInput(f"no alarm {suffix!r}; an endpoint's alarms are {', '.join(a[0] for a in _ALARMS)}")
    name = alarm_name(endpoint_name, suffix)
    _, namespace, metric, statistic, unit, field, scale, _ = spec
    if period_s not in (10, 30) and (period_s < 60 or period_s % 60):
        raise InvalidInput(f"period_s is {period_s}; CloudWatch takes 10, 30 or a multiple of 60")
    if not 1 <= datapoints_to_alarm <= evaluation_periods:
        raise InvalidInput(
            f"datapoints_to_alarm ({datapoints_to_alarm}) must be between 1 and evaluation_periods "
            f"({evaluation_periods})"
        )
    if period_s * evaluation_periods > 86400:
        raise InvalidInput("period_s x evaluation_periods may not exceed one day (86400 s)")
    threshold = float(getattr(thresholds, field)) * scale
    request = {
        "AlarmName": name,
        "AlarmDescription": f"decision workshop: {metric} of endpoint {endpoint_name} ({statistic}) above "
        f"{threshold:g} {unit.lower()} per {period_s} s",
        "EvaluationPeriods": evaluation_periods,
        "DatapointsToAlarm": datapoints_to_alarm,
        "Threshold": threshold,
        "ComparisonOperator": _check_choice(
            "GreaterThanThreshold", "PutMetricAlarm", "ComparisonOperator", "comparison"
        ),
        # No Unit: an alarm whose Unit differs from the one the data is published in never sees the data.
        "TreatMissingData": "notBreaching",
        "Tags": check_tags(list(tags if tags is not None else workshop_tags())),
    }
    if namespace == ADAPTER_NAMESPACE:
        request["Metrics"] = _adapter_metrics(endpoint_name, metric, statistic, period_s)
        return calls.validate("cloudwatch", "PutMetricAlarm", request)
    request.update(
        {
            "Namespace": namespace,
            "MetricName": metric,
            "Period": period_s,
            "Dimensions": _sagemaker_dimensions(endpoint_name, variant),
        }
    )
    if statistic.startswith("p"):
        request["ExtendedStatistic"] = statistic
    else:
        request["Statistic"] = _check_choice(statistic, "PutMetricAlarm", "Statistic", "statistic")
    return calls.validate("cloudwatch", "PutMetricAlarm", request)


def alarm_requests(endpoint_name: str, **settings: Any) -> list[dict[str, Any]]:
    """Every alarm of one endpoint, as PutMetricAlarm requests."""
    return [alarm_request(endpoint_name, suffix, **settings) for suffix in SUFFIXES]


def _widget(title: str, metrics: list[list[Any]], stat: str, region: str, x: int, y: int) -> dict[str, Any]:
    return {
        "type": "metric",
        "x": x,
        "y": y,
        "width": 12,
        "height": 6,
        "properties": {
            "title": title,
            "metrics": metrics,
            "stat": stat,
            "period": PERIOD_S,
            "region": region,
            "view": "timeSeries",
        },
    }


def dashboard_body(endpoint_names: Sequence[str], region: str, *, variant: str = VARIANT_NAME) -> dict[str, Any]:
    """The dashboard's widgets: per endpoint, SageMaker's latency, errors and load beside the adapter's."""
    if not endpoint_names:
        raise InvalidInput("the dashboard needs at least one endpoint name")

    def sagemaker(metric: str) -> list[list[Any]]:
        return [[SAGEMAKER_NAMESPACE, metric, "EndpointName", n, "VariantName", variant] for n in endpoint_names]

    def adapter(metric: str) -> list[list[Any]]:
        return [[ADAPTER_NAMESPACE, metric, "endpoint", n, "api", api] for n in endpoint_names for api in ADAPTER_APIS]

    panels = [
        ("ModelLatency p95 (microseconds, SageMaker)", sagemaker("ModelLatency"), "p95"),
        ("adapter latency p95 (ms)", adapter(ADAPTER_LATENCY), "p95"),
        ("Invocation5XXErrors (SageMaker)", sagemaker("Invocation5XXErrors"), "Sum"),
        ("busy 503s and time-limit stops (adapter)", adapter(ADAPTER_BUSY) + adapter(ADAPTER_TIME_LIMIT), "Sum"),
        ("InvocationsPerInstance (SageMaker)", sagemaker("InvocationsPerInstance"), "Sum"),
    ]
    return {
        "widgets": [
            _widget(title, metrics, stat, region, x=12 * (i % 2), y=6 * (i // 2))
            for i, (title, metrics, stat) in enumerate(panels)
        ]
    }


def dashboard_request(endpoint_names: Sequence[str], region: str, *, name: str = DASHBOARD) -> dict[str, Any]:
    """PutDashboard for the workshop's one dashboard (names: letters, digits, - and _, up to 255)."""
    import re

    if not re.fullmatch(r"[A-Za-z0-9_-]{1,255}", name):
        raise InvalidInput(f"dashboard name {name!r} is not valid: 1-255 letters, digits, - and _")
    body = json.dumps(dashboard_body(endpoint_names, region), separators=(",", ":"))
    return calls.validate("cloudwatch", "PutDashboard", {"DashboardName": name, "DashboardBody": body})


# ---- sending --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AlarmsResult:
    alarms: tuple[str, ...]
    dashboard: str
    rollback: tuple[str, ...]

    def __str__(self) -> str:
        return "\n".join(
            [
                f"alarm {name}: put{' (an update rolls back on it)' if name in self.rollback else ''}"
                for name in self.alarms
            ]
            + [f"dashboard {self.dashboard}: put"]
        )


def put_alarms(
    cloudwatch: Any, endpoint_names: Iterable[str], region: str | None = None, **settings: Any
) -> AlarmsResult:
    """PutMetricAlarm for every alarm of each endpoint, then PutDashboard (its graphs in the client's region,
    or ``region``); both replace what is there."""
    endpoint_names = list(dict.fromkeys(endpoint_names))
    sent, rollback = [], []
    for endpoint in endpoint_names:
        for request in alarm_requests(endpoint, **settings):
            cloudwatch.put_metric_alarm(**request)
            sent.append(request["AlarmName"])
        rollback += rollback_alarms(endpoint)
    dashboard = dashboard_request(endpoint_names, region or calls.region_of(cloudwatch))
    cloudwatch.put_dashboard(**dashboard)
    return AlarmsResult(tuple(sent), dashboard["DashboardName"], tuple(rollback))


def alarm_states(cloudwatch: Any, endpoint_name: str) -> dict[str, str]:
    """Alarm name -> state (OK, ALARM, INSUFFICIENT_DATA) for the endpoint's alarms that exist."""
    request = calls.validate("cloudwatch", "DescribeAlarms", {"AlarmNames": alarm_names(endpoint_name)})
    found = cloudwatch.describe_alarms(**request).get("MetricAlarms", [])
    return {a["AlarmName"]: a["StateValue"] for a in found}


__all__ = [
    "ADAPTER_NAMESPACE",
    "DASHBOARD",
    "SUFFIXES",
    "AlarmsResult",
    "Thresholds",
    "alarm_name",
    "alarm_names",
    "alarm_request",
    "alarm_requests",
    "alarm_states",
    "dashboard_body",
    "dashboard_request",
    "put_alarms",
    "rollback_alarms",
]

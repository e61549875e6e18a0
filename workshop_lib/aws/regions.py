"""Where SageMaker offers what the workshop uses, region by region.

Instance pools (``InstancePools`` in a production variant) are offered in a subset of the commercial
regions only; elsewhere ``CreateEndpointConfig`` refuses a variant that carries them. The GPU plan
(``endpoints.decision_gpu_plan``) reads this table: outside it, the variant gets one fixed ``InstanceType``
(``endpoints.gpu_instance_types``) and the plan says so.

The table is a snapshot, so a region missing from it gets the fixed type (which works everywhere the
type is offered) rather than a request that may be refused. Add a region here once AWS lists it.
"""

from __future__ import annotations

# Source: the "Supported Regions" table of the AWS sample aws-samples/sagemaker-genai-hosting-examples,
# 03-features/capacity-aware-instance-pool/README.md (commit 826afc6, 2026-05-01: "16 AWS regions"),
# read on 2026-12-01. The SageMaker Developer Guide page on instance pools
# (docs.aws.amazon.com/sagemaker/latest/dg/realtime-endpoints-heterogeneous.html), read the same day,
# describes the feature without a region list, so the sample's table is the one written down.
INSTANCE_POOL_REGIONS_SOURCE = (
    "aws-samples/sagemaker-genai-hosting-examples, 03-features/capacity-aware-instance-pool/README.md (2026-05-01)"
)
INSTANCE_POOL_REGIONS_READ_ON = "2026-12-01"
INSTANCE_POOL_REGIONS: dict[str, str] = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-2": "US West (Oregon)",
    "ca-central-1": "Canada (Central)",
    "sa-east-1": "South America (Sao Paulo)",
    "eu-west-1": "Europe (Ireland)",
    "eu-west-2": "Europe (London)",
    "eu-central-1": "Europe (Frankfurt)",
    "eu-central-2": "Europe (Zurich)",
    "eu-north-1": "Europe (Stockholm)",
    "ap-south-1": "Asia Pacific (Mumbai)",
    "ap-northeast-1": "Asia Pacific (Tokyo)",
    "ap-northeast-2": "Asia Pacific (Seoul)",
    "ap-southeast-1": "Asia Pacific (Singapore)",
    "ap-southeast-2": "Asia Pacific (Sydney)",
    "ap-southeast-3": "Asia Pacific (Jakarta)",
}


def offers_instance_pools(region: str | None) -> bool:
    """True where the table says SageMaker takes ``InstancePools`` (False for regions not in it)."""
    return region in INSTANCE_POOL_REGIONS


def no_pools_note(region: str, instance_type: str, others: tuple[str, ...] | list[str] = ()) -> str:
    """The one line a plan carries when it falls back to a fixed type."""
    rest = f"; no fallback to {', '.join(others)}" if others else ""
    return (
        f"instance pools are not offered in {region} (regions.INSTANCE_POOL_REGIONS, read "
        f"{INSTANCE_POOL_REGIONS_READ_ON}): the GPU endpoint runs on one type, {instance_type}, as a fixed "
        f"InstanceType{rest}"
    )


# China and GovCloud have consoles of their own; the commercial one takes the region as a subdomain.
CONSOLE_HOSTS = {"cn-": "console.amazonaws.cn", "us-gov-": "console.amazonaws-us-gov.com"}


def console_url(region: str, service: str, fragment: str = "") -> str:
    """A page of ``service``'s console in ``region``, on the console of the region's partition."""
    host = next(
        (h for prefix, h in CONSOLE_HOSTS.items() if region.startswith(prefix)), f"{region}.console.aws.amazon.com"
    )
    return f"https://{host}/{service}/home?region={region}" + (f"#{fragment}" if fragment else "")

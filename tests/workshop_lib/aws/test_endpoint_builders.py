"""The pure builders: every request passes botocore's validation, and what botocore
does not check (maximums, enums, pool rules, conflicting settings) is refused here."""

import copy

import pytest

from workshop_lib.aws import calls, endpoints, hosting, instance_types, model_requests, regions, variants
from workshop_lib.aws.endpoints import decision_cpu_plan, decision_cpu_settings, decision_gpu_plan, standard_plan
from workshop_lib.aws.images import MutableImageReference, parse_image_uri
from workshop_lib.errors import InvalidInput

from .values import DECISION_PINNED, DLC_PINNED, MODEL_DATA, ROLE

TAGGED = "763104351884.dkr.ecr.us-east-1.amazonaws.com/llama-cpp:server-sagemaker-cpu-v1"


def _revalidate(plan):
    for operation, request in plan.requests():
        calls.validate("sagemaker", operation, request)


def gpu_plan(**kw):
    args = dict(image=parse_image_uri(DECISION_PINNED), role_arn=ROLE, model_data_url=MODEL_DATA)
    args.update(kw)
    return decision_gpu_plan("semif-decision-gpu", **args)


# ---- botocore validation ------------------------------------------------------------------------


def test_validate_catches_a_misspelt_field():
    plan = gpu_plan()
    misspelt = copy.deepcopy(plan.endpoint_config)
    variant = misspelt["ProductionVariants"][0]
    variant["InstancePool"] = variant.pop("InstancePools")
    with pytest.raises(InvalidInput, match="InstancePool"):
        calls.validate("sagemaker", "CreateEndpointConfig", misspelt)
    misspelt = copy.deepcopy(plan.model)
    misspelt["PrimaryContainer"]["ModelDataURL"] = misspelt["PrimaryContainer"].pop("ModelDataUrl")
    with pytest.raises(InvalidInput, match="ModelDataURL"):
        calls.validate("sagemaker", "CreateModel", misspelt)


def test_the_gpu_ami_is_in_botocores_enum():
    assert variants.GPU_AMI_VERSION in instance_types.inference_ami_versions()
    assert variants.GPU_AMI_VERSION.startswith("al2023-")  # the AL2023 AMI carries driver 580 / CUDA 13


def test_default_instance_types_are_in_botocores_enum():
    allowed = instance_types.endpoint_instance_types()
    for t in (endpoints.STANDARD_CPU_INSTANCE, endpoints.DECISION_CPU_INSTANCE, *endpoints.DEFAULT_GPU_POOLS):
        assert t in allowed


# ---- standard DLC ------------------------------------------------------------------------------


def test_standard_plan_with_model_tarball():
    plan = standard_plan(
        "decision-workshop-standard", image=parse_image_uri(DLC_PINNED), role_arn=ROLE, model_data_url=MODEL_DATA
    )
    _revalidate(plan)
    container = plan.model["PrimaryContainer"]
    assert container["Image"] == DLC_PINNED
    assert container["ModelDataUrl"] == MODEL_DATA
    assert container["Environment"] == {"SM_LLAMA_CPP_CTX_SIZE": "4096"}
    variant = plan.endpoint_config["ProductionVariants"][0]
    assert variant["InstanceType"] == "ml.c6i.2xlarge"
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 900
    assert "InferenceAmiVersion" not in variant and "InstancePools" not in variant
    assert plan.endpoint == {
        "EndpointName": "decision-workshop-standard",
        "EndpointConfigName": "decision-workshop-standard",
        "Tags": model_requests.workshop_tags(),
    }


def test_every_resource_carries_the_workshop_tags():
    plan = standard_plan(
        "decision-workshop-standard", image=parse_image_uri(DLC_PINNED), role_arn=ROLE, model_data_url=MODEL_DATA
    )
    for _, request in plan.requests():
        tags = {t["Key"]: t["Value"] for t in request["Tags"]}
        assert tags == {"workshop": "decision-workshop", "created-by": "workshop_lib"}
    custom = model_requests.workshop_tags("ws-2026", "alice", {"team": "ml"})
    plan = standard_plan("e", image=parse_image_uri(DLC_PINNED), role_arn=ROLE, model_data_url=MODEL_DATA, tags=custom)
    assert (
        plan.endpoint["Tags"]
        == custom
        == [
            {"Key": "workshop", "Value": "ws-2026"},
            {"Key": "created-by", "Value": "alice"},
            {"Key": "team", "Value": "ml"},
        ]
    )


def test_standard_plan_sets_llama_settings_from_arguments():
    plan = standard_plan(
        "e",
        image=parse_image_uri(DLC_PINNED),
        role_arn=ROLE,
        model_data_url=MODEL_DATA,
        ctx_size=8192,
        threads=8,
        environment={"SM_LLAMA_CPP_PARALLEL": "1"},
    )
    assert plan.model["PrimaryContainer"]["Environment"] == {
        "SM_LLAMA_CPP_CTX_SIZE": "8192",
        "SM_LLAMA_CPP_THREADS": "8",
        "SM_LLAMA_CPP_PARALLEL": "1",
    }


def test_standard_plan_hugging_face_alternative():
    plan = standard_plan(
        "e",
        image=parse_image_uri(DLC_PINNED),
        role_arn=ROLE,
        hf_repo="bartowski/Qwen_Qwen3.5-4B-GGUF",
        hf_file="Qwen_Qwen3.5-4B-Q4_K_M.gguf",
    )
    _revalidate(plan)
    container = plan.model["PrimaryContainer"]
    assert "ModelDataUrl" not in container
    assert container["Environment"]["SM_LLAMA_CPP_HF_REPO"] == "bartowski/Qwen_Qwen3.5-4B-GGUF"
    assert container["Environment"]["SM_LLAMA_CPP_HF_FILE"] == "Qwen_Qwen3.5-4B-Q4_K_M.gguf"
    assert plan.model["EnableNetworkIsolation"] is False  # the DLC downloads the GGUF at start-up


# ---- network isolation: neither image needs the network at run time ---------------------------------


def test_both_models_are_network_isolated_in_the_validated_request():
    standard = standard_plan("e", image=parse_image_uri(DLC_PINNED), role_arn=ROLE, model_data_url=MODEL_DATA)
    cpu = decision_cpu_plan("e", image=parse_image_uri(DECISION_PINNED), role_arn=ROLE, model_data_url=MODEL_DATA)
    gpu = gpu_plan()
    for plan in (standard, cpu, gpu):
        assert plan.model["EnableNetworkIsolation"] is True
        calls.validate("sagemaker", "CreateModel", plan.model)  # a member botocore's model knows
    assert "EnableNetworkIsolation" in calls.operation_model("sagemaker", "CreateModel").input_shape.members


def test_an_isolated_model_cannot_download_from_hugging_face():
    with pytest.raises(InvalidInput, match="network_isolation=False"):
        model_requests.model_request(
            "e", image=parse_image_uri(DLC_PINNED), role_arn=ROLE, environment={"SM_LLAMA_CPP_HF_REPO": "a/b"}
        )
    made = model_requests.model_request(
        "e",
        image=parse_image_uri(DLC_PINNED),
        role_arn=ROLE,
        network_isolation=False,
        environment={"SM_LLAMA_CPP_HF_REPO": "a/b"},
    )
    assert made["EnableNetworkIsolation"] is False


def test_hugging_face_download_is_refused_together_with_a_tarball():
    with pytest.raises(InvalidInput, match="--hf-repo"):
        standard_plan("e", image=parse_image_uri(DLC_PINNED), role_arn=ROLE, model_data_url=MODEL_DATA, hf_repo="a/b")
    # also when smuggled in through the raw environment
    with pytest.raises(InvalidInput):
        model_requests.model_request(
            "e",
            image=parse_image_uri(DLC_PINNED),
            role_arn=ROLE,
            model_data_url=MODEL_DATA,
            environment={"SM_LLAMA_CPP_HF_REPO": "a/b"},
        )


def test_standard_plan_needs_a_model_source():
    with pytest.raises(InvalidInput, match="model_data_url"):
        standard_plan("e", image=parse_image_uri(DLC_PINNED), role_arn=ROLE)
    with pytest.raises(InvalidInput, match="hf_repo"):
        standard_plan("e", image=parse_image_uri(DLC_PINNED), role_arn=ROLE, hf_file="x.gguf")


def test_standard_plan_on_a_gpu_type_gets_the_cuda13_ami():
    plan = standard_plan(
        "e",
        image=parse_image_uri(DLC_PINNED),
        role_arn=ROLE,
        model_data_url=MODEL_DATA,
        instance_type="ml.g6.xlarge",
        n_gpu_layers=-1,
    )
    variant = plan.endpoint_config["ProductionVariants"][0]
    assert variant["InferenceAmiVersion"] == variants.GPU_AMI_VERSION
    assert plan.model["PrimaryContainer"]["Environment"]["SM_LLAMA_CPP_N_GPU_LAYERS"] == "999"


@pytest.mark.parametrize("url", ["s3://bucket/model.gguf", "https://example.com/model.tar.gz", "bucket/model.tar.gz"])
def test_model_data_must_be_one_s3_tarball(url):
    with pytest.raises(InvalidInput, match="tar.gz"):
        standard_plan("e", image=parse_image_uri(DLC_PINNED), role_arn=ROLE, model_data_url=url)


def test_mutable_image_references_are_refused_by_every_builder():
    for build in (standard_plan, decision_cpu_plan, decision_gpu_plan):
        with pytest.raises(MutableImageReference):
            build("e", image=parse_image_uri(TAGGED), role_arn=ROLE, model_data_url=MODEL_DATA)


def test_bad_names_and_roles_are_refused_before_sending():
    with pytest.raises(InvalidInput):
        standard_plan("my_endpoint", image=parse_image_uri(DLC_PINNED), role_arn=ROLE, model_data_url=MODEL_DATA)
    with pytest.raises(InvalidInput):
        standard_plan(
            "e",
            image=parse_image_uri(DLC_PINNED),
            role_arn="arn:aws:iam::123456789012:user/bob",
            model_data_url=MODEL_DATA,
        )


def test_unknown_instance_type_is_refused_with_the_family_offered():
    with pytest.raises(InvalidInput, match="ml.c6i.2xlarge"):
        standard_plan(
            "e",
            image=parse_image_uri(DLC_PINNED),
            role_arn=ROLE,
            model_data_url=MODEL_DATA,
            instance_type="ml.c6i.3xlarge",
        )


# ---- decision image on CPU -------------------------------------------------------------------------


def test_decision_cpu_plan():
    plan = decision_cpu_plan(
        "decision-workshop-cpu",
        image=parse_image_uri(DECISION_PINNED),
        role_arn=ROLE,
        model_data_url=MODEL_DATA,
        environment={"DECISION_ADAPTER_MAX_QUEUE": "8"},
    )
    _revalidate(plan)
    assert plan.model["PrimaryContainer"]["Environment"] == {
        "SM_LLAMA_CPP_THREADS": "32",
        "SM_LLAMA_CPP_N_GPU_LAYERS": "0",  # the context: the adapter's default
        "SM_LLAMA_CPP_PARALLEL": "4",
        "SM_LLAMA_CPP_FLASH_ATTN": "auto",
        "DECISION_ADAPTER_MAX_QUEUE": "8",
    }
    assert decision_cpu_settings() == {"SM_LLAMA_CPP_PARALLEL": "4", "SM_LLAMA_CPP_FLASH_ATTN": "auto"}
    variant = plan.endpoint_config["ProductionVariants"][0]
    assert variant["InstanceType"] == "ml.c6i.8xlarge"
    assert not plan.uses_instance_pools


def test_decision_cpu_threads_follow_the_instance_or_the_caller():
    plan = decision_cpu_plan(
        "e",
        image=parse_image_uri(DECISION_PINNED),
        role_arn=ROLE,
        model_data_url=MODEL_DATA,
        instance_type="ml.c6i.2xlarge",
    )
    assert plan.model["PrimaryContainer"]["Environment"]["SM_LLAMA_CPP_THREADS"] == "8"
    plan = decision_cpu_plan(
        "e", image=parse_image_uri(DECISION_PINNED), role_arn=ROLE, model_data_url=MODEL_DATA, threads=12
    )
    assert plan.model["PrimaryContainer"]["Environment"]["SM_LLAMA_CPP_THREADS"] == "12"


def test_decision_cpu_parallel_and_flash_attention_are_the_callers_to_change():
    plan = decision_cpu_plan(
        "e",
        image=parse_image_uri(DECISION_PINNED),
        role_arn=ROLE,
        model_data_url=MODEL_DATA,
        parallel=1,
        flash_attn="off",
    )
    env = plan.model["PrimaryContainer"]["Environment"]
    assert env["SM_LLAMA_CPP_PARALLEL"] == "1" and env["SM_LLAMA_CPP_FLASH_ATTN"] == "off"
    with pytest.raises(InvalidInput, match="flash_attn 'yes' is not one of on, off, auto"):
        decision_cpu_plan(
            "e", image=parse_image_uri(DECISION_PINNED), role_arn=ROLE, model_data_url=MODEL_DATA, flash_attn="yes"
        )


def test_decision_cpu_refuses_gpu_types():
    with pytest.raises(InvalidInput, match="decision_gpu_plan"):
        decision_cpu_plan(
            "e",
            image=parse_image_uri(DECISION_PINNED),
            role_arn=ROLE,
            model_data_url=MODEL_DATA,
            instance_type="ml.g5.xlarge",
        )


@pytest.mark.parametrize(
    "instance_type, expected",
    [("ml.c6i.large", 2), ("ml.c6i.xlarge", 4), ("ml.c6i.8xlarge", 32), ("ml.c5.9xlarge", 36), ("ml.t2.medium", 1)],
)
def test_vcpus(instance_type, expected):
    assert instance_types.vcpus(instance_type) == expected


# ---- decision image on GPU instance pools ---------------------------------------------------------------


def test_decision_gpu_plan_defaults():
    plan = gpu_plan()
    _revalidate(plan)
    variant = plan.endpoint_config["ProductionVariants"][0]
    assert variant["InstancePools"] == [
        {"InstanceType": "ml.g6e.xlarge", "Priority": 1},
        {"InstanceType": "ml.g6.2xlarge", "Priority": 2},
        {"InstanceType": "ml.g5.2xlarge", "Priority": 3},
        {"InstanceType": "ml.g4dn.2xlarge", "Priority": 4},
    ]
    assert "InstanceType" not in variant
    assert "VolumeSizeInGB" not in variant
    assert variant["VariantInstanceProvisionTimeoutInSeconds"] == 1200
    assert variant["InferenceAmiVersion"] == "al2023-ami-sagemaker-inference-gpu-4-1"
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 900  # as the published sample
    assert variant["ModelDataDownloadTimeoutInSeconds"] == 900
    assert plan.model["PrimaryContainer"]["Environment"]["SM_LLAMA_CPP_N_GPU_LAYERS"] == "999"
    assert plan.model["PrimaryContainer"]["Environment"]["SM_LLAMA_CPP_PARALLEL"] == str(endpoints.GPU_PARALLEL)
    assert plan.uses_instance_pools
    assert plan.notes == () and plan.placement.endswith("(ordered pools)")


def test_requests_evaluated_at_once_are_checked_where_they_are_set():
    assert gpu_plan(parallel=8).model["PrimaryContainer"]["Environment"]["SM_LLAMA_CPP_PARALLEL"] == "8"
    with pytest.raises(InvalidInput, match="parallel"):
        gpu_plan(parallel=0)


# ---- regions without instance pools ----------------------------------------------------------------


def test_the_region_table_records_its_source_and_date():
    assert len(regions.INSTANCE_POOL_REGIONS) == 16  # as the AWS sample's README counts them
    assert "capacity-aware-instance-pool" in regions.INSTANCE_POOL_REGIONS_SOURCE
    assert regions.INSTANCE_POOL_REGIONS_READ_ON.count("-") == 2
    for region in regions.INSTANCE_POOL_REGIONS:
        assert regions.offers_instance_pools(region)
    for region in ("af-south-1", "us-west-1", "me-central-1", "cn-north-1", "us-gov-west-1", None, ""):
        assert not regions.offers_instance_pools(region)


@pytest.mark.parametrize("region", sorted(regions.INSTANCE_POOL_REGIONS))
def test_pools_where_the_region_offers_them(region):
    plan = gpu_plan(region=region)
    assert plan.uses_instance_pools and plan.notes == ()


@pytest.mark.parametrize("region", ["af-south-1", "us-west-1", "eu-south-2"])
def test_elsewhere_the_first_pool_is_a_fixed_instance_type_and_the_plan_says_so(region):
    plan = gpu_plan(region=region, instance_pools=("ml.g6.2xlarge", "ml.g5.2xlarge"))
    _revalidate(plan)  # the request sent there, through botocore's model
    variant = plan.endpoint_config["ProductionVariants"][0]
    assert variant["InstanceType"] == "ml.g6.2xlarge"
    assert "InstancePools" not in variant and "VariantInstanceProvisionTimeoutInSeconds" not in variant
    assert variant["InferenceAmiVersion"] == "al2023-ami-sagemaker-inference-gpu-4-1"  # still the CUDA 13 AMI
    assert not plan.uses_instance_pools and plan.placement == "ml.g6.2xlarge (fixed)"
    (note,) = plan.notes
    assert region in note and "ml.g6.2xlarge" in note and "ml.g5.2xlarge" in note and "fixed InstanceType" in note
    assert plan.model["PrimaryContainer"]["Environment"]["SM_LLAMA_CPP_N_GPU_LAYERS"] == "999"


def test_the_fixed_fallback_keeps_the_checks_of_the_pool_list():
    with pytest.raises(InvalidInput, match="repeat"):
        gpu_plan(region="af-south-1", instance_pools=("ml.g5.2xlarge", "ml.g5.2xlarge"))
    with pytest.raises(InvalidInput, match="CUDA 13"):
        gpu_plan(region="af-south-1", instance_pools=("ml.p3.2xlarge",))
    with pytest.raises(InvalidInput, match="no GPU"):
        gpu_plan(region="af-south-1", instance_pools=("ml.c5.2xlarge",))


def test_pool_priorities_follow_the_given_order():
    plan = gpu_plan(instance_pools=["ml.g5.2xlarge", "ml.g6e.xlarge"])
    pools = plan.endpoint_config["ProductionVariants"][0]["InstancePools"]
    assert pools == [{"InstanceType": "ml.g5.2xlarge", "Priority": 1}, {"InstanceType": "ml.g6e.xlarge", "Priority": 2}]


@pytest.mark.parametrize(
    "pools, fragment",
    [
        ([], "1 to 5"),
        (
            ["ml.g6e.xlarge", "ml.g6e.2xlarge", "ml.g6.2xlarge", "ml.g5.2xlarge", "ml.g4dn.2xlarge", "ml.g5.4xlarge"],
            "1 to 5",
        ),
        (["ml.g6e.xlarge", "ml.g6e.xlarge"], "repeat ml.g6e.xlarge"),
        (["ml.g6e.xlarge", "ml.c6i.8xlarge"], "no GPU"),
        (["ml.g9.xlarge"], "not one SageMaker accepts"),
    ],
)
def test_invalid_pool_lists(pools, fragment):
    with pytest.raises(InvalidInput) as err:
        gpu_plan(instance_pools=pools)
    assert fragment in str(err.value)


def test_five_pools_are_accepted():
    five = ["ml.g6e.xlarge", "ml.g6e.2xlarge", "ml.g6.2xlarge", "ml.g5.2xlarge", "ml.g4dn.2xlarge"]
    pools = gpu_plan(instance_pools=five).endpoint_config["ProductionVariants"][0]["InstancePools"]
    assert [p["Priority"] for p in pools] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("priority", [0, 6, "1", None])
def test_pool_priorities_outside_1_to_5_are_refused(priority):
    with pytest.raises(InvalidInput, match="Priority"):
        variants.check_instance_pools([{"InstanceType": "ml.g6e.xlarge", "Priority": priority}])


def test_priority_6_passes_botocore_but_not_this_library():
    # botocore checks only minimums: this is why the library checks maximums itself.
    plan = gpu_plan(instance_pools=["ml.g6e.xlarge"])
    request = copy.deepcopy(plan.endpoint_config)
    request["ProductionVariants"][0]["InstancePools"][0]["Priority"] = 6
    calls.validate("sagemaker", "CreateEndpointConfig", request)
    with pytest.raises(InvalidInput):
        variants.endpoint_config_request("e", request["ProductionVariants"][0])


def test_cuda13_refuses_volta_gpus():
    with pytest.raises(InvalidInput, match="CUDA 13"):
        gpu_plan(instance_pools=["ml.g6e.xlarge", "ml.p3.2xlarge"])


def test_gpu_ami_on_cpu_types_is_refused():
    with pytest.raises(InvalidInput, match="no GPU"):
        variants.fixed_instance_variant("m", "ml.c6i.2xlarge", ami_version=variants.GPU_AMI_VERSION)


def test_unknown_ami_is_refused():
    with pytest.raises(InvalidInput, match="InferenceAmiVersion"):
        gpu_plan(ami_version="al2023-ami-sagemaker-inference-gpu-9-9")


@pytest.mark.parametrize(
    "kw, fragment",
    [
        ({"provision_timeout_s": 299}, "provision_timeout_s"),
        ({"provision_timeout_s": 3601}, "provision_timeout_s"),
        ({"startup_timeout_s": 59}, "startup_timeout_s"),
        ({"startup_timeout_s": 3601}, "startup_timeout_s"),
        ({"download_timeout_s": 59}, "download_timeout_s"),
        ({"download_timeout_s": 3601}, "download_timeout_s"),
        ({"instance_count": 0}, "instance_count"),
        ({"n_gpu_layers": -2}, "n_gpu_layers"),
        ({"ctx_size": 16}, "ctx_size"),
    ],
)
def test_ranges(kw, fragment):
    with pytest.raises(InvalidInput, match=fragment):
        gpu_plan(**kw)


@pytest.mark.parametrize(
    "kw",
    [
        {"provision_timeout_s": 300},
        {"provision_timeout_s": 3600},
        {"startup_timeout_s": 60, "download_timeout_s": 3600},
    ],
)
def test_range_limits_are_inclusive(kw):
    _revalidate(gpu_plan(**kw))


def test_volume_size_only_where_sagemaker_takes_it():
    variant = variants.fixed_instance_variant("m", "ml.c6i.2xlarge", volume_size_gb=64)
    assert variant["VolumeSizeInGB"] == 64
    with pytest.raises(InvalidInput, match="NVMe"):
        variants.fixed_instance_variant("m", "ml.g5.2xlarge", volume_size_gb=64)
    with pytest.raises(InvalidInput):
        variants.fixed_instance_variant("m", "ml.c6i.2xlarge", volume_size_gb=513)


def test_environment_limits():
    with pytest.raises(InvalidInput, match="1024"):
        model_requests.model_request(
            "m",
            image=parse_image_uri(DLC_PINNED),
            role_arn=ROLE,
            model_data_url=MODEL_DATA,
            environment={"X": "y" * 1025},
        )
    with pytest.raises(InvalidInput, match="not valid"):
        model_requests.model_request(
            "m", image=parse_image_uri(DLC_PINNED), role_arn=ROLE, model_data_url=MODEL_DATA, environment={"1BAD": "x"}
        )


def test_tag_rules():
    with pytest.raises(InvalidInput, match="aws:"):
        model_requests.workshop_tags(extra={"aws:owner": "x"})
    with pytest.raises(InvalidInput, match="not valid"):
        model_requests.workshop_tags(created_by="alice<script>")


# ---- reading DescribeEndpoint ------------------------------------------------------------------------


def test_placed_instance_types_reads_the_pool_summary():
    described = {
        "ProductionVariants": [
            {
                "VariantName": "AllTraffic",
                "InstancePools": [
                    {"InstanceType": "ml.g6e.xlarge", "CurrentInstanceCount": 0},
                    {"InstanceType": "ml.g6.2xlarge", "CurrentInstanceCount": 1},
                ],
            }
        ]
    }
    assert hosting.placed_instance_types(described) == {"ml.g6.2xlarge": 1}
    assert hosting.placed_instance_types({"ProductionVariants": [{"VariantName": "AllTraffic"}]}) == {}

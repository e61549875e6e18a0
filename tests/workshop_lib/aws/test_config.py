import json
import sys
import types

import boto3
import pytest

from workshop_lib import config, name_checks
from workshop_lib.aws.buckets import check_bucket_region
from workshop_lib.config import BucketNotFound, WorkshopConfig
from workshop_lib.errors import InvalidInput
from workshop_lib.name_checks import check_bucket_name, check_resource_name, check_role_arn

from .values import ROLE


@pytest.fixture
def no_studio(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "_STUDIO_METADATA", tmp_path / "no-such-metadata.json")


@pytest.fixture
def credentials(monkeypatch, no_studio):
    """Control what the credential probe finds, without touching the real chain."""
    state = {"found": True}
    monkeypatch.setattr(config, "has_aws_credentials", lambda: state["found"])
    return state


def load(tmp_path, env=None, file=None):
    path = tmp_path / "config.json"
    if file is not None:
        path.write_text(json.dumps(file))
    return WorkshopConfig.load(path, env=env or {})


# ---- loading --------------------------------------------------------------------------


def test_environment_overrides_file_and_file_overrides_ambient_region(tmp_path, credentials):
    file = {"region": "eu-west-1", "bucket": "from-file-bucket", "sagemaker_role_arn": ROLE}
    cfg = load(tmp_path, {"WORKSHOP_BUCKET": "from-env-bucket", "AWS_REGION": "us-west-2"}, file)
    assert cfg.bucket == "from-env-bucket"
    assert cfg.region == "eu-west-1"  # the saved file beats the ambient AWS_REGION
    assert cfg.sagemaker_role_arn == ROLE
    cfg = load(tmp_path, {"WORKSHOP_REGION": "ap-south-1", "AWS_REGION": "us-west-2"}, file)
    assert cfg.region == "ap-south-1"


def test_region_falls_back_to_aws_region_then_aws_default_region(tmp_path, credentials):
    assert load(tmp_path, {"AWS_REGION": "us-west-2", "AWS_DEFAULT_REGION": "eu-central-1"}).region == "us-west-2"
    assert load(tmp_path, {"AWS_DEFAULT_REGION": "eu-central-1"}).region == "eu-central-1"


def test_all_documented_environment_variables_are_read(tmp_path, credentials):
    env = {
        "WORKSHOP_REGION": "us-west-2",
        "WORKSHOP_BUCKET": "b-123",
        "WORKSHOP_PREFIX": "p",
        "WORKSHOP_ROLE_ARN": ROLE,
        "WORKSHOP_CODEBUILD_ROLE_ARN": "arn:aws:iam::123456789012:role/cb",
        "WORKSHOP_STANDARD_ENDPOINT": "s-ep",
        "WORKSHOP_CPU_ENDPOINT": "c-ep",
        "WORKSHOP_GPU_ENDPOINT": "g-ep",
        "WORKSHOP_ECR_REPOSITORY": "my/repo",
        "WORKSHOP_MODE": "aws",
        "WORKSHOP_DEPLOY_PATH": "decision-gpu",
        "WORKSHOP_ENDPOINT_TTL_HOURS": "2.5",
    }
    cfg = load(tmp_path, env)
    assert cfg == WorkshopConfig(
        region="us-west-2",
        bucket="b-123",
        prefix="p",
        sagemaker_role_arn=ROLE,
        codebuild_role_arn="arn:aws:iam::123456789012:role/cb",
        standard_endpoint_name="s-ep",
        cpu_endpoint_name="c-ep",
        gpu_endpoint_name="g-ep",
        ecr_repository="my/repo",
        mode="aws",
        deploy_path="decision-gpu",
        endpoint_ttl_hours="2.5",
    )
    assert cfg.ttl_hours == 2.5
    assert cfg.endpoint_name() == "g-ep"
    assert cfg.endpoint_name("decision-cpu") == "c-ep"


def test_defaults(tmp_path, credentials):
    cfg = load(tmp_path, {"AWS_REGION": "us-east-1"})
    assert cfg.prefix == "decision-workshop"
    assert cfg.ecr_repository == "sagemaker-decision-workshop"
    assert cfg.deploy_path == "standard"
    assert cfg.mode == "aws"
    assert cfg.ttl_hours == 4


def test_default_names_are_the_workshops_own_not_the_published_samples():
    cfg = WorkshopConfig()
    defaults = {cfg.standard_endpoint_name, cfg.cpu_endpoint_name, cfg.gpu_endpoint_name, cfg.ecr_repository}
    assert len(defaults) == 4 and not defaults & config.SAMPLE_NAMES
    assert {
        "semif-llamacpp-dlc",
        "llamacpp-gguf",
        "llamacpp-standard",
        "semif-decision-workflows",
    } == config.SAMPLE_NAMES
    # no default is one of the sample's with a suffix either (semif-decision-workflows-gpu, say)
    assert not [d for d in defaults for s in config.SAMPLE_NAMES if d.startswith(s)]
    # AmazonSageMakerFullAccess lets a Studio role write to ECR repositories named *sagemaker*
    assert "sagemaker" in cfg.ecr_repository
    assert cfg.problems() == []


def test_builds_constants_follow_the_studio_roles_patterns():
    from workshop_lib.aws import build_projects, policy_scope

    assert build_projects.ECR_REPOSITORY == config.DEFAULT_ECR_REPOSITORY
    # AmazonSageMakerFullAccess: codebuild:StartBuild/BatchGetBuilds on projects named sagemaker*
    projects = (build_projects.MODEL_PACKAGE_PROJECT, build_projects.IMAGE_BUILD_PROJECT)
    assert all(project.startswith("sagemaker") for project in projects)
    assert not set(projects) & config.SAMPLE_NAMES
    assert policy_scope.MODEL_FOLDER == config.MODEL_FOLDER


@pytest.mark.parametrize("value, hours", [("4", 4.0), ("0", 0.0), ("0.25", 0.25), ("168", 168.0), (" 2 ", 2.0)])
def test_endpoint_ttl_hours_accepted(value, hours):
    assert WorkshopConfig(endpoint_ttl_hours=value).ttl_hours == hours


@pytest.mark.parametrize("value", ["", "four", "-1", "0.1", "169", "nan", "inf"])
def test_endpoint_ttl_hours_refused_naming_the_variable(value):
    with pytest.raises(InvalidInput, match="WORKSHOP_ENDPOINT_TTL_HOURS"):
        WorkshopConfig(endpoint_ttl_hours=value).ttl_hours
    assert any("endpoint_ttl_hours" in str(p) for p in WorkshopConfig(endpoint_ttl_hours=value).problems())


def test_mode_is_local_without_credentials_and_fills_local_placeholders(tmp_path, credentials):
    credentials["found"] = False
    cfg = load(tmp_path)
    assert cfg.mode == "local"
    assert (cfg.region, cfg.bucket, cfg.sagemaker_role_arn) == (
        config.LOCAL_REGION,
        config.LOCAL_BUCKET,
        config.LOCAL_ROLE_ARN,
    )
    assert cfg.problems() == []


def test_workshop_mode_local_wins_over_credentials(tmp_path, credentials):
    credentials["found"] = True
    assert load(tmp_path, {"WORKSHOP_MODE": "local"}).mode == "local"
    assert load(tmp_path, {"WORKSHOP_MODE": "LOCAL"}).mode == "local"


def test_aws_mode_does_not_invent_a_bucket_or_role(tmp_path, credentials):
    cfg = load(tmp_path, {"AWS_REGION": "us-east-1"})
    assert cfg.bucket == "" and cfg.sagemaker_role_arn == ""
    with pytest.raises(InvalidInput, match="WORKSHOP_BUCKET"):
        cfg.require("region", "bucket")


def test_has_aws_credentials_reads_the_boto3_chain(monkeypatch, tmp_path):
    for name in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert config.has_aws_credentials() is False
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    assert config.has_aws_credentials() is True


def test_credentials_that_fail_are_an_error_naming_the_profile_not_local_mode(monkeypatch, tmp_path, no_studio):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "WORKSHOP_MODE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "aws-config").write_text("[profile workshop]\nregion = us-east-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_PROFILE", "workshp")  # a typo: no such profile
    with pytest.raises(InvalidInput, match="'workshp'.*WORKSHOP_MODE=local"):
        config.WorkshopConfig.load(tmp_path / "config.json", env={})
    monkeypatch.setenv("WORKSHOP_MODE", "local")  # an explicit choice still works with the typo
    assert config.WorkshopConfig.load(tmp_path / "config.json", env={"WORKSHOP_MODE": "local"}).mode == "local"


def test_save_then_load_round_trips_through_workshop_config_env(tmp_path, credentials):
    path = tmp_path / "sub" / "cfg.json"
    cfg = WorkshopConfig(
        region="eu-west-1", bucket="my-bucket-1", sagemaker_role_arn=ROLE, mode="aws", deploy_path="decision-cpu"
    )
    assert cfg.save(path) == path
    assert json.loads(path.read_text())["bucket"] == "my-bucket-1"
    assert WorkshopConfig.load(env={"WORKSHOP_CONFIG": str(path)}) == cfg


def test_default_path_is_under_the_repo(monkeypatch):
    assert config.default_path({}).parts[-2:] == (".workshop", "config.json")
    assert config.default_path({"WORKSHOP_CONFIG": "/x/y.json"}).as_posix() == "/x/y.json"


def test_unknown_key_in_file_is_refused(tmp_path, credentials):
    with pytest.raises(InvalidInput, match="unknown keys \\['bukket'\\]"):
        load(tmp_path, file={"bukket": "x"})


def test_broken_json_file_says_how_to_recover(tmp_path, credentials):
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(InvalidInput, match="not valid JSON"):
        WorkshopConfig.load(path, env={})


def test_s3_uris():
    cfg = WorkshopConfig(bucket="bkt-1", prefix="/decision-workshop/")
    assert cfg.s3_uri("in", "decisions.jsonl") == "s3://bkt-1/decision-workshop/in/decisions.jsonl"
    assert cfg.model_data_url == "s3://bkt-1/decision-workshop/model/model.tar.gz"
    assert cfg.replace(bucket="other-1").model_data_url == "s3://other-1/decision-workshop/model/model.tar.gz"
    with pytest.raises(InvalidInput):
        WorkshopConfig().s3_uri("x")


@pytest.mark.parametrize(
    "uri",
    [
        "s3://bkt-1/decision-workshop/model/",
        "s3://bkt-1/decision-workshop/model",
        "s3://bkt-1/decision-workshop/model/model.tar.gz",
        "s3://bkt-1/decision-workshop/model/v2/",
    ],
)
def test_model_uris_inside_the_model_folder_are_accepted(uri):
    cfg = WorkshopConfig(bucket="bkt-1", prefix="decision-workshop")
    assert cfg.model_folder_uri == "s3://bkt-1/decision-workshop/model/"
    assert cfg.check_model_uri(uri) == uri


@pytest.mark.parametrize(
    "uri",
    [
        "s3://amzn-s3-demo-semif-artifacts/semif-llamacpp/model.tar.gz",
        "s3://bkt-1/decision-workshop/model.tar.gz",
        "s3://bkt-1/decision-workshop/models/",
        "s3://bkt-1/decision-workshop/model/../codebuild-source/x.tar.gz",
        "s3://bkt-2/decision-workshop/model/model.tar.gz",
        "s3://bkt-1/other/model/",
        "",
    ],
)
def test_model_uris_outside_the_model_folder_are_refused_naming_it(uri):
    cfg = WorkshopConfig(bucket="bkt-1", prefix="decision-workshop")
    with pytest.raises(InvalidInput) as refused:
        cfg.check_model_uri(uri, "--model-s3-uri")
    assert "s3://bkt-1/decision-workshop/model/" in str(refused.value) and "--model-s3-uri" in str(refused.value)


# ---- SageMaker Studio defaults ------------------------------------------------------------


def _fake_sdk(monkeypatch, *, region="eu-west-1", role=None, role_error=None):
    module = types.ModuleType("sagemaker.core.helper.session_helper")

    class Session:
        boto_region_name = region

    def get_execution_role():
        if role_error:
            raise role_error
        return role

    module.Session, module.get_execution_role = Session, get_execution_role
    for name in ("sagemaker", "sagemaker.core", "sagemaker.core.helper"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "sagemaker.core.helper.session_helper", module)


def test_studio_session_supplies_region_and_role(monkeypatch, tmp_path):
    metadata = tmp_path / "resource-metadata.json"
    metadata.write_text("{}")
    monkeypatch.setattr(config, "_STUDIO_METADATA", metadata)
    monkeypatch.setattr(config, "has_aws_credentials", lambda: True)
    _fake_sdk(monkeypatch, region="eu-west-1", role=ROLE)
    cfg = load(tmp_path)
    assert (cfg.region, cfg.sagemaker_role_arn, cfg.mode) == ("eu-west-1", ROLE, "aws")
    # explicit settings still win over the session
    assert load(tmp_path, {"WORKSHOP_REGION": "us-west-2"}).region == "us-west-2"


def test_studio_role_lookup_failure_is_not_fatal(monkeypatch, tmp_path):
    metadata = tmp_path / "resource-metadata.json"
    metadata.write_text("{}")
    monkeypatch.setattr(config, "_STUDIO_METADATA", metadata)
    _fake_sdk(monkeypatch, region="eu-west-1", role_error=ValueError("The current AWS identity is not a role"))
    assert config.studio_defaults() == {"region": "eu-west-1"}


def test_outside_studio_the_sdk_is_not_consulted(monkeypatch, no_studio):
    _fake_sdk(monkeypatch, region="eu-west-1", role=ROLE)
    assert config.studio_defaults() == {}


# ---- checks ---------------------------------------------------------------------------------


@pytest.mark.parametrize("arn", [ROLE, "arn:aws:iam::123456789012:role/Plain", "arn:aws-cn:iam::123456789012:role/x"])
def test_valid_role_arns(arn):
    assert check_role_arn(arn) == arn


@pytest.mark.parametrize(
    "arn, hint",
    [
        (
            "arn:aws:sts::123456789012:assumed-role/WorkshopRole/botocore-session-1",
            "arn:aws:iam::123456789012:role/WorkshopRole",
        ),
        ("arn:aws:iam::123456789012:user/alice", "IAM user"),
        ("", "empty"),
        ("arn:aws:iam::12345:role/short-account", "12-digit"),
        ("WorkshopRole", "12-digit"),
    ],
)
def test_malformed_role_arns_say_what_to_use(arn, hint):
    with pytest.raises(InvalidInput) as err:
        check_role_arn(arn)
    assert hint in str(err.value)


@pytest.mark.parametrize("name", ["a", "llamacpp-gguf", "a--b", "A1", "x" * 63])
def test_names_sagemaker_accepts(name):
    for kind in ("endpoint", "endpoint config", "model", "transform job"):
        assert check_resource_name(name, kind) == name


@pytest.mark.parametrize(
    "field, env",
    [
        ("standard_endpoint_name", "WORKSHOP_STANDARD_ENDPOINT"),
        ("cpu_endpoint_name", "WORKSHOP_CPU_ENDPOINT"),
        ("gpu_endpoint_name", "WORKSHOP_GPU_ENDPOINT"),
    ],
)
def test_an_endpoint_name_with_capitals_is_refused_naming_its_setting_and_the_lower_case_name(
    tmp_path, credentials, field, env
):
    # SageMaker's ARNs are lower case, and IAM matches the grants (scaling, Batch Transform) against them
    loaded = load(tmp_path, {"WORKSHOP_MODE": "local", env: "Decision-Endpoint"})
    with pytest.raises(InvalidInput) as refused:
        loaded.check()
    message = str(refused.value)
    assert field in message and env in message and "'decision-endpoint'" in message
    assert not WorkshopConfig(**{field: "decision-endpoint"}).problems()


@pytest.mark.parametrize(
    "command",
    [
        ["deploy", "--name", "Decision-CPU"],
        ["autoscale", "--name", "Decision-CPU"],
        ["transform", "--name", "Decision-CPU"],
    ],
)
def test_the_command_lines_name_flag_refuses_capitals(capsys, command):
    from workshop_lib.cli import build_parser

    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(command)
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert "--name 'Decision-CPU' has capital letters" in error and "'decision-cpu'" in error
    assert build_parser().parse_args([command[0], "--name", "decision-cpu"]).name == "decision-cpu"


@pytest.mark.parametrize(
    "name, fragment",
    [
        ("my_endpoint", "try 'my-endpoint'"),
        ("-leading", "letters, digits and hyphens"),
        ("trailing-", "letters, digits and hyphens"),
        ("has.dot", "try 'has-dot'"),
        ("x" * 64, "at most 63"),
        ("", "empty"),
    ],
)
def test_names_sagemaker_rejects(name, fragment):
    with pytest.raises(InvalidInput) as err:
        check_resource_name(name, "endpoint")
    assert fragment in str(err.value)


def test_name_pattern_comes_from_botocore():
    pattern, max_len = name_checks.sagemaker_rule(("CreateEndpoint", "EndpointName"))
    assert pattern.pattern == "[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
    assert max_len == 63
    role_pattern, _ = name_checks.sagemaker_rule(("CreateModel", "ExecutionRoleArn"))
    assert role_pattern.pattern.startswith("arn:aws[a-z\\-]*:iam::\\d{12}:role/")


@pytest.mark.parametrize("bucket", ["decision-workshop-123456789012-us-east-1", "abc", "a.b-c", "x" * 63])
def test_valid_bucket_names(bucket):
    assert check_bucket_name(bucket) == bucket


@pytest.mark.parametrize(
    "bucket, fragment",
    [
        ("ab", "3 to 63"),
        ("x" * 64, "3 to 63"),
        ("My-Bucket", "upper-case"),
        ("bucket_name", "lower-case letters, digits"),
        ("-bucket", "starting and ending"),
        ("a..b", "dots"),
        ("192.168.1.10", "IP address"),
        ("amzn-s3-demo-semif-artifacts", "documentation examples"),
        ("xn--bucket", "reserves"),
        ("mybucket-s3alias", "reserves"),
    ],
)
def test_invalid_bucket_names(bucket, fragment):
    with pytest.raises(InvalidInput) as err:
        check_bucket_name(bucket)
    assert fragment in str(err.value)


def test_check_reports_every_problem_at_once():
    cfg = WorkshopConfig(
        region="useast1", bucket="Bad_Bucket", sagemaker_role_arn="nope", cpu_endpoint_name="bad_name", mode="cloud"
    )
    with pytest.raises(InvalidInput) as err:
        cfg.check()
    message = str(err.value)
    assert message.startswith("the workshop config has problems:\n")
    assert [line[:2] for line in message.splitlines()[1:]] == ["- "] * 5  # region, bucket, role, endpoint, mode
    for needle in ("'useast1'", "'Bad_Bucket'", "'nope'", "'bad_name'", "WORKSHOP_MODE"):
        assert needle in message


def test_check_raises_the_single_problem_itself():
    with pytest.raises(InvalidInput):
        WorkshopConfig(region="us-east-1", sagemaker_role_arn="arn:aws:iam::123456789012:user/bob").check()
    good = WorkshopConfig(region="us-east-1", bucket="fine-bucket", sagemaker_role_arn=ROLE)
    assert good.check() is good


# ---- bucket region against moto S3 -------------------------------------------------------------


def test_bucket_region_check_against_moto(moto_aws):
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="west-bucket", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    s3.create_bucket(Bucket="east-bucket")
    assert check_bucket_region(s3, "east-bucket", "us-east-1") == "us-east-1"
    assert check_bucket_region(s3, "west-bucket", "us-west-2") == "us-west-2"
    with pytest.raises(InvalidInput) as err:
        check_bucket_region(s3, "west-bucket", "us-east-1")
    assert "is in us-west-2 but the endpoint region is us-east-1" in str(err.value)
    with pytest.raises(BucketNotFound, match="aws s3 mb"):
        check_bucket_region(s3, "no-such-bucket", "us-east-1")


def test_each_setting_is_declared_once_with_its_variable_doc_and_check():
    from dataclasses import fields

    declared = {f.name: f.metadata for f in fields(WorkshopConfig)}
    assert {name: meta["env"] for name, meta in declared.items()} == config.ENV_VARS
    assert len(set(config.ENV_VARS.values())) == len(declared)
    assert all(meta["doc"] and meta["env"].startswith("WORKSHOP_") for meta in declared.values())
    # a bad value of any checked setting is reported by problems(), naming its variable where the check does
    bad = WorkshopConfig(endpoint_ttl_hours="forever", capture_percent="101", mode="cloud")
    assert len(bad.problems()) == 3 and all(isinstance(p, InvalidInput) for p in bad.problems())
    assert any("WORKSHOP_CAPTURE_PERCENT" in str(p) for p in bad.problems())

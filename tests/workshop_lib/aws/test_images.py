import json

import boto3
import pytest
from botocore.stub import Stubber

from workshop_lib.aws import images
from workshop_lib.aws.images import (
    MutableImageReference,
    check_deployable,
    dlc_image,
    dlc_image_uri,
    parse_image_uri,
    require_pinned,
    resolve_digest,
)
from workshop_lib.errors import InvalidInput

from .values import DIGEST


def test_dlc_uri_default_registry():
    assert (
        dlc_image_uri("us-east-1") == "763104351884.dkr.ecr.us-east-1.amazonaws.com/llama-cpp:server-sagemaker-cpu-v1"
    )
    assert (
        dlc_image_uri("eu-west-1", "cuda")
        == "763104351884.dkr.ecr.eu-west-1.amazonaws.com/llama-cpp:server-sagemaker-cuda-v1"
    )


def test_dlc_uri_regional_exceptions_and_china():
    assert dlc_image_uri("af-south-1").startswith("626614931356.dkr.ecr.af-south-1.amazonaws.com/")
    assert dlc_image_uri("me-central-1").startswith("914824155844.")
    assert (
        dlc_image_uri("cn-north-1")
        == "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/llama-cpp:server-sagemaker-cpu-v1"
    )


def test_dlc_table_has_twelve_digit_accounts():
    assert len(images.DLC_ACCOUNTS) == 21
    assert all(len(a) == 12 and a.isdigit() for a in images.DLC_ACCOUNTS.values())


def test_dlc_uri_graviton_is_cpu_only():
    assert (
        dlc_image_uri("us-west-2", arm64=True)
        == "763104351884.dkr.ecr.us-west-2.amazonaws.com/llama-cpp-arm64:server-sagemaker-cpu-v1"
    )
    with pytest.raises(InvalidInput, match="CPU only"):
        dlc_image_uri("us-west-2", "cuda", arm64=True)
    with pytest.raises(InvalidInput, match="variant"):
        dlc_image_uri("us-west-2", "gpu")


def test_parse_tagged_and_pinned():
    ref = parse_image_uri("763104351884.dkr.ecr.us-east-1.amazonaws.com/llama-cpp:server-sagemaker-cpu-v1")
    assert (ref.account, ref.region, ref.repository, ref.tag, ref.digest) == (
        "763104351884",
        "us-east-1",
        "llama-cpp",
        "server-sagemaker-cpu-v1",
        None,
    )
    assert not ref.pinned
    ref = parse_image_uri(
        f"123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/sagemaker-decision-workshop:gpu-1@{DIGEST}"
    )
    assert (ref.repository, ref.tag, ref.digest, ref.pinned) == (
        "team/sagemaker-decision-workshop",
        "gpu-1",
        DIGEST,
        True,
    )
    assert (
        ref.at(ref.digest).uri
        == f"123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/sagemaker-decision-workshop@{DIGEST}"
    )


def test_an_image_reference_writes_back_the_uri_it_was_read_from():
    for uri in (
        f"123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/decision:gpu-1@{DIGEST}",
        "public.ecr.aws/deep-learning-containers/llama-cpp:server-sagemaker-cpu-v1",
    ):
        assert parse_image_uri(uri).uri == str(parse_image_uri(uri)) == uri
    assert dlc_image("us-east-1") == parse_image_uri(dlc_image_uri("us-east-1"))
    assert images.pinned_dlc("eu-south-1", "cuda") == parse_image_uri(images.pinned_dlc_uri("eu-south-1", "cuda"))


def test_parse_public_registry_has_no_account():
    ref = parse_image_uri("public.ecr.aws/deep-learning-containers/llama-cpp:server-sagemaker-cpu-v1")
    assert ref.account is None and ref.region is None
    assert ref.repository == "deep-learning-containers/llama-cpp"


@pytest.mark.parametrize(
    "uri",
    [
        "",
        "llama-cpp",
        "host/repo@sha256:short",
        "host/Repo:tag",
        "host/repo:bad tag",
        " host/repo:t",
        "host/repo:-tag",
    ],
)
def test_parse_rejects_garbage(uri):
    with pytest.raises(InvalidInput, match="image URI"):
        parse_image_uri(uri)


def test_require_pinned_accepts_digest():
    uri = f"763104351884.dkr.ecr.us-east-1.amazonaws.com/llama-cpp@{DIGEST}"
    assert require_pinned(parse_image_uri(uri)).uri == uri
    assert images.pinned_image(uri) == parse_image_uri(uri)


def test_require_pinned_refuses_tag_and_says_how_to_pin():
    uri = "763104351884.dkr.ecr.us-east-1.amazonaws.com/llama-cpp:server-sagemaker-cpu-v1"
    with pytest.raises(MutableImageReference) as err:
        images.pinned_image(uri)
    message = str(err.value)
    assert "resolve_digest" in message
    assert (
        "aws ecr describe-images --region us-east-1 --registry-id 763104351884 "
        "--repository-name llama-cpp --image-ids imageTag=server-sagemaker-cpu-v1"
    ) in message


def test_require_pinned_refuses_bare_repository():
    with pytest.raises(MutableImageReference, match="latest"):
        require_pinned(parse_image_uri("123456789012.dkr.ecr.us-east-1.amazonaws.com/sagemaker-decision-workshop"))


def test_check_deployable_wants_private_ecr_in_the_endpoint_region():
    uri = parse_image_uri(f"763104351884.dkr.ecr.us-east-1.amazonaws.com/llama-cpp@{DIGEST}")
    assert check_deployable(uri, "us-east-1") == uri
    with pytest.raises(InvalidInput, match="is in us-east-1 but the endpoint region is eu-west-1"):
        check_deployable(uri, "eu-west-1")
    with pytest.raises(InvalidInput, match="private ECR"):
        check_deployable(parse_image_uri(f"public.ecr.aws/deep-learning-containers/llama-cpp@{DIGEST}"), "us-east-1")
    with pytest.raises(MutableImageReference):
        check_deployable(dlc_image("us-east-1"), "us-east-1")


def _push(ecr, repository, tag):
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {
            "digest": "sha256:" + "1" * 64,
            "size": 1,
            "mediaType": "application/vnd.docker.container.image.v1+json",
        },
        "layers": [],
    }
    return ecr.put_image(repositoryName=repository, imageManifest=json.dumps(manifest), imageTag=tag)["image"][
        "imageId"
    ]["imageDigest"]


def test_resolve_digest_against_moto_ecr(clients):
    clients.ecr.create_repository(repositoryName="sagemaker-decision-workshop")
    digest = _push(clients.ecr, "sagemaker-decision-workshop", "gpu-20260101")
    host = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
    pinned = resolve_digest(clients.ecr, parse_image_uri(f"{host}/sagemaker-decision-workshop:gpu-20260101"))
    assert pinned.uri == f"{host}/sagemaker-decision-workshop@{digest}"
    assert require_pinned(pinned) == pinned
    with pytest.raises(InvalidInput, match="sagemaker-decision-workshop:missing"):
        resolve_digest(clients.ecr, parse_image_uri(f"{host}/sagemaker-decision-workshop:missing"))


def test_resolve_digest_of_pinned_reference_drops_the_tag_without_calling_ecr(fake_credentials):
    ecr = boto3.client("ecr", region_name="us-east-1")
    with Stubber(ecr):  # any call would fail: nothing is queued
        uri = f"763104351884.dkr.ecr.us-east-1.amazonaws.com/llama-cpp:server-sagemaker-cpu-v1@{DIGEST}"
        assert (
            resolve_digest(ecr, parse_image_uri(uri)).uri
            == f"763104351884.dkr.ecr.us-east-1.amazonaws.com/llama-cpp@{DIGEST}"
        )


def test_resolve_dlc_digest_asks_the_dlc_registry_stubber(fake_credentials):
    ecr = boto3.client("ecr", region_name="eu-south-1")
    with Stubber(ecr) as stub:
        stub.add_response(
            "describe_images",
            {"imageDetails": [{"registryId": "692866216735", "repositoryName": "llama-cpp", "imageDigest": DIGEST}]},
            {
                "registryId": "692866216735",
                "repositoryName": "llama-cpp",
                "imageIds": [{"imageTag": "server-sagemaker-cuda-v1"}],
            },
        )
        pinned = resolve_digest(ecr, dlc_image("eu-south-1", "cuda"))
        stub.assert_no_pending_responses()
    assert pinned.uri == f"692866216735.dkr.ecr.eu-south-1.amazonaws.com/llama-cpp@{DIGEST}"


def test_resolve_falls_back_to_batch_get_image_when_describe_is_denied_stubber(fake_credentials):
    ecr = boto3.client("ecr", region_name="us-east-1")
    ids = {
        "registryId": "763104351884",
        "repositoryName": "llama-cpp",
        "imageIds": [{"imageTag": "server-sagemaker-cpu-v1"}],
    }
    with Stubber(ecr) as stub:
        stub.add_client_error("describe_images", "AccessDeniedException", "not authorized", 400, expected_params=ids)
        stub.add_response("batch_get_image", {"images": [{"imageId": {"imageDigest": DIGEST}}], "failures": []}, ids)
        pinned = resolve_digest(ecr, dlc_image("us-east-1"))
        stub.assert_no_pending_responses()
    assert pinned.uri.endswith(f"/llama-cpp@{DIGEST}")


def test_resolve_refuses_the_ec2_tags_of_the_dlc(fake_credentials):
    ecr = boto3.client("ecr", region_name="us-east-1")
    with Stubber(ecr), pytest.raises(InvalidInput, match="/ping"):
        resolve_digest(ecr, parse_image_uri("763104351884.dkr.ecr.us-east-1.amazonaws.com/llama-cpp:server-cpu-v1"))


# -- the pinned DLC digests and their bindings -------------------------------------------------


def test_each_variant_pins_a_digest_with_its_bindings():
    cpu, cuda = images.DLC_PINS["cpu"], images.DLC_PINS["cuda"]
    assert cpu.digest != cuda.digest and all(len(p.digest) == 71 for p in (cpu, cuda))
    assert cpu.bindings == "llama-cpp-python==0.3.35" and cpu.drop_bindings == ()
    assert cuda.bindings.endswith("@ea3b56bdc386d5a6f31120338ffe907211b0907c")
    assert cuda.drop_bindings == ("llama_adapter_lora_init_from_file_ptr",)
    assert (
        images.pinned_dlc_uri("eu-south-1", "cuda")
        == f"692866216735.dkr.ecr.eu-south-1.amazonaws.com/llama-cpp@{cuda.digest}"
    )


def test_resolve_dlc_returns_the_pin_when_the_region_holds_it(clients):
    from workshop_lib.local import stand_ins

    stand_ins.seed_dlc(clients.ecr)  # the emulated DLC registry, with the pinned digests
    for variant in ("cpu", "cuda"):
        assert images.resolve_dlc(clients.ecr, "us-east-1", variant) == images.pinned_dlc("us-east-1", variant)
        assert images.resolve_dlc(clients.ecr, variant=variant) == images.pinned_dlc(
            "us-east-1", variant
        )  # the client's


def test_resolve_dlc_says_clearly_when_the_region_lacks_the_pin(clients):
    clients.ecr.create_repository(repositoryName="llama-cpp", registryId="763104351884")
    with pytest.raises(InvalidInput, match="does not hold the pinned cpu image.*follow_tag=True"):
        images.resolve_dlc(clients.ecr, "us-east-1", "cpu")


def test_following_the_tag_is_an_opt_in_that_warns(clients):
    from workshop_lib.local import stand_ins

    clients.ecr.create_repository(repositoryName="llama-cpp", registryId="763104351884")
    stand_ins.push_stand_in(
        clients.ecr, "llama-cpp", "server-sagemaker-cpu-v1", "a newer DLC", "2" * 64, registry_id="763104351884"
    )  # the tag moved on: another digest than the pin
    with pytest.warns(UserWarning, match="may not match its libllama"):
        followed = images.resolve_dlc(clients.ecr, "us-east-1", "cpu", follow_tag=True)
    assert followed.uri.startswith("763104351884.dkr.ecr.us-east-1.amazonaws.com/llama-cpp@sha256:")
    assert followed.digest != images.DLC_PINS["cpu"].digest


# ---- the pins, per region -------------------------------------------------------------------------------


def test_a_regional_pin_replaces_the_default_there_only(monkeypatch):
    from workshop_lib.aws import build_projects

    other = images.DlcPin("cpu", "sha256:" + "c" * 64, "llama-cpp-python==0.3.36", (), "a region's own build")
    monkeypatch.setitem(images.REGIONAL_DLC_PINS, "af-south-1", {"cpu": other})
    assert images.dlc_pin("cpu", "af-south-1") is other
    assert images.dlc_pin("cpu", "us-east-1") is images.DLC_PINS["cpu"]
    assert images.dlc_pin("cuda", "af-south-1") is images.DLC_PINS["cuda"]  # only the variant listed
    assert (
        images.pinned_dlc_uri("af-south-1") == f"626614931356.dkr.ecr.af-south-1.amazonaws.com/llama-cpp@{other.digest}"
    )
    table = images.dlc_digest_table(["us-east-1", "af-south-1"])
    assert table["af-south-1"]["cpu"] == other.digest and table["us-east-1"]["cpu"] == images.DLC_PINS["cpu"].digest
    # the image build installs the bindings proven against the region's build
    env = build_projects.image_build_env(
        images.pinned_dlc("af-south-1"),
        parse_image_uri("123456789012.dkr.ecr.af-south-1.amazonaws.com/sagemaker-decision-workshop"),
        "cpu-1",
    )
    assert env["LLAMA_CPP_PYTHON"] == "llama-cpp-python==0.3.36"


def test_whether_the_region_holds_the_pinned_digest_is_asked_not_assumed(clients):
    from workshop_lib.local import stand_ins

    assert not images.pinned_dlc_present(clients.ecr, "us-east-1", "cpu")  # no DLC repository at all
    clients.ecr.create_repository(repositoryName="llama-cpp", registryId="763104351884")
    assert not images.pinned_dlc_present(clients.ecr, "us-east-1", "cpu")  # the repository, not the digest
    stand_ins.seed_dlc(clients.ecr)
    assert images.pinned_dlc_present(clients.ecr, "us-east-1", "cpu")
    assert images.pinned_dlc_present(clients.ecr, "us-east-1", "cuda")


def test_presence_falls_back_to_batch_get_image_when_describe_is_denied_stubber(fake_credentials):
    ecr = boto3.client("ecr", region_name="eu-west-1")
    digest = images.DLC_PINS["cpu"].digest
    ids = {"registryId": "763104351884", "repositoryName": "llama-cpp", "imageIds": [{"imageDigest": digest}]}
    with Stubber(ecr) as stub:
        stub.add_client_error("describe_images", "AccessDeniedException", "not authorized", 400, expected_params=ids)
        stub.add_response(
            "batch_get_image",
            {"images": [], "failures": [{"imageId": {"imageDigest": digest}, "failureCode": "ImageNotFound"}]},
            ids,
        )
        assert images.pinned_dlc_present(ecr, "eu-west-1", "cpu") is False
        stub.add_client_error("describe_images", "ThrottlingException", "slow down", 400, expected_params=ids)
        with pytest.raises(Exception, match="ThrottlingException"):
            images.pinned_dlc_present(ecr, "eu-west-1", "cpu")

"""The notebooks out of order, through the library in local mode (the real emulator, no endpoints).

Each step whose predecessor did not run stops with ``StepNotRun``: one line naming the notebook to
run, never a botocore traceback; notebook 08 runs twice and before anything; what 08 deleted (the
CodeBuild role, the model package, the decision image) is noticed when 00..05 run again, not reused.
A fresh ``Workshop.load()`` stands for each notebook's kernel.
"""

from __future__ import annotations

import pytest

from workshop_lib import display, steps
from workshop_lib.aws import build_projects
from workshop_lib.config import WorkshopConfig
from workshop_lib.errors import StepNotRun
from workshop_lib.local import rehearsal


@pytest.fixture
def local(tmp_path, monkeypatch):
    """Local mode with its own config, outputs and rehearsal folder; everything stopped afterwards."""
    monkeypatch.setenv("WORKSHOP_MODE", "local")
    monkeypatch.setenv("WORKSHOP_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.setenv("WORKSHOP_LOCAL_DIR", str(tmp_path / "local"))
    for name in (
        "WORKSHOP_REGION",
        "WORKSHOP_BUCKET",
        "WORKSHOP_DEPLOY_PATH",
        "WORKSHOP_CODEBUILD_ROLE_ARN",
        "WORKSHOP_REPO",
    ):
        monkeypatch.delenv(name, raising=False)
    yield tmp_path
    rehearsal.Rehearsal(tmp_path / "local").stop_all()


def notebook() -> steps.Workshop:
    """What each notebook's first cell does: the saved workshop, in a new kernel."""
    return steps.Workshop.load()


def refused(call, *args, **kwargs) -> StepNotRun:
    """The StepNotRun ``call`` raises, checked to show as one line in a notebook."""
    with pytest.raises(StepNotRun) as raised:
        call(*args, **kwargs)
    shown = display.one_line(raised.value)
    assert "\n" not in shown and shown == f"StepNotRun: {raised.value}"
    assert display.is_expected(raised.value)  # the notebooks' handler prints it without a traceback
    return raised.value


def packaged(workshop: steps.Workshop) -> str:
    """What notebook 01 leaves behind (a model.tar.gz under the prefix, its URL recorded), without the
    packaging itself (tests/notebooks/test_rehearsal.py runs that): only its traces matter here."""
    url = workshop.config.s3_uri("model", build_projects.TARBALL_NAME)
    bucket, key = build_projects.parse_s3_uri(url)
    with workshop.clients.acting_as(None):  # the test's doing, not a participant's call
        workshop.clients.s3.put_object(Bucket=bucket, Key=key, Body=b"stands in for the package")
    workshop.remember(model_data_url=url)
    return url


def run_cleanup(workshop: steps.Workshop) -> dict:
    """Notebook 08's cells, in order."""
    c = workshop.config
    done = {
        "deleted": steps.delete_endpoints(
            workshop, (c.standard_endpoint_name, c.cpu_endpoint_name, c.gpu_endpoint_name)
        )
    }
    done["alarms"] = steps.delete_alarms(workshop)
    done["builds"] = steps.delete_build_resources(
        workshop, [build_projects.MODEL_PACKAGE_PROJECT, build_projects.IMAGE_BUILD_PROJECT], c.ecr_repository
    )
    done["deadline_role"] = steps.delete_deadline_role(workshop)
    done["role"] = steps.delete_codebuild_role(workshop)
    done["artifacts"] = steps.delete_artifacts(workshop, c.s3_uri())
    done["left"] = steps.running_endpoints(workshop)
    done["stopped"] = steps.stop_local(workshop)
    return done


def test_before_notebook_00_every_step_names_00_and_07_has_nothing_to_clean(local, capsys):
    first = refused(steps.package_model, notebook(), progress=False)
    assert first.notebook == "00_setup" and str(first).startswith("the local AWS emulator is not running")
    assert refused(steps.build_decision_image, notebook(), "cpu", progress=False).notebook == "00_setup"
    assert refused(steps.deploy_standard, notebook(), progress=False).notebook == "00_setup"
    assert refused(steps.decision_client, notebook()).notebook == "00_setup"
    assert refused(steps.route_client, notebook(), "any-endpoint").notebook == "00_setup"
    assert steps.standard_client(notebook()) is None  # 06 runs on without its letter-probability baseline
    skipped = capsys.readouterr().out
    assert skipped.startswith("letter-probability baseline skipped: ") and skipped.count("\n") == 1

    for _twice in range(2):  # 07 before anything, and again: every cell says so in one line and passes
        workshop = notebook()
        done = run_cleanup(workshop)
        for name in ("deleted", "alarms", "builds", "deadline_role", "role", "artifacts", "left"):
            assert done[name].startswith("nothing to clean: the local rehearsal is not running"), (name, done[name])
            assert "\n" not in done[name] and done[name].ok
        assert done["stopped"].ok and not rehearsal.Rehearsal(local / "local").emulator_url()
        checks = steps.check_outcome(
            workshop, "08", deleted=done["deleted"], left=done["left"], stopped=done["stopped"]
        )
        assert checks.ok


@pytest.mark.slow
def test_steps_out_of_order_name_their_notebook_and_what_07_deleted_is_not_reused(local):
    steps.setup(notebook(), "decision-cpu")
    steps.ensure_codebuild_role(notebook())

    # 02 and 04 before 01: nothing recorded yet, and the earliest missing notebook is named.
    missing_model = refused(steps.deploy_standard, notebook(), progress=False)
    assert str(missing_model) == "no model data url recorded yet: run notebook 01_package_model first"
    assert refused(steps.deploy_decision_cpu, notebook(), progress=False).notebook == "01_package_model"
    assert refused(steps.verify_package, notebook()).notebook == "01_package_model"
    # 05 with no endpoint: the notebook that deploys it, 04 for a decision endpoint, 02 for the standard one.
    no_decision = refused(steps.decision_client, notebook())
    config = notebook().config
    assert str(no_decision) == (
        f"the CPU decision endpoint (one CPU instance type), {config.cpu_endpoint_name}, "
        "is not running locally: run notebook 04_deploy_decision_endpoints first"
    )
    assert refused(steps.client, notebook(), config.standard_endpoint_name).notebook == "02_deploy_standard_endpoint"
    # SageMaker's OpenAI-compatible route runs locally with the endpoints: none yet, so the notebook that deploys one
    assert refused(steps.route_client, notebook(), config.cpu_endpoint_name).notebook == "04_deploy_decision_endpoints"

    model_data_url = packaged(notebook())
    missing_image = refused(steps.deploy_decision_cpu, notebook(), progress=False)  # 04 before 03
    assert str(missing_image) == "no CPU decision image recorded yet: run notebook 03_build_decision_image first"
    image = steps.build_decision_image(notebook(), "cpu", progress=False)
    assert image.ok
    plan = steps.deploy_plan(notebook(), steps.DeploySpec("decision-cpu"))  # both recorded: 04 has what it needs
    assert plan.image_uri == image.image_uri and plan.model["PrimaryContainer"]["ModelDataUrl"] == model_data_url

    first = run_cleanup(notebook())
    assert "IAM role decision-workshop-codebuild: deleted" in first["role"]
    assert "objects deleted" in first["artifacts"] and first["stopped"].ok
    second = run_cleanup(notebook())  # 07 again: one line each, no emulator started for it
    assert all(
        second[k].startswith("nothing to clean") for k in ("deleted", "alarms", "builds", "role", "artifacts", "left")
    )
    assert not rehearsal.Rehearsal(local / "local").emulator_url()

    # After 07: a later notebook before 00 says to run 00.
    assert refused(steps.package_model, notebook(), progress=False).notebook == "00_setup"
    assert refused(steps.decision_client, notebook()).notebook == "00_setup"
    # 00 again (without the CodeBuild role cell): the deleted role in the config is noticed by 01 and 03.
    steps.setup(notebook())
    assert WorkshopConfig.load().codebuild_role_arn  # still in the config file after 07
    role_gone = refused(steps.package_model, notebook(), progress=False)
    assert (
        role_gone.notebook == "00_setup" and "CodeBuild role" in str(role_gone) and "does not exist" in str(role_gone)
    )
    assert refused(steps.build_decision_image, notebook(), "cpu", progress=False).notebook == "00_setup"

    # The model package and image 01 and 03 recorded before 07 are gone: checked, forgotten, not reused.
    recorded = notebook().outputs()
    assert recorded["model_data_url"] == model_data_url
    assert recorded["decision_image_cpu"] == image.image_uri
    image_gone = refused(steps.deploy_decision_cpu, notebook(), progress=False)
    assert image_gone.notebook == "03_build_decision_image" and "is gone" in str(image_gone)
    assert "decision_image_cpu" not in notebook().outputs()
    model_gone = refused(steps.deploy_standard, notebook(), progress=False)
    assert model_gone.notebook == "01_package_model" and "is gone" in str(model_gone)
    assert "model_data_url" not in notebook().outputs()
    assert (
        str(refused(steps.deploy_standard, notebook(), progress=False))
        == "no model data url recorded yet: run notebook 01_package_model first"
    )  # forgotten, so asked for again

    # 00's role cell, then 03 again: the flow works as on a first run.
    steps.ensure_codebuild_role(notebook())
    assert steps.build_decision_image(notebook(), "cpu", progress=False).ok

"""One base for the library's expected failures: WorkshopError (workshop_lib/errors.py).

Every exception class the library defines derives from it, so callers (the command line, the
notebooks' error display) can tell a failure with advice from a bug; the command line prints the
first in one line and lets the second show its traceback.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import workshop_lib
from workshop_lib import cli, cli_operate
from workshop_lib.errors import WorkshopError


def _library_exceptions():
    for info in pkgutil.walk_packages(workshop_lib.__path__, "workshop_lib."):
        if info.name.endswith("__main__"):
            continue  # runs the command line on import
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__ == module.__name__:
                yield obj


# The base, the kinds, and the few classes that carry data or that a caller catches by name. A new
# class here is a decision for the reviewer: raise a kind with a clear message unless some caller
# really has to tell the new failure apart from its kind.
KEPT = {
    # errors.py: the base and the kinds
    "errors.WorkshopError",
    "errors.InvalidInput",
    "errors.StepError",
    "errors.StepNotRun",
    "errors.AwsFailure",
    "errors.WorkshopTimeout",
    "errors.EndpointError",
    # caught by name in the library (or a notebook), so a kind would lose the distinction
    "config.BucketNotFound",  # setup creates the bucket
    "aws.hosting.DeployError",  # deploy adds what it already created to the message
    "aws.images.MutableImageReference",  # notebook 03 pins the image instead
    "aws.spend_guard.NotTheWorkshops",  # a schedule of someone else's is left alone
    "packaging.ManifestInvalid",  # the build check rewords it
    "evaluation.logprobs.NoLogprobs",
    "evaluation.profiles.CalibrationFileError",
    "evaluation.tasks.TaskFormatError",
    "local.dlc_rules.LauncherError",
    "local.processes.ServerFailedToStart",
    "local.rehearsal.RehearsalError",
    "local.route_stand_in.Refusal",  # the rehearsal's route answers it as AWS's HTTP refusal
    "client.jev.SystemOneFormatError",
    "client.openai_decisions.DecisionsFormatError",
    "client.chat_decision_calls.ChatDecisionFormatError",
    # an invocation's failure by HTTP status: each carries its own hint, and callers retry on some
    "client.endpoint_errors.BadRequest",
    "client.endpoint_errors.EndpointBusy",
    "client.endpoint_errors.NoCapacity",  # a scaled-to-zero endpoint: retry after minutes, not in a loop
    "client.endpoint_errors.EndpointNotFound",
    "client.endpoint_errors.EndpointRedirected",
    "client.endpoint_errors.EndpointServerError",
    "client.endpoint_errors.EndpointTimeout",
    "client.endpoint_errors.EndpointUnreachable",
    "client.endpoint_errors.InvalidDecision",
    "client.endpoint_errors.InvalidResponse",
    "client.endpoint_errors.ResponseTooLarge",
    "client.endpoint_errors.WireVersionMismatch",  # the fix is an update of the client or the image, not a retry
    "client.endpoint_errors.UnprocessableRequest",
}


def test_every_exception_the_library_defines_is_a_workshop_error():
    found = list(_library_exceptions())
    assert len(found) >= len(KEPT)  # the walk really saw the library
    assert [c.__qualname__ for c in found if not issubclass(c, WorkshopError)] == []


def test_the_library_defines_only_the_kinds_and_the_classes_a_caller_tells_apart():
    found = {f"{c.__module__.removeprefix('workshop_lib.')}.{c.__qualname__}" for c in _library_exceptions()}
    assert found == KEPT


def test_the_kinds_keep_their_built_in_bases_for_existing_handlers():
    from workshop_lib import errors

    assert issubclass(errors.InvalidInput, ValueError) and issubclass(errors.WorkshopTimeout, TimeoutError)
    assert issubclass(errors.AwsFailure, RuntimeError) and issubclass(errors.StepError, RuntimeError)


def test_the_cli_prints_a_workshop_error_in_one_line(monkeypatch, capsys):
    def refuse(args):
        raise WorkshopError("the bucket is in another region; set WORKSHOP_BUCKET to one in us-east-1")

    monkeypatch.setattr(cli_operate, "cmd_running", refuse)
    assert cli.main(["running", "--region", "us-east-1"]) == 1
    err = capsys.readouterr().err
    assert err == "error: the bucket is in another region; set WORKSHOP_BUCKET to one in us-east-1\n"


def test_the_cli_lets_a_bug_show_its_traceback(monkeypatch):
    def broken(args):
        return {}["missing"]

    monkeypatch.setattr(cli_operate, "cmd_running", broken)
    with pytest.raises(KeyError):
        cli.main(["running", "--region", "us-east-1"])


@pytest.mark.parametrize("content, needle", [(None, "cannot read"), ("{not json", "is not JSON")])
def test_a_bad_request_file_is_one_line(tmp_path, content, needle):
    path = tmp_path / "request.json"
    if content is not None:
        path.write_text(content)
    # the file is read before any client is made: nothing listens at this --url, and nothing is sent to it
    with pytest.raises(SystemExit) as done:
        cli.main(["invoke", "--request", str(path), "--url", "http://127.0.0.1:9/invocations"])
    message = str(done.value.code)
    assert needle in message and str(path) in message and "\n" not in message


def test_the_kinds_a_caller_tells_apart_hold_each_modules_errors():
    import ast
    from pathlib import Path

    from workshop_lib import errors
    from workshop_lib.client import EndpointBusy
    from workshop_lib.config import BucketNotFound

    assert issubclass(BucketNotFound, errors.InvalidInput) and issubclass(BucketNotFound, ValueError)
    assert issubclass(EndpointBusy, errors.EndpointError) and EndpointBusy("busy", status=503).status == 503
    # the bottom of the library: importable by every layer, the benchmark included
    tree = ast.parse(Path(errors.__file__).read_text())
    assert [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) and n.module != "__future__"] == []

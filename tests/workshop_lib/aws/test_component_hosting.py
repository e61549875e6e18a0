"""Sending a scale-to-zero deployment's calls, without AWS: waiting for the copies asked for, and the removal in
SageMaker's order, where what is already gone is said and anything else refused is raised."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from workshop_lib.aws import component_hosting
from workshop_lib.aws.component_hosting import ALREADY_GONE, DELETED, ComponentHosting, remove_components, wait_copies
from workshop_lib.errors import AwsFailure, WorkshopTimeout


def _described(status: str, current: int) -> dict:
    return {"InferenceComponentStatus": status, "RuntimeConfig": {"DesiredCopyCount": 1, "CurrentCopyCount": current}}


def _waiting(answers, timeout_s: float = 100.0):
    answers, now, slept = list(answers), [0.0], []

    def sleep(s):
        slept.append(s)
        now[0] += s

    result = wait_copies(
        lambda: answers.pop(0) if len(answers) > 1 else answers[0],
        "c",
        1,
        poll_s=10,
        timeout_s=timeout_s,
        progress=False,
        sleep=sleep,
        clock=lambda: now[0],
    )
    return result, slept


def test_the_wait_ends_once_the_component_is_in_service_with_the_copies_asked_for():
    result, slept = _waiting([_described("Updating", 0), _described("InService", 0), _described("InService", 1)])
    assert component_hosting.current_copies(result) == 1 and slept == [10, 10]


def test_a_failed_component_and_a_wait_too_long_are_raised():
    with pytest.raises(AwsFailure, match="failed"):
        _waiting([{**_described("Failed", 0), "FailureReason": "no capacity"}])
    with pytest.raises(WorkshopTimeout, match="has not reached 1 copy"):
        _waiting([_described("Updating", 0)], timeout_s=25)


def _error(code: str, message: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, "Op")


class Recording(ComponentHosting):
    def __init__(self, refusals):
        super().__init__(poll_s=0, timeout_s=0)
        self.sent, self.refusals = [], refusals

    def call(self, client, operation, request):
        self.sent.append(operation)
        if operation in self.refusals:
            raise self.refusals[operation]
        return {}

    def wait_gone(self, sm_client, component):
        self.sent.append("(gone)")


def test_removal_goes_alarm_scaling_component_and_says_what_was_already_gone():
    hosting = Recording({"DeleteScalingPolicy": _error("ObjectNotFoundException", "No scaling policy found for x")})
    done = remove_components(lambda service: object(), "decision-workshop-zero", hosting)
    assert hosting.sent == [
        "DeleteAlarms",
        "DeleteScalingPolicy",
        "DeleteScalingPolicy",
        "DeregisterScalableTarget",
        "DeleteInferenceComponent",
        "(gone)",
    ]
    states = dict(done)
    assert states["inference component decision-workshop-zero-decision"] == DELETED
    assert [s for w, s in done if w.startswith("scaling policy")] == [ALREADY_GONE, ALREADY_GONE]


def test_a_refusal_that_is_not_a_gone_resource_is_raised():
    hosting = Recording({"DeleteInferenceComponent": _error("AccessDeniedException", "not authorized")})
    with pytest.raises(ClientError, match="not authorized"):
        remove_components(lambda service: object(), "decision-workshop-zero", hosting)

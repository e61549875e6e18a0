"""The local rehearsal's mode (``LocalMode``), and the choice, once when a workshop loads, between it
and real AWS (``mode_for``; ``workshop_lib.aws.session.AwsMode``).

``LocalMode`` gives boto3 clients for the local AWS emulator, with fake credentials (botocore still
validates every request against the real service model before it leaves the process), each call
recorded in the rehearsal's call log so the audit can hold it against the policies; the builds and
the hosting come from ``stand_ins``. It never probes per call: it finds the running emulator the
first time a client is asked for and keeps its URL until ``forget()`` (after 07 stops it) or
``start_fresh()`` (00). ``workshop_lib.aws.session.Clients`` holds a mode's clients for one region.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from botocore import xform_name
from botocore.exceptions import ClientError

from ..aws import admin, calls, policies, spend_guard
from ..aws.inference_components import component_name
from ..aws.session import AwsMode, Clients
from ..config import LOCAL_ROLE_ARN
from ..errors import InvalidInput, StepNotRun
from ..name_rules import role_account
from . import permissions, rehearsal
from .component_stand_in import LocalComponents
from .stand_ins import EmulatedCodeBuild, LocalHosting, seed_dlc
from .strict import Strict

CALL_LOG = "aws-calls.jsonl"  # in the local rehearsal's folder, across the notebooks' kernels
FAKE_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def emulator_session() -> Any:
    """A boto3 session with fake credentials: whatever it reaches, it can never be a real account."""
    import boto3

    return boto3.session.Session(**FAKE_CREDENTIALS)


def emulator_client(service: str, region: str, url: str) -> Any:
    """A boto3 client for ``service`` pointed at the emulator at ``url``."""
    return calls.client(service, region, endpoint_url=url, session=emulator_session())


class LocalMode:
    """The local rehearsal (``rehearsal``): the emulator for the control plane, stand-ins for what it cannot do."""

    name = "local"

    def __init__(self, local: rehearsal.Rehearsal):
        self.rehearsal = local
        self.calls = permissions.CallLog(local.home / CALL_LOG, Strict(self._reader, EMULATED_ACCOUNT))
        self._url: str | None = None
        self._readers: dict[tuple[str, str, str], Any] = {}

    def _reader(self, service: str, region: str) -> Any:
        """An unrecorded client, for the strict rules' reads of the emulator's state."""
        key = (service, region, self.emulator_url)
        if key not in self._readers:
            self._readers[key] = emulator_client(service, region, self.emulator_url)
        return self._readers[key]

    @property
    def emulator_url(self) -> str:
        """The running emulator's URL, looked up once; StepNotRun naming notebook 00 when none runs."""
        if self._url is None:
            url = self.rehearsal.emulator_url()
            if not url:
                raise StepNotRun(
                    "00_setup",
                    "the local AWS emulator is not running (08_cleanup stops it, and it "
                    f"ends by itself after {rehearsal.KEEP_ALIVE_S // 3600} h)",
                )
            self._url = url
        return self._url

    def client(self, service: str, region: str) -> Any:
        made = emulator_client(service, region, self.emulator_url)
        self.calls.attach(made)
        return made

    def build_runner(self, clients: Clients) -> EmulatedCodeBuild:
        return EmulatedCodeBuild(clients.s3, clients.ecr, self.calls, self.rehearsal)

    def hosting(self, clients: Clients) -> LocalHosting:
        return LocalHosting(clients.s3, self.calls, self.rehearsal)

    def acting_as(self, principal: str | None) -> AbstractContextManager[None]:
        """Record the block's calls as another principal's (None: AWS's own doing, not recorded)."""
        return self.calls.acting_as(principal)

    def forget(self) -> None:
        """The emulator was stopped: the next client looks for a running one again."""
        self._url = None
        self._readers.clear()

    def start_fresh(self) -> tuple[str, list[str]]:
        """Stop whatever this rehearsal runs, start an empty emulator and a fresh call record (and a
        Studio role with only its managed policy). Returns the URL and what was stopped."""
        stopped = self.rehearsal.stop_all()
        self._url = self.rehearsal.ensure_emulator()
        self.calls.clear()
        self.calls.attached.clear()
        return self._url, stopped

    def seed(self, region: str) -> None:
        """Put in the emulator what AWS itself publishes and the workshop reads: the DLC's images in
        ``region``'s DLC registry. Not anyone's call, so not recorded. Safe to repeat."""
        seed_dlc(emulator_client("ecr", region, self.emulator_url))
        seed_studio_role(emulator_client("iam", region, self.emulator_url))

    def fire_deadline(self, endpoint_name: str, region: str) -> None:
        """What EventBridge Scheduler does at an endpoint's deadline (the emulator never fires one): call each
        schedule's target as the schedule's role, which the account holds with its policies and boundary
        (strict.py), and the rules of a deletion enforced. An endpoint that hosts an inference component has two
        schedules, fired in their order: the component's DeleteInferenceComponent (answered by the stand-in, which
        stops the component's process), then the endpoint's DeleteEndpoint, which SageMaker refuses while a
        component remains. A refusal is raised, and the schedules stay."""
        reader = self._reader("scheduler", region)
        sagemaker = self.client("sagemaker", region)
        components = LocalComponents(self.rehearsal, None, self.calls)
        component = self._component_schedule(reader, endpoint_name)
        if component:
            with self.acting_as(policies.DEADLINES):
                components.call(sagemaker, "DeleteInferenceComponent", json.loads(component["Target"]["Input"]))
        described = reader.get_schedule(**spend_guard.get_request(endpoint_name))
        if not spend_guard.is_workshop_schedule(described, endpoint_name):
            raise spend_guard.NotTheWorkshops(f"schedule {described['Name']} is not the workshop's deadline")
        hosted = components.hosted_by(endpoint_name)
        if hosted:
            raise ClientError(
                {
                    "Error": {
                        "Code": "ValidationException",
                        "Message": f"Endpoint {endpoint_name} cannot be deleted while it hosts inference components "
                        f"({', '.join(hosted)}); delete them first.",
                    },
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                },
                "DeleteEndpoint",
            )
        with self.acting_as(policies.DEADLINES):
            sagemaker.delete_endpoint(**json.loads(described["Target"]["Input"]))

    @staticmethod
    def _component_schedule(reader: Any, endpoint_name: str) -> dict[str, Any] | None:
        """The workshop's schedule that deletes the endpoint's inference component, or None when it has none."""
        try:
            component = component_name(endpoint_name)
            described = reader.get_schedule(**spend_guard.get_request(component))
        except (InvalidInput, ClientError):
            return None
        return described if spend_guard.is_workshop_schedule(described, component, spend_guard.COMPONENT) else None

    def run_as_administrator(self, commands: Sequence[Sequence[str]], region: str) -> list[str]:
        """Run AWS CLI lines (``admin.commands``) as an administrator would: each through an emulator client,
        AWS's rules enforced (strict.py), not recorded as the operator's. Returns what each did."""
        done = []
        for argv in commands:
            service, operation, params = admin.call_of(argv)
            client = self.client(service, region)
            with self.acting_as(None):
                getattr(client, xform_name(operation))(**params)
            done.append(admin.shell(argv))
        return done


EMULATED_ACCOUNT = str(role_account(LOCAL_ROLE_ARN))  # LOCAL_ROLE_ARN is a role ARN: never None
SAGEMAKER_FULL_ACCESS_ARN = "arn:aws:iam::aws:policy/AmazonSageMakerFullAccess"


def seed_studio_role(iam: Any) -> None:
    """The Studio execution role the rehearsal's participant acts as, as an account already holds it: trusted by
    SageMaker, carrying AmazonSageMakerFullAccess (the emulator loads AWS's managed policies). Safe to repeat."""
    name = LOCAL_ROLE_ARN.rsplit("/", 1)[1]
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
    try:
        iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "EntityAlreadyExists":
            raise
    iam.attach_role_policy(RoleName=name, PolicyArn=SAGEMAKER_FULL_ACCESS_ARN)


def mode_for(name: str, local: rehearsal.Rehearsal) -> AwsMode | LocalMode:
    """The mode a config names (``WorkshopConfig.mode``); ``local`` is the rehearsal's folder."""
    return LocalMode(local) if name == "local" else AwsMode()


__all__ = ["CALL_LOG", "FAKE_CREDENTIALS", "LocalMode", "emulator_client", "emulator_session", "mode_for"]

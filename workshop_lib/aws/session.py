"""The workshop's AWS session: one mode's boto3 clients for one region (``Clients``), and the real-AWS
mode (``AwsMode``) that supplies them in the configured region.

A mode says where clients come from and who does what only AWS can do (running builds, hosting
endpoints); ``Mode`` is what ``Clients`` asks of one. On AWS, CodeBuild runs the builds and SageMaker
hosts the endpoints; the local rehearsal's mode (``workshop_lib.local.modes.LocalMode``) supplies
emulator clients and stand-ins instead. ``Clients`` is given the region once: every client it makes is
in that region, and the flows that take a client read the region from it (``calls.region_of``).
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from typing import Any, Protocol

from . import calls, codebuild
from .buckets import expect_owner
from .hosting import SageMakerHosting
from .requests_sent import RequestRecorder


class Mode(Protocol):
    """What ``Clients`` needs of a mode."""

    name: str

    @property
    def calls(self) -> object:
        """The mode's call record (None on AWS, where IAM itself checks every call)."""

    def client(self, service: str, region: str) -> Any: ...

    def build_runner(self, clients: Clients) -> Any: ...

    def hosting(self, clients: Clients) -> Any: ...

    def acting_as(self, principal: str | None) -> AbstractContextManager[None]: ...


class AwsMode:
    """Real AWS: the default credential chain's clients; CodeBuild builds, SageMaker hosts."""

    name = "aws"
    calls = None  # IAM itself checks every call; nothing is recorded

    def client(self, service: str, region: str) -> Any:
        return calls.client(service, region)

    def build_runner(self, clients: Clients) -> codebuild.CodeBuildRunner:
        return codebuild.CodeBuildRunner()

    def hosting(self, clients: Clients) -> SageMakerHosting:
        return SageMakerHosting()

    def acting_as(self, principal: str | None) -> AbstractContextManager[None]:
        return contextlib.nullcontext()

    def forget(self) -> None:
        pass


class Clients:
    """One mode's boto3 clients for one region, made on first use, and the two things only AWS can do:
    running builds (``builds``) and hosting endpoints (``hosting``), as the mode supplies them."""

    def __init__(self, mode: Mode, region: str, requests: RequestRecorder | None = None):
        self.mode, self.region = mode, region
        self.calls = mode.calls
        self.requests = requests or RequestRecorder()  # what each step sent, for the notebook to show
        self.local = mode.name == "local"
        self._made: dict[str, object] = {}
        self._account: str | None = None
        self._builds = self._hosting = None

    def acting_as(self, principal: str | None) -> AbstractContextManager[None]:
        """Record the block's calls as another principal's (local mode; a no-op on AWS)."""
        return self.mode.acting_as(principal)

    def get(self, service: str) -> Any:
        if service not in self._made:
            made = self._made[service] = self.mode.client(service, self.region)
            if service == "s3":
                expect_owner(made, self.account)
            self.requests.attach(made)
        return self._made[service]

    @property
    def builds(self) -> Any:
        if self._builds is None:
            self._builds = self.mode.build_runner(self)
        return self._builds

    @property
    def hosting(self) -> Any:
        if self._hosting is None:
            self._hosting = self.mode.hosting(self)
        return self._hosting

    def account(self) -> str:
        """The account the clients act in (asked once)."""
        if self._account is None:
            self._account = self.sts.get_caller_identity()["Account"]
        return self._account

    sm = property(lambda self: self.get("sagemaker"))
    s3 = property(lambda self: self.get("s3"))
    ecr = property(lambda self: self.get("ecr"))
    codebuild = property(lambda self: self.get("codebuild"))
    logs = property(lambda self: self.get("logs"))
    sts = property(lambda self: self.get("sts"))


__all__ = ["AwsMode", "Clients", "Mode"]

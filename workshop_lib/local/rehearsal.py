"""The local rehearsal's processes: the AWS emulator and the local endpoints, and their registry.

In ``local`` mode the notebooks and the CLI run the same steps as on AWS, against

* the emulator: moto in server mode on a free loopback port (``modes.LocalMode`` makes the
  boto3 clients that reach it, with fake credentials);
* local endpoints: for each SageMaker endpoint created in the emulator, a real
  process started from what the emulator recorded: DescribeEndpoint -> endpoint
  config -> model (``Image``, ``Environment``, ``ModelDataUrl``), the tarball
  downloaded from emulated S3 and extracted the way SageMaker fills ``/opt/ml/model``.
  The DLC's image gets llama-server behind nginx under the DLC entrypoint's rules
  (``dlc_server``), or, where llama-server or nginx is missing, the decision adapter
  answering the same chat schema; every other image gets the decision adapter
  (nginx + gunicorn + llama.cpp).

A rehearsal spans several notebook kernels, so the processes are started with a
keep-alive (they run under ``timeout`` and end by themselves after
``KEEP_ALIVE_S``) and recorded in a registry file in the rehearsal's folder
(``Rehearsal(home)``; a workshop's is ``local/`` next to its config file, or
``$WORKSHOP_LOCAL_DIR``). Any later process can find them there and stop them:
``Rehearsal(home).stop_all()``; ``default()`` is the default folder's rehearsal.

Three settings always differ from the endpoint's: ``SM_LLAMA_CPP_THREADS`` is
forced to 2 (this machine's cores, not the instance's vCPUs),
``SM_LLAMA_CPP_N_GPU_LAYERS`` to 0 (no GPU here), and the adapter's request limit
(``DECISION_ADAPTER_REQUEST_TIMEOUT``) to 120 s: local endpoints share two cores with
each other, the notebook's kernel and a browser, and llama.cpp's threads slow down
sharply when they cannot each have a core. ``start_local_endpoint`` reports every change.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from botocore.exceptions import ClientError

from ..aws import images
from ..config import default_path
from ..errors import WorkshopError
from . import dlc_server
from .model_cache import download_and_extract
from .permissions import SAGEMAKER, CallLog
from .processes import (
    AdapterProcess,
    EmulatorProcess,
    RouteProcess,
    ServerFailedToStart,
    ServerProcess,
    group_alive,
    stop_process_group,
)
from .routed_transport import RoutedTransport

KEEP_ALIVE_S = 2 * 3600
LOCAL_THREADS = 2
LOCAL_GPU_LAYERS = 0
LOCAL_REQUEST_TIMEOUT_S = 120
SWITCH_DRAIN_S = 1.0  # a replaced local endpoint's process lives on this long after the switch
FORCED_SETTINGS = {
    "SM_LLAMA_CPP_THREADS": str(LOCAL_THREADS),
    "SM_LLAMA_CPP_N_GPU_LAYERS": str(LOCAL_GPU_LAYERS),
    "DECISION_ADAPTER_REQUEST_TIMEOUT": str(LOCAL_REQUEST_TIMEOUT_S),
}
# llama-server reads no DECISION_ADAPTER_* setting; nginx in front of it gets the same request limit.
LLAMA_SERVER_SETTINGS = {k: v for k, v in FORCED_SETTINGS.items() if k.startswith("SM_LLAMA_CPP_")}
ADAPTER, LLAMA_SERVER = "decision adapter", "llama-server"
# The embedded model reads positions through the answer letters (issue #37's held-out tasks), so local decision
# endpoints serve the cloze readout unless the endpoint's environment names one; the AWS path keeps letters.
LOCAL_READOUT = {"DECISION_ADAPTER_READOUT": "cloze"}
READOUT_WHY = (
    "readout cloze (each option's text scored after the question): on this 135M model the letters "
    "readout reads positions (16 of 43 held-out tasks right, chance 33 %; 42 of 43 flip when the "
    "options are reversed); the AWS path keeps letters, the published method"
)


def readout_env(declared: Mapping[str, str]) -> dict[str, str]:
    """What a local adapter serving the embedded model adds to the environment it was declared with: the cloze
    readout (``READOUT_WHY`` says why), or nothing where ``declared`` names a readout, which then wins. The one
    rule for the rehearsal's endpoints, ``workshop serve`` and ``make demo``."""
    return {} if set(LOCAL_READOUT) & set(declared) else dict(LOCAL_READOUT)


# Processes started by this Python process: stopped through their Popen, so they are reaped.
_OWNED: dict[int, ServerProcess] = {}


class RehearsalError(WorkshopError, RuntimeError):
    """Local rehearsal cannot do what was asked; the message says what to run first."""


# ---- where things live ------------------------------------------------------------------


def local_dir(config_path: str | Path | None = None) -> Path:
    """The rehearsal folder of the workshop whose config is at ``config_path`` (default: the one
    notebooks use): ``local/`` next to it, unless ``WORKSHOP_LOCAL_DIR`` says otherwise."""
    override = os.environ.get("WORKSHOP_LOCAL_DIR", "").strip()
    return Path(override) if override else Path(config_path or default_path()).parent / "local"


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---- process groups ----------------------------------------------------------------------


def _stop_group(pgid: int, timeout_s: float = 30.0) -> bool:
    """Stop a registered process group (ours or another kernel's); False if nothing was running."""
    owned = _OWNED.pop(pgid, None)
    if owned is not None:
        alive = owned.process is not None and owned.process.poll() is None
        owned.stop(timeout_s=timeout_s)
        return alive
    return stop_process_group(pgid, timeout_s)


def _get(url: str, timeout: float = 2.0) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return cast(int, response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError):
        return None


def _record(server: ServerProcess, **extra: object) -> dict[str, Any]:
    assert server.process is not None  # recorded once started
    pid = server.process.pid  # started in a new session: the group id is the leader's pid
    return {
        "pid": pid,
        "pgid": pid,
        "port": server.port,
        "url": server.url,
        "log": str(server.log_path),
        "started": _now(),
        "keep_alive_s": server.keep_alive_s,
        **extra,
    }


# ---- local endpoints --------------------------------------------------------------------------


@dataclass
class LocalEndpoint:
    name: str
    url: str
    log: Path
    model_dir: Path
    model_name: str
    environment: dict[str, str]
    changed: dict[str, tuple[str | None, str]] = field(default_factory=dict)  # var -> (on AWS, here)
    seconds: float = 0.0
    server: str = ADAPTER  # what serves it: ADAPTER or LLAMA_SERVER
    fallback: str = ""  # why the adapter stands in for the DLC's llama-server, where it does
    readout_note: str = ""  # why the local adapter serves another readout than the endpoint declares, where it does

    def changes_text(self) -> str:
        if not self.changed:
            return ""
        parts = [f"{k}: {old if old is not None else '(unset)'} -> {new}" for k, (old, new) in self.changed.items()]
        return "locally " + ", ".join(parts) + " (2 CPU cores, no GPU on this machine)"

    def __str__(self) -> str:
        return f"{self.name}: {self.url} (model {self.model_name}, log {self.log})"


@dataclass(frozen=True)
class ProcessStatus:
    what: str
    url: str
    running: bool
    log: str

    def __str__(self) -> str:
        return f"{self.what:<40} {'running' if self.running else 'stopped':<8} {self.url}  (log {self.log})"


class Rehearsal:
    """One rehearsal's folder (``home``): its process registry, the emulator, the local endpoints,
    their logs and extracted models. The workshop's is ``Workshop.rehearsal``; ``default()`` is the
    default folder's."""

    def __init__(self, home: str | Path):
        self.home = Path(home)

    def __repr__(self) -> str:
        return f"Rehearsal({self.home})"

    def registry_path(self) -> Path:
        return self.home / "rehearsal.json"

    def read_registry(self) -> dict[str, Any]:
        """The local endpoints, the emulator and the route as the registry file holds them (followers such as
        ``RoutedTransport`` and the route process read it for each request)."""
        path = self.registry_path()
        try:
            data: dict[str, Any] = json.loads(path.read_text())  # as write_registry left it
        except (OSError, ValueError):
            data = {}
        data.setdefault("emulator", None)
        data.setdefault("endpoints", {})
        data.setdefault("openai_route", None)
        return data

    def write_registry(self, data: dict[str, Any]) -> None:
        """Replace the registry file with ``data`` in one rename, so a follower never reads half of it."""
        path = self.registry_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        tmp.replace(path)

    def emulator_url(self) -> str | None:
        """The running emulator's URL, or None."""
        entry = self.read_registry()["emulator"]
        if entry and group_alive(entry["pgid"]) and _get(entry["url"] + "/moto-api/") == 200:
            return cast(str, entry["url"])
        return None

    def ensure_emulator(self, keep_alive_s: float = KEEP_ALIVE_S, timeout_s: float = 60.0) -> str:
        """Return the emulator's URL, starting it first if it is not running and reachable.

        A new emulator starts empty, so local endpoints recorded for an earlier one are stopped.
        """
        url = self.emulator_url()
        if url:
            return url
        data = self.read_registry()
        for name in list(data["endpoints"]):
            self.stop_endpoint(name)
        if data["emulator"]:
            _stop_group(data["emulator"]["pgid"], timeout_s=10)
        emulator = EmulatorProcess(log_path=self.home / "emulator.log", keep_alive_s=keep_alive_s)
        emulator.start(timeout_s=timeout_s)
        _OWNED[emulator.pid] = emulator
        data = self.read_registry()
        data["emulator"] = _record(emulator)
        data["endpoints"] = {}
        self.write_registry(data)
        return emulator.url

    def _model_for_endpoint(self, sm_client: Any, name: str) -> str:
        try:
            described = sm_client.describe_endpoint(EndpointName=name)
        except ClientError as exc:
            raise RehearsalError(f"the emulator has no endpoint {name!r}; deploy it first") from exc
        config = sm_client.describe_endpoint_config(EndpointConfigName=described["EndpointConfigName"])
        return cast(str, config["ProductionVariants"][0]["ModelName"])

    def start_local_endpoint(
        self,
        name: str,
        sm_client: Any,
        s3_client: Any,
        *,
        keep_alive_s: float = KEEP_ALIVE_S,
        timeout_s: float = 180.0,
        calls: CallLog | None = None,
        replace: bool = False,
        model_name: str | None = None,
    ) -> LocalEndpoint:
        """Start a real server for endpoint ``name`` from what the emulator recorded for it: for the
        DLC's image llama-server behind nginx (the adapter where they are missing: ``fallback`` says
        why), else the decision adapter.

        Follows DescribeEndpoint -> DescribeEndpointConfig -> DescribeModel. A running
        endpoint of that name is replaced: stopped first, or with ``replace`` (an update) only once the
        new process is ready; the registry then names the new one, which is where clients that follow it
        (``RoutedTransport``) send their next request, and the old one is stopped after ``SWITCH_DRAIN_S``,
        finishing what it holds.
        With a ``calls`` log (permissions.CallLog), the model download is recorded as the
        SageMaker execution role's, and SageMaker's reading of its own records not at all. ``model_name``
        serves that model under ``name`` instead of the endpoint's (an inference component's process).
        """
        from contextlib import nullcontext

        def as_(principal: str | None) -> AbstractContextManager[None]:
            return calls.acting_as(principal) if calls is not None else nullcontext()

        started = time.perf_counter()
        with as_(None):
            model_name = model_name or self._model_for_endpoint(sm_client, name)
            container = sm_client.describe_model(ModelName=model_name)["PrimaryContainer"]
        if not container.get("ModelDataUrl"):
            raise RehearsalError(f"model {model_name} has no ModelDataUrl; local endpoints serve a packaged model")
        with as_(SAGEMAKER):
            model_dir = download_and_extract(self.home, s3_client, container["ModelDataUrl"])
        declared = dict(container.get("Environment") or {})
        dlc = _is_dlc(container["Image"])
        fallback = dlc_server.missing() if dlc else ""
        kind = LLAMA_SERVER if dlc and not fallback else ADAPTER
        forced = LLAMA_SERVER_SETTINGS if kind == LLAMA_SERVER else FORCED_SETTINGS
        local_readout = readout_env(declared) if kind == ADAPTER else {}
        environment = {**declared, **local_readout, **forced}
        changed = {k: (declared.get(k), v) for k, v in forced.items() if declared.get(k) != v}
        previous = self.read_registry()["endpoints"].get(name) if replace else None
        if previous is None:
            self.stop_endpoint(name)
        log = self.home / "endpoints" / (f"{name}.{model_name}.log" if previous else f"{name}.log")
        if log.exists():
            log.unlink()
        extra = {}
        server: ServerProcess
        if kind == LLAMA_SERVER:
            launched = dlc_server.LlamaServerProcess(
                model_dir,
                log_path=log,
                settings=environment,
                work_dir=log.with_suffix(".serve"),
                keep_alive_s=keep_alive_s,
                timeout_s=LOCAL_REQUEST_TIMEOUT_S,
            )
            changed.update({k: (declared.get(k), launched.settings[k]) for k in launched.moved})
            environment = launched.settings
            extra = {"private_url": launched.private_url}
            server = launched
        else:
            server = AdapterProcess(
                model_dir, log_path=log, threads=LOCAL_THREADS, env=environment, keep_alive_s=keep_alive_s
            )
        try:
            server.start(timeout_s=timeout_s)
        except (ServerFailedToStart, dlc_server.LauncherError) as exc:
            raise RehearsalError(f"the local endpoint {name} did not start: {exc}") from None
        _OWNED[server.pid] = server
        data = self.read_registry()
        data["endpoints"][name] = _record(
            server,
            model_dir=str(model_dir),
            model_name=model_name,
            environment=environment,
            served_by=kind,
            fallback=fallback,
            **extra,
        )
        self.write_registry(data)  # the switch: from here on, followers send to the new process
        self.ensure_openai_route(sm_client.meta.region_name, keep_alive_s)
        if previous is not None:
            time.sleep(SWITCH_DRAIN_S)  # a request that read the old address just before has reached it
            _stop_group(previous["pgid"])
        return LocalEndpoint(
            name,
            server.url,
            log,
            model_dir,
            model_name,
            environment,
            changed,
            time.perf_counter() - started,
            kind,
            fallback,
            READOUT_WHY if local_readout else "",
        )

    def endpoint_server(self, name: str) -> dict[str, Any]:
        """What serves the local endpoint ``name``: ``{"server": ADAPTER | LLAMA_SERVER, "fallback": why the
        adapter stands in, "private_url": llama-server's own port}``; RehearsalError if it is not running."""
        self.endpoint_url(name)
        entry = self.read_registry()["endpoints"][name]
        return {
            "server": entry.get("served_by", ADAPTER),
            "fallback": entry.get("fallback", ""),
            "private_url": entry.get("private_url"),
        }

    def endpoint_url(self, name: str) -> str:
        """The URL of the local endpoint ``name``; RehearsalError if it is not running."""
        entry = self.read_registry()["endpoints"].get(name)
        if not entry or not group_alive(entry["pgid"]):
            raise RehearsalError(f"no local endpoint {name!r} is running; deploy it (notebooks 02 and 04) first")
        return cast(str, entry["url"])

    def endpoint_log(self, name: str) -> Path:
        entry = self.read_registry()["endpoints"].get(name)
        if not entry:
            raise RehearsalError(f"no local endpoint {name!r} was started")
        return Path(entry["log"])

    def stop_endpoint(self, name: str) -> bool:
        """Stop the local endpoint ``name`` (and the OpenAI-compatible route with the last one); False if it
        was not running."""
        data = self.read_registry()
        entry = data["endpoints"].pop(name, None)
        stopped = _stop_group(entry["pgid"]) if entry else False
        if entry:
            if not data["endpoints"] and data["openai_route"]:
                _stop_group(data["openai_route"]["pgid"], timeout_s=10)
                data["openai_route"] = None
            self.write_registry(data)
        return stopped

    def ensure_openai_route(self, region: str, keep_alive_s: float = KEEP_ALIVE_S) -> str:
        """The URL of SageMaker's OpenAI-compatible route for this rehearsal's endpoints in ``region``
        (``openai_route``), started first if it is not running there."""
        entry = self.read_registry()["openai_route"]
        if entry and entry.get("region") == region and group_alive(entry["pgid"]):
            return cast(str, entry["url"])
        if entry:
            _stop_group(entry["pgid"], timeout_s=10)
        route = RouteProcess(
            self.registry_path(), region, log_path=self.home / "openai-route.log", keep_alive_s=keep_alive_s
        )
        route.start(timeout_s=60)
        _OWNED[route.pid] = route
        data = self.read_registry()
        data["openai_route"] = _record(route, region=region)
        self.write_registry(data)
        return route.url

    def openai_route_url(self) -> str:
        """The running OpenAI-compatible route's URL; RehearsalError if no local endpoint runs (nor the route)."""
        entry = self.read_registry()["openai_route"]
        if not entry or not group_alive(entry["pgid"]):
            raise RehearsalError("the OpenAI-compatible route runs with the local endpoints: deploy one (notebook 04)")
        return cast(str, entry["url"])

    def stop_all(self) -> list[str]:
        """Stop every local endpoint and the emulator; returns what was running. Safe to call twice."""
        data = self.read_registry()
        stopped = [f"local endpoint {name}" for name in list(data["endpoints"]) if self.stop_endpoint(name)]
        data = self.read_registry()
        if data["openai_route"]:
            _stop_group(data["openai_route"]["pgid"], timeout_s=10)
            data["openai_route"] = None
        if data["emulator"]:
            if _stop_group(data["emulator"]["pgid"]):
                stopped.append("AWS emulator")
            data["emulator"] = None
        data["endpoints"] = {}
        if self.registry_path().exists() or stopped:
            self.write_registry(data)
        # Extracted model copies are only for running endpoints; none runs now.
        shutil.rmtree(self.home / "models", ignore_errors=True)
        return stopped

    def status(self) -> list[ProcessStatus]:
        """What the registry records, and whether each process still runs."""
        data = self.read_registry()
        found = []
        if data["emulator"]:
            e = data["emulator"]
            found.append(ProcessStatus("AWS emulator (moto server)", e["url"], group_alive(e["pgid"]), e["log"]))
        for name, e in sorted(data["endpoints"].items()):
            found.append(ProcessStatus(f"local endpoint {name}", e["url"], group_alive(e["pgid"]), e["log"]))
        if route := data["openai_route"]:
            found.append(
                ProcessStatus("OpenAI-compatible route", route["url"], group_alive(route["pgid"]), route["log"])
            )
        return found

    def format_status(self, found: list[ProcessStatus] | None = None) -> str:
        found = self.status() if found is None else found
        running = [p for p in found if p.running]
        if not running:
            return "no local rehearsal processes are running"
        return "\n".join(str(p) for p in running)


def _is_dlc(image_uri: str) -> bool:
    return images.parse_image_uri(image_uri).repository == images.DLC_REPOSITORY


def default() -> Rehearsal:
    """The default folder's rehearsal (``local_dir()``): the one the command line and scripts act on."""
    return Rehearsal(local_dir())


__all__ = [
    "ADAPTER",
    "KEEP_ALIVE_S",
    "LLAMA_SERVER",
    "LOCAL_THREADS",
    "LocalEndpoint",
    "ProcessStatus",
    "Rehearsal",
    "RehearsalError",
    "RoutedTransport",
    "default",
    "group_alive",
    "local_dir",
]

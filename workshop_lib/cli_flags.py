"""The command line's shared flags: every workshop command's (``--config`` and the settings' own, each made
from its declaration in ``WorkshopConfig``), the deploy commands', and the endpoint, target and task flags.

Every flag defaults to None (False for switches): what is left out comes from the saved config, or from the
step's or the endpoints builder's default (tests/workshop_lib/test_cli.py checks).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from typing import Protocol

from .config import WorkshopConfig, check_endpoint_name
from .errors import InvalidInput

SETTINGS = {f.name: f for f in dataclasses.fields(WorkshopConfig)}
EVERY_COMMAND = ("mode", "region")  # the settings every workshop command takes a flag for

Command = Callable[[argparse.Namespace], int]  # a ``cli_commands.cmd_*``: the parsed flags in, the exit status out


class AddCommand(Protocol):
    """``cli.build_parser``'s ``add``: a sub-command whose flags the caller adds to the parser it returns."""

    def __call__(
        self,
        name: str,
        func: Command,
        help_text: str,
        description: str | None = None,
        aliases: Sequence[str] = (),
    ) -> argparse.ArgumentParser: ...


def setting_flag(group: argparse._ArgumentGroup, name: str) -> None:
    """The flag of setting ``name``, from its declaration: flag, choices and meaning; its value is the setting's
    for this run (``cli_commands.workshop_for``), so it defaults to None."""
    declared = SETTINGS[name].metadata
    default = SETTINGS[name].default
    metavar = None if declared["choices"] else declared["flag"].lstrip("-").replace("-", "_").upper()
    group.add_argument(
        declared["flag"],
        dest=name,
        choices=declared["choices"],
        metavar=metavar,
        help=f"{declared['doc']}; left out: the config's {name}" + (f" (default {default})" if default else ""),
    )


def workshop_flags(parser: argparse.ArgumentParser, *settings: str) -> None:
    """The flags every workshop command takes (``--config`` and those of ``EVERY_COMMAND``), and those of the
    ``settings`` (WorkshopConfig fields) it uses."""
    group = parser.add_argument_group("workshop config (flags override the saved config for this run)")
    group.add_argument(
        "--config",
        metavar="PATH",
        help="config file (default: $WORKSHOP_CONFIG or .workshop/config.json; outputs.json sits beside it)",
    )
    for name in (*EVERY_COMMAND, *settings):
        setting_flag(group, name)


def endpoint_name_type(value: str) -> str:
    """``--name``'s type: an endpoint name SageMaker takes, in lower case (``config.check_endpoint_name``)."""
    try:
        return check_endpoint_name(value, "--name")
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def deploy_flags(parser: argparse.ArgumentParser, *, default_name: str) -> None:
    parser.add_argument(
        "--image-uri",
        help="image pinned by digest: repo@sha256:... (tags are refused); default: "
        "the pinned DLC (deploy-standard) or the image build-image recorded",
    )
    parser.add_argument(
        "--model-data-url",
        help="s3://.../model.tar.gz in the endpoint's region; default: the one package-model recorded",
    )
    parser.add_argument(
        "--name",
        type=endpoint_name_type,
        help=f"endpoint, config and model name, lower case (default: the config's {default_name})",
    )
    parser.add_argument("--ctx-size", "--context-size", type=int, help="llama.cpp context size")
    parser.add_argument("--threads", type=int, help="llama.cpp threads")
    parser.add_argument("--startup-timeout", type=int, help="ContainerStartupHealthCheckTimeoutInSeconds")
    parser.add_argument("--download-timeout", type=int, help="ModelDataDownloadTimeoutInSeconds")
    parser.add_argument("--dry-run", action="store_true", help="print the validated requests, send nothing")
    parser.add_argument("--no-wait", action="store_true", help="return once the endpoint is being created (AWS)")


def name_flag(
    parser: argparse.ArgumentParser,
    *,
    default: str = "the deploy path's decision endpoint",
    what: str = "endpoint name",
) -> None:
    """``--name``: the one endpoint a command acts on."""
    parser.add_argument("--name", type=endpoint_name_type, help=f"{what} (default: {default})")


def target_flags(parser: argparse.ArgumentParser, *, default: str) -> None:
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "--endpoint-name",
        "--endpoint",
        "--name",
        dest="endpoint_name",
        metavar="NAME",
        help=f"endpoint name (default: {default})",
    )
    target.add_argument("--url", help="a local adapter's base URL, e.g. http://127.0.0.1:8080 (no config needed)")


def task_flags(
    parser: argparse.ArgumentParser, *, out: str, tasks: bool = True, limit: str = "use N tasks, spread across families"
) -> None:
    """``--tasks`` (unless ``tasks=False``), ``--limit`` and ``--out``: the commands that read tasks and write a file."""
    if tasks:
        parser.add_argument("--tasks", metavar="PATH", help="JSONL task file (default: the packaged task set)")
    parser.add_argument("--limit", type=int, metavar="N", help=limit)
    parser.add_argument("--out", metavar="PATH", help=out)

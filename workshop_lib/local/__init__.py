"""What stands in for AWS on this machine: the local AWS emulator and the local endpoints as real
processes (``processes``), their registry across notebook kernels (``rehearsal``), llama-server
started by the DLC entrypoint's rules (``dlc_server``), what the emulator cannot do done here
(``stand_ins``, ``capture_stand_in``), the record and audit of every call against the IAM policies
(``permissions``, with what IAM checks for each call in ``iam_needs``), and the local mode and the
choice between it and AWS (``modes``).

It may import ``workshop_lib.aws`` (the flows it plugs into) and the bottom layer; nothing under
``aws`` or ``client`` imports it. The package re-exports the process helpers that tests and
benchmarks start servers with.
"""

from .processes import (
    AdapterProcess,
    EmulatorProcess,
    ServerFailedToStart,
    ServerProcess,
    free_port,
    group_alive,
    post_json,
    stop_process_group,
)

__all__ = [
    "AdapterProcess",
    "EmulatorProcess",
    "ServerFailedToStart",
    "ServerProcess",
    "free_port",
    "group_alive",
    "post_json",
    "stop_process_group",
]

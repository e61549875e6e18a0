"""``python -m workshop_lib <command>``: the library's functions from a shell."""

from __future__ import annotations

import argparse
import sys


def _demo(args: argparse.Namespace) -> int:
    from . import demo

    return demo.run(args.work_dir)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m workshop_lib",
        description="Deploy llama.cpp decision models on Amazon SageMaker AI, or rehearse locally.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser("demo", help="rehearse the decision path locally with the embedded model",
                               description="Package the embedded model, start the real adapter on a local "
                                           "port, send a decision, a shared-state batch and a chat message, "
                                           "then stop the server.")
    demo.add_argument("--work-dir", default=".workshop/demo", help="where the package and logs go")
    demo.set_defaults(func=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - one readable line instead of a traceback
        print(f"error: {exc}", file=sys.stderr)
        return 1

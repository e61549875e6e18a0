"""The command line's reference page, rendered from the parser ``workshop_lib.cli`` builds: a table of
the subcommands, then each one's usage and arguments."""

from __future__ import annotations

import argparse
import importlib
import os

from scripts.docs_markdown import cell, code, para, table


def _subcommands(parser: argparse.ArgumentParser):
    """(name, aliases, help, subparser) for each subcommand, each once, in the order declared."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in action._choices_actions}
    seen, out = set(), []
    for name, sub in action.choices.items():
        if id(sub) in seen:
            continue
        seen.add(id(sub))
        aliases = [other for other, s in action.choices.items() if s is sub and other != name]
        out.append((name, aliases, helps.get(name, ""), sub))
    return out


def _argument_row(action: argparse.Action) -> list[str]:
    flags = ", ".join(code(s) for s in action.option_strings) or code(action.dest)
    if action.choices:
        value = " \\| ".join(code(c) for c in action.choices)
    elif action.nargs == 0:
        value = ""
    else:
        value = code(action.metavar or action.dest.upper())
    if action.nargs in ("*", "+") or isinstance(action, argparse._AppendAction):
        value += " (repeatable)" if isinstance(action, argparse._AppendAction) else " …"
    default = "" if action.default in (None, False, argparse.SUPPRESS) or action.nargs == 0 else code(action.default)
    return [flags, value, default, cell((action.help or "").replace("%(default)s", str(action.default)))]


def find_parser(module_name: str = "workshop_lib.cli") -> argparse.ArgumentParser:
    """The command line's parser: the module's ``build_parser()``, else its one function that
    returns an ArgumentParser with subcommands when called without arguments."""
    module = importlib.import_module(module_name)
    if callable(getattr(module, "build_parser", None)):
        return module.build_parser()
    import inspect

    for name, function in inspect.getmembers(module, inspect.isfunction):
        if "parser" in name and function.__module__ == module.__name__:
            try:
                parser = function()
            except TypeError:
                continue
            if isinstance(parser, argparse.ArgumentParser):
                return parser
    raise LookupError(
        f"{module_name} has no build_parser(): say in scripts/docs_cli.py where the command line's parser is built"
    )


def render_cli(parser: argparse.ArgumentParser | None = None) -> str:
    if parser is None:
        parser = find_parser()
    subcommands = _subcommands(parser)
    out = [
        table(
            ["command", "what it does"],
            [[f"[`{name}`](#command-{name})", cell(help_text)] for name, _, help_text, _ in subcommands],
        ),
        "",
    ]
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps usage lines to the terminal's width
    try:
        for name, aliases, help_text, sub in subcommands:
            out += [f"### `{name}` {{#command-{name}}}", ""]
            if aliases:
                out += ["Also: " + ", ".join(code(a) for a in aliases) + ".", ""]
            about = (sub.description or help_text).strip()
            out += [para(about[:1].upper() + about[1:]), "", "```text", sub.format_usage().strip(), "```", ""]
            for group in sub._action_groups:
                actions = [a for a in group._group_actions if not isinstance(a, argparse._HelpAction)]
                if not actions:
                    continue
                if group.title not in ("options", "optional arguments"):
                    out += [f"*{group.title}*", ""]
                out += [table(["argument", "value", "default", "meaning"], [_argument_row(a) for a in actions]), ""]
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous
    return "\n".join(out)

"""The docs site's reference pages, rendered from the code and the recorded results.

Each ``render_*`` function is pure: it reads a file or an object handed to it and returns
Markdown. Pages ask for a piece with a marker line, ``<!-- reference: NAME -->``, which
``expand`` replaces (``docs_hooks.py`` calls it for every page MkDocs builds). Nothing here
imports the adapter's app or starts a process: the API comes from ``openapi.json``, the
settings from the declarations in ``decision_adapter.settings``, the command line
from the parser ``workshop_lib.cli`` builds, the benchmark tables from
``benchmarks/results/*.json``.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import html
import importlib
import json
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- reference: ([a-z0-9_-]+) -->$", re.MULTILINE)


def cell(text, *, squeeze: bool = True) -> str:
    """Text safe inside a Markdown table cell (no HTML, no emphasis, no column breaks)."""
    text = html.escape(" ".join(str(text).split()) if squeeze else str(text), quote=False)
    return re.sub(r"([|*_\[\]`])", r"\\\1", text)


def para(text) -> str:
    """A description from a document as a Markdown paragraph: angle brackets shown, not taken as HTML."""
    return html.escape(str(text).strip(), quote=False)


def prose(text) -> str:
    """A docstring's sentence for a table cell: its ``literals`` become code spans."""
    pieces = re.split(r"``(.+?)``", " ".join(str(text).split()))
    return "".join(code(piece) if i % 2 else cell(piece, squeeze=False) for i, piece in enumerate(pieces))


def code(text) -> str:
    text = str(text).replace("|", "\\|")
    return f"`{text}`"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# -- the HTTP API, from openapi.json ----------------------------------------------------------------


def _anchor(pointer: str) -> str | None:
    """The page anchor of a component ``$ref`` (schemas and responses get a heading each)."""
    parts = pointer.lstrip("#/").split("/")
    if len(parts) == 3 and parts[0] == "components" and parts[1] in ("schemas", "responses"):
        return f"{parts[1][:-1]}-{parts[2]}"
    return None


def _ref_name(pointer: str) -> str:
    return pointer.rsplit("/", 1)[-1]


def type_expr(schema, depth: int = 0) -> str:
    """A schema as a short Markdown type expression, linking named components."""
    if schema is True or schema == {}:
        return "any"
    if schema is False:
        return "nothing"
    if "$ref" in schema:
        anchor = _anchor(schema["$ref"])
        name = _ref_name(schema["$ref"])
        return f"[{name}](#{anchor})" if anchor else code(name)
    if "const" in schema:
        return code(json.dumps(schema["const"]))
    if "enum" in schema:
        return " \\| ".join(code(json.dumps(v)) for v in schema["enum"])
    if "allOf" in schema:  # a type narrowed by parts that only pin some of its fields' values
        parts = schema["allOf"]
        absent = [name for s in parts if _absent(s) for name in _absent(s)]
        pinned = [f"{code(path)} {values}" for s in parts for path, values in _narrowing(s)]
        typed = [s for s in parts if not _narrowing(s) and not _absent(s)]
        shown = " and ".join(type_expr(s, depth + 1) for s in typed) or "object"
        return (
            shown
            + (" with " + ", ".join(pinned) if pinned else "")
            + (" without " + ", ".join(code(name) for name in absent) if absent else "")
        )
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return " or ".join(type_expr(s, depth + 1) for s in schema[key])
    kinds = schema.get("type", [])
    kinds = [kinds] if isinstance(kinds, str) else list(kinds)
    words = []
    for kind in kinds or ["any"]:
        if kind == "array" and "items" in schema:
            words.append(f"array of {type_expr(schema['items'], depth + 1)}")
        elif kind == "object" and isinstance(schema.get("additionalProperties"), dict) and not schema.get("properties"):
            words.append(f"object of {type_expr(schema['additionalProperties'], depth + 1)}")
        else:
            words.append(kind)
    return " or ".join(words)


def _absent(schema) -> list[str]:
    """The fields a ``{"not": {"required": [...]}}`` part rules out; empty for any other schema."""
    if isinstance(schema, dict) and set(schema) == {"not"} and set(schema["not"]) == {"required"}:
        return list(schema["not"]["required"])
    return []


def _narrowing(schema, path: str = "") -> list[tuple[str, str]]:
    """The fields a schema without a type of its own pins (``{"properties": {"error": {"properties":
    {"code": {"enum": [...]}}}}}``) as (dotted path, the values allowed); empty for any other schema."""
    if not isinstance(schema, dict) or set(schema) - {"properties"}:
        if (
            path
            and isinstance(schema, dict)
            and ("enum" in schema or "const" in schema)
            and not set(schema) - {"enum", "const"}
        ):
            return [(path, type_expr(schema))]
        return []
    found = []
    for name, sub in schema.get("properties", {}).items():
        pinned = _narrowing(sub, f"{path}.{name}" if path else name)
        if not pinned:
            return []
        found += pinned
    return found


_CONSTRAINTS = (
    ("minLength", "at least {} characters"),
    ("maxLength", "at most {} characters"),
    ("minItems", "at least {} items"),
    ("maxItems", "at most {} items"),
    ("minProperties", "at least {} keys"),
    ("maxProperties", "at most {} keys"),
    ("minimum", "≥ {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "≤ {}"),
    ("exclusiveMaximum", "< {}"),
    ("pattern", "pattern {}"),
    ("format", "format {}"),
    ("default", "default {}"),
)


def constraints(schema) -> str:
    if not isinstance(schema, dict):
        return ""
    said = []
    for key, template in _CONSTRAINTS:
        if key in schema:
            value = schema[key]
            shown = code(json.dumps(value)) if key in ("pattern", "default") else cell(value)
            said.append(template.format(shown))
    if schema.get("uniqueItems"):
        said.append("unique")
    return ", ".join(said)


def fields_table(schema) -> str:
    """An object schema's properties as a table: field, type, required, constraints, meaning."""
    required = set(schema.get("required", []))
    rows = []
    for name, prop in schema.get("properties", {}).items():
        rows.append(
            [
                code(name),
                type_expr(prop),
                "yes" if name in required else "",
                constraints(prop),
                cell(prop.get("description", "") if isinstance(prop, dict) else ""),
            ]
        )
    extra = schema.get("additionalProperties")
    if schema.get("properties") and extra is False:
        rows.append(["(other fields)", "refused", "", "", ""])
    elif schema.get("properties") and isinstance(extra, dict):
        rows.append(["(other fields)", type_expr(extra), "", constraints(extra), cell(extra.get("description", ""))])
    return table(["field", "type", "required", "constraints", "meaning"], rows) if rows else ""


def schema_block(schema) -> str:
    parts = []
    if isinstance(schema, dict) and schema.get("description"):
        parts.append(para(schema["description"]))
    if isinstance(schema, dict) and schema.get("properties"):
        parts.append(fields_table(schema))
        nested = [
            (name, prop)
            for name, prop in schema["properties"].items()
            if isinstance(prop, dict) and prop.get("properties")
        ]
        for name, prop in nested:
            parts.append(f"`{name}`:\n\n" + fields_table(prop))
    else:
        shape = type_expr(schema)
        extra = constraints(schema)
        parts.append(f"Type: {shape}" + (f" ({extra})." if extra else "."))
    return "\n\n".join(parts)


def _content_lines(content: dict) -> list[str]:
    lines = []
    for media, body in content.items():
        schema = body.get("schema", {})
        if "$ref" in schema:
            lines.append(f"`{media}`: {type_expr(schema)}")
        else:
            lines.append(f"`{media}`:\n\n{schema_block(schema)}")
    return lines


def _response_rows(responses: dict) -> list[list[str]]:
    rows = []
    for status, answer in responses.items():
        if "$ref" in answer:
            rows.append([code(status), f"see {type_expr(answer)}", ""])
            continue
        bodies = []
        for media, body in answer.get("content", {}).items():
            bodies.append(f"{code(media)} {type_expr(body.get('schema', {}))}")
        headers = ", ".join(code(h) for h in answer.get("headers", {}))
        text = cell(answer.get("description", ""))
        rows.append([code(status), text + (f" Headers: {headers}." if headers else ""), "; ".join(bodies)])
    return rows


def _operation(path: str, method: str, op: dict, document: dict) -> str:
    out = [f"### `{method.upper()} {path}`", ""]
    if op.get("summary"):
        out += [f"**{para(op['summary'])}**", ""]
    if op.get("description"):
        out += [para(op["description"]), ""]
    security = op.get("security", document.get("security"))
    keyless = security is not None and (security == [] or {} in security)
    needs_key = security is not None and any(s for s in security)
    if security == []:
        out += ["Never needs the API key.", ""]
    elif needs_key and keyless:
        out += ["Needs `Authorization: Bearer <key>` when the adapter runs with an API key.", ""]
    parameters = op.get("parameters", [])
    if parameters:
        out += [
            table(
                ["parameter", "in", "type", "meaning"],
                [
                    [code(p["name"]), p.get("in", ""), type_expr(p.get("schema", {})), cell(p.get("description", ""))]
                    for p in parameters
                ],
            ),
            "",
        ]
    body = op.get("requestBody")
    if body:
        out += ["Request body" + (" (required)" if body.get("required") else "") + ":", ""]
        out += [line + "\n" for line in _content_lines(body.get("content", {}))]
    out += ["Answers:", "", table(["status", "meaning", "body"], _response_rows(op.get("responses", {}))), ""]
    return "\n".join(out)


def render_api(document: dict) -> str:
    """Every path and method of an OpenAPI document, then its named responses and schemas."""
    info = document.get("info", {})
    out = [f"OpenAPI {document.get('openapi', '?')}, *{info.get('title', '')}* version {info.get('version', '')}.", ""]
    if info.get("description"):
        out += [para(info["description"]), ""]
    out += ["## Routes", ""]
    out += [
        table(
            ["method", "path", "summary"],
            [
                [method.upper(), code(path), cell(op.get("summary", ""))]
                for path, ops in document.get("paths", {}).items()
                for method, op in ops.items()
                if isinstance(op, dict)
            ],
        ),
        "",
    ]
    for path, ops in document.get("paths", {}).items():
        for method, op in ops.items():
            if isinstance(op, dict) and method not in ("parameters", "servers"):
                out.append(_operation(path, method, op, document))
    components = document.get("components", {})
    if components.get("securitySchemes"):
        out += ["## Authentication", ""]
        for name, scheme in components["securitySchemes"].items():
            out += [
                f"`{name}`: {scheme.get('type', '')} {scheme.get('scheme', '')}. {para(scheme.get('description', ''))}",
                "",
            ]
    if components.get("responses"):
        out += ["## Shared answers", ""]
        for name, answer in components["responses"].items():
            out += [f"### {name} {{#response-{name}}}", "", para(answer.get("description", "")), ""]
            headers = answer.get("headers", {})
            if headers:
                out += [
                    table(
                        ["header", "meaning"], [[code(h), cell(v.get("description", ""))] for h, v in headers.items()]
                    ),
                    "",
                ]
            out += [line + "\n" for line in _content_lines(answer.get("content", {}))]
    if components.get("schemas"):
        out += ["## Schemas", ""]
        for name, schema in components["schemas"].items():
            out += [f"### {name} {{#schema-{name}}}", "", schema_block(schema), ""]
    return "\n".join(out)


# -- the adapter's settings, from decision_adapter.settings ----------------------------------------


def _number(value) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _default(spec) -> str:
    if spec.kind == "switch":
        return "on" if spec.default else "off"
    return "unset" if spec.default is None else _number(spec.default)


def settings_rows(module=None) -> list[dict]:
    """One row per declared setting (``decision_adapter.settings.declared()``), in declaration order."""
    module = module or importlib.import_module("decision_adapter.settings")
    rows = []
    for spec in module.declared():
        meaning = f"passed to llama.cpp as ``{spec.llama}``; {spec.doc}" if spec.llama else spec.doc
        rules = []
        if spec.choices:
            rules.append("one of " + ", ".join(spec.choices))
        if spec.minimum is not None:
            rules.append(f"at least {_number(spec.minimum)}")
        if spec.maximum is not None:
            rules.append(f"at most {_number(spec.maximum)}")
        if spec.also:
            rules.append("also read from " + ", ".join(f"``{n}``" for n in spec.also))
        rows.append(
            {
                "names": [spec.env, *spec.also],
                "field": spec.name,
                "default": _default(spec),
                "meaning": meaning,
                "rules": "; ".join(rules),
            }
        )
    return rows


def render_settings(module=None) -> str:
    rows = []
    for r in settings_rows(module):
        meaning = prose(r["meaning"][:1].upper() + r["meaning"][1:].rstrip("."))
        if r["rules"]:
            meaning += (". " if meaning else "") + prose(r["rules"][:1].upper() + r["rules"][1:])
        rows.append([code(r["names"][0]), code(r["default"]), meaning + ("." if meaning else "")])
    return table(["variable", "default", "meaning"], rows)


def render_sample_aliases(module=None) -> str:
    module = module or importlib.import_module("decision_adapter.settings")
    rows = [
        [code(name), code(ours), "converted (see below)" if convert is not str else "same value"]
        for name, (ours, convert) in module.SEMIF_ALIASES.items()
    ]
    rows += [[code(name), "not used", cell(why)] for name, why in module.SEMIF_UNUSED.items()]
    return table(["the sample's name", "read as", "value"], rows)


# -- the workshop's configuration, from the declarations of WorkshopConfig ----------------------------


def render_workshop_config() -> str:
    """One row per ``WorkshopConfig`` setting, in declaration order: its variable, default and use."""
    config = importlib.import_module("workshop_lib.config")
    rows = [
        [
            code(f.metadata["env"]),
            code(f.default) if f.default else "unset",
            prose(f.metadata["doc"][:1].upper() + f.metadata["doc"][1:].rstrip(".") + "."),
        ]
        for f in dataclasses.fields(config.WorkshopConfig)
    ]
    return table(["variable", "default", "meaning"], rows)


# -- the command line, from the parser workshop_lib.cli builds --------------------------------------


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
        f"{module_name} has no build_parser(): say in scripts/docs_reference.py where the "
        "command line's parser is built"
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


# -- module tables, from each module's docstring ---------------------------------------------------


def module_summary(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    first = doc.strip().split("\n\n")[0]
    return " ".join(first.split())


def render_modules(package: Path) -> str:
    rows = []
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        relative = path.relative_to(package)
        name = str(relative.parent) + "/" if relative.name == "__init__.py" else str(relative)
        if name == "./":
            name = f"{package.name} (the package)"
        rows.append([code(name), prose(module_summary(path)) or "–"])
    return table(["module", "what it holds"], rows)


# -- benchmark tables, from benchmarks/results ------------------------------------------------------

RESULTS = ROOT / "benchmarks" / "results"


def _ms(value) -> str:
    return f"{value:,.0f} ms" if value >= 10 else f"{value:.2f} ms"


def _pct(part, whole) -> str:
    return f"{part}/{whole} ({100 * part / whole:.1f} %)" if whole else f"{part}/{whole}"


def _load(name: str, results: Path):
    return json.loads((results / name).read_text())


def render_bench_adapter(results: Path = RESULTS) -> str:
    run = _load("adapter.json", results)
    modes = run["modes"]
    header = ["measurement"] + [code(m["mode"]) for m in modes]

    def row(label, fn):
        return [label] + [fn(m) for m in modes]

    rows = [
        row("tasks", lambda m: str(m["tasks"])),
        row("tokens evaluated per decision, mean", lambda m: f"{m['evaluated_mean']:.1f}"),
        row("decision p50 / p95 over HTTP", lambda m: f"{_ms(m['p50_ms'])} / {_ms(m['p95_ms'])}"),
        row("generation baseline p50, same server", lambda m: _ms(m["generation_p50_ms"])),
        row("decision p50 / generation p50 (target ≤ 0.5)", lambda m: f"{m['p50_ms'] / m['generation_p50_ms']:.2f}×"),
        row("evaluation / llama.cpp in-process, p50 (target ≤ 1.1)", lambda m: f"{m['eval_over_in_process_p50']:.2f}×"),
        row("non-model time per request, p50 (target ≤ 3 ms)", lambda m: _ms(m["non_model_ms_p50"])),
        row("of it rendering + tokenizing (target < 1 ms)", lambda m: _ms(m["prepare_ms_p50"])),
        row("one decision on a ~400-token state", lambda m: _ms(m["one_decision_ms"])),
        row(
            "k questions on that state / one decision (k = 8 target ≤ 1.35)",
            lambda m: " / ".join(f"k={k['k']}: {k['ratio']:.2f}×" for k in m["k"]),
        ),
        row("worker peak RSS (target ≤ 260 MiB)", lambda m: f"{m['peak_rss_mib']:.0f} MiB"),
    ]
    facts = (
        f"Model `{run['model']}`, {run['threads']} threads, {run['context']}-token context, "
        f"tasks: {run['tasks']}; extra buffer types {run['extra_buffers']}. Host CPU flags: "
        f"{', '.join(run['host_cpu_flags'])}; llama.cpp features: {', '.join(run['llama_cpp_features'])}."
    )
    in_process = ", ".join(f"{n} tokens {_ms(ms)}" for n, ms in run["in_process_eval_ms"].items())
    return "\n\n".join([facts, table(header, rows), f"llama.cpp in-process for plain token runs: {in_process}."])


def render_bench_llama_server(results: Path = RESULTS) -> str:
    run = _load("llama_server.json", results)
    machine = run["machine"]
    load = machine.get("load_average_1min", [])
    new, repeated = run["new_prompts"], run["repeated"]
    rows = [
        [
            "new prompts (first pass)",
            _ms(new["adapter"]["p50"]),
            _ms(new["llama"]["p50"]),
            f"{new['adapter']['p50'] / new['llama']['p50']:.2f}×",
        ],
        [
            "repeated states (adapter's state cache / llama-server's prompt cache)",
            _ms(repeated["adapter_cache"]["p50"]),
            _ms(repeated["llama"]["p50"]),
            f"{repeated['adapter_cache']['p50'] / repeated['llama']['p50']:.2f}×",
        ],
        ["repeated states, adapter without the cache", _ms(repeated["adapter"]["p50"]), "", ""],
    ]
    if "adapter_flash_attn" in new:
        rows.append(
            [
                "new prompts, both with flash attention (auto)",
                _ms(new["adapter_flash_attn"]["p50"]),
                _ms(new["llama_default"]["p50"]),
                f"{new['adapter_flash_attn']['p50'] / new['llama_default']['p50']:.2f}×",
            ]
        )
    for shared in run["shared_state"]:
        rows.append(
            [
                f"shared state, k = {shared['k']}: one request vs k requests",
                _ms(shared["adapter_one_request_ms"]),
                _ms(shared["llama_k_requests_ms"]),
                f"{shared['adapter_one_request_ms'] / shared['llama_k_requests_ms']:.2f}×",
            ]
        )
        if "adapter_flash_attn_one_request_ms" in shared:
            rows.append(
                [
                    f"shared state, k = {shared['k']}, both with flash attention (auto)",
                    _ms(shared["adapter_flash_attn_one_request_ms"]),
                    _ms(shared["llama_default_k_requests_ms"]),
                    f"{shared['adapter_flash_attn_one_request_ms'] / shared['llama_default_k_requests_ms']:.2f}×",
                ]
            )
    facts = (
        f"{run['tasks']} tasks, model `{run['model']}`, {machine['threads']} threads, {machine['context']}-token "
        f"context on {machine['cores']} cores ({machine['cpu']}); the second adapter ran with "
        f"DECISION\\_ADAPTER\\_STATE\\_CACHE\\_MIB={run['state_cache_mib']}"
        + (f"; 1-minute load average {load[0]} at the start, {load[-1]} at the end" if load else "")
        + "."
    )
    letters = run["letters"]
    breakdown = run["breakdown_p50_ms"]
    where = (
        f"Where the adapter's time went on new prompts (p50): HTTP stack {_ms(breakdown['client_minus_server'])}, "
        f"request handling {_ms(breakdown['handling'])}, tokenizing {_ms(breakdown['tokenize'])}, evaluation "
        f"{_ms(breakdown['evaluate'])} for {breakdown['adapter_tokens']:.0f} prompt tokens; llama-server: "
        f"{_ms(breakdown['llama_prompt_ms'])} of prompt evaluation for {breakdown['llama_prompt_n']:.0f} tokens "
        f"and {_ms(breakdown['llama_client_minus_prompt'])} for everything else."
    )
    return "\n\n".join(
        [
            facts,
            table(["p50 client latency", "adapter", "llama-server", "adapter / llama-server"], rows),
            f"Letter probabilities from llama-server (top {run['top_logprobs']}): every option's letter came back in "
            f"{letters['valid']} of {run['tasks']} tasks; in those, its top option was the adapter's in {letters['agree']}.",
            where,
        ]
    )


def render_bench_load(results: Path = RESULTS) -> str:
    run = _load("load.json", results)
    settings = run["settings"]
    rss = run["worker_rss_bytes"]
    mib = 1024 * 1024
    other = run.get("other_non_2xx") or {}
    rows = [
        [
            "requests sent / answered",
            f"{run['requests_sent']} / {run['requests_answered']} ({run['http_attempts']} HTTP attempts with retries)",
        ],
        ["503 busy (with Retry-After)", f"{run['busy_503']} ({run['busy_503_with_retry_after']})"],
        ["other non-2xx", str(sum(other.values()) if isinstance(other, dict) else len(other))],
        [
            "crossed answers",
            f"{len(run['crossed_answers'])}; probes equal to a lone run: "
            f"{run['probes']['equal_to_lone_run']}/{run['probes']['sent']}",
        ],
        ["client p50 / p95", f"{_ms(run['latency_ms']['p50'])} / {_ms(run['latency_ms']['p95'])}"],
        ["throughput", f"{run['throughput_per_s']:.2f} answered requests/s"],
        ["worker RSS after warm-up / end", f"{rss['start_after_warmup'] / mib:.1f} / {rss['end'] / mib:.1f} MiB"],
    ]
    by_kind = table(
        ["kind", "sent", "answered", "p50", "p95"],
        [
            [kind, str(v["sent"]), str(v["answered"]), _ms(v["p50_ms"]), _ms(v["p95_ms"])]
            for kind, v in run["by_kind"].items()
        ],
    )
    worst = run.get("worst_cases", {})
    parts = [
        f"{settings['clients']} clients for {settings['duration_s']:.0f} s, mix "
        + ", ".join(
            f"{kind} {100 * share:.0f} %" for kind, share in settings["mix"].items() if isinstance(share, float)
        )
        + f", model "
        f"`{settings['model']}`, {run['machine']['cpus']} CPUs.",
        table(["", "figure"], rows),
        by_kind,
    ]
    if worst.get("requests"):
        parts.append(
            table(
                ["costliest body the limits allow", "route", "bytes", "answer", "seconds"],
                [
                    [cell(r["body"]), code(r["route"]), f"{r['bytes']:,}", str(r["status"]), f"{r['seconds']:.1f}"]
                    for r in worst["requests"]
                ],
            )
        )
    targets = run.get("targets", {})
    if targets:
        parts.append(
            table(
                ["target", "met"],
                [[cell(name.replace("_", " ")), "yes" if ok else "**no**"] for name, ok in targets.items()],
            )
        )
    return "\n\n".join(parts)


def render_bench_embedded(results: Path = RESULTS) -> str:
    report = _load("embedded/report.json", results)
    summary = report["summary"]
    decision = summary["decision"]
    latency = decision["client_latency_ms"]
    reference = decision.get("reference", {})
    parts = [
        f"*{report['title']}*, {report['created'][:10]}. "
        + " ".join(f"{n[:1].upper()}{n[1:]}." for n in report["notes"]),
        table(
            ["valid", "correct (accuracy)", "client p50", "client p95", "client max"],
            [
                [
                    f"{decision['valid']}/{decision['tasks']}",
                    _pct(decision["correct"], decision["tasks"]),
                    _ms(latency["p50"]),
                    _ms(latency["p95"]),
                    _ms(latency["max"]),
                ]
            ],
        ),
    ]
    if reference:
        parts.append(
            f"Chance: {100 * reference['chance']:.1f} %; always the first option shown: "
            f"{100 * reference['first_option']:.1f} %."
        )
    compared = [
        (label, summary[key])
        for key, label in (
            ("decision_reversed", "decision readout, options reversed"),
            ("debiased", "order-debiased readout"),
            ("generation", "generation baseline (chat, parse the reply)"),
        )
        if key in summary
    ]
    if compared:
        parts.append(
            table(
                ["run", "valid", "correct (accuracy)", "client p50", "client p95"],
                [
                    [
                        label,
                        f"{s['valid']}/{s['tasks']}",
                        _pct(s["correct"], s["tasks"]),
                        _ms(s["client_latency_ms"]["p50"]),
                        _ms(s["client_latency_ms"]["p95"]),
                    ]
                    for label, s in compared
                ],
            )
        )
    order = report.get("order_test")
    if order:
        rows = []
        for key in ("plain", "debiased"):
            if key in order:
                o = order[key]
                rows.append(
                    [
                        key,
                        f"{o['flips']}/{o['compared']} ({100 * o['rate']:.1f} %)",
                        f"{100 * o['accuracy_original']:.1f} % / {100 * o['accuracy_reordered']:.1f} %",
                        _ms(o["client_latency_ms"]["p50"]),
                    ]
                )
        parts.append(
            table(
                [
                    "readout",
                    f"top choice changes, options {order['order']}",
                    "accuracy (original / reordered)",
                    "client p50",
                ],
                rows,
            )
        )
    calibration = report.get("calibration")
    if calibration:
        before, after = calibration["before"], calibration["after"]
        parts.append(
            f"Calibration ({calibration['split']}, fitted on {calibration['fit_tasks']} tasks, reported on "
            f"{calibration['report_tasks']}): temperature {after['temperature']:.4g}; ECE "
            f"{before['ece']:.3f} → {after['ece']:.3f}, Brier {before['brier']:.3f} → {after['brier']:.3f}, "
            f"accuracy {100 * before['accuracy']:.1f} % → {100 * after['accuracy']:.1f} %."
        )
    return "\n\n".join(parts)


def render_bench_conformance(results: Path = RESULTS) -> str:
    rows = []
    for path in sorted(results.glob("jevcompat-*.json")):
        run = json.loads(path.read_text())
        summary = run["summary"]
        must, should = summary["MUST"], summary["SHOULD"]
        rows.append(
            [
                code(path.name),
                cell(summary["verdict"]),
                f"{must['passed']}/{must['tested']}",
                f"{should['passed']}/{should['tested']}",
                run["started"][:10],
                f"{run['seconds']:.0f} s",
            ]
        )
    return table(["run", "verdict", "MUST passed", "SHOULD passed", "date", "took"], rows)


def render_results_index(results: Path = RESULTS) -> str:
    rows = []
    for path in sorted(p for p in results.rglob("*") if p.is_file()):
        shown = path.relative_to(ROOT) if ROOT in path.parents else path.relative_to(results)
        rows.append([code(shown.as_posix()), f"{path.stat().st_size:,} bytes"])
    return table(["file", "size"], rows)


# -- the import layers, from the import-linter contracts in pyproject.toml --------------------------


def import_contracts(pyproject: Path = ROOT / "pyproject.toml") -> list[dict]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]


def render_layers(contracts: list[dict] | None = None) -> str:
    """Each layers contract as a table, top layer first: who may import whom (a module imports only
    from rows below its own; modules in one row with ``|`` between them do not import each other)."""
    contracts = import_contracts() if contracts is None else contracts
    parts = []
    for contract in contracts:
        if contract["type"] != "layers":
            continue
        where = ", ".join(code(c) for c in contract.get("containers", [])) or "the packages"
        rows = [
            [str(n), " \\| ".join(code(m.strip()) for m in layer.split("|"))]
            for n, layer in enumerate(contract["layers"], 1)
        ]
        parts.append(f"**{cell(contract['name'])}** (in {where}):\n\n" + table(["layer", "modules"], rows))
    rules = [f"- {cell(c['name'])}." for c in contracts if c["type"] != "layers"]
    return "\n\n".join(parts + ["\n".join(rules)])


# -- pages ------------------------------------------------------------------------------------------


def _include(relative: str) -> str:
    """Another Markdown file of the repository, its first heading dropped (the page has its own), its
    links into ``docs/`` made relative to the site."""
    source = ROOT / relative
    text = re.sub(r"\A# .*\n+", "", source.read_text())

    def relink(match):
        target = match.group(1)
        if re.match(r"[a-z]+:|#", target):
            return match.group(0)
        path, _, anchor = target.partition("#")
        resolved = (source.parent / path).resolve()
        docs = ROOT / "docs"
        if docs not in resolved.parents:
            raise ValueError(f"{relative} links to {target}, outside docs/: the site cannot show it")
        return f"]({resolved.relative_to(docs).as_posix()}{'#' + anchor if anchor else ''})"

    return re.sub(r"\]\(([^)\s]+)\)", relink, text)


RENDERERS = {
    "api": lambda: render_api(json.loads((ROOT / "container/decision_adapter/openapi.json").read_text())),
    "settings": render_settings,
    "layers": render_layers,
    "sample-settings": render_sample_aliases,
    "workshop-config": render_workshop_config,
    "cli": render_cli,
    "adapter-modules": lambda: render_modules(ROOT / "container" / "decision_adapter"),
    "workshop-modules": lambda: render_modules(ROOT / "workshop_lib"),
    "benchmark-modules": lambda: render_modules(ROOT / "benchmarks"),
    "bench-embedded": render_bench_embedded,
    "bench-adapter": render_bench_adapter,
    "bench-llama-server": render_bench_llama_server,
    "bench-load": render_bench_load,
    "bench-conformance": render_bench_conformance,
    "results-index": render_results_index,
    "notebooks": lambda: _include("notebooks/README.md"),
    "changes": lambda: _include("CHANGES.md"),
}


def expand(markdown: str) -> str:
    """Replace each marker line with what it names; an unknown name is an error naming it."""

    def replace(match):
        name = match.group(1)
        if name not in RENDERERS:
            raise KeyError(f"<!-- reference: {name} --> names no renderer; known: {', '.join(sorted(RENDERERS))}")
        return RENDERERS[name]().strip()

    return MARKER.sub(replace, markdown)


if __name__ == "__main__":  # python scripts/docs_reference.py NAME: print one piece
    import sys

    print(RENDERERS[sys.argv[1]]())

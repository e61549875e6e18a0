"""The HTTP API's reference page, rendered from an OpenAPI document (``openapi.json``): each route with
its parameters, body and answers, then the shared answers and the named schemas, each under a heading
that type expressions link to."""

from __future__ import annotations

import json

from scripts.docs_markdown import cell, code, para, table


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

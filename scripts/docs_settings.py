"""The settings tables: the adapter's variables from the declarations in ``decision_adapter.settings``
(and the sample container's names it also reads), and the workshop's from the fields of
``WorkshopConfig``."""

from __future__ import annotations

import dataclasses
import importlib

from scripts.docs_markdown import cell, code, prose, table

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

"""The docs site's generated pages (scripts/docs_reference.py) cover what they are generated from:
every setting load_settings reads, every CLI subcommand and flag, every route and schema of
openapi.json, and the recorded benchmark files; and the generators start nothing."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from decision_adapter import settings as adapter_settings
from scripts import docs_reference as ref
from workshop_lib.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


class RecordingEnv(dict):
    """An empty environment that remembers every name looked up in it."""

    def __init__(self):
        super().__init__()
        self.asked: set[str] = set()

    def get(self, name, default=None):
        self.asked.add(name)
        return super().get(name, default)

    def __getitem__(self, name):
        self.asked.add(name)
        return super().__getitem__(name)

    def __contains__(self, name):
        self.asked.add(name)
        return super().__contains__(name)


def test_settings_page_lists_every_variable_load_settings_reads(monkeypatch):
    env = RecordingEnv()
    monkeypatch.setattr(adapter_settings, "with_sample_aliases", lambda _: (env, (), ()))
    adapter_settings.load_settings({})
    assert len(env.asked) > 10
    page = ref.render_settings()
    missing = sorted(name for name in env.asked if f"`{name}`" not in page and name not in page)
    assert not missing, f"settings read but not in the generated table: {missing}"


def test_each_setting_row_shows_the_default_load_settings_gives_and_a_meaning():
    loaded = adapter_settings.load_settings({})
    for row in ref.settings_rows():
        value = getattr(loaded, row["field"])
        if value is None:
            expected = "unset"
        elif isinstance(value, bool):
            expected = "on" if value else "off"
        elif isinstance(value, float) and value.is_integer():
            expected = str(int(value))
        else:
            expected = str(value)
        assert row["default"] == expected, row
        assert row["meaning"] or row["rules"], f"{row['names'][0]} has no meaning: comment its Settings field"


def test_the_settings_page_as_built_holds_one_row_per_declared_setting():
    page = ref.expand((DOCS / "settings.md").read_text())
    specs = adapter_settings.declared()
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    assert [row.split("|")[1].strip().strip("`") for row in rows[: len(specs)]] == [s.env for s in specs]
    for spec, row in zip(specs, rows):
        assert f"| `{ref.settings_rows()[specs.index(spec)]['default']}` |" in row, row


def test_sample_aliases_page_lists_every_semif_name():
    page = ref.render_sample_aliases()
    for name in [*adapter_settings.SEMIF_ALIASES, *adapter_settings.SEMIF_UNUSED]:
        assert f"`{name}`" in page


def test_cli_page_lists_every_subcommand_and_every_flag():
    parser = build_parser()
    page = ref.render_cli(parser)
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert len(action.choices) > 10
    for name, sub in action.choices.items():
        assert f"`{name}`" in page, name
        for flag in (s for a in sub._actions for s in a.option_strings if s not in ("-h", "--help")):
            assert f"`{flag}`" in page, (name, flag)
    assert ref.render_cli() == page  # the page is generated from the parser cli.py builds


def test_api_page_lists_every_route_and_schema_and_its_links_resolve():
    document = json.loads((ROOT / "container/decision_adapter/openapi.json").read_text())
    page = ref.render_api(document)
    for path, operations in document["paths"].items():
        for method in operations:
            assert f"### `{method.upper()} {path}`" in page, (method, path)
    for kind in ("schemas", "responses"):
        for name in document.get("components", {}).get(kind, {}):
            assert f"{{#{kind[:-1]}-{name}}}" in page, name
    targets = set(re.findall(r"\{#([\w-]+)\}", page))
    links = set(re.findall(r"\]\(#([\w-]+)\)", page))
    assert links and links <= targets, sorted(links - targets)


def test_api_page_follows_the_document_it_is_given():
    document = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/v9/new": {
                "post": {
                    "summary": "A route added later",
                    "requestBody": {
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/NewBody"}}}
                    },
                    "responses": {"200": {"description": "fine"}},
                }
            }
        },
        "components": {
            "schemas": {
                "NewBody": {"type": "object", "required": ["x"], "properties": {"x": {"type": "integer", "maximum": 3}}}
            }
        },
    }
    page = ref.render_api(document)
    assert "### `POST /v9/new`" in page and "[NewBody](#schema-NewBody)" in page
    assert "| `x` | integer | yes | ≤ 3 |" in page


def test_a_narrowed_schema_shows_the_values_it_pins_and_the_fields_it_rules_out():
    narrowed = {
        "allOf": [
            {"$ref": "#/components/schemas/Error"},
            {"properties": {"error": {"properties": {"code": {"enum": ["a", "b"]}}}}},
        ]
    }
    assert ref.type_expr(narrowed) == '[Error](#schema-Error) with `error.code` `"a"` \\| `"b"`'
    excluded = {"allOf": [{"$ref": "#/components/schemas/Body"}, {"not": {"required": ["messages"]}}]}
    assert ref.type_expr(excluded) == "[Body](#schema-Body) without `messages`"
    page = ref.expand((DOCS / "api-reference.md").read_text())
    assert " and any" not in page


def test_benchmark_tables_are_read_from_the_results_files(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(ref.RESULTS, results)
    adapter = json.loads((results / "adapter.json").read_text())
    adapter["modes"][0]["p50_ms"] = 12345.0
    (results / "adapter.json").write_text(json.dumps(adapter))
    load = json.loads((results / "load.json").read_text())
    load["requests_sent"], load["requests_answered"] = 4321, 4320
    (results / "load.json").write_text(json.dumps(load))
    assert "12,345 ms" in ref.render_bench_adapter(results)
    assert "12,345 ms" not in ref.render_bench_adapter(ref.RESULTS)
    assert "4321 / 4320" in ref.render_bench_load(results)
    index = ref.render_results_index(results)
    for path in (p for p in results.rglob("*") if p.is_file()):
        assert path.name in index


def test_every_marker_in_the_docs_is_known_and_expanded():
    used = set()
    for page in DOCS.glob("*.md"):
        text = page.read_text()
        used |= set(ref.MARKER.findall(text))
        expanded = ref.expand(text)
        assert "<!-- reference:" not in expanded, page.name
    assert used == set(ref.RENDERERS), "a renderer no page uses, or a page naming an unknown one"
    with pytest.raises(KeyError, match="nope"):
        ref.expand("<!-- reference: nope -->")


def test_generators_open_no_connection_and_import_no_server():
    script = (
        "import socket, sys\n"
        "def refuse(*args, **kwargs): raise AssertionError('a docs generator opened a connection')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "from scripts import docs_reference as ref\n"
        "for render in ref.RENDERERS.values(): render()\n"
        "loaded = [m for m in ('decision_adapter.app', 'flask', 'llama_cpp', 'gunicorn') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_layers_page_shows_every_layer_of_every_contract_in_order():
    contracts = ref.import_contracts()
    page = ref.render_layers(contracts)
    layered = [c for c in contracts if c["type"] == "layers"]
    assert layered
    for contract in layered:
        position = -1
        for layer in contract["layers"]:
            row = " \\| ".join(f"`{m.strip()}`" for m in layer.split("|"))
            found = page.find(row, position + 1)
            assert found > position, (contract["name"], layer)
            position = found
    assert "<!-- reference: layers -->" in (DOCS / "architecture.md").read_text()


def test_the_cli_page_as_built_lists_every_workshop_setting_with_its_default():
    from workshop_lib.config import ENV_VARS, WorkshopConfig

    page = ref.expand((DOCS / "cli.md").read_text())
    for field in dataclasses.fields(WorkshopConfig):
        shown = f"`{field.default}`" if field.default else "unset"
        assert f"| `{ENV_VARS[field.name]}` | {shown} |" in page, field.name

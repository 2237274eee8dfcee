"""Every field a client or a person reads is described where it is defined: the MCP tools'
input and output fields (clients show them to the model; the reference page shows them in its
"Meaning" column) and every setting (the settings page). A field added without a
`Field(description=...)` fails here, naming it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from memory_orchestrator.faces.mcp.server import create_server
from memory_orchestrator.settings import Settings

JSON = dict[str, Any]


def _undescribed(name: str, schema: JSON) -> Iterator[str]:
    for field, spec in schema.get("properties", {}).items():
        if not str(spec.get("description", "")).strip():
            yield f"{name}.{field}"


def _tool_fields() -> Iterator[str]:
    # documented: `tools/list` leaves out the output fields' descriptions (`faces.mcp.schemas`),
    # the reference page shows them
    tools = asyncio.run(create_server(Settings.model_construct()).documented_tools())
    assert len(tools) == 7
    for tool in tools:
        for kind, schema in (("input", tool.input_schema), ("output", tool.output_schema)):
            schema = schema or {}
            yield from _undescribed(f"{tool.name} {kind}", schema)
            for model, inner in schema.get("$defs", {}).items():
                yield from _undescribed(model, inner)


def test_every_field_of_every_tool_s_input_and_output_has_a_description() -> None:
    assert sorted(set(_tool_fields())) == []


def _settings(model: type[BaseModel], path: str = "") -> Iterator[tuple[str, bool]]:
    """Every setting's dotted key and whether it is described; tables walked into."""
    for name, field in model.model_fields.items():
        key = f"{path}.{name}" if path else name
        annotation = field.annotation
        inner = [annotation, *getattr(annotation, "__args__", ())]
        tables = [t for t in inner if isinstance(t, type) and issubclass(t, BaseModel)]
        if tables:
            yield from _settings(tables[0], key)
        else:
            yield key, bool((field.description or "").strip())


def test_every_setting_has_a_description() -> None:
    found = list(_settings(Settings))
    assert len(found) > 100
    assert [key for key, described in found if not described] == []


def test_every_table_of_settings_says_what_it_is_for() -> None:
    """A table's docstring, or the description of the field that holds it, heads its section
    on the settings page."""

    def tables(model: type[BaseModel], path: str = "") -> Iterator[tuple[str, bool]]:
        for name, field in model.model_fields.items():
            annotation = field.annotation
            inner = [annotation, *getattr(annotation, "__args__", ())]
            for table in (t for t in inner if isinstance(t, type) and issubclass(t, BaseModel)):
                key = f"{path}.{name}" if path else name
                own = table.__dict__.get("__doc__") or ""
                yield key, bool(own.strip() or (field.description or "").strip())
                yield from tables(table, key)

    assert [key for key, said in tables(Settings) if not said] == []

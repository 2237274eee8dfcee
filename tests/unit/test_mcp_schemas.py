"""The tool list as published (`faces.mcp.schemas`): shorter, and accepting exactly what the
schemas Pydantic makes accept. Each tool's arguments, valid and not (every optional argument
as null, each argument of a wrong type, an unknown argument), are judged the same by both."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from mcp.server.mcpserver import MCPServer
from mcp.types import Tool

from memory_orchestrator.faces.mcp.server import create_server
from memory_orchestrator.settings import Settings
from tests.integration.test_mcp_arguments import REQUIRED

WRONG = [{"an": "object"}, "text", 12, 1.5, True, None, ["a"], []]


def _tools() -> tuple[dict[str, Tool], dict[str, Tool]]:
    server = create_server(Settings.model_construct())
    made = asyncio.run(MCPServer.list_tools(server))  # as Pydantic makes them
    listed = asyncio.run(server.list_tools())
    return {t.name: t for t in made}, {t.name: t for t in listed}


MADE, LISTED = _tools()


def _cases(tool: str) -> list[dict[str, Any]]:
    base = REQUIRED.get(tool, {})
    properties = MADE[tool].input_schema.get("properties", {})
    cases = [dict(base), {**base, "unknown_argument": 1}]
    cases.append({**base, **dict.fromkeys(p for p in properties if p not in base)})
    for name in properties:
        cases.extend({**base, name: value} for value in WRONG)
    return cases


@pytest.mark.parametrize("tool", sorted(MADE))
def test_the_published_input_schema_accepts_what_the_made_one_accepts(tool: str) -> None:
    made = Draft202012Validator(MADE[tool].input_schema)
    listed = Draft202012Validator(LISTED[tool].input_schema)
    for arguments in _cases(tool):
        assert made.is_valid(arguments) == listed.is_valid(arguments), arguments


@pytest.mark.parametrize("tool", sorted(MADE))
def test_the_published_schemas_are_shorter_and_carry_no_titles(tool: str) -> None:
    made, listed = MADE[tool], LISTED[tool]
    for kind in ("input_schema", "output_schema"):
        before, after = json.dumps(getattr(made, kind)), json.dumps(getattr(listed, kind))
        assert len(after) <= len(before), kind
        assert '"title"' not in after, kind
    assert listed.description == (listed.description or "").strip()
    assert "\n    " not in (listed.description or "")  # dedented

"""The tool list as published: the same schemas, written shorter.

A client sends `tools/list` into the model's context at the start of every session, so each
character of it is paid for again and again. Pydantic's schemas say some things twice; this
writes them once, without changing what they accept:

- a `title` beside each property (its name, capitalised) is left out;
- `{"anyOf": [{"type": T, ...}, {"type": "null"}]}` becomes `{"type": [T, "null"], ...}`;
- `"default": null` on an optional argument says what leaving it out says: it is left out;
- a description is indented as the docstring was: it is dedented;
- `"additionalProperties": true` says what JSON Schema assumes: it is left out;
- an output schema keeps its types, no description and no default (which say nothing of an
  answer): the model reads the text content, and a program reads the schema's shape.
  `documented` keeps them: the reference page (docs/reference/tools.md) describes every
  output field from it.

Input schemas keep every field's description: they are how a model learns to call a tool.
"""

from __future__ import annotations

import inspect
from typing import Any

from mcp.types import Tool

__all__ = ["published"]

_NULL = {"type": "null"}


def _compact(node: Any, *, descriptions: bool) -> Any:
    if isinstance(node, list):
        return [_compact(n, descriptions=descriptions) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "description" and isinstance(value, str) and not descriptions:
            continue
        if key == "default" and (value is None or not descriptions):
            continue
        if key == "additionalProperties" and value is True:
            continue
        if key in ("properties", "$defs") and isinstance(value, dict):
            # names, not keywords: a property may be called "title" or "description"
            out[key] = {
                name: _compact(sub, descriptions=descriptions) for name, sub in value.items()
            }
            continue
        out[key] = _compact(value, descriptions=descriptions)
    return _nullable(out)


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """`anyOf` of one plain type and null, as a list of two types."""
    options = node.get("anyOf")
    if not (isinstance(options, list) and len(options) == 2 and _NULL in options):
        return node
    (other,) = [o for o in options if o != _NULL]
    kind = other.get("type") if isinstance(other, dict) else None
    if not isinstance(kind, str) or {"$ref", "enum", "const"} & set(other):
        return node  # (an enum or a constant would refuse the null the type lets through)
    if set(other) & set(node) - {"anyOf"}:
        return node
    merged = {k: v for k, v in node.items() if k != "anyOf"}
    return {**other, **merged, "type": [kind, "null"]}


def published(tool: Tool, *, documented: bool = False) -> Tool:
    """`tool` as `tools/list` sends it: its schemas and description written shorter; with
    `documented`, its output schema keeps every field's description and default."""
    output = tool.output_schema
    return tool.model_copy(
        update={
            "description": inspect.cleandoc(tool.description) if tool.description else None,
            "input_schema": _compact(tool.input_schema, descriptions=True),
            "output_schema": _compact(output, descriptions=documented) if output else None,
        }
    )

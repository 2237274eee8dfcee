"""`orchestrator config show`: the effective settings as a TOML document (tomlkit), which
reads back through `tomllib` to the same values.

TOML has no null: an unset value is a comment (`# binary = (unset)`), also inside the
tables of a list (fused stores, tokens). The embedded store's path shows the file in use,
not "(unset)".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tomlkit
from tomlkit.items import Table

from memory_orchestrator.settings import Settings


def effective_values(settings: Settings) -> dict[str, Any]:
    """The settings as plain values, with the files in use filled in."""
    values = settings.model_dump(mode="json")
    values["embedded"]["path"] = str(settings.embedded_path())
    return values


def _without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value if v is not None]
    return value


def _fill(table: Any, values: Mapping[str, Any]) -> None:
    """Plain values first (unset ones as comments), then sub-tables, in `values`' order."""
    for key, value in values.items():
        if value is None:
            table.add(tomlkit.comment(f"{key} = (unset)"))
        elif not isinstance(value, Mapping):
            table.add(key, _without_nulls(value))
    for key, value in values.items():
        if isinstance(value, Mapping):
            sub: Table = tomlkit.table()
            _fill(sub, value)
            table.add(key, sub)


def settings_toml(values: Mapping[str, Any]) -> str:
    """`values` (JSON-like: strings, numbers, booleans, lists, tables, None) as TOML."""
    document = tomlkit.document()
    _fill(document, values)
    return tomlkit.dumps(document)

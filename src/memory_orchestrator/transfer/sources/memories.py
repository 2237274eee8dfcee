"""Memories as JSON Lines: one object a line, with the fields of `memory_write` (`content`,
or `text` / `memory` as other tools name it; `type`, `entities`, `tags` or `categories`,
`created_at` or `timestamp`, `source`, `importance`, `confidence`, `metadata`) and an
optional `id`. An export of this program (`orchestrator export`) is read the same way: its
memories, as memories to write (the write path judges them; `restore` writes one as it is),
but for a forgotten one (`forgotten`), which is skipped: it is in no read of the store it came
from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memory_orchestrator.transfer.sources.common import Incoming, digest, json_lines, labels, made

_CONTENT = ("content", "text", "memory")
_TIME = ("created_at", "timestamp", "created", "date")
_PLAIN = ("type", "source", "importance", "confidence")


def read_jsonl(path: Path) -> list[Incoming]:
    out: list[Incoming] = []
    export, first = False, True
    for number, value, problem in json_lines(path):
        where = f"{path.name}:{number}"
        if problem is not None or not isinstance(value, dict):
            why = problem or "not a JSON object"
            out.append(Incoming(f"line:{digest(path.name, number)}", where, None, why))
            continue
        kind = value.get("kind")
        if first:
            first, export = False, kind == "header"
            if export:
                continue
        if export and kind != "memory":
            continue  # an export's edges and end: the write path makes its own links
        out.append(_memory(value, where, export=export))
    return out


def _memory(value: dict[str, Any], where: str, *, export: bool) -> Incoming:
    content = next((value[k] for k in _CONTENT if isinstance(value.get(k), str)), None)
    given = value.get("id")
    key = f"id:{given}" if isinstance(given, str | int) and str(given) else None
    when = next((value[k] for k in _TIME if value.get(k) is not None), None)
    fields: dict[str, Any] = {k: value[k] for k in _PLAIN if value.get(k) is not None}
    fields.update(
        content=content or "",
        entities=labels(value.get("entities")),
        tags=labels(value.get("tags") if "tags" in value else value.get("categories")),
        created_at=when,
    )
    metadata = value.get("metadata")
    if isinstance(metadata, dict):
        fields["metadata"] = metadata  # (an export's `supersedes` is a field of its own)
    elif metadata is not None:
        return Incoming(key or f"line:{digest(where)}", where, None, "metadata: expected an object")
    if content is None:
        why = "no content: expected a `content` (or `text`, `memory`) string"
        return Incoming(key or f"line:{digest(where)}", where, None, why)
    prefix = "export" if export else "jsonl"
    if export and value.get("forgotten") is not None:
        skip = "forgotten in the store it was exported from"
        return Incoming(f"{prefix}:{key or digest(content, when)}", where, None, skip=skip)
    return made(f"{prefix}:{key or digest(content, when, fields.get('type'))}", where, fields)

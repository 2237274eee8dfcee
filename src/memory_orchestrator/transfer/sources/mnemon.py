"""A Mnemon store, read from its SQLite file (read-only, the schema checked as the Mnemon
adapter checks it: `backends.mnemon.store_file`): every live insight in the order it was
written, mapped as the adapter maps it (category to type, importance 1-5 to 0-1, tags,
entities, time, source; the category kept in the metadata). An insight a later one corrected
in the store (a `supersedes` edge) is skipped: its correction is what is current. Its key:
the insight's id."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from memory_orchestrator.backends.mnemon.mapping import to_memory
from memory_orchestrator.backends.mnemon.store_file import list_page, marked, schema_problem
from memory_orchestrator.errors import TransferError
from memory_orchestrator.transfer.sources.common import Incoming, made

PAGE = 1000


def read_mnemon(path: Path) -> list[Incoming]:
    try:
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=5.0)
    except sqlite3.Error as exc:
        raise TransferError(f"{path}: cannot be opened: {exc}") from exc
    with closing(conn):
        try:
            problem = schema_problem(conn)
            if problem is not None:
                raise TransferError(f"{path}: not a Mnemon store this program knows ({problem})")
            return list(_insights(conn))
        except sqlite3.Error as exc:
            raise TransferError(f"{path}: not a readable Mnemon store: {exc}") from exc


def _insights(conn: sqlite3.Connection) -> list[Incoming]:
    out: list[Incoming] = []
    anchor = None
    while True:
        rows, anchor = list_page(conn, anchor, PAGE)
        for memory in marked(conn, [to_memory(row) for row in rows]):
            where = f"insight {memory.id}"
            if memory.superseded_by is not None:
                why = f"superseded in the Mnemon store by {memory.superseded_by}"
                out.append(Incoming(f"mnemon:{memory.id}", where, None, skip=why))
                continue
            category = memory.metadata.get("category")
            fields = {
                "content": memory.content,
                "type": memory.type,
                "entities": list(memory.entities),
                "tags": list(memory.tags),
                "created_at": memory.created_at,
                "source": memory.source or "mnemon",
                "importance": memory.importance,
                "metadata": {"category": category} if isinstance(category, str) else {},
            }
            out.append(made(f"mnemon:{memory.id}", where, fields))
        if len(rows) < PAGE:
            return out

"""A scratch schema per evaluation case on the postgres store: each case starts from an empty
store (as the embedded store's temporary file does) in the database `[postgres] dsn` names,
and the schema is dropped after the case."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory_orchestrator.settings import Settings

__all__ = ["scratch_store"]


@contextmanager
def scratch_store(settings: Settings) -> Iterator[Settings]:
    """`settings` with the postgres store in a fresh schema (other stores: unchanged)."""
    dsn = settings.postgres.dsn
    if settings.backend != "postgres" or not dsn:
        yield settings
        return
    import psycopg
    from psycopg import conninfo, sql

    name = f"scratch_{uuid.uuid4().hex[:16]}"
    schema = sql.Identifier(name)
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(schema))
    given = str(conninfo.conninfo_to_dict(dsn).get("options") or "")
    options = f"{given} -c search_path={name}".strip()
    scoped = settings.postgres.model_copy(
        update={"dsn": conninfo.make_conninfo(dsn, options=options)}
    )
    try:
        yield settings.model_copy(update={"postgres": scoped})
    finally:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(schema))

"""MCP sessions over HTTP in the shared database (`[shared] state = "postgres"`; the table from
`postgres/migrations/0003_mcp_sessions.sql`), so that any replica serves any request of
any session: the `SessionStore` of `faces.http.sessions`, kept in a table.

Times are the database's (`now()`), so replicas whose clocks differ still agree on when a
session went idle. A token's cap holds across replicas: opening a session counts the token's
sessions and inserts the new one in one transaction, under an advisory lock per token, so two
replicas opening at the same moment cannot both take the last slot. Sessions idle for the
timeout are deleted whenever a session is opened.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # psycopg is the postgres extra: only `database.py` loads it
    from psycopg import Connection

    from memory_orchestrator.postgres.database import Database

    Conn = Connection[tuple[Any, ...]]

__all__ = ["PgSessions"]
_IDLE = "used_at < now() - make_interval(secs => %s)"
_LIVE = "used_at >= now() - make_interval(secs => %s)"


class PgSessions:
    """The MCP sessions of every replica (see the module docstring)."""

    blocking = True

    def __init__(self, db: Database, per_token: int, idle_timeout_s: float) -> None:
        self._pg = db
        self.per_token = per_token
        self.idle_timeout_s = idle_timeout_s

    def open(self, owner: str) -> str | None:
        def run(conn: Conn) -> str | None:
            with conn.transaction():
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"mcp_sessions {owner}",)
                )
                conn.execute(f"DELETE FROM mcp_sessions WHERE {_IDLE}", (self.idle_timeout_s,))
                row = conn.execute(
                    "SELECT count(*) FROM mcp_sessions WHERE owner = %s", (owner,)
                ).fetchone()
                if row is not None and int(row[0]) >= self.per_token:
                    return None
                session_id = uuid.uuid4().hex  # 128 random bits, as the SDK makes them
                conn.execute(
                    "INSERT INTO mcp_sessions (id, owner) VALUES (%s, %s)", (session_id, owner)
                )
                return session_id

        return self._pg.call(run)

    def confirm(self, session_id: str) -> None:
        self._execute(
            "UPDATE mcp_sessions SET opened = true, used_at = now() WHERE id = %s", session_id
        )

    def discard(self, session_id: str) -> None:
        self._execute("DELETE FROM mcp_sessions WHERE id = %s", session_id)

    def use(self, owner: str, session_id: str) -> bool:
        return bool(
            self._execute(
                "UPDATE mcp_sessions SET used_at = now() WHERE id = %s AND owner = %s AND opened"
                f" AND {_LIVE} RETURNING 1",
                session_id,
                owner,
                self.idle_timeout_s,
            )
        )

    def done(self, session_id: str) -> None:
        self._execute("UPDATE mcp_sessions SET used_at = now() WHERE id = %s", session_id)

    def end(self, owner: str, session_id: str) -> bool:
        return bool(
            self._execute(
                "DELETE FROM mcp_sessions WHERE id = %s AND owner = %s AND opened"
                f" AND {_LIVE} RETURNING 1",
                session_id,
                owner,
                self.idle_timeout_s,
            )
        )

    def end_all(self, owner: str) -> int:
        return len(self._execute("DELETE FROM mcp_sessions WHERE owner = %s RETURNING 1", owner))

    def counts(self) -> dict[str, int]:
        rows = self._execute(
            f"SELECT owner, count(*) FROM mcp_sessions WHERE opened AND {_LIVE} GROUP BY owner",
            self.idle_timeout_s,
        )
        return {str(owner): int(count) for owner, count in rows}

    def close(self) -> None:
        self._pg.close()

    def _execute(self, sql: str, *args: object) -> list[tuple[Any, ...]]:
        def run(conn: Conn) -> list[tuple[Any, ...]]:
            cur = conn.execute(sql.encode(), args)
            return cur.fetchall() if cur.description else []

        return self._pg.call(run)

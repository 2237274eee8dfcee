"""The default, zero-setup store: one SQLite file with FTS5 (BM25), an entity index and edges.

Layout (the numbered migrations in `embedded_migrations/`; the file's version, the last one
applied, is kept in `PRAGMA user_version`, and an older file is upgraded in place when opened):
- `memories`: one row per memory; times are integer microseconds since the epoch (UTC);
  `deleted_at` marks a soft delete; `superseded_by` / `superseded_at` a memory a later one
  corrected (version 2).
- `memories_fts`: FTS5 (`unicode61`, no porter) over text already stemmed by
  `memory_orchestrator.text`, so a query and the index always stem alike. Column `body` holds
  content + entities, column `ents` the entities alone (weighted higher by BM25). Rows of
  forgotten memories are removed.
- `entities`: lower-cased entity key -> live memory (rows are removed on forget).
- `edges`: typed, weighted links; `temporal` edges chain memories in time. Memories sharing an
  entity are also joined by an implicit `entity` edge, walked through the entity index.

Export, restore and backup (`embedded_restore`): every edge listed by key, an export written
back verbatim into an empty file, and the file copied through SQLite's online backup API.
A SQLite file of another program (no `memories` table) is refused, never given this schema.

WAL, with readers on connections of their own and one writer (`embedded_conn.Connections`,
which also checks the file on disk before each use); SQL runs in a worker thread so an async
caller can time out. sqlite errors become `BackendError` (transient when locked or busy, on
I/O errors, a full disk or a read-only file: the write path queues such a write). `health`
stays cheap at any size: the whole-file integrity check (`PRAGMA quick_check`) runs when the
file is opened, after an I/O error and on a schedule, and health reports its latest result
(`embedded_check.Integrity`).
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio.to_thread

from memory_orchestrator import text
from memory_orchestrator.backends import kit
from memory_orchestrator.backends.base import dispatched
from memory_orchestrator.backends.embedded_check import Integrity
from memory_orchestrator.backends.embedded_conn import NOT_NOW, Connection, Connections
from memory_orchestrator.backends.embedded_restore import edge_page, restore_rows
from memory_orchestrator.backends.embedded_sql import (
    CHUNK,
    COLS,
    COUNT_LIVE,
    DUPLICATE,
    EDGES_OF,
    INSERT,
    INSERT_ENTITY,
    INSERT_FTS,
    INSERT_TEMPORAL,
    KNOWN,
    LIST,
    LIVE_ROWID,
    NEXT,
    PREV,
    SCHEMA_VERSION,
    SEARCH,
    SEARCH_TOP,
    SHARERS,
    SUPERSEDE,
    UPSERT_EDGE,
    count_rows,
    fts_probe,
    fts_values,
    listed_memory,
    marks,
    migrate,
    now_us,
    readable,
    to_memory,
    to_us,
    transaction,
)
from memory_orchestrator.backends.kit import PRUNE_FROM, entity_key, pruned
from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import (
    Capabilities,
    Edge,
    HealthCheck,
    Memory,
    MetaValue,
    Neighbor,
    NewMemory,
    SearchFilters,
    SearchHit,
    Status,
    WriteAction,
    WriteOutcome,
)

if TYPE_CHECKING:
    from memory_orchestrator.settings import Settings

T = TypeVar("T")
Row = tuple[Any, ...]
# the longest a read run on the event loop's thread may take before SQLite gives up (it is
# then run again on a worker thread): far above a context-neighbours read, far below what
# would hold the event loop up
READ_NOW_BUDGET_S = 0.005
# how long a write waits for another process's write lock before it is queued in the outbox:
# long enough to outlast another process's usual write transaction, short enough that an
# agent's write never hangs on a store someone holds open for long
WRITE_WAIT_MS = 1000
_KEPT_COUNTS = 20_000  # search terms' memory counts a reader connection keeps, at most


class EmbeddedBackend:
    """A `MemoryBackend` over one SQLite file (see the module docstring).

    Opening never raises: a broken or locked file is reported by `health` (and `open_error`),
    and opening is retried by the next call, which raises `BackendError` while it fails.
    """

    name = "embedded"
    capabilities = Capabilities(
        graph=True,
        timestamps=True,
        memory_types=True,
        bulk_write=True,
        link=True,
        time_filter=True,
        entity_filter=True,
        entity_index=True,
        soft_delete=True,
        delete=True,
        listing=True,  # by rowid
        supersede=True,  # columns superseded_by / superseded_at
        export=True,  # list_edges, by key (embedded_restore)
        restore=True,  # into an empty file (embedded_restore)
        backup=True,  # SQLite's online backup API
        versioned=True,  # SQLite's data_version and the file's identity
        dispatch_signal=True,  # each search calls dispatched() before its FTS statement
        edge_types=("temporal", "entity", "causal", "semantic", "related", "update", "supersedes"),
    )
    notes: tuple[str, ...] = ()  # no fallbacks: every feature is always there

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout_ms: int = 5000,
        write_wait_ms: int = WRITE_WAIT_MS,
        entity_fanout: int = kit.ENTITY_FANOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # busy_timeout_ms: how long opening and reading wait for a lock; write_wait_ms: how
        # long a write waits for another process's write lock (then: "database is locked",
        # and the write path queues it); clock: the reopen backoff's and the integrity
        # check's schedule (`embedded_check`; tests inject one).
        self.path = Path(path)
        self.entity_fanout = entity_fanout  # sharers taken per entity and side in `neighbors`
        self.open_error: str | None = None
        self._conns = Connections(
            self.path,
            _setup,
            busy_ms=int(busy_timeout_ms),
            write_wait_ms=int(write_wait_ms),
            clock=clock,
        )
        self._integrity = Integrity(self._conns, clock=clock)
        self._live: int | None = None  # live memories (approximate), for pruning search terms
        try:
            self._conns.file_check()
        except BackendError as exc:
            self.open_error = str(exc)

    @property
    def writing(self) -> bool:
        """True while a write holds (or waits for) the writer connection."""
        return self._conns.writing

    def data_version(self) -> Hashable | None:
        """`VersionedBackend`: moves whenever a change commits to the file, from this
        process or another (SQLite's data_version), or the file changes on disk."""
        return self._conns.version()

    # ------------------------------------------------------------------ plumbing

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """A read, on a reader connection (it never waits for a write)."""
        return await anyio.to_thread.run_sync(self._conns.read, fn, abandon_on_cancel=True)

    async def _call_now(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """A short read: on this thread when nothing makes it wait (`Connections.read_now`:
        a worker thread's round trip costs more than such a read), else as `_call`."""
        done = self._conns.read_now(fn, READ_NOW_BUDGET_S)
        if done is NOT_NOW:
            return await self._call(fn)
        return cast(T, done)

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """A write, on the one writer connection."""
        return await anyio.to_thread.run_sync(self._conns.write, fn, abandon_on_cancel=True)

    @staticmethod
    def _rows(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, Row]:
        """Live memory rows by id (chunked IN queries)."""
        found: dict[str, Row] = {}
        for i in range(0, len(ids), CHUNK):
            chunk = ids[i : i + CHUNK]
            sql = f"SELECT {COLS} FROM memories WHERE id IN ({marks(chunk)}) AND deleted_at IS NULL"
            found.update((row[0], row) for row in conn.execute(sql, chunk))
        return found

    # ------------------------------------------------------------------ reading

    async def search(
        self, query: str, top_k: int, filters: SearchFilters | None = None
    ) -> list[SearchHit]:
        if not isinstance(query, str) or top_k < 1:
            return []
        stems = list(dict.fromkeys(text.terms(query) or text.all_stems(query)))
        if not stems:
            return []
        sql: list[str] = [SEARCH]
        args: list[Any] = [""]  # args[0]: the MATCH expression, set in the worker
        if filters is not None and filters.memory_types:
            sql.append(f"AND m.type IN ({marks(filters.memory_types)})")
            args += [t.value for t in filters.memory_types]
        if filters is not None and filters.entity_ids:
            keys = list(dict.fromkeys(entity_key(e) for e in filters.entity_ids))
            sql.append(f"AND m.id IN (SELECT memory_id FROM entities WHERE key IN ({marks(keys)}))")
            args += keys
        span = filters.time_range if filters is not None else None
        for op, when in ((">=", span.start), ("<=", span.end)) if span is not None else ():
            if when is not None:
                sql.append(f"AND m.created_at {op} ?")
                args.append(to_us(when))
        statement = " ".join([*sql, "ORDER BY r LIMIT ?"]) if len(sql) > 1 else SEARCH_TOP
        args.append(top_k)

        def run(conn: sqlite3.Connection) -> list[SearchHit]:
            # Every term double-quoted: user text can never be read as FTS5 syntax.
            args[0] = " OR ".join(
                '"' + s.replace('"', '""') + '"' for s in self._prune(conn, stems)
            )
            dispatched()  # (the caller's own Python may run while SQLite searches)
            rows = conn.execute(statement, args).fetchall()
            return [
                SearchHit(memory=to_memory(r), rank=n, score=-r[12]) for n, r in enumerate(rows, 1)
            ]

        return await self._call(run)

    def _prune(self, conn: sqlite3.Connection, stems: list[str]) -> list[str]:
        """Drop terms found in over half the memories when rarer ones remain: BM25 gives them
        ~zero weight (FTS5 clamps a negative idf), yet scoring every row they match costs
        milliseconds. Only filler hits that match nothing but such terms are lost."""
        if self._live is None:
            self._live = int(conn.execute(COUNT_LIVE).fetchone()[0])
        if len(stems) < 2 or self._live < PRUNE_FROM:
            return stems  # (kit.pruned's own test, before the query it needs)
        # each term's count kept by the connection until the database changes: the same
        # words (names, topics) come back question after question
        kept = conn.memo() if isinstance(conn, Connection) else {}
        if len(kept) > _KEPT_COUNTS:
            kept.clear()
        missing = [s for s in stems if ("df", s) not in kept]
        if missing:
            sql = f"SELECT term, doc FROM memories_vocab WHERE term IN ({marks(missing)})"
            df = dict(conn.execute(sql, missing).fetchall())
            kept.update((("df", s), df.get(s, 0)) for s in missing)
        return pruned(stems, [kept["df", s] for s in stems], self._live)

    async def get_memories(self, ids: Sequence[str]) -> list[Memory]:
        wanted = kit.clean_ids(ids)
        if not wanted:
            return []
        rows = await self._call_now(lambda conn: self._rows(conn, wanted))
        return [to_memory(rows[i]) for i in wanted if i in rows]

    async def list_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[Memory], str | None]:
        """Live memories in insertion order (rowid), `limit` at a time (`EnumerableBackend`)."""
        after = int(cursor) if cursor and cursor.isdigit() else 0
        size = max(1, min(limit, 10_000))

        def run(conn: sqlite3.Connection) -> tuple[list[Memory], str | None]:
            rows = conn.execute(LIST, (after, size)).fetchall()
            last = str(rows[-1][-1]) if rows else cursor
            return [listed_memory(r) for r in rows], last

        return await self._call(run)

    async def list_edges(self, cursor: str | None, limit: int) -> tuple[list[Edge], str | None]:
        """Edges between live memories, `limit` at a time (`ExportingBackend`)."""
        return await self._call(lambda conn: edge_page(conn, cursor, limit))

    async def neighbors(
        self,
        node_ids: Sequence[str],
        edge_types: Sequence[str] | None = None,
        hops: int = 1,
        limit: int = 50,
    ) -> list[Neighbor]:
        """Breadth-first from the live seeds; within a hop, the strongest edges first."""
        walk = kit.walk_request(node_ids, edge_types, hops, limit)
        if walk is None:
            return []

        def run(conn: sqlite3.Connection) -> list[Neighbor]:
            def reach(frontier: Mapping[str, Row]) -> Iterator[kit.Reach]:
                for node, row in frontier.items():
                    for other, kind, weight in self._adjacent(conn, node, row[3], walk):
                        yield node, other, kind, weight

            return kit.walk_strongest_first(
                walk, load=lambda ids: self._rows(conn, ids), reach=reach, memory=to_memory
            )

        return await self._call_now(run)

    def _adjacent(
        self, conn: sqlite3.Connection, node: str, created: int, walk: kit.Walk
    ) -> list[tuple[str, str, float]]:
        """Neighbours of one live memory: materialized edges, then memories sharing an entity
        (nearest in time first; weight grows with the number of entities shared)."""
        allowed = walk.allowed
        result = [
            (other, etype, float(weight))
            for other, etype, weight in conn.execute(EDGES_OF, (node,))
            if allowed is None or etype in allowed
        ]
        if allowed is not None and "entity" not in allowed:
            return result
        per_entity = min(walk.limit, self.entity_fanout)
        shared: dict[str, int] = {}
        distance: dict[str, int] = {}
        keys = conn.execute("SELECT key FROM entities WHERE memory_id = ?", (node,)).fetchall()
        for (key,) in keys:
            rows = conn.execute(SHARERS, (key, created, node, per_entity)).fetchall()
            for other, when in sorted(rows, key=lambda r: abs(r[1] - created))[:per_entity]:
                shared[other] = shared.get(other, 0) + 1
                distance[other] = abs(when - created)
        for other in sorted(shared, key=distance.__getitem__):
            weight = min(1.0, kit.SHARED_ENTITY_WEIGHT + 0.25 * (shared[other] - 1))
            result.append((other, "entity", weight))
        return result

    async def known_entities(self, limit: int = 500) -> list[str]:
        rows = await self._call(lambda conn: conn.execute(KNOWN, (max(limit, 0),)).fetchall())
        return [name for (name,) in rows]

    # ------------------------------------------------------------------ writing

    async def write(self, memory: NewMemory) -> WriteOutcome:
        return (await self.write_many([memory]))[0]

    async def write_many(self, memories: Sequence[NewMemory]) -> list[WriteOutcome]:
        """All in one transaction; exact duplicates (after whitespace/unicode normalization)
        of a live memory, or of an earlier one in the batch, are skipped."""
        batch = list(memories)
        if not batch:
            return []

        def run(conn: sqlite3.Connection) -> list[WriteOutcome]:
            with transaction(conn):
                outcomes = self._insert(conn, batch)
            if self._live is not None:
                self._live += sum(o.action is WriteAction.ADDED for o in outcomes)
            return outcomes

        return await self._write(run)

    def _insert(self, conn: sqlite3.Connection, batch: list[NewMemory]) -> list[WriteOutcome]:
        now = now_us()
        outcomes: list[WriteOutcome] = []
        added: list[tuple[int, int, str]] = []  # created_at, rowid, id
        for new in batch:
            digest = text.content_hash(new.content)
            dup = conn.execute(DUPLICATE, (digest,)).fetchone()
            if dup is not None:
                detail = f"exact duplicate of {dup[0]}"
                outcomes.append(
                    WriteOutcome(
                        id=dup[0], action=WriteAction.SKIPPED, existing_id=dup[0], detail=detail
                    )
                )
                continue
            mem_id = f"mem_{uuid.uuid4().hex[:12]}"
            created = to_us(new.created_at) if new.created_at is not None else now
            values: tuple[Any, ...] = (mem_id, new.content, new.type.value, created, now)
            blobs = map(json.dumps, (new.entities, new.tags, new.metadata))
            values += (new.source, new.importance, new.confidence, *blobs, digest)
            rowid = conn.execute(INSERT, values).lastrowid
            conn.execute(INSERT_FTS, (rowid, *fts_values(new.content, new.entities)))
            entity_rows = [(entity_key(e), mem_id, e, created) for e in new.entities]
            conn.executemany(INSERT_ENTITY, [r for r in entity_rows if r[0]])
            added.append((created, rowid or 0, mem_id))
            outcomes.append(WriteOutcome(id=mem_id, action=WriteAction.ADDED, detail="stored"))
        if added:
            self._chain(conn, added, now)
        return outcomes

    @staticmethod
    def _chain(conn: sqlite3.Connection, added: list[tuple[int, int, str]], now: int) -> None:
        """Link each new memory to the live one just before it in time, and to the one just
        after it when that one is not new too (an out-of-order insert)."""
        new_ids = {mem_id for _, _, mem_id in added}
        links: list[tuple[str, str, int]] = []
        for created, rowid, mem_id in sorted(added):
            prev = conn.execute(PREV, (created, rowid)).fetchone()
            if prev is not None:
                links.append((prev[0], mem_id, now))
            nxt = conn.execute(NEXT, (created, rowid)).fetchone()
            if nxt is not None and nxt[0] not in new_ids:
                links.append((mem_id, nxt[0], now))
        conn.executemany(INSERT_TEMPORAL, links)

    async def link(
        self,
        source_id: str,
        target_id: str,
        relation: str,
        weight: float = 1.0,
        meta: dict[str, MetaValue] | None = None,
    ) -> Edge:
        edge = kit.checked_edge(source_id, target_id, relation, weight, meta)
        ids = [source_id, target_id]
        values = (source_id, target_id, edge.type, edge.weight, json.dumps(edge.meta))

        def run(conn: sqlite3.Connection) -> Edge:
            with transaction(conn):
                kit.require_known(ids, self._rows(conn, ids))
                conn.execute(UPSERT_EDGE, (*values, now_us()))
            return edge

        return await self._write(run)

    async def supersede(self, old_id: str, new_id: str) -> None:
        """Mark `old_id` corrected by `new_id` (`SupersedingBackend`): its row keeps its text;
        reads leave it out unless history is asked for."""
        ids = [old_id, new_id]
        if len(kit.clean_ids(ids)) != 2:
            raise BackendError("supersede: two different memory ids are needed")

        def run(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                kit.require_known(ids, self._rows(conn, ids))
                conn.execute(SUPERSEDE, (new_id, now_us(), old_id))

        await self._write(run)

    async def restore(self, memories: Sequence[Memory], edges: Sequence[Edge]) -> None:
        """An export written back as it is, into an empty file (`RestoringBackend`)."""

        def run(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                restore_rows(conn, memories, edges)
            self._live = None

        await self._write(run)

    async def backup(self, dest: Path) -> None:
        """A consistent copy of the file while writers go on (`BackingUpBackend`)."""
        await anyio.to_thread.run_sync(kit.sqlite_backup, self.path, dest)

    async def forget(self, memory_id: str) -> bool:
        """Soft delete; the edges stay, but nothing reaches a forgotten memory any more."""
        if not isinstance(memory_id, str) or not memory_id:
            return False

        def run(conn: sqlite3.Connection) -> bool:
            with transaction(conn):
                row = conn.execute(LIVE_ROWID, (memory_id,)).fetchone()
                if row is None:
                    return False
                conn.execute(
                    "UPDATE memories SET deleted_at = ? WHERE rowid = ?", (now_us(), row[0])
                )
                conn.execute("DELETE FROM memories_fts WHERE rowid = ?", (row[0],))
                conn.execute("DELETE FROM entities WHERE memory_id = ?", (memory_id,))
            if self._live is not None:
                self._live -= 1
            return True

        return await self._write(run)

    # ------------------------------------------------------------------ lifecycle

    async def health(self) -> list[HealthCheck]:
        try:
            return await anyio.to_thread.run_sync(self._health, abandon_on_cancel=True)
        except (BackendError, sqlite3.Error, OSError, RuntimeError) as exc:  # no worker thread
            return [HealthCheck(name="sqlite", status=Status.ERROR, detail=str(exc))]

    @property
    def integrity(self) -> Integrity:
        """The integrity check `health` reports (`embedded_check`)."""
        return self._integrity

    def _sqlite(self) -> str:
        """The file opens and reads; then the latest integrity check, which may be waited for
        (`embedded_check`: never run on every call, quick_check reads the whole file)."""
        self._conns.read(readable)
        return self._integrity.report()

    def _health(self) -> list[HealthCheck]:
        """The file on disk, the database (readable, integrity, FTS, counts), then the write
        lock."""
        probes: list[tuple[str, Callable[[], str]]] = [
            ("file", self._conns.file_check),
            ("sqlite", self._sqlite),
        ]
        for name, fn in (("fts", fts_probe), ("counts", count_rows)):
            probes.append((name, lambda fn=fn: self._conns.read(fn)))  # type: ignore[misc]
        checks: list[HealthCheck] = []
        for name, probe in probes:
            start = time.perf_counter()
            if any(c.status is Status.ERROR for c in checks):
                detail, status = "not checked: the database is unavailable", Status.ERROR
            else:
                try:
                    detail, status = probe(), Status.OK
                except (BackendError, sqlite3.Error, OSError) as exc:
                    detail, status = str(exc), Status.ERROR
            ms = round((time.perf_counter() - start) * 1000, 3)
            checks.append(HealthCheck(name=name, status=status, detail=detail, latency_ms=ms))
        if not any(c.status is Status.ERROR for c in checks):
            checks.append(self._lock_check())
        return checks

    def _lock_check(self) -> HealthCheck:
        start = time.perf_counter()
        try:
            locked = self._conns.probe_write_lock()
        except (BackendError, sqlite3.Error, OSError) as exc:
            return HealthCheck(name="writes", status=Status.ERROR, detail=str(exc))
        ms = round((time.perf_counter() - start) * 1000, 3)
        if locked is None:
            return HealthCheck(name="writes", status=Status.OK, detail="free", latency_ms=ms)
        wait = self._conns.write_wait_s
        detail = (
            f"{locked}: another connection holds the write lock; reads go on, a write waits"
            f" up to {wait:g}s for it, then is queued"
        )
        return HealthCheck(name="writes", status=Status.DEGRADED, detail=detail, latency_ms=ms)

    async def close(self) -> None:
        def close() -> None:
            self._integrity.close()
            self._conns.close()

        await anyio.to_thread.run_sync(close)


def _setup(conn: sqlite3.Connection) -> None:
    """A newly opened file: WAL, and the migrations it lacks (all, for a new file)."""
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version < SCHEMA_VERSION:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables and "memories" not in tables:  # another program's file: left as it is
            where = conn.execute("PRAGMA database_list").fetchone()[2]
            raise BackendError(
                f"embedded store {where}: a SQLite file of another program (tables"
                f" {', '.join(sorted(tables)[:5])}), not an embedded store; left as it is"
            )
    if version != SCHEMA_VERSION:
        migrate(conn)


def from_settings(settings: Settings) -> EmbeddedBackend:
    """The registry's factory: the file at `settings.embedded_path()`."""
    return EmbeddedBackend(settings.embedded_path())

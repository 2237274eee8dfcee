"""A shared store on PostgreSQL (`backend = "postgres"`): many orchestrator replicas, one
database. The same contract and the same ranking as the embedded store, on a server.

Layout (`postgres/migrations/0001_memories.sql`, applied at start, see `postgres/database.py`):
- `memories`: one row per memory (type, times, tags, metadata, soft delete by `deleted_at`),
  with a `tsvector` (English configuration; entities weighted 'A', content 'D') under a GIN
  index. Search ranks the rows the index finds by BM25 computed in SQL, as SQLite's FTS5
  does for the embedded store, so both stores rank alike.
- `entities`: lower-cased entity key -> live memory; `edges`: typed, weighted links, with
  `temporal` edges chaining memories in time. Memories sharing an entity are also joined by an
  implicit `entity` edge. `neighbors` walks them with the shared `kit.walk_strongest_first`
  (the embedded store's walk, so expansion ranks alike): one recursive CTE reads every
  materialized edge within the hop budget up front; per hop, one query finds the memories
  sharing an entity with the whole frontier.
- Listing (`list_memories`) follows a change sequence (the transaction that last changed each
  row), so every replica's derived indexes pull exactly what the others wrote.
- A write of content that is already live (from any replica, even at the same moment) is
  skipped by a unique index on the content hash: a write is stored once.
- Every committed change is announced (LISTEN/NOTIFY, `postgres/changes.py`):
  `change_generation` moves, and the derived indexes pull it at once instead of polling.

Calls run in worker threads on a `psycopg_pool` pool, so an async caller can time out;
psycopg errors become `BackendError` (transient when the server is unreachable or busy).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.to_thread
import psycopg
from psycopg import Connection
from psycopg.types.json import Jsonb

from memory_orchestrator.backends import kit
from memory_orchestrator.backends.kit import entity_key, pruned
from memory_orchestrator.backends.postgres_restore import edge_page, restore_rows
from memory_orchestrator.backends.postgres_sql import (
    DUPLICATE,
    EDGES_OF,
    EDGES_TO,
    FORGET,
    INSERT,
    INSERT_ENTITY,
    INSERT_TEMPORAL,
    K1,
    KNOWN,
    LIST,
    LIVE,
    MCOLS,
    NEXT,
    PREV,
    QUERY_TERMS,
    SEARCH,
    SHARERS,
    STATS,
    UPSERT_EDGE,
    WITHIN,
    B,
    idf,
    to_memory,
    tsquery_literal,
)
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
    to_utc,
)
from memory_orchestrator.postgres.changes import Changes
from memory_orchestrator.postgres.database import (
    CONNECT_TIMEOUT_S,
    STATEMENT_TIMEOUT_MS,
    Database,
)
from memory_orchestrator.text import content_hash

if TYPE_CHECKING:
    from memory_orchestrator.settings import Settings

T = TypeVar("T")
ANALYZE_FROM = 200  # memories in one write_many after which the tables are analyzed
# One connection kept open: a replica's first search after a quiet spell then skips the
# connect; the pool grows to `[postgres] pool_max` under load.
POOL_MIN = 1
# How long BM25's collection statistics are reused: counting them costs a scan per term,
# more than the search; this replica's own writes refresh them at once, the others' within
# this, and a few seconds' stale document counts barely move a BM25 score.
STATS_TTL_S = 5.0
Row = tuple[Any, ...]
Conn = Connection[tuple[Any, ...]]


class PostgresBackend:
    """A `MemoryBackend` over one PostgreSQL database (see the module docstring).

    Building it never connects: the first call opens the pool and applies the migrations;
    while the server cannot be reached, calls raise `BackendError` and `health` says why."""

    name = "postgres"
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
        listing=True,  # by change sequence
        export=True,  # list_edges, by key (postgres_restore)
        restore=True,  # into an empty schema (postgres_restore)
        edge_types=("temporal", "entity", "causal", "semantic", "related", "update"),
    )
    notes: tuple[str, ...] = ()

    def __init__(
        self,
        dsn: str | None,
        *,
        entity_fanout: int = kit.ENTITY_FANOUT,
        pool_min: int = POOL_MIN,
        pool_max: int = 10,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        statement_timeout_ms: int = STATEMENT_TIMEOUT_MS,
        stats_ttl_s: float = STATS_TTL_S,
    ) -> None:
        self.entity_fanout = entity_fanout
        self._stats = _CollectionStats(stats_ttl_s)
        self._db = Database(
            dsn,
            min_size=pool_min,
            max_size=pool_max,
            connect_timeout_s=connect_timeout_s,
            statement_timeout_ms=statement_timeout_ms,
            what="postgres store ([postgres] dsn)",
        )
        self._changes = Changes(self._db.dedicated)

    @property
    def change_generation(self) -> int | None:
        """Moves each time a change to the store commits, from any replica; None while not
        listening (see `postgres/changes.py`)."""
        return self._changes.generation if self._db.dsn else None

    @property
    def open_error(self) -> str | None:
        return self._db.open_error

    async def _call(self, fn: Any) -> Any:
        return await anyio.to_thread.run_sync(self._db.call, fn, abandon_on_cancel=True)

    @staticmethod
    def _rows(conn: Conn, ids: Sequence[str]) -> dict[str, Row]:
        return {row[0]: row for row in conn.execute(LIVE, (list(ids),))}

    # ------------------------------------------------------------------ reading

    async def search(
        self, query: str, top_k: int, filters: SearchFilters | None = None
    ) -> list[SearchHit]:
        if not isinstance(query, str) or top_k < 1 or not query.strip():
            return []
        where, args = self._filters(filters)

        def run(conn: Conn) -> list[SearchHit]:
            found = conn.execute(QUERY_TERMS, (query,)).fetchone()
            lexemes = sorted(set(found[0] if found and found[0] else ()))
            if not lexemes:
                return []
            live, avgdl, df = self._stats.get(conn, lexemes)
            keep = pruned(lexemes, df, live)
            weights = dict(zip(lexemes, (idf(live, n) for n in df), strict=True))
            sql = SEARCH.format(filters=where, mcols=MCOLS)
            params = {
                "lex": keep,
                "idf": [weights[lex] for lex in keep],
                "tsq": " | ".join(tsquery_literal(lex) for lex in keep),
                "k1": K1,
                "k1p": K1 + 1,
                "b": B,
                "avgdl": max(avgdl, 1.0),
                "k": top_k,
                **args,
            }
            rows = conn.execute(sql.encode(), params).fetchall()
            return [
                SearchHit(memory=to_memory(r), rank=n, score=float(r[10]))
                for n, r in enumerate(rows, 1)
            ]

        hits: list[SearchHit] = await self._call(run)
        return hits

    @staticmethod
    def _filters(filters: SearchFilters | None) -> tuple[str, dict[str, Any]]:
        if filters is None:
            return "", {}
        sql: list[str] = []
        args: dict[str, Any] = {}
        if filters.memory_types:
            sql.append("AND m.type = ANY(%(types)s)")
            args["types"] = [t.value for t in filters.memory_types]
        if filters.entity_ids:
            sql.append("AND m.id IN (SELECT memory_id FROM entities WHERE key = ANY(%(keys)s))")
            args["keys"] = list(dict.fromkeys(entity_key(e) for e in filters.entity_ids))
        span = filters.time_range
        if span is not None and span.start is not None:
            sql.append("AND m.created_at >= %(start)s")
            args["start"] = to_utc(span.start)
        if span is not None and span.end is not None:
            sql.append("AND m.created_at <= %(end)s")
            args["end"] = to_utc(span.end)
        return " ".join(sql), args

    async def get_memories(self, ids: Sequence[str]) -> list[Memory]:
        wanted = kit.clean_ids(ids)
        if not wanted:
            return []
        rows: dict[str, Row] = await self._call(lambda conn: self._rows(conn, wanted))
        return [to_memory(rows[i]) for i in wanted if i in rows]

    async def list_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[Memory], str | None]:
        """Live memories in change order, `limit` at a time (`EnumerableBackend`). The cursor
        is `<transaction>:<seq>` of the last memory listed."""
        tx, _, seq = (cursor or "").partition(":")
        after = (tx, int(seq)) if tx.isdigit() and seq.isdigit() else ("0", 0)
        size = max(1, min(limit, 10_000))

        def run(conn: Conn) -> tuple[list[Memory], str | None]:
            rows = conn.execute(LIST, (after[0], after[1], size)).fetchall()
            last = f"{rows[-1][-2]}:{rows[-1][-1]}" if rows else cursor
            return [to_memory(r) for r in rows], last

        page: tuple[list[Memory], str | None] = await self._call(run)
        return page

    async def list_edges(self, cursor: str | None, limit: int) -> tuple[list[Edge], str | None]:
        """Edges between live memories, `limit` at a time (`ExportingBackend`)."""
        page: tuple[list[Edge], str | None] = await self._call(
            lambda conn: edge_page(conn, cursor, limit)
        )
        return page

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

        def run(conn: Conn) -> list[Neighbor]:
            known = self._edges_within(conn, walk)

            def reach(frontier: Mapping[str, Row]) -> Iterator[kit.Reach]:
                yield from self._adjacent(conn, frontier, walk, known)

            return kit.walk_strongest_first(
                walk, load=lambda ids: self._rows(conn, ids), reach=reach, memory=to_memory
            )

        found: list[Neighbor] = await self._call(run)
        return found

    @staticmethod
    def _edges_within(conn: Conn, walk: kit.Walk) -> dict[str, list[tuple[str, str, float]]]:
        """Memory -> its materialized edges (other end, type, weight), for every memory within
        `hops - 1` edges of the seeds: what the walk will ask for, in one recursive query."""
        types = sorted(walk.allowed or ())
        args = {"seeds": walk.seeds, "hops": walk.hops, "any": walk.allowed is None}
        found: dict[str, list[tuple[str, str, float]]] = {}
        for node, _, other, kind, weight in conn.execute(WITHIN, {**args, "types": types}):
            edges = found.setdefault(node, [])
            if other is not None and (walk.allowed is None or kind in walk.allowed):
                edges.append((other, kind, float(weight)))
        return found

    def _adjacent(
        self,
        conn: Conn,
        frontier: Mapping[str, Row],
        walk: kit.Walk,
        known: Mapping[str, list[tuple[str, str, float]]],
    ) -> Iterator[kit.Reach]:
        """The edges out of every frontier memory: materialized edges (both directions; from
        `known`, else one query per direction), then memories sharing an entity (nearest in
        time first; weight grows with the number of entities shared), in one query."""
        ids, allowed = list(frontier), walk.allowed
        edges = {i: list(known.get(i, ())) for i in ids}
        unknown = [i for i in ids if i not in known]  # reached through an entity edge
        for statement in (EDGES_OF, EDGES_TO) if unknown else ():
            for node, other, kind, weight in conn.execute(statement, (unknown,)):
                if allowed is None or kind in allowed:
                    edges[node].append((other, kind, float(weight)))
        shared: dict[str, dict[str, int]] = {i: {} for i in ids}
        distance: dict[str, dict[str, float]] = {i: {} for i in ids}
        if allowed is None or "entity" in allowed:
            per = min(walk.limit, self.entity_fanout)
            rows = conn.execute(SHARERS, (ids, per, per)).fetchall()
            by_key: dict[tuple[str, str], list[tuple[str, datetime]]] = {}
            for node, key, other, when in rows:
                by_key.setdefault((node, key), []).append((other, when))
            for (node, _), sharers in by_key.items():
                created = frontier[node][3]
                near = sorted(sharers, key=lambda s: abs((s[1] - created).total_seconds()))
                for other, when in near[:per]:
                    shared[node][other] = shared[node].get(other, 0) + 1
                    distance[node][other] = abs((when - created).total_seconds())
        for node in ids:
            for other, kind, weight in edges[node]:
                yield node, other, kind, weight
            for other in sorted(shared[node], key=distance[node].__getitem__):
                weight = min(1.0, kit.SHARED_ENTITY_WEIGHT + 0.25 * (shared[node][other] - 1))
                yield node, other, "entity", weight

    async def known_entities(self, limit: int = 500) -> list[str]:
        rows = await self._call(lambda conn: conn.execute(KNOWN, (max(limit, 0),)).fetchall())
        return [name for (name,) in rows]

    # ------------------------------------------------------------------ writing

    async def write(self, memory: NewMemory) -> WriteOutcome:
        return (await self.write_many([memory]))[0]

    async def write_many(self, memories: Sequence[NewMemory]) -> list[WriteOutcome]:
        """All in one transaction; content already live (from any replica, or earlier in the
        batch) is skipped with the id that holds it."""
        batch = list(memories)
        if not batch:
            return []

        def run(conn: Conn) -> list[WriteOutcome]:
            with conn.transaction():
                outcomes = self._insert(conn, batch)
            self._stats.stale()
            if len(batch) >= ANALYZE_FROM:  # a bulk load: let the planner see it (GIN or not)
                conn.execute("ANALYZE memories, entities")
            return outcomes

        outcomes: list[WriteOutcome] = await self._call(run)
        return outcomes

    def _insert(self, conn: Conn, batch: list[NewMemory]) -> list[WriteOutcome]:
        now = datetime.now(UTC)
        outcomes: list[WriteOutcome] = []
        added: list[tuple[datetime, int, str]] = []  # created_at, seq, id
        for new in batch:
            digest = content_hash(new.content)
            mem_id = f"mem_{uuid.uuid4().hex[:12]}"
            created = to_utc(new.created_at) if new.created_at is not None else now
            names = " ".join(new.entities)
            values: tuple[Any, ...] = (mem_id, new.content, new.type.value, created, now)
            values += (new.source,)
            values += (new.importance, new.confidence, list(new.entities), list(new.tags))
            values += (Jsonb(new.metadata), digest, f"{new.content} {names}", names)
            row = conn.execute(INSERT, values).fetchone()
            if row is None:
                dup = conn.execute(DUPLICATE, (digest,)).fetchone()
                held = str(dup[0]) if dup else "a memory written at the same time"
                detail = f"exact duplicate of {held}"
                outcomes.append(
                    WriteOutcome(
                        id=dup[0] if dup else None,
                        action=WriteAction.SKIPPED,
                        existing_id=dup[0] if dup else None,
                        detail=detail,
                    )
                )
                continue
            entity_rows = [(entity_key(e), mem_id, e, created) for e in new.entities]
            with conn.cursor() as cur:
                cur.executemany(INSERT_ENTITY, [r for r in entity_rows if r[0]])
            added.append((created, int(row[0]), mem_id))
            outcomes.append(WriteOutcome(id=mem_id, action=WriteAction.ADDED, detail="stored"))
        if added:
            self._chain(conn, added)
        return outcomes

    @staticmethod
    def _chain(conn: Conn, added: list[tuple[datetime, int, str]]) -> None:
        """Link each new memory to the live one just before it in time, and to the one just
        after it when that one is not new too (an out-of-order insert)."""
        new_ids = {mem_id for _, _, mem_id in added}
        links: list[tuple[str, str]] = []
        for created, seq, mem_id in sorted(added):
            prev = conn.execute(PREV, (created, seq)).fetchone()
            if prev is not None:
                links.append((prev[0], mem_id))
            nxt = conn.execute(NEXT, (created, seq)).fetchone()
            if nxt is not None and nxt[0] not in new_ids:
                links.append((mem_id, nxt[0]))
        with conn.cursor() as cur:
            cur.executemany(INSERT_TEMPORAL, links)

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
        values = (source_id, target_id, edge.type, edge.weight, Jsonb(edge.meta))

        def run(conn: Conn) -> Edge:
            with conn.transaction():
                kit.require_known(ids, self._rows(conn, ids))
                conn.execute(UPSERT_EDGE, values)
            return edge

        linked: Edge = await self._call(run)
        return linked

    async def restore(self, memories: Sequence[Memory], edges: Sequence[Edge]) -> None:
        """An export written back as it is, into an empty schema (`RestoringBackend`)."""

        def run(conn: Conn) -> None:
            with conn.transaction():
                restore_rows(conn, memories, edges)
            self._stats.stale()
            conn.execute("ANALYZE memories, entities")

        await self._call(run)

    async def forget(self, memory_id: str) -> bool:
        """Soft delete; the edges stay, but nothing reaches a forgotten memory any more."""
        if not isinstance(memory_id, str) or not memory_id:
            return False

        def run(conn: Conn) -> bool:
            with conn.transaction():
                if conn.execute(FORGET, (memory_id,)).fetchone() is None:
                    return False
                conn.execute("DELETE FROM entities WHERE memory_id = %s", (memory_id,))
            self._stats.stale()
            return True

        gone: bool = await self._call(run)
        return gone

    # ------------------------------------------------------------------ lifecycle

    async def health(self) -> list[HealthCheck]:
        try:
            return await anyio.to_thread.run_sync(self._health, abandon_on_cancel=True)
        except (BackendError, psycopg.Error, OSError, RuntimeError) as exc:  # no worker thread
            return [HealthCheck(name="postgres", status=Status.ERROR, detail=str(exc))]

    def _health(self) -> list[HealthCheck]:

        probes = (
            ("postgres", _server),
            ("fts", _fts_probe),
            ("counts", _counts),
        )
        checks: list[HealthCheck] = []
        for name, probe in probes:
            start = time.perf_counter()
            if checks and checks[0].status is Status.ERROR:
                detail, status = "not checked: the database is unavailable", Status.ERROR
            else:
                try:
                    detail, status = self._db.call(probe), Status.OK
                except (BackendError, psycopg.Error, OSError) as exc:
                    detail, status = str(exc), Status.ERROR
            ms = round((time.perf_counter() - start) * 1000, 3)
            checks.append(HealthCheck(name=name, status=status, detail=detail, latency_ms=ms))
        return checks

    async def close(self) -> None:
        await anyio.to_thread.run_sync(self._changes.close)
        await anyio.to_thread.run_sync(self._db.close)


class _CollectionStats:
    """BM25's collection statistics (live memories, average length, documents per term),
    reused for `ttl_s` seconds: counting them costs a scan per term, more than the search.
    This replica's own writes refresh them at once; other replicas' within `ttl_s`."""

    def __init__(self, ttl_s: float) -> None:
        self._ttl = ttl_s
        self._lock = threading.Lock()
        self._at: float | None = None
        self._live, self._avgdl = 0, 1.0
        self._df: dict[str, int] = {}

    def stale(self) -> None:
        with self._lock:
            self._at = None

    def get(self, conn: Conn, lexemes: list[str]) -> tuple[int, float, list[int]]:
        with self._lock:
            fresh = self._at is not None and time.monotonic() - self._at < self._ttl
            if not fresh:
                self._df = {}
            missing = [lex for lex in lexemes if lex not in self._df]
        if missing or not fresh:
            started = time.monotonic()
            queries = [tsquery_literal(lex) for lex in missing]
            row = conn.execute(STATS, (queries,)).fetchone()
            live, avgdl, counts = row if row is not None else (0, 1.0, [])
            with self._lock:
                if not fresh:
                    self._at, self._live, self._avgdl = started, int(live), float(avgdl)
                self._df.update(zip(missing, (int(n) for n in counts), strict=True))
        with self._lock:
            return self._live, self._avgdl, [self._df.get(lex, 0) for lex in lexemes]


def _server(conn: Conn) -> str:
    row = conn.execute(
        "SELECT current_setting('server_version'), (SELECT max(version) FROM schema_migrations)"
    ).fetchone()
    if row is None:
        raise BackendError("postgres: no answer to a version probe")
    return f"PostgreSQL {row[0]}, schema version {row[1]}"


def _fts_probe(conn: Conn) -> str:
    conn.execute("SELECT count(*) FROM memories WHERE search @@ 'probe'::tsquery").fetchone()
    return "tsvector + GIN ok"


def _counts(conn: Conn) -> str:
    row = conn.execute(
        "SELECT (SELECT count(*) FROM memories WHERE deleted_at IS NULL),"
        " (SELECT count(*) FROM edges)"
    ).fetchone()
    memories, edges = row if row is not None else (0, 0)
    return f"{memories} memories, {edges} edges"


def from_settings(settings: Settings) -> PostgresBackend:
    """The registry's factory: the database `[postgres] dsn` names (not connected yet)."""
    return PostgresBackend(settings.postgres.dsn, pool_max=settings.postgres.pool_max)

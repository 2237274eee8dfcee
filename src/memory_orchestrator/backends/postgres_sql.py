"""The postgres store's SQL statements, its BM25 scoring and row mapping (see `postgres.py`;
the schema is `postgres/migrations/0001_memories.sql`)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from memory_orchestrator.models import Memory, MemoryType

Row = tuple[Any, ...]

K1, B = 1.2, 0.75  # BM25, as SQLite's FTS5 computes it for the embedded store

COLS = "id, content, type, created_at, source, importance, confidence, entities, tags, metadata"
MCOLS = ", ".join(f"m.{c.strip()}" for c in COLS.split(","))

# Entities weigh 'A' (counted twice, on top of once more in the body), content 'D': the
# same term weights as the embedded store's FTS5 columns (body 1.0, entities 2.0).
INSERT = (
    "INSERT INTO memories (id, content, type, created_at, updated_at, source, importance,"
    " confidence, entities, tags, metadata, content_hash, search, doc_len)"
    " SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, v.s,"
    " (SELECT coalesce(sum(array_length(u.positions, 1)), 0) FROM unnest(v.s) u)"
    " FROM (SELECT setweight(to_tsvector('english', %s), 'D')"
    " || setweight(to_tsvector('english', %s), 'A') AS s) v"
    " ON CONFLICT (content_hash) WHERE deleted_at IS NULL DO NOTHING RETURNING seq"
)

DUPLICATE = "SELECT id FROM memories WHERE content_hash = %s AND deleted_at IS NULL"

INSERT_ENTITY = (
    "INSERT INTO entities (key, memory_id, name, created_at) VALUES (%s, %s, %s, %s)"
    " ON CONFLICT DO NOTHING"
)

INSERT_TEMPORAL = (
    "INSERT INTO edges (source_id, target_id, type, weight, meta, created_at)"
    " VALUES (%s, %s, 'temporal', 1.0, '{}', now()) ON CONFLICT DO NOTHING"
)

UPSERT_EDGE = (
    "INSERT INTO edges (source_id, target_id, type, weight, meta, created_at)"
    " VALUES (%s, %s, %s, %s, %s, now()) ON CONFLICT (source_id, target_id, type)"
    " DO UPDATE SET weight = excluded.weight, meta = excluded.meta"
)

PREV = (
    "SELECT id FROM memories WHERE deleted_at IS NULL AND (created_at, seq) < (%s, %s)"
    " ORDER BY created_at DESC, seq DESC LIMIT 1"
)

NEXT = (
    "SELECT id FROM memories WHERE deleted_at IS NULL AND (created_at, seq) > (%s, %s)"
    " ORDER BY created_at, seq LIMIT 1"
)

LIVE = f"SELECT {COLS} FROM memories WHERE id = ANY(%s) AND deleted_at IS NULL"

# The change sequence: rows ordered by the transaction that last changed them, and listed
# only once every transaction before the oldest one still running has ended, so a row that
# commits late is never passed over by a cursor that moved on.
LIST = (
    f"SELECT {COLS}, changed_tx::text, seq FROM memories WHERE deleted_at IS NULL"
    " AND (changed_tx, seq) > (%s::xid8, %s)"
    " AND changed_tx < pg_snapshot_xmin(pg_current_snapshot())"
    " ORDER BY changed_tx, seq LIMIT %s"
)

QUERY_TERMS = "SELECT tsvector_to_array(to_tsvector('english', %s))"

# BM25's collection statistics: live memories, their average length, and how many hold each
# of the given terms (quoted tsqueries, see `tsquery_literal`), in one round trip.
STATS = (
    "SELECT (SELECT count(*) FROM memories WHERE deleted_at IS NULL),"
    " (SELECT coalesce(avg(doc_len), 1)::float8 FROM memories WHERE deleted_at IS NULL),"
    " array(SELECT (SELECT count(*) FROM memories WHERE deleted_at IS NULL AND search @@ q)"
    " FROM unnest(%s::tsquery[]) WITH ORDINALITY AS t(q, n) ORDER BY n)"
)

# BM25 over the rows the GIN index finds: each matched term's frequency (positions weighted
# 'A' count 2, others 1), the row's length and the collection's average.
SEARCH = """
WITH q AS (SELECT * FROM unnest(%(lex)s::text[], %(idf)s::float8[]) AS q(lex, idf)),
hit AS (
    SELECT m.seq, m.doc_len, u.lexeme, (cardinality(u.positions)
        + cardinality(array_positions(u.weights, 'A')))::float8 AS tf
    FROM memories m CROSS JOIN LATERAL unnest(m.search) AS u(lexeme, positions, weights)
    WHERE m.search @@ %(tsq)s::tsquery AND m.deleted_at IS NULL {filters}
        AND u.lexeme = ANY(%(lex)s::text[])
),
top AS (
    SELECT h.seq, sum(q.idf * (h.tf * %(k1p)s)
        / (h.tf + %(k1)s * (1 - %(b)s + %(b)s * h.doc_len / %(avgdl)s))) AS score
    FROM hit h JOIN q ON q.lex = h.lexeme
    GROUP BY h.seq ORDER BY score DESC, h.seq LIMIT %(k)s
)
SELECT {mcols}, t.score FROM top t JOIN memories m ON m.seq = t.seq ORDER BY t.score DESC, t.seq
"""

EDGES_OF = (
    "SELECT source_id, target_id, type, weight FROM edges WHERE source_id = ANY(%s)"
    " ORDER BY source_id, target_id, type"
)
EDGES_TO = (
    "SELECT target_id, source_id, type, weight FROM edges WHERE target_id = ANY(%s)"
    " ORDER BY target_id, source_id, type"
)

# The materialized edges within the hop budget, in one round trip: a recursive CTE finds the
# memories up to `hops - 1` edges from the seeds (along the allowed types; UNION keeps each
# (memory, depth) once, so a cycle cannot loop), then every edge of those memories, each
# memory's outgoing edges first, as EDGES_OF and EDGES_TO order them.
WITHIN = """
WITH RECURSIVE reach(node, depth) AS (
    SELECT s, 0 FROM unnest(%(seeds)s::text[]) AS s
    UNION
    SELECT n.other, r.depth + 1 FROM reach r CROSS JOIN LATERAL (
        SELECT target_id AS other FROM edges
        WHERE source_id = r.node AND (%(any)s OR type = ANY(%(types)s))
        UNION ALL
        SELECT source_id FROM edges
        WHERE target_id = r.node AND (%(any)s OR type = ANY(%(types)s))
    ) n
    WHERE r.depth + 1 < %(hops)s
),
inside AS (SELECT DISTINCT node FROM reach)
SELECT i.node, 0 AS side, e.target_id, e.type, e.weight
FROM inside i LEFT JOIN edges e ON e.source_id = i.node
UNION ALL
SELECT i.node, 1, e.source_id, e.type, e.weight
FROM inside i JOIN edges e ON e.target_id = i.node
ORDER BY 1, 2, 3, 4
"""

# For each frontier memory and each of its entities, the sharers nearest in time on each
# side (at most %s per side), so a very common entity cannot explode.
SHARERS = """
SELECT f.id, e.key, s.memory_id, s.created_at
FROM unnest(%s::text[]) WITH ORDINALITY AS f(id, ord)
JOIN memories fm ON fm.id = f.id
JOIN entities e ON e.memory_id = f.id
CROSS JOIN LATERAL (
    (SELECT memory_id, created_at FROM entities
     WHERE key = e.key AND created_at <= fm.created_at AND memory_id <> f.id
     ORDER BY created_at DESC LIMIT %s)
    UNION ALL
    (SELECT memory_id, created_at FROM entities
     WHERE key = e.key AND created_at > fm.created_at ORDER BY created_at LIMIT %s)
) s
ORDER BY f.ord, e.key
"""

KNOWN = "SELECT min(name) FROM entities GROUP BY key ORDER BY count(*) DESC, key LIMIT %s"

FORGET = (
    "UPDATE memories SET deleted_at = now(), updated_at = now(),"
    " changed_tx = pg_current_xact_id() WHERE id = %s AND deleted_at IS NULL RETURNING seq"
)


def tsquery_literal(lexeme: str) -> str:
    """One lexeme as tsquery text: quoted, so nothing in it is read as tsquery syntax."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def idf(docs: int, containing: int) -> float:
    """FTS5's BM25 idf: log((N - n + 0.5) / (n + 0.5)), at least 1e-6. (`n` is counted a
    moment after `N`: a concurrent write may make it larger.)"""
    containing = min(containing, docs)
    value = math.log((docs - containing + 0.5) / (containing + 0.5))
    return value if value > 0 else 1e-6


def to_memory(row: Row) -> Memory:
    mem_id, content, kind, created, source, importance, confidence, ents, tags, meta = row[:10]
    return Memory(
        id=mem_id,
        content=content,
        source=source,
        importance=importance,
        confidence=confidence,
        type=MemoryType(kind),
        created_at=created.astimezone(UTC) if isinstance(created, datetime) else None,
        entities=tuple(ents or ()),
        tags=tuple(tags or ()),
        metadata=dict(meta or {}),
        store="postgres",
    )

"""The rules every backend applies the same way, written once: which ids count, what a link
must be, and how a graph is walked for `neighbors` (see the contract in `base.py`).

Two walks, because stores rank what they reach in two ways, and the eval numbers depend on
each store keeping its own:
- `walk_in_order`: breadth-first; from each node the steps come in the order the store gives
  them (strongest edge, nearest in time, ...) and the first way a memory is reached is kept
  (Mnemonic, kg-memory, mnemon-mcp);
- `walk_strongest_first`: breadth-first; everything one hop away is gathered first, each memory
  by its strongest edge, and the hop is ranked as a whole (embedded, Mnemon's store file).
Both go at most `hops` edges out, return at most `limit` neighbours, nearest hop first, and
never a seed.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Collection, Container, Iterable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import Edge, Memory, MetaValue, Neighbor

__all__ = [
    "SHARED_ENTITY_WEIGHT",
    "Reach",
    "Step",
    "Walk",
    "by_time_distance",
    "checked_edge",
    "clean_ids",
    "edge_cursor",
    "parse_time",
    "require_known",
    "sqlite_backup",
    "utc_text",
    "walk_in_order",
    "walk_request",
    "walk_strongest_first",
]

R = TypeVar("R")

SHARED_ENTITY_WEIGHT = 0.5  # the implicit edge between two memories naming the same entity
# Memories sharing one entity followed per side of a walk: a common name (the user, a
# project) is shared by thousands, and the walk wants the nearest few in time, not all.
ENTITY_FANOUT = 8

Step = tuple[Memory, str, float]  # a memory one edge away, the edge type, its weight
Reach = tuple[str, str, str, float]  # from (a frontier node), to, edge type, weight


def clean_ids(ids: Iterable[object], *, argv_safe: bool = False) -> list[str]:
    """The usable ids among `ids`: non-empty strings, each once, in the order given.
    `argv_safe` also drops blank ids and ids holding a NUL (a command line cannot carry them).
    """
    return list(
        dict.fromkeys(
            i
            for i in ids
            if isinstance(i, str) and i and (not argv_safe or (i.strip() and "\x00" not in i))
        )
    )


@dataclass(frozen=True)
class Walk:
    """A `neighbors` request worth walking: clean seeds, the edge types it may follow (None:
    any), `hops` >= 1 and `limit` >= 1."""

    seeds: list[str]
    allowed: frozenset[str] | None
    hops: int
    limit: int


def walk_request(
    node_ids: Iterable[object],
    edge_types: Iterable[str] | None,
    hops: int,
    limit: int,
    *,
    known: Collection[str] | None = None,
    argv_safe: bool = False,
) -> Walk | None:
    """The walk `neighbors(node_ids, edge_types, hops, limit)` asks for, or None when it can
    reach nothing: no usable seed, `hops` or `limit` below 1, or edge types given and none of
    them (of the store's `known` types, when given) left to follow."""
    seeds = clean_ids(node_ids, argv_safe=argv_safe)
    allowed = None if edge_types is None else frozenset(edge_types)
    if allowed is not None and known is not None:
        allowed &= frozenset(known)
    if not seeds or hops < 1 or limit < 1 or allowed == frozenset():
        return None
    return Walk(seeds, allowed, hops, limit)


def checked_edge(
    source_id: str,
    target_id: str,
    relation: str,
    weight: float = 1.0,
    meta: dict[str, MetaValue] | None = None,
    *,
    argv_safe: bool = False,
) -> Edge:
    """The edge `link(...)` asks for, once it is one: a non-blank relation (stripped), a weight
    within 0..1, two different usable ids. Raises `BackendError` saying which rule failed;
    whether both memories exist is the store's to check (`require_known`)."""
    if not isinstance(relation, str) or not relation.strip():
        raise BackendError("link: relation must be a non-empty string")
    if not 0.0 <= weight <= 1.0:
        raise BackendError(f"link: weight must be within 0..1, got {weight}")
    if len(clean_ids([source_id, target_id], argv_safe=argv_safe)) != 2:
        raise BackendError("link: source and target must be two different memory ids")
    return Edge(
        source_id=source_id,
        target_id=target_id,
        type=relation.strip(),
        weight=float(weight),
        meta=dict(meta or {}),
    )


def require_known(ids: Iterable[str], known: Container[str]) -> None:
    """Raises `BackendError` naming the ids of a link that the store does not hold."""
    missing = [i for i in ids if i not in known]
    if missing:
        raise BackendError(f"link: unknown memory id(s): {', '.join(missing)}")


def utc_text(when: datetime) -> str:
    """`when` as the stores write times: UTC to the second, `Z` (a naive time is UTC)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: object) -> datetime | None:
    """An ISO 8601 time (`Z` allowed) or a datetime, time-zone aware (a naive one is UTC);
    None for anything else."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def by_time_distance(
    memories: Iterable[Memory], when: datetime | None, *, undated_first: bool = False
) -> list[Memory]:
    """`memories` nearest in time to `when` first (ties keep their order). A memory without a
    time comes last, or first with `undated_first`; with no `when`, all keep their order."""
    found = list(memories)
    if when is None:
        return found
    undated = timedelta(0) if undated_first else timedelta.max
    return sorted(
        found, key=lambda m: undated if m.created_at is None else abs(m.created_at - when)
    )


def walk_in_order(
    walk: Walk, start: Mapping[str, Memory], steps: Callable[[Memory], Iterable[Step]]
) -> list[Neighbor]:
    """Breadth-first from the seeds found in `start`; from each node, `steps(node)` in the
    order given, the first way a memory is reached kept, until `walk.limit` neighbours.
    `steps` follows only `walk.allowed` edge types (it knows how its store names them)."""
    seen, out = set(walk.seeds), list[Neighbor]()
    frontier = [(start[s], s) for s in walk.seeds if s in start]
    for hop in range(1, walk.hops + 1):
        reached: list[tuple[Memory, str]] = []
        for node, seed in frontier:
            for memory, kind, weight in steps(node):
                if memory.id in seen:
                    continue
                seen.add(memory.id)
                out.append(
                    Neighbor(
                        memory=memory,
                        seed_id=seed,
                        via_id=node.id,
                        edge_type=kind,
                        weight=weight,
                        hops=hop,
                    )
                )
                if len(out) >= walk.limit:
                    return out
                reached.append((memory, seed))
        frontier = reached
        if not frontier:
            break
    return out


def walk_strongest_first(
    walk: Walk,
    *,
    load: Callable[[list[str]], Mapping[str, R]],
    reach: Callable[[Mapping[str, R]], Iterable[Reach]],
    memory: Callable[[R], Memory],
    tie_break: Callable[[str, R, R], Any] | None = None,
) -> list[Neighbor]:
    """Breadth-first over a store's rows. Per hop: `reach(frontier)` gives the edges out of
    the frontier (id -> row); each memory not yet seen keeps the strongest edge that reached
    it (the first on a tie); those `load` finds live are ranked by weight, then by
    `tie_break(id, its row, the row it was reached from)` when given (else as reached), and
    taken until `walk.limit`. Weights are reported clamped to 0..1."""
    live = load(walk.seeds)
    frontier = {s: live[s] for s in walk.seeds if s in live}
    seed_of = {s: s for s in frontier}
    seen, out = set(walk.seeds), list[Neighbor]()
    for hop in range(1, walk.hops + 1):
        found: dict[str, tuple[str, str, float]] = {}  # id -> via, edge type, weight
        for via, other, kind, weight in reach(frontier):
            if via not in frontier or other in seen:
                continue
            if other not in found or weight > found[other][2]:
                found[other] = (via, kind, weight)
        rows = load(list(found))
        keys: dict[str, tuple[Any, ...]] = {}
        for cand, (via, _, weight) in found.items():
            if cand in rows:
                later = () if tie_break is None else (tie_break(cand, rows[cand], frontier[via]),)
                keys[cand] = (-weight, *later)
        ranked = sorted(keys, key=keys.__getitem__)
        taken: dict[str, R] = {}
        for cand in ranked[: walk.limit - len(out)]:
            via, kind, weight = found[cand]
            seed_of[cand] = seed_of[via]
            out.append(
                Neighbor(
                    memory=memory(rows[cand]),
                    seed_id=seed_of[via],
                    via_id=via,
                    edge_type=kind,
                    weight=min(max(weight, 0.0), 1.0),
                    hops=hop,
                )
            )
            taken[cand] = rows[cand]
        frontier = taken
        seen.update(found)
        if len(out) >= walk.limit or not frontier:
            break
    return out


# ---------------------------------------------------------------- the SQL stores' shared rules

PRUNE_FROM = 1000  # live memories before very common search terms are pruned


def entity_key(name: str) -> str:
    """How entity names are matched: whitespace collapsed, case folded."""
    return " ".join(name.split()).casefold()


def pruned(terms: list[str], df: Sequence[int], live: int) -> list[str]:
    """Drop terms found in over half the memories when rarer ones remain: BM25 gives them
    ~zero weight, yet scoring every row they match costs the most. Only filler hits that
    match nothing but such terms are lost."""
    if len(terms) < 2 or live < PRUNE_FROM:
        return terms
    return [t for t, n in zip(terms, df, strict=True) if n * 2 <= live] or terms


def sqlite_backup(source: Path, dest: Path, *, timeout_s: float = 30.0) -> None:
    """`dest` made a copy of the SQLite file `source` through SQLite's online backup API, in
    one step: one read transaction, so the copy is one committed moment of the file while
    writers (WAL) go on. Written beside `dest` and renamed into place, so a failed copy
    leaves nothing there. Raises BackendError."""
    if dest.exists():
        raise BackendError(f"{dest} exists already; a backup never overwrites a file")
    if not source.is_file():
        raise BackendError(f"no store file at {source}")
    partial = dest.with_name(dest.name + ".partial")
    try:
        with (
            closing(sqlite3.connect(source, timeout=timeout_s)) as src,
            closing(sqlite3.connect(partial)) as copy,
        ):
            src.backup(copy)
        os.replace(partial, dest)
    except (sqlite3.Error, OSError) as exc:
        partial.unlink(missing_ok=True)
        raise BackendError(f"backup of {source} to {dest} failed: {exc}") from exc


def edge_cursor(cursor: str | None) -> list[str]:
    """The edge key (source, target, type) a listing of edges resumes after: `cursor` is the
    last key listed, as JSON; anything else starts at the beginning."""
    try:
        key = json.loads(cursor) if cursor else None
    except json.JSONDecodeError:
        key = None
    if isinstance(key, list) and len(key) == 3 and all(isinstance(k, str) for k in key):
        return key
    return ["", "", ""]

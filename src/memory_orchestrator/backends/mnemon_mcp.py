"""The layered store of the mnemon-mcp blog post: npm `mnemon-mcp@1.3.0`, over MCP stdio.

One `node <abs>/dist/index.js` process per store (`MNEMON_DB_PATH`), spawned on first use and
kept open (`npm_server.NpmServer`); a crashed process is restarted on the next call.

Mapping:
- memory type <-> layer (episodic, semantic, procedural, resource: the same four names);
- entities -> `entity_name` (the first entity; the server keeps one) and all of them in the
  `meta` JSON; read back as `(entity_name,)`;
- `created_at` -> `event_at` (the time the event happened); time windows -> `date_from` /
  `date_to`, which the server applies to the day of event_at, else of its insert time: the
  days the window touches are sent, and the adapter keeps what is within it (the filter
  rule, `filtering.matches`), as it matches entity names case folded;
- scope -> `Memory.store` is "mnemon-mcp" and the scope goes to `metadata["scope"]`;
- a write whose `metadata["orchestrator:supersedes"]` names a memory (the write path's own
  key: a client's metadata cannot hold it) is sent as `memory_update` with
  `supersede=true` (a versioned replacement: the old one leaves search results and the
  export; `memory_inspect` shows its `superseded_by`). The write path sends corrections so
  (`pipeline.conflicts`); the server keeps no history to read back (`history` finds none).

Traps worked around (see ../shared/reference/backends.md section 2):
- its stemmer keeps a word whose stem is as long as the word ("family" stays "family" while the
  index holds "famili"), so the adapter sends the Snowball stems of the content words itself;
- a match expression it cannot parse comes back as an empty list: only plain word stems are
  sent, never punctuation or operators;
- every search bumps last-accessed on what it returns (noted in `notes`; the orchestrator's
  own ranking does not use the store's recency);
- no bulk add: `write_many` is one `memory_add` per memory (a few ms each, kept-open session);
- `memory_delete` in 1.3.0 answers "no such table: memories_vec" without an embedding
  provider, after deleting the row: `forget` checks with `memory_inspect`, and should the
  memory still be there it sets its confidence to 0 (every search asks for confidence > 0).
Neighbours: the server has no graph; memories sharing an entity_name are neighbours (nearest
in event time first), read from a cached `memory_export` that is refreshed after writes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_orchestrator import text
from memory_orchestrator.backends import kit
from memory_orchestrator.backends.mcp_stdio import ToolError
from memory_orchestrator.backends.npm_server import NpmServer, server_options
from memory_orchestrator.errors import BackendError, CapabilityMissing
from memory_orchestrator.filtering import matches
from memory_orchestrator.models import (
    SUPERSEDES_KEY,
    Capabilities,
    Edge,
    HealthCheck,
    Memory,
    MemoryType,
    MetaValue,
    Neighbor,
    NewMemory,
    SearchFilters,
    SearchHit,
    Status,
    WriteAction,
    WriteOutcome,
    own_key,
)

if TYPE_CHECKING:
    from memory_orchestrator.settings import Settings

PACKAGE = "mnemon-mcp"
NAME = "mnemon-mcp"
_FORGOTTEN = 0.0  # confidence of a forgotten memory
_MIN_CONFIDENCE = 0.001  # asked of every search, so forgotten memories never come back
_EXPORT_LIMIT = 10_000
_MAX_LIMIT = 100  # the most memory_search gives in one call


def query_terms(query: str) -> str:
    """What to send as `query`: the Snowball stems of the content words (all words when only
    stop words are left), plain word characters only, in order, without repeats."""
    stems = text.terms(query) or text.all_stems(query)
    clean = ("".join(ch for ch in s if ch.isalnum()) for s in stems)
    return " ".join(dict.fromkeys(s for s in clean if s))


def _written(row: dict[str, Any]) -> tuple[str, str]:
    """When a row was written (the server's ISO `created_at`), then its id: a total order in
    which memories written later come later."""
    return (str(row.get("created_at") or ""), str(row["id"]))


def _given(row: dict[str, Any], stamp: str, given: set[str]) -> bool:
    return _written(row)[0] == stamp and str(row["id"]) in given


def _to_memory(row: dict[str, Any]) -> Memory:
    layer = str(row.get("layer"))
    kind = MemoryType(layer) if layer in MemoryType._value2member_map_ else MemoryType.SEMANTIC
    entity = row.get("entity_name")
    meta: dict[str, MetaValue] = {}
    for key in ("title", "scope", "entity_type", "source_file"):
        if isinstance(row.get(key), str):
            meta[key] = row[key]
    if isinstance(row.get("created_at"), str):
        meta["stored_at"] = row["created_at"]
    when = kit.parse_time(row.get("event_at")) or kit.parse_time(row.get("created_at"))
    return Memory(
        id=str(row["id"]),
        content=str(row.get("content") or ""),
        type=kind,
        entities=(entity,) if isinstance(entity, str) and entity else (),
        created_at=when,
        source=row.get("source") if isinstance(row.get("source"), str) else None,
        importance=_unit(row.get("importance")),
        confidence=_unit(row.get("confidence")),
        store=NAME,
        metadata=meta,
        superseded_by=row["superseded_by"] if isinstance(row.get("superseded_by"), str) else None,
    )


def _unit(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return min(1.0, max(0.0, float(value)))
    return None


class MnemonMcpBackend:
    """A `MemoryBackend` over one mnemon-mcp server process (see the module docstring)."""

    name = NAME
    capabilities = Capabilities(
        graph=True,  # implicit: memories sharing an entity_name
        timestamps=True,
        memory_types=True,
        bulk_write=False,
        link=False,
        time_filter=True,
        entity_filter=True,
        entity_index=True,
        soft_delete=True,
        delete=True,
        listing=True,  # from memory_export, in write order
        edge_types=("entity",),
    )

    def __init__(
        self,
        db_path: Path,
        *,
        script: Path | None = None,
        node: str | None = None,
        timeout_s: float = 10.0,
        scope: str | None = None,
        extra_env: dict[str, str] | None = None,
        native_search: bool = False,
    ) -> None:
        self.db_path = Path(db_path).resolve()
        self.scope = scope
        self.native_search = native_search
        self.server = NpmServer(
            NAME,
            PACKAGE,
            self.db_path,
            {"MNEMON_DB_PATH": str(self.db_path), **(extra_env or {})},
            section="mnemon_mcp",
            script=script,
            node=node,
            timeout_s=timeout_s,
        )
        self.client = self.server.client  # the process, for tests and fault injection
        self._export: list[dict[str, Any]] | None = None
        self._export_at = 0.0
        self._forget_fallback = False

    @property
    def notes(self) -> tuple[str, ...]:
        notes = ["mnemon-mcp: searches bump last-accessed in the store (its own recency factor)"]
        if self._forget_fallback:
            notes.append("mnemon-mcp: memory_delete failed; forgotten memories have confidence 0")
        return tuple(notes)

    # ------------------------------------------------------------------ reading

    async def search(
        self, query: str, top_k: int, filters: SearchFilters | None = None
    ) -> list[SearchHit]:
        if not isinstance(query, str) or top_k < 1:
            return []
        terms = " ".join(query.split()) if self.native_search else query_terms(query)
        if not terms:
            return []
        args = self._search_args(terms, top_k, filters)
        rows: dict[str, dict[str, Any]] = {}
        for entity in await self._entity_names(filters):
            call = dict(args, entity_name=entity) if entity else args
            try:
                found = await self.server.call("memory_search", call, read=True)
            except ToolError:
                continue  # "Invalid search query": a bad query gives []
            for row in (found or {}).get("memories", []) if isinstance(found, dict) else []:
                if isinstance(row, dict) and "id" in row:
                    best = rows.get(row["id"])
                    if best is None or float(row.get("score") or 0) > float(best.get("score") or 0):
                        rows[row["id"]] = row
        ranked = sorted(rows.values(), key=lambda r: -float(r.get("score") or 0))
        # the server's window is whole days: the exact one is the filter rule's
        memories = [(r, _to_memory(r)) for r in ranked]
        kept = [(r, m) for r, m in memories if matches(m, filters)][:top_k]
        return [
            SearchHit(memory=memory, rank=n, score=float(r.get("score") or 0))
            for n, (r, memory) in enumerate(kept, 1)
        ]

    def _search_args(self, terms: str, top_k: int, filters: SearchFilters | None) -> dict[str, Any]:
        """The memory_search arguments. The server compares a window with the day of each
        memory's time, so the days the window touches are sent, and `search` keeps the
        memories within it (of as many as the server gives, so that the top_k are the best
        within it)."""
        windowed = filters is not None and filters.time_range is not None
        args: dict[str, Any] = {
            "query": terms,
            "limit": _MAX_LIMIT if windowed else min(top_k, _MAX_LIMIT),
            "min_confidence": _MIN_CONFIDENCE,
        }
        if self.scope:
            args["scope"] = self.scope
        if filters is None:
            return args
        if filters.memory_types:
            args["layers"] = [t.value for t in filters.memory_types]
        span = filters.time_range
        if span is not None and span.start is not None:
            args["date_from"] = kit.utc_text(span.start)[:10]
        if span is not None and span.end is not None:
            args["date_to"] = kit.utc_text(span.end)[:10]
        return args

    async def _entity_names(self, filters: SearchFilters | None) -> list[str | None]:
        """The entity names to search one call each: the server matches an entity_name
        exactly, the filter rule case folded, so each asked name becomes the names the store
        holds that fold alike (the name itself when it holds none). [None]: no entity filter."""
        if filters is None or not filters.entity_ids:
            return [None]
        held: dict[str, list[str]] = {}
        for name in await self.known_entities(limit=_EXPORT_LIMIT):
            held.setdefault(name.casefold(), []).append(name)
        names = [n for e in filters.entity_ids for n in held.get(e.casefold(), [e])]
        return list(dict.fromkeys(names))

    async def _all(self) -> list[dict[str, Any]]:
        """Every live memory, from `memory_export` (cached until the next write)."""
        if self._export is None:
            found = await self.server.call(
                "memory_export", {"format": "json", "limit": _EXPORT_LIMIT}, read=True
            )
            content = found.get("content") if isinstance(found, dict) else None
            rows = json.loads(content) if isinstance(content, str) else []
            self._export = [
                r
                for r in rows
                if isinstance(r, dict) and "id" in r and r.get("confidence") != _FORGOTTEN
            ]
            self._export_at = time.monotonic()
        return self._export

    async def list_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[Memory], str | None]:
        """Live memories in the order they were written (`EnumerableBackend`), from the
        export. The server stamps writes to the second, so the cursor is the last stamp
        handed out with the ids already handed out under it."""
        rows = sorted(await self._all(), key=_written)
        stamp, given = "", set[str]()
        if cursor:
            saved = json.loads(cursor)
            stamp, given = str(saved[0]), {str(i) for i in saved[1]}
        fresh = [r for r in rows if _written(r) > (stamp, "") and not _given(r, stamp, given)]
        fresh = fresh[: max(1, limit)]
        if not fresh:
            return [], cursor
        last = _written(fresh[-1])[0]
        under = {str(r["id"]) for r in fresh if _written(r)[0] == last}
        if last == stamp:
            under |= given
        return [_to_memory(r) for r in fresh], json.dumps([last, sorted(under)])

    async def get_memories(self, ids: Sequence[str]) -> list[Memory]:
        wanted = kit.clean_ids(ids)
        if not wanted:
            return []
        by_id = {r["id"]: r for r in await self._all()}
        return [_to_memory(by_id[i]) for i in wanted if i in by_id]

    async def neighbors(
        self,
        node_ids: Sequence[str],
        edge_types: Sequence[str] | None = None,
        hops: int = 1,
        limit: int = 50,
    ) -> list[Neighbor]:
        """Memories sharing the entity_name, the nearest in event time first."""
        walk = kit.walk_request(node_ids, edge_types, hops, limit, known=("entity",))
        if walk is None:
            return []
        rows = await self._all()
        by_id = {r["id"]: r for r in rows}
        by_entity: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            if row.get("entity_name"):
                by_entity.setdefault(str(row["entity_name"]).casefold(), []).append(row)

        def steps(memory: Memory) -> list[kit.Step]:
            key = str(by_id[memory.id].get("entity_name") or "").casefold()
            sharers = [_to_memory(r) for r in by_entity.get(key, [])] if key else []
            nearest = kit.by_time_distance(sharers, memory.created_at, undated_first=True)
            return [(m, "entity", kit.SHARED_ENTITY_WEIGHT) for m in nearest]

        start = {s: _to_memory(by_id[s]) for s in walk.seeds if s in by_id}
        return kit.walk_in_order(walk, start, steps)

    async def known_entities(self, limit: int = 500) -> list[str]:
        counts: dict[str, int] = {}
        for row in await self._all():
            name = row.get("entity_name")
            if isinstance(name, str) and name:
                counts[name] = counts.get(name, 0) + 1
        return sorted(counts, key=lambda n: (-counts[n], n.casefold()))[: max(limit, 0)]

    # ------------------------------------------------------------------ writing

    async def write(self, memory: NewMemory) -> WriteOutcome:
        self._export = None
        supersedes = memory.metadata.get(SUPERSEDES_KEY)  # the orchestrator's own key only
        if isinstance(supersedes, str) and supersedes:
            args: dict[str, Any] = {
                "id": supersedes,
                "supersede": True,
                "new_content": memory.content,
            }
            try:
                done = await self.server.call("memory_update", args)
            except ToolError as exc:
                raise BackendError(str(exc)) from exc
            new_id = str(done.get("new_id") or done.get("updated_id") or supersedes)
            return WriteOutcome(
                id=new_id,
                action=WriteAction.UPDATED,
                existing_id=supersedes,
                detail=f"supersedes {supersedes}",
            )
        args = self._add_args(memory)
        try:
            done = await self.server.call("memory_add", args)
        except ToolError as exc:
            raise BackendError(str(exc)) from exc
        if not isinstance(done, dict) or "id" not in done:
            raise BackendError(f"{NAME}: memory_add answered {done!r}")
        created = done.get("created", True)
        action = WriteAction.ADDED if created else WriteAction.SKIPPED
        existing = None if created else str(done["id"])
        return WriteOutcome(id=str(done["id"]), action=action, existing_id=existing, detail="")

    def _add_args(self, memory: NewMemory) -> dict[str, Any]:
        args: dict[str, Any] = {"content": memory.content, "layer": memory.type.value}
        if memory.entities:
            args["entity_name"] = memory.entities[0]
        if memory.created_at is not None:
            args["event_at"] = kit.utc_text(memory.created_at)
        if memory.importance is not None:
            args["importance"] = memory.importance
        if memory.confidence is not None:
            args["confidence"] = max(memory.confidence, 0.01)
        if memory.source:
            args["source"] = memory.source
        if self.scope:
            args["scope"] = self.scope
        meta: dict[str, Any] = {
            k: v for k, v in memory.metadata.items() if k != "title" and not own_key(k)
        }
        if memory.tags:
            meta["tags"] = list(memory.tags)
        if len(memory.entities) > 1:
            meta["entities"] = list(memory.entities)
        if meta:
            args["meta"] = meta
        title = memory.metadata.get("title")
        if isinstance(title, str) and title:
            args["title"] = title
        return args

    async def write_many(self, memories: Sequence[NewMemory]) -> list[WriteOutcome]:
        return [await self.write(m) for m in memories]  # no bulk add over MCP

    async def link(
        self,
        source_id: str,
        target_id: str,
        relation: str,
        weight: float = 1.0,
        meta: dict[str, MetaValue] | None = None,
    ) -> Edge:
        raise CapabilityMissing(f"{NAME} has no edges (neighbours are shared entity names)")

    async def forget(self, memory_id: str) -> bool:
        if not isinstance(memory_id, str) or not memory_id:
            return False
        self._export = None
        try:
            await self.server.call("memory_delete", {"id": memory_id})
            return True
        except ToolError as exc:
            message = str(exc)
            if "not found" in message.casefold():
                return False
            if "memories_vec" not in message:
                raise BackendError(message) from exc
        # 1.3.0 deletes the row, then fails on the absent vector table: check which it was.
        try:
            await self.server.call("memory_inspect", {"id": memory_id}, read=True)
        except ToolError as exc:
            if "not found" in str(exc).casefold():
                return True
            raise BackendError(str(exc)) from exc
        self._forget_fallback = True
        try:
            await self.server.call(
                "memory_update", {"id": memory_id, "confidence": _FORGOTTEN, "importance": 0.0}
            )
        except ToolError as exc:
            if "not found" in str(exc).casefold():
                return False
            raise BackendError(str(exc)) from exc
        return True

    # ------------------------------------------------------------------ lifecycle

    async def health(self) -> list[HealthCheck]:
        async def probe() -> tuple[Status, str]:
            found = await self.server.call("memory_health", {}, read=True)
            state = found.get("status") if isinstance(found, dict) else None
            stats = found.get("stats", {}) if isinstance(found, dict) else {}
            restarts = max(self.client.starts - 1, 0)
            detail = (
                f"{state}; {stats.get('total_active', '?')} active memories; restarts {restarts}"
            )
            return (Status.OK if state == "healthy" else Status.DEGRADED), detail

        return await self.server.health(probe)

    async def close(self) -> None:
        await self.server.close()


def from_settings(settings: Settings) -> MnemonMcpBackend:
    """The registry's factory: `[mnemon_mcp]` settings. Starts no process."""
    section = settings.mnemon_mcp
    db = section.path or settings.data_dir / "mnemon-mcp.db"
    return MnemonMcpBackend(db, scope=section.scope, **server_options(section))

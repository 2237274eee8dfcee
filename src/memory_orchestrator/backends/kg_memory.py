"""The MCP reference knowledge-graph server (npm `@modelcontextprotocol/server-memory`).

The store behind the Memory Fabric skill: entities (name, entityType, observations) and
relations (from, to, relationType) in one JSONL file (`MEMORY_FILE_PATH`, absolute).

Mapping (one memory per observation, with its entity):
- a memory is one observation of one entity; its id is `kg_` + a hash of (entity, observation),
  so ids are stable across processes and need no storage;
- `entities[0]` is the entity the observation is added to (created with entityType = the memory
  type when new; "notes" when the memory names no entity); further entities are created too
  and joined to it by a `mentions` relation;
- `created_at` is kept as a "[YYYY-MM-DD HH:MM] " prefix of the observation (the server has no
  time field), parsed and stripped when read back;
- relations are graph edges: neighbours of a memory are the other observations of its entity
  (`entity`) and the observations of related entities (the relation type), nearest first.
Listing (`list_memories`): every observation from `read_graph`, in the file's order; the cursor
keeps, per entity, the last observation handed out.
Search: the server's `search_nodes` is one case-insensitive substring match of the whole query,
unranked and unlimited. The adapter sends each content word (cut to the part it shares with its
stem, so "hiking" also matches "hike") as its own `search_nodes`, unions the entities found and
scores each observation locally (IDF-weighted terms matched, a little for its entity's name).
Every call is serialized: the server rewrites its whole file per call and loses overlapping
writes.
Superseded memories (`supersede`): an observation cannot be changed in place (its id is its
text), so the mark is one more observation of the same entity, "superseded: OLD by NEW at
TIME", never read as a memory itself; the memory it names reads back with `superseded_by`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_orchestrator import text
from memory_orchestrator.backends import kit
from memory_orchestrator.backends.mcp_stdio import ToolError
from memory_orchestrator.backends.npm_server import NpmServer, server_options
from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import (
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
)

if TYPE_CHECKING:
    from memory_orchestrator.settings import Settings

PACKAGE = "@modelcontextprotocol/server-memory"
NAME = "kg-memory"
DEFAULT_ENTITY = "notes"
_TIME = re.compile(r"^\[(\d{4}-\d{2}-\d{2})(?: (\d{2}:\d{2}))?\] ")
_MARK = re.compile(r"^superseded: (kg_[0-9a-f]{16}) by (kg_[0-9a-f]{16}) at (\S+)$")
_RELATION_WEIGHT = 0.7


def observation_id(entity: str, observation: str) -> str:
    digest = hashlib.sha256(f"{entity}\x00{observation}".encode()).hexdigest()
    return f"kg_{digest[:16]}"


def search_terms(query: str) -> list[str]:
    """Substrings to send: each content word cut to the prefix it shares with its stem
    (at least 3 characters), lower-cased, without repeats."""
    out: list[str] = []
    for word in text.content_words(query) or text.words(query):
        word = word.casefold()
        stem = text.stem(word)
        n = 0
        while n < min(len(word), len(stem)) and word[n] == stem[n]:
            n += 1
        common = word[:n]
        if common.endswith("i") and len(common) > 3:
            common = common[:-1]  # Snowball's y -> i: "famil" matches "family" and "families"
        term = common if len(common) >= 3 else word
        if term and term not in out:
            out.append(term)
    return out


def _now() -> datetime:
    return datetime.now(UTC)


def _stamp(when: datetime) -> str:
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("[%Y-%m-%d %H:%M] ")


@dataclass
class Graph:
    entities: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> entity
    relations: list[dict[str, str]] = field(default_factory=list)

    @classmethod
    def parse(cls, found: object) -> Graph:
        graph = cls()
        if not isinstance(found, dict):
            return graph
        for entity in found.get("entities") or []:
            if isinstance(entity, dict) and isinstance(entity.get("name"), str):
                graph.entities[entity["name"]] = entity
        graph.relations = [
            r
            for r in found.get("relations") or []
            if isinstance(r, dict)
            and isinstance(r.get("from"), str)
            and isinstance(r.get("to"), str)
        ]
        return graph

    def memories(self) -> dict[str, Memory]:
        return {
            m.id: m
            for entity in self.entities.values()
            for m in (_to_memory(entity, o) for o in _observations(entity))
        }


def _handed(cursor: str | None) -> dict[str, str]:
    """A listing cursor read back: entity name -> the last observation id handed out (an
    unreadable cursor starts over)."""
    try:
        found = json.loads(cursor) if cursor else {}
    except ValueError:
        return {}
    if not isinstance(found, dict):
        return {}
    return {str(k): v for k, v in found.items() if isinstance(v, str)}


def _observations(entity: dict[str, Any]) -> list[str]:
    """The entity's observations that are memories (supersede marks left out)."""
    return [
        o for o in entity.get("observations") or [] if isinstance(o, str) and not _MARK.match(o)
    ]


def _marks(entity: dict[str, Any]) -> dict[str, tuple[str, datetime | None]]:
    """old id -> (new id, when), from the entity's supersede marks (parsed once per read)."""
    cached = entity.get("\x00marks")
    if isinstance(cached, dict):
        return cached
    found: dict[str, tuple[str, datetime | None]] = {}
    for o in entity.get("observations") or []:
        match = _MARK.match(o) if isinstance(o, str) else None
        if match:
            found[match.group(1)] = (match.group(2), kit.parse_time(match.group(3)))
    entity["\x00marks"] = found
    return found


def _to_memory(entity: dict[str, Any], observation: str) -> Memory:
    name = str(entity["name"])
    kind_name = str(entity.get("entityType") or "")
    kind = (
        MemoryType(kind_name) if kind_name in MemoryType._value2member_map_ else MemoryType.SEMANTIC
    )
    content, when = observation, None
    match = _TIME.match(observation)
    if match:
        stamp = f"{match.group(1)}T{match.group(2) or '00:00'}:00+00:00"
        try:
            when = datetime.fromisoformat(stamp)
            content = observation[match.end() :]
        except ValueError:
            when = None
    mem_id = observation_id(name, observation)
    by, at = _marks(entity).get(mem_id, (None, None))
    return Memory(
        id=mem_id,
        content=content or observation,
        type=kind,
        entities=(name,) if name != DEFAULT_ENTITY else (),
        created_at=when,
        store=NAME,
        metadata={"entity": name, "entity_type": kind_name},
        superseded_by=by,
        superseded_at=at,
    )


class KgMemoryBackend:
    """A `MemoryBackend` over one server-memory process (see the module docstring)."""

    name = NAME
    capabilities = Capabilities(
        graph=True,
        timestamps=True,  # kept in the observation text by this adapter
        memory_types=False,
        bulk_write=False,
        link=True,
        time_filter=False,
        entity_filter=True,
        entity_index=True,
        soft_delete=False,
        delete=True,
        listing=True,  # from read_graph; see list_memories
        supersede=True,  # a mark observation on the old memory's entity
        edge_types=("entity", "mentions"),
    )
    notes: tuple[str, ...] = ()

    def __init__(
        self,
        memory_file: Path,
        *,
        script: Path | None = None,
        node: str | None = None,
        timeout_s: float = 10.0,
        native_search: bool = False,
    ) -> None:
        self.native_search = native_search
        self.memory_file = Path(memory_file).resolve()
        self.server = NpmServer(
            NAME,
            PACKAGE,
            self.memory_file,
            {"MEMORY_FILE_PATH": str(self.memory_file)},
            section="kg_memory",
            script=script,
            node=node,
            timeout_s=timeout_s,
            serialize=True,  # it loses overlapping writes
        )
        self.client = self.server.client  # the process, for tests and fault injection

    async def _graph(self) -> Graph:
        return Graph.parse(await self.server.call("read_graph", {}, read=True))

    # ------------------------------------------------------------------ reading

    async def search(
        self, query: str, top_k: int, filters: SearchFilters | None = None
    ) -> list[SearchHit]:
        if not isinstance(query, str) or top_k < 1:
            return []
        if self.native_search:
            return await self._native_search(query, top_k)
        terms = search_terms(query)
        if not terms:
            return []
        found: dict[str, dict[str, Any]] = {}
        for term in terms:
            result = Graph.parse(await self.server.call("search_nodes", {"query": term}, read=True))
            found.update(result.entities)
        wanted = (
            {e.casefold() for e in filters.entity_ids} if filters and filters.entity_ids else None
        )
        rows = [
            (entity, obs)
            for entity in found.values()
            if wanted is None or str(entity["name"]).casefold() in wanted
            for obs in _observations(entity)
        ]
        # Local score: IDF of each term over the observations found, matched in the
        # observation; a term matched only by the entity's name counts for a third.
        df = {t: sum(t in o.casefold() for _, o in rows) for t in terms}
        total = max(len(rows), 1)
        scored: list[tuple[float, Memory]] = []
        for entity, obs in rows:
            low, name = obs.casefold(), str(entity["name"]).casefold()
            score = 0.0
            for t in terms:
                idf = math.log(1 + total / (1 + df[t]))
                if t in low:
                    score += idf
                elif t in name:
                    score += idf / 3
            if score > 0:
                scored.append((score, _to_memory(entity, obs)))
        span = filters.time_range if filters else None
        if span is not None:
            scored = [
                (s, m) for s, m in scored if m.created_at is None or span.contains(m.created_at)
            ]
        scored.sort(key=lambda sm: (-sm[0], sm[1].id))
        return [
            SearchHit(memory=m, rank=n, score=round(s, 6))
            for n, (s, m) in enumerate(scored[:top_k], 1)
        ]

    async def _native_search(self, query: str, top_k: int) -> list[SearchHit]:
        """What a client of the bare server gets: one `search_nodes` of the whole query; the
        observations of the entities it matched, those holding the query first, else in file
        order (the server does not rank)."""
        if not query.strip():
            return []
        found = Graph.parse(await self.server.call("search_nodes", {"query": query}, read=True))
        needle = query.casefold()
        rows = [(e, o) for e in found.entities.values() for o in _observations(e)]
        rows.sort(key=lambda eo: needle not in eo[1].casefold())
        return [
            SearchHit(memory=_to_memory(e, o), rank=n, score=1.0 / n)
            for n, (e, o) in enumerate(rows[:top_k], 1)
        ]

    async def get_memories(self, ids: Sequence[str]) -> list[Memory]:
        wanted = kit.clean_ids(ids)
        if not wanted:
            return []
        memories = (await self._graph()).memories()
        return [memories[i] for i in wanted if i in memories]

    async def list_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[Memory], str | None]:
        """Every observation (`EnumerableBackend`), from `read_graph`: entities in the file's
        order, each one's observations in theirs. The server appends a new entity at the end
        and a new observation at the end of its entity, so the cursor names, per entity, the
        last observation handed out: what comes after it is new. An entity whose last handed
        observation was deleted is listed again from its start (nothing is skipped)."""
        graph = await self._graph()
        handed = {n: i for n, i in _handed(cursor).items() if n in graph.entities}
        page: list[Memory] = []
        for name, entity in graph.entities.items():
            observations = _observations(entity)
            ids = [observation_id(name, o) for o in observations]
            start = ids.index(handed[name]) + 1 if handed.get(name) in ids else 0
            for observation, mem_id in list(zip(observations, ids, strict=True))[start:]:
                if len(page) >= max(1, limit):
                    break
                page.append(_to_memory(entity, observation))
                handed[name] = mem_id
        if not page:
            return [], cursor
        return page, json.dumps(handed, ensure_ascii=False, separators=(",", ":"))

    async def neighbors(
        self,
        node_ids: Sequence[str],
        edge_types: Sequence[str] | None = None,
        hops: int = 1,
        limit: int = 50,
    ) -> list[Neighbor]:
        """The other observations of a memory's entity, and those of the entities related to
        it (relations first: they are the stronger edge)."""
        walk = kit.walk_request(node_ids, edge_types, hops, limit)
        if walk is None:
            return []
        graph = await self._graph()
        adjacent: dict[str, list[tuple[str, str]]] = {}  # entity -> (other entity, relation)
        for rel in graph.relations:
            kind = str(rel.get("relationType") or "related")
            adjacent.setdefault(rel["from"], []).append((rel["to"], kind))
            adjacent.setdefault(rel["to"], []).append((rel["from"], kind))

        def steps(memory: Memory) -> Iterator[kit.Step]:
            entity = str(memory.metadata.get("entity"))
            edges = [(entity, "entity", kit.SHARED_ENTITY_WEIGHT)]
            edges += [(other, kind, _RELATION_WEIGHT) for other, kind in adjacent.get(entity, [])]
            edges.sort(key=lambda s: -s[2])
            for other_entity, kind, weight in edges:
                node = graph.entities.get(other_entity)
                if node is None or (walk.allowed is not None and kind not in walk.allowed):
                    continue
                for obs in _observations(node):
                    yield _to_memory(node, obs), kind, weight

        return kit.walk_in_order(walk, graph.memories(), steps)

    async def known_entities(self, limit: int = 500) -> list[str]:
        graph = await self._graph()
        names = [n for n in graph.entities if n != DEFAULT_ENTITY]
        names.sort(key=lambda n: (-len(_observations(graph.entities[n])), n.casefold()))
        return names[: max(limit, 0)]

    # ------------------------------------------------------------------ writing

    async def write(self, memory: NewMemory) -> WriteOutcome:
        entity = memory.entities[0] if memory.entities else DEFAULT_ENTITY
        prefix = _stamp(memory.created_at) if memory.created_at is not None else ""
        observation = prefix + memory.content
        mem_id = observation_id(entity, observation)
        kind = memory.type.value if memory.entities else "notes"
        new = [{"name": entity, "entityType": kind, "observations": [observation]}]
        new += [
            {"name": other, "entityType": "entity", "observations": []}
            for other in memory.entities[1:]
        ]
        try:
            created = await self.server.call("create_entities", {"entities": new})
            names = {e.get("name") for e in (created or {}).get("entities", [])}
            if entity not in names:  # it existed: add the observation to it
                added = await self.server.call(
                    "add_observations",
                    {"observations": [{"entityName": entity, "contents": [observation]}]},
                )
                results = (added or {}).get("results") or [{}]
                if not results[0].get("addedObservations"):
                    if memory.created_at is None and await self._corrected(mem_id):
                        # a reversal to a corrected value: the same text again, dated now
                        return await self.write(memory.model_copy(update={"created_at": _now()}))
                    return WriteOutcome(
                        id=mem_id,
                        action=WriteAction.SKIPPED,
                        existing_id=mem_id,
                        detail=f"{entity} already has this observation",
                    )
            if memory.entities[1:]:
                relations = [
                    {"from": entity, "to": other, "relationType": "mentions"}
                    for other in memory.entities[1:]
                    if other != entity
                ]
                await self.server.call("create_relations", {"relations": relations})
        except ToolError as exc:
            raise BackendError(str(exc)) from exc
        return WriteOutcome(id=mem_id, action=WriteAction.ADDED, detail=f"observation of {entity}")

    async def write_many(self, memories: Sequence[NewMemory]) -> list[WriteOutcome]:
        return [await self.write(m) for m in memories]

    async def link(
        self,
        source_id: str,
        target_id: str,
        relation: str,
        weight: float = 1.0,
        meta: dict[str, MetaValue] | None = None,
    ) -> Edge:
        """A relation between the two memories' entities (the graph has no memory-level edge)."""
        edge = kit.checked_edge(source_id, target_id, relation, weight, meta)
        memories = (await self._graph()).memories()
        kit.require_known([source_id, target_id], memories)
        source = str(memories[source_id].metadata["entity"])
        target = str(memories[target_id].metadata["entity"])
        if source != target:
            rel = {"from": source, "to": target, "relationType": edge.type}
            await self.server.call("create_relations", {"relations": [rel]})
        return edge

    async def _corrected(self, mem_id: str) -> bool:
        found = (await self._graph()).memories().get(mem_id)
        return found is not None and found.superseded_by is not None

    async def supersede(self, old_id: str, new_id: str) -> None:
        """Adds the mark "superseded: OLD by NEW at TIME" to the old memory's entity (TIME:
        the new memory's, else now)."""
        kit.checked_edge(new_id, old_id, "supersedes")
        memories = (await self._graph()).memories()
        kit.require_known([old_id, new_id], memories)
        when = memories[new_id].created_at or datetime.now(UTC)
        mark = f"superseded: {old_id} by {new_id} at {kit.utc_text(when)}"
        entity = str(memories[old_id].metadata["entity"])
        try:
            await self.server.call(
                "add_observations", {"observations": [{"entityName": entity, "contents": [mark]}]}
            )
        except ToolError as exc:
            raise BackendError(str(exc)) from exc

    async def forget(self, memory_id: str) -> bool:
        """Deletes the observation (the server has no soft delete)."""
        if not isinstance(memory_id, str) or not memory_id:
            return False
        graph = await self._graph()
        for entity in graph.entities.values():
            for obs in _observations(entity):
                if observation_id(str(entity["name"]), obs) == memory_id:
                    deletion = {"entityName": entity["name"], "observations": [obs]}
                    await self.server.call("delete_observations", {"deletions": [deletion]})
                    return True
        return False

    # ------------------------------------------------------------------ lifecycle

    async def health(self) -> list[HealthCheck]:
        async def probe() -> tuple[Status, str]:
            graph = await self._graph()
            observations = sum(len(_observations(e)) for e in graph.entities.values())
            detail = (
                f"{len(graph.entities)} entities, {observations} observations,"
                f" {len(graph.relations)} relations in {self.memory_file}"
            )
            return Status.OK, detail

        return await self.server.health(probe)

    async def close(self) -> None:
        await self.server.close()


def from_settings(settings: Settings) -> KgMemoryBackend:
    """The registry's factory: `[kg_memory]` settings. Starts no process."""
    section = settings.kg_memory
    path = section.path or settings.data_dir / "kg-memory.jsonl"
    return KgMemoryBackend(path, **server_options(section))

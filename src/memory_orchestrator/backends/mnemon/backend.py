"""The `MnemonBackend`: Mnemon behind `MemoryBackend`, through its `mnemon` CLI and, for
reads, its store file (see the package docstring for what each operation runs)."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from memory_orchestrator.backends import kit
from memory_orchestrator.backends.mnemon import store_file
from memory_orchestrator.backends.mnemon.features import Features, MnemonVersion
from memory_orchestrator.backends.mnemon.health import health_checks
from memory_orchestrator.backends.mnemon.mapping import (
    CATEGORIES_FOR,
    NATIVE_EDGES,
    RELATIONS,
    Json,
    category_and_tags,
    check_new,
    has_signal,
    import_row,
    importance_out,
    linked_edge,
    normalized,
    outcome,
    recall_results,
    related_neighbors,
    require_id,
    to_memory,
)
from memory_orchestrator.backends.mnemon.process import Cached, MnemonRunner
from memory_orchestrator.backends.mnemon.store_file import (
    StoreFile,
    edge_between,
    entity_names,
    list_page,
    locate,
    rows_by_id,
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
    WriteOutcome,
)
from memory_orchestrator.settings import MnemonSettings

if TYPE_CHECKING:
    from memory_orchestrator.settings import Settings

T = TypeVar("T")

WALK_EDGES = frozenset(NATIVE_EDGES[:4])  # what `related` follows without --edge
NOT_FOUND = ("no rows in result set", "not found")
IMPORT_CHUNK = 1000


class MnemonBackend:
    """A `MemoryBackend` over the `mnemon` CLI and its store file (see the package docstring).

    `process_calls` counts process starts (`calls_by_command` per command); `notes` lists the
    fallbacks in effect (an older build without a command, a store file this adapter cannot
    read), for traces and health."""

    name = "mnemon"
    capabilities = Capabilities(
        graph=True,
        timestamps=True,
        memory_types=True,  # categories + a type tag; filtered by --cat or here
        bulk_write=True,
        link=True,
        time_filter=False,  # recall has no time window
        entity_filter=False,  # recall has no entity filter
        entity_index=True,
        soft_delete=True,
        listing=True,  # from the store file; off with direct_reads = false
        edge_types=NATIVE_EDGES,
    )

    def __init__(self, settings: MnemonSettings | None = None) -> None:
        self.settings = settings or MnemonSettings()
        if not self.settings.direct_reads:  # the CLI has no listing that resumes
            self.capabilities = self.capabilities.model_copy(update={"listing": False})
        where = locate(self.settings)
        self.data_dir, self.store, self.store_error = where.data_dir, where.store, where.store_error
        self.db_path = where.db_path
        self._notes: dict[str, None] = {}
        self.runner = MnemonRunner(self.settings)
        self.features = Features(self.runner, self.settings.cache_ttl_s, self._note)
        self.file = StoreFile(self.db_path, enabled=self.settings.direct_reads, note=self._note)
        self._status = Cached(self._fetch_status, self.settings.cache_ttl_s)

    @property
    def process_calls(self) -> int:
        return self.runner.process_calls

    @property
    def calls_by_command(self) -> Counter[str]:
        return self.runner.calls_by_command

    @property
    def notes(self) -> tuple[str, ...]:
        """Fallbacks in effect (older build, unreadable store file), one line each."""
        return tuple(self._notes)

    def _note(self, text: str) -> None:
        self._notes.setdefault(text, None)

    def _check_store(self) -> None:
        """An invalid store name stops every call before any process starts."""
        if self.store_error is not None:
            raise BackendError(self.store_error)

    def binary(self) -> Path:
        """Config, then `./.tools/bin/mnemon`, then PATH. Raises BackendError."""
        return self.runner.binary()

    # ------------------------------------------------------------------ running mnemon

    def argv(
        self,
        command: str,
        flags: Sequence[str] = (),
        positional: Sequence[str] = (),
        *,
        binary: str | None = None,
    ) -> list[str]:
        """`mnemon <global flags> <command> <flags> -- <positional>`, a list for exec (never a
        shell). Free text (queries, content, ids) is only ever positional, after `--`, so no
        text can be read as a flag. Raises BackendError when no binary is found."""
        argv = [binary or str(self.binary()), "--data-dir", str(self.data_dir)]
        argv += ["--store", self.store]
        if self.settings.readonly:
            argv.append("--readonly")
        if self.settings.embed_model:
            argv += ["--embed-model", self.settings.embed_model]
        return [*argv, command, *flags, "--", *positional]

    async def _json(
        self,
        command: str,
        flags: Sequence[str] = (),
        positional: Sequence[str] = (),
        *,
        write: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """`mnemon ... <command>` (see `argv`), its JSON output. Raises BackendError."""
        self._check_store()
        argv = self.argv(command, flags, positional)
        out = await self.runner.run(argv, command, store=self.db_path, write=write, timeout=timeout)
        try:
            return normalized(json.loads(out))
        except ValueError as exc:
            head = out.strip()[:200]
            raise BackendError(f"mnemon {command} printed no valid JSON ({exc}): {head!r}") from exc

    @staticmethod
    async def _first(outcomes: Awaitable[list[WriteOutcome]]) -> WriteOutcome:
        return (await outcomes)[0]

    async def version(self) -> MnemonVersion:
        """`mnemon --version`, cached for `cache_ttl_s`."""
        return await self.features.version()

    async def status(self, *, fresh: bool = False) -> Json:
        """`mnemon status`, cached for `cache_ttl_s` (writes clear it)."""
        return await self._status.get(fresh=fresh)

    async def _fetch_status(self) -> Json:
        data = await self._json("status")
        if not isinstance(data, dict):
            raise BackendError(f"mnemon status printed {type(data).__name__}, not an object")
        return data

    async def _direct(self, read: Callable[[sqlite3.Connection | None], T]) -> T | None:
        """`read` on the store file (see `StoreFile.read`); None: read through the CLI."""
        self._check_store()
        return await self.file.read(read)

    async def direct_reads_ok(self) -> str:
        """Whether reads go to the store file (for health); NoDirectRead says why not."""
        if self.file.enabled and self.store_error is not None:
            raise BackendError(self.store_error)
        return await self.file.probe()

    # ------------------------------------------------------------------ reading

    async def search(
        self, query: str, top_k: int, filters: SearchFilters | None = None
    ) -> list[SearchHit]:
        text = " ".join(query.replace("\x00", " ").split()) if isinstance(query, str) else ""
        if not text or top_k < 1:
            return []
        self._check_store()
        types = set(filters.memory_types) if filters is not None else set()
        categories = set().union(*(CATEGORIES_FOR[t] for t in types)) if types else set()
        over = bool(types) and len(categories) != 1
        flags = ["--limit", str(min(top_k * 3, 300) if over else top_k)]
        if len(categories) == 1:
            flags += ["--cat", next(iter(categories))]
        data = await self.features.or_else(
            "verbose",
            "recall prints its full shape by default",
            lambda: self._json("recall", [*flags, "--verbose"], [text]),
            lambda: self._json("recall", flags, [text]),
        )
        try:
            results = recall_results(data)
        except BackendError as exc:
            self._note(f"search: {exc}")
            raise
        hits = []
        for result in results:
            if not has_signal(result):
                continue  # a recency anchor, or reached only by walking from one
            memory = to_memory(result["insight"], superseded=bool(result.get("superseded")))
            if types and memory.type not in types:
                continue
            score = result.get("score")
            hits.append((memory, float(score) if isinstance(score, int | float) else 0.0))
        return [
            SearchHit(memory=memory, rank=rank, score=score)
            for rank, (memory, score) in enumerate(hits[:top_k], start=1)
        ]

    async def get_memories(self, ids: Sequence[str]) -> list[Memory]:
        wanted = kit.clean_ids(ids, argv_safe=True)
        if not wanted:
            return []
        found = await self._direct(lambda conn: rows_by_id(conn, wanted))
        if found is None:
            found = await self._get_by_cli(wanted)
        return [to_memory(found[i]) for i in wanted if i in found]

    async def _get_by_cli(self, wanted: list[str]) -> dict[str, Json]:
        """`show` per id in parallel; one `recall --basic` listing on builds without it."""
        found: dict[str, Json] = {}
        refused: list[BackendError] = []

        async def one(memory_id: str) -> None:
            try:
                item = await self._json("show", (), [memory_id])
            except BackendError as exc:
                if any(marker in str(exc) for marker in NOT_FOUND):
                    return
                if self.features.missing("show", exc, "get_memories lists with `recall --basic`"):
                    refused.append(exc)
                    return
                raise
            found[memory_id] = require_id(item, "show")

        if self.features.has("show"):
            async with anyio.create_task_group() as group:
                for memory_id in wanted:
                    group.start_soon(one, memory_id)
            if not refused:
                return found
        total = int((await self.status()).get("total_insights") or 0)
        listing = await self._json("recall", ["--basic", "--limit", str(max(total, 1))], [""])
        wanted_set = set(wanted)
        for item in listing if isinstance(listing, list) else []:
            if require_id(item, "recall --basic")["id"] in wanted_set:
                found[str(item["id"])] = item
        return found

    async def list_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[Memory], str | None]:
        """Every live memory in the order Mnemon inserted it (`EnumerableBackend`), read-only
        from the store file; the cursor is the last row handed out (`list_page`). When the file
        is not read directly (direct reads off, a schema this adapter does not know) nothing
        is listed, and `notes` says why."""
        rowid, _, mem_id = (cursor or "").partition(":")
        anchor = (int(rowid), mem_id) if rowid.isdigit() and mem_id else None
        found = await self._direct(lambda conn: list_page(conn, anchor, max(1, limit)))
        if found is None:
            self._note("list_memories: nothing listed, the store file is not read directly")
            return [], cursor
        rows, last = found
        if not rows or last is None:
            return [], cursor
        return [to_memory(r) for r in rows], f"{last[0]}:{last[1]}"

    async def neighbors(
        self,
        node_ids: Sequence[str],
        edge_types: Sequence[str] | None = None,
        hops: int = 1,
        limit: int = 50,
    ) -> list[Neighbor]:
        walk = kit.walk_request(
            node_ids, edge_types, hops, limit, known=NATIVE_EDGES, argv_safe=True
        )
        if walk is None:
            return []
        found = await self._direct(lambda conn: store_file.walk(conn, walk))
        if found is not None:
            return found
        return await self._related(walk.seeds, walk.allowed, hops, limit)

    async def _related(
        self, seeds: list[str], allowed: frozenset[str] | None, hops: int, limit: int
    ) -> list[Neighbor]:
        """`related` per seed: breadth-first, both directions, no limit; it prints neither
        the edge weight nor the node a neighbour was reached through."""
        self._note("neighbors via `mnemon related`: no edge weights (1.0 is used), no timestamps")
        flags = ["--depth", str(hops)]
        if allowed is not None and len(allowed) == 1:
            flags += ["--edge", next(iter(allowed))]
        elif allowed is not None and not allowed.issuperset(WALK_EDGES):
            self._note("`related` takes one --edge type; other types are filtered after the walk")
        per_seed: dict[str, list[Json]] = {}

        async def one(seed: str) -> None:
            try:
                data = await self._json("related", flags, [seed])
            except BackendError as exc:
                if any(marker in str(exc) for marker in NOT_FOUND):
                    return
                raise
            per_seed[seed] = (
                [r for r in data if isinstance(r, dict)] if isinstance(data, list) else []
            )

        async with anyio.create_task_group() as group:
            for seed in seeds:
                group.start_soon(one, seed)
        return related_neighbors(per_seed, seeds, allowed)[:limit]

    async def known_entities(self, limit: int = 500) -> list[str]:
        found = await self._direct(lambda conn: entity_names(conn, max(limit, 0)))
        if found is not None:
            return found
        top = (await self.status()).get("top_entities") or []
        names = [e.get("entity") for e in top if isinstance(e, dict)]
        return [n for n in names if isinstance(n, str) and n][: max(limit, 0)]

    # ------------------------------------------------------------------ writing

    async def write(self, memory: NewMemory) -> WriteOutcome:
        self._check_store()
        check_new(memory)
        if memory.created_at is not None:  # `or_else` falls back where import is missing
            return await self.features.or_else(
                "import",
                "a memory's created_at is not kept (remember has no time flag)",
                lambda: self._first(self._import([memory])),
                lambda: self._remember(memory),
            )
        return await self._remember(memory)

    async def _remember(self, memory: NewMemory) -> WriteOutcome:
        category, tags = category_and_tags(memory)
        flags = ["--cat", category]
        if memory.importance is not None:
            flags += ["--imp", str(importance_out(memory.importance))]
        if tags:
            flags += ["--tags", ",".join(tags)]
        if memory.entities:
            flags += ["--entities", ",".join(memory.entities)]
        if memory.source:
            flags += ["--source", memory.source]
        text = [memory.content]
        if self.settings.entity_mode == "merge":
            data = await self._json("remember", flags, text, write=True)
        else:
            data = await self.features.or_else(
                "entity-mode",
                "Mnemon merges the entities it finds",
                lambda: self._json(
                    "remember",
                    [*flags, "--entity-mode", self.settings.entity_mode],
                    text,
                    write=True,
                ),
                lambda: self._json("remember", flags, text, write=True),
            )
        self._status.clear()
        if not isinstance(data, dict):
            raise BackendError("mnemon remember printed no JSON object")
        return outcome(data, "remember")

    async def write_many(self, memories: Sequence[NewMemory]) -> list[WriteOutcome]:
        self._check_store()
        batch = list(memories)
        for index, memory in enumerate(batch):
            check_new(memory, index)
        if not batch:
            return []

        async def imported() -> list[WriteOutcome]:
            outcomes: list[WriteOutcome] = []
            for start in range(0, len(batch), IMPORT_CHUNK):
                outcomes += await self._import(batch[start : start + IMPORT_CHUNK])
            return outcomes

        async def one_by_one() -> list[WriteOutcome]:
            return [await self.write(m) for m in batch]

        return await self.features.or_else(
            "import", "write_many runs one remember per memory", imported, one_by_one
        )

    async def _import(self, batch: list[NewMemory]) -> list[WriteOutcome]:
        draft = {"schema_version": "1", "insights": [import_row(m) for m in batch]}
        with tempfile.TemporaryDirectory(prefix="mnemon-import-") as folder:
            path = Path(folder) / "draft.json"
            path.write_text(json.dumps(draft, ensure_ascii=False), encoding="utf-8")
            timeout = self.settings.timeout_s + 0.05 * len(batch)
            data = await self._json("import", (), [str(path)], write=True, timeout=timeout)
        self._status.clear()
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            raise BackendError("mnemon import printed no result list")
        rows = sorted(
            (r for r in data["results"] if isinstance(r, dict)), key=lambda r: r.get("index", 0)
        )
        failed = [r for r in rows if r.get("error") or not r.get("action")]
        if failed or len(rows) != len(batch):
            first = failed[0].get("error") if failed else "result rows missing"
            raise BackendError(
                f"mnemon import: {len(failed) or len(batch) - len(rows)} of {len(batch)}"
                f" memories failed (first: {first}); the others were stored"
            )
        return [outcome(r, "import") for r in rows]

    async def link(
        self,
        source_id: str,
        target_id: str,
        relation: str,
        weight: float = 1.0,
        meta: dict[str, MetaValue] | None = None,
    ) -> Edge:
        self._check_store()
        relation = kit.checked_edge(source_id, target_id, relation, weight, argv_safe=True).type
        kind = RELATIONS.get(relation, relation if relation in NATIVE_EDGES else "semantic")
        metadata = {k: str(v) for k, v in (meta or {}).items() if v is not None}
        if kind != relation:
            metadata["relation"] = relation
        if kind == "supersedes" and not self.features.has("supersedes"):
            kind = "semantic"
        if relation not in NATIVE_EDGES:
            existing = await self._direct(lambda c: edge_between(c, source_id, target_id, kind))
            if isinstance(existing, Edge):
                return existing
        extra = ["--weight", f"{weight:.6g}"]
        if metadata:
            extra += ["--meta", json.dumps(metadata, ensure_ascii=False)]
        ends = [source_id, target_id]
        if kind == "supersedes":
            data = await self.features.or_else(
                "supersedes",
                "`update` links are made as `semantic` edges",
                lambda: self._json("link", ["--type", "supersedes", *extra], ends, write=True),
                lambda: self._json("link", ["--type", "semantic", *extra], ends, write=True),
            )
            kind = "supersedes" if self.features.has("supersedes") else "semantic"
        else:
            data = await self._json("link", ["--type", kind, *extra], ends, write=True)
        self._status.clear()
        return linked_edge(data, source_id, target_id, kind, weight)

    async def forget(self, memory_id: str) -> bool:
        if not kit.clean_ids([memory_id], argv_safe=True):
            return False
        try:
            await self._json("forget", (), [memory_id], write=True)
        except BackendError as exc:
            if "not found or already deleted" in str(exc):
                return False
            raise
        self._status.clear()
        return True

    # ------------------------------------------------------------------ lifecycle

    async def health(self) -> list[HealthCheck]:
        return await health_checks(self)

    async def close(self) -> None:
        """Nothing stays open between calls."""


def from_settings(settings: Settings) -> MnemonBackend:
    """The registry's factory: `[mnemon]` settings. Starts no process."""
    return MnemonBackend(settings.mnemon)

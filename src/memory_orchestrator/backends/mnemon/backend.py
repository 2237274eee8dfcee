"""The `MnemonBackend`: Mnemon behind `MemoryBackend`, through its `mnemon` CLI and, for
reads, its store file (see the package docstring for what each operation runs)."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
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
    Json,
    has_signal,
    normalized,
    recall_results,
    related_neighbors,
    require_id,
    to_memory,
)
from memory_orchestrator.backends.mnemon.process import Cached, MnemonRunner
from memory_orchestrator.backends.mnemon.readonly import ReadOnly, refusal
from memory_orchestrator.backends.mnemon.store_file import (
    Anchor,
    StoreFile,
    entity_names,
    list_page,
    locate,
    rows_by_id,
)
from memory_orchestrator.backends.mnemon.writing import Writes
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
        delete=True,
        listing=True,  # from the store file; off with direct_reads = false
        supersede=True,  # marks read from the store file; off with direct_reads = false
        export=True,  # list_edges from the store file; off with direct_reads = false
        backup=True,  # the store file through SQLite's online backup API
        edge_types=NATIVE_EDGES,
    )

    def __init__(
        self, settings: MnemonSettings | None = None, *, cache_ttl_s: float = 30.0
    ) -> None:
        self.settings = settings or MnemonSettings()
        if not self.settings.direct_reads:  # the CLI has no listing that resumes
            update = {"listing": False, "supersede": False, "export": False}
            self.capabilities = self.capabilities.model_copy(update=update)
        where = locate(self.settings)
        self.data_dir, self.store, self.store_error = where.data_dir, where.store, where.store_error
        self.db_path = where.db_path
        self._notes: dict[str, None] = {}
        self.runner = MnemonRunner(self.settings)
        self.features = Features(self.runner, cache_ttl_s, self.note)
        self.file = StoreFile(self.db_path, enabled=self.settings.direct_reads, note=self.note)
        self._status = Cached(self._fetch_status, cache_ttl_s)
        self.readonly = ReadOnly(self.runner, self.db_path, self.store, self.note)
        self.writes = Writes(self)

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

    def note(self, text: str) -> None:
        """Record a fallback in effect (`notes`), once."""
        self._notes.setdefault(text, None)

    def written(self) -> None:
        """A write landed: the cached `status` is stale."""
        self._status.clear()

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
        data_dir: Path | None = None,
        readonly: bool | None = None,
    ) -> list[str]:
        """`mnemon <global flags> <command> <flags> -- <positional>`, a list for exec (never a
        shell). Free text (queries, content, ids) is only ever positional, after `--`, so no
        text can be read as a flag. Raises BackendError when no binary is found."""
        argv = [binary or str(self.binary()), "--data-dir", str(data_dir or self.data_dir)]
        argv += ["--store", self.store]
        if self.settings.readonly if readonly is None else readonly:
            argv.append("--readonly")
        return [*argv, command, *flags, "--", *positional]

    async def call(
        self,
        command: str,
        flags: Sequence[str] = (),
        positional: Sequence[str] = (),
        *,
        write: bool = False,
        timeout: float | None = None,
        held: bool = False,
    ) -> Any:
        """`mnemon ... <command>` (see `argv`), its JSON output (`held`: the caller holds the
        store's write lock). With `readonly`, a write is refused before any process and a
        read runs where `ReadOnly` says. Raises BackendError."""
        self._check_store()
        data_dir, readonly = self.data_dir, False
        if self.settings.readonly:
            if write:
                raise refusal(command)
            data_dir, readonly = await self.readonly.reads(self.data_dir)
        argv = self.argv(command, flags, positional, data_dir=data_dir, readonly=readonly)
        out = await self.runner.run(
            argv, command, store=self.db_path, write=write, timeout=timeout, held=held
        )
        try:
            return normalized(json.loads(out))
        except ValueError as exc:
            head = out.strip()[:200]
            raise BackendError(f"mnemon {command} printed no valid JSON ({exc}): {head!r}") from exc

    async def version(self) -> MnemonVersion:
        """`mnemon --version`, cached for `cache_ttl_s`."""
        return await self.features.version()

    async def status(self, *, fresh: bool = False) -> Json:
        """`mnemon status`, cached for `cache_ttl_s` (writes clear it)."""
        return await self._status.get(fresh=fresh)

    async def _fetch_status(self) -> Json:
        data = await self.call("status")
        if not isinstance(data, dict):
            raise BackendError(f"mnemon status printed {type(data).__name__}, not an object")
        return data

    async def direct(self, read: Callable[[sqlite3.Connection | None], T]) -> T | None:
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
            lambda: self.call("recall", [*flags, "--verbose"], [text]),
            lambda: self.call("recall", flags, [text]),
        )
        try:
            results = recall_results(data)
        except BackendError as exc:
            self.note(f"search: {exc}")
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
        marked = await self._marked([memory for memory, _ in hits[:top_k]])
        return [
            SearchHit(memory=memory, rank=rank, score=score)
            for rank, (memory, (_, score)) in enumerate(zip(marked, hits, strict=False), start=1)
        ]

    async def _marked(self, memories: list[Memory]) -> list[Memory]:
        """`memories` with the corrections the store file records (`store_file.marked`;
        nothing without direct reads)."""
        if not memories:
            return memories
        found = await self.direct(lambda conn: store_file.marked(conn, memories))
        return memories if found is None else found

    async def get_memories(self, ids: Sequence[str]) -> list[Memory]:
        wanted = kit.clean_ids(ids, argv_safe=True)
        if not wanted:
            return []

        def read(conn: sqlite3.Connection | None) -> list[Memory]:
            rows = rows_by_id(conn, wanted)
            return store_file.marked(conn, [to_memory(rows[i]) for i in wanted if i in rows])

        got = await self.direct(read)
        if got is not None:
            return got
        found = await self._get_by_cli(wanted)
        return [to_memory(found[i]) for i in wanted if i in found]

    async def _get_by_cli(self, wanted: list[str]) -> dict[str, Json]:
        """`show` per id in parallel (the first one alone until `show` has answered once: a
        build without it refuses one process, not one per id); one `recall --basic` listing
        on builds without it."""
        found: dict[str, Json] = {}
        refused: list[BackendError] = []

        async def one(memory_id: str) -> None:
            try:
                item = await self.call("show", (), [memory_id])
            except BackendError as exc:
                if any(marker in str(exc) for marker in NOT_FOUND):
                    self.features.saw("show")  # its answer for an unknown id
                    return
                if self.features.missing("show", exc, "get_memories lists with `recall --basic`"):
                    refused.append(exc)
                    return
                raise
            self.features.saw("show")
            found[memory_id] = require_id(item, "show")

        if self.features.has("show"):
            rest = wanted
            if not self.features.seen("show"):
                await one(wanted[0])
                rest = wanted[1:] if not refused else []
            async with anyio.create_task_group() as group:
                for memory_id in rest:
                    group.start_soon(one, memory_id)
            if not refused:
                return found
        total = int((await self.status()).get("total_insights") or 0)
        listing = await self.call("recall", ["--basic", "--limit", str(max(total, 1))], [""])
        wanted_set = set(wanted)
        for item in listing if isinstance(listing, list) else []:
            if require_id(item, "recall --basic")["id"] in wanted_set:
                found[str(item["id"])] = item
        return found

    async def list_edges(self, cursor: str | None, limit: int) -> tuple[list[Edge], str | None]:
        """Edges between live memories from the store file (`ExportingBackend`)."""
        found = await self.direct(lambda conn: store_file.edge_page(conn, cursor, limit))
        return found if found is not None else ([], cursor)

    async def backup(self, dest: Path) -> None:
        """A consistent copy of the store file (`BackingUpBackend`)."""
        self._check_store()
        await anyio.to_thread.run_sync(kit.sqlite_backup, self.db_path, dest)

    async def list_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[Memory], str | None]:
        """Every live memory in the order Mnemon inserted it (`EnumerableBackend`), read-only
        from the store file; the cursor is the last row handed out (`list_page`). When the file
        is not read directly (direct reads off, a schema this adapter does not know) nothing
        is listed, and `notes` says why."""
        rowid, _, mem_id = (cursor or "").partition(":")
        anchor = (int(rowid), mem_id) if rowid.isdigit() and mem_id else None

        def read(conn: sqlite3.Connection | None) -> tuple[list[Memory], Anchor | None]:
            rows, last = list_page(conn, anchor, max(1, limit))
            return store_file.marked(conn, [to_memory(r) for r in rows]), last

        found = await self.direct(read)
        if found is None:
            self.note("list_memories: nothing listed, the store file is not read directly")
            return [], cursor
        memories, last = found
        if not memories or last is None:
            return [], cursor
        return memories, f"{last[0]}:{last[1]}"

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

        def read(conn: sqlite3.Connection | None) -> list[Neighbor]:
            near = store_file.walk(conn, walk)
            marked = store_file.marked(conn, [n.memory for n in near])
            return [n.model_copy(update={"memory": m}) for n, m in zip(near, marked, strict=True)]

        found = await self.direct(read)
        if found is None:
            return await self._related(walk.seeds, walk.allowed, hops, limit)
        return found

    async def _related(
        self, seeds: list[str], allowed: frozenset[str] | None, hops: int, limit: int
    ) -> list[Neighbor]:
        """`related` per seed: breadth-first, both directions, no limit; it prints neither
        the edge weight nor the node a neighbour was reached through."""
        self.note("neighbors via `mnemon related`: no edge weights (1.0 is used), no timestamps")
        flags = ["--depth", str(hops)]
        if allowed is not None and len(allowed) == 1:
            flags += ["--edge", next(iter(allowed))]
        elif allowed is not None and not allowed.issuperset(WALK_EDGES):
            self.note("`related` takes one --edge type; other types are filtered after the walk")
        per_seed: dict[str, list[Json]] = {}

        async def one(seed: str) -> None:
            try:
                data = await self.call("related", flags, [seed])
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
        found = await self.direct(lambda conn: entity_names(conn, max(limit, 0)))
        if found is not None:
            return found
        top = (await self.status()).get("top_entities") or []
        names = [e.get("entity") for e in top if isinstance(e, dict)]
        return [n for n in names if isinstance(n, str) and n][: max(limit, 0)]

    # ------------------------------------------------------------------ writing

    async def write(self, memory: NewMemory) -> WriteOutcome:
        self._check_store()
        return await self.writes.write(memory)

    async def write_many(self, memories: Sequence[NewMemory]) -> list[WriteOutcome]:
        self._check_store()
        return await self.writes.write_many(memories)

    async def link(
        self,
        source_id: str,
        target_id: str,
        relation: str,
        weight: float = 1.0,
        meta: dict[str, MetaValue] | None = None,
    ) -> Edge:
        self._check_store()
        return await self.writes.link(source_id, target_id, relation, weight, meta)

    async def supersede(self, old_id: str, new_id: str) -> None:
        """Mark `old_id` corrected by `new_id` (`SupersedingBackend`; see `writing`): it stays
        in the store, and reads from the store file mark it `superseded_by`."""
        self._check_store()
        await self.writes.supersede(old_id, new_id)

    async def forget(self, memory_id: str) -> bool:
        if not kit.clean_ids([memory_id], argv_safe=True):
            return False
        try:
            await self.call("forget", (), [memory_id], write=True)
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
        """Nothing stays open between calls but a read-only snapshot, removed here."""
        self.readonly.close()


def from_settings(settings: Settings) -> MnemonBackend:
    """The registry's factory: `[mnemon]` settings, and `cache_ttl_s` for what the store says
    about itself. Starts no process."""
    return MnemonBackend(settings.mnemon, cache_ttl_s=settings.cache_ttl_s)

"""Mnemonic's store: a directory of markdown files with YAML frontmatter (MIF level 3).

No server: the adapter reads and writes the files (their format and the mapping to memories:
`mnemonic_files`). Every `*.memory.md` under the root is read (dot directories such as `.git`
and `.blackboard` are skipped).

Listing (`list_memories`): in the order this backend read each file (a changed file is read
anew, so it comes again).

Search: a small in-process index (stemmed terms, BM25) over the files, refreshed from the
file times at most every `RESCAN_S` seconds, and at once after this process writes. Neighbours:
explicit `relations` (either direction) and memories sharing an entity, nearest in time first.
`git_commit = true` commits every write and forget in the root (a repository is made when the
root is not one); git runs with list arguments, never a shell.

The folder is made when the store opens; afterwards a folder that is not there (moved,
deleted, unmounted, a file in its place) fails every call: a read with the reason (the
orchestrator's "not an empty memory" error), a write transiently (it is queued, and no new
folder is made behind the operator's back).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import anyio.to_thread
import yaml

from memory_orchestrator import text
from memory_orchestrator.backends import kit
from memory_orchestrator.backends.mnemonic_files import (
    NAME,
    SUFFIX,
    Doc,
    by_seq,
    digest,
    new_front,
    parse_doc,
    render,
    slug,
    split_frontmatter,
    unit,
)
from memory_orchestrator.errors import BackendError
from memory_orchestrator.filtering import matches
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
# How stale the index may be for files another program (an editor, git) changed: a rescan
# stats every file, so not on every call; this process's own writes refresh it at once.
RESCAN_S = 1.0
_K1, _B = 1.2, 0.75


class MnemonicBackend:
    """A `MemoryBackend` over a Mnemonic directory (see the module docstring)."""

    name = NAME
    capabilities = Capabilities(
        graph=True,
        timestamps=True,
        memory_types=True,
        bulk_write=False,
        link=True,
        time_filter=True,
        entity_filter=True,
        entity_index=True,
        soft_delete=False,
        delete=True,
        listing=True,  # in the order files were read; see list_memories
        supersede=True,  # frontmatter: superseded_by, temporal.valid_until
        edge_types=("entity", "related"),
    )
    notes: tuple[str, ...] = ()

    def __init__(
        self,
        root: Path,
        *,
        git_commit: bool = False,
        rescan_s: float = RESCAN_S,
        agent: str = "memory-orchestrator",
        make_parents: bool = True,
    ) -> None:
        self.root = Path(root).resolve()
        # The folder is made when the store is opened, as the embedded store makes its file;
        # once open, a folder that is not there is an error, never an empty memory. Its
        # parents only when they are ours (`make_parents`): a folder on a drive that is not
        # mounted is not made on the drive below.
        with contextlib.suppress(OSError):  # then every call says what is wrong
            self.root.mkdir(parents=make_parents, exist_ok=True)
        self.git_commit = git_commit
        self.rescan_s = rescan_s
        self.agent = agent
        self._lock = threading.RLock()
        self._docs: dict[Path, Doc] = {}
        self._by_id: dict[str, Doc] = {}
        self._df: dict[str, int] = {}
        self._by_digest: dict[str, str] = {}
        self._scanned = -math.inf
        self.skipped_files = 0
        self._sequence = itertools.count(1)
        self._token = uuid.uuid4().hex[:8]  # names this backend's cursors

    # ------------------------------------------------------------------ plumbing

    async def _run(self, fn: Callable[[], T]) -> T:
        def locked() -> T:
            with self._lock:
                try:
                    return fn()
                except OSError as exc:
                    raise BackendError(f"{NAME} {self.root}: {exc}") from exc

        return await anyio.to_thread.run_sync(locked, abandon_on_cancel=True)

    def _require_root(self, *, transient: bool = False) -> None:
        """BackendError when the folder is not there (moved, deleted, unmounted, or a file in
        its place): reading it as an empty memory would pass a broken store off as one."""
        if self.root.is_dir():
            return
        what = "is not a folder" if self.root.exists() else "does not exist"
        raise BackendError(
            f"{NAME} folder {self.root} {what} (moved, deleted or not mounted?): put it back,"
            " or set [mnemonic] path",
            transient=transient,
        )

    def _scan(self, force: bool = False) -> None:
        self._require_root()
        if not force and time.monotonic() - self._scanned < self.rescan_s:
            return
        seen: dict[Path, Doc] = {}
        skipped = 0
        for path in self._files():
            try:
                st = path.stat()
            except OSError:
                continue
            stamp = (st.st_mtime_ns, st.st_size)
            old = self._docs.get(path)
            if old is not None and old.stamp == stamp:
                seen[path] = old
                continue
            try:
                doc = self._parse(path, path.read_text(encoding="utf-8"), stamp)
            except (OSError, UnicodeDecodeError):
                doc = None
            if doc is None:
                skipped += 1
            else:
                seen[path] = doc
        if seen.keys() != self._docs.keys() or any(seen[p] is not self._docs[p] for p in seen):
            self._docs = seen
            self._reindex()
        self.skipped_files = skipped
        self._scanned = time.monotonic()

    def _parse(self, path: Path, raw: str, stamp: tuple[int, int]) -> Doc | None:
        """`parse_doc`, numbered: every file read anew (new, or changed) gets the next number."""
        doc = parse_doc(path, raw, stamp)
        if doc is not None:
            doc.seq = next(self._sequence)
        return doc

    def _files(self) -> list[Path]:
        out: list[Path] = []
        stack = [self.root]
        while stack:
            folder = stack.pop()
            try:
                entries = list(folder.iterdir())
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                if entry.is_dir():
                    stack.append(entry)
                elif entry.name.endswith(SUFFIX):
                    out.append(entry)
        return sorted(out)

    def _reindex(self) -> None:
        self._by_id = {}
        for doc in sorted(self._docs.values(), key=lambda d: d.path):
            self._by_id.setdefault(doc.memory.id, doc)
        df: dict[str, int] = {}
        for doc in self._by_id.values():
            for stem in doc.stems:
                df[stem] = df.get(stem, 0) + 1
        self._df = df
        self._by_digest = {}
        for doc in self._by_id.values():
            self._keep_digest(doc)

    def _keep_digest(self, doc: Doc) -> None:
        """The exact-duplicate index: a current memory wins over one a later one corrected."""
        held = self._by_id.get(self._by_digest.get(doc.digest, ""))
        if held is None or (held.memory.superseded_by and not doc.memory.superseded_by):
            self._by_digest[doc.digest] = doc.memory.id

    def _add_doc(self, doc: Doc) -> None:
        """Index one file this process wrote (incremental unless it replaces another)."""
        old = self._docs.get(doc.path)
        self._docs[doc.path] = doc
        if old is not None or doc.memory.id in self._by_id:
            self._reindex()
            return
        self._by_id[doc.memory.id] = doc
        self._keep_digest(doc)
        for stem in doc.stems:
            self._df[stem] = self._df.get(stem, 0) + 1

    # ------------------------------------------------------------------ reading

    async def search(
        self, query: str, top_k: int, filters: SearchFilters | None = None
    ) -> list[SearchHit]:
        if not isinstance(query, str) or top_k < 1:
            return []
        stems = list(dict.fromkeys(text.terms(query) or text.all_stems(query)))
        if not stems:
            return []
        return await self._run(lambda: self._search(stems, top_k, filters))

    def _search(
        self, stems: list[str], top_k: int, filters: SearchFilters | None
    ) -> list[SearchHit]:
        self._scan()
        docs = list(self._by_id.values())
        n = max(len(docs), 1)
        avg = sum(d.length for d in docs) / n if docs else 1.0
        idf = {
            s: math.log(1 + (n - self._df.get(s, 0) + 0.5) / (self._df.get(s, 0) + 0.5))
            for s in stems
        }
        scored: list[tuple[float, Memory]] = []
        for doc in docs:
            if not matches(doc.memory, filters):
                continue
            score = 0.0
            for s in stems:
                tf = doc.stems.get(s, 0)
                if tf:
                    norm = tf * (_K1 + 1) / (tf + _K1 * (1 - _B + _B * doc.length / avg))
                    score += idf[s] * norm
            if score > 0:
                scored.append((score, doc.memory))
        scored.sort(key=lambda sm: (-sm[0], sm[1].id))
        return [
            SearchHit(memory=m, rank=i, score=round(s, 6))
            for i, (s, m) in enumerate(scored[:top_k], 1)
        ]

    async def get_memories(self, ids: Sequence[str]) -> list[Memory]:
        wanted = kit.clean_ids(ids)

        def run() -> list[Memory]:
            self._scan()
            return [self._by_id[i].memory for i in wanted if i in self._by_id]

        return await self._run(run) if wanted else []

    async def list_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[Memory], str | None]:
        """Every memory (`EnumerableBackend`) in the order this backend read its file: a file
        new to it, or changed since (by this process or another, seen at the next rescan),
        is numbered anew, so it comes after the cursor whatever its time stamps say. The
        numbers belong to this backend object; a cursor from another one starts over."""
        token, _, number = (cursor or "").partition(":")
        after = int(number) if token == self._token and number.isdigit() else 0

        def run() -> tuple[list[Memory], str | None]:
            self._scan()
            fresh = sorted((d for d in self._by_id.values() if d.seq > after), key=by_seq)
            page = fresh[: max(1, limit)]
            if not page:
                return [], cursor
            return [d.memory for d in page], f"{self._token}:{page[-1].seq}"

        return await self._run(run)

    async def neighbors(
        self,
        node_ids: Sequence[str],
        edge_types: Sequence[str] | None = None,
        hops: int = 1,
        limit: int = 50,
    ) -> list[Neighbor]:
        walk = kit.walk_request(node_ids, edge_types, hops, limit)
        return [] if walk is None else await self._run(lambda: self._walk(walk))

    def _walk(self, walk: kit.Walk) -> list[Neighbor]:
        """Explicit relations (either direction, the strongest first), then memories sharing
        an entity (the nearest in time first)."""
        self._scan()
        allowed = walk.allowed
        edges: dict[str, list[tuple[str, str, float]]] = {}
        for doc in self._by_id.values():
            for rel in doc.relations:
                other, kind = str(rel["id"]), str(rel.get("type") or "related")
                weight = unit(rel.get("weight"))
                w = 1.0 if weight is None else weight
                edges.setdefault(doc.memory.id, []).append((other, kind, w))
                edges.setdefault(other, []).append((doc.memory.id, kind, w))
        by_entity: dict[str, list[Memory]] = {}
        for doc in self._by_id.values():
            for entity in doc.memory.entities:
                by_entity.setdefault(entity.casefold(), []).append(doc.memory)

        def steps(memory: Memory) -> list[kit.Step]:
            found = [
                (self._by_id[o].memory, k, w)
                for o, k, w in edges.get(memory.id, [])
                if o in self._by_id and (allowed is None or k in allowed)
            ]
            found.sort(key=lambda s: -s[2])
            if allowed is None or "entity" in allowed:
                sharers = {
                    m.id: m for e in memory.entities for m in by_entity.get(e.casefold(), [])
                }
                nearest = kit.by_time_distance(sharers.values(), memory.created_at)
                found += [(m, "entity", kit.SHARED_ENTITY_WEIGHT) for m in nearest]
            return found

        start = {s: self._by_id[s].memory for s in walk.seeds if s in self._by_id}
        return kit.walk_in_order(walk, start, steps)

    async def known_entities(self, limit: int = 500) -> list[str]:
        def run() -> list[str]:
            self._scan()
            counts: dict[str, int] = {}
            names: dict[str, str] = {}
            for doc in self._by_id.values():
                for entity in doc.memory.entities:
                    key = entity.casefold()
                    counts[key] = counts.get(key, 0) + 1
                    names.setdefault(key, entity)
            ranked = sorted(counts, key=lambda k: (-counts[k], k))
            return [names[k] for k in ranked[: max(limit, 0)]]

        return await self._run(run)

    # ------------------------------------------------------------------ writing

    async def write(self, memory: NewMemory) -> WriteOutcome:
        return await self._run(lambda: self._write(memory))

    def _write(self, memory: NewMemory) -> WriteOutcome:
        # transient: the write is queued until the folder is back, and never makes a new one
        self._require_root(transient=True)
        self._scan()
        mid = self._by_digest.get(digest(memory.content))
        if mid is not None and self._by_id[mid].memory.superseded_by is None:
            return WriteOutcome(
                id=mid, action=WriteAction.SKIPPED, existing_id=mid, detail="exact duplicate"
            )
        mem_id = str(uuid.uuid4())
        namespace, title, front = new_front(memory, mem_id, agent=self.agent)
        folder = self.root / namespace
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{slug(title)}-{mem_id[:8]}{SUFFIX}"
        self._write_file(path, render(front, title, memory.content))
        self._commit([path], f"memory: add {mem_id} ({namespace})")
        return WriteOutcome(id=mem_id, action=WriteAction.ADDED, detail=str(path))

    def _write_file(self, path: Path, body: str) -> None:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(body, encoding="utf-8")
        tmp.replace(path)
        st = path.stat()
        doc = self._parse(path, body, (st.st_mtime_ns, st.st_size))
        if doc is None:
            raise BackendError(f"{NAME}: wrote an unreadable file {path}")
        self._add_doc(doc)

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
        edge = kit.checked_edge(source_id, target_id, relation, weight, meta)

        def run() -> Edge:
            self._scan(force=True)
            kit.require_known([source_id, target_id], self._by_id)
            doc = self._by_id[source_id]
            split = split_frontmatter(doc.path.read_text(encoding="utf-8"))
            assert split is not None
            front, body = split
            rels = [
                r
                for r in front.get("relations") or []
                if not (
                    isinstance(r, dict) and r.get("id") == target_id and r.get("type") == edge.type
                )
            ]
            rels.append({"id": target_id, "type": edge.type, "weight": edge.weight})
            front["relations"] = rels
            front["modified"] = kit.utc_text(datetime.now(UTC))
            head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=100)
            self._write_file(doc.path, f"---\n{head}---\n\n{body}")
            self._commit([doc.path], f"memory: link {source_id} -> {target_id} ({edge.type})")
            return edge

        return await self._run(run)

    async def supersede(self, old_id: str, new_id: str) -> None:
        """Marks `old_id` corrected by `new_id` in its frontmatter (`SupersedingBackend`):
        `superseded_by` and `temporal.valid_until` (the new memory's `valid_from`)."""
        kit.checked_edge(new_id, old_id, "supersedes")

        def run() -> None:
            self._scan(force=True)
            kit.require_known([old_id, new_id], self._by_id)
            doc, new = self._by_id[old_id], self._by_id[new_id].memory
            split = split_frontmatter(doc.path.read_text(encoding="utf-8"))
            assert split is not None
            front, body = split
            now = kit.utc_text(datetime.now(UTC))
            temporal = front.get("temporal")
            temporal = temporal if isinstance(temporal, dict) else {}
            until = kit.utc_text(new.created_at) if new.created_at else now
            front["temporal"] = {**temporal, "valid_until": until}
            front["superseded_by"] = new_id
            front["modified"] = now
            head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=100)
            self._write_file(doc.path, f"---\n{head}---\n\n{body}")
            self._commit([doc.path], f"memory: {new_id} supersedes {old_id}")

        await self._run(run)

    async def forget(self, memory_id: str) -> bool:
        """Removes the file (git keeps its history when commits are on)."""
        if not isinstance(memory_id, str) or not memory_id:
            return False

        def run() -> bool:
            self._scan(force=True)
            doc = self._by_id.get(memory_id)
            if doc is None:
                return False
            doc.path.unlink(missing_ok=True)
            self._docs.pop(doc.path, None)
            self._reindex()
            self._commit([doc.path], f"memory: forget {memory_id}")
            return True

        return await self._run(run)

    def _git(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = ["git", "-C", str(self.root), "-c", "user.name=memory-orchestrator"]
        argv += ["-c", "user.email=memory-orchestrator@localhost", *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)

    def _commit(self, paths: list[Path], message: str) -> None:
        if not self.git_commit:
            return
        if not (self.root / ".git").exists():
            self.root.mkdir(parents=True, exist_ok=True)
            self._git("init", "-q")
        rel = [str(p.relative_to(self.root)) for p in paths]
        added = self._git("add", "-A", "--", *rel)
        done = self._git("commit", "-q", "--no-verify", "-m", message, "--", *rel)
        if added.returncode or done.returncode:
            why = (added.stderr or done.stderr or done.stdout).strip().splitlines()
            raise BackendError(f"{NAME}: git commit failed: {why[0] if why else 'unknown'}")

    # ------------------------------------------------------------------ lifecycle

    async def health(self) -> list[HealthCheck]:
        start = time.perf_counter()
        try:

            def run() -> tuple[int, int]:
                self._scan(force=True)
                return len(self._by_id), self.skipped_files

            count, skipped = await self._run(run)
        except (BackendError, OSError) as exc:
            return [HealthCheck(name=NAME, status=Status.ERROR, detail=str(exc))]
        ms = round((time.perf_counter() - start) * 1000, 3)
        detail = f"{count} memories in {self.root}"
        status = Status.OK
        if skipped:
            detail += f"; {skipped} *{SUFFIX} files without valid frontmatter skipped"
            status = Status.DEGRADED
        return [HealthCheck(name=NAME, status=status, detail=detail, latency_ms=ms)]

    async def close(self) -> None:
        return None


def from_settings(settings: Settings) -> MnemonicBackend:
    """The registry's factory: `[mnemonic]` settings."""
    section = settings.mnemonic
    root = section.path or settings.data_dir / "mnemonic"
    return MnemonicBackend(
        root,
        git_commit=section.git_commit,
        make_parents=section.path is None,  # the data dir is ours to make
    )

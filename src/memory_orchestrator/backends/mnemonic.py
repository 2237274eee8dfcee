"""Mnemonic's store: a directory of markdown files with YAML frontmatter (MIF level 3).

No server: the adapter reads and writes the files. Layout: `<root>/<namespace>/<slug>-<id8>
.memory.md`; every `*.memory.md` under the root is read (dot directories such as `.git` and
`.blackboard` are skipped). Frontmatter written (and read):
`id, type (semantic|episodic|procedural), namespace, created, modified, title, tags,
temporal{valid_from, recorded_at, decay{model, half_life, strength}},
provenance{source_type, agent, confidence}` plus `entities`, `importance` and `relations`
(`[{id, type, weight}]`, written by `link`) which Mnemonic leaves alone. The body is
"# <title>" and the content.

Mapping: type <-> type (`resource`, which MIF lacks, is written as semantic with the tag
`resource` and read back as resource); namespace <- `metadata["namespace"]`, else one per type
(semantic -> context, episodic -> episodic, procedural -> patterns); `created_at` <->
`temporal.valid_from`; `confidence` <-> `provenance.confidence`; decay half-life per type as
the seed's table (P30D, P7D, P14D).

Listing (`list_memories`): in the order this backend read each file (a changed file is read
anew, so it comes again).

Search: a small in-process index (stemmed terms, BM25) over the files, refreshed from the
file times at most every `rescan_s` seconds, and at once after this process writes. Neighbours:
explicit `relations` (either direction) and memories sharing an entity, nearest in time first.
`git_commit = true` commits every write and forget in the root (a repository is made when the
root is not one); git runs with list arguments, never a shell.
"""

from __future__ import annotations

import itertools
import math
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.to_thread
import yaml

from memory_orchestrator import text
from memory_orchestrator.backends import kit
from memory_orchestrator.errors import BackendError
from memory_orchestrator.filtering import matches
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

T = TypeVar("T")
NAME = "mnemonic"
SUFFIX = ".memory.md"
NAMESPACES = {
    MemoryType.SEMANTIC: "context",
    MemoryType.EPISODIC: "episodic",
    MemoryType.PROCEDURAL: "patterns",
    MemoryType.RESOURCE: "context",
}
HALF_LIFE = {
    MemoryType.SEMANTIC: "P30D",
    MemoryType.EPISODIC: "P7D",
    MemoryType.PROCEDURAL: "P14D",
    MemoryType.RESOURCE: "P30D",
}
_NAMESPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*(/[A-Za-z0-9][A-Za-z0-9_-]*)*$")
_K1, _B = 1.2, 0.75


def _iso(when: datetime) -> str:
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(value: object) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _slug(value: str) -> str:
    words = re.findall(r"[a-z0-9]+", value.casefold())
    return "-".join(words)[:48].strip("-") or "memory"


def _digest(content: str) -> str:
    return text.content_hash(content)


def split_frontmatter(raw: str) -> tuple[dict[str, Any], str] | None:
    """(frontmatter, body) of a file, or None when it has no valid YAML frontmatter."""
    if not raw.startswith("---"):
        return None
    parts = re.split(r"^---[ \t]*$", raw, maxsplit=2, flags=re.MULTILINE)
    if len(parts) < 3:
        return None
    try:
        front = yaml.safe_load(parts[1])
    except yaml.YAMLError:
        return None
    return (front, parts[2].lstrip("\n")) if isinstance(front, dict) else None


@dataclass
class Doc:
    path: Path
    stamp: tuple[int, int]  # mtime_ns, size
    memory: Memory
    relations: list[dict[str, Any]]
    digest: str
    stems: dict[str, int]
    length: int
    seq: int = 0  # when this backend read the file as it is now (see list_memories)


def _float(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return min(1.0, max(0.0, float(value)))
    return None


def _labels(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return ()
    return tuple(str(v) for v in value if isinstance(v, str | int | float) and str(v).strip())


def _section(front: dict[str, Any], key: str) -> dict[str, Any]:
    value = front.get(key)
    return value if isinstance(value, dict) else {}


def parse_doc(path: Path, raw: str, stamp: tuple[int, int]) -> Doc | None:
    """A memory file read into a `Doc`; None when it is not one."""
    split = split_frontmatter(raw)
    if split is None:
        return None
    front, body = split
    mem_id = front.get("id")
    if not isinstance(mem_id, str | int) or not str(mem_id):
        return None
    title = str(front.get("title") or "")
    content = body.strip()
    heading = f"# {title}".strip()
    if title and content.startswith(heading):
        content = content[len(heading) :].strip()
    if not content:
        content = title
    if not content:
        return None
    tags = _labels(front.get("tags"))
    kind_name = str(front.get("type") or "semantic")
    kind = MemoryType(kind_name) if kind_name in MemoryType._value2member_map_ else None
    if kind is MemoryType.SEMANTIC and "resource" in tags:
        kind = MemoryType.RESOURCE
    temporal, provenance = _section(front, "temporal"), _section(front, "provenance")
    when = _time(temporal.get("valid_from")) or _time(front.get("created"))
    meta: dict[str, MetaValue] = {"path": str(path), "title": title}
    if isinstance(front.get("namespace"), str):
        meta["namespace"] = front["namespace"]
    decay = _section(temporal, "decay")
    if isinstance(decay.get("half_life"), str):
        meta["half_life"] = decay["half_life"]
    entities = _labels(front.get("entities"))
    memory = Memory(
        id=str(mem_id),
        content=content,
        type=kind or MemoryType.SEMANTIC,
        entities=entities,
        tags=tuple(t for t in tags if t != "resource" or kind is not MemoryType.RESOURCE),
        created_at=when,
        source=str(provenance["agent"]) if isinstance(provenance.get("agent"), str) else None,
        importance=_float(front.get("importance")),
        confidence=_float(provenance.get("confidence")),
        store=NAME,
        metadata=meta,
    )
    relations = [r for r in front.get("relations") or [] if isinstance(r, dict) and r.get("id")]
    stems: dict[str, int] = {}
    words = text.all_stems(f"{title} {content} {' '.join(entities)} {' '.join(tags)}")
    for stem in words:
        stems[stem] = stems.get(stem, 0) + 1
    return Doc(path, stamp, memory, relations, _digest(content), stems, max(len(words), 1))


def _seq(doc: Doc) -> int:
    return doc.seq


def render(front: dict[str, Any], title: str, content: str) -> str:
    head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=100)
    return f"---\n{head}---\n\n# {title}\n\n{content.rstrip()}\n"


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
        listing=True,  # in the order files were read; see list_memories
        edge_types=("entity", "related"),
    )
    notes: tuple[str, ...] = ()

    def __init__(
        self,
        root: Path,
        *,
        git_commit: bool = False,
        rescan_s: float = 1.0,
        agent: str = "memory-orchestrator",
    ) -> None:
        self.root = Path(root).resolve()
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

    def _scan(self, force: bool = False) -> None:
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
        if not self.root.is_dir():
            return []
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
            self._by_digest.setdefault(doc.digest, doc.memory.id)

    def _add_doc(self, doc: Doc) -> None:
        """Index one file this process wrote (incremental unless it replaces another)."""
        old = self._docs.get(doc.path)
        self._docs[doc.path] = doc
        if old is not None or doc.memory.id in self._by_id:
            self._reindex()
            return
        self._by_id[doc.memory.id] = doc
        self._by_digest.setdefault(doc.digest, doc.memory.id)
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
            fresh = sorted((d for d in self._by_id.values() if d.seq > after), key=_seq)
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
                weight = _float(rel.get("weight"))
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
        self._scan()
        mid = self._by_digest.get(_digest(memory.content))
        if mid is not None:
            return WriteOutcome(
                id=mid, action=WriteAction.SKIPPED, existing_id=mid, detail="exact duplicate"
            )
        namespace = memory.metadata.get("namespace")
        if not isinstance(namespace, str) or not _NAMESPACE.match(namespace):
            namespace = NAMESPACES[memory.type]
        mem_id = str(uuid.uuid4())
        now = _iso(datetime.now(UTC))
        title_meta = memory.metadata.get("title")
        title = title_meta if isinstance(title_meta, str) and title_meta.strip() else None
        title = title or " ".join(memory.content.split())[:80]
        tags = list(memory.tags)
        if memory.type is MemoryType.RESOURCE and "resource" not in tags:
            tags.append("resource")
        front: dict[str, Any] = {
            "id": mem_id,
            "type": "semantic" if memory.type is MemoryType.RESOURCE else memory.type.value,
            "namespace": namespace,
            "created": now,
            "modified": now,
            "title": title,
            "tags": tags,
            "temporal": {
                "valid_from": _iso(memory.created_at) if memory.created_at else now,
                "recorded_at": now,
                "decay": {
                    "model": "exponential",
                    "half_life": HALF_LIFE[memory.type],
                    "strength": 1.0,
                },
            },
            "provenance": {
                "source_type": "conversation",
                "agent": memory.source or self.agent,
                "confidence": memory.confidence if memory.confidence is not None else 0.8,
            },
        }
        if memory.entities:
            front["entities"] = list(memory.entities)
        if memory.importance is not None:
            front["importance"] = memory.importance
        folder = self.root / namespace
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{_slug(title)}-{mem_id[:8]}{SUFFIX}"
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
            front["modified"] = _iso(datetime.now(UTC))
            head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=100)
            self._write_file(doc.path, f"---\n{head}---\n\n{body}")
            self._commit([doc.path], f"memory: link {source_id} -> {target_id} ({edge.type})")
            return edge

        return await self._run(run)

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
        except Exception as exc:
            return [HealthCheck(name=NAME, status=Status.ERROR, detail=str(exc))]
        ms = round((time.perf_counter() - start) * 1000, 3)
        if not self.root.is_dir():
            detail = f"{self.root} does not exist yet (made on the first write)"
            return [HealthCheck(name=NAME, status=Status.OK, detail=detail, latency_ms=ms)]
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
    return MnemonicBackend(root, git_commit=section.git_commit, rescan_s=section.rescan_s)

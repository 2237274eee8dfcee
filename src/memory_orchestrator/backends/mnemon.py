"""Mnemon (github.com/mnemon-dev/mnemon) behind `MemoryBackend`, through its `mnemon` CLI.

Written to Mnemon's CLI contract (v0.2.9; `../shared/reference/mnemon-cli.md`). Every call is
one `mnemon` process: no shell, arguments as a list, `--` before positional arguments (so text
starting with "-" is never read as a flag), a timeout per process (a late process is killed),
bounded retries with backoff when the store answers "database is locked" (Mnemon sets no busy
timeout), writes to one store serialized by a lock per store, `--readonly` on every command
when configured, and the store name checked before anything runs. Mnemon's embedding probe
(2 s per call) is pointed at an address that fails at once unless an endpoint is configured.

Operations:
- `search`: `recall --verbose` (its keyword, entity, similarity and graph signals). Recall
  always mixes in the ~20 newest memories as "anchors", relevant or not; results with no
  keyword, entity or similarity signal (anchors, and nodes reached only by walking from them)
  are dropped: the orchestrator expands along the graph itself, with its own recorded
  decisions. A memory-type filter becomes `--cat` where it maps to one category, and is
  applied here otherwise.
- `get_memories`, `neighbors`, `known_entities`: read straight from the store file
  (`<data_dir>/data/<store>/mnemon.db`, read-only, never immutable, so a live store is read
  safely as a WAL reader) when `direct_reads` is on and the schema is one this adapter knows
  (tables and columns checked, `PRAGMA user_version` <= 1). That costs no process; a CLI read
  costs one per call and bumps Mnemon's access counters. Otherwise: `show` per id (in
  parallel) or one `recall "" --basic` listing on builds without `show`; `related` per seed
  (breadth-first, no limit in Mnemon: capped here); `status` top entities.
- `write`: `remember` (category, importance, tags, entities, source); a memory with its own
  `created_at` goes through a one-row `import`, since `remember` has no time flag.
  `added` / `updated` / `skipped` are mapped as Mnemon reports them: when skipped, Mnemon's `id`
  is a fresh id that was never stored, so the outcome names `replaced_id`, the kept memory.
- `write_many`: `import` (one process per 1,000 memories). `link`: `link --type --weight
  --meta`. `forget`: `forget`. `health`: `--version`, `status`, the store file.

Memory types <-> Mnemon categories: episodic <-> context; semantic -> fact (and preference,
decision, fact, insight, general -> semantic); procedural -> insight and resource -> general,
each with a `memory-type:<type>` tag so they read back as written (the tag is hidden on read).
`metadata["category"]` naming a Mnemon category overrides the choice. Importance 0..1 <->
Mnemon's 1..5 (`1 + round(4 * x)`; read back as `(n - 1) / 4`). Relations: Mnemon's own edge
types pass through; the orchestrator's `related` becomes `entity` (kept as is when Mnemon
already linked the pair) and `update` becomes `supersedes`; any other name becomes `semantic`
with the name in the edge metadata. Metadata other than strings is stored as text.

`process_calls` counts process starts (`calls_by_command` per command); `notes` lists the
fallbacks in effect (an older build without a command, a store file this adapter cannot
read), for traces and health.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread
from anyio.abc import ByteReceiveStream

from memory_orchestrator.backends import kit
from memory_orchestrator.errors import BackendError, StoreTimeout
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
    to_utc,
)
from memory_orchestrator.settings import MNEMON_STORE_NAME, MnemonSettings

if TYPE_CHECKING:
    from memory_orchestrator.settings import Settings

T = TypeVar("T")
Json = dict[str, Any]

INSTALL_HINT = (
    "install it with `go install github.com/mnemon-dev/mnemon@v0.2.9` (Go >= 1.24; or"
    " `make mnemon` in this checkout), or set [mnemon] binary"
)
FAIL_FAST_ENDPOINT = "http://127.0.0.1:1"  # connection refused at once: no 2 s probe
NATIVE_EDGES = ("temporal", "semantic", "causal", "entity", "supersedes")
WALK_EDGES = frozenset(NATIVE_EDGES[:4])  # what `related` follows without --edge
CATEGORIES = ("preference", "decision", "fact", "insight", "context", "general")
TYPE_TAG = "memory-type:"
CATEGORY_OF = {
    MemoryType.EPISODIC: "context",
    MemoryType.SEMANTIC: "fact",
    MemoryType.PROCEDURAL: "insight",
    MemoryType.RESOURCE: "general",
}
TYPE_OF = {"context": MemoryType.EPISODIC}  # every other category reads as semantic
CATEGORIES_FOR = {
    MemoryType.EPISODIC: {"context"},
    MemoryType.SEMANTIC: {"preference", "decision", "fact", "insight", "general"},
    MemoryType.PROCEDURAL: {"insight"},
    MemoryType.RESOURCE: {"general"},
}
RELATIONS = {"related": "entity", "update": "supersedes"}
LOCKED = ("database is locked", "sqlite_busy", "database table is locked", "sqlite_locked")
NOT_FOUND = ("no rows in result set", "not found")
MAX_CONTENT_BYTES = 8000
LIMITS = {"tags": (20, 100), "entities": (50, 200)}  # count, bytes each
IMPORT_CHUNK = 1000
SQL_CHUNK = 400
SCHEMA_VERSION = 1  # PRAGMA user_version this adapter knows (float32 vectors)
INSIGHT_COLUMNS = frozenset(
    "id content category importance tags entities source created_at deleted_at".split()
)
EDGE_COLUMNS = frozenset("source_id target_id edge_type weight metadata".split())
_COLS = "id, content, category, importance, tags, entities, source, access_count, created_at"
# Commands (and flags) by the first version known to have them; 0.2.x has all of these.
FEATURES = {
    "show": (0, 2, 0),
    "supersedes": (0, 2, 0),
    "import": (0, 1, 10),
    "verbose": (0, 1, 9),
    "entity-mode": (0, 1, 4),
}
_REPO_ROOT = Path(__file__).resolve().parents[3]
_STORE_NAME = re.compile(MNEMON_STORE_NAME)
_STORE_LOCKS: anyio.lowlevel.RunVar[dict[str, anyio.Lock]] = anyio.lowlevel.RunVar(
    "mnemon_store_locks"
)


@dataclass(frozen=True)
class MnemonVersion:
    """What `mnemon --version` said; `parts` is None for builds without a release number."""

    text: str
    parts: tuple[int, int, int] | None

    def has(self, feature: str) -> bool:
        return self.parts is None or self.parts >= FEATURES[feature]

    @classmethod
    def parse(cls, output: str) -> MnemonVersion:
        match = re.search(r"version\s+v?(\S+)", output)
        text = match.group(1) if match else output.strip()[:40]
        numbers = re.match(r"(\d+)\.(\d+)\.(\d+)", text)
        if numbers is None:
            return cls(text or "unknown", None)
        major, minor, patch = (int(n) for n in numbers.groups())
        return cls(text, (major, minor, patch))


@dataclass
class _LoopState:
    loop: object
    processes: anyio.Semaphore
    version_lock: anyio.Lock
    status_lock: anyio.Lock


class MnemonTimeout(StoreTimeout):
    """A mnemon process ran past its timeout and was killed."""


class _Locked(BackendError):
    """The store was locked by another writer (retried with backoff)."""


class _NoDirectRead(Exception):
    """The store file cannot be read directly; the CLI is used instead."""


# ---------------------------------------------------------------- mapping helpers


def parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return to_utc(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        return None


def importance_in(value: object) -> float | None:
    """Mnemon's 1..5 as 0..1."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 1 <= value <= 5:
        return None
    return round((float(value) - 1) / 4, 4)


def importance_out(value: float) -> int:
    """0..1 as Mnemon's 1..5."""
    return 1 + round(min(max(value, 0.0), 1.0) * 4)


def _string_list(value: object) -> list[str]:
    if isinstance(value, str):  # a JSON array kept as text in the store file
        try:
            value = json.loads(value)
        except ValueError:
            return []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def to_memory(insight: Json, *, superseded: bool = False) -> Memory:
    """One Mnemon insight (CLI JSON or a store row as a dict) as a `Memory`."""
    category = str(insight.get("category") or "general")
    tags = _string_list(insight.get("tags"))
    kind = TYPE_OF.get(category, MemoryType.SEMANTIC)
    for tag in tags:
        named = tag.removeprefix(TYPE_TAG)
        if tag.startswith(TYPE_TAG) and named in MemoryType.__members__.values():
            kind = MemoryType(named)
    metadata: dict[str, MetaValue] = {"category": category}
    access = insight.get("access_count")
    if isinstance(access, int):
        metadata["access_count"] = access
    if superseded:
        metadata["superseded"] = True
    source = insight.get("source")
    return Memory(
        id=str(insight["id"]),
        content=str(insight.get("content") or ""),
        type=kind,
        entities=tuple(_string_list(insight.get("entities"))),
        tags=tuple(t for t in tags if not t.startswith(TYPE_TAG)),
        created_at=parse_time(insight.get("created_at")),
        source=source if isinstance(source, str) and source else None,
        importance=importance_in(insight.get("importance")),
        store="mnemon",
        metadata=metadata,
    )


def category_and_tags(memory: NewMemory) -> tuple[str, list[str]]:
    """The Mnemon category for a memory, and its tags (plus a type tag when the category alone
    would read back as another type)."""
    chosen = memory.metadata.get("category")
    category = chosen if isinstance(chosen, str) and chosen in CATEGORIES else None
    category = category or CATEGORY_OF[memory.type]
    tags = list(dict.fromkeys(memory.tags))
    if TYPE_OF.get(category, MemoryType.SEMANTIC) is not memory.type:
        tags.append(TYPE_TAG + memory.type.value)
    return category, tags


def check_new(memory: NewMemory, index: int | None = None) -> None:
    """Mnemon's limits, checked here so nothing runs (or half an import lands) when one fails."""
    where = "" if index is None else f"memories[{index}]: "
    size = len(memory.content.encode())
    if size > MAX_CONTENT_BYTES:
        raise BackendError(
            f"{where}content is {size} bytes; Mnemon takes at most {MAX_CONTENT_BYTES}"
        )
    if "\x00" in memory.content:
        raise BackendError(f"{where}content contains a NUL character")
    _, tags = category_and_tags(memory)
    for name, values in (("tags", tags), ("entities", list(memory.entities))):
        most, max_bytes = LIMITS[name]
        if len(values) > most:
            raise BackendError(f"{where}{len(values)} {name}; Mnemon takes at most {most}")
        for value in values:
            if len(value.encode()) > max_bytes or "," in value or "\x00" in value:
                raise BackendError(
                    f"{where}{name} value {value[:40]!r} is over {max_bytes} bytes or holds a"
                    " comma or NUL"
                )


def _error_message(stderr: bytes) -> str:
    """Mnemon's error text: the `Error: ...` line, else the last non-empty stderr line."""
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines()]
    lines = [line for line in lines if line]
    for line in lines:
        if line.startswith("Error: "):
            return line.removeprefix("Error: ")
    return lines[-1] if lines else "no error text"


async def _drain(stream: ByteReceiveStream | None, into: bytearray) -> None:
    if stream is None:
        return
    async for chunk in stream:
        into.extend(chunk)


# ---------------------------------------------------------------- the backend


class MnemonBackend:
    """A `MemoryBackend` over the `mnemon` CLI (see the module docstring)."""

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
        edge_types=NATIVE_EDGES,
    )

    def __init__(self, settings: MnemonSettings | None = None) -> None:
        self.settings = settings or MnemonSettings()
        self.data_dir = self._data_dir()
        self.store, self.store_error = self._store()
        self.db_path = self.data_dir / "data" / self.store / "mnemon.db"
        self.process_calls = 0
        self.calls_by_command: Counter[str] = Counter()
        self._notes: dict[str, None] = {}
        self._binary: Path | None = None
        self._version: tuple[float, MnemonVersion] | None = None
        self._status: tuple[float, Json] | None = None
        self._loop_state: _LoopState | None = None

    # ------------------------------------------------------------------ configuration

    def _data_dir(self) -> Path:
        configured = self.settings.data_dir or os.environ.get("MNEMON_DATA_DIR")
        if configured:
            return Path(configured).expanduser().absolute()
        home = os.environ.get("HOME") or "/tmp"
        return Path(home) / ".mnemon"

    def _store(self) -> tuple[str, str | None]:
        """Mnemon's own resolution: config, then $MNEMON_STORE, then the `active` file (an
        invalid name there silently means default, as in Mnemon), then `default`."""
        name = self.settings.store or os.environ.get("MNEMON_STORE") or ""
        if not name:
            with contextlib.suppress(OSError):
                name = (self.data_dir / "active").read_text(encoding="utf-8").strip()
            if not _STORE_NAME.match(name):
                name = "default"
        if not _STORE_NAME.match(name):
            problem = (
                f"invalid mnemon store name {name!r}: use letters, digits, '_' and '-',"
                " starting with a letter or digit"
            )
            return name, problem
        return name, None

    def binary(self) -> Path:
        """Config, then this checkout's `.tools/bin/mnemon`, then PATH. Raises BackendError."""
        if self._binary is not None and self._binary.is_file():
            return self._binary
        looked: list[str] = []
        configured = self.settings.binary
        if configured is not None:
            path = configured.expanduser()
            if path.parent == Path() and not str(configured).startswith("."):
                found = shutil.which(str(path))
                looked.append(f"{path} on PATH")
                candidates = [Path(found)] if found else []
            else:
                looked.append(str(path))
                candidates = [path]
        else:
            local = [_REPO_ROOT / ".tools/bin/mnemon", Path.cwd() / ".tools/bin/mnemon"]
            looked += [str(p) for p in dict.fromkeys(local)] + ["PATH"]
            found = shutil.which("mnemon")
            candidates = [*local, *([Path(found)] if found else [])]
        for candidate in candidates:
            if candidate.is_file() and os.access(candidate, os.X_OK):
                self._binary = candidate.absolute()
                return self._binary
        raise BackendError(
            f"mnemon binary not found (looked in: {', '.join(looked)}); {INSTALL_HINT}"
        )

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["MNEMON_EMBED_ENDPOINT"] = self.settings.embed_endpoint or FAIL_FAST_ENDPOINT
        if self.settings.max_insights is not None:
            env["MNEMON_MAX_INSIGHTS"] = str(self.settings.max_insights)
        return env

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

    # ------------------------------------------------------------------ running mnemon

    def _loop(self) -> _LoopState:
        """Semaphore and locks for the running event loop (they cannot cross loops)."""
        loop = anyio.lowlevel.current_token().native_token
        if self._loop_state is None or self._loop_state.loop is not loop:
            limit = anyio.Semaphore(self.settings.max_processes)
            self._loop_state = _LoopState(loop, limit, anyio.Lock(), anyio.Lock())
        return self._loop_state

    @asynccontextmanager
    async def _write_lock(self) -> AsyncIterator[None]:
        """One writer per store at a time, across every backend in this event loop."""
        locks = _STORE_LOCKS.get(None)
        if locks is None:
            locks = {}
            _STORE_LOCKS.set(locks)
        lock = locks.setdefault(str(self.db_path), anyio.Lock())
        async with lock:
            yield

    async def _spawn(
        self, argv: list[str], command: str, timeout: float
    ) -> tuple[int, bytes, bytes]:
        async with self._loop().processes:
            self.process_calls += 1
            self.calls_by_command[command] += 1
            try:
                process = await anyio.open_process(argv, stdin=subprocess.DEVNULL, env=self._env())
            except OSError as exc:
                raise BackendError(f"cannot start {argv[0]}: {exc}") from exc
            out, err = bytearray(), bytearray()
            try:
                with anyio.fail_after(timeout):
                    async with anyio.create_task_group() as group:
                        group.start_soon(_drain, process.stdout, out)
                        group.start_soon(_drain, process.stderr, err)
                        await process.wait()
            except TimeoutError:
                raise MnemonTimeout(
                    f"mnemon {command} timed out after {timeout:g}s and was killed",
                    transient=True,
                ) from None
            finally:  # on our timeout or the caller's cancellation: never leave it running
                with anyio.CancelScope(shield=True):
                    if process.returncode is None:
                        with contextlib.suppress(ProcessLookupError):
                            process.kill()
                    await process.aclose()
            return process.returncode or 0, bytes(out), bytes(err)

    async def _run(
        self,
        command: str,
        flags: Sequence[str] = (),
        positional: Sequence[str] = (),
        *,
        write: bool = False,
        timeout: float | None = None,
    ) -> str:
        """Run `mnemon <global flags> <command> <flags> -- <positional>`; its stdout.

        Retries "database is locked" with exponential backoff; raises BackendError."""
        self._check_store()
        argv = self.argv(command, flags, positional)
        limit = timeout or self.settings.timeout_s
        attempt = 0
        while True:
            try:
                if write:
                    async with self._write_lock():
                        return await self._once(argv, command, limit)
                return await self._once(argv, command, limit)
            except _Locked as exc:
                if attempt >= self.settings.retries:
                    tries = attempt + 1
                    raise BackendError(
                        f"mnemon {command}: the store {self.db_path} stayed locked by another"
                        f" writer ({exc}); gave up after {tries} tries",
                        transient=True,
                    ) from exc
                delay = self.settings.retry_backoff_s * (2**attempt)
                await anyio.sleep(delay * (1 + random.random() / 2))
                attempt += 1

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

    async def _once(self, argv: list[str], command: str, timeout: float) -> str:
        code, out, err = await self._spawn(argv, command, timeout)
        if code == 0:
            return out.decode(errors="replace")
        message = _error_message(err)
        if any(marker in message.lower() for marker in LOCKED):
            raise _Locked(message, transient=True)
        raise BackendError(f"mnemon {command} failed (exit {code}): {message}")

    async def _json(
        self,
        command: str,
        flags: Sequence[str] = (),
        positional: Sequence[str] = (),
        *,
        write: bool = False,
        timeout: float | None = None,
    ) -> Any:
        out = await self._run(command, flags, positional, write=write, timeout=timeout)
        try:
            return json.loads(out)
        except ValueError as exc:
            head = out.strip()[:200]
            raise BackendError(f"mnemon {command} printed no valid JSON ({exc}): {head!r}") from exc

    async def version(self) -> MnemonVersion:
        """`mnemon --version`, cached for `cache_ttl_s`."""
        if self._version is not None and self._fresh(self._version[0]):
            return self._version[1]
        async with self._loop().version_lock:  # one `--version` for concurrent first calls
            if self._version is not None and self._fresh(self._version[0]):
                return self._version[1]
            return await self._fetch_version()

    def _fresh(self, stamp: float) -> bool:
        return time.monotonic() - stamp < self.settings.cache_ttl_s

    async def _fetch_version(self) -> MnemonVersion:
        now = time.monotonic()
        argv = [str(self.binary()), "--version"]
        code, out, err = await self._spawn(argv, "--version", self.settings.timeout_s)
        if code != 0:
            raise BackendError(f"mnemon --version failed (exit {code}): {_error_message(err)}")
        found = MnemonVersion.parse(out.decode(errors="replace"))
        if found.parts is None:
            self._note(f"mnemon version {found.text!r} has no release number; assuming v0.2.9")
        self._version = (now, found)
        return found

    async def _has(self, feature: str, fallback: str) -> bool:
        found = await self.version()
        if found.has(feature):
            return True
        self._note(f"mnemon {found.text} has no `{feature}`; {fallback}")
        return False

    async def status(self, *, fresh: bool = False) -> Json:
        """`mnemon status`, cached for `cache_ttl_s` (writes clear it)."""
        cached = self._status
        if not fresh and cached is not None and self._fresh(cached[0]):
            return cached[1]
        async with self._loop().status_lock:
            cached = self._status
            if not fresh and cached is not None and self._fresh(cached[0]):
                return cached[1]
            return await self._fetch_status()

    async def _fetch_status(self) -> Json:
        now = time.monotonic()
        data = await self._json("status")
        if not isinstance(data, dict):
            raise BackendError(f"mnemon status printed {type(data).__name__}, not an object")
        self._status = (now, data)
        return data

    # ------------------------------------------------------------------ the store file

    async def _direct(self, read: Callable[[sqlite3.Connection | None], T]) -> T | None:
        """Run `read` on a read-only connection to the store file (None: no file yet).
        Returns None (and notes why) when direct reads are off or the schema is unknown."""
        self._check_store()
        if not self.settings.direct_reads:
            return None
        try:
            return await anyio.to_thread.run_sync(self._read_file, read, abandon_on_cancel=True)
        except _NoDirectRead as exc:
            self._note(f"store file not read directly ({exc}); reads use the mnemon CLI")
            return None

    def _read_file(self, read: Callable[[sqlite3.Connection | None], T]) -> T:
        if not self.db_path.is_file():
            return read(None)
        try:
            conn = sqlite3.connect(
                self.db_path.as_uri() + "?mode=ro", uri=True, timeout=2.0, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise BackendError(f"mnemon store {self.db_path} cannot be opened: {exc}") from exc
        try:
            problem = _schema_problem(conn)
            if problem is not None:
                raise _NoDirectRead(problem)
            return read(conn)
        except sqlite3.Error as exc:
            busy = "locked" in str(exc) or "busy" in str(exc)
            raise BackendError(f"mnemon store {self.db_path}: {exc}", transient=busy) from exc
        finally:
            conn.close()

    async def direct_reads_ok(self) -> str:
        """Whether reads go to the store file (for health); _NoDirectRead says why not."""
        if not self.settings.direct_reads:
            return "off by configuration: reads use the mnemon CLI"
        if self.store_error is not None:
            raise BackendError(self.store_error)

        def probe(conn: sqlite3.Connection | None) -> str:
            if conn is None:
                return f"no store file yet at {self.db_path}"
            return f"by-id, graph and entity reads from {self.db_path} (read-only)"

        try:
            return await anyio.to_thread.run_sync(self._read_file, probe, abandon_on_cancel=True)
        except _NoDirectRead as exc:
            raise _NoDirectRead(f"store file not read directly ({exc}); reads use the CLI") from exc

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
        verbose = await self._has("verbose", "recall prints its full shape by default")
        if verbose:
            flags.append("--verbose")
        data = await self._json("recall", flags, [text])
        hits = []
        for result in _recall_results(data):
            if not _has_signal(result):
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
        found = await self._direct(lambda conn: _rows_by_id(conn, wanted))
        if found is None:
            found = await self._get_by_cli(wanted)
        return [to_memory(found[i]) for i in wanted if i in found]

    async def _get_by_cli(self, wanted: list[str]) -> dict[str, Json]:
        found: dict[str, Json] = {}
        if not await self._has("show", "get_memories lists memories with `recall --basic`"):
            total = int((await self.status()).get("total_insights") or 0)
            listing = await self._json("recall", ["--basic", "--limit", str(max(total, 1))], [""])
            wanted_set = set(wanted)
            for item in listing if isinstance(listing, list) else []:
                if isinstance(item, dict) and item.get("id") in wanted_set:
                    found[str(item["id"])] = item
            return found

        async def one(memory_id: str) -> None:
            try:
                item = await self._json("show", (), [memory_id])
            except BackendError as exc:
                if any(marker in str(exc) for marker in NOT_FOUND):
                    return
                raise
            if isinstance(item, dict) and "id" in item:
                found[memory_id] = item

        async with anyio.create_task_group() as group:
            for memory_id in wanted:
                group.start_soon(one, memory_id)
        return found

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
        found = await self._direct(lambda conn: _walk(conn, walk))
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
        best: dict[str, Neighbor] = {}
        for seed in seeds:
            for row in per_seed.get(seed, []):
                kind, depth = str(row.get("via_edge_type") or ""), row.get("depth")
                hop = depth if isinstance(depth, int) and depth > 0 else 1
                if row.get("id") in seeds or (allowed is not None and kind not in allowed):
                    continue
                known = best.get(str(row["id"]))
                if known is None or hop < known.hops:
                    best[str(row["id"])] = Neighbor(
                        memory=to_memory(row),
                        seed_id=seed,
                        via_id=seed,
                        edge_type=kind,
                        weight=1.0,
                        hops=hop,
                    )
        return sorted(best.values(), key=lambda n: (n.hops, n.memory.id))[:limit]

    async def known_entities(self, limit: int = 500) -> list[str]:
        found = await self._direct(lambda conn: _entity_names(conn, max(limit, 0)))
        if found is not None:
            return found
        top = (await self.status()).get("top_entities") or []
        names = [e.get("entity") for e in top if isinstance(e, dict)]
        return [n for n in names if isinstance(n, str) and n][: max(limit, 0)]

    # ------------------------------------------------------------------ writing

    async def write(self, memory: NewMemory) -> WriteOutcome:
        self._check_store()
        check_new(memory)
        no_import = "a memory's created_at is not kept (remember has no time flag)"
        if memory.created_at is not None and await self._has("import", no_import):
            return (await self._import([memory]))[0]
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
        if self.settings.entity_mode != "merge" and await self._has(
            "entity-mode", "Mnemon merges the entities it finds"
        ):
            flags += ["--entity-mode", self.settings.entity_mode]
        data = await self._json("remember", flags, [memory.content], write=True)
        self._status = None
        if not isinstance(data, dict):
            raise BackendError("mnemon remember printed no JSON object")
        return _outcome(data, "remember")

    async def write_many(self, memories: Sequence[NewMemory]) -> list[WriteOutcome]:
        self._check_store()
        batch = list(memories)
        for index, memory in enumerate(batch):
            check_new(memory, index)
        if not batch:
            return []
        if not await self._has("import", "write_many runs one remember per memory"):
            return [await self.write(m) for m in batch]
        outcomes: list[WriteOutcome] = []
        for start in range(0, len(batch), IMPORT_CHUNK):
            outcomes += await self._import(batch[start : start + IMPORT_CHUNK])
        return outcomes

    async def _import(self, batch: list[NewMemory]) -> list[WriteOutcome]:
        insights = []
        for memory in batch:
            category, tags = category_and_tags(memory)
            row: Json = {"content": memory.content, "category": category, "tags": tags}
            row["entities"] = list(memory.entities)
            if memory.importance is not None:
                row["importance"] = importance_out(memory.importance)
            if memory.source:
                row["source"] = memory.source
            if memory.created_at is not None:
                row["created_at"] = to_utc(memory.created_at).strftime("%Y-%m-%dT%H:%M:%SZ")
            insights.append(row)
        draft = {"schema_version": "1", "insights": insights}
        with tempfile.TemporaryDirectory(prefix="mnemon-import-") as folder:
            path = Path(folder) / "draft.json"
            path.write_text(json.dumps(draft, ensure_ascii=False), encoding="utf-8")
            timeout = self.settings.timeout_s + 0.05 * len(batch)
            data = await self._json("import", (), [str(path)], write=True, timeout=timeout)
        self._status = None
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
        return [_outcome(r, "import") for r in rows]

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
        if kind == "supersedes" and not await self._has(
            "supersedes", "`update` links are made as `semantic` edges"
        ):
            kind = "semantic"
        if relation not in NATIVE_EDGES:
            existing = await self._direct(lambda c: _edge_between(c, source_id, target_id, kind))
            if isinstance(existing, Edge):
                return existing
        flags = ["--type", kind, "--weight", f"{weight:.6g}"]
        if metadata:
            flags += ["--meta", json.dumps(metadata, ensure_ascii=False)]
        data = await self._json("link", flags, [source_id, target_id], write=True)
        self._status = None
        if not isinstance(data, dict):
            raise BackendError("mnemon link printed no JSON object")
        stored = data.get("metadata")
        return Edge(
            source_id=str(data.get("source_id") or source_id),
            target_id=str(data.get("target_id") or target_id),
            type=str(data.get("edge_type") or kind),
            weight=float(data.get("weight", weight)),
            meta={str(k): str(v) for k, v in stored.items()} if isinstance(stored, dict) else {},
        )

    async def forget(self, memory_id: str) -> bool:
        if not kit.clean_ids([memory_id], argv_safe=True):
            return False
        try:
            await self._json("forget", (), [memory_id], write=True)
        except BackendError as exc:
            if "not found or already deleted" in str(exc):
                return False
            raise
        self._status = None
        return True

    # ------------------------------------------------------------------ lifecycle

    async def health(self) -> list[HealthCheck]:
        checks: list[HealthCheck] = []

        async def check(name: str, probe: Callable[[], Awaitable[str]]) -> bool:
            started = time.perf_counter()
            try:
                detail, status = await probe(), Status.OK
            except _NoDirectRead as exc:
                detail, status = str(exc), Status.DEGRADED
            except Exception as exc:
                detail, status = str(exc) or type(exc).__name__, Status.ERROR
            ms = round((time.perf_counter() - started) * 1000, 3)
            checks.append(HealthCheck(name=name, status=status, detail=detail, latency_ms=ms))
            return status is not Status.ERROR

        async def binary() -> str:
            return str(self.binary())

        async def version() -> str:
            found = await self.version()
            return f"mnemon version {found.text}"

        async def store() -> str:
            if self.store_error is not None:
                raise BackendError(self.store_error)
            data = await self.status()
            return (
                f"store {self.store!r}: {data.get('total_insights', '?')} memories,"
                f" {data.get('edge_count', '?')} edges; {data.get('db_path', self.db_path)}"
            )

        async def features() -> str:
            if self.notes:
                raise _NoDirectRead("; ".join(self.notes))
            return "no fallbacks in use"

        if await check("binary", binary) and await check("version", version):
            await check("store", store)
        await check("direct_reads", self.direct_reads_ok)
        await check("features", features)
        return checks

    async def close(self) -> None:
        """Nothing stays open between calls."""


# ---------------------------------------------------------------- parsing CLI output


def _recall_results(data: Any) -> list[Json]:
    """Recall results as `{"insight": {...}, "score", "via", "signals"?, ...}`, whichever
    shape Mnemon printed (verbose; compact; a bare list)."""
    rows = data.get("results") if isinstance(data, dict) else data
    if not isinstance(rows, list):
        raise BackendError("mnemon recall printed no result list")
    out: list[Json] = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        if isinstance(row.get("insight"), dict) and "id" in row["insight"]:
            out.append(row)
        elif "id" in row:  # the compact shape: no timestamps, tags or signals
            out.append({**row, "insight": row, "via": row.get("matched_via", "")})
    return out


def _has_signal(result: Json) -> bool:
    """A direct match (keyword, entity or similarity), not a recency anchor or a node reached
    only through the graph walk."""
    signals = result.get("signals")
    if isinstance(signals, dict):
        return any(
            isinstance(signals.get(k), int | float) and signals[k] > 0
            for k in ("keyword", "entity", "similarity")
        )
    return str(result.get("via") or "") in ("keyword", "vector", "hybrid", "entity")


def _outcome(data: Json, command: str) -> WriteOutcome:
    action = str(data.get("action") or "")
    new_id, replaced = str(data.get("id") or ""), data.get("replaced_id")
    replaced = replaced if isinstance(replaced, str) and replaced else None
    if action == "added":
        advice = data.get("diff_suggestion")
        detail = f"stored by mnemon {command}" + (f" (diff: {advice})" if advice else "")
        return WriteOutcome(id=new_id, action=WriteAction.ADDED, detail=detail)
    if action == "updated":
        detail = f"mnemon replaced {replaced} with this memory" if replaced else "updated"
        return WriteOutcome(
            id=new_id, action=WriteAction.UPDATED, existing_id=replaced, detail=detail
        )
    if action == "skipped":
        kept = replaced or new_id  # import names the kept memory in `id`
        detail = f"mnemon {command}: the store already holds this as {kept}; nothing written"
        return WriteOutcome(id=kept, action=WriteAction.SKIPPED, existing_id=kept, detail=detail)
    raise BackendError(f"mnemon {command} reported an unknown action {action!r}")


# ---------------------------------------------------------------- reading the store file


def _schema_problem(conn: sqlite3.Connection) -> str | None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        return f"schema version {version} is newer than {SCHEMA_VERSION}"
    for table, needed in (("insights", INSIGHT_COLUMNS), ("edges", EDGE_COLUMNS)):
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        missing = needed - columns
        if missing:
            return f"table {table} lacks {', '.join(sorted(missing))}"
    return None


def _row(row: tuple[Any, ...]) -> Json:
    keys = [k.strip() for k in _COLS.split(",")]
    return dict(zip(keys, row, strict=True))


def _rows_by_id(conn: sqlite3.Connection | None, ids: Sequence[str]) -> dict[str, Json]:
    found: dict[str, Json] = {}
    if conn is None:
        return found
    for start in range(0, len(ids), SQL_CHUNK):
        chunk = list(ids[start : start + SQL_CHUNK])
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT {_COLS} FROM insights WHERE id IN ({marks}) AND deleted_at IS NULL"
        found.update((row[0], _row(row)) for row in conn.execute(sql, chunk))
    return found


def _walk(conn: sqlite3.Connection | None, walk: kit.Walk) -> list[Neighbor]:
    """Breadth-first over the edges table, both directions, live memories only; within a hop
    the strongest edge first, then the nearest in time (what `related` does, plus weights,
    the node each neighbour was reached through, and a limit)."""
    if conn is None:
        return []
    kinds = sorted(walk.allowed) if walk.allowed is not None else []

    def reach(frontier: Mapping[str, Json]) -> Iterator[kit.Reach]:
        nodes = list(frontier)
        for start in range(0, len(nodes), SQL_CHUNK):
            chunk = nodes[start : start + SQL_CHUNK]
            marks = ",".join("?" * len(chunk))
            sql = (
                "SELECT source_id, target_id, edge_type, weight FROM edges"
                f" WHERE (source_id IN ({marks}) OR target_id IN ({marks}))"
            )
            args: list[Any] = [*chunk, *chunk]
            if kinds:
                sql += f" AND edge_type IN ({','.join('?' * len(kinds))})"
                args += kinds
            for src, dst, kind, weight in conn.execute(sql, args):
                w = float(weight) if weight is not None else 0.0
                yield src, dst, str(kind), w
                yield dst, src, str(kind), w

    def nearest(cand: str, row: Json, via: Json) -> tuple[float, str]:
        return abs(_epoch(row) - _epoch(via)), cand

    return kit.walk_strongest_first(
        walk,
        load=lambda ids: _rows_by_id(conn, ids),
        reach=reach,
        memory=to_memory,
        tie_break=nearest,
    )


def _epoch(row: Json) -> float:
    when = parse_time(row.get("created_at"))
    return when.timestamp() if when is not None else 0.0


def _entity_names(conn: sqlite3.Connection | None, limit: int) -> list[str]:
    if conn is None:
        return []
    sql = (
        "SELECT je.value, count(*) AS n FROM insights i, json_each(i.entities) je"
        " WHERE i.deleted_at IS NULL AND je.type = 'text' AND je.value != ''"
        " GROUP BY je.value ORDER BY n DESC, je.value LIMIT ?"
    )
    return [str(name) for name, _ in conn.execute(sql, (limit,))]


def _edge_between(
    conn: sqlite3.Connection | None, source: str, target: str, kind: str
) -> Edge | bool:
    """The edge of `kind` Mnemon already holds between the two, either way (False: none)."""
    if conn is None:
        return False
    row = conn.execute(
        "SELECT source_id, target_id, weight, metadata FROM edges WHERE edge_type = ?"
        " AND ((source_id = ? AND target_id = ?) OR (source_id = ? AND target_id = ?))"
        " ORDER BY source_id = ? DESC LIMIT 1",
        (kind, source, target, target, source, source),
    ).fetchone()
    if row is None:
        return False
    try:
        meta = json.loads(row[3] or "{}")
    except ValueError:
        meta = {}
    return Edge(
        source_id=row[0],
        target_id=row[1],
        type=kind,
        weight=min(max(float(row[2] or 0.0), 0.0), 1.0),
        meta={str(k): str(v) for k, v in meta.items()} if isinstance(meta, dict) else {},
    )


def from_settings(settings: Settings) -> MnemonBackend:
    """The registry's factory: `[mnemon]` settings. Starts no process."""
    return MnemonBackend(settings.mnemon)

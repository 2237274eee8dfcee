"""The embedded store's numbered migrations (`backends/embedded_migrations/`) on real files:
a new file gets them all, a file of an earlier release opens with its memories, one newer
than the code is refused, and two processes opening a new file at once migrate it once."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.backends.embedded_sql import MIGRATIONS, SCHEMA_VERSION, migrate
from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import NewMemory, Status

pytestmark = pytest.mark.integration

V2_FILE = Path(__file__).resolve().parents[1] / "data" / "embedded-v2.db"  # tests/data/README.md
V2_IDS = ["mem_29a9df3874ca", "mem_3e3b1b683f3e", "mem_f8a5c03312ee", "mem_6a75a21f5999"]
SCHEMA = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"


async def _opened(path: Path) -> None:
    """Open `path` with the store (which migrates it) and close it again."""
    backend = EmbeddedBackend(path)
    try:
        checks = {c.name: c.status for c in await backend.health()}
        assert checks["sqlite"] is Status.OK, checks
    finally:
        await backend.close()


def _read(path: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(sql).fetchall()


def test_the_migrations_are_numbered_from_one_without_a_gap() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert MIGRATIONS[-1].version == SCHEMA_VERSION


async def test_a_new_file_gets_every_migration_and_the_last_version(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    await _opened(path)
    assert _read(path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    names = {row[1] for row in _read(path, SCHEMA)}
    assert {"memories", "memories_fts", "entities", "edges"} <= names
    columns = {row[1] for row in _read(path, "PRAGMA table_info(memories)")}
    assert {"superseded_by", "superseded_at"} <= columns


async def test_a_file_made_before_the_numbered_migrations_opens_with_its_memories(
    tmp_path: Path,
) -> None:
    """A copy of a store file the code of the previous release made (version 2): it opens
    with the same schema a new file gets, and every memory, mark, edge and search as before."""
    path = tmp_path / "memories.db"
    shutil.copyfile(V2_FILE, path)
    before = _read(path, SCHEMA)
    backend = EmbeddedBackend(path)
    try:
        found = await backend.get_memories(V2_IDS)
        assert [m.id for m in found] == V2_IDS[:3]  # the fourth was forgotten
        assert found[0].superseded_by == V2_IDS[2]
        assert found[0].superseded_at is not None
        assert found[0].entities == ("Dana", "Atlas")
        hits = await backend.search("rate limit requests", 5)
        assert {h.memory.id for h in hits} == {V2_IDS[0], V2_IDS[2]}
        walked = await backend.neighbors([V2_IDS[2]], edge_types=["update"])
        assert [n.memory.id for n in walked] == [V2_IDS[0]]
        added = await backend.write(NewMemory(content="Priya joined the Hermes team."))
        assert (await backend.get_memories([added.id]))[0].content.startswith("Priya")
    finally:
        await backend.close()
    fresh = tmp_path / "fresh.db"
    await _opened(fresh)
    assert _read(path, SCHEMA) == before == _read(fresh, SCHEMA)
    assert _read(path, "PRAGMA user_version") == [(2,)]


async def test_a_version_1_file_gets_the_later_migrations_and_keeps_its_memories(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v1.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(MIGRATIONS[0].sql)
        conn.execute(
            "INSERT INTO memories (id, content, type, created_at, updated_at, content_hash)"
            " VALUES ('mem_old', 'The limit is 100.', 'semantic', 1, 1, 'h')"
        )
        conn.execute("PRAGMA user_version = 1")
    conn.close()
    await _opened(path)
    assert _read(path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert _read(path, "SELECT id, superseded_by FROM memories") == [("mem_old", None)]


async def test_a_file_newer_than_the_code_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    shutil.copyfile(V2_FILE, path)
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = _read(path, SCHEMA)
    backend = EmbeddedBackend(path)
    try:
        with pytest.raises(BackendError, match="newer than"):
            await backend.get_memories(V2_IDS)
    finally:
        await backend.close()
    assert _read(path, "PRAGMA user_version") == [(SCHEMA_VERSION + 1,)]
    assert _read(path, SCHEMA) == before


def test_two_openers_that_both_saw_a_new_file_migrate_it_once(tmp_path: Path) -> None:
    """Each reads the version again once it holds the write lock: the second finds the
    first's work done (otherwise it would create the tables again, and fail)."""
    path = tmp_path / "race.db"
    first, second = sqlite3.connect(path), sqlite3.connect(path)
    first.isolation_level = second.isolation_level = None  # the store's own transactions
    try:
        for conn in (first, second):
            assert conn.execute("PRAGMA user_version").fetchone() == (0,)
        assert migrate(first) == [m.version for m in MIGRATIONS]
        assert migrate(second) == []
        assert second.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    finally:
        first.close()
        second.close()

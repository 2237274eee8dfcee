"""The embedded store's integrity check (`PRAGMA quick_check`, which reads every page) runs
off the path of `health`: when the file is opened, after a fault, and again on a schedule;
health reports the latest result with its age, and a damaged file is still reported."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import HealthCheck, NewMemory, Status

pytestmark = pytest.mark.integration


async def health(store: EmbeddedBackend) -> dict[str, HealthCheck]:
    return {c.name: c for c in await store.health()}


async def filled(path: Path, count: int = 300) -> Path:
    """A store of `count` memories, every page of it in the file (no WAL left)."""

    store = EmbeddedBackend(path)
    try:
        memories = [NewMemory(content=f"memory {i}: " + "x" * 400) for i in range(count)]
        await store.write_many(memories)
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path


def damage(path: Path) -> None:
    """Garbage over the pages after the first (the schema still reads; the tables do not)."""
    with path.open("r+b") as handle:
        handle.seek(4096 * 3)
        handle.write(b"\xde\xad\xbe\xef not a b-tree page " * 1500)


async def test_health_runs_the_check_once_after_opening_and_then_reports_it_with_its_age(
    tmp_path: Path,
) -> None:
    store = EmbeddedBackend(await filled(tmp_path / "memories.db"))
    try:
        for _ in range(3):
            checks = await health(store)
            assert checks["sqlite"].status is Status.OK
            assert checks["sqlite"].detail.startswith("quick_check ok")
            assert "ago" in checks["sqlite"].detail
        assert store.integrity.runs == 1  # the first health waited for it; the others did not
    finally:
        await store.close()


async def test_a_file_damaged_before_it_is_opened_is_reported_by_the_first_health(
    tmp_path: Path,
) -> None:
    db = await filled(tmp_path / "memories.db")
    damage(db)
    store = EmbeddedBackend(db)
    try:
        checks = await health(store)
        assert checks["sqlite"].status is Status.ERROR
        assert "integrity check failed" in checks["sqlite"].detail
    finally:
        await store.close()


async def test_a_file_damaged_while_open_is_found_by_the_scheduled_check_and_its_repair_at_once(
    tmp_path: Path,
) -> None:
    db = await filled(tmp_path / "memories.db")
    shutil.copyfile(db, tmp_path / "good.db")
    now = [1000.0]
    store = EmbeddedBackend(db, clock=lambda: now[0])  # an injected clock, not a sleep
    try:
        assert (await health(store))["sqlite"].status is Status.OK
        damage(db)
        assert (await health(store))["sqlite"].status is Status.OK  # not due yet: the last result
        assert store.integrity.runs == 1
        now[0] += store.integrity.every_s
        checks = await health(store)  # due: started in the background; the last result meanwhile
        assert "quick_check" in checks["sqlite"].detail
        store.integrity.wait()
        assert store.integrity.runs == 2
        checks = await health(store)
        assert checks["sqlite"].status is Status.ERROR, checks["sqlite"]
        # the damage was met: the store now refuses the file until it changes on disk. By the
        # walk ("malformed"), or first by the health's own FTS probe, which runs beside the
        # walk it started (FTS5's SQLITE_CORRUPT_VTAB: "vtable constructor failed"): which
        # read meets it first is the threads' race, the refusal the same.
        detail = checks["sqlite"].detail
        assert "malformed" in detail or "vtable constructor failed" in detail, detail
        shutil.copyfile(tmp_path / "good.db", db)  # repaired in place: the next health sees it
        checks = await health(store)
        assert checks["sqlite"].status is Status.OK, checks["sqlite"]
    finally:
        await store.close()


async def test_closing_the_store_stops_a_check_under_way(tmp_path: Path) -> None:
    now = [1000.0]
    store = EmbeddedBackend(await filled(tmp_path / "memories.db"), clock=lambda: now[0])
    try:
        await health(store)
        now[0] += store.integrity.every_s
        await health(store)  # a scheduled check starts
    finally:
        await store.close()  # interrupts it and waits for its thread
    store.integrity.wait()  # returns: nothing is under way any more

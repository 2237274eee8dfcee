"""The embedded store's file on disk while the service runs: deleted, replaced, corrupted and
put back, locked by another process, and the outbox unusable. Real SQLite files; nothing
acknowledged is ever lost, health says what is wrong, and a repaired file is picked up by
the next call. (Immutable files: `tests/e2e/test_immutable_files.py`.)"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.backends.embedded_sql import store_error
from memory_orchestrator.errors import OutboxError, StoreUnreadable
from memory_orchestrator.models import (
    HealthReport,
    NewMemory,
    SearchRequest,
    Status,
    WriteAction,
    WriteReport,
    WriteRequest,
)
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.outbox import Outbox
from tests.faults import UnwritableOutbox

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("quick_retries")]


def service(
    settings: Settings, outbox: Outbox | None = None, write_wait_ms: int = 1000
) -> Orchestrator:
    s = settings.model_copy(deep=True)
    store = EmbeddedBackend(s.embedded_path(), write_wait_ms=write_wait_ms)
    return Orchestrator(store, s, outbox=outbox or Outbox(s.outbox_path()))


async def write(o: Orchestrator, content: str) -> WriteReport:
    return await o.write(WriteRequest(memory=NewMemory(content=content)))


def checks(report: HealthReport) -> dict[str, str]:
    return {c.name: f"{c.status.value}: {c.detail}" for c in report.checks}


def copies(db: Path, content: str) -> int:
    """Live memories holding exactly `content`, read from the file at `db` by a new
    connection (what a restarted server would see)."""
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT count(*) FROM memories WHERE content = ? AND deleted_at IS NULL", (content,)
        ).fetchone()
    conn.close()
    return int(row[0])


def backup(db: Path, to: Path) -> None:
    """A consistent copy of the store (SQLite's backup API), as an operator would keep."""
    with sqlite3.connect(db) as src, sqlite3.connect(to) as dst:
        src.backup(dst)
    src.close()
    dst.close()


@pytest.fixture
async def o(settings: Settings) -> AsyncIterator[Orchestrator]:
    made = service(settings)
    assert (await write(made, "The Lisbon office opens at eight.")).action is WriteAction.ADDED
    yield made
    await made.close()


# ---------------------------------------------------------------- deleted or replaced


async def test_a_store_file_deleted_while_serving_takes_no_write_and_queues_it(
    o: Orchestrator, tmp_path: Path
) -> None:
    db = o.settings.embedded_path()
    backup(db, tmp_path / "backup.db")
    db.unlink()  # the -wal and -shm stay, as after a careless `rm memories.db`
    content = "Ruth keeps the loading dock key at reception."
    report = await write(o, content)
    assert report.action is WriteAction.QUEUED, report.reason
    assert "deleted while open" in report.reason
    health = await o.health()
    assert health.status is Status.ERROR
    assert "deleted while open" in checks(health)["file"]
    assert "1 write(s) queued" in checks(health)["outbox"]
    with pytest.raises(StoreUnreadable, match="deleted while open"):  # never "nothing found"
        await o.search(SearchRequest(query="dock key"))
    assert not db.exists()  # nothing made a new empty store behind the operator's back

    shutil.copyfile(tmp_path / "backup.db", db)  # the operator puts the backup back
    health = await o.health()
    assert health.status is Status.OK, checks(health)
    assert "put back" in checks(health)["file"]
    assert "1 replayed now" in checks(health)["outbox"]
    assert copies(db, content) == 1  # in the file a restarted server reads
    assert copies(db, "The Lisbon office opens at eight.") == 1


async def test_a_store_file_replaced_while_serving_is_reopened(
    o: Orchestrator, tmp_path: Path
) -> None:
    db = o.settings.embedded_path()
    other = tmp_path / "other.db"
    backup(db, other)
    with sqlite3.connect(other) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")  # all of it in the one file
        conn.execute("UPDATE memories SET content = 'The Porto office opens at nine.'")
    conn.close()
    other.replace(db)  # a new file (another inode) at the path
    content = "The Porto office has a new alarm code."
    report = await write(o, content)
    assert report.action is WriteAction.ADDED, report.reason
    assert copies(db, content) == 1  # written to the file at the path, not the old inode
    assert copies(db, "The Porto office opens at nine.") == 1
    assert "replaced" in checks(await o.health())["file"]


async def test_the_same_store_file_moved_away_and_back_keeps_every_acknowledged_write(
    o: Orchestrator, tmp_path: Path
) -> None:
    """`mv memories.db moved.db; mv moved.db memories.db` while serving: the file put back
    is the one that was open (same device and inode), so its WAL is its own and is kept."""
    db = o.settings.embedded_path()
    before = [
        "Anya waters the ferns on the balcony.",
        "The blue van needs new tyres before winter.",
        "Marco's team ships the billing fix in March.",
    ]
    for content in before:
        assert (await write(o, content)).action is WriteAction.ADDED
    moved = db.with_name("moved.db")
    db.rename(moved)
    queued = "The third floor kitchen closes at six."
    assert (await write(o, queued)).action is WriteAction.QUEUED
    moved.rename(db)
    after = "The fire drill is on Thursday at ten."
    assert (await write(o, after)).action is WriteAction.ADDED
    health = await o.health()
    assert health.status is Status.OK, checks(health)
    assert "the same file" in checks(health)["file"]
    lost = [c for c in [*before, queued, after] if copies(db, c) != 1]
    assert lost == []
    assert not list(db.parent.glob("*.of-inode-*")), "the file's own WAL was set aside"


WORDS = (
    "heron osprey falcon magpie wren swift robin finch lark owl kite crane stork ibis egret"
    " plover tern gull dove jay puffin raven cedar maple birch alder rowan hazel aspen larch"
    " willow poplar spruce juniper laurel holly myrtle elder yew linden sorrel thyme basil"
).split()


async def test_the_same_store_file_deleted_and_linked_back_keeps_every_acknowledged_write(
    o: Orchestrator, tmp_path: Path
) -> None:
    """`ln memories.db keep.db; rm memories.db; ln keep.db memories.db`: the same inode."""
    db = o.settings.embedded_path()
    keep = tmp_path / "keep.db"
    acknowledged = ["The Lisbon office opens at eight."]
    for n in range(20):
        if n % 5 == 2:
            keep.unlink(missing_ok=True)
            keep.hardlink_to(db)
            db.unlink()
        if n % 5 == 3:
            db.hardlink_to(keep)
        content = f"{WORDS[2 * n]} {WORDS[2 * n + 1]}".capitalize() + " nest here."
        report = await write(o, content)
        assert report.action in (WriteAction.ADDED, WriteAction.QUEUED), report.reason
        acknowledged.append(content)
    await o.flush_outbox()
    assert (await o.health()).status is Status.OK
    lost = [c for c in acknowledged if copies(db, c) != 1]
    assert lost == []
    assert not list(db.parent.glob("*.of-inode-*")), "the file's own WAL was set aside"


# ---------------------------------------------------------------- corrupted, then repaired


async def test_a_store_corrupted_in_place_and_repaired_is_picked_up_by_the_next_call(
    o: Orchestrator, tmp_path: Path
) -> None:
    db = o.settings.embedded_path()
    backup(db, tmp_path / "good.db")
    with sqlite3.connect(db) as conn:  # as SQLite does once the WAL grows: all in the file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    (tmp_path / "junk").write_bytes(b"\xde\xad\xbe\xef not SQLite any more " * 2000)
    shutil.copyfile(tmp_path / "junk", db)  # the same file (inode), now junk
    with pytest.raises(StoreUnreadable, match="not a database"):  # never "nothing found"
        await o.search(SearchRequest(query="Lisbon office"))
    content = "The Friday retro moved to the small room."
    report = await write(o, content)
    assert report.action is WriteAction.QUEUED, report.reason
    assert "not a database" in report.reason
    health = await o.health()
    assert health.status is Status.ERROR
    assert "not a database" in checks(health)["sqlite"]

    shutil.copyfile(tmp_path / "good.db", db)  # a good copy put back into the same file
    health = await o.health()  # no other process wrote; the change on disk is enough
    assert health.status is Status.OK, checks(health)
    assert "1 replayed now" in checks(health)["outbox"]
    assert (await o.flush_outbox()).delivered == ()  # exactly once
    assert copies(db, content) == 1


async def test_a_broken_file_that_did_not_change_is_opened_again_only_after_a_backoff(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = settings.embedded_path()
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"\x00garbage, not SQLite\xff" * 512)
    now = [100.0]
    store = EmbeddedBackend(db, clock=lambda: now[0])  # an injected clock, not a sleep
    opens: list[str] = []
    real_connect = sqlite3.connect

    def counting(*args: Any, **kwargs: Any) -> Any:
        opens.append(str(args[0]))
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", counting)
    try:
        for _ in range(3):
            health = {c.name: c for c in await store.health()}
            assert health["sqlite"].status is Status.ERROR
            assert "not a database" in health["sqlite"].detail
        assert opens == []  # within the backoff: the known error, no new try
        now[0] += 60
        await store.health()
        assert len(opens) == 1
    finally:
        await store.close()


# ---------------------------------------------------------------- locked by another process

LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


@contextmanager
def write_locked(db: Path) -> Iterator[Callable[[], None]]:
    """Another process holding the write lock (BEGIN EXCLUSIVE; WAL readers go on) until
    the block ends or the callable it gives is called."""
    proc = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    stdin = proc.stdin

    def release() -> None:
        if not stdin.closed:
            stdin.write("\n")
            stdin.close()

    try:
        assert proc.stdout.readline().strip() == "locked"
        yield release
    finally:
        release()
        proc.wait(timeout=10)
        proc.stdout.close()


async def test_reads_go_on_while_a_write_waits_for_the_lock(settings: Settings) -> None:
    db = settings.embedded_path()
    store = EmbeddedBackend(db, busy_timeout_ms=60_000, write_wait_ms=60_000)
    await store.write(NewMemory(content="The kiln is fired on Tuesdays."))
    done: list[str] = []

    async def blocked_write() -> None:
        await store.write(NewMemory(content="Written once the lock is gone."))
        done.append("write")

    async def main() -> None:
        with write_locked(db) as release:
            async with anyio.create_task_group() as group:
                group.start_soon(blocked_write)
                deadline = time.monotonic() + 30
                while not store.writing:  # the write waits for the other process's lock
                    assert time.monotonic() < deadline
                    await anyio.sleep(0.01)
                with anyio.fail_after(30):  # behind one shared lock this would wait 60 s
                    hits = await store.search("kiln", 5)
                    health = {c.name: c for c in await store.health()}
                assert [h.memory.content for h in hits] == ["The kiln is fired on Tuesdays."]
                assert done == []  # the write still waits
                assert health["sqlite"].status is Status.OK
                release()

    try:
        await main()
        assert done == ["write"]
        assert copies(db, "Written once the lock is gone.") == 1
    finally:
        await store.close()


async def test_a_write_the_lock_holds_past_its_bound_is_queued_and_health_names_the_lock(
    settings: Settings,
) -> None:
    o = service(settings, write_wait_ms=50)
    db = settings.embedded_path()
    content = "The roof hatch code changed on Monday."
    try:
        await write(o, "The first memory opens the store.")
        with write_locked(db):
            report = await write(o, content)
            assert report.action is WriteAction.QUEUED
            assert "database is locked" in report.reason
            health = await o.health()
            assert health.status is Status.DEGRADED
            assert "database is locked" in checks(health)["writes"]
            assert checks(health)["sqlite"].startswith("ok")
        health = await o.health()
        assert health.status is Status.OK, checks(health)
        assert copies(db, content) == 1
    finally:
        await o.close()


# ---------------------------------------------------------------- errors of the file itself


async def test_a_read_only_store_error_is_transient_so_a_write_queues(settings: Settings) -> None:
    db = settings.embedded_path()
    await EmbeddedBackend(db).close()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        with pytest.raises(sqlite3.OperationalError) as caught:
            conn.execute("CREATE TABLE t (x)")
    finally:
        conn.close()
    error = store_error(caught.value, db)
    assert error.transient
    assert "readonly" in str(error)


async def test_an_outbox_that_cannot_keep_a_write_gives_one_error_naming_both_failures(
    settings: Settings,
) -> None:
    o = service(settings, outbox=UnwritableOutbox(settings.outbox_path()))
    try:
        await write(o, "The first memory opens the store.")
        settings.embedded_path().unlink()
        with pytest.raises(OutboxError) as caught:
            await write(o, "Neither the store nor the outbox can keep this.")
        message = str(caught.value)
        assert "deleted while open" in message  # the store's failure
        assert "disk I/O error" in message  # and the outbox's
        assert "nothing was stored" in message
    finally:
        await o.close()


async def test_an_in_memory_store_still_works_on_its_one_connection() -> None:
    store = EmbeddedBackend(":memory:")
    try:
        await store.write(NewMemory(content="Kept in memory only."))
        assert [h.memory.content for h in await store.search("memory", 3)] == [
            "Kept in memory only."
        ]
        assert {c.status for c in await store.health()} == {Status.OK}
    finally:
        await store.close()

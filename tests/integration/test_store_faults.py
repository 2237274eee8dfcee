"""Real stores in real failure modes, seen through the service: the embedded store's SQLite
file locked by another process or corrupted, the Mnemon contract double with a locked store,
a bad store name or no binary, and a killed npm MCP server. A read that reached no store
says so (`StoreUnreadable`, never an empty answer), health says what is wrong, writes are
queued, and the next call recovers."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.backends.mnemon import MnemonBackend, process
from memory_orchestrator.backends.mnemon_mcp import PACKAGE, MnemonMcpBackend
from memory_orchestrator.errors import StoreUnreadable
from memory_orchestrator.models import (
    ContextRequest,
    HealthReport,
    NewMemory,
    SearchRequest,
    Status,
    WriteAction,
    WriteReport,
    WriteRequest,
)
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.service.resilience import GuardedBackend, RetryPolicy
from memory_orchestrator.settings import MnemonSettings, Settings
from memory_orchestrator.state.outbox import Outbox
from tests.mnemon_double import fast_launcher, kinds, real_binary
from tests.npm_servers import kill_children, require_script

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("quick_retries")]

LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
if sys.argv[2] == "all":
    conn.execute("PRAGMA locking_mode=EXCLUSIVE")  # readers are shut out too
conn.execute("BEGIN EXCLUSIVE")
if sys.argv[2] == "all":
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    conn.execute("CREATE TABLE IF NOT EXISTS lock_holder (x)")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


@contextmanager
def locked_by_another_process(db: Path, mode: str) -> Iterator[None]:
    """A second process holding an EXCLUSIVE lock on `db` ("write": writers wait; "all":
    exclusive locking mode, readers are shut out too) until the block ends."""
    proc = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(db), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "locked"
        yield
    finally:
        proc.stdin.write("\n")
        proc.stdin.close()
        proc.wait(timeout=10)
        proc.stdout.close()


def service(backend: MemoryBackend, settings: Settings, timeout_s: float = 2.0) -> Orchestrator:
    s = settings.model_copy(deep=True)
    s.retrieval.timeout_s = timeout_s
    return Orchestrator(backend, s, outbox=Outbox(s.outbox_path()))


async def write(o: Orchestrator, content: str) -> WriteReport:
    return await o.write(WriteRequest(memory=NewMemory(content=content)))


def checks(report: HealthReport) -> dict[str, str]:
    return {c.name: f"{c.status.value}: {c.detail}" for c in report.checks}


async def found(o: Orchestrator, content: str) -> int:
    hits = await o.store_search(content, 10)
    return sum(h.memory.content == content for h in hits)


# ---------------------------------------------------------------- embedded: locked, corrupted


@pytest.fixture
async def embedded(settings: Settings) -> AsyncIterator[Orchestrator]:
    store = EmbeddedBackend(settings.embedded_path(), busy_timeout_ms=100, write_wait_ms=100)
    o = service(store, settings)
    await write(o, "The Lisbon office opens at eight on weekdays.")
    yield o
    await o.close()


async def test_a_write_locked_store_still_answers_reads_and_queues_writes(
    embedded: Orchestrator,
) -> None:
    content = "The loading dock key is kept by Ruth at reception."
    db = embedded.settings.embedded_path()
    with locked_by_another_process(db, "write"):
        result = await embedded.search(SearchRequest(query="Lisbon office"))
        assert result.items  # readers are not blocked (WAL)
        report = await write(embedded, content)
        assert report.action is WriteAction.QUEUED
        assert "locked" in report.reason
        health = await embedded.health()
        assert health.status is Status.DEGRADED
        assert "1 write(s) queued" in checks(health)["outbox"]
        assert "locked" in checks(health)["outbox"]
    health = await embedded.health()  # the lock is gone: health replays the queue
    assert health.status is Status.OK, checks(health)
    assert await found(embedded, content) == 1


async def test_a_store_locked_before_it_opens_gives_notes_and_health_error_with_the_reason(
    embedded: Orchestrator, settings: Settings
) -> None:
    db = embedded.settings.embedded_path()
    await embedded.close()  # an exclusive-mode lock needs the file to itself
    with locked_by_another_process(db, "all"):
        o = service(EmbeddedBackend(db, busy_timeout_ms=100), settings)
        with pytest.raises(StoreUnreadable, match="locked"):  # never "nothing found"
            await o.context(ContextRequest(query="when does the office open?"))
        health = await o.health()
        assert health.status is Status.ERROR
        assert "locked" in checks(health)["sqlite"]
        assert (await write(o, "Ruth keeps the dock key.")).action is WriteAction.QUEUED
    try:  # the lock is gone: the next call opens the store
        assert (await o.context(ContextRequest(query="when does the office open?"))).items
        assert (await o.flush_outbox()).depth == 0
        assert await found(o, "Ruth keeps the dock key.") == 1
    finally:
        await o.close()


async def test_a_corrupted_store_file_is_reported_and_writes_wait_for_its_repair(
    settings: Settings,
) -> None:
    db = settings.embedded_path()
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"\x00garbage, not SQLite\xff" * 512)
    o = service(EmbeddedBackend(db), settings)
    try:
        with pytest.raises(StoreUnreadable, match="not a database"):
            await o.search(SearchRequest(query="anything at all"))
        health = await o.health()
        assert health.status is Status.ERROR
        assert "not a database" in checks(health)["sqlite"]
        report = await write(o, "Written while the file was corrupted.")
        assert report.action is WriteAction.QUEUED
        assert "not a database" in report.reason
        db.unlink()  # restored (here: a fresh store); the next call reopens it
        assert (await o.health()).status is Status.OK
        assert await found(o, "Written while the file was corrupted.") == 1
    finally:
        await o.close()


# ---------------------------------------------------------------- the Mnemon contract double


@pytest.fixture
def double(tmp_path: Path) -> Path:
    return fast_launcher(tmp_path / "bin")


def mnemon(double: Path, data: Path, **options: object) -> MnemonBackend:
    return MnemonBackend(MnemonSettings(binary=double, data_dir=data, **options))


@pytest.fixture(params=kinds())
def any_mnemon(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """The contract double, then the real binary where one is found."""
    if request.param != "real":
        return fast_launcher(tmp_path / "bin")
    found = real_binary()
    assert found is not None
    return found


async def test_mnemon_with_a_locked_store_queues_the_write_until_the_lock_clears(
    any_mnemon: Path, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process, "LOCK_RETRIES", 1)
    monkeypatch.setattr(process, "FIRST_RETRY_DELAY_S", 0.01)
    data = tmp_path / "mnemon-data"
    o = service(mnemon(any_mnemon, data), settings, timeout_s=10)
    try:
        await write(o, "The staging cluster runs Postgres 16.")
        db = data / "data" / "default" / "mnemon.db"
        with locked_by_another_process(db, "write"):
            report = await write(o, "Nadia rotated the staging database password.")
            assert report.action is WriteAction.QUEUED
            assert "locked" in report.reason
            assert "queued" in checks(await o.health())["outbox"]
        assert (await o.flush_outbox()).depth == 0
        assert await found(o, "Nadia rotated the staging database password.") == 1
    finally:
        await o.close()


async def test_mnemon_with_a_bad_store_name_says_so_everywhere(
    double: Path, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNEMON_STORE", "no/slashes")
    o = service(mnemon(double, tmp_path / "mnemon-data"), settings)
    try:
        with pytest.raises(StoreUnreadable, match="no/slashes"):
            await o.search(SearchRequest(query="anything"))
        health = await o.health()
        assert health.status is Status.ERROR
        assert any("no/slashes" in d for d in checks(health).values())
        assert (await write(o, "Kept until the store name is fixed.")).action is WriteAction.QUEUED
    finally:
        await o.close()


async def test_mnemon_without_its_binary_says_how_to_install_it(
    settings: Settings, tmp_path: Path
) -> None:
    o = service(mnemon(tmp_path / "nope" / "mnemon", tmp_path / "mnemon-data"), settings)
    try:
        with pytest.raises(StoreUnreadable, match=r"not found.*go install"):
            await o.search(SearchRequest(query="anything"))
        health = await o.health()
        assert health.status is Status.ERROR
        assert "go install" in checks(health)["binary"]
        assert (await write(o, "Kept until mnemon is installed.")).action is WriteAction.QUEUED
    finally:
        await o.close()


async def test_a_hanging_mnemon_is_cut_off_and_health_says_it_timed_out(
    double: Path, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNEMON_DOUBLE_SLEEP_S", "30")  # every process hangs first
    o = service(mnemon(double, tmp_path / "mnemon-data", timeout_s=0.5), settings, timeout_s=1)
    try:
        with pytest.raises(StoreUnreadable, match="did not answer") as raised:
            await o.search(SearchRequest(query="anything"))
        assert raised.value.transient
        health = await o.health()
        assert health.status is Status.ERROR
        assert any("timed out" in d for d in checks(health).values()), checks(health)
        assert (await write(o, "Kept until mnemon answers again.")).action is WriteAction.QUEUED
        monkeypatch.delenv("MNEMON_DOUBLE_SLEEP_S")
        assert (await o.flush_outbox()).depth == 0
        assert await found(o, "Kept until mnemon answers again.") == 1
    finally:
        await o.close()


# ---------------------------------------------------------------- a killed npm MCP server


async def test_a_killed_npm_server_shows_in_health_and_the_next_calls_recover(
    settings: Settings, tmp_path: Path
) -> None:
    db = tmp_path / "mnemon-mcp.db"
    store = MnemonMcpBackend(db, script=require_script(PACKAGE), timeout_s=20)
    o = service(store, settings, timeout_s=30)
    try:
        first = await write(o, "The capybarine archive is mirrored nightly.")
        assert first.action is WriteAction.ADDED
        kill_children(str(db))
        health = await o.health()  # the probe restarts the server and says why
        assert health.status is Status.DEGRADED
        assert "restarted" in checks(health)["mnemon-mcp"]
        assert "last failure" in checks(health)["mnemon-mcp"]
        assert (await o.health()).status is Status.OK  # reported once
        kill_children(str(db))
        starts = store.client.starts
        content = "The quokkaform ledger moved to the new bucket."
        # The store call a write makes meets the dead server: it may or may not have written,
        # so the content hash is looked up (restarting the server) before one more try.
        guarded = GuardedBackend(store, RetryPolicy())  # the wrapper the service uses
        outcome = await guarded.write(NewMemory(content=content))
        assert outcome.action is WriteAction.ADDED
        assert store.client.starts == starts + 1
        assert await found(o, content) == 1
    finally:
        await o.close()

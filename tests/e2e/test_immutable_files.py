"""Store and outbox files made immutable (`chattr +i`) under a running service, in a process
of its own: it must not die (a write to a mapped page of an immutable file is a SIGBUS),
writes queue with the reason, health says error, an outbox that cannot keep a write gives
one error naming both failures, and once the files are writable again the queue is
delivered exactly once. Needs root and a filesystem with the immutable flag (ext4 here);
skipped elsewhere (the outbox failure alone is covered everywhere by a fault hook in
tests/integration/test_store_files.py)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, subprocess, sys
from pathlib import Path
import anyio
from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.errors import OutboxError, StoreUnreadable
from memory_orchestrator.models import NewMemory, SearchRequest, WriteRequest
from memory_orchestrator.state.outbox import Outbox
from memory_orchestrator.service import Orchestrator, resilience
from memory_orchestrator.settings import load_settings

settings = load_settings(data_dir=sys.argv[1])
resilience.BASE_DELAY_S = 0.01  # retries that pause milliseconds
db, outbox = settings.embedded_path(), settings.outbox_path()
seen = {}


def chattr(flag, path):
    for name in (path.name, path.name + "-wal", path.name + "-shm"):
        f = path.with_name(name)
        if f.exists():
            subprocess.run(["chattr", flag, "--", str(f)], check=True)


async def main():
    o = Orchestrator(EmbeddedBackend(db), settings, outbox=Outbox(outbox))
    write = lambda text: o.write(WriteRequest(memory=NewMemory(content=text)))
    seen["first"] = (await write("The Lisbon office opens at eight.")).action.value
    chattr("+i", db)
    queued = await write("Ruth keeps the loading dock key.")
    seen["queued"] = [queued.action.value, queued.reason]
    try:
        found = await o.search(SearchRequest(query="Lisbon office"))
        trace = o.trace(found.trace_id)
        failed = [e.values["error"] for e in trace.events if e.kind == "search_failed"]
        seen["search_errors"] = failed
    except StoreUnreadable as exc:  # no search reached it: an error, not an empty answer
        seen["search_errors"] = [str(exc)]
    health = await o.health()
    seen["health"] = [health.status.value, {c.name: c.detail for c in health.checks}]
    chattr("+i", outbox)
    try:
        await write("Neither file can keep this one.")
        seen["both"] = "no error"
    except OutboxError as exc:
        seen["both"] = str(exc)
    chattr("-i", outbox)
    chattr("-i", db)
    health = await o.health()
    seen["after"] = [health.status.value, {c.name: c.detail for c in health.checks}]
    chattr("+i", db)  # closing with the files immutable must not kill the process either
    await o.close()
    chattr("-i", db)
    print(json.dumps(seen), flush=True)

anyio.run(main)
"""


def chattr_works(tmp_path: Path) -> bool:
    if shutil.which("chattr") is None or os.geteuid() != 0:
        return False
    probe = tmp_path / "probe"
    probe.write_text("x")
    if subprocess.run(
        ["chattr", "+i", "--", str(probe)], check=False, capture_output=True
    ).returncode:
        return False
    subprocess.run(["chattr", "-i", "--", str(probe)], check=True)
    return True


def copies(db: Path, content: str) -> int:
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT count(*) FROM memories WHERE content = ? AND deleted_at IS NULL", (content,)
        ).fetchone()
    conn.close()
    return int(row[0])


def test_immutable_store_and_outbox_files_are_survived_and_nothing_is_lost(
    tmp_path: Path,
) -> None:
    if not chattr_works(tmp_path):
        pytest.skip("needs root and a filesystem supporting chattr +i")
    data = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(data)],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    finally:
        for f in data.glob("*"):
            subprocess.run(["chattr", "-i", "--", str(f)], check=False, capture_output=True)
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])  # -7 would be SIGBUS
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["first"] == "added"
    action, reason = seen["queued"]
    assert action == "queued"
    assert "not writable" in reason
    assert any("not writable" in e for e in seen["search_errors"])  # the store's own error
    status, checks = seen["health"]
    assert status == "error"
    assert "not writable" in checks["file"]
    assert "1 write(s) queued" in checks["outbox"]
    assert "not writable" in seen["both"]  # the store's failure
    assert "outbox" in seen["both"]
    assert "readonly" in seen["both"] or "I/O error" in seen["both"]  # and the outbox's
    status, checks = seen["after"]
    assert status == "ok", checks
    assert "1 replayed now" in checks["outbox"]
    db = data / "memories.db"
    assert copies(db, "Ruth keeps the loading dock key.") == 1
    assert copies(db, "Neither file can keep this one.") == 0


VECTORS_SCRIPT = """
import json, subprocess, sys
import anyio
from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import NewMemory, SearchRequest, WriteRequest
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import load_settings

settings = load_settings(data_dir=sys.argv[1])
settings.semantic.enabled, settings.semantic.model = True, "wordllama"
seen = {}


def chattr(flag):
    for f in (settings.data_dir / "semantic").glob("*"):
        subprocess.run(["chattr", flag, "--", str(f)], check=True)


async def main():
    o = Orchestrator(EmbeddedBackend(settings.embedded_path()), settings)
    write = lambda text: o.write(WriteRequest(memory=NewMemory(content=text)))
    await write("The puppy chased the ball around the garden.")
    await o.search(SearchRequest(query="dog playing outside"))
    chattr("+i")  # the kept vectors (a cache) can no longer be written
    await write("Quarterly revenue grew in Europe after the price change.")
    found = await o.search(SearchRequest(query="sales went up"))
    seen["found"] = [i.summary for i in found.items]
    seen["health"] = (await o.health()).status.value
    await o.close()
    chattr("-i")
    print(json.dumps(seen), flush=True)

anyio.run(main)
"""


def test_an_immutable_vector_file_is_survived(tmp_path: Path) -> None:
    """The semantic index's kept vectors are a cache: a file made immutable under a running
    service must not kill it (WAL would map its -shm file: SIGBUS); the index goes on in
    memory."""
    pytest.importorskip("wordllama")
    if not chattr_works(tmp_path):
        pytest.skip("needs root and a filesystem supporting chattr +i")
    data = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", VECTORS_SCRIPT, str(data)],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    finally:
        for f in (data / "semantic").glob("*"):
            subprocess.run(["chattr", "-i", "--", str(f)], check=False, capture_output=True)
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])  # -7 would be SIGBUS
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert "Quarterly revenue grew in Europe after the price change." in seen["found"]
    assert seen["health"] == "ok"

"""The MCP tools over a real stdio session while the store file is corrupted: every tool
answers (no tool error), with a note saying why results are missing; the write is queued;
health says error with the reason and the outbox depth; once the file is repaired, the next
health call replays the write. Both ways: in the client's own process and through the stdio
relay and the shared process (`tests.e2e.servers.WAYS`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal

from tests.e2e.servers import WAYS
from tests.e2e.test_mcp_stdio import Client, _session, _text

pytestmark = pytest.mark.integration


@pytest.fixture(params=WAYS)
def broken(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Client, Path]]:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    db = data_dir / "memories.db"
    db.write_bytes(b"\x00this is not SQLite\xff" * 500)
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(
            _session(data_dir, request.param, Path(os.environ["XDG_RUNTIME_DIR"]))
        ) as session,
    ):
        yield Client(portal, session), db


def test_every_tool_answers_over_a_corrupted_store_and_recovers(
    broken: tuple[Client, Path],
) -> None:
    client, db = broken
    for name, args in (  # no search reached the store: an error that says so, not "nothing"
        ("memory_search", {"query": "Vendor X firmware"}),
        ("memory_context", {"query": "recent issues with Vendor X"}),
        ("memory_explain", {"query": "why did the milestone slip?"}),
    ):
        failed = client.call(name, args)
        assert failed.is_error, (name, _text(failed))
        assert "no search reached the store" in _text(failed), (name, _text(failed))
        assert "not a database" in _text(failed), (name, _text(failed))
    failed = client.call("memory_expand", {"entities": ["Vendor X"], "detail": True})
    assert failed.is_error, _text(failed)  # no seed could be read: not "nothing around them"
    assert "reading the seeds failed" in _text(failed), _text(failed)
    assert "not a database" in _text(failed), _text(failed)

    content = "Vendor X promised firmware 2.4 for the April pilot."
    queued = client.ok("memory_write", {"content": content, "entities": ["Vendor X"]})
    assert queued["action"] == "queued"
    assert queued["outbox_seq"] == 1
    assert "not a database" in queued["reason"]

    health = client.ok("memory_health")
    assert health["status"] == "error"
    checks = {c["name"]: c for c in health["checks"]}
    assert "not a database" in checks["sqlite"]["detail"]
    assert checks["outbox"]["status"] == "degraded"
    assert "1 write(s) queued" in checks["outbox"]["detail"]

    db.unlink()  # repaired: here, a fresh store file
    health = client.ok("memory_health")
    assert health["status"] == "ok", health
    assert "1 replayed now" in {c["name"]: c for c in health["checks"]}["outbox"]["detail"]
    hits = client.ok("memory_search", {"query": "firmware 2.4 April pilot"})["items"]
    assert [h["summary"] for h in hits].count(content) == 1

"""A long write costs its own client: over a real `orchestrator serve --transport http`
process, a search sent while a long write that resembles the stored notes is being compared
answers before the write does (the comparison runs in a worker thread, not on the event
loop). (A long note whose identifier at character 7,900 changes is kept:
`test_identifiers_minilm.py`.)

The write goes over a raw socket, so that its request is on the wire, whole, before the
search is sent: the order of the two answers decides, no time is measured."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import SocketStream

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import (
    EventKind,
    HealthReport,
    NewMemory,
    SearchRequest,
    Value,
    WriteRequest,
)
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.traces import TraceStore
from tests.events import said
from tests.factories import NOW
from tests.http_load import ServerProcess, http_server, make_token, mcp_session
from tests.integration.test_write_meaning_minilm import minilm
from tests.long_notes import long_note

pytestmark = pytest.mark.integration

TOKEN = make_token("writer")
STORED = 10  # the store's closest memories the write path compares: all long and alike
PROTOCOL = "2025-06-18"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, minilm_dir: Path) -> Iterator[ServerProcess]:
    """A server over a store of long notes of one family, with the semantic model on (as
    wherever it runs: the write path asks it about swapped words)."""
    data_dir = tmp_path_factory.mktemp("long-writes")

    async def preload() -> None:
        store = EmbeddedBackend(data_dir / "memories.db")
        try:
            await store.write_many([NewMemory(content=long_note(1, n)) for n in range(STORED)])
        finally:
            await store.close()

    anyio.run(preload)
    env = {
        "ORCHESTRATOR_SEMANTIC__ENABLED": "true",
        "ORCHESTRATOR_SEMANTIC__MODEL": "minilm",
        "ORCHESTRATOR_SEMANTIC__MODEL_DIR": str(minilm_dir),
    }
    with http_server(data_dir, [TOKEN.spec], env=env) as running:
        yield running


def _request(server: ServerProcess, session_id: str, tool: str, arguments: dict[str, Any]) -> bytes:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
    ).encode()
    host = server.base_url.removeprefix("http://")
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN.secret}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        f"mcp-session-id: {session_id}\r\nmcp-protocol-version: {PROTOCOL}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


async def _answer(stream: SocketStream) -> dict[str, Any]:
    """The JSON-RPC answer read from the socket up to its end (the connection closes)."""
    data = b""
    async with stream:
        while True:
            try:
                data += await stream.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                break
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), data[:500]
    if b"transfer-encoding: chunked" in head.lower():
        body = _unchunked(body)
    answer: dict[str, Any] = json.loads(body)
    return answer


def _unchunked(body: bytes) -> bytes:
    out = b""
    while body:
        size, _, rest = body.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            break
        out, body = out + rest[:n], rest[n + 2 :]
    return out


async def _write_raw(server: ServerProcess, session_id: str, content: str) -> SocketStream:
    port = int(server.base_url.rsplit(":", 1)[1])
    stream = await anyio.connect_tcp("127.0.0.1", port)
    await stream.send(_request(server, session_id, "memory_write", {"content": content}))
    return stream


def test_a_search_sent_while_a_long_write_is_compared_answers_first(server: ServerProcess) -> None:
    order: list[str] = []
    answers: dict[str, Any] = {}

    async def main() -> None:
        ids: list[str] = []
        async with (
            mcp_session(server.mcp_url, TOKEN.secret, session_ids=ids),
            mcp_session(server.mcp_url, TOKEN.secret) as reader,
        ):
            stream = await _write_raw(server, ids[0], long_note(1, STORED + 1))

            async def wait_for_write() -> None:
                answers["write"] = await _answer(stream)
                order.append("write")

            async with anyio.create_task_group() as group:
                group.start_soon(wait_for_write)
                found = await reader.call_tool("memory_search", {"query": "vendor decision"})
                answers["search"] = found
                order.append("search")

    anyio.run(main)
    assert not answers["search"].is_error
    assert answers["write"]["result"]["structuredContent"]["action"] == "added"
    assert order == ["search", "write"]


def test_a_write_is_embedded_before_it_is_answered(settings: Settings, minilm_dir: Path) -> None:
    """The writer waits for its memory's embedding (a long one's takes longest), not the
    next reader: right after the write is answered, the semantic index holds it, before any
    query pulled it."""
    tuned = minilm(settings, minilm_dir)

    async def main() -> tuple[str, str]:
        o = Orchestrator(
            EmbeddedBackend(tuned.embedded_path()),
            tuned,
            traces=TraceStore(None),
            clock=lambda: NOW,
        )
        try:
            await o.write(WriteRequest(memory=NewMemory(content="Dana owns the vendor contract.")))
            await o.search(SearchRequest(query="vendor contract"))  # the index loaded, up to date
            before = _semantic_detail(await o.health())
            await o.write(WriteRequest(memory=NewMemory(content=long_note(3, 0))))
            return before, _semantic_detail(await o.health())
        finally:
            await o.close()

    before, after = anyio.run(main)
    assert "1 memories indexed" in before, before
    assert "2 memories indexed" in after, after
    assert "being embedded" not in after


def _semantic_detail(report: HealthReport) -> str:
    return next(c.detail for c in report.checks if c.name == "semantic")


def test_a_write_before_any_query_leaves_the_indexes_to_the_first_query(
    settings: Settings, minilm_dir: Path
) -> None:
    """A write that loads the model (to read a swapped word) takes nothing into the indexes
    before a query made them all: the first query's pull brings every memory into each."""
    tuned = minilm(settings, minilm_dir)

    async def main() -> list[dict[str, Value]]:
        o = Orchestrator(
            EmbeddedBackend(tuned.embedded_path()),
            tuned,
            traces=TraceStore(None),
            clock=lambda: NOW,
        )
        try:
            for content in (
                "The design review starts at 10:00.",
                "The design review begins at 10:00.",  # the model is asked, and loads
                "Dana owns the vendor contract.",
            ):
                await o.write(WriteRequest(memory=NewMemory(content=content)))
            found = await o.search(SearchRequest(query="design review vendor contract"))
            trace = o.trace(found.trace_id)
            assert trace is not None
            return said(trace, EventKind.LOCAL_INDEX_ADDED)
        finally:
            await o.close()

    added = anyio.run(main)
    assert added == [{"count": 2}], added

"""A bug in an adapter fails the request that met it: a `TypeError` raised by the store
(`tests.faults.FaultyBackend`, mode "bug", around the real embedded store) is never turned into
a note and an answer without the store ("expansion failed ...; skipped", "partial results").
Over MCP the tool call is an error, the traceback is logged, and the bug is counted by place
(the metrics, and a degraded health check); in the CLI it ends the command with exit code 1
and the traceback."""

from __future__ import annotations

import io
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from mcp import Client
from mcp.types import CallToolResult, TextContent
from typer.testing import CliRunner

from memory_orchestrator.backends import registry
from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.errors import unexpected_errors
from memory_orchestrator.faces.cli import app
from memory_orchestrator.faces.mcp.server import create_server
from memory_orchestrator.models import (
    ContextRequest,
    ExpandRequest,
    NewMemory,
    SearchRequest,
    Status,
    WriteRequest,
)
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.observability import Observer
from tests.faults import FaultyBackend
from tests.stores import demo_store

pytestmark = pytest.mark.integration


@pytest.fixture
def loaded(settings: Settings) -> Path:
    """The embedded store holding the built-in sample."""
    return demo_store(settings)


def _search(o: Orchestrator) -> Awaitable[Any]:
    return o.search(SearchRequest(query="Vendor X firmware", expand=True))


def _context(o: Orchestrator) -> Awaitable[Any]:
    return o.context(ContextRequest(query="recent issues with Vendor X"))


def _expand(o: Orchestrator) -> Awaitable[Any]:
    return o.expand(ExpandRequest(seed_ids=["mem_x"], entities=["Vendor X"], hops=2))


def _write(o: Orchestrator) -> Awaitable[Any]:
    memory = NewMemory(content="Vendor X shipped firmware 2.3 to Acme Corp.", entities=["Vendor X"])
    return o.write(WriteRequest(memory=memory))


# Each is an enrichment the request goes on without when the store fails (a note says so):
# expansion, the context's neighbours, the expansion of `memory_expand`, the write's links.
CASES: list[tuple[str, Callable[[Orchestrator], Awaitable[Any]]]] = [
    ("neighbors", _search),
    ("neighbors", _context),
    ("neighbors", _expand),
    ("link", _write),
]


@pytest.mark.parametrize(("op", "call"), CASES, ids=["search", "context", "expand", "write"])
async def test_a_bug_in_the_adapter_fails_the_request(
    settings: Settings, loaded: Path, op: str, call: Callable[[Orchestrator], Awaitable[Any]]
) -> None:
    faulty = FaultyBackend(EmbeddedBackend(loaded), {op: "bug"})
    o = Orchestrator(faulty, settings)
    try:
        with pytest.raises(TypeError, match=f"injected bug in {op}"):
            await call(o)
        assert faulty.injected == {op: 1}  # the call was made, and failed the request
    finally:
        await o.close()


@pytest.fixture
def buggy(settings: Settings, loaded: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings naming a registered store whose `neighbors` has a bug (through the registry's
    own table, so that the registration ends with the test)."""
    monkeypatch.setitem(
        registry._extra,
        "buggy",
        lambda s: FaultyBackend(registry.create("embedded", s), {"neighbors": "bug"}),
    )
    return settings.model_copy(update={"backend": "buggy"})


def _caused_by_type_error(exc: BaseException | None) -> bool:
    while exc is not None:
        if isinstance(exc, TypeError):
            return True
        exc = exc.__cause__
    return False


def _text(result: CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, TextContent))


def test_over_mcp_a_bug_is_a_tool_error_logged_and_counted(
    buggy: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    observer = Observer(io.StringIO())
    before = unexpected_errors().get("tool memory_search", 0)
    server = create_server(buggy, observer)
    with (
        caplog.at_level(logging.ERROR),
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(server)) as session,
    ):
        args = {"query": "Vendor X firmware", "expand": True}
        failed: CallToolResult = portal.call(session.call_tool, "memory_search", args)
        health: CallToolResult = portal.call(session.call_tool, "memory_health", {})
    assert failed.is_error, _text(failed)
    assert "partial results" not in _text(failed)
    logged = [r for r in caplog.records if r.exc_info and _caused_by_type_error(r.exc_info[1])]
    assert logged, caplog.text  # with its traceback
    assert unexpected_errors()["tool memory_search"] == before + 1
    metrics = observer.metrics.render().decode()
    assert 'orchestrator_unexpected_errors_total{place="tool memory_search"} 1.0' in metrics
    report = health.structured_content
    assert report is not None
    (check,) = [c for c in report["checks"] if c["name"] == "unexpected_errors"]
    assert check["status"] == Status.DEGRADED
    assert "tool memory_search (1)" in check["detail"]


def test_in_the_cli_a_bug_ends_the_command_with_its_traceback(buggy: Settings) -> None:
    args = ["--data-dir", str(buggy.data_dir), "--backend", "buggy", "--json", "search"]
    result = CliRunner().invoke(app, [*args, "--expand", "Vendor X firmware"])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, TypeError), result.output
    assert "partial results" not in result.output

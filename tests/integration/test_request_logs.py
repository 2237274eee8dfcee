"""The service reports every finished request to its observer, over the real embedded store."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import anyio
import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.demo import load_demo
from memory_orchestrator.models import ContextRequest, SearchRequest, ToolName
from memory_orchestrator.service import Orchestrator, request_stats
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.observability import Observer
from memory_orchestrator.state.traces import TraceStore
from tests.factories import NOW

pytestmark = pytest.mark.integration


@pytest.fixture
def logged(settings: Settings) -> Iterator[tuple[Orchestrator, io.StringIO]]:
    stream = io.StringIO()
    backend = EmbeddedBackend(settings.embedded_path())
    orchestrator = Orchestrator(
        backend,
        settings,
        traces=TraceStore(settings.trace_path()),
        clock=lambda: NOW,
        observer=Observer(stream),
    )
    anyio.run(lambda: load_demo(orchestrator))
    stream.seek(0)
    stream.truncate()
    yield orchestrator, stream
    anyio.run(orchestrator.close)


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


async def test_each_search_and_context_logs_one_line_with_its_trace_id(
    logged: tuple[Orchestrator, io.StringIO],
) -> None:
    orchestrator, stream = logged
    found = await orchestrator.search(SearchRequest(query="Vendor X firmware milestone"))
    packed = await orchestrator.context(ContextRequest(query="Who owns procurement?"))
    lines = _lines(stream)
    assert [line["trace_id"] for line in lines] == [found.trace_id, packed.trace_id]
    first = lines[0]
    assert first["tool"] == "search"
    assert first["status"] == "ok"
    assert isinstance(first["candidates"], int)
    assert first["candidates"] >= len(found.items) > 0
    assert isinstance(first["latency_ms"], float)


async def test_the_entity_cache_hit_is_counted(logged: tuple[Orchestrator, io.StringIO]) -> None:
    orchestrator, stream = logged
    await orchestrator.search(SearchRequest(query="Dana Whitfield"))
    await orchestrator.search(SearchRequest(query="Dana Whitfield"))
    hits = [line["cache_hits"] for line in _lines(stream)]
    assert hits[-1] == 1


async def test_a_failure_is_kept_as_an_error_trace_and_counted_in_stats(
    logged: tuple[Orchestrator, io.StringIO],
) -> None:
    orchestrator, stream = logged
    await orchestrator.search(SearchRequest(query="Vendor X"))
    failed = orchestrator.record_failure(ToolName.SEARCH, {"query": ""}, "invalid arguments", 1.5)
    assert orchestrator.trace(failed.trace_id) is not None
    assert _lines(stream)[-1]["error"] == "invalid arguments"
    report = request_stats(orchestrator.settings)
    search = next(row for row in report.tools if row.tool == "search")
    assert search.count == 2
    assert search.errors == 1
    assert search.error_rate == 0.5

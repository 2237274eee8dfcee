"""The MCP tools through a real MCP client session (in-process transport, the server
built by `create_server` over the embedded store): any JSON arguments, of any type, give
either a result or one of our clear tool errors; never a crash (whose message would be only
`Error executing tool <name>`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.types import CallToolResult, TextContent

from memory_orchestrator.faces.mcp.server import create_server
from memory_orchestrator.models import EventKind
from memory_orchestrator.settings import Settings
from tests.property.support import ANY_CHAR, JSON, MOMENTS, PROPS, TEXT, ints, mostly

pytestmark = pytest.mark.integration
LIMIT = 100
# Every parameter of every tool, plus an unknown one.
PARAMS = {
    "memory_context": ["query", "task", "response_budget", "filters", "expand", "as_of", "group_by"],
    "memory_search": ["query", "task", "filters", "top_k", "expand", "as_of", "passthrough"],
    "memory_expand": ["seed_ids", "entities", "query", "hops", "edge_types", "limit"],
    "memory_write": [
        "content", "type", "entities", "tags", "created_at", "source", "importance",
        "confidence", "metadata", "on_duplicate", "link_related", "dry_run",
    ],
    "memory_explain": ["trace_id", "query"],
    "memory_health": [],
    "memory_forget": ["ids", "reason", "undo"],
}  # fmt: skip
OUR_ERRORS = (
    "invalid arguments: ",
    "unknown trace id: ",
    "memory store error: ",
    "forgotten-memory list error: ",
)
# Plausible values per parameter name, so many calls get past validation; any JSON otherwise.
PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "query": TEXT,
    "task": TEXT,
    "content": TEXT,
    "top_k": ints(1, 100),
    "limit": ints(1, 100),
    "hops": ints(1, 4),
    "as_of": MOMENTS.map(lambda m: m.isoformat()),
    "created_at": MOMENTS.map(lambda m: m.isoformat()),
    "seed_ids": st.lists(st.text(ANY_CHAR, max_size=20) | st.just("mem_1"), max_size=4),
    "entities": st.lists(st.text(ANY_CHAR, max_size=20), max_size=4),
    "tags": st.lists(st.text(ANY_CHAR, max_size=20), max_size=4),
    "type": st.sampled_from(["semantic", "episodic", "procedural", "resource", "rumour"]),
    "group_by": st.sampled_from(["auto", "entity", "time", "none", "colour"]),
    "response_budget": st.fixed_dictionaries(
        {"max_items": ints(1, 100), "max_chars": ints(200, 100_000)}
    ),
    "importance": st.floats(-1, 2),
    "trace_id": st.text(ANY_CHAR, max_size=70),
    "ids": st.lists(st.text(ANY_CHAR, max_size=20) | st.just("mem_1"), max_size=4),
    "reason": TEXT,
    "undo": st.booleans(),
}


REQUIRED = {
    "memory_context": ["query"],
    "memory_search": ["query"],
    "memory_expand": ["seed_ids"],
    "memory_write": ["content"],
    "memory_explain": ["query"],
    "memory_health": [],
    "memory_forget": ["ids"],
}


def _arguments(tool: str) -> st.SearchStrategy[dict[str, Any]]:
    """Mostly calls a client could make (required names present, values of the right kind),
    else any JSON under any of the names, unknown ones included."""
    names = [*PARAMS[tool], "unexpected"]
    anything = st.fixed_dictionaries({}, optional={n: JSON for n in names})
    need = REQUIRED[tool]
    plausible = st.fixed_dictionaries(
        {n: PLAUSIBLE[n] for n in need},
        optional={n: PLAUSIBLE[n] for n in PARAMS[tool] if n in PLAUSIBLE and n not in need},
    )
    return mostly(
        plausible,
        st.fixed_dictionaries({}, optional={n: mostly(PLAUSIBLE.get(n, JSON), JSON) for n in names})
        | anything,
    )


@pytest.fixture
def session(settings: Settings) -> Iterator[tuple[BlockingPortal, Client]]:
    settings.limits.max_query_chars = LIMIT
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(create_server(settings))) as client,
    ):
        yield portal, client


def _call(
    session: tuple[BlockingPortal, Client], tool: str, args: dict[str, Any]
) -> CallToolResult:
    portal, client = session
    result: CallToolResult = portal.call(client.call_tool, tool, args)
    return result


def _text(result: CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, TextContent))


MCP = settings(
    PROPS,
    max_examples=25,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize("tool", sorted(PARAMS))
@MCP
@given(data=st.data())
def test_any_arguments_give_a_result_or_a_clear_error(
    session: tuple[BlockingPortal, Client], tool: str, data: st.DataObject
) -> None:
    args = data.draw(_arguments(tool), label="arguments")
    result = _call(session, tool, args)
    if not result.is_error:
        event(f"{tool}: answered")
        assert isinstance(result.structured_content, dict)
        return
    message = _text(result)
    prefix = f"Error executing tool {tool}: "
    assert message.startswith(prefix), f"not one of our errors (a crash?): {message!r}"
    assert message.removeprefix(prefix).startswith(OUR_ERRORS), message
    event(f"{tool}: {message.removeprefix(prefix)[:30]}")
    assert "Traceback" not in message
    assert "errors.pydantic.dev" not in message


@MCP
@given(words=st.lists(st.text(ANY_CHAR, min_size=1, max_size=15), min_size=30, max_size=80))
def test_an_oversized_query_is_cut_with_a_note_in_the_result(
    session: tuple[BlockingPortal, Client], words: list[str]
) -> None:
    query = " ".join(["Vendor", "X", *words])
    result = _call(session, "memory_search", {"query": query, "detail": True})
    assert not result.is_error, _text(result)
    assert isinstance(result.structured_content, dict)
    trace_id = result.structured_content["trace_id"]
    told = _call(session, "memory_explain", {"trace_id": trace_id})
    assert isinstance(told.structured_content, dict)
    seen = [e["kind"] for e in told.structured_content["trace"]["events"]]
    assert (EventKind.QUERY_CUT in seen) == (len(query) > LIMIT)


def test_the_server_under_test_has_the_configured_limit(tmp_path: Path) -> None:
    assert Settings(data_dir=tmp_path).limits.max_query_chars > LIMIT  # the fixture lowers it

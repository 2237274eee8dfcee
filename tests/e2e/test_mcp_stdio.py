"""The MCP server end to end: a real client session over stdio to a real server process.

One server process serves the whole module (its session lives in an anyio blocking portal, so
the tests stay plain functions), once in the client's own process and once through the stdio
relay and the shared process (`tests.e2e.servers.WAYS`): every test passes both ways. Every
request is bounded by the session's read timeout.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession
from mcp.types import CallToolResult, TextContent, Tool

from tests.e2e.servers import WAYS, mcp_session, way_fixture

pytestmark = pytest.mark.integration

TOOLS = {
    "memory_search",
    "memory_expand",
    "memory_context",
    "memory_write",
    "memory_explain",
    "memory_health",
    "memory_forget",
}
REQUEST_TIMEOUT_S = 20.0
START_TIMEOUT_S = 30.0

MEMORIES: list[dict[str, Any]] = [
    {
        "content": "Vendor X missed the March delivery milestone for Project Atlas "
        "because of firmware instability in the radio module.",
        "type": "episodic",
        "entities": ["Vendor X", "Project Atlas"],
        "created_at": "2026-03-15T10:00:00Z",
    },
    {
        "content": "Dana Whitfield leads the Infra team and owns procurement escalations.",
        "type": "semantic",
        "entities": ["Dana Whitfield", "Infra team"],
    },
    {
        "content": "The Infra team escalated a procurement risk about Vendor X firmware "
        "after the missed milestone.",
        "type": "episodic",
        "entities": ["Infra team", "Vendor X"],
        "created_at": "2026-03-20T09:30:00Z",
    },
    {
        "content": "To flash radio firmware, put the gateway in recovery mode and run the "
        "vendor flashing tool over USB.",
        "type": "procedural",
        "entities": ["Vendor X"],
        "tags": ["firmware", "runbook"],
    },
]


@dataclass
class Client:
    """A sync face over one async MCP session living in a blocking portal."""

    portal: BlockingPortal
    session: ClientSession

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
        result = self.portal.call(self._call, name, arguments or {})
        assert isinstance(result, CallToolResult)
        return result

    async def _call(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        with anyio.fail_after(REQUEST_TIMEOUT_S * 2):
            result = await self.session.call_tool(name, arguments)
        assert isinstance(result, CallToolResult)
        return result

    def tools(self) -> list[Tool]:
        async def list_all() -> list[Tool]:
            with anyio.fail_after(REQUEST_TIMEOUT_S):
                return (await self.session.list_tools()).tools

        return self.portal.call(list_all)

    def ok(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        result = self.call(name, arguments)
        assert not result.is_error, _text(result)
        assert isinstance(result.structured_content, dict)
        return result.structured_content

    def search_ids(self, query: str) -> list[str]:
        items = self.ok("memory_search", {"query": query, "top_k": 50})["items"]
        return [item["memory_id"] for item in items]


def _text(result: CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


@asynccontextmanager
async def _session(
    data_dir: Path, way: str = "in-process", runtime: Path | None = None
) -> AsyncIterator[ClientSession]:
    env = {
        "ORCHESTRATOR_DATA_DIR": str(data_dir),
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(data_dir),
    }
    async with mcp_session(
        way,
        env,
        data_dir,  # no stray ./orchestrator.toml is read
        runtime=runtime,
        read_timeout_s=REQUEST_TIMEOUT_S,
        start_timeout_s=START_TIMEOUT_S,
    ) as session:
        yield session


@pytest.fixture(scope="module", params=WAYS)
def way(request: pytest.FixtureRequest) -> Iterator[tuple[str, Path | None]]:
    yield from way_fixture(request)


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory, way: tuple[str, Path | None]
) -> Iterator[Client]:
    data_dir = tmp_path_factory.mktemp("mcp-data")
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_session(data_dir, *way)) as session,
    ):
        yield Client(portal, session)


@pytest.fixture(scope="module")
def written(client: Client) -> list[str]:
    """The ids of MEMORIES, written once through memory_write."""
    ids = []
    for memory in MEMORIES:
        report = client.ok("memory_write", memory)
        assert report["action"] == "added", report
        assert isinstance(report["id"], str)
        ids.append(report["id"])
    return ids


# ---------------------------------------------------------------- the tool list


def test_the_server_lists_exactly_the_seven_memory_tools(client: Client) -> None:
    tools = client.tools()
    assert {tool.name for tool in tools} == TOOLS
    assert len(tools) == len(TOOLS)
    for tool in tools:
        assert len(tool.description or "") > 80, tool.name
        assert tool.output_schema is not None, tool.name
        assert tool.input_schema["type"] == "object"


def test_tool_schemas_state_required_fields_and_limits(client: Client) -> None:
    schemas = {tool.name: tool.input_schema for tool in client.tools()}
    search = schemas["memory_search"]
    assert search["required"] == ["query"]
    assert search["properties"]["query"]["maxLength"] == 20_000
    assert search["properties"]["top_k"]["minimum"] == 1
    assert {"filters", "expand", "as_of", "passthrough", "task"} <= set(search["properties"])
    context = schemas["memory_context"]
    assert {"response_budget", "group_by", "filters"} <= set(context["properties"])
    assert schemas["memory_write"]["required"] == ["content"]
    assert {"on_duplicate", "dry_run", "link_related"} <= set(schemas["memory_write"]["properties"])
    assert {"seed_ids", "entities", "hops", "edge_types", "limit"} <= set(
        schemas["memory_expand"]["properties"]
    )
    assert set(schemas["memory_explain"]["properties"]) == {"trace_id", "query"}
    assert schemas["memory_health"].get("properties", {}) == {}
    forget = schemas["memory_forget"]
    assert forget["required"] == ["ids"]
    assert set(forget["properties"]) == {"ids", "reason", "undo"}
    assert forget["properties"]["ids"]["minItems"] == 1
    assert forget["properties"]["ids"]["maxItems"] == 200


def test_only_memory_forget_is_destructive(client: Client) -> None:
    hints = {tool.name: tool.annotations for tool in client.tools()}
    forget = hints["memory_forget"]
    assert forget is not None
    assert (forget.destructive_hint, forget.idempotent_hint, forget.read_only_hint) == (
        True,
        True,
        False,
    )
    others = {name for name, a in hints.items() if a is not None and a.destructive_hint}
    assert others == {"memory_forget"}


def test_the_context_tool_tells_the_model_when_to_call_it(client: Client) -> None:
    description = {tool.name: tool.description or "" for tool in client.tools()}
    assert "before answering" in description["memory_context"]
    assert "cite" in description["memory_context"].lower()


# ---------------------------------------------------------------- each tool, working


def test_written_memories_are_found_by_search(client: Client, written: list[str]) -> None:
    result = client.ok("memory_search", {"query": "Vendor X firmware milestone", "top_k": 5})
    assert result["trace_id"]
    assert 0 < len(result["items"]) <= 5
    top = result["items"][0]
    assert {"memory_id", "summary", "score"} <= set(top)
    assert top["memory_id"] in written
    asked = {"query": "Vendor X firmware milestone", "top_k": 5, "detail": True}
    detailed = client.ok("memory_search", asked)
    top = detailed["items"][0]
    assert {"memory_id", "summary", "score", "reasons", "linked_entities", "type"} <= set(top)
    assert {"subqueries", "expanded_from", "dropped", "notes"} <= set(detailed["trace"])


def test_search_answers_one_short_line_per_item_unless_detail_is_asked(
    client: Client, written: list[str]
) -> None:
    asked = {"query": "Vendor X firmware milestone", "top_k": 3}
    compact = client.call("memory_search", asked)
    lines = _text(compact).splitlines()
    assert isinstance(compact.structured_content, dict)
    items = compact.structured_content["items"]
    shown = [line for line in lines if re.match(r"\d+\. \[", line)]
    assert len(shown) == len(items) > 0
    assert all(item["memory_id"] in line for item, line in zip(items, shown, strict=True))
    assert lines[-1] == f"trace_id: {compact.structured_content['trace_id']}"
    assert "breakdown" not in _text(compact)
    assert "reasons" not in json.dumps(items)
    detailed = client.call("memory_search", {**asked, "detail": True})
    assert '"breakdown"' in _text(detailed)
    assert isinstance(detailed.structured_content, dict)
    assert detailed.structured_content["items"][0]["breakdown"]["weights"]


def test_search_honours_entity_and_type_filters(client: Client, written: list[str]) -> None:
    result = client.ok(
        "memory_search",
        {
            "query": "Vendor X",
            "filters": {"entity_ids": ["Vendor X"], "memory_types": ["procedural"]},
        },
    )
    assert [item["memory_id"] for item in result["items"]] == [written[3]]


def test_a_time_range_may_mix_dates_with_and_without_a_timezone(
    client: Client, written: list[str]
) -> None:
    window = {"start": "2026-03-01", "end": "2026-03-31T23:59:59Z"}
    result = client.ok("memory_search", {"query": "Vendor X", "filters": {"time_range": window}})
    assert {item["memory_id"] for item in result["items"]} == {written[0], written[2]}


def test_context_returns_a_citable_block(client: Client, written: list[str]) -> None:
    package = client.ok(
        "memory_context",
        {
            "query": "what went wrong with Vendor X?",
            "task": "draft a vendor update",
            "response_budget": {"max_items": 3, "max_chars": 1200},
            "detail": True,
        },
    )
    assert 0 < len(package["items"]) <= 3
    assert len(package["context_block"]) <= 1200
    assert package["task"] == "draft a vendor update"
    assert any(item["memory_id"] in package["context_block"] for item in package["items"])
    assert set(package["linked_entities"]) & {"Vendor X", "Project Atlas", "Infra team"}


def test_context_reads_as_its_block_and_trace_id_and_details_come_on_request(
    client: Client, written: list[str]
) -> None:
    asked = {"query": "what went wrong with Vendor X?"}
    compact = client.call("memory_context", asked)
    content = compact.structured_content
    assert isinstance(content, dict)
    block, trace_id = content["context_block"], content["trace_id"]
    assert _text(compact) == f"{block}\n\ntrace_id: {trace_id}"
    assert all(item["memory_id"] in block for item in content["items"])
    assert not {"reasons", "breakdown", "summary"} & {k for i in content["items"] for k in i}
    assert len(json.dumps(content)) <= 2.5 * len(block)
    detailed = client.call("memory_context", {**asked, "detail": True})
    assert isinstance(detailed.structured_content, dict)
    assert detailed.structured_content["items"][0]["breakdown"]["weights"]
    assert '"breakdown"' in _text(detailed)
    # and the compact answer's trace still explains every score, part by part
    explanation = client.ok("memory_explain", {"trace_id": trace_id})
    scored = {c["id"]: c["breakdown"] for c in explanation["trace"]["candidates"]}
    assert all(scored[item["memory_id"]]["weights"] for item in content["items"])


def test_the_tool_list_stays_within_20000_characters(client: Client) -> None:
    """Every tool, those added later included: a client sends the list to the model at the
    start of every session (measured as in bench/bench_agent_payload.py)."""
    tools = [
        tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in client.tools()
    ]
    size = len(json.dumps({"tools": tools}))
    assert size <= 20_000, {t["name"]: len(json.dumps(t)) for t in tools}


def test_expand_walks_from_a_returned_id(client: Client, written: list[str]) -> None:
    seed = client.ok("memory_search", {"query": "missed March delivery milestone"})["items"][0]
    result = client.ok(
        "memory_expand", {"seed_ids": [seed["memory_id"]], "hops": 2, "detail": True}
    )
    assert result["strategy"] == "expanded"
    assert result["trace_id"]
    reached = {item["memory_id"] for item in result["items"]}
    assert seed["memory_id"] not in reached
    assert reached <= set(written)


def test_explain_reads_back_the_context_trace(client: Client, written: list[str]) -> None:
    package = client.ok("memory_context", {"query": "Infra team procurement risk"})
    explanation = client.ok("memory_explain", {"trace_id": package["trace_id"]})
    assert explanation["trace"]["trace_id"] == package["trace_id"]
    assert explanation["trace"]["tool"] == "context"
    assert explanation["trace"]["result_ids"] == [i["memory_id"] for i in package["items"]]
    assert explanation["text"]


def test_explain_can_run_a_fresh_query(client: Client, written: list[str]) -> None:
    explanation = client.ok("memory_explain", {"query": "radio firmware"})
    assert explanation["trace"]["plan"]["raw_query"] == "radio firmware"


def test_forget_leaves_a_memory_out_of_every_read_until_undone(
    client: Client, written: list[str]
) -> None:
    runbook = written[3]
    assert runbook in client.search_ids("flash radio firmware")
    refused = client.call("memory_forget", {"ids": [runbook]})
    assert refused.is_error
    assert "reason" in _text(refused)
    assert runbook in client.search_ids("flash radio firmware")  # nothing was forgotten
    try:
        report = client.ok("memory_forget", {"ids": [runbook, "nope"], "reason": "outdated"})
        assert set(report) == {
            "action", "done", "unchanged", "not_found", "refused", "summary", "trace_id",
        }  # fmt: skip
        assert (report["done"], report["not_found"]) == ([runbook], ["nope"])
        assert runbook not in client.search_ids("flash radio firmware")
        package = client.ok("memory_context", {"query": "flash radio firmware", "history": True})
        assert runbook not in package["context_block"]
        explained = client.ok("memory_explain", {"query": "flash radio firmware"})
        assert runbook not in explained["text"]
    finally:
        back = client.ok("memory_forget", {"ids": [runbook], "undo": True})
    assert back["done"] == [runbook]
    assert runbook in client.search_ids("flash radio firmware")


def test_health_reports_an_ok_store_and_its_capabilities(client: Client) -> None:
    report = client.ok("memory_health")
    assert report["status"] == "ok"
    assert report["backend"] == "embedded"
    assert report["checks"]
    assert report["capabilities"]["graph"] is True


def test_a_near_duplicate_write_is_skipped(client: Client, written: list[str]) -> None:
    report = client.ok("memory_write", MEMORIES[1])
    assert report["action"] == "skipped"
    assert report["duplicate_of"] == written[1]


# ---------------------------------------------------------------- bad input


BAD_CALLS = [
    pytest.param("memory_search", {}, "query: Field required", id="search-missing-query"),
    pytest.param(
        "memory_search",
        {"query": "x" * 100_000},
        "query: String should have at most 20000",
        id="search-100k-query",
    ),
    pytest.param(
        "memory_search",
        {"query": "vendor", "top_k": -1},
        "top_k: Input should be greater",
        id="search-negative-top-k",
    ),
    pytest.param(
        "memory_search",
        {"query": "vendor", "top_k": "many"},
        "top_k: expected an integer, got a string",
        id="search-wrong-type",
    ),
    pytest.param("memory_search", {"query": "   "}, "query must not be blank", id="search-blank"),
    pytest.param(
        "memory_search",
        {"query": "v", "filters": {"time_range": {"start": "2026-05-01", "end": "2026-01-01"}}},
        "start must not be after",
        id="search-reversed-time-range",
    ),
    pytest.param("memory_context", {"task": "t"}, "query: Field required", id="context-missing"),
    pytest.param(
        "memory_context",
        {"query": "vendor", "response_budget": {"max_items": 0}},
        "response_budget.max_items",
        id="context-zero-items",
    ),
    pytest.param(
        "memory_context", {"query": "vendor", "group_by": "colour"}, "group_by", id="context-enum"
    ),
    pytest.param("memory_expand", {}, "give seed_ids or entities", id="expand-no-seeds"),
    pytest.param(
        "memory_expand",
        {"seed_ids": ["a"], "hops": 9},
        "hops: Input should be less",
        id="expand-too-many-hops",
    ),
    pytest.param("memory_expand", {"seed_ids": "not-a-list"}, "seed_ids", id="expand-wrong-type"),
    pytest.param("memory_explain", {}, "exactly one of trace_id or query", id="explain-none"),
    pytest.param(
        "memory_explain", {"trace_id": "nope", "query": "q"}, "exactly one", id="explain-both"
    ),
    pytest.param(
        "memory_explain", {"trace_id": "0" * 32}, "unknown trace id", id="explain-unknown-trace"
    ),
    pytest.param(
        "memory_explain",
        {"query": "x" * 100_000},
        "query: String should have at most",
        id="explain-100k-query",
    ),
    pytest.param(
        "memory_search",
        {"query": "vendor", "as_of": "0001-01-01T00:00:00+05:00"},
        "as_of: 0001-01-01T00:00:00+05:00 is out of range once converted to UTC",
        id="search-as-of-before-utc-year-1",
    ),
]


@pytest.mark.parametrize(("tool", "arguments", "expected"), BAD_CALLS)
def test_bad_input_is_a_clear_tool_error(
    client: Client, tool: str, arguments: dict[str, Any], expected: str
) -> None:
    result = client.call(tool, arguments)
    assert result.is_error
    message = _text(result)
    assert expected in message
    assert "Traceback" not in message
    assert "errors.pydantic.dev" not in message
    assert len(message) < 1000


def test_an_oversized_query_is_cut_at_a_word_boundary_with_a_note(
    client: Client, written: list[str]
) -> None:
    query = "zebracorn notes " * 200  # 3200 characters; the default limit is 2000
    result = client.ok("memory_search", {"query": query, "top_k": 5, "detail": True})
    told = client.ok("memory_explain", {"trace_id": result["trace_id"]})
    cut = [e["values"] for e in told["trace"]["events"] if e["kind"] == "query_cut"]
    assert cut == [{"what": "query", "chars": 3200, "kept": 1999, "limit": 2000}]
    assert result["query"] == query


BAD_WRITES = [
    pytest.param({}, "content: Field required", id="missing-content"),
    pytest.param(
        {"content": "zebracorn " * 1000}, "content: String should have at most", id="too-long"
    ),
    pytest.param({"content": "   "}, "content must not be blank", id="blank"),
    pytest.param({"content": "zebracorn one", "importance": 5}, "importance", id="importance"),
    pytest.param({"content": "zebracorn two", "confidence": "high"}, "confidence", id="wrong-type"),
    pytest.param({"content": "zebracorn three", "type": "rumour"}, "type", id="unknown-type"),
    pytest.param({"content": "zebracorn four", "entities": ["a,b"]}, "no commas", id="comma"),
    pytest.param(
        {"content": "zebracorn six", "created_at": "9999-12-31T23:00:00-05:00"},
        "out of range once converted to UTC",
        id="created-at-beyond-utc",
    ),
    pytest.param(
        {"content": "zebracorn seven", "metadata": {"k": "v" * 9000}},
        "metadata values are at most 8000",
        id="metadata-value",
    ),
    pytest.param(
        {"content": "zebracorn five", "on_duplicate": "merge"}, "on_duplicate", id="on-duplicate"
    ),
    pytest.param(
        {"content": "zebracorn six", "created_at": "yesterday-ish"}, "created_at", id="bad-date"
    ),
]


@pytest.mark.parametrize(("arguments", "expected"), BAD_WRITES)
def test_a_rejected_write_is_a_clear_tool_error(
    client: Client, written: list[str], arguments: dict[str, Any], expected: str
) -> None:
    result = client.call("memory_write", arguments)
    assert result.is_error
    assert expected in _text(result)
    assert "Traceback" not in _text(result)


def test_rejected_and_dry_run_writes_store_nothing(client: Client, written: list[str]) -> None:
    before = client.search_ids("Vendor X Infra Dana firmware zebracorn")
    for param in BAD_WRITES:
        arguments = param.values[0]
        assert isinstance(arguments, dict)
        assert client.call("memory_write", arguments).is_error
    preview = client.ok(
        "memory_write",
        {"content": "zebracorn dry run only", "entities": ["Vendor X"], "dry_run": True},
    )
    assert (preview["action"], preview["id"], preview["dry_run"]) == ("added", None, True)
    assert "dry run" in preview["reason"]
    assert client.ok("memory_search", {"query": "zebracorn"})["items"] == []
    assert client.search_ids("Vendor X Infra Dana firmware zebracorn") == before
    assert client.ok("memory_health")["status"] == "ok"


def test_an_unknown_tool_is_an_error(client: Client) -> None:
    result = client.call("memory_forget", {"id": "x"})
    assert result.is_error
    assert "memory_forget" in _text(result)

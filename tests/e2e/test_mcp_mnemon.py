"""The MCP tools end to end with `backend = "mnemon"`: a real client session over stdio to
a real server process (`python -m memory_orchestrator.faces.mcp.server`, and `orchestrator
serve` through the shared process: `tests.e2e.servers.WAYS`), with the Mnemon contract double
behind it, then the real binary (`../shared/mnemon/bin/mnemon`, or $MNEMON_REAL_BINARY; see
`tests.mnemon_double.kinds`)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal
from mcp import ClientSession

from tests.e2e.servers import WAYS, mcp_session, way_fixture
from tests.e2e.test_mcp_stdio import (
    MEMORIES,
    REQUEST_TIMEOUT_S,
    START_TIMEOUT_S,
    TOOLS,
    Client,
    _text,
)
from tests.mnemon_double import fast_launcher, kinds, real_binary

pytestmark = pytest.mark.integration


@asynccontextmanager
async def _session(
    data_dir: Path, binary: Path, way: str, runtime: Path | None
) -> AsyncIterator[ClientSession]:
    env = {
        "ORCHESTRATOR_BACKEND": "mnemon",
        "ORCHESTRATOR_MNEMON__BINARY": str(binary),
        "ORCHESTRATOR_MNEMON__DATA_DIR": str(data_dir / "mnemon"),
        "ORCHESTRATOR_DATA_DIR": str(data_dir),
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(data_dir),
    }
    async with mcp_session(
        way,
        env,
        data_dir,
        runtime=runtime,
        read_timeout_s=REQUEST_TIMEOUT_S,
        start_timeout_s=START_TIMEOUT_S,
    ) as session:
        yield session


@pytest.fixture(scope="module", params=WAYS)
def way(request: pytest.FixtureRequest) -> Iterator[tuple[str, Path | None]]:
    yield from way_fixture(request)


@pytest.fixture(scope="module", params=kinds())
def data_dir(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    way: tuple[str, Path | None],
) -> Path:
    folder = tmp_path_factory.mktemp(f"mcp-mnemon-{request.param}-{way[0]}")
    if request.param == "real":
        binary = real_binary()
        assert binary is not None
        (folder / "bin").mkdir()
        (folder / "bin" / "mnemon").symlink_to(binary)
    else:
        fast_launcher(folder / "bin")
    return folder


@pytest.fixture(scope="module")
def client(data_dir: Path, way: tuple[str, Path | None]) -> Iterator[Client]:
    binary = data_dir / "bin" / "mnemon"
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_session(data_dir, binary, *way)) as session,
    ):
        yield Client(portal, session)


@pytest.fixture(scope="module")
def written(client: Client) -> list[str]:
    ids = []
    for memory in MEMORIES:
        report = client.ok("memory_write", memory)
        assert report["action"] == "added", report
        ids.append(report["id"])
    return ids


def test_the_tools_are_served_over_mnemon(client: Client) -> None:
    assert {tool.name for tool in client.tools()} == TOOLS


def test_writes_land_in_the_mnemon_store_file(data_dir: Path, written: list[str]) -> None:
    db = data_dir / "mnemon" / "data" / "default" / "mnemon.db"
    with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True) as conn:
        stored = {row[0]: row[1] for row in conn.execute("SELECT id, category FROM insights")}
    assert set(written) <= set(stored)
    assert stored[written[0]] == "context"  # episodic
    assert stored[written[3]] == "insight"  # procedural (+ a memory-type tag)


def test_search_finds_written_memories_and_honours_filters(
    client: Client, written: list[str]
) -> None:
    result = client.ok("memory_search", {"query": "Vendor X firmware milestone", "top_k": 5})
    assert result["items"]
    assert result["items"][0]["memory_id"] in written
    procedural = client.ok(
        "memory_search", {"query": "Vendor X", "filters": {"memory_types": ["procedural"]}}
    )
    assert [i["memory_id"] for i in procedural["items"]] == [written[3]]
    window = {"start": "2026-03-01", "end": "2026-03-31T23:59:59Z"}
    asked = {"query": "Vendor X", "filters": {"time_range": window}, "detail": True}
    march = client.ok("memory_search", asked)
    assert {i["memory_id"] for i in march["items"]} == {written[0], written[2]}
    told = client.ok("memory_explain", {"trace_id": march["trace_id"]})
    filtered = [e["values"] for e in told["trace"]["events"] if e["kind"] == "filtered_after"]
    assert {"filter": "time_range"} in filtered


def test_passthrough_returns_mnemons_own_ranking(client: Client, written: list[str]) -> None:
    asked = {"query": "radio firmware", "passthrough": True, "detail": True}
    raw = client.ok("memory_search", asked)
    assert raw["passthrough"] is True
    assert {i["memory_id"] for i in raw["items"]} <= set(written)


def test_context_packs_a_citable_block(client: Client, written: list[str]) -> None:
    package = client.ok(
        "memory_context",
        {"query": "what went wrong with Vendor X?", "response_budget": {"max_items": 3}},
    )
    assert 0 < len(package["items"]) <= 3
    assert any(item["memory_id"] in package["context_block"] for item in package["items"])


def test_expand_walks_mnemons_graph(client: Client, written: list[str]) -> None:
    seed = client.ok("memory_search", {"query": "missed March delivery milestone"})["items"][0]
    asked = {"seed_ids": [seed["memory_id"]], "hops": 2, "detail": True}
    result = client.ok("memory_expand", asked)
    reached = {item["memory_id"] for item in result["items"]}
    assert reached
    assert seed["memory_id"] not in reached
    assert reached <= set(written)
    # the edges Mnemon built on write (entity, temporal, causal, semantic) are what was walked,
    # and the trace names them, as does every reached item's reason
    trace = client.ok("memory_explain", {"trace_id": result["trace_id"]})["trace"]
    walked = {d["edge_type"] for d in trace["expansions"] if d["accepted"]}
    assert walked
    assert walked <= {"entity", "temporal", "causal", "semantic"}
    for item in result["items"]:
        assert any(" via " in reason for reason in item["reasons"]), item["reasons"]


def test_explain_reads_back_a_trace(client: Client, written: list[str]) -> None:
    package = client.ok("memory_context", {"query": "Infra team procurement risk"})
    explanation = client.ok("memory_explain", {"trace_id": package["trace_id"]})
    assert explanation["trace"]["backend"] == "mnemon"
    assert explanation["trace"]["result_ids"] == [i["memory_id"] for i in package["items"]]
    fresh = client.ok("memory_explain", {"query": "radio firmware"})
    assert fresh["trace"]["plan"]["raw_query"] == "radio firmware"


def test_health_is_ok_and_states_mnemons_capabilities(client: Client, written: list[str]) -> None:
    report = client.ok("memory_health")
    assert report["status"] == "ok", report["checks"]
    assert report["backend"] == "mnemon"
    names = {check["name"] for check in report["checks"]}
    assert {"binary", "version", "store", "direct_reads", "retrieval"} <= names
    capabilities = report["capabilities"]
    assert capabilities["graph"] is True
    assert capabilities["time_filter"] is False
    assert capabilities["entity_filter"] is False


def test_a_repeated_write_is_skipped_and_names_the_kept_memory(
    client: Client, written: list[str]
) -> None:
    report = client.ok("memory_write", MEMORIES[1])
    assert report["action"] == "skipped"
    assert report["duplicate_of"] == written[1]


def test_a_store_error_is_one_clear_tool_error(client: Client) -> None:
    result = client.call("memory_write", {"content": "é" * 4001})
    assert result.is_error
    assert "8000" in _text(result)
    assert "Traceback" not in _text(result)

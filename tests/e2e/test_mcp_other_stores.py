"""The orchestrator's MCP server end to end in front of each other store: a real client session
over stdio to `python -m memory_orchestrator.faces.mcp.server` (and to `orchestrator serve`
through the shared process: `tests.e2e.servers.WAYS`) with `backend` = mnemon-mcp, kg-memory
(each a real npm server behind it, so MCP in front of MCP), mnemonic and fused.
The npm stores are skipped, with the reason, only when node is absent."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal
from mcp import ClientSession

from memory_orchestrator.backends.kg_memory import PACKAGE as KG_PACKAGE
from memory_orchestrator.backends.mnemon_mcp import PACKAGE as MM_PACKAGE
from tests.e2e.servers import WAYS, mcp_session, way_fixture
from tests.e2e.test_mcp_stdio import MEMORIES, REQUEST_TIMEOUT_S, START_TIMEOUT_S, Client
from tests.npm_servers import require_script

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

FUSED = json.dumps([{"backend": "mnemonic"}, {"backend": "embedded", "weight": 0.5}])
STORES = {
    "mnemon-mcp": ({}, [MM_PACKAGE]),
    "kg-memory": ({}, [KG_PACKAGE]),
    "mnemonic": ({}, []),
    "fused": ({"ORCHESTRATOR_FUSED__STORES": FUSED}, []),
}


@asynccontextmanager
async def _session(
    data_dir: Path, env: dict[str, str], way: str = "in-process", runtime: Path | None = None
) -> AsyncIterator[ClientSession]:
    env = {
        "ORCHESTRATOR_DATA_DIR": str(data_dir),
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(data_dir),
        **env,
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


@pytest.fixture(scope="module", params=list(STORES))
def store(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    way: tuple[str, Path | None],
) -> Iterator[tuple[str, Client, Path]]:
    name: str = request.param
    env, packages = STORES[name]
    scripts = {p: require_script(p) for p in packages}
    data_dir = tmp_path_factory.mktemp(f"mcp-{name}-{way[0]}")
    env = {"ORCHESTRATOR_BACKEND": name, **env}
    if MM_PACKAGE in scripts:
        env["ORCHESTRATOR_MNEMON_MCP__SCRIPT"] = str(scripts[MM_PACKAGE])
    if KG_PACKAGE in scripts:
        env["ORCHESTRATOR_KG_MEMORY__SCRIPT"] = str(scripts[KG_PACKAGE])
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_session(data_dir, env, *way)) as session,
    ):
        client = Client(portal, session)
        for memory in MEMORIES:
            report = client.ok("memory_write", memory)
            assert report["action"] == "added", report
        yield name, client, data_dir


def test_the_orchestrator_answers_in_front_of_the_store(store: tuple[str, Client, Path]) -> None:
    name, client, _ = store
    result = client.ok("memory_search", {"query": "Which milestone did Vendor X miss?"})
    assert any("missed the March delivery" in i["summary"] for i in result["items"][:3]), result
    package = client.ok(
        "memory_context",
        {"query": "who owns procurement escalations?", "response_budget": {"max_items": 3}},
    )
    assert "Dana Whitfield" in package["context_block"]
    report = client.ok("memory_health")
    assert report["backend"] == name
    assert report["status"] == "ok", report["checks"]


def test_the_store_holds_what_was_written(store: tuple[str, Client, Path]) -> None:
    name, _, data_dir = store
    expected = {
        "mnemon-mcp": data_dir / "mnemon-mcp.db",
        "kg-memory": data_dir / "kg-memory.jsonl",
        "mnemonic": data_dir / "mnemonic",
        "fused": data_dir / "mnemonic",  # the primary: the first store named
    }[name]
    assert expected.exists()
    if expected.is_dir():
        assert len(list(expected.rglob("*.memory.md"))) == len(MEMORIES)

"""The orchestrator's MCP server end to end in front of each other store: a real client session
over stdio to `python -m memory_orchestrator.faces.mcp.server` with `backend` = mnemon-mcp,
kg-memory (each a real npm server behind it, so MCP in front of MCP), mnemonic and fused.
The npm stores are skipped, with the reason, only when node is absent."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from anyio.from_thread import start_blocking_portal
from mcp import ClientSession, StdioServerParameters, stdio_client

from memory_orchestrator.backends.kg_memory import PACKAGE as KG_PACKAGE
from memory_orchestrator.backends.mnemon_mcp import PACKAGE as MM_PACKAGE
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
async def _session(data_dir: Path, env: dict[str, str]) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memory_orchestrator.faces.mcp.server"],
        env={
            "ORCHESTRATOR_DATA_DIR": str(data_dir),
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(data_dir),
            **env,
        },
        cwd=data_dir,
    )
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, read_timeout_seconds=REQUEST_TIMEOUT_S) as session,
        ):
            with anyio.fail_after(START_TIMEOUT_S):
                await session.initialize()
            yield session


@pytest.fixture(scope="module", params=list(STORES))
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Client, Path]]:
    name: str = request.param
    env, packages = STORES[name]
    scripts = {p: require_script(p) for p in packages}
    data_dir = tmp_path_factory.mktemp(f"mcp-{name}")
    env = {"ORCHESTRATOR_BACKEND": name, **env}
    if MM_PACKAGE in scripts:
        env["ORCHESTRATOR_MNEMON_MCP__SCRIPT"] = str(scripts[MM_PACKAGE])
    if KG_PACKAGE in scripts:
        env["ORCHESTRATOR_KG_MEMORY__SCRIPT"] = str(scripts[KG_PACKAGE])
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_session(data_dir, env)) as session,
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

"""The HTTP transport end to end: a real `orchestrator serve --transport http` process, real
MCP clients over streamable HTTP, bearer tokens from a real config file.

One server serves the module. It holds four tokens: `full` (everything), `reader` (read-only),
`searcher` (memory_search only) and `elsewhere` (allowed another store only).
"""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import MCPError
from mcp.types import CallToolResult

from memory_orchestrator.state.observability import StatsReport
from tests.http_load import (
    ServerProcess,
    Token,
    http_server,
    lost_and_duplicated,
    make_token,
    mcp_session,
    orchestrator_command,
    run_load,
    stored_contents,
    unique_memory,
)

pytestmark = pytest.mark.integration

TOKENS = {
    "full": make_token("full"),
    "reader": make_token("reader", read_only=True),
    "searcher": make_token("searcher", tools=["memory_search"]),
    "elsewhere": make_token("elsewhere", stores=["mnemon"]),
}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data_dir = tmp_path_factory.mktemp("http-data")
    with http_server(data_dir, [t.spec for t in TOKENS.values()]) as running:
        yield running


def _post_initialize(server: ServerProcess, secret: str | None) -> httpx2.Response:
    headers = dict(MCP_HEADERS)
    if secret is not None:
        headers["Authorization"] = f"Bearer {secret}"
    return httpx2.post(server.mcp_url, json=INITIALIZE, headers=headers, timeout=10)


async def _call(
    server: ServerProcess, token: Token, tool: str, arguments: dict[str, Any]
) -> CallToolResult | MCPError:
    """The tool's result, or the MCP error the call was refused with."""

    async with mcp_session(server.mcp_url, token.secret) as session:
        try:
            return await session.call_tool(tool, arguments)
        except MCPError as exc:
            return exc


def _refused(outcome: CallToolResult | MCPError) -> str:
    assert isinstance(outcome, MCPError), outcome
    return str(outcome)


def _answered(outcome: CallToolResult | MCPError) -> CallToolResult:
    assert isinstance(outcome, CallToolResult), outcome
    assert not outcome.is_error, outcome
    return outcome


def _metrics(server: ServerProcess, secret: str | None) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    return httpx2.get(server.base_url + "/metrics", headers=headers, timeout=10)


# ---------------------------------------------------------------- authentication


def test_a_request_without_a_token_gets_401_and_nothing_else(server: ServerProcess) -> None:
    response = _post_initialize(server, None)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json() == {}
    assert "mcp-session-id" not in response.headers


def test_an_unknown_token_gets_401(server: ServerProcess) -> None:
    assert _post_initialize(server, "mo_not-a-configured-secret").status_code == 401
    assert _post_initialize(server, TOKENS["full"].spec.hash).status_code == 401


def test_a_configured_token_opens_a_session(server: ServerProcess) -> None:
    response = _post_initialize(server, TOKENS["full"].secret)
    assert response.status_code == 200
    assert response.headers.get("mcp-session-id")


def test_a_token_for_another_store_gets_403(server: ServerProcess) -> None:
    response = _post_initialize(server, TOKENS["elsewhere"].secret)
    assert response.status_code == 403
    assert "may not use store 'embedded'" in response.json()["error"]["message"]


def test_metrics_need_a_token(server: ServerProcess) -> None:
    assert _metrics(server, None).status_code == 401
    assert _metrics(server, "mo_wrong").status_code == 401


# ---------------------------------------------------------------- authorisation


async def test_a_read_only_token_cannot_write_and_nothing_is_stored(server: ServerProcess) -> None:
    memory = unique_memory(random.Random(7), 99, 0)
    refusal = _refused(await _call(server, TOKENS["reader"], "memory_write", memory))
    assert "read-only and may not call memory_write" in refusal
    assert stored_contents(server.data_dir)[memory["content"]] == 0
    refusals = [
        line
        for line in map(json.loads, _json_lines(server.log))
        if line.get("event") == "refused" and line.get("token") == "reader"
    ]
    assert refusals
    assert refusals[-1]["status"] == 403
    assert refusals[-1]["level"] == "warning"
    _answered(await _call(server, TOKENS["reader"], "memory_search", {"query": "firmware"}))


def test_a_forbidden_call_is_answered_with_a_json_rpc_error_inside_the_session(
    server: ServerProcess,
) -> None:
    headers = {
        **MCP_HEADERS,
        "Authorization": f"Bearer {TOKENS['reader'].secret}",
        "MCP-Protocol-Version": "2025-06-18",
    }
    with httpx2.Client(base_url=server.base_url, headers=headers, timeout=10) as http:
        opened = http.post("/mcp", json=INITIALIZE)
        headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert http.post("/mcp", json=initialized, headers=headers).status_code == 202
        write = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "memory_write", "arguments": {"content": "never stored"}},
        }
        refused = http.post("/mcp", json=write, headers=headers)
        http.delete("/mcp", headers=headers)
    # The SDK answers every JSON-RPC error with HTTP 200; MCP clients raise it as MCPError.
    assert refused.status_code == 200
    assert refused.json() == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {
            "code": -32003,
            "message": "forbidden: token 'reader' is read-only and may not call memory_write",
        },
    }
    assert stored_contents(server.data_dir)["never stored"] == 0


async def test_a_token_may_call_only_its_tools(server: ServerProcess) -> None:
    refusal = _refused(
        await _call(server, TOKENS["searcher"], "memory_context", {"query": "budget"})
    )
    assert "'searcher' may not call memory_context" in refusal
    _answered(await _call(server, TOKENS["searcher"], "memory_search", {"query": "budget"}))


async def test_a_token_sees_only_the_tools_it_may_call(server: ServerProcess) -> None:
    async def names(token: Token) -> set[str]:
        async with mcp_session(server.mcp_url, token.secret) as session:
            return {tool.name for tool in (await session.list_tools()).tools}

    everything = await names(TOKENS["full"])
    assert len(everything) == 7
    assert await names(TOKENS["reader"]) == everything - {"memory_write", "memory_forget"}
    assert await names(TOKENS["searcher"]) == {"memory_search"}


# ---------------------------------------------------------------- load, writes, metrics


async def test_concurrent_clients_lose_and_duplicate_no_writes(server: ServerProcess) -> None:
    mix = {"memory_context": 2, "memory_search": 2, "memory_write": 1}
    result = await run_load(
        server.mcp_url, TOKENS["full"].secret, clients=4, requests_per_client=20, mix=mix
    )
    assert result.errors == 0, result.error_samples
    assert result.requests == 80
    assert result.written, "the mix should have made some writes"
    assert result.write_actions["added"] == len(result.written)
    lost, duplicated = lost_and_duplicated(result.written, stored_contents(server.data_dir))
    assert (lost, duplicated) == (0, 0)

    body = _metrics(server, TOKENS["reader"].secret)
    assert body.status_code == 200
    assert body.headers["content-type"].startswith("text/plain")
    counts = _samples(body.text, "orchestrator_requests_total")
    assert counts[("memory_write", "ok")] >= len(result.written)
    assert counts[("memory_write", "error")] == 0  # the refused write never reached a tool
    total = sum(n for (tool, status), n in counts.items() if status == "ok")
    assert total >= result.requests
    assert "orchestrator_request_latency_seconds_bucket" in body.text


def test_stats_read_the_traces_the_server_stored(server: ServerProcess) -> None:
    config = server.data_dir / "orchestrator.toml"
    done = subprocess.run(
        [*orchestrator_command(), "--config", str(config), "stats", "--format", "json"],
        capture_output=True,
        check=True,
        timeout=30,
        cwd=server.data_dir,
    )
    report = StatsReport.model_validate_json(done.stdout)
    tools = {row.tool: row for row in report.tools}
    assert {"search", "context"} <= set(tools)
    assert report.total.count == sum(row.count for row in report.tools)
    assert report.total.p50_ms is not None
    assert report.total.p99_ms is not None
    assert report.total.p50_ms <= report.total.p99_ms


async def test_every_request_is_logged_as_one_json_line(server: ServerProcess) -> None:
    await _call(server, TOKENS["full"], "memory_search", {"query": "security review"})
    lines = [json.loads(line) for line in _json_lines(server.log)]
    requests = [line for line in lines if line.get("event") == "request"]
    assert requests, "the server should log each request"
    last = requests[-1]
    for key in ("trace_id", "tool", "latency_ms", "candidates", "dedup_ratio", "cache_hits"):
        assert key in last, key
    assert last["tool"] == "search"
    assert last["caller"] == "full"  # the token's name, never its secret


def _json_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.startswith("{")]


def _samples(text: str, metric: str) -> dict[tuple[str, str], float]:
    """`metric{status="ok",tool="x"} 3.0` lines as {(tool, status): value}."""
    found = _DefaultZero()
    for line in text.splitlines():
        if not line.startswith(metric + "{"):
            continue
        labels, value = line[len(metric) + 1 :].rsplit("} ", 1)
        pairs = dict(part.split("=", 1) for part in labels.split(","))
        found[(pairs["tool"].strip('"'), pairs["status"].strip('"'))] = float(value)
    return found


class _DefaultZero(dict[tuple[str, str], float]):
    """Label pairs never seen count 0."""

    def __missing__(self, key: tuple[str, str]) -> float:
        return 0.0


async def test_a_failed_tool_call_is_counted_logged_and_traced(server: ServerProcess) -> None:
    def errors() -> float:
        text = _metrics(server, TOKENS["full"].secret).text
        return _samples(text, "orchestrator_requests_total")[("memory_expand", "error")]

    before = errors()
    outcome = await _call(server, TOKENS["full"], "memory_expand", {"hops": 2})  # no seeds: invalid
    assert isinstance(outcome, CallToolResult)
    assert outcome.is_error
    assert errors() == before + 1
    failed = [
        line
        for line in map(json.loads, _json_lines(server.log))
        if line.get("event") == "request" and line.get("tool") == "expand"
    ]
    assert failed
    assert failed[-1]["status"] == "error"
    assert failed[-1]["level"] == "error"


def _raw_session(server: ServerProcess, token: Token) -> dict[str, str]:
    """The headers of an MCP session opened by hand (for bodies no client would send)."""
    headers = {
        **MCP_HEADERS,
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-06-18",
        "Authorization": f"Bearer {token.secret}",
    }
    opened = httpx2.post(server.mcp_url, json=INITIALIZE, headers=headers, timeout=30)
    assert opened.status_code == 200, opened.text
    return {**headers, "mcp-session-id": opened.headers["mcp-session-id"]}


@pytest.mark.parametrize(
    ("arguments", "refusal"),
    [
        ('"content": "Budget note NaN", "metadata": {"ratio": NaN}', "finite"),
        ('"content": "Budget note Inf", "metadata": {"cap": Infinity}', "finite"),
        ('"content": "Budget note -Inf", "metadata": {"floor": -Infinity}', "finite"),
        ('"content": "\\u001b[2J\\u001b[H"', "visible"),
        ('"content": "\\u3164\\u3164"', "visible"),
        ('"content": "\\u2800\\u2800"', "visible"),
        ('"content": "A tag that is only a colour", "tags": ["\\u001b[31m"]', "labels"),
    ],
)
def test_metadata_that_is_not_json_and_invisible_content_are_refused_and_not_stored(
    server: ServerProcess, arguments: str, refusal: str
) -> None:
    """Sent as raw JSON over HTTP (NaN and Infinity are not JSON; no client library would
    send them): refused with a clear error, and the store file holds nothing of it."""
    headers = _raw_session(server, TOKENS["full"])
    body = (
        '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "memory_write",'
        f' "arguments": {{{arguments}}}}}}}'
    )
    answer = httpx2.post(server.mcp_url, content=body, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert result["isError"], result
    assert refusal in result["content"][0]["text"], result
    content = json.loads(f"{{{arguments}}}")["content"]
    assert stored_contents(server.data_dir)[content] == 0


async def test_unknown_tool_names_share_one_metrics_label(server: ServerProcess) -> None:
    outcome = await _call(server, TOKENS["full"], "memory_delete_everything", {})
    assert isinstance(outcome, CallToolResult)
    assert outcome.is_error
    text = _metrics(server, TOKENS["full"].secret).text
    assert _samples(text, "orchestrator_requests_total")[("unknown", "error")] >= 1
    assert "memory_delete_everything" not in text


# ---------------------------------------------------------------- hostile bodies


@pytest.mark.parametrize(
    "body",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": '
        + '{"a": ' * 100_000
        + "1"
        + "}" * 100_001,
        '{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "memory_search",'
        ' "arguments": {"query": "x", "filters": ' + "[" * 950 + "]" * 950 + "}}}",
    ],
    ids=["arrays", "objects", "arguments"],
)
@pytest.mark.parametrize("in_session", [False, True], ids=["new", "in-session"])
def test_json_nested_too_deep_is_a_400_parse_error_not_a_500(
    server: ServerProcess, body: str, in_session: bool
) -> None:
    headers = {
        **MCP_HEADERS,
        "Content-Type": "application/json",
        "Authorization": f"Bearer {TOKENS['full'].secret}",
    }
    opened = httpx2.post(server.mcp_url, json=INITIALIZE, headers=headers, timeout=10)
    session = {"mcp-session-id": opened.headers["mcp-session-id"]} if in_session else {}
    response = httpx2.post(server.mcp_url, content=body, headers={**headers, **session}, timeout=30)
    assert response.status_code == 400, response.text[:500]
    assert response.json()["error"]["code"] == -32700
    assert "Traceback" not in response.text
    assert _post_initialize(server, TOKENS["full"].secret).status_code == 200  # still serving

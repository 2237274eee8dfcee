"""MCP sessions over HTTP, end to end: a real `orchestrator serve --transport http` process, the
SDK's streamable-HTTP client, bearer tokens from a real config file.

Each session belongs to the token that opened it, a token holds at most
`[http] max_sessions_per_token` sessions, and a session nobody uses for
`[http] session_idle_timeout_s` is closed. Two servers: one whose sessions never go idle during
the tests (ownership, the cap), one with a one-second idle timeout (expiry).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from tests.http_load import ServerProcess, Token, http_server, make_token, mcp_session

pytestmark = pytest.mark.integration

OWNER = make_token("owner")
OTHER = make_token("other")
READER = make_token("reader", read_only=True)
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-06-18",
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
SEARCH = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "memory_search", "arguments": {"query": "budget"}},
}
WAIT_S = 30.0  # the most any wait below may take, however slow the machine


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data_dir = tmp_path_factory.mktemp("sessions")
    http = {"max_sessions_per_token": 2, "session_idle_timeout_s": 3600}
    with http_server(data_dir, [OWNER.spec, OTHER.spec, READER.spec], http=http) as running:
        yield running


@pytest.fixture(scope="module")
def idle_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data_dir = tmp_path_factory.mktemp("idle-sessions")
    http = {"max_sessions_per_token": 1, "session_idle_timeout_s": 1.0}
    with http_server(data_dir, [OWNER.spec], http=http) as running:
        yield running


async def _send(
    server: ServerProcess,
    token: Token,
    method: str,
    body: dict[str, Any] | None = None,
    session_id: str | None = None,
) -> httpx2.Response:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token.secret}"}
    if session_id is not None:
        headers["mcp-session-id"] = session_id
    async with httpx2.AsyncClient(timeout=WAIT_S) as http:
        return await http.request(method, server.mcp_url, headers=headers, json=body)


def _open_sessions(server: ServerProcess, token: Token) -> float:
    """What `/metrics` says `token` holds (0 when it holds none)."""
    text = httpx2.get(
        server.base_url + "/metrics",
        headers={"Authorization": f"Bearer {token.secret}"},
        timeout=WAIT_S,
    ).text
    prefix = f'orchestrator_http_sessions{{token="{token.spec.name}"}} '
    values = [float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix)]
    return values[0] if values else 0.0


# ---------------------------------------------------------------- ownership


async def test_another_token_cannot_use_or_end_a_session_and_it_lives_on(
    server: ServerProcess,
) -> None:
    ids: list[str] = []
    async with mcp_session(server.mcp_url, OWNER.secret, session_ids=ids) as session:
        (session_id,) = ids
        for token in (OTHER, READER):
            used = await _send(server, token, "POST", SEARCH, session_id)
            assert used.status_code == 404, token.spec.name
            assert used.json()["error"]["message"] == "Session not found"
            ended = await _send(server, token, "DELETE", session_id=session_id)
            assert ended.status_code == 404, token.spec.name
        answer = await session.call_tool("memory_search", {"query": "budget"})
        assert not answer.is_error


async def test_the_owner_ends_its_session_with_delete(server: ServerProcess) -> None:
    opened = await _send(server, OWNER, "POST", INITIALIZE)
    assert opened.status_code == 200
    session_id = opened.headers["mcp-session-id"]
    assert (await _send(server, OWNER, "DELETE", session_id=session_id)).status_code == 200
    after = await _send(server, OWNER, "POST", SEARCH, session_id)
    assert after.status_code == 404
    assert _open_sessions(server, OWNER) == 0


# ---------------------------------------------------------------- the cap per token


async def test_a_token_holds_at_most_its_cap_and_gets_a_clear_error_past_it(
    server: ServerProcess,
) -> None:
    async with (
        mcp_session(server.mcp_url, OWNER.secret) as first,
        mcp_session(server.mcp_url, OWNER.secret),
    ):
        assert _open_sessions(server, OWNER) == 2
        refused = await _send(server, OWNER, "POST", INITIALIZE)
        assert refused.status_code == 429
        assert "mcp-session-id" not in refused.headers
        error = refused.json()["error"]
        assert error["code"] == -32004
        assert error["message"].startswith("too many open sessions: token 'owner'")
        assert "max_sessions_per_token" in error["message"]
        # the cap is per token, and the sessions already open go on working
        async with mcp_session(server.mcp_url, OTHER.secret) as other:
            assert not (await other.call_tool("memory_health", {})).is_error
        assert not (await first.call_tool("memory_health", {})).is_error
    # both ended (DELETE on leaving): room again
    async with mcp_session(server.mcp_url, OWNER.secret) as again:
        assert not (await again.call_tool("memory_health", {})).is_error


async def test_failed_initialize_calls_open_no_session_and_use_up_nothing(
    server: ServerProcess,
) -> None:
    """Answered -32602 (bad parameters), each with no session id; the token's cap (2) is
    untouched, so its next good initialize opens one."""
    bad_params: list[dict[str, Any]] = [
        {"protocolVersion": "1999-01-01"},
        {"protocolVersion": 1999, "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}},
        {},
    ]
    for n in range(3 * len(bad_params)):
        body = {**INITIALIZE, "params": bad_params[n % len(bad_params)]}
        failed = await _send(server, OTHER, "POST", body)
        assert failed.status_code == 200, failed.text
        assert failed.json()["error"]["code"] == -32602
        assert "mcp-session-id" not in failed.headers
    opened = await _send(server, OTHER, "POST", INITIALIZE)
    assert opened.status_code == 200, opened.text
    assert "result" in opened.json()
    session_id = opened.headers["mcp-session-id"]
    assert (await _send(server, OTHER, "POST", SEARCH, session_id)).status_code == 200
    assert (await _send(server, OTHER, "DELETE", session_id=session_id)).status_code == 200


@pytest.mark.parametrize("bad", ['{"x": 1}', "null", "1.5", "true", "[1]"])
async def test_a_request_whose_id_is_not_a_string_or_integer_gets_a_json_rpc_error(
    server: ServerProcess, bad: str
) -> None:
    """The SDK would read it as a notification and answer 202 with nothing: the client
    would wait for an answer that never comes. The session goes on."""
    opened = await _send(server, OWNER, "POST", INITIALIZE)
    session_id = opened.headers["mcp-session-id"]
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {OWNER.secret}"}
    headers["mcp-session-id"] = session_id
    body = f'{{"jsonrpc": "2.0", "id": {bad}, "method": "ping"}}'
    async with httpx2.AsyncClient(timeout=WAIT_S) as http:
        refused = await http.post(server.mcp_url, headers=headers, content=body)
    assert refused.status_code == 400, refused.text
    error = refused.json()
    assert error["id"] is None
    assert error["error"]["code"] == -32600
    assert '"id" must be a string or an integer' in error["error"]["message"]
    assert (await _send(server, OWNER, "POST", SEARCH, session_id)).status_code == 200
    assert (await _send(server, OWNER, "DELETE", session_id=session_id)).status_code == 200


# ---------------------------------------------------------------- idle expiry


async def test_an_idle_session_is_closed_and_no_longer_counts(idle_server: ServerProcess) -> None:
    # Opened by one request and never used again, so no step below races the idle timeout.
    opened = await _send(idle_server, OWNER, "POST", INITIALIZE)
    assert opened.status_code == 200
    session_id = opened.headers["mcp-session-id"]
    deadline = time.monotonic() + WAIT_S
    while _open_sessions(idle_server, OWNER) > 0:  # a metrics read never touches the session
        assert time.monotonic() < deadline, "the idle session was never closed"
        time.sleep(0.05)

    gone = await _send(idle_server, OWNER, "POST", SEARCH, session_id)
    assert gone.status_code == 404
    # the cap is 1: the closed session left room for a new one
    again = await _send(idle_server, OWNER, "POST", INITIALIZE)
    assert again.status_code == 200
    assert again.headers["mcp-session-id"] != session_id

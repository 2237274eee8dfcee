"""Bearer tokens: hashing, the access decision, config round-trip, and the HTTP middleware
driven in process (no socket, no MCP session: these refusals happen before the SDK sees a
request). What a token may do inside a session is tested over real HTTP in
`tests/integration/test_http_server.py`.
"""

from __future__ import annotations

import io
import json
from functools import partial
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic import ValidationError

from memory_orchestrator.errors import ConfigError
from memory_orchestrator.faces.http.server import BearerAuth, build_app
from memory_orchestrator.faces.mcp.server import create_server
from memory_orchestrator.settings import Settings, load_settings
from memory_orchestrator.state.observability import Observer
from memory_orchestrator.state.tokens import (
    TOOL_NAMES,
    TokenBook,
    TokenSpec,
    bearer,
    hash_token,
    is_loopback,
    new_secret,
)


def _token(name: str, **rules: Any) -> tuple[str, TokenSpec]:
    secret = new_secret()
    return secret, TokenSpec(name=name, hash=hash_token(secret), **rules)


def test_secrets_are_random_and_only_their_hash_is_kept() -> None:
    first, second = new_secret(), new_secret()
    assert first != second
    assert len(first) > 40
    digest = hash_token(first)
    assert digest.startswith("sha256:")
    assert len(digest) == len("sha256:") + 64
    assert first not in digest
    assert hash_token(first) == digest


def test_only_a_configured_secret_authenticates() -> None:
    secret, spec = _token("alice")
    other_secret, other = _token("bob")
    book = TokenBook([spec, other])
    assert book.authenticate(secret) == spec
    assert book.authenticate(other_secret) == other
    assert book.authenticate("mo_unknown") is None
    assert book.authenticate(spec.hash) is None  # the stored hash is not a credential
    assert book.authenticate("") is None
    assert book.authenticate(None) is None


def test_a_read_only_token_may_read_but_never_write() -> None:
    _, spec = _token("reader", read_only=True)
    assert TokenBook.check_tool(spec, "memory_search") is None
    for tool in ("memory_write", "memory_forget"):
        denied = TokenBook.check_tool(spec, tool)
        assert denied is not None
        assert denied.status == 403
        assert "read-only" in denied.reason


def test_a_token_may_call_only_the_tools_and_stores_it_names() -> None:
    _, spec = _token("narrow", tools=["memory_search", "memory_health"], stores=["embedded"])
    assert TokenBook.check_tool(spec, "memory_search") is None
    assert TokenBook.check_tool(spec, "memory_context") is not None
    assert TokenBook.check_tool(spec, "") is not None
    assert TokenBook.check_store(spec, "embedded") is None
    assert TokenBook.check_store(spec, "mnemon") is not None


def test_token_settings_reject_unknown_tools_bad_hashes_and_names() -> None:
    with pytest.raises(ValidationError, match="unknown tool"):
        TokenSpec(name="x", hash=hash_token("s"), tools=["memory_delete"])
    with pytest.raises(ValidationError, match="hash"):
        TokenSpec(name="x", hash="plaintext-secret")
    with pytest.raises(ValidationError, match="name"):
        TokenSpec(name="has space", hash=hash_token("s"))
    with pytest.raises(ValidationError, match="stores"):
        TokenSpec(name="x", hash=hash_token("s"), stores=["../etc"])
    with pytest.raises(ValueError, match="unique"):
        TokenBook([_token("same")[1], _token("same")[1]])


def test_the_printed_toml_configures_the_same_token(tmp_path: Path) -> None:
    _, spec = _token("ci-bot", tools=["memory_search"], stores=["embedded"], read_only=True)
    config = tmp_path / "o.toml"
    config.write_text(spec.toml(), encoding="utf-8")
    assert load_settings(config).http.tokens == [spec]


def test_bearer_reads_only_the_bearer_scheme() -> None:
    assert bearer("Bearer abc") == "abc"
    assert bearer("bearer  abc ") == "abc"
    assert bearer("Basic abc") is None
    assert bearer("Bearer ") is None
    assert bearer(None) is None


# ---------------------------------------------------------------- the middleware, in process


async def _request(
    app: Any, method: str, path: str, secret: str | None = None, body: Any = None
) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}

    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        return await c.request(method, path, headers=headers, json=body)


def _app(settings: Settings, **options: Any) -> Any:
    return build_app(settings, partial(create_server, settings), **options)


async def test_without_tokens_the_http_app_refuses_to_build(settings: Settings) -> None:
    with pytest.raises(ConfigError, match="refusing to serve HTTP without tokens"):
        _app(settings)
    app = _app(settings, insecure_no_auth=True)
    assert (await _request(app, "GET", "/metrics")).status_code == 200


def _with_tokens(settings: Settings, *specs: TokenSpec) -> Settings:
    return settings.model_copy(
        update={"http": settings.http.model_copy(update={"tokens": list(specs)})}
    )


async def test_every_path_needs_a_known_token(settings: Settings) -> None:
    secret, spec = _token("ops")
    log = io.StringIO()
    app = _app(_with_tokens(settings, spec), observer=Observer(log))
    for method, path in (("GET", "/metrics"), ("POST", "/mcp"), ("GET", "/anything")):
        refused = await _request(app, method, path, "mo_wrong")
        assert refused.status_code == 401, path
        assert refused.json() == {}
        assert (await _request(app, method, path)).status_code == 401, path
    metrics = await _request(app, "GET", "/metrics", secret)
    assert metrics.status_code == 200
    assert "# TYPE orchestrator_requests_total counter" in metrics.text
    assert 'orchestrator_http_refusals_total{status="401"} 6.0' in metrics.text
    lines = [json.loads(line) for line in log.getvalue().splitlines()]
    assert len(lines) == 6
    assert {line["event"] for line in lines} == {"refused"}
    assert {line["status"] for line in lines} == {401}
    assert "mo_wrong" not in log.getvalue()  # a presented secret is never logged


async def test_websocket_connections_are_closed_unchecked_never_passed_on() -> None:
    called: list[str] = []
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        called.append(scope["type"])

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    _, spec = _token("ops")
    middleware = BearerAuth(app, TokenBook([spec]), "embedded")
    await middleware({"type": "websocket", "path": "/mcp", "headers": []}, receive, send)
    assert called == []
    assert sent == [{"type": "websocket.close", "code": 1008}]


async def test_the_tool_names_tokens_may_name_are_the_served_tools(settings: Settings) -> None:
    server = create_server(settings)
    served = {tool.name for tool in await server.list_tools()}
    assert served == set(TOOL_NAMES)


def test_only_loopback_addresses_count_as_loopback() -> None:
    assert all(map(is_loopback, ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost")))
    assert not any(map(is_loopback, ("0.0.0.0", "::", "192.168.1.5", "example.org", "")))

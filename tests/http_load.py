"""A real HTTP server process and concurrent MCP clients over streamable HTTP.

Shared by the load benchmark (`bench/bench_http_load.py`) and its integration test: the server
is `orchestrator serve --transport http` in a subprocess over a temp data dir, the clients are
the MCP SDK's streamable-HTTP client, each write carries unique content, and afterwards the
embedded store's SQLite file is read to count the writes (none lost, none duplicated).
"""

from __future__ import annotations

import json
import os
import random
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from memory_orchestrator.state.tokens import TokenSpec, hash_token, new_secret

START_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 60.0
TOPICS = (
    "firmware",
    "procurement",
    "deployment",
    "budget",
    "roadmap",
    "incident",
    "vendor",
    "migration",
    "hiring",
    "security",
    "latency",
    "storage",
)
PEOPLE = ("Dana", "Ravi", "Mei", "Jonas", "Amara", "Luis", "Keiko", "Omar")


@dataclass(frozen=True)
class Token:
    """A token's secret (what a client sends) with its config entry (what the server keeps)."""

    secret: str
    spec: TokenSpec


def make_token(name: str, **rules: Any) -> Token:
    secret = new_secret()
    return Token(secret, TokenSpec(name=name, hash=hash_token(secret), **rules))


@dataclass
class ServerProcess:
    base_url: str
    data_dir: Path
    log: Path
    process: subprocess.Popen[bytes]

    @property
    def mcp_url(self) -> str:
        return self.base_url + "/mcp"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def orchestrator_command() -> list[str]:
    script = Path(sys.executable).parent / "orchestrator"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from memory_orchestrator.faces.cli.app import main; main()"]


@contextmanager
def http_server(
    data_dir: Path,
    tokens: Sequence[TokenSpec],
    *,
    extra_args: Sequence[str] = (),
    http: Mapping[str, int | float] | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[ServerProcess]:
    """`orchestrator serve --transport http` on a free loopback port, until the block ends;
    `http` sets more `[http]` settings (`max_sessions_per_token`, ...), `env` more variables
    of the server's environment (`ORCHESTRATOR_SEMANTIC__ENABLED`, ...)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "orchestrator.toml"
    lines = [f"data_dir = {json.dumps(str(data_dir))}", ""]
    if http:
        lines += ["[http]", *(f"{key} = {value!r}" for key, value in http.items()), ""]
    lines += [spec.toml() for spec in tokens]
    config.write_text("\n".join(lines), encoding="utf-8")
    port = _free_port()
    log = data_dir / "server.log"
    command = [
        *orchestrator_command(),
        "--config",
        str(config),
        "serve",
        "--transport",
        "http",
        "--port",
        str(port),
        *extra_args,
    ]
    with open(log, "wb") as errors:
        process = subprocess.Popen(
            command, cwd=data_dir, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=errors, env={**os.environ, **(env or {})},
        )  # fmt: skip
    server = ServerProcess(f"http://127.0.0.1:{port}", data_dir, log, process)
    try:
        _wait_for_port(server, port)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


def _wait_for_port(server: ServerProcess, port: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"server exited: {server.log.read_text(errors='replace')[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server did not listen within {START_TIMEOUT_S}s")


@asynccontextmanager
async def mcp_session(
    url: str,
    secret: str | None,
    *,
    terminate_on_close: bool = True,
    session_ids: list[str] | None = None,
) -> AsyncIterator[ClientSession]:
    """An initialised MCP client session over streamable HTTP with a bearer token; without
    `terminate_on_close` the client leaves without ending the session (no DELETE). The session
    id the server gives is appended to `session_ids`."""
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    timeout = httpx2.Timeout(CALL_TIMEOUT_S, read=CALL_TIMEOUT_S)

    async def note_session(response: httpx2.Response) -> None:
        given = response.headers.get("mcp-session-id")
        if session_ids is not None and given and given not in session_ids:
            session_ids.append(given)

    hooks = {"response": [note_session]}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout, event_hooks=hooks) as http,
        streamable_http_client(url, http_client=http, terminate_on_close=terminate_on_close) as (
            read,
            write,
        ),
        ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT_S) as session,
    ):
        with anyio.fail_after(START_TIMEOUT_S):
            await session.initialize()
        yield session


def text_of(result: CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


# ---------------------------------------------------------------- the load


def unique_memory(rng: random.Random, client: int, index: int) -> dict[str, Any]:
    """A write whose content no other write shares (a uuid), about a person and a topic."""
    person, topic = rng.choice(PEOPLE), rng.choice(TOPICS)
    tag = uuid.uuid4().hex
    return {
        "content": f"{person} noted {topic} item {tag} (client {client}, request {index}).",
        "type": "episodic",
        "entities": [person],
        "tags": [topic],
    }


@dataclass
class LoadResult:
    clients: int
    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    latencies_ms: dict[str, list[float]] = field(default_factory=dict)
    error_samples: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)  # contents reported added
    write_actions: Counter[str] = field(default_factory=Counter)

    def record(self, tool: str, ms: float) -> None:
        self.requests += 1
        self.latencies_ms.setdefault(tool, []).append(ms)

    def all_latencies(self) -> list[float]:
        return [ms for values in self.latencies_ms.values() for ms in values]


async def _one_client(
    url: str, secret: str, client: int, requests: int, mix: dict[str, int], result: LoadResult
) -> None:
    rng = random.Random(client)
    tools = [tool for tool, share in mix.items() for _ in range(share)]
    async with mcp_session(url, secret) as session:
        for index in range(requests):
            tool = rng.choice(tools)
            if tool == "memory_write":
                memory = unique_memory(rng, client, index)
                arguments: dict[str, Any] = memory
            else:
                query = f"what happened with {rng.choice(TOPICS)} for {rng.choice(PEOPLE)}"
                arguments = {"query": query}
            started = time.perf_counter()
            answer: CallToolResult | None = None
            try:
                with anyio.fail_after(CALL_TIMEOUT_S):
                    answer = await session.call_tool(tool, arguments)
            except Exception as exc:  # a failed call is a measured error, not a crash
                failure: str | None = f"{tool}: {type(exc).__name__}: {exc}"
            else:
                failure = f"{tool}: {text_of(answer)}" if answer.is_error else None
            result.record(tool, (time.perf_counter() - started) * 1000)
            if failure is not None or answer is None:
                result.errors += 1
                if failure and len(result.error_samples) < 5:
                    result.error_samples.append(failure[:300])
                continue
            if tool == "memory_write":
                report = answer.structured_content or {}
                action = str(report.get("action"))
                result.write_actions[action] += 1
                if action in {"added", "queued"}:
                    result.written.append(arguments["content"])


async def run_load(
    url: str, secret: str, *, clients: int, requests_per_client: int, mix: dict[str, int]
) -> LoadResult:
    """`clients` concurrent sessions, each making `requests_per_client` calls drawn from `mix`."""
    result = LoadResult(clients=clients)
    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for client in range(clients):
            group.start_soon(_one_client, url, secret, client, requests_per_client, mix, result)
    result.seconds = time.perf_counter() - started
    return result


def stored_contents(data_dir: Path) -> Counter[str]:
    """How many live memories hold each content, read straight from the embedded store."""
    with sqlite3.connect(data_dir / "memories.db") as db:
        rows = db.execute("SELECT content FROM memories WHERE deleted_at IS NULL").fetchall()
    return Counter(row[0] for row in rows)


def lost_and_duplicated(written: Sequence[str], stored: Counter[str]) -> tuple[int, int]:
    """Writes acknowledged but not stored, and writes stored more than once."""
    lost = sum(1 for content in written if stored[content] == 0)
    duplicated = sum(1 for content in written if stored[content] > 1)
    return lost, duplicated

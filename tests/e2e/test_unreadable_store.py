"""A store that cannot be searched is never an empty memory (issue 48), through every face an
agent or a user has: an MCP client over stdio (the SDK's), an MCP client over streamable HTTP
(a real `orchestrator serve --transport http` with a token) and the CLI, each a real process.

Each store kind the suite can start is broken for real: the embedded store's file is not a
database; Mnemon's binary is missing; mnemon-mcp's npm server dies as it starts (its SQLite
file is garbage); kg-memory's npm server cannot read its JSONL file; the fused store has both
its members broken; PostgreSQL was stopped; the mnemonic store's folder is not there (a file
in its place: it cannot be made when the store opens).

- Nothing came back: `memory_context` and `memory_search` are tool errors (isError) whose one
  line says the store could not be searched, why, and what to do; the CLI exits 1 with it.
- The store fails but the derived indexes still hold its memories (Mnemon's binary gone, its
  store file still there): they come back, and the answer's first line says the store itself
  could not be searched.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.types import CallToolResult, TextContent

from memory_orchestrator.backends.kg_memory import PACKAGE as KG_PACKAGE
from memory_orchestrator.backends.mnemon_mcp import PACKAGE as MM_PACKAGE
from memory_orchestrator.postgres.server import LocalPostgres, PgUnavailable
from tests.e2e.test_mcp_other_stores import _session
from tests.e2e.test_mcp_stdio import REQUEST_TIMEOUT_S, START_TIMEOUT_S
from tests.http_load import http_server, make_token, mcp_session, orchestrator_command
from tests.mnemon_double import fast_launcher, real_binary
from tests.npm_servers import require_script

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

QUERY = "what did we decide about the vendor"
SEED, ENTITY = "a-memory-id", "Vendor X"  # memory_expand's seeds
GARBAGE = b"\x00garbage, not SQLite\xff" * 512
# what each broken store says (the reason the error carries)
REASONS = {
    "embedded": "not a database",
    "mnemon": "mnemon binary not found",
    "mnemon-mcp": "could not start",
    "kg-memory": "JSON",
    "fused": "not a database",
    "postgres": "did not answer",
    "mnemonic": "is not a folder",
}
FACES = ("stdio", "http", "cli")


@pytest.fixture(scope="module")
def stopped_postgres() -> str:
    """The DSN of a real PostgreSQL that ran here and was stopped."""
    server = LocalPostgres()
    try:
        server.start()
    except (PgUnavailable, OSError) as exc:
        pytest.skip(f"no PostgreSQL server could start here: {exc}")
    dsn = server.dsn()
    server.stop()
    return dsn


def broken(kind: str, data_dir: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    """The environment that makes a store of `kind` in `data_dir` fail outright."""
    env = {"ORCHESTRATOR_BACKEND": kind}
    if kind in ("embedded", "fused"):
        (data_dir / "memories.db").write_bytes(GARBAGE)
    if kind in ("mnemon", "fused"):
        env["ORCHESTRATOR_MNEMON__BINARY"] = str(data_dir / "no-mnemon-here" / "mnemon")
        env["ORCHESTRATOR_MNEMON__DATA_DIR"] = str(data_dir / "mnemon")
    if kind == "fused":
        members = [{"backend": "embedded"}, {"backend": "mnemon"}]
        env["ORCHESTRATOR_FUSED__STORES"] = json.dumps(members)
    if kind == "mnemon-mcp":
        (data_dir / "mnemon-mcp.db").write_bytes(GARBAGE)
        env["ORCHESTRATOR_MNEMON_MCP__SCRIPT"] = str(require_script(MM_PACKAGE))
    if kind == "kg-memory":
        (data_dir / "kg-memory.jsonl").write_text("{not json\n", encoding="utf-8")
        env["ORCHESTRATOR_KG_MEMORY__SCRIPT"] = str(require_script(KG_PACKAGE))
    if kind == "mnemonic":
        (data_dir / "mnemonic").write_text("not a folder\n", encoding="utf-8")
    if kind == "postgres":
        env["ORCHESTRATOR_POSTGRES__DSN"] = request.getfixturevalue("stopped_postgres")
        env["ORCHESTRATOR_RETRIEVAL__TIMEOUT_S"] = "2"
    return env


# ---------------------------------------------------------------- the three faces


def _text(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


Answer = tuple[bool, str, dict[str, Any] | None]  # is an error, the text, structured content


async def _warmed(session: ClientSession) -> None:
    """Until the server's warm-up has loaded the local index (health says so); a query
    meanwhile goes without it, and says so."""
    with anyio.fail_after(START_TIMEOUT_S):
        while True:
            health = await session.call_tool("memory_health", {})
            assert isinstance(health.structured_content, dict), _text(health)
            details = " ".join(c["detail"] for c in health.structured_content["checks"])
            if "loading" not in details and "warming up" not in details:
                return
            await anyio.sleep(0.05)


def _over_mcp(session_of: Any, calls: list[tuple[str, dict[str, Any]]]) -> list[Answer]:
    async def go() -> list[Answer]:
        answers: list[Answer] = []
        async with session_of() as session:
            await _warmed(session)
            for tool, arguments in calls:
                with anyio.fail_after(REQUEST_TIMEOUT_S * 2):
                    result = await session.call_tool(tool, arguments)
                answers.append((result.is_error, _text(result), result.structured_content))
        return answers

    return anyio.run(go)


def ask(
    face: str,
    data_dir: Path,
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, Answer]:
    """`memory_context` and `memory_search` on QUERY, `memory_expand` from a seed id and an
    entity (`context`, `search` and `expand` on the CLI)."""
    calls: list[tuple[str, dict[str, Any]]] = [
        ("memory_context", {"query": QUERY}),
        ("memory_search", {"query": QUERY}),
        ("memory_expand", {"seed_ids": [SEED], "entities": [ENTITY], "query": QUERY}),
    ]
    if face == "stdio":
        answers = _over_mcp(lambda: _session(data_dir, env), calls)
    elif face == "http":
        for name, value in env.items():
            monkeypatch.setenv(name, value)  # the server process inherits them
        token = make_token("agent")
        with http_server(data_dir, [token.spec]) as server:
            answers = _over_mcp(lambda: mcp_session(server.mcp_url, token.secret), calls)
    else:
        commands = (
            ["context", QUERY],
            ["search", QUERY],
            ["expand", "--seed", SEED, "--entity", ENTITY, "--query", QUERY],
        )
        answers = [_cli(data_dir, env, command) for command in commands]
    return dict(zip(("context", "search", "expand"), answers, strict=True))


def _cli(data_dir: Path, env: dict[str, str], command: list[str]) -> Answer:
    done = subprocess.run(
        [*orchestrator_command(), "--data-dir", str(data_dir), "--json", *command],
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(data_dir), **env},
        cwd=data_dir,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        assert done.returncode == 1, done.stderr
        return True, done.stderr, None
    return False, done.stdout, json.loads(done.stdout)


def _said(stderr_or_text: str) -> str:
    """The error line: the CLI's last stderr line (a store's own logging may come first)."""
    return stderr_or_text.strip().splitlines()[-1]


# ---------------------------------------------------------------- nothing came back


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("kind", list(REASONS))
def test_a_store_that_cannot_be_searched_is_an_error_never_an_empty_answer(
    kind: str,
    face: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = broken(kind, tmp_path, request)
    for tool, (is_error, text, content) in ask(face, tmp_path, env, monkeypatch).items():
        assert is_error, (tool, text, content)
        line = _said(text)
        said = "reading the seeds failed" if tool == "expand" else "no search reached the store"
        assert f"memory store error: {said}" in line, (tool, text)
        assert REASONS[kind] in line, (tool, line)
        assert "not an empty memory" in line, line
        assert "ask again" in line, line
        assert "No relevant memories found" not in text


# ---------------------------------------------------------------- the indexes still found it


def _write_the_decision(data_dir: Path, env: dict[str, str]) -> None:
    """`orchestrator write` of the memory the partial answers must still find."""
    content = "We decided to drop Vendor X for the radio module in favour of Vendor Y."
    done = subprocess.run(
        [*orchestrator_command(), "--data-dir", str(data_dir), "write", content],
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(data_dir), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def _marked(answers: dict[str, Answer], face: str, warning: str) -> str:
    """Both reads answered, found the decision and say `warning` first; the block's first
    line."""
    is_error, text, content = answers["context"]
    assert not is_error, text
    assert content is not None
    first = str(content["context_block"]).splitlines()[0]
    assert first.startswith(warning), first
    assert "Vendor Y" in content["context_block"]
    assert content["warning"] == first
    is_error, text, content = answers["search"]
    assert not is_error, text
    assert content is not None
    assert content["warning"].startswith(warning)
    assert "Vendor Y" in content["items"][0]["summary"]
    if face != "cli":  # what the model reads: the warning first
        assert text.splitlines()[0] == content["warning"]
    return first


@pytest.fixture(scope="module")
def written_then_binary_gone(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, dict[str, str]]:
    """A Mnemon store holding one memory, written with a working binary (the real one when
    it is here, else the contract double); then the binary is gone. The store file stays, so
    the orchestrator's local index still holds the memory."""
    data_dir = tmp_path_factory.mktemp("mnemon-partial")
    binary = real_binary() or fast_launcher(data_dir / "double")
    env = {
        "ORCHESTRATOR_BACKEND": "mnemon",
        "ORCHESTRATOR_MNEMON__DATA_DIR": str(data_dir / "mnemon"),
        "ORCHESTRATOR_MNEMON__BINARY": str(binary),
    }
    _write_the_decision(data_dir, env)
    env["ORCHESTRATOR_MNEMON__BINARY"] = str(data_dir / "no-mnemon-here" / "mnemon")
    return data_dir, env


@pytest.mark.parametrize("face", FACES)
def test_what_the_indexes_still_find_comes_back_marked_as_such(
    face: str,
    written_then_binary_gone: tuple[Path, dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data_dir, env = written_then_binary_gone
    answers = ask(face, data_dir, env, monkeypatch)
    _marked(answers, face, "Warning: the memory store could not be searched (mnemon binary")


# ---------------------------------------------------------------- a fused store missing a part


@pytest.fixture(scope="module")
def fused_with_a_member_gone(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, dict[str, str]]:
    """A fused store of the embedded store (holding one memory, written through the fused
    store: writes go to its first member) and Mnemon, whose binary is missing."""
    data_dir = tmp_path_factory.mktemp("fused-partial")
    env = {
        "ORCHESTRATOR_BACKEND": "fused",
        "ORCHESTRATOR_FUSED__STORES": json.dumps([{"backend": "embedded"}, {"backend": "mnemon"}]),
        "ORCHESTRATOR_MNEMON__BINARY": str(data_dir / "no-mnemon-here" / "mnemon"),
        "ORCHESTRATOR_MNEMON__DATA_DIR": str(data_dir / "mnemon"),
    }
    _write_the_decision(data_dir, env)
    return data_dir, env


@pytest.mark.parametrize("face", FACES)
def test_a_fused_store_answers_without_a_failed_member_and_says_so(
    face: str,
    fused_with_a_member_gone: tuple[Path, dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data_dir, env = fused_with_a_member_gone
    answers = ask(face, data_dir, env, monkeypatch)
    first = _marked(answers, face, "Warning: part of the memory could not be searched (mnemon: ")
    assert "mnemon binary not found" in first

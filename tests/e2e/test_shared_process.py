"""The shared process (`faces.shared`) with real processes and real sockets: MCP SDK sessions
through `orchestrator serve` share one process; killed with -9 under a two-session write load
it costs no acknowledged write and no session; a socket directory that is not the user's
alone, a peer of another user, another version are refused; it stops when idle; the CLI and
the hook client use it; the tools answer the same through it as in-process.

The uid the kernel reports cannot be changed in a test: the check's input is injected
(`tests.faults.peer_of_another_user`, named as fault injection).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import start_blocking_portal
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent

from memory_orchestrator.faces.shared import address, client
from memory_orchestrator.faces.shared.identity import settings_key
from memory_orchestrator.faces.shared.server import SharedServer, listen
from memory_orchestrator.models import NewMemory, WriteRequest
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import load_settings
from tests.e2e.servers import ORCHESTRATOR, mcp_session
from tests.e2e.test_mcp_stdio import MEMORIES
from tests.faults import peer_of_another_user
from tests.shared_processes import alive, pids, socket_dir_of, start

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

READ_S = 120.0  # a request may wait for a shared process to start again on a busy machine
START_S = 120.0


def runtime() -> Path:
    return Path(os.environ["XDG_RUNTIME_DIR"])  # the test's own (tests/conftest.py)


def environment(data: Path, **extra: str) -> dict[str, str]:
    return {
        "ORCHESTRATOR_DATA_DIR": str(data),
        "ORCHESTRATOR_SEMANTIC__ENABLED": "false",
        "ORCHESTRATOR_SHARED_PROCESS__START_TIMEOUT_S": str(START_S),
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(data),
        "XDG_RUNTIME_DIR": str(runtime()),
        **extra,
    }


def session(data: Path, way: str = "relay", **extra: str) -> Any:
    data.mkdir(parents=True, exist_ok=True)
    return mcp_session(
        way,
        environment(data, **extra),
        data,
        runtime=runtime(),
        read_timeout_s=READ_S,
        start_timeout_s=START_S,
    )


def structured(result: CallToolResult) -> dict[str, Any]:
    text = " ".join(b.text for b in result.content if isinstance(b, TextContent))
    assert not result.is_error, text
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def check_of(mcp: ClientSession, name: str = "shared_process") -> str:
    report = structured(await mcp.call_tool("memory_health", {}))
    return str(next(c["detail"] for c in report["checks"] if c["name"] == name))


def pid_in(detail: str) -> int:
    found = re.match(r"pid (\d+),", detail)
    assert found, detail
    return int(found.group(1))


# ---------------------------------------------------------------- one process, shared


async def test_two_sessions_share_one_process(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with session(data) as one, session(data) as two:
        written = structured(await one.call_tool("memory_write", MEMORIES[0]))
        assert written["action"] == "added"
        first, second = await check_of(one), await check_of(two)
        assert pid_in(first) == pid_in(second)
        assert "shared by 2 MCP session(s)" in second
        query = {"query": "Which milestone did Vendor X miss?"}
        found = structured(await two.call_tool("memory_context", query))
        assert [i["memory_id"] for i in found["items"]] == [written["id"]]
    assert len(pids(runtime())) == 1


# ---------------------------------------------------------------- kill -9 under load

SYLLABLES = "ka lo mi ne ru ta vo zi be da fe gu hi jo ku pa so te wy xe".split()
BEFORE, AFTER = 4, 4  # acknowledged writes per session before the kill, and after it


def note(session_name: str, number: int) -> str:
    """A memory no other one of the load is close to (no near-duplicate is skipped)."""
    rng = random.Random(f"{session_name}-{number}")
    words = ["".join(rng.choices(SYLLABLES, k=3)) for _ in range(9)]
    return f"Field note {session_name}{number}: " + " ".join(words)


class Load:
    """One session's writes, one after the other, counted before and after the kill."""

    def __init__(self, name: str, mcp: ClientSession) -> None:
        self.name, self.mcp = name, mcp
        self.acknowledged: list[str] = []
        self.after_kill = 0
        self.failures: list[str] = []

    async def run(self, killed: anyio.Event, ready: anyio.Event, others: list[Load]) -> None:
        number = 0
        while self.after_kill < AFTER and number < 50:  # (50: a session that never goes on)
            number += 1
            sent_after_kill = killed.is_set()
            try:
                result = await self.mcp.call_tool(
                    "memory_write", {"content": note(self.name, number)}
                )
            except MCPError as exc:  # the relay's answer for a request in flight
                self.failures.append(str(exc))
                continue
            report = structured(result)
            assert report["action"] == "added", report
            self.acknowledged.append(report["id"])
            self.after_kill += int(sent_after_kill)
            if all(len(load.acknowledged) >= BEFORE for load in others):
                ready.set()


async def test_kill_minus_nine_under_a_two_session_write_load_loses_no_acknowledged_write(
    tmp_path: Path,
) -> None:
    """Two sessions write while the shared process is killed with -9: each acknowledged
    write is in the store afterwards, each session sees at most the request it had in flight
    fail (with an error that says why), and both go on writing through a new process."""
    data = tmp_path / "data"
    killed_pid: list[int] = []

    killed, ready = anyio.Event(), anyio.Event()
    async with session(data) as one, session(data) as two:
        loads = [Load("a", one), Load("b", two)]

        async def kill() -> None:
            await ready.wait()
            (pid,) = pids(runtime()).values()
            os.kill(pid, signal.SIGKILL)
            killed_pid.append(pid)
            killed.set()

        async with anyio.create_task_group() as group:
            group.start_soon(kill)
            for load in loads:
                group.start_soon(load.run, killed, ready, loads)
        after = await check_of(one)
        assert pid_in(after) not in killed_pid
        assert pid_in(after) == pid_in(await check_of(two))
    for load in loads:
        assert len(load.failures) <= 1, load.failures
        for failure in load.failures:
            assert "shared process" in failure, failure
            assert "in flight" in failure, failure
        assert load.after_kill >= AFTER
    ids = [i for load in loads for i in load.acknowledged]
    orchestrator = Orchestrator.from_settings(load_settings(data_dir=data))
    try:
        stored = [m.id for m in await orchestrator.memories(ids)]
    finally:
        await orchestrator.close()
    assert sorted(stored) == sorted(ids)
    assert not alive(killed_pid[0])


# ---------------------------------------------------------------- refused


async def test_a_socket_directory_with_the_wrong_mode_is_refused(tmp_path: Path) -> None:
    """The relay never uses (nor repairs) a socket directory others may enter: it serves in
    its own process, and health says why."""
    directory = socket_dir_of(runtime())
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)

    async with session(tmp_path / "data") as mcp:
        found = structured(await mcp.call_tool("memory_context", {"query": "anything"}))
        assert found["items"] == []
        detail = await check_of(mcp)
    assert detail.startswith("not used: the socket directory")
    assert "has mode 0755; it must be 0700" in detail
    assert (directory.stat().st_mode & 0o777) == 0o755
    assert list(directory.iterdir()) == []  # no socket, no process
    with pytest.raises(client.Unavailable, match="mode 0755"):
        client.connect()


@contextmanager
def shared_here(data: Path, **options: Any) -> Iterator[tuple[str, str]]:
    """A shared process's server run in this process (so that its uid check can be given an
    injected input), on a real socket: its socket path and settings key."""
    settings = load_settings(data_dir=data)
    directory = address.socket_dir()
    name = address.server_name(settings_key(settings))
    path = os.path.join(directory, f"{name}.sock")
    server = SharedServer(settings, listen(path), directory, name, signals=False, **options)
    with start_blocking_portal() as portal:
        serving = portal.start_task_soon(server.serve)
        try:
            yield path, settings_key(settings)
        finally:
            portal.call(server.stop)
            serving.result(timeout=60)


def test_a_peer_of_another_user_is_refused(tmp_path: Path) -> None:
    refused = pytest.raises(client.Unavailable, match=r"refused: the peer runs as uid \d+")
    with shared_here(tmp_path / "data", peer_uid=peer_of_another_user) as (path, key), refused:
        client.connect_to(path, key, timeout_s=60)
    with shared_here(tmp_path / "data") as (path, key):
        with client.connect_to(
            path, key, timeout_s=60
        ) as connection:  # (the same, checked for real)
            assert connection.call("health", {}, timeout_s=60)["backend"] == "embedded"
        with pytest.raises(client.Unavailable, match=r"the peer runs as uid \d+"):
            client.connect_to(path, key, timeout_s=60, uid_of=peer_of_another_user)


def test_another_version_is_refused(tmp_path: Path) -> None:
    """The version is in every name and in the opening: a process of another version is
    never reached by name, and refuses an opening that names another."""
    assert address.server_name("f" * 64).startswith(f"{address.package_version()}-s")
    assert address.alias_name("f" * 64).startswith(f"{address.package_version()}-k")
    with (
        shared_here(tmp_path / "data") as (path, key),
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock,
    ):
        sock.settimeout(60)
        sock.connect(path)
        opening = {"hello": "memory-orchestrator", "version": "0.0.0-other", "key": key}
        sock.sendall(json.dumps({**opening, "mode": "call"}).encode() + b"\n")
        with sock.makefile("rb") as reader:
            answer = json.loads(reader.readline())
    assert answer == {"refused": f"version 0.0.0-other is not {address.package_version()}"}


def test_other_settings_are_refused(tmp_path: Path) -> None:
    refused = pytest.raises(client.Unavailable, match="not the settings this process serves")
    with shared_here(tmp_path / "data") as (path, _), refused:
        client.connect_to(path, "0" * 64, timeout_s=60)


# ---------------------------------------------------------------- lifetime


def wait_until(done: Any, what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_it_stops_when_idle_and_removes_its_names(tmp_path: Path) -> None:
    env = environment(tmp_path / "data", ORCHESTRATOR_SHARED_PROCESS__IDLE_STOP_S="1")
    (tmp_path / "data").mkdir()
    start(env, tmp_path)
    wait_until(lambda: pids(runtime()), "a shared process listens")
    (pid,) = pids(runtime()).values()
    with client.connect(env=env, cwd=str(tmp_path), timeout_s=60) as connection:
        assert connection.pid == pid
    wait_until(lambda: not alive(pid), "it stops once idle")
    left = sorted(p.name for p in socket_dir_of(runtime()).iterdir())
    assert [name for name in left if name.endswith((".sock", ".pid"))] == [], left


# ---------------------------------------------------------------- the CLI and the hooks


def cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ORCHESTRATOR, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=data,
        env=environment(data),
        check=False,
    )


def answer_of(text: str) -> Any:
    """What a `context --json` answered: the items and the block (its trace differs: a
    process that lists the store for the first time notes what it added)."""
    found = json.loads(text)
    return found["items"], found["context_block"], found["summary"]


def test_the_cli_asks_the_shared_process_when_one_runs(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    assert cli(data, "write", MEMORIES[0]["content"]).returncode == 0  # in-process
    alone = cli(data, "--json", "context", "Which milestone did Vendor X miss?")
    health = json.loads(cli(data, "--json", "health").stdout)
    note = next(c["detail"] for c in health["checks"] if c["name"] == "shared_process")
    assert note.startswith("not used (no shared process at ")
    start(environment(data), data)
    wait_until(lambda: pids(runtime()), "a shared process listens")
    (pid,) = pids(runtime()).values()
    health = json.loads(cli(data, "--json", "health").stdout)
    note = next(c["detail"] for c in health["checks"] if c["name"] == "shared_process")
    assert pid_in(note) == pid
    shared = cli(data, "--json", "context", "Which milestone did Vendor X miss?")
    assert shared.returncode == alone.returncode == 0
    assert answer_of(shared.stdout) == answer_of(alone.stdout)
    refused = cli(data, "explain", "0" * 32)
    assert (refused.returncode, refused.stderr) == (
        1,
        "error: no trace with id '" + "0" * 32 + "'\n",
    )


def test_a_hook_gets_nothing_and_starts_one_then_gets_the_context(tmp_path: Path) -> None:
    """`client.call` as a prompt hook uses it: nothing runs, so it returns None at once
    and starts the shared process; once that listens, the same call answers."""
    assert client.call("context", {"query": "firmware"}, timeout_s=5) is None
    wait_until(lambda: pids(runtime()), "the hook started a shared process")
    memory = {"content": MEMORIES[3]["content"], "entities": ["Vendor X"]}
    written = client.call("write", {"memory": memory}, timeout_s=60)
    assert written is not None
    assert written["action"] == "added"
    found = client.call("context", {"query": "how do I flash the radio firmware?"}, timeout_s=60)
    assert found is not None
    assert written["id"] in found["context_block"]
    with pytest.raises(client.CallFailed, match="query must not be blank") as failed:
        client.call("context", {"query": "  "}, timeout_s=60)
    assert failed.value.kind == "InvalidRequest"


# ---------------------------------------------------------------- the same results


SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("memory_search", {"query": "Vendor X firmware milestone", "top_k": 5, "detail": True}),
    ("memory_context", {"query": "what went wrong with Vendor X?", "task": "vendor update"}),
    ("memory_context", {"query": "what went wrong with Vendor X?", "detail": True}),
    ("memory_expand", {"entities": ["Vendor X"], "hops": 2, "detail": True}),
    ("memory_explain", {"query": "radio firmware"}),
    ("memory_write", {"content": MEMORIES[1]["content"], "entities": ["Dana Whitfield"]}),
    ("memory_write", {"content": "Vendor X ships firmware 2.5 in May.", "entities": ["Vendor X"]}),
    ("memory_context", {"query": "when does Vendor X ship the new firmware?"}),
    ("memory_search", {"query": "   "}),
]


def comparable(value: Any) -> Any:
    """A tool's answer without what differs from run to run (ids, timings, the time a memory
    was written or a trace made) and with the scores rounded (recency moves with the
    clock)."""
    if isinstance(value, dict):
        return {
            k: comparable(v)
            for k, v in value.items()
            if k not in {"trace_id", "timings_ms", "latency_ms", "created_at", "started_at"}
        }
    if isinstance(value, list):
        return [comparable(v) for v in value]
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, str):
        value = re.sub(r"\b(tr|mem)_[0-9a-f]{12,32}\b", "<id>", value)
        value = re.sub(r"\d{4}-\d\d-\d\d[T ][\d:.]+(Z|[+-]\d\d:\d\d| UTC)?", "<time>", value)
        return re.sub(r"\d+(\.\d+)? ms\b", "<ms>", value)
    return value


async def warmed(mcp: ClientSession) -> None:
    """Until the server's warm-up has loaded the local index (a request meanwhile is answered
    without it, and its trace says so): answers then do not depend on how fast it loaded."""
    with anyio.fail_after(START_S):
        while True:
            asked = {"query": "warm", "detail": True}
            found = structured(await mcp.call_tool("memory_search", asked))
            ask = {"trace_id": found["trace_id"]}
            told = structured(await mcp.call_tool("memory_explain", ask))
            if not any(e["kind"] == "still_loading" for e in told["trace"]["events"]):
                return
            await anyio.sleep(0.05)


async def test_the_tools_answer_the_same_through_a_relay_as_in_process(tmp_path: Path) -> None:
    """The same calls over copies of one store, in-process and through a relay: the same
    answers (the relay carries the lines unchanged; the shared process runs the same tools)."""
    seeded = tmp_path / "seeded"
    orchestrator = Orchestrator.from_settings(load_settings(data_dir=seeded))
    try:
        for memory in MEMORIES:
            await orchestrator.write(WriteRequest(memory=NewMemory.model_validate(memory)))
    finally:
        await orchestrator.close()

    async def run(way: str) -> list[Any]:
        data = tmp_path / way
        shutil.copytree(seeded, data)
        answers = []
        async with session(data, way) as mcp:
            await warmed(mcp)
            for tool, arguments in SCRIPT:
                result = await mcp.call_tool(tool, arguments)
                answers.append((result.is_error, comparable(result.structured_content)))
        return answers

    in_process = await run("in-process")
    relayed = await run("relay")
    assert relayed == in_process
    assert in_process[-1][0]  # (the last is a tool error, the same both ways)

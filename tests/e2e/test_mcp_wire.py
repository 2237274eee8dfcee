"""The stdio wire of a real server process, spoken to line by line: every line gets an answer
(a line that is not a JSON-RPC message, or whose id cannot be answered, gets a JSON-RPC error),
nothing a client sends ends the server, and a client that hangs up mid-call loses no write and
ends the server cleanly (exit 0, one line, no traceback). Both ways (`tests.e2e.servers.WAYS`):
the server in the client's own process, and `orchestrator serve`, the relay that carries the
lines to the shared process and its answers back unchanged."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.servers import WAYS, command

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "wire-test", "version": "0"},
    },
}


def server(data: Path, way: str = "in-process") -> subprocess.Popen[str]:
    data.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "ORCHESTRATOR_DATA_DIR": str(data)}
    return subprocess.Popen(
        command(way),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=data,
    )


@pytest.fixture(params=WAYS)
def proc(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    p = server(tmp_path / "data", request.param)
    yield p
    if p.poll() is None:
        p.kill()
    p.wait(timeout=30)
    for stream in (p.stdin, p.stdout, p.stderr):
        if stream is not None and not stream.closed:
            stream.close()


def send(p: subprocess.Popen[str], line: str) -> None:
    assert p.stdin is not None
    p.stdin.write(line + "\n")
    p.stdin.flush()


def answer(p: subprocess.Popen[str]) -> dict[str, Any]:
    assert p.stdout is not None
    line = p.stdout.readline()  # the server answers every line; a hang here is the bug
    assert line, p.stderr.read() if p.stderr else ""
    reply: dict[str, Any] = json.loads(line)
    return reply


def test_a_line_that_is_not_a_message_gets_a_json_rpc_error_with_its_id(
    proc: subprocess.Popen[str],
) -> None:
    send(proc, json.dumps(INIT))
    assert answer(proc)["id"] == 1
    send(proc, json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    send(proc, '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": ')
    broken = answer(proc)
    assert broken["id"] == 7
    assert broken["error"]["code"] == -32700
    send(proc, '{"jsonrpc": "2.0", "id": "q-8", "method": 42}')
    invalid = answer(proc)
    assert invalid["id"] == "q-8"
    assert invalid["error"]["code"] == -32600
    send(proc, "not json at all")
    assert answer(proc)["id"] is None
    send(proc, json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}))
    listed = answer(proc)  # the session goes on
    assert listed["id"] == 9
    assert len(listed["result"]["tools"]) == 7


def initialized(p: subprocess.Popen[str]) -> None:
    send(p, json.dumps(INIT))
    assert answer(p)["id"] == 1
    send(p, json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))


def test_every_request_gets_an_answer_whatever_its_id_and_the_server_goes_on(
    proc: subprocess.Popen[str],
) -> None:
    """A lone surrogate in the id (not valid Unicode, so it cannot be sent back) and ids that
    are neither strings nor integers: each is answered, with id null; nothing ends the
    server."""
    initialized(proc)
    send(proc, r'{"jsonrpc":"2.0","id":"a\udc00","method":"ping"}')
    surrogate = answer(proc)
    assert surrogate["id"] is None
    assert surrogate["error"]["code"] == -32700
    assert "surrogate" in surrogate["error"]["message"]
    for bad in ('{"x": 1}', "null", "1.5", "true", "[1]"):
        send(proc, f'{{"jsonrpc": "2.0", "id": {bad}, "method": "ping"}}')
        refused = answer(proc)
        assert refused["id"] is None, bad
        assert refused["error"]["code"] == -32600, bad
        assert '"id" must be a string or an integer' in refused["error"]["message"]
    call = {"name": "memory_search", "arguments": {"query": "lone \udc00 surrogate"}}
    send(proc, json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call}))
    assert answer(proc)["id"] == 3  # a parse error for a surrogate in the arguments too
    send(proc, json.dumps({"jsonrpc": "2.0", "id": "q\u00e9", "method": "ping"}))
    assert answer(proc) == {"jsonrpc": "2.0", "id": "q\u00e9", "result": {}}
    assert proc.poll() is None


def test_a_client_that_hangs_up_mid_call_ends_the_server_cleanly(
    proc: subprocess.Popen[str], tmp_path: Path
) -> None:
    """The client stops reading, sends a write and closes stdin: the write in flight is
    finished and stored (not cancelled), its answer meets the closed pipe, and the server
    says so once and exits 0. Deterministic: the server finishes what it read before it
    stops."""
    assert proc.stdout is not None
    assert proc.stdin is not None
    initialized(proc)
    proc.stdout.close()  # nobody reads the answer: writing it must meet a broken pipe
    content = "The storeroom key hangs behind the blue door."
    call = {"name": "memory_write", "arguments": {"content": content}}
    send(proc, json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}))
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert "Traceback" not in err, err
    assert err.count("closed the connection") == 1, err
    assert stored(tmp_path / "data", content) == 1  # the answer was lost, the write was not


def test_a_client_that_closes_stdin_gets_the_answers_of_what_it_sent(
    proc: subprocess.Popen[str],
) -> None:
    """Closing stdin is how an MCP client ends a stdio session: the requests it sent first
    are answered (not cancelled) before the server exits 0, without a word on stderr."""
    assert proc.stdin is not None
    initialized(proc)
    for n in range(3):
        arguments = {"content": f"Delivery {('north', 'south', 'east')[n]} dock opens at noon."}
        call = {"name": "memory_write", "arguments": arguments}
        request = {"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call", "params": call}
        send(proc, json.dumps(request))
    proc.stdin.close()
    answers = [answer(proc) for _ in range(3)]
    assert sorted(a["id"] for a in answers) == [10, 11, 12]
    assert all("result" in a and not a["result"].get("isError") for a in answers), answers
    assert proc.wait(timeout=60) == 0
    assert proc.stderr is not None
    assert "closed the connection" not in proc.stderr.read()


def stored(data: Path, content: str) -> int:
    """Live memories holding `content` in the store file of the server run in `data`."""
    with sqlite3.connect(data / "memories.db") as conn:
        row = conn.execute("SELECT count(*) FROM memories WHERE content = ?", (content,)).fetchone()
    conn.close()
    return int(row[0])

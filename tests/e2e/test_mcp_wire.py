"""The stdio wire of a real server process, spoken to line by line: a line that is not a
JSON-RPC message gets a JSON-RPC error with its id (the client is not left waiting), and a
client that hangs up mid-call ends the server cleanly (exit 0, one line, no traceback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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


def server(data: Path) -> subprocess.Popen[str]:
    data.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "ORCHESTRATOR_DATA_DIR": str(data)}
    return subprocess.Popen(
        [sys.executable, "-m", "memory_orchestrator.faces.mcp.server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=data,
    )


@pytest.fixture
def proc(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    p = server(tmp_path / "data")
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
    assert len(listed["result"]["tools"]) == 6


def test_a_client_that_hangs_up_mid_call_ends_the_server_cleanly(
    proc: subprocess.Popen[str],
) -> None:
    assert proc.stdout is not None
    assert proc.stdin is not None
    send(proc, json.dumps(INIT))
    assert answer(proc)["id"] == 1
    send(proc, json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    proc.stdout.close()  # nobody reads the answer: writing it must meet a broken pipe
    call = {"name": "memory_health", "arguments": {}}
    send(proc, json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}))
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert "Traceback" not in err, err
    assert err.count("closed the connection") == 1, err

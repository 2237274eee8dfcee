"""Helpers for tests against the real npm MCP servers (installed by `make npm-servers`)."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from memory_orchestrator.backends.mcp_stdio import find_npm_script

NODE = shutil.which("node")
NO_NODE = "node is not on PATH: the npm MCP servers (mnemon-mcp, kg-memory) cannot run"


def require_script(package: str) -> Path:
    """The package's dist/index.js; skips without node, fails when node is there but the
    package is not installed (run `make npm-servers`)."""
    if NODE is None:
        pytest.skip(NO_NODE)
    script = find_npm_script(package)
    if script is None:
        pytest.fail(f"{package} is not installed: run `make npm-servers` (into .tools/npm)")
    return script


def child_pids(marker: str) -> list[int]:
    """Our own child processes whose command line or environment names `marker`."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid != me:
                continue
            blob = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if marker.encode() in blob:
            found.append(int(entry.name))
    return found


def kill_children(marker: str) -> list[int]:
    """SIGKILL our child processes started for `marker` (by pid) and wait until they are gone."""
    pids = child_pids(marker)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.02)
    return pids


def _alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"

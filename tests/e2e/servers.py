"""The two ways an MCP client reaches the orchestrator over stdio, for the end-to-end tests:

- "in-process": `python -m memory_orchestrator.faces.mcp.server`, a server in the process the
  client started (as before the shared process);
- "relay": `orchestrator serve`, the stdio relay, which carries the session to the shared
  process of these settings (`faces.shared`; started by the first relay, in a socket directory
  of the module's own, stopped when the module ends).

The MCP tests run their tools both ways (`WAYS`), and must get the same results.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.shared_processes import runtime_dir

__all__ = ["ORCHESTRATOR", "WAYS", "command", "mcp_session", "way_fixture"]

WAYS = ["in-process", "relay"]
ORCHESTRATOR = str(Path(sys.executable).parent / "orchestrator")  # the console script


def command(way: str) -> list[str]:
    """The command line an MCP client config would hold, for `way`."""
    if way == "relay":
        return [ORCHESTRATOR, "serve"]
    return [sys.executable, "-m", "memory_orchestrator.faces.mcp.server"]


@asynccontextmanager
async def mcp_session(
    way: str,
    env: dict[str, str],
    cwd: Path,
    *,
    runtime: Path | None,
    read_timeout_s: float,
    start_timeout_s: float,
) -> AsyncIterator[ClientSession]:
    """An initialized MCP client session over stdio to a server started `way`, with `env`
    (and, for the relay, the socket directory under `runtime`)."""
    if way == "relay":
        assert runtime is not None
        env = {**env, "XDG_RUNTIME_DIR": str(runtime)}
    first, *args = command(way)
    params = StdioServerParameters(command=first, args=args, env=env, cwd=cwd)
    with open(os.devnull, "w") as errlog:  # the server logs to stderr; keep test output clean
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, read_timeout_seconds=read_timeout_s) as session,
        ):
            with anyio.fail_after(start_timeout_s):
                await session.initialize()
            yield session


def way_fixture(request: pytest.FixtureRequest) -> Iterator[tuple[str, Path | None]]:
    """For a module-scoped fixture parametrized by `WAYS`: the way and, for the relay, a
    socket directory whose shared processes are stopped when the fixture ends."""
    way: str = request.param
    if way != "relay":
        yield way, None
        return
    with runtime_dir() as runtime:
        yield way, runtime

"""An npm MCP server that keeps one store file: what the stores behind one (kg-memory,
mnemon-mcp) share around the process.

The process and its session are `mcp_stdio.McpStdio`. Around it, each store needs the same
things, written here once: the package's script found (or an error saying how to install
it), `node` found on PATH, the store file's folder made before a call, one health check that
reports a restart since the last check as degraded, and the settings every such store takes
(`server_options`).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from memory_orchestrator.backends.mcp_stdio import McpStdio, find_npm_script
from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import HealthCheck, Status

if TYPE_CHECKING:
    from memory_orchestrator.settings import NpmServerSettings

__all__ = ["NpmServer", "ServerOptions", "server_options"]

Probe = Callable[[], Awaitable[tuple[Status, str]]]


class ServerOptions(TypedDict):
    """The settings every npm-server store takes (`[kg_memory]`, `[mnemon_mcp]`)."""

    script: Path | None
    node: str | None
    timeout_s: float
    native_search: bool


def server_options(section: NpmServerSettings) -> ServerOptions:
    return ServerOptions(
        script=section.script,
        node=section.node,
        timeout_s=section.timeout_s,
        native_search=section.native_search,
    )


class NpmServer:
    """`node <package>/dist/index.js` keeping `data_file`, started on the first call and kept
    open (see `McpStdio`). `section` names the settings section, for the install hint."""

    def __init__(
        self,
        name: str,
        package: str,
        data_file: Path,
        env: Mapping[str, str],
        *,
        section: str,
        script: Path | None = None,
        node: str | None = None,
        timeout_s: float = 10.0,
        serialize: bool = False,
    ) -> None:
        self.name = name
        self.package = package
        self.data_file = data_file
        self.section = section
        self.script = find_npm_script(package, explicit=script)
        self.node = node or shutil.which("node") or "node"
        self.client = McpStdio(
            name,
            self.node,
            [str(self.script or f"<{package} not installed>")],
            env,
            timeout_s=timeout_s,
            serialize=serialize,
        )

    async def call(self, tool: str, args: dict[str, Any], *, read: bool = False) -> Any:
        """`tool(args)` on the server (see `McpStdio.call`); a `read` is retried once on a
        fresh process when the old one died. Raises `BackendError` when not installed."""
        if self.script is None:
            raise BackendError(
                f"{self.package} is not installed: run `make npm-servers` (installs it into"
                f" .tools/npm) or set [{self.section}] script"
            )
        self.data_file.parent.mkdir(parents=True, exist_ok=True)
        return await self.client.call(tool, args, idempotent=read)

    async def health(self, probe: Probe) -> list[HealthCheck]:
        """One check named after the store: `probe()`'s status and detail, an error when it
        raises, degraded when the server was restarted since the last check."""
        start = time.perf_counter()
        try:
            status, detail = await probe()
        except (BackendError, OSError) as exc:
            ms = round((time.perf_counter() - start) * 1000, 3)
            return [
                HealthCheck(name=self.name, status=Status.ERROR, detail=str(exc), latency_ms=ms)
            ]
        ms = round((time.perf_counter() - start) * 1000, 3)
        restarted = self.client.unreported_restart()
        if restarted:
            status, detail = Status.DEGRADED, f"{detail}; {restarted}"
        return [HealthCheck(name=self.name, status=status, detail=detail, latency_ms=ms)]

    async def close(self) -> None:
        await self.client.close()

"""The MCP face: the server that carries the seven memory tools (`faces.mcp.tools`) over stdio or
HTTP.

`create_server(settings)` builds it: the orchestrator opens with the server and closes after it;
every tool call is counted (metrics) and a failed one kept as a trace; per-token tool
permissions apply where the SDK hands over each parsed request (`faces.mcp.access.ToolAccess`).

Run it with `orchestrator serve` or `python -m memory_orchestrator.faces.mcp.server` (stdio;
settings come from the environment and the config file, see `memory_orchestrator.settings`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, BinaryIO, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.runner import serve_dual_era_loop
from mcp.types import CallToolResult, InputRequiredResult, Tool
from pydantic import ValidationError

from memory_orchestrator.about import package_version
from memory_orchestrator.derived.embedders import lexical_only
from memory_orchestrator.errors import BackendError, ConfigError, UnknownBackend, unexpected
from memory_orchestrator.faces.mcp.access import ToolAccess, caller_of, request_scope
from memory_orchestrator.faces.mcp.schemas import published
from memory_orchestrator.faces.mcp.tools import (
    TOOL_NAMES,
    TOOLS,
    AppState,
    tool_error,
    without_nulls,
)
from memory_orchestrator.faces.mcp.wire import StdioWire
from memory_orchestrator.models import HealthCheck, HealthReport, Status, ToolName, describe_errors
from memory_orchestrator.service import Orchestrator, call_bound_s, store_names
from memory_orchestrator.settings import Settings, load_settings
from memory_orchestrator.state.observability import Observer, calling

__all__ = [
    "AppState",
    "MemoryServer",
    "Session",
    "create_server",
    "main",
    "not_shared",
    "run",
    "said_at_start",
    "serving",
]

Transport = Literal["stdio", "streamable-http"]

INSTRUCTIONS = """\
Long-term memory shared across sessions. Call memory_context before answering anything that \
may depend on earlier sessions, decisions, preferences or project history, and cite the memory \
ids you rely on. Use memory_search to look something up, memory_expand to follow links from \
memories you already have, memory_write to keep a durable fact or event, memory_forget to stop \
recalling a memory that is wrong or unwanted, memory_explain to see why a result was chosen, \
and memory_health when memory tools fail."""

_MAX_FAILED_REQUEST_CHARS = 4000


class MemoryServer(MCPServer[AppState]):
    """`MCPServer` whose argument errors read as one line per field, not a pydantic dump, and
    that counts every tool call (metrics) and keeps a trace of every failed one."""

    observer: Observer | None = None
    state: AppState | None = None
    drain_s = 60.0  # how long requests in flight may finish once stdin ends (`create_server`)
    health_notes: list[Callable[[], HealthCheck]]  # (`Hosted.notes`)

    async def run_stdio_async(self) -> None:
        """Our stdio transport (`faces.mcp.wire`): every line answered, and a client that goes
        away loses no write in flight and ends the server with one line."""
        lowlevel = self._lowlevel_server
        options = lowlevel.create_initialization_options()
        await StdioWire(self.drain_s).serve(lambda read, write: lowlevel.run(read, write, options))

    async def list_tools(self) -> list[Tool]:
        """The tools with their schemas written shorter (`faces.mcp.schemas`): a client puts
        the list in the model's context at every session."""
        return [published(tool) for tool in await super().list_tools()]

    async def documented_tools(self) -> list[Tool]:
        """The tools as listed, their output schemas with every field's description (for
        the reference page)."""
        return [published(tool, documented=True) for tool in await super().list_tools()]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[AppState, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        started = time.perf_counter()
        with calling(_caller_of(context)):
            try:
                result = await self._call_tool(name, arguments, context)
            except Exception as exc:  # the process edge of a tool call: counted, kept, raised
                self._observe(name, arguments, started, exc)
                raise
            self._observe(name, arguments, started, None)
        return result

    async def _call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[AppState, Any] | None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, without_nulls(name, arguments), context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError) and not isinstance(exc, UnexpectedToolError):
                raise ToolError(f"Error executing tool {name}: {tool_error(cause)}") from cause
            raise

    def _observe(
        self, name: str, arguments: dict[str, Any], started: float, exc: Exception | None
    ) -> None:
        seconds = time.perf_counter() - started
        # A client can send any tool name: unknown ones share one label, so they cannot grow
        # the metrics without bound.
        name = name if name in TOOL_NAMES else "unknown"
        store = self.state.orchestrator.store_name if self.state else None
        failed_in_store = exc is not None and _store_failure(exc)
        if isinstance(exc, UnexpectedToolError):  # a bug: the SDK logs its traceback
            unexpected(f"tool {name}", exc.__cause__ or exc, logged=True)
        if self.observer is not None:
            self.observer.tool_call(
                name, seconds, ok=exc is None, backend=store if failed_in_store else None
            )
        if exc is not None and self.state is not None and not _traced(exc):
            request = {k: v for k, v in arguments.items() if k != "ctx"}
            if len(repr(request)) > _MAX_FAILED_REQUEST_CHARS:
                request = {"truncated": True, "fields": sorted(request)[:50]}
            self.state.orchestrator.record_failure(
                ToolName.named(name), request, str(exc)[:500], seconds * 1000
            )


class Hosted(Orchestrator):
    """The orchestrator as a server hosts it: every health report also says how this process
    serves (`notes`: in the session's own process and why, or the shared process, its
    sessions and when it stops)."""

    notes: Sequence[Callable[[], HealthCheck]] = ()

    async def health(self, *, replay: bool = True) -> HealthReport:
        report = await super().health(replay=replay)
        checks = (*report.checks, *(note() for note in self.notes))
        return report.model_copy(update={"checks": checks})


def _same(check: HealthCheck) -> HealthCheck:
    return check


def said_at_start(settings: Settings) -> list[str]:
    """What a server says on stderr as it starts (the shared process hands it to the relays,
    which say it on theirs): that search is lexical only, and how to fix it, when so."""
    sem = settings.semantic
    lexical = lexical_only(
        sem.enabled, sem.model, model_dir=sem.model_dir, data_dir=settings.data_dir
    )
    return [lexical] if lexical is not None else []


def not_shared(reason: str | None) -> HealthCheck:
    """The health note of a stdio server in the client's own process: why not through the
    shared process of its settings (`faces.shared`)."""
    why = f"not used: {reason}" if reason else "not used"
    detail = f"{why}; this session is served by its own process"
    return HealthCheck(name="shared_process", status=Status.OK, detail=detail)


def _caller_of(context: Context[AppState, Any] | None) -> str | None:
    """The name of the HTTP token making this call (None on stdio or without auth)."""
    try:
        request = context.request_context.request if context is not None else None
    except ValueError:  # no request context: called outside a request
        return None
    token = caller_of(request_scope(request))
    return token.name if token is not None else None


def _traced(exc: BaseException) -> bool:
    """Whether the failure was kept as a trace already (a read that found the store
    unreadable keeps its own, with every failed call's note)."""
    seen: BaseException | None = exc
    while seen is not None:
        if getattr(seen, "trace_id", ""):
            return True
        seen = seen.__cause__
    return False


def _store_failure(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, BackendError | TimeoutError):
            return True
        seen = seen.__cause__
    return False


def create_server(
    settings: Settings, observer: Observer | None = None, notes: Sequence[HealthCheck] = ()
) -> MemoryServer:
    """Build the MCP server; the orchestrator opens with the server and closes after it.
    With an `observer`, every request is logged and every tool call counted; `notes` are
    added to every health report (how this process serves: `faces.launch`)."""

    @asynccontextmanager
    async def lifespan(_: MCPServer[AppState]) -> AsyncIterator[AppState]:
        orchestrator = Hosted.from_settings(settings, observer=observer)
        assert isinstance(orchestrator, Hosted)
        orchestrator.notes = server.health_notes  # (the shared process adds its own)
        server.state = AppState(orchestrator)
        try:
            async with orchestrator.warming(), anyio.create_task_group() as background:
                # the model and indexes load behind `initialize`; the outbox's schedule
                background.start_soon(orchestrator.keep_replaying)
                yield server.state
                background.cancel_scope.cancel()
        finally:
            server.state = None
            await orchestrator.close()

    server = MemoryServer(
        "memory-orchestrator",
        title="Memory orchestrator",
        instructions=INSTRUCTIONS,
        version=package_version(),
        lifespan=lifespan,
        # Our own JSON line per request replaces the SDK's INFO lines (sessions opened and
        # closed, tool failures), which would interleave multi-line text with it on stderr.
        log_level="WARNING",
        # Where the SDK has parsed each request: per-token tool permissions (HTTP only).
        middleware=[ToolAccess(observer)],
    )
    server.observer = observer
    server.health_notes = [partial(_same, note) for note in notes]
    server.drain_s = call_bound_s(settings)  # the longest a tool call may take
    for tool, hints in TOOLS:
        server.add_tool(tool, annotations=hints)
    return server


Session = Callable[[BinaryIO, int], Awaitable[None]]
"""Serves one MCP session over a connection: what it reads from, the descriptor it writes to."""


@asynccontextmanager
async def serving(server: MemoryServer) -> AsyncIterator[tuple[Orchestrator, Session]]:
    """The server's lifespan entered once (one orchestrator, warmed up in the background),
    and a function that serves one MCP session over a connection with it, on the stdio
    wire, as many at a time as asked: the shared process (`faces.shared.server`)."""
    lowlevel = server._lowlevel_server
    options = lowlevel.create_initialization_options()
    async with lowlevel.lifespan(lowlevel) as state:

        async def session(wire_in: BinaryIO, wire_out: int) -> None:
            await StdioWire(server.drain_s).serve_on(
                wire_in,
                wire_out,
                lambda read, write: serve_dual_era_loop(
                    lowlevel, read, write, lifespan_state=state, init_options=options
                ),
            )

        assert server.state is not None
        yield server.state.orchestrator, session


# ---------------------------------------------------------------- running


def run(
    settings: Settings,
    transport: Transport = "stdio",
    host: str | None = None,
    port: int | None = None,
    *,
    insecure_no_auth: bool = False,
    notes: Sequence[HealthCheck] = (),
) -> None:
    """Serve until stopped. Streamable HTTP binds `[http] host` (loopback by default) and
    refuses to start without tokens unless `insecure_no_auth` (see `faces.http.server`).
    `notes` are added to every health report."""
    if settings.backend not in store_names():
        raise UnknownBackend(
            f"unknown backend {settings.backend!r}; known: {', '.join(store_names())}"
        )
    for line in said_at_start(settings):  # in the client's server log (stdio), or the terminal
        print(f"memory-orchestrator: {line}", file=sys.stderr, flush=True)
    if transport == "stdio":
        create_server(settings, Observer(), notes).run("stdio")
        return
    from memory_orchestrator.faces.http import server as http_server

    http_server.serve(
        settings,
        lambda observer: create_server(settings, observer, notes),
        host=host,
        port=port,
        insecure_no_auth=insecure_no_auth,
    )


def main() -> None:
    """`python -m memory_orchestrator.faces.mcp.server`: stdio, settings from env and config."""
    try:
        settings = load_settings()
        run(settings, "stdio")
    except (ConfigError, UnknownBackend) as exc:
        sys.exit(f"memory-orchestrator: {exc}")
    except ValidationError as exc:
        sys.exit(f"memory-orchestrator: settings arguments: {describe_errors(exc)}")


if __name__ == "__main__":
    main()

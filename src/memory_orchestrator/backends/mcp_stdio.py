"""One MCP server process over stdio, kept open, shared by every caller.

The session is owned by a long-lived task running on its own event loop in a background thread
(an anyio blocking portal). Callers on any event loop, in any task, reach it through the portal,
so the session survives the task (or the `anyio.run`) that first opened it. The process is
started on the first call; when it dies or stops answering, the next call starts a new one.

This module is the only place outside the faces that imports the MCP SDK (the client side):
adapters for stores that only speak MCP (`mnemon_mcp`, `kg_memory`) use it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TextIO

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup, TaskStatus
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client

from memory_orchestrator.errors import BackendError, unexpected


def find_npm_script(package: str, *, explicit: Path | None = None) -> Path | None:
    """`dist/index.js` of an npm package: `explicit`, else the project-local `.tools/npm`
    (searched upwards from the working directory and from this file), else None."""
    if explicit is not None:
        return explicit if explicit.is_file() else None
    roots = [Path.cwd(), *Path.cwd().parents, *Path(__file__).resolve().parents]
    for root in dict.fromkeys(roots):
        script = root / ".tools" / "npm" / "node_modules" / package / "dist" / "index.js"
        if script.is_file():
            return script.resolve()
    return None


class ToolError(BackendError):
    """The server answered a tool call with `is_error` ("Error: ...")."""


class _Crashed(Exception):
    """The process died or the connection broke during a call."""


# What the MCP client raises when the server process cannot start, dies or answers garbage
# (the SDK's protocol errors are RuntimeErrors and ValueErrors; the streams' are anyio's).
_BROKEN: tuple[type[Exception], ...] = (
    MCPError,
    OSError,
    RuntimeError,
    ValueError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.EndOfStream,
)


def _broken(exc: BaseException) -> bool:
    """Whether `exc` (or every error of a group of them) is one of `_BROKEN`."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_broken(e) for e in exc.exceptions)
    return isinstance(exc, _BROKEN)


class McpStdio:
    """A kept-open MCP client session to `command args...` (see the module docstring).

    `serialize=True` lets one tool call run at a time (for servers that lose overlapping
    writes); otherwise calls are sent concurrently and the server orders them.
    """

    def __init__(
        self,
        label: str,
        command: str,
        args: list[str],
        env: Mapping[str, str],
        *,
        timeout_s: float = 10.0,
        start_timeout_s: float = 20.0,
        serialize: bool = False,
        errlog: Path | None = None,
    ) -> None:
        self.label = label
        self.params = StdioServerParameters(command=command, args=list(args), env=dict(env))
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.serialize = serialize
        self.errlog_path = errlog
        self.starts = 0  # processes started so far (a restart makes it > 1)
        self.last_error: str | None = None
        self._reported_restarts = 0
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None
        self._portal_lock = threading.Lock()
        # Everything below lives on the portal's event loop only.
        self._session: ClientSession | None = None
        self._stop: anyio.Event | None = None
        self._done: anyio.Event | None = None
        self._start_lock: anyio.Lock | None = None
        self._call_lock: anyio.Lock | None = None
        self._closed = False
        self._gen = 0
        self._owners: set[anyio.Event] = set()
        self._tg: TaskGroup | None = None

    # ------------------------------------------------------------------ caller side

    async def call(self, tool: str, arguments: dict[str, Any], *, idempotent: bool = False) -> Any:
        """Call `tool`; returns its JSON result (structured content, else the parsed text).
        Raises `ToolError` for an is_error answer, `BackendError(transient)` when the process
        failed (the next call restarts it). An `idempotent` call (a read) found a dead process
        is retried once at once on a fresh one."""
        if self._closed:
            raise BackendError(f"{self.label}: closed")
        try:
            return await anyio.to_thread.run_sync(
                self._blocking_call, tool, arguments, idempotent, abandon_on_cancel=True
            )
        except BackendError:
            raise
        except _BROKEN as exc:  # the portal itself failed
            raise BackendError(
                f"{self.label}: {type(exc).__name__}: {exc}", transient=True
            ) from exc

    @property
    def running(self) -> bool:
        return self._session is not None

    def unreported_restart(self) -> str | None:
        """Why the server was restarted, once per restart not yet reported (for `health`):
        a crash that the next call recovered from still shows in the next health check."""
        restarts = max(self.starts - 1, 0)
        if restarts <= self._reported_restarts:
            return None
        self._reported_restarts = restarts
        return f"server restarted ({restarts} so far); last failure: {self.last_error or '?'}"

    async def close(self) -> None:
        self._closed = True
        with self._portal_lock:
            portal, cm = self._portal, self._portal_cm
            self._portal = self._portal_cm = None
        if portal is None or cm is None:
            return

        def shut() -> None:
            try:
                portal.call(self._shutdown)
            finally:
                portal.call(portal.stop, True)  # cancels the supervisor
                cm.__exit__(None, None, None)

        await anyio.to_thread.run_sync(shut)

    def _blocking_call(self, tool: str, arguments: dict[str, Any], idempotent: bool) -> Any:
        with self._portal_lock:
            if self._closed:
                raise BackendError(f"{self.label}: closed")
            if self._portal is None:
                cm = start_blocking_portal()
                portal = cm.__enter__()
                portal.start_task(self._supervise)
                self._portal, self._portal_cm = portal, cm
            portal = self._portal
        return portal.call(self._call, tool, arguments, idempotent)

    async def _supervise(self, *, task_status: TaskStatus[None]) -> None:
        """Holds the task group the owner tasks run in, until the portal closes."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            await anyio.sleep_forever()

    # ------------------------------------------------------------------ portal side

    async def _call(self, tool: str, arguments: dict[str, Any], idempotent: bool) -> Any:
        if self._call_lock is None:
            self._call_lock = anyio.Lock()
        for attempt in (1, 2):
            try:
                if self.serialize:
                    async with self._call_lock:
                        return await self._call_once(tool, arguments)
                return await self._call_once(tool, arguments)
            except _Crashed as exc:
                if not idempotent or attempt == 2:
                    raise BackendError(str(exc), transient=True) from exc.__cause__
        raise AssertionError("unreachable")

    async def _call_once(self, tool: str, arguments: dict[str, Any]) -> Any:
        session = await self._ensure()
        gen = self._gen
        try:
            with anyio.fail_after(self.timeout_s):
                result = await session.call_tool(tool, arguments)
        except TimeoutError as exc:
            await self._drop(gen, f"{tool} took over {self.timeout_s}s")
            raise BackendError(f"{self.label}: {tool} timed out", transient=True) from exc
        except _BROKEN as exc:
            await self._drop(gen, f"{tool}: {type(exc).__name__}: {exc}")
            raise _Crashed(
                f"{self.label}: server process failed during {tool} ({type(exc).__name__}:"
                f" {exc}); it is restarted on the next call"
            ) from exc
        texts = [c.text for c in getattr(result, "content", None) or [] if hasattr(c, "text")]
        if getattr(result, "is_error", False):
            message = " ".join(texts).strip() or "unknown error"
            raise ToolError(f"{self.label}: {tool}: {message}")
        structured = getattr(result, "structured_content", None)
        if structured is not None:
            return structured
        joined = "".join(texts)
        try:
            return json.loads(joined) if joined.strip() else None
        except ValueError:
            return joined

    async def _ensure(self) -> ClientSession:
        if self._start_lock is None:
            self._start_lock = anyio.Lock()
        async with self._start_lock:
            if self._session is not None:
                return self._session
            if self._closed:
                raise BackendError(f"{self.label}: closed")
            ready, self._stop, self._done = anyio.Event(), anyio.Event(), anyio.Event()
            failure: list[BaseException] = []
            stop, done = self._stop, self._done
            assert self._tg is not None
            self._tg.start_soon(self._own, ready, stop, done, failure)
            with anyio.move_on_after(self.start_timeout_s):
                await ready.wait()
            if self._session is None:
                stop.set()
                if failure and not _broken(failure[0]):
                    raise failure[0]  # a bug (reported by its owner task): not a store error
                why = failure[0] if failure else f"no answer within {self.start_timeout_s}s"
                self.last_error = f"start failed: {why}"
                raise BackendError(
                    f"{self.label}: could not start `{self.params.command}"
                    f" {' '.join(self.params.args)}`: {why}",
                    transient=True,
                )
            self.starts += 1
            self._gen += 1
            return self._session

    async def _own(
        self,
        ready: anyio.Event,
        stop: anyio.Event,
        done: anyio.Event,
        failure: list[BaseException],
    ) -> None:
        """The owner task: opens the process and session, holds them until `stop`."""
        errlog: TextIO = open(self.errlog_path or os.devnull, "a", encoding="utf-8")  # noqa: SIM115
        self._owners.add(done)
        mine: ClientSession | None = None
        try:
            async with (
                stdio_client(self.params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                with anyio.fail_after(self.start_timeout_s):
                    await session.initialize()
                self._session = mine = session
                ready.set()
                await stop.wait()
        except Exception as exc:  # a process edge: the task that owns the server process
            if not _broken(exc):
                unexpected(f"{self.label}: the task owning the server process", exc)
            failure.append(exc)
            self.last_error = f"{type(exc).__name__}: {exc}"
        finally:
            if mine is not None and self._session is mine:
                self._session = None
            errlog.close()
            ready.set()
            done.set()
            self._owners.discard(done)

    async def _drop(self, gen: int | None, why: str) -> None:
        """Forget session `gen` (None: whichever is open) and stop its process; a new one
        starts on the next call. A late failure of an older session leaves a newer one be."""
        if gen is not None and gen != self._gen:
            return
        self.last_error = why
        self._session = None
        if self._stop is not None:
            self._stop.set()  # the old process shuts down in the background (bounded)

    async def _shutdown(self) -> None:
        await self._drop(None, "closed")
        with anyio.move_on_after(15):
            for done in list(self._owners):
                await done.wait()

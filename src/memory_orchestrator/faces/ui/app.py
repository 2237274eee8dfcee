"""The inspector's web app: routes, the guard in front, errors as pages, and serving.

`build_app` makes the Starlette app over one `Orchestrator`; `serve` binds it (loopback by
default), prints the URL and runs it with uvicorn until Ctrl-C.
"""

from __future__ import annotations

import logging
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import uvicorn
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from memory_orchestrator.errors import (
    BackendError,
    ConfigError,
    InvalidRequest,
    OrchestratorError,
    TraceNotFound,
)
from memory_orchestrator.faces.sockets import listening
from memory_orchestrator.faces.ui import pages, trace_pages
from memory_orchestrator.faces.ui.checks import HealthChecks
from memory_orchestrator.faces.ui.common import (
    Refused,
    UiState,
    access_of,
    compile_templates,
    form_of,
    page,
)
from memory_orchestrator.faces.ui.guard import COOKIE, Guard, Sessions
from memory_orchestrator.models import describe_errors
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.state import shared as shared_state
from memory_orchestrator.state.tokens import TokenBook, is_loopback

__all__ = ["EXPOSED_WARNING", "READY", "build_app", "serve"]

log = logging.getLogger(__name__)

READY = "memory inspector ready: {detail} ({took:.1f} s after start)"

EXPOSED_WARNING = (
    "WARNING: the inspector binds {host}, not loopback: other machines can reach it; it asks "
    "for a bearer token, which crosses the network in clear text unless a TLS proxy sits in front."
)


def _book(settings: Settings) -> TokenBook:
    shared = shared_state.shared_tokens(settings)
    if not settings.http.tokens and shared is None:
        raise ConfigError(
            "the inspector asks for a bearer token off loopback (or with --token-required), and"
            " no token is configured: add [[http.tokens]] (`orchestrator token new --name NAME`)"
        )
    try:
        return TokenBook(settings.http.tokens, shared=shared)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def _next_path(raw: str | None) -> str:
    """Where a login goes next: a path on this server only."""
    if not raw or not raw.startswith("/") or raw.startswith("//") or "\\" in raw:
        return "/"
    parts = urlsplit(raw)
    return raw if not parts.scheme and not parts.netloc else "/"


async def login_form(request: Request) -> Response:
    if not state_of_auth(request):
        return RedirectResponse("/", status_code=303)
    return page(request, "login.html", next=_next_path(request.query_params.get("next")))


async def login(request: Request) -> Response:
    """Check the token against the token book; a session cookie when it is known."""
    ui = request.app.state.ui
    if not ui.auth:
        return RedirectResponse("/", status_code=303)
    fields = await form_of(request, csrf=False)  # no session yet: the origin is checked
    secret = fields.get("token", "").strip()
    wanted = _next_path(fields.get("next"))
    book: TokenBook = request.app.state.book
    token = await anyio.to_thread.run_sync(book.authenticate, secret)  # may read the network
    if token is None:
        return page(request, "login.html", code=401, next=wanted, error="unknown token")
    refused = TokenBook.check_store(token, ui.orchestrator.store_name)
    if refused is not None:
        return page(request, "login.html", code=403, next=wanted, error=refused.reason)
    session = ui.sessions.open(secret)
    response = RedirectResponse(wanted, status_code=303)
    response.set_cookie(
        COOKIE,
        session,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


async def logout(request: Request) -> Response:
    await form_of(request)
    request.app.state.ui.sessions.close(access_of(request).session)
    response = RedirectResponse("/login" if state_of_auth(request) else "/", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response


def state_of_auth(request: Request) -> bool:
    return bool(request.app.state.ui.auth)


async def _refused(request: Request, exc: Exception) -> Response:
    status, message = _status_of(exc)
    if status >= 500:
        log.warning("inspector page failed: %s", message)
    return page(request, "error.html", code=status, message=message, status=status)


def _status_of(exc: Exception) -> tuple[int, str]:
    if isinstance(exc, Refused):
        return exc.status, exc.reason
    if isinstance(exc, HTTPException):
        return exc.status_code, "no such page" if exc.status_code == 404 else str(exc.detail)
    if isinstance(exc, ValidationError):
        return 400, f"invalid input: {describe_errors(exc)}"
    if isinstance(exc, InvalidRequest):
        return 400, f"invalid input: {exc}"
    if isinstance(exc, TraceNotFound):
        return 404, str(exc)
    if isinstance(exc, BackendError):
        return 502, f"memory store error: {exc}"
    if isinstance(exc, TimeoutError):
        return 504, str(exc) or "the store did not answer in time"
    if isinstance(exc, OrchestratorError):
        return 500, str(exc)
    return 500, f"the inspector failed: {type(exc).__name__}"


def _lifespan(
    orchestrator: Orchestrator, ui: UiState, warm: bool
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        inspection = orchestrator.inspection()
        try:
            async with anyio.create_task_group() as tasks:
                ui.health.spawn = tasks.start_soon
                if warm:  # list the store, read the traces and check health meanwhile
                    inspection.serve(tasks.start_soon)
                    tasks.start_soon(orchestrator.warm_up)  # searches: as the MCP server does
                    tasks.start_soon(ui.health.refresh)
                    tasks.start_soon(_say_ready, orchestrator, ui, time.perf_counter())
                yield
                ui.health.spawn = None
                inspection.serve(None)
                tasks.cancel_scope.cancel()
        finally:
            await orchestrator.close()

    return lifespan


async def _say_ready(orchestrator: Orchestrator, ui: UiState, started: float) -> None:
    """One line on stdout once the store is listed, the traces read and health checked:
    from then on no page answers from a part (the tests wait for it)."""
    inspection = orchestrator.inspection()
    await inspection.settled()
    checked = await ui.health.first()
    listed = len(inspection.catalog) if inspection.catalog.listing else None
    status = checked.report.status.value if checked is not None else "unknown"
    detail = ready_detail(listed, len(inspection.traces), status)
    print(READY.format(detail=detail, took=time.perf_counter() - started), flush=True)


def ready_detail(listed: int | None, read: int, status: str) -> str:
    """What the ready line says: the memories listed (None: the store cannot list), the
    requests read, the health."""
    memories = (
        f"{listed:,} memor{'y' if listed == 1 else 'ies'} listed"
        if listed is not None
        else "the store cannot list its memories"
    )
    return f"{memories}, {read:,} request{'' if read == 1 else 's'} read, health {status}"


def _routes() -> list[BaseRoute]:
    return [
        Route("/", pages.memories, methods=["GET"]),
        Route("/search", pages.search, methods=["POST"]),
        Route("/memories/{memory_id:path}/forget", pages.forget_confirm, methods=["GET"]),
        Route("/memories/{memory_id:path}/forget", pages.forget, methods=["POST"]),
        Route("/memories/{memory_id:path}", pages.memory, methods=["GET"]),
        Route("/graph", pages.graph, methods=["GET"]),
        Route("/traces", trace_pages.traces, methods=["GET"]),
        Route("/traces/{trace_id}/replay", trace_pages.replay, methods=["POST"]),
        Route("/traces/{trace_id}", trace_pages.trace, methods=["GET"]),
        Route("/health", trace_pages.health, methods=["GET"]),
        Route("/eval", trace_pages.eval_page, methods=["GET"]),
        Route("/eval/plots/{name}", trace_pages.eval_plot, methods=["GET"]),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Mount("/static", StaticFiles(packages=[("memory_orchestrator.faces.ui", "static")])),
    ]


def build_app(
    orchestrator: Orchestrator,
    settings: Settings,
    *,
    host: str = "127.0.0.1",
    token_required: bool = False,
    eval_dir: Path | None = None,
    warm: bool = True,
) -> Starlette:
    """The inspector over `orchestrator`. Tokens are asked for off loopback (or with
    `token_required`); raises ConfigError when they would be and none is configured."""
    auth = token_required or not is_loopback(host)
    book = _book(settings) if auth else None
    compile_templates()
    ui = UiState(orchestrator, settings, Sessions(), eval_dir, auth, HealthChecks(orchestrator))

    app = Starlette(
        routes=_routes(),
        lifespan=_lifespan(orchestrator, ui, warm),
        # the failures a page answers (Exception itself: a bug, answered and logged as 500)
        exception_handlers={
            kind: _refused
            for kind in (
                Refused,
                HTTPException,
                ValidationError,
                OrchestratorError,
                TimeoutError,
                Exception,
            )
        },
    )
    app.state.ui = ui
    app.state.book = book
    app.add_middleware(
        Guard,
        book=book,
        store=orchestrator.store_name,
        sessions=ui.sessions,
        local_only=is_loopback(host),
        quiet=orchestrator.inspection().quiet,
    )
    return app


def serve(
    settings: Settings,
    *,
    host: str = "127.0.0.1",
    port: int = 8766,
    token_required: bool = False,
    eval_dir: Path | None = None,
) -> None:
    """Bind, serve until stopped, and print the URL once it answers (on stdout, with the port
    bound when 0 was asked). Raises ConfigError (no tokens where they are needed) and OSError
    (port in use)."""
    orchestrator = Orchestrator.from_settings(settings)
    try:
        app = build_app(
            orchestrator, settings, host=host, token_required=token_required, eval_dir=eval_dir
        )
    except BaseException:
        anyio.run(orchestrator.close)
        raise
    try:
        sock = listening(host, port)
    except OSError:
        anyio.run(orchestrator.close)
        raise
    bound = sock.getsockname()[1]
    where = f"[{host.strip('[]')}]" if sock.family == socket.AF_INET6 else host
    if not is_loopback(host):
        print(EXPOSED_WARNING.format(host=host), file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    _Server(config, f"memory inspector: http://{where}:{bound}/  (Ctrl-C to stop)").run(
        sockets=[sock]
    )


class _Server(uvicorn.Server):
    """uvicorn's server, which prints the URL once it answers on it (not before its start-up:
    a page opened at once would wait for it)."""

    def __init__(self, config: uvicorn.Config, line: str) -> None:
        super().__init__(config)
        self._line = line

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if not self.should_exit:
            print(self._line, flush=True)

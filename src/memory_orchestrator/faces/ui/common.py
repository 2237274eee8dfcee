"""What every page shares: the inspector's state, rendering, form reading and refusals."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.requests import Request
from starlette.responses import HTMLResponse

from memory_orchestrator.faces.ui import views
from memory_orchestrator.faces.ui.checks import HealthChecks
from memory_orchestrator.faces.ui.guard import Access, Sessions, same_origin
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings

__all__ = [
    "Refused",
    "UiState",
    "access_of",
    "allowed",
    "compile_templates",
    "form_of",
    "number",
    "page",
    "state_of",
    "templates",
]

MAX_FORM_BYTES = 16 * 1024


class Refused(Exception):
    """A request the inspector will not serve: the status and the reason shown."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


@dataclass
class UiState:
    """What the pages work with: one orchestrator for the life of the server."""

    orchestrator: Orchestrator
    settings: Settings
    sessions: Sessions
    eval_dir: Path | None
    auth: bool  # tokens are asked for
    health: HealthChecks


def templates() -> Environment:
    env = Environment(
        loader=PackageLoader("memory_orchestrator.faces.ui", "templates"),
        autoescape=True,  # every value is escaped, in HTML and in the SVG alike
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        memory_href=views.memory_href,
        query_href=views.query_href,
        when=views.when,
        score_bar=views.score_bar,
        pretty_json=views.pretty_json,
    )
    return env


_ENV: Environment | None = None


def _env() -> Environment:
    global _ENV  # noqa: PLW0603 - built once, on first use
    if _ENV is None:
        _ENV = templates()
    return _ENV


def compile_templates() -> None:
    """Compile every template now (once per process, at start), so that no page's first
    visit pays for its own."""
    env = _env()
    for name in env.list_templates():
        env.get_template(name)


def state_of(request: Request) -> UiState:
    ui: UiState = request.app.state.ui
    return ui


def access_of(request: Request) -> Access:
    access = request.scope.get("state", {}).get("access")
    return access if isinstance(access, Access) else Access(None)


def allowed(request: Request, tool: str) -> Access:
    """The caller, when it may use the page that stands for `tool`; else Refused (403)."""
    access = access_of(request)
    reason = access.denied(tool)
    if reason is not None:
        raise Refused(403, f"forbidden: {reason}")
    return access


def page(request: Request, template: str, *, code: int = 200, **context: Any) -> HTMLResponse:
    """Render `template` with what every page needs (the caller, the store, the CSRF token)."""
    ui = state_of(request)
    access = access_of(request)
    html = (
        _env()
        .get_template(template)
        .render(
            access=access,
            csrf=ui.sessions.csrf(access.session),
            store=ui.orchestrator.store_name,
            auth=ui.auth,
            path=request.url.path,
            **context,
        )
    )
    return HTMLResponse(html, status_code=code)


async def form_of(request: Request, *, csrf: bool = True) -> dict[str, str]:
    """The fields of a posted form, after the checks every change needs: this origin, a
    bounded urlencoded body and (with `csrf`) the session's CSRF token."""
    if not same_origin(request.scope):
        raise Refused(403, "refused: this form was not sent from a page of this inspector")
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    if kind != "application/x-www-form-urlencoded":
        raise Refused(415, "refused: forms are sent url-encoded")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise Refused(413, "refused: the form is too large")
    fields = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items() if v}
    if csrf and not state_of(request).sessions.csrf_ok(
        access_of(request).session, fields.get("csrf")
    ):
        raise Refused(403, "refused: the form's CSRF token is missing or stale; reload the page")
    return fields


def number(request: Request, name: str, default: int, low: int, high: int) -> int:
    """An integer query parameter within [low, high]; Refused (400) when it is not one."""
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise Refused(400, f"{name} must be a whole number, got {raw[:40]!r}") from None
    return max(low, min(value, high))

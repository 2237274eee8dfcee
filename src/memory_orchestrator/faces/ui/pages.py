"""The memory pages: the list (search, filters, paging), one memory, forget, the graph."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from memory_orchestrator.faces.ui import graph_svg
from memory_orchestrator.faces.ui.common import (
    Refused,
    allowed,
    form_of,
    number,
    page,
    state_of,
)
from memory_orchestrator.faces.ui.views import Pager, query_href
from memory_orchestrator.models import (
    MemoryType,
    SearchFilters,
    SearchRequest,
    SearchResult,
    TimeRange,
    describe_errors,
)
from memory_orchestrator.service.inspecting import MemoryFilter

__all__ = ["forget", "forget_confirm", "graph", "memories", "memory", "search"]

PAGE_SIZES = (20, 50, 100)
_MAX_ENTITY = 200
_MAX_REASON = 500
INSPECTOR_REASON = "forgotten in the inspector"


def _day(request: Request, name: str, *, end: bool) -> datetime | None:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return None
    try:
        day = datetime.strptime(raw, "%Y-%m-%d").date()
    except ValueError:
        raise Refused(400, f"{name} must be a date like 2026-11-20, got {raw[:40]!r}") from None
    moment = datetime.combine(day, time.min, tzinfo=UTC)
    return moment + timedelta(days=1, microseconds=-1) if end else moment


def _filter(request: Request) -> MemoryFilter:
    params = request.query_params
    types = set()
    for raw in params.getlist("type"):
        try:
            types.add(MemoryType(raw))
        except ValueError:
            raise Refused(400, f"unknown memory type {raw[:40]!r}") from None
    start, end = _day(request, "since", end=False), _day(request, "until", end=True)
    if start and end and start > end:
        raise Refused(400, "since must not be after until")
    entity = params.get("entity", "").strip()[:_MAX_ENTITY] or None
    return MemoryFilter(
        types=frozenset(types),
        entity=entity,
        start=start,
        end=end,
        corrected=params.get("corrected") == "1",
    )


async def _search(request: Request, query: str, wanted: MemoryFilter) -> SearchResult | str:
    """The search the box asks for, as `memory_search` runs it; a message for bad input."""
    k = number(request, "k", 20, 1, 100)
    timed = wanted.start is not None or wanted.end is not None
    time_range = TimeRange(start=wanted.start, end=wanted.end) if timed else None
    filters = None
    if wanted.types or wanted.entity or time_range:
        filters = SearchFilters(
            entity_ids=[wanted.entity] if wanted.entity else [],
            memory_types=sorted(wanted.types),
            time_range=time_range,
        )
    try:
        search = SearchRequest(query=query, top_k=k, filters=filters, history=wanted.corrected)
    except ValidationError as exc:
        return f"invalid input: {describe_errors(exc)}"
    return await state_of(request).orchestrator.search(search)


def _applied(request: Request, wanted: MemoryFilter) -> dict[str, Any]:
    """The filters as they are in the page's address: the list's, and the search's."""
    params = request.query_params
    return {
        "type": sorted(t.value for t in wanted.types),
        "entity": wanted.entity,
        "since": params.get("since"),
        "until": params.get("until"),
        "corrected": "1" if wanted.corrected else None,
    }


def _context(request: Request, wanted: MemoryFilter, query: str) -> dict[str, Any]:
    inspection = state_of(request).orchestrator.inspection()
    return {
        "query": query,
        "wanted": wanted,
        "types": list(MemoryType),
        "entities": inspection.catalog.entity_names(),
        "sizes": PAGE_SIZES,
        "search_action": query_href("/search", **_applied(request, wanted)),
    }


async def memories(request: Request) -> Response:
    """`/`: the memories, newest first, with filters and paging. A search is a POST (it
    is kept as a request: `search`); a `q` here only fills the box."""
    allowed(request, "memory_search")
    wanted = _filter(request)
    query = request.query_params.get("q", "").strip()
    context = _context(request, wanted, query)
    if query:
        context["notice"] = (
            "Press Search to run it: a search is kept as a request, so only this page's"
            " form runs one, never a link."
        )
    limit = number(request, "limit", 50, 1, 100)
    offset = number(request, "offset", 0, 0, 10**9)
    listed = await state_of(request).orchestrator.inspection().memories(wanted, offset, limit)
    pager = Pager(offset, limit, listed.total, len(listed.memories))

    def href_of(at: int) -> str:
        return query_href(
            "/",
            **_applied(request, wanted),
            limit=limit if limit != 50 else None,
            offset=at or None,
        )

    return page(request, "memories.html", listed=listed, pager=pager, href_of=href_of, **context)


async def search(request: Request) -> Response:
    """`/search` (POST, from the page's form: its origin and CSRF token are checked): the
    search as `memory_search` runs it, within the filters in the address. It is kept as a
    request (a trace), so no other page, and no link, can make one."""
    fields = await form_of(request)
    allowed(request, "memory_search")
    wanted = _filter(request)
    query = fields.get("q", "").strip()
    context = _context(request, wanted, query)
    if not query:
        return page(request, "memories.html", code=400, error="type what to search for", **context)
    found = await _search(request, query, wanted)
    if isinstance(found, str):
        return page(request, "memories.html", code=400, error=found, **context)
    return page(request, "memories.html", result=found, **context)


async def memory(request: Request) -> Response:
    """`/memories/<id>`: one memory, its edges, its corrections and the requests that
    returned it."""
    access = allowed(request, "memory_search")
    memory_id = request.path_params["memory_id"]
    inspection = state_of(request).orchestrator.inspection()
    view = await inspection.memory(memory_id)
    if view is None:
        return await _forgotten_or_missing(request, memory_id, access.can_forget)
    can_forget = access.can_forget
    return page(request, "memory.html", view=view, can_forget=can_forget, inspection=inspection)


async def _forgotten_or_missing(request: Request, memory_id: str, can_undo: bool) -> Response:
    """A forgotten memory's page (410): when, why, and the undo; else 404."""
    stone = await state_of(request).orchestrator.inspection().forgotten(memory_id)
    if stone is None:
        raise Refused(404, f"no memory with id {memory_id!r} in this store")
    return page(request, "memory_forgotten.html", code=410, stone=stone, can_undo=can_undo)


async def forget_confirm(request: Request) -> Response:
    """`/memories/<id>/forget` (GET): the memory, a reason and one button, or why not."""
    access = allowed(request, "memory_search")
    memory_id = request.path_params["memory_id"]
    view = await state_of(request).orchestrator.inspection().memory(memory_id)
    if view is None:
        return await _forgotten_or_missing(request, memory_id, access.can_forget)
    refused = access.denied("memory_forget")
    return page(request, "forget.html", view=view, refused=refused, reason=INSPECTOR_REASON)


async def forget(request: Request) -> Response:
    """`/memories/<id>/forget` (POST): forget it (or, with `undo=1`, bring it back) as
    `memory_forget` does, after the form's checks."""
    fields = await form_of(request)
    access = allowed(request, "memory_search")
    denied = access.denied("memory_forget")
    if denied is not None:
        raise Refused(403, f"forbidden: {denied}")
    memory_id = request.path_params["memory_id"]
    if fields.get("confirm") != "yes":
        raise Refused(400, "the forget form must be confirmed")
    undo = fields.get("undo") == "1"
    reason = fields.get("reason", "").strip()[:_MAX_REASON] or INSPECTOR_REASON
    done = await state_of(request).orchestrator.inspection().forget(memory_id, reason, undo=undo)
    code = 200 if done.done else 409
    return page(request, "forgotten.html", code=code, done=done, memory_id=memory_id, undo=undo)


async def graph(request: Request) -> Response:
    """`/graph?entity=NAME` or `?memory=ID`: the neighbourhood, drawn on the server."""
    allowed(request, "memory_expand")
    params = request.query_params
    entity = params.get("entity", "").strip()[:_MAX_ENTITY] or None
    memory_id = params.get("memory", "").strip()[:_MAX_ENTITY] or None
    hops = number(request, "hops", 0, 0, 4) or None
    inspection = state_of(request).orchestrator.inspection()
    context: dict[str, Any] = {
        "entity": entity or "",
        "memory_id": memory_id or "",
        "hops": hops,
        "entities": inspection.catalog.entity_names(40),
    }
    if entity is None and memory_id is None:
        return page(request, "graph.html", drawn=None, found=None, **context)
    found = await inspection.graph(entity=entity, memory_id=memory_id, hops=hops)
    drawn = graph_svg.draw(found)
    return page(request, "graph.html", drawn=drawn, found=found, **context)

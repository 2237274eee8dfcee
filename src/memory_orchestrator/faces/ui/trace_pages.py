"""The request pages (the trace list, one trace, its replay), health and the eval report."""

from __future__ import annotations

import anyio
from starlette.requests import Request
from starlette.responses import FileResponse, Response

from memory_orchestrator import service
from memory_orchestrator.errors import OrchestratorError
from memory_orchestrator.faces.ui.common import (
    Refused,
    allowed,
    form_of,
    number,
    page,
    state_of,
)
from memory_orchestrator.faces.ui.evaldir import plot_path, read_eval
from memory_orchestrator.faces.ui.views import Pager, query_href, stage_bars
from memory_orchestrator.models import REPLAYED, Memory, OutboxReport

__all__ = ["eval_page", "eval_plot", "health", "replay", "trace", "traces"]


async def traces(request: Request) -> Response:
    """`/traces`: the kept requests, newest first (tool, what was asked, items, latency)."""
    allowed(request, "memory_explain")
    tool = request.query_params.get("tool", "").strip()[:40] or None
    limit = number(request, "limit", 50, 1, 200)
    offset = number(request, "offset", 0, 0, 10**9)
    inspection = state_of(request).orchestrator.inspection()
    lines, total = await inspection.trace_lines(offset, limit, tool)

    def href_of(at: int) -> str:
        return query_href("/traces", tool=tool, limit=limit if limit != 50 else None, offset=at)

    return page(
        request,
        "traces.html",
        lines=lines,
        href_of=href_of,
        pager=Pager(offset, limit, total, len(lines)),
        tool=tool or "",
        tools=inspection.traces.tools(),
        inspection=inspection,
    )


async def _memories(request: Request, ids: list[str]) -> dict[str, Memory]:
    if not ids:
        return {}
    found = await state_of(request).orchestrator.memories(list(dict.fromkeys(ids)))
    return {m.id: m for m in found}


async def trace(request: Request) -> Response:
    """`/traces/<id>`: the plan, every candidate with its sources and score parts, the drops
    with their reasons and the time per stage."""
    allowed(request, "memory_explain")
    trace_id = request.path_params["trace_id"]
    orchestrator = state_of(request).orchestrator
    found = await anyio.to_thread.run_sync(orchestrator.trace, trace_id)
    if found is None:
        raise Refused(404, f"no trace with id {trace_id!r} (traces are kept for a while only)")
    ids = [c.id for c in found.candidates] + [d.id for d in found.dropped] + found.result_ids
    known = await _memories(request, ids)
    candidates = sorted(found.candidates, key=lambda c: (c.final_rank is None, c.final_rank or 0))
    return page(
        request,
        "trace.html",
        trace=found,
        candidates=candidates,
        known=known,
        stages=stage_bars(found.timings_ms),
        replayable=found.tool in REPLAYED,
    )


async def replay(request: Request) -> Response:
    """`/traces/<id>/replay` (POST, from the trace page's form: origin and CSRF token
    checked): the request run again today, and what changed. The run is kept as a request
    (a trace), so no other page, and no link, can make one."""
    await form_of(request)
    allowed(request, "memory_explain")
    trace_id = request.path_params["trace_id"]
    orchestrator = state_of(request).orchestrator
    try:
        report = await orchestrator.replay(trace_id)
    except OrchestratorError as exc:
        raise Refused(404 if "no trace" in str(exc) else 400, str(exc)) from None
    known = await _memories(request, [*report.before, *report.after])
    rows = []
    for rank in range(max(len(report.before), len(report.after))):
        before = report.before[rank] if rank < len(report.before) else None
        after = report.after[rank] if rank < len(report.after) else None
        rows.append((rank + 1, before, after))
    orchestrator.inspection().traces.stale()
    return page(request, "replay.html", report=report, rows=rows, known=known)


async def health(request: Request) -> Response:
    """`/health`: the health checks (the latest, with its age; `?fresh=1` checks now),
    per-tool percentiles and errors, the outbox queue."""
    allowed(request, "memory_health")
    ui = state_of(request)
    fresh = request.query_params.get("fresh") == "1"
    checked = await (ui.health.check() if fresh else ui.health.latest())
    again = None if fresh else ui.health.again_if_stale()
    inspection = ui.orchestrator.inspection()
    stats = await inspection.tool_stats()
    outbox: OutboxReport | None = None
    outbox_error = None
    if ui.settings.outbox.enabled:
        try:
            outbox = await anyio.to_thread.run_sync(service.queued_writes, ui.settings)
        except OrchestratorError as exc:
            outbox_error = str(exc)
    answer = page(
        request,
        "health.html",
        report=checked.report if checked is not None else None,
        checked=checked,
        stats=stats,
        outbox=outbox,
        outbox_error=outbox_error,
        inspection=inspection,
    )
    answer.background = again  # a report older than max_age_s: checked again after this page
    return answer


async def eval_page(request: Request) -> Response:
    """`/eval`: the tables and plots of the `eval --out` folder the inspector was given."""
    allowed(request, "memory_search")
    folder = state_of(request).eval_dir
    view = await anyio.to_thread.run_sync(read_eval, folder) if folder else None
    return page(request, "eval.html", view=view)


async def eval_plot(request: Request) -> Response:
    """One PNG of the eval folder, by its own name only."""
    allowed(request, "memory_search")
    path = plot_path(state_of(request).eval_dir, request.path_params["name"])
    if path is None:
        raise Refused(404, "no such plot")
    return FileResponse(path, media_type="image/png")

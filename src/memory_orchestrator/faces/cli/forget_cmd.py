"""`orchestrator forget`: forget memories, bring them back (`--undo`), erase them from the
store for good (`--purge`), or list them (`--list`): the same service calls as the
`memory_forget` tool and the inspector's forget button."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer

from memory_orchestrator.faces.cli import render
from memory_orchestrator.faces.cli.common import (
    FAILURE,
    USAGE_ERROR,
    JsonFlag,
    call_service,
    fail,
    show,
    state_of,
    validate,
)
from memory_orchestrator.models import ForgetReport, ForgetRequest
from memory_orchestrator.state.forgotten import Tombstone


def forget(
    ctx: typer.Context,
    ids: Annotated[list[str] | None, typer.Argument(help="Memory ids (from a result).")] = None,
    reason: Annotated[
        str | None, typer.Option("--reason", "-r", help="Why (needed to forget).")
    ] = None,
    undo: Annotated[bool, typer.Option("--undo", help="Bring forgotten memories back.")] = False,
    purge: Annotated[
        bool,
        typer.Option("--purge", help="Erase forgotten memories from the store for good."),
    ] = False,
    list_: Annotated[
        bool, typer.Option("--list", help="List the forgotten memories (oldest first).")
    ] = False,
    json: JsonFlag = False,
) -> None:
    """Forget memories: no search, context or page returns them any more (the store keeps
    them: --undo brings them back; --purge erases them for good). Exit code 1 when an id
    was not found or refused."""
    chosen = [name for name, on in (("--undo", undo), ("--purge", purge), ("--list", list_)) if on]
    if len(chosen) > 1:
        fail(f"give one of {', '.join(chosen)}", USAGE_ERROR)
    if list_:
        if ids:
            fail("--list takes no ids", USAGE_ERROR)
        stones = call_service(ctx, lambda o: o.forgotten())
        if json or state_of(ctx).json:
            render.print_json([_jsonable(t) for t in stones])
        else:
            render.forgotten_list(stones)
        return
    if not ids:
        fail("give the ids of the memories (memory_id in a result)", USAGE_ERROR)
    if purge:
        report = call_service(ctx, lambda o: o.purge(ids))
    else:
        if not undo and not (reason and reason.strip()):
            fail("say why with --reason (a few words): it is kept with them", USAGE_ERROR)
        request = validate(ForgetRequest, ids=ids, reason=reason, undo=undo)
        report = call_service(ctx, lambda o: o.forget(request))
    show(ctx, json, report, render.forget_report)
    if _incomplete(report):
        raise typer.Exit(FAILURE)


def _incomplete(report: ForgetReport) -> bool:
    return bool(report.not_found or report.refused)


def _jsonable(stone: Tombstone) -> dict[str, object]:
    values = asdict(stone)
    for key in ("forgotten_at", "purged_at"):
        if values[key] is not None:
            values[key] = values[key].isoformat()
    return values

"""The CLI face: one command per service call, rendering kept in `render`.

Each command validates its input into a request model, makes one service call under
`anyio.run` and prints the record: rich tables for people, one JSON document with `--json`.
Expected failures (bad input, bad config, unknown backend or trace, a failing store) print one
line on stderr and exit non-zero: 2 for usage and validation errors, 1 for the rest.
"""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from pydantic import BaseModel

from memory_orchestrator.about import DIST, package_version
from memory_orchestrator.faces.cli import (
    admin,
    eval_cmd,
    forget_cmd,
    import_cmd,
    models_cmd,
    render,
    setup_cmd,
    transfer_cmd,
    ui_cmd,
)
from memory_orchestrator.faces.cli.common import (
    AsOfOpt,
    EntityOpt,
    HistoryOpt,
    JsonFlag,
    SinceOpt,
    State,
    TaskOpt,
    TypeOpt,
    UntilOpt,
    ask,
    drop_none,
    filters_from,
    guarded,
    say_if_lexical_only,
    show,
    state_of,
    validate,
)
from memory_orchestrator.models import (
    ContextPackage,
    ContextRequest,
    ExpandRequest,
    ExplainRequest,
    Explanation,
    HealthReport,
    MemoryType,
    NewMemory,
    ReplayReport,
    SearchRequest,
    SearchResult,
    Status,
    WriteReport,
    WriteRequest,
)

__all__ = ["app", "main"]

app = typer.Typer(
    name="orchestrator",
    help="Plan, retrieve, expand, re-rank and pack agent memory; serve it over MCP.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help: rich markup ate "[http]" in option help, and the rich layout showed every
    # flag as taking a `<bool>` value (`--json true health` then failed).
    rich_markup_mode=None,
)


class ReplayAsk(BaseModel):
    """What `replay` sends the shared process (`faces.shared.server.OPERATIONS`)."""

    trace_id: str


class OnDuplicate(StrEnum):
    SKIP = "skip"
    UPDATE = "update"


class GroupBy(StrEnum):
    AUTO = "auto"
    ENTITY = "entity"
    TIME = "time"
    NONE = "none"


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"{DIST} {package_version()}")
        raise typer.Exit(0)


@app.callback()
def root(
    ctx: typer.Context,
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="TOML settings file.", dir_okay=False)
    ] = None,
    backend: Annotated[
        str | None, typer.Option("--backend", "-b", help="Memory store (see `backends`).")
    ] = None,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Where stores keep their files.")
    ] = None,
    project: Annotated[
        str | None,
        typer.Option(
            "--project",
            help="The data dir of this project ('auto': the client's project folder, else the"
            " nearest .git upward); instead of --data-dir.",
        ),
    ] = None,
    json: JsonFlag = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show score breakdowns and trace details.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            help="Print the package's version and exit.",
            is_eager=True,
            callback=_print_version,
        ),
    ] = False,
) -> None:
    """Plan, retrieve, expand, re-rank and pack agent memory; serve it over MCP."""
    if project is not None:
        if data_dir is not None:
            raise typer.BadParameter(
                "give --data-dir or --project, not both", param_hint="--project"
            )
        from memory_orchestrator.faces.shared.project import data_dir_of, project_root

        found = project_root(project, os.environ, os.getcwd())
        data_dir = Path(data_dir_of(found, os.environ))
    ctx.obj = State(config, backend, data_dir, json, verbose)


# ---------------------------------------------------------------- retrieval


@app.command()
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to recall.")],
    top_k: Annotated[int | None, typer.Option("--top-k", "-k", help="Items to return.")] = None,
    expand: Annotated[bool, typer.Option("--expand", help="Follow graph links.")] = False,
    task: TaskOpt = None,
    entity: EntityOpt = None,
    memory_type: TypeOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    as_of: AsOfOpt = None,
    passthrough: Annotated[
        bool, typer.Option("--passthrough", help="The store's raw ranking, unchanged.")
    ] = False,
    history: HistoryOpt = False,
    json: JsonFlag = False,
) -> None:
    """Search memories and show them ranked, with scores and reasons."""
    filters = filters_from(entity, memory_type, since, until)
    request = validate(
        SearchRequest,
        query=query,
        task=task,
        filters=filters,
        top_k=top_k,
        expand=expand,
        as_of=as_of,
        passthrough=passthrough or None,
        history=history,
    )
    result = ask(ctx, "search", request, SearchResult, lambda o: o.search(request))
    show(ctx, json, result, lambda r: render.search_result(r, state_of(ctx).verbose))
    say_if_lexical_only(guarded(state_of(ctx).settings))


@app.command()
def context(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What the context is about.")],
    task: TaskOpt = None,
    max_items: Annotated[int | None, typer.Option("--max-items", help="Most items.")] = None,
    max_chars: Annotated[
        int | None, typer.Option("--max-chars", help="Longest context block.")
    ] = None,
    expand: Annotated[
        bool | None, typer.Option("--expand/--no-expand", help="Default: decided per query.")
    ] = None,
    group_by: Annotated[GroupBy | None, typer.Option("--group-by", help="Grouping.")] = None,
    as_of: AsOfOpt = None,
    entity: EntityOpt = None,
    memory_type: TypeOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    history: HistoryOpt = False,
    json: JsonFlag = False,
) -> None:
    """Build the agent-ready context package: ranked items and a context block."""
    budget = drop_none(max_items=max_items, max_chars=max_chars) or None
    request = validate(
        ContextRequest,
        query=query,
        task=task,
        response_budget=budget,
        filters=filters_from(entity, memory_type, since, until),
        expand=expand,
        as_of=as_of,
        group_by=group_by,
        history=history,
    )
    result = ask(ctx, "context", request, ContextPackage, lambda o: o.context(request))
    show(ctx, json, result, lambda r: render.context_package(r, state_of(ctx).verbose))
    say_if_lexical_only(guarded(state_of(ctx).settings))


@app.command()
def expand(
    ctx: typer.Context,
    seed: Annotated[list[str] | None, typer.Option("--seed", "-s", help="Memory id.")] = None,
    entity: Annotated[list[str] | None, typer.Option("--entity", "-e", help="Entity.")] = None,
    query: Annotated[str | None, typer.Option("--query", "-q", help="Rank by this.")] = None,
    hops: Annotated[int | None, typer.Option("--hops", help="Links to follow (1-4).")] = None,
    edge_type: Annotated[
        list[str] | None, typer.Option("--edge-type", help="Only this link type.")
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Most items.")] = None,
    json: JsonFlag = False,
) -> None:
    """Follow graph links outward from memory ids or entities."""
    request = validate(
        ExpandRequest,
        seed_ids=seed or [],
        entities=entity or [],
        query=query,
        hops=hops,
        edge_types=edge_type or None,
        limit=limit,
    )
    result = ask(ctx, "expand", request, SearchResult, lambda o: o.expand(request))
    show(ctx, json, result, lambda r: render.search_result(r, state_of(ctx).verbose))


# ---------------------------------------------------------------- write, explain, replay


@app.command()
def write(
    ctx: typer.Context,
    content: Annotated[str, typer.Argument(help='The memory text; "-" reads stdin.')],
    memory_type: Annotated[MemoryType | None, typer.Option("--type", "-t")] = None,
    entity: Annotated[list[str] | None, typer.Option("--entity", "-e")] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag")] = None,
    source: Annotated[str | None, typer.Option("--source")] = None,
    importance: Annotated[float | None, typer.Option("--importance", help="0..1")] = None,
    confidence: Annotated[float | None, typer.Option("--confidence", help="0..1")] = None,
    created_at: Annotated[str | None, typer.Option("--created-at", help="ISO date/time.")] = None,
    on_duplicate: Annotated[OnDuplicate | None, typer.Option("--on-duplicate")] = None,
    no_link: Annotated[bool, typer.Option("--no-link", help="Do not link related.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report only; write nothing.")] = False,
    json: JsonFlag = False,
) -> None:
    """Write a memory, after checking for near-duplicates."""
    text = sys.stdin.read() if content == "-" else content
    memory = validate(
        NewMemory,
        content=text,
        type=memory_type,
        entities=entity or [],
        tags=tag or [],
        source=source,
        importance=importance,
        confidence=confidence,
        created_at=created_at,
    )
    request = validate(
        WriteRequest,
        memory=memory,
        on_duplicate=on_duplicate,
        link_related=not no_link,
        dry_run=dry_run,
    )
    result = ask(ctx, "write", request, WriteReport, lambda o: o.write(request), creates=True)
    show(ctx, json, result, render.write_report)


@app.command()
def explain(
    ctx: typer.Context,
    trace_id: Annotated[str | None, typer.Argument(help="A trace id from a result.")] = None,
    query: Annotated[str | None, typer.Option("--query", "-q", help="Explain a fresh run.")] = None,
    json: JsonFlag = False,
) -> None:
    """Explain a stored trace (or a fresh query): plan, candidates, scores, drops."""
    request = validate(ExplainRequest, trace_id=trace_id, query=query)
    result = ask(ctx, "explain", request, Explanation, lambda o: o.explain(request))
    show(ctx, json, result, lambda r: render.explanation(r, state_of(ctx).verbose))


@app.command()
def replay(
    ctx: typer.Context,
    trace_id: Annotated[str, typer.Argument(help="The trace to run again.")],
    json: JsonFlag = False,
) -> None:
    """Run a stored request again and compare the results."""
    asked = ReplayAsk(trace_id=trace_id)
    result = ask(ctx, "replay", asked, ReplayReport, lambda o: o.replay(trace_id))
    show(ctx, json, result, render.replay_report)


app.command()(forget_cmd.forget)


@app.command()
def health(ctx: typer.Context, json: JsonFlag = False) -> None:
    """Check the store. Exit code: 0 ok, 1 degraded, 2 error."""
    result = ask(ctx, "health", None, HealthReport, lambda o: o.health())
    show(ctx, json, result, render.health_report)
    codes = {Status.OK: 0, Status.DEGRADED: 1, Status.ERROR: 2}
    raise typer.Exit(codes.get(result.status, 2))


# ---------------------------------------------------------------- serving and housekeeping

app.add_typer(admin.outbox_app, name="outbox")
app.command()(admin.serve)
app.add_typer(admin.token_app, name="token")
app.command()(admin.stats)
app.add_typer(admin.config_app, name="config")
app.command("backends")(admin.list_backends)
app.command()(admin.demo)
app.command("import")(import_cmd.import_memories)
app.command()(transfer_cmd.export)
app.command()(transfer_cmd.restore)
app.command()(transfer_cmd.backup)
app.add_typer(models_cmd.models_app, name="models")
app.command("setup")(setup_cmd.setup)
app.command("hook")(setup_cmd.hook)


app.command("eval")(eval_cmd.evaluate)
app.command("ui")(ui_cmd.ui)


def main() -> None:
    """Console-script entry point."""
    app()

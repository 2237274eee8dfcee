"""The CLI face: one command per service call, rendering kept in `render`.

Each command validates its input into a request model, makes one service call under
`anyio.run` and prints the record: rich tables for people, one JSON document with `--json`.
Expected failures (bad input, bad config, unknown backend or trace, a failing store) print one
line on stderr and exit non-zero: 2 for usage and validation errors, 1 for the rest.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn, TypeVar

import anyio
import typer
from pydantic import BaseModel, ValidationError

from memory_orchestrator import auth, observability, service
from memory_orchestrator.backends import registry
from memory_orchestrator.cli import eval_cmd, render
from memory_orchestrator.errors import (
    BackendError,
    ConfigError,
    InvalidRequest,
    OutboxError,
    TraceNotFound,
    UnknownBackend,
)
from memory_orchestrator.models import (
    ContextPackage,
    ContextRequest,
    ExpandRequest,
    ExplainRequest,
    MemoryType,
    NewMemory,
    SearchRequest,
    Status,
    WriteRequest,
)
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings, load_settings

__all__ = ["app", "main"]

T = TypeVar("T")
ModelT = TypeVar("ModelT", bound=BaseModel)

USAGE_ERROR = 2
FAILURE = 1
DEMO_MARKER = ".orchestrator-demo"

app = typer.Typer(
    name="orchestrator",
    help="Plan, retrieve, expand, re-rank and pack agent memory; serve it over MCP.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
config_app = typer.Typer(help="Inspect the effective settings.", no_args_is_help=True)
app.add_typer(config_app, name="config")
outbox_app = typer.Typer(
    help="Writes the store could not take yet (the durable outbox).", no_args_is_help=True
)
app.add_typer(outbox_app, name="outbox")
token_app = typer.Typer(help="Bearer tokens for the HTTP transport.", no_args_is_help=True)
app.add_typer(token_app, name="token")


class OnDuplicate(StrEnum):
    SKIP = "skip"
    UPDATE = "update"


class GroupBy(StrEnum):
    AUTO = "auto"
    ENTITY = "entity"
    TIME = "time"
    NONE = "none"


class Transport(StrEnum):
    STDIO = "stdio"
    HTTP = "http"


class StatsFormat(StrEnum):
    TABLE = "table"
    JSON = "json"


@dataclass(frozen=True)
class State:
    """The root options, shared by every command."""

    config: Path | None = None
    backend: str | None = None
    data_dir: Path | None = None
    json: bool = False
    verbose: bool = False

    def settings(self) -> Settings:
        return load_settings(self.config, backend=self.backend, data_dir=self.data_dir)


# ---------------------------------------------------------------- shared options

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
TaskOpt = Annotated[str | None, typer.Option("--task", help="The task the memories are for.")]
EntityOpt = Annotated[
    list[str] | None, typer.Option("--entity", "-e", help="Only memories about this entity.")
]
TypeOpt = Annotated[
    list[MemoryType] | None, typer.Option("--type", "-t", help="Only this memory type.")
]
SinceOpt = Annotated[str | None, typer.Option("--since", help="From this ISO date/time.")]
UntilOpt = Annotated[str | None, typer.Option("--until", help="Up to this ISO date/time.")]
AsOfOpt = Annotated[
    str | None, typer.Option("--as-of", help="Rank as if now were this ISO date/time.")
]


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
    json: JsonFlag = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show score breakdowns and trace details.")
    ] = False,
) -> None:
    """Plan, retrieve, expand, re-rank and pack agent memory; serve it over MCP."""
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
    json: JsonFlag = False,
) -> None:
    """Search memories and show them ranked, with scores and reasons."""
    filters = _filters(entity, memory_type, since, until)
    request = _validate(
        SearchRequest,
        query=query,
        task=task,
        filters=filters,
        top_k=top_k,
        expand=expand,
        as_of=as_of,
        passthrough=passthrough or None,
    )
    result = _call(ctx, lambda o: o.search(request))
    _show(ctx, json, result, lambda r: render.search_result(r, _state(ctx).verbose))


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
    json: JsonFlag = False,
) -> None:
    """Build the agent-ready context package: ranked items and a context block."""
    budget = _drop_none(max_items=max_items, max_chars=max_chars) or None
    request = _validate(
        ContextRequest,
        query=query,
        task=task,
        response_budget=budget,
        filters=_filters(entity, memory_type, since, until),
        expand=expand,
        as_of=as_of,
        group_by=group_by,
    )
    result = _call(ctx, lambda o: o.context(request))
    _show(ctx, json, result, lambda r: render.context_package(r, _state(ctx).verbose))


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
    request = _validate(
        ExpandRequest,
        seed_ids=seed or [],
        entities=entity or [],
        query=query,
        hops=hops,
        edge_types=edge_type or None,
        limit=limit,
    )
    result = _call(ctx, lambda o: o.expand(request))
    _show(ctx, json, result, lambda r: render.search_result(r, _state(ctx).verbose))


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
    memory = _validate(
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
    request = _validate(
        WriteRequest,
        memory=memory,
        on_duplicate=on_duplicate,
        link_related=not no_link,
        dry_run=dry_run,
    )
    result = _call(ctx, lambda o: o.write(request))
    _show(ctx, json, result, render.write_report)


@app.command()
def explain(
    ctx: typer.Context,
    trace_id: Annotated[str | None, typer.Argument(help="A trace id from a result.")] = None,
    query: Annotated[str | None, typer.Option("--query", "-q", help="Explain a fresh run.")] = None,
    json: JsonFlag = False,
) -> None:
    """Explain a stored trace (or a fresh query): plan, candidates, scores, drops."""
    request = _validate(ExplainRequest, trace_id=trace_id, query=query)
    result = _call(ctx, lambda o: o.explain(request))
    _show(ctx, json, result, lambda r: render.explanation(r, _state(ctx).verbose))


@app.command()
def replay(
    ctx: typer.Context,
    trace_id: Annotated[str, typer.Argument(help="The trace to run again.")],
    json: JsonFlag = False,
) -> None:
    """Run a stored request again and compare the results."""
    result = _call(ctx, lambda o: o.replay(trace_id))
    _show(ctx, json, result, render.replay_report)


@app.command()
def health(ctx: typer.Context, json: JsonFlag = False) -> None:
    """Check the store. Exit code: 0 ok, 1 degraded, 2 error."""
    result = _call(ctx, lambda o: o.health())
    _show(ctx, json, result, render.health_report)
    codes = {Status.OK: 0, Status.DEGRADED: 1, Status.ERROR: 2}
    raise typer.Exit(codes.get(result.status, 2))


@outbox_app.command("list")
def outbox_list(
    ctx: typer.Context,
    all_: Annotated[
        bool, typer.Option("--all", help="Also the writes already replayed (newest kept).")
    ] = False,
    json: JsonFlag = False,
) -> None:
    """Show queued writes, oldest first, with why they wait. Starts no store."""
    settings = _guarded(_state(ctx).settings)

    report = _guarded(lambda: service.queued_writes(settings, delivered=all_))
    _show(ctx, json, report, render.outbox_report)


@outbox_app.command("flush")
def outbox_flush(ctx: typer.Context, json: JsonFlag = False) -> None:
    """Replay queued writes to the store now, in order. Exit code 1 when some still wait."""
    result = _call(ctx, lambda o: o.flush_outbox())
    _show(ctx, json, result, render.outbox_report)
    if result.depth:
        raise typer.Exit(FAILURE)


# ---------------------------------------------------------------- serving and setup


@app.command()
def serve(
    ctx: typer.Context,
    transport: Annotated[Transport, typer.Option("--transport", help="stdio or http.")] = (
        Transport.STDIO
    ),
    host: Annotated[
        str | None, typer.Option("--host", help="HTTP bind address; default [http] host.")
    ] = None,
    port: Annotated[int | None, typer.Option("--port", help="HTTP port; default [http] port.")] = (
        None
    ),
    insecure_no_auth: Annotated[
        bool,
        typer.Option(
            "--insecure-no-auth", help="HTTP without tokens: anyone who can connect gets in."
        ),
    ] = False,
) -> None:
    """Serve the memory tools over MCP: stdio, or streamable HTTP (loopback, bearer tokens)."""
    from memory_orchestrator import mcp_server

    settings = _guarded(_state(ctx).settings)
    mode: Literal["stdio", "streamable-http"] = (
        "stdio" if transport is Transport.STDIO else "streamable-http"
    )
    _guarded(
        lambda: mcp_server.run(
            settings, mode, host=host, port=port, insecure_no_auth=insecure_no_auth
        )
    )


@token_app.command("new")
def token_new(
    ctx: typer.Context,
    name: Annotated[str, typer.Option("--name", help="Who holds the token.")],
    tools: Annotated[
        list[str] | None,
        typer.Option("--tools", help="A tool it may call (repeat); default all."),
    ] = None,
    stores: Annotated[
        list[str] | None,
        typer.Option("--stores", help="A store it may reach (repeat); default any."),
    ] = None,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="May never call memory_write.")
    ] = False,
    json: JsonFlag = False,
) -> None:
    """Make a bearer token: prints the secret once and the config entry holding its hash."""
    secret = auth.new_secret()
    spec = _validate(
        auth.TokenSpec,
        name=name,
        hash=auth.hash_token(secret),
        tools=tools or None,
        stores=stores or None,
        read_only=read_only,
    )
    document = {"name": spec.name, "secret": secret, "hash": spec.hash, "toml": spec.toml()}
    _show(ctx, json, document, lambda _: render.new_token(spec.name, secret, spec.toml()))


@app.command()
def stats(
    ctx: typer.Context,
    since: Annotated[
        str | None, typer.Option("--since", help="30m, 2h, 7d or an ISO date/time.")
    ] = None,
    output: Annotated[StatsFormat, typer.Option("--format", help="table or json.")] = (
        StatsFormat.TABLE
    ),
) -> None:
    """Request statistics from the trace store: count, latency percentiles, errors per tool."""
    settings = _guarded(_state(ctx).settings)
    start = _guarded(lambda: observability.parse_since(since)) if since else None
    report = _guarded(lambda: service.request_stats(settings, start))
    _show(ctx, output is StatsFormat.JSON, report, render.stats_report)


@config_app.command("show")
def config_show(ctx: typer.Context, json: JsonFlag = False) -> None:
    """Print the effective settings (flags > env > TOML file > defaults)."""
    values = _guarded(_state(ctx).settings).model_dump(mode="json")
    _show(ctx, json, values, render.settings_toml)


@app.command("backends")
def list_backends(ctx: typer.Context, json: JsonFlag = False) -> None:
    """List the memory stores that can be chosen with --backend (* = selected)."""
    selected = _guarded(_state(ctx).settings).backend
    names = registry.names()
    document = {"backends": names, "selected": selected}
    _show(ctx, json, document, lambda _: render.backends(names, selected))


@app.command()
def demo(
    ctx: typer.Context,
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="Made afresh; only an earlier demo dir is wiped."),
    ] = None,
    query: Annotated[
        str | None, typer.Option("--query", "-q", help="Default: the sample's question.")
    ] = None,
    json: JsonFlag = False,
) -> None:
    """Load the built-in sample into a fresh embedded store and show a context package."""
    from memory_orchestrator import demo as sample

    state = _state(ctx)
    folder = data_dir or state.data_dir or Path("demo-data")
    request = _validate(
        ContextRequest,
        query=query or sample.DEFAULT_QUERY,
        task=None if query else sample.DEFAULT_TASK,
    )
    settings = _guarded(state.settings)
    _guarded(lambda: _fresh_demo_dir(folder))
    settings = settings.model_copy(
        update={
            "backend": "embedded",
            "data_dir": folder.resolve(),
            "embedded": settings.embedded.model_copy(update={"path": None}),
            "traces": settings.traces.model_copy(update={"path": None}),
        }
    )

    async def load_and_ask(orchestrator: Orchestrator) -> ContextPackage:
        count = await sample.load_demo(orchestrator)
        render.note(f"loaded {count} sample memories into {folder}")
        return await orchestrator.context(request)

    result = _call(ctx, load_and_ask, settings)
    _show(ctx, json, result, lambda r: render.context_package(r, _state(ctx).verbose))


app.command("eval")(eval_cmd.evaluate)


# ---------------------------------------------------------------- helpers


def main() -> None:
    """Console-script entry point."""
    app()


def _state(ctx: typer.Context) -> State:
    state = ctx.find_object(State)
    return state if state is not None else State()


def _drop_none(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _validate(model: type[ModelT], **values: Any) -> ModelT:
    """Build a request model; unset options are left out so the model's defaults apply."""
    return _guarded(lambda: model.model_validate(_drop_none(**values)))


def _filters(
    entities: list[str] | None,
    types: list[MemoryType] | None,
    since: str | None,
    until: str | None,
) -> dict[str, Any] | None:
    time_range = _drop_none(start=since, end=until) or None
    if not (entities or types or time_range):
        return None
    return {"entity_ids": entities or [], "memory_types": types or [], "time_range": time_range}


def _call(
    ctx: typer.Context,
    call: Callable[[Orchestrator], Awaitable[T]],
    settings: Settings | None = None,
) -> T:
    """Open an orchestrator, make one call, close it; expected failures end the command."""
    chosen = settings or _guarded(_state(ctx).settings)

    async def go() -> T:
        orchestrator = Orchestrator.from_settings(chosen)
        try:
            return await call(orchestrator)
        finally:
            await orchestrator.close()

    return _guarded(lambda: anyio.run(go))


def _show(ctx: typer.Context, json: bool, result: T, show: Callable[[T], None]) -> None:
    if json or _state(ctx).json:
        render.print_json(result)
    else:
        show(result)


def _fail(message: str, code: int) -> NoReturn:
    render.error(message)
    raise typer.Exit(code)


def _guarded(action: Callable[[], T]) -> T:
    """Run `action`; the failures a user can act on become one stderr line and an exit code."""
    try:
        return action()
    except ValidationError as exc:
        _fail(render.describe(exc), USAGE_ERROR)
    except (ConfigError, UnknownBackend) as exc:
        _fail(str(exc), USAGE_ERROR)
    except InvalidRequest as exc:
        _fail(f"invalid input: {exc}", USAGE_ERROR)
    except ValueError as exc:  # parse errors of options the models do not cover (--since)
        _fail(str(exc), USAGE_ERROR)
    except (TraceNotFound, OutboxError) as exc:
        _fail(str(exc), FAILURE)
    except BackendError as exc:
        _fail(f"memory store error: {exc}", FAILURE)


def _fresh_demo_dir(path: Path) -> None:
    """Wipe an earlier demo dir and make a new one; never wipe a directory we did not make."""
    if path.exists():
        if not (path / DEMO_MARKER).is_file() and (not path.is_dir() or any(path.iterdir())):
            raise ConfigError(
                f"refusing to wipe {path}: not empty and not made by `orchestrator demo`"
            )
        shutil.rmtree(path)
    path.mkdir(parents=True)
    (path / DEMO_MARKER).write_text("made by `orchestrator demo`; safe to delete\n")

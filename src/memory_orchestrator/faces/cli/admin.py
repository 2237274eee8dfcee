"""The CLI's housekeeping commands: serving, the outbox, tokens, settings, stores, stats and
the demo. Each is one service call (or one read that starts no store) and its rendering."""

from __future__ import annotations

import shutil
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from memory_orchestrator import service
from memory_orchestrator.errors import ConfigError
from memory_orchestrator.faces.cli import render
from memory_orchestrator.faces.cli.common import (
    FAILURE,
    JsonFlag,
    call_service,
    fail,
    guarded,
    say_if_lexical_only,
    show,
    state_of,
    validate,
)
from memory_orchestrator.faces.cli.config_toml import effective_values, settings_toml
from memory_orchestrator.models import ContextPackage, ContextRequest
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.state import observability
from memory_orchestrator.state import shared as shared_state
from memory_orchestrator.state import tokens as auth

DEMO_MARKER = ".orchestrator-demo"


class Transport(StrEnum):
    STDIO = "stdio"
    HTTP = "http"


class StatsFormat(StrEnum):
    TABLE = "table"
    JSON = "json"


# Plain help (`rich_markup_mode=None`, as in `app`): rich markup ate "[http]" in option help.
config_app = typer.Typer(
    help="Inspect the effective settings.", no_args_is_help=True, rich_markup_mode=None
)
outbox_app = typer.Typer(
    help="Writes the store could not take yet (the durable outbox).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
token_app = typer.Typer(
    help="Bearer tokens for the HTTP transport.", no_args_is_help=True, rich_markup_mode=None
)


@outbox_app.command("list")
def outbox_list(
    ctx: typer.Context,
    all_: Annotated[
        bool, typer.Option("--all", help="Also the writes already replayed (newest kept).")
    ] = False,
    json: JsonFlag = False,
) -> None:
    """Show queued writes, oldest first, with why they wait. Starts no store."""
    settings = guarded(state_of(ctx).settings)

    report = guarded(lambda: service.queued_writes(settings, delivered=all_))
    show(ctx, json, report, render.outbox_report)


@outbox_app.command("flush")
def outbox_flush(ctx: typer.Context, json: JsonFlag = False) -> None:
    """Replay queued writes to the store now, in order. Exit code 1 when some still wait."""
    result = call_service(ctx, lambda o: o.flush_outbox(), creates=True)
    show(ctx, json, result, render.outbox_report)
    if result.depth:
        raise typer.Exit(FAILURE)


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
    in_process: Annotated[
        bool,
        typer.Option(
            "--in-process",
            help="stdio: serve in this process, not through the shared process of these settings.",
        ),
    ] = False,
) -> None:
    """Serve the memory tools over MCP: stdio (through the shared process of these settings,
    started when none runs), or streamable HTTP (loopback, bearer tokens)."""
    from memory_orchestrator.faces.mcp import server as mcp_server

    state = state_of(ctx)
    settings = guarded(state.settings)
    notes = []
    if transport is Transport.STDIO:
        reason = "--in-process" if in_process else None
        if not in_process:  # as `faces.launch` serves `orchestrator serve` before Typer loads
            from memory_orchestrator.faces.shared.address import Inputs
            from memory_orchestrator.faces.shared.relay import relay_main

            def text(value: Path | None) -> str | None:
                return None if value is None else str(value)

            outcome = relay_main(Inputs(text(state.config), state.backend, text(state.data_dir)))
            if isinstance(outcome, int):
                raise typer.Exit(outcome)
            reason = outcome
        notes.append(mcp_server.not_shared(reason))
    mode: Literal["stdio", "streamable-http"] = (
        "stdio" if transport is Transport.STDIO else "streamable-http"
    )
    try:
        guarded(
            lambda: mcp_server.run(
                settings,
                mode,
                host=host,
                port=port,
                insecure_no_auth=insecure_no_auth,
                notes=notes,
            )
        )
    except OSError as exc:  # the HTTP port in use, or an address this host does not have
        if mode == "stdio":
            raise
        where = f"{host or settings.http.host}:{settings.http.port if port is None else port}"
        fail(f"cannot serve on {where}: {exc.strerror or exc}", FAILURE)


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
    shared: Annotated[
        bool,
        typer.Option(
            "--shared", help='Also add it to the shared token list ([shared] state = "postgres").'
        ),
    ] = False,
    json: JsonFlag = False,
) -> None:
    """Make a bearer token: prints the secret once and the config entry holding its hash."""
    secret = auth.new_secret()
    spec = validate(
        auth.TokenSpec,
        name=name,
        hash=auth.hash_token(secret),
        tools=tools or None,
        stores=stores or None,
        read_only=read_only,
    )
    if shared:  # every replica accepts it without a config change
        settings = guarded(state_of(ctx).settings)
        guarded(lambda: shared_state.add_shared_token(settings, spec))
    document = {"name": spec.name, "secret": secret, "hash": spec.hash, "toml": spec.toml()}
    show(ctx, json, document, lambda _: render.new_token(spec.name, secret, spec.toml()))


@token_app.command("revoke")
def token_revoke(
    ctx: typer.Context,
    name: Annotated[str, typer.Option("--name", help="The token to revoke.")],
    json: JsonFlag = False,
) -> None:
    """Remove a token from the shared token list and end its sessions: no replica accepts it
    after a few seconds (its sessions at once). Exit code 1 when no shared token has that name
    (a token in a config file is revoked by deleting its [[http.tokens]] entry and restarting)."""
    settings = guarded(state_of(ctx).settings)
    removed, ended = guarded(lambda: shared_state.revoke_shared_token(settings, name))
    in_config = any(token.name == name for token in settings.http.tokens)
    document = {"name": name, "revoked": removed, "sessions_ended": ended, "in_config": in_config}
    refresh = shared_state.TOKENS_REFRESH_S
    show(ctx, json, document, lambda _: _print_revoked(name, removed, ended, in_config, refresh))
    if not removed:
        raise typer.Exit(FAILURE)


def _print_revoked(name: str, removed: bool, ended: int, in_config: bool, refresh: float) -> None:
    if removed:
        render.note(
            f"revoked {name!r}: every replica refuses it within {refresh:g} s; {ended} open"
            " session(s) ended"
        )
    else:
        render.note(f"no shared token is named {name!r}")
    if in_config:
        render.note(f"{name!r} is also in this config file: delete its [[http.tokens]] entry")


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
    settings = guarded(state_of(ctx).settings)
    start = guarded(lambda: observability.parse_since(since)) if since else None
    report = guarded(lambda: service.request_stats(settings, start))
    show(ctx, output is StatsFormat.JSON, report, render.stats_report)


@config_app.command("show")
def config_show(ctx: typer.Context, json: JsonFlag = False) -> None:
    """Print the effective settings (flags > env > TOML file > defaults)."""
    values = effective_values(guarded(state_of(ctx).settings))
    show(ctx, json, values, _print_toml)


def _print_toml(values: dict[str, Any]) -> None:
    sys.stdout.write(settings_toml(values))


def list_backends(ctx: typer.Context, json: JsonFlag = False) -> None:
    """List the memory stores that can be chosen with --backend (* = selected)."""
    selected = guarded(state_of(ctx).settings).backend
    names = service.store_names()
    document = {"backends": names, "selected": selected}
    show(ctx, json, document, lambda _: render.backends(names, selected))


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

    state = state_of(ctx)
    folder = data_dir or state.data_dir or Path("demo-data")
    request = validate(
        ContextRequest,
        query=query or sample.DEFAULT_QUERY,
        task=None if query else sample.DEFAULT_TASK,
    )
    settings = guarded(state.settings)
    guarded(lambda: _fresh_demo_dir(folder))
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

    result = call_service(ctx, load_and_ask, settings, creates=True)
    show(ctx, json, result, lambda r: render.context_package(r, state_of(ctx).verbose))
    say_if_lexical_only(settings)


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

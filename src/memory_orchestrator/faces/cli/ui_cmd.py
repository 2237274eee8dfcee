"""`orchestrator ui`: the memory inspector in the browser (the `faces.ui` face, loaded here
lazily so that other commands never import the web stack)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memory_orchestrator.faces.cli.common import FAILURE, fail, guarded, require_store, state_of


def ui(
    ctx: typer.Context,
    port: Annotated[
        int, typer.Option("--port", "-p", help="Port; 0 picks a free one.", min=0, max=65535)
    ] = 8766,
    host: Annotated[
        str,
        typer.Option("--host", help="Bind address. Off loopback a bearer token is asked for."),
    ] = "127.0.0.1",
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Where the store keeps its files.")
    ] = None,
    eval_dir: Annotated[
        Path | None,
        typer.Option(
            "--eval-dir", help="An `eval --out` folder to show on /eval.", file_okay=False
        ),
    ] = None,
    token_required: Annotated[
        bool,
        typer.Option("--token-required", help="Ask for a bearer token on loopback too."),
    ] = False,
) -> None:
    """Open the memory inspector: memories, requests, graph, health, eval (prints the URL)."""
    from memory_orchestrator.faces.ui.app import serve

    state = state_of(ctx)
    if data_dir is not None:
        state = type(state)(state.config, state.backend, data_dir, state.json, state.verbose)
    settings = guarded(state.settings)
    require_store(settings)
    if eval_dir is not None and not eval_dir.is_dir():
        fail(f"no eval folder at {eval_dir}: run `orchestrator eval --out {eval_dir}` first", 2)
    try:
        guarded(
            lambda: serve(
                settings,
                host=host,
                port=port,
                token_required=token_required,
                eval_dir=eval_dir.resolve() if eval_dir else None,
            )
        )
    except OSError as exc:
        fail(f"cannot serve on {host}:{port}: {exc.strerror or exc}", FAILURE)

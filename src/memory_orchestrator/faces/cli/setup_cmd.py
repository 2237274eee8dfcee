"""`orchestrator setup <client>`: memory in Claude Code, Codex or Cursor in one step (the MCP
server entry, with `--hooks` the lifecycle hooks, and the guideline in the rules file), merged
into the client's own files and taken out again by `--undo` (`faces/setup/`)."""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path
from typing import Annotated

import tomlkit
import typer

from memory_orchestrator.faces.cli import render
from memory_orchestrator.faces.cli.common import USAGE_ERROR, fail, guarded, state_of
from memory_orchestrator.faces.hook import DEFAULT_BUDGET_MS, DEFAULT_TOKENS
from memory_orchestrator.faces.setup import files
from memory_orchestrator.faces.setup.clients import (
    CLIENTS,
    Launch,
    Plan,
    Scope,
    launch_of,
    plan,
    server_entry,
)
from memory_orchestrator.faces.setup.parts import GUIDELINE
from memory_orchestrator.faces.shared.project import AUTO, project_root
from memory_orchestrator.settings import Settings

_OWN_FOLDERS = {".claude", ".codex", ".cursor", "rules"}
_SAID = {
    "written": "added {what} to {path}",
    "unchanged": "{path}: {what} already there, unchanged",
    "restored": "{path}: restored as it was before setup",
    "removed": "{path}: removed (setup made it)",
    "cleaned": "{path}: took {what} out (the file changed since setup: the rest kept)",
    "absent": "{path}: not there",
}


def setup(
    ctx: typer.Context,
    client: Annotated[
        str | None,
        typer.Argument(help="claude-code, codex or cursor (with --print: any other MCP client)."),
    ] = None,
    scope: Annotated[
        str,
        typer.Option(
            "--scope", help="project: this project's files; user: yours, for every project."
        ),
    ] = "project",
    hooks: Annotated[
        bool,
        typer.Option("--hooks", help="Also install the lifecycle hooks (`orchestrator hook`)."),
    ] = False,
    print_entry: Annotated[
        bool, typer.Option("--print", help="Print the MCP server entry; change nothing.")
    ] = False,
    print_rules: Annotated[
        bool, typer.Option("--print-rules", help="Print the guideline; change nothing.")
    ] = False,
    undo: Annotated[
        bool, typer.Option("--undo", help="Take out what setup added (hooks included).")
    ] = False,
    name: Annotated[str, typer.Option("--name", help="The MCP server's name.")] = "memory",
    root: Annotated[
        Path | None,
        typer.Option(
            "--root",
            help="The project (default: the nearest .git upward, else here).",
            file_okay=False,
        ),
    ] = None,
    models: Annotated[
        bool,
        typer.Option("--models", help="Install the semantic model now when it is missing."),
    ] = False,
) -> None:
    """Connect an agent to the memory of the project it works in: write the MCP server entry
    into the client's own config (merged with what is there; one backup beside each file
    changed), with --hooks the lifecycle hooks (a primer at session start, the context for
    each prompt within 1 s, a reminder to write before compaction), and a short guideline on
    when to recall and when to write into the client's rules file, between marked lines.
    Running it again changes nothing; --undo takes out exactly what it added."""
    state = state_of(ctx)
    launch = launch_of()
    options = _root_options(state.config, state.backend)
    if print_rules:
        typer.echo(GUIDELINE, nl=False)
        return
    if print_entry:
        _print_entry(client, launch, options, name)
        return
    if client not in CLIENTS or scope not in ("project", "user"):
        fail(f"name a client ({', '.join(CLIENTS)}) and a --scope (project, user)", USAGE_ERROR)
    where = root.resolve() if root is not None else Path(project_root(AUTO, {}, os.getcwd()))
    kind: Scope = "user" if scope == "user" else "project"
    chosen = plan(client, kind, where, launch, name=name, hooks=hooks or undo, root_options=options)
    _carry_out(chosen, undo=undo)
    if not undo:
        _models(guarded(state.settings), install=models)


def _carry_out(chosen: Plan, *, undo: bool) -> None:
    for edit in chosen.edits:
        outcome = guarded(partial(files.undo if undo else files.apply, edit))
        render.note(_SAID[outcome].format(what=edit.what, path=edit.path))
        if outcome == "removed":
            _remove_empty(edit.path.parent)
    for step in [] if undo else chosen.steps:
        render.note(f"next: {step}")


def _remove_empty(folder: Path) -> None:
    """The clients' folders setup made for a file it removed, when nothing else is in them."""
    while folder.name in _OWN_FOLDERS:
        try:
            folder.rmdir()
        except OSError:  # not empty (or not ours to remove)
            return
        folder = folder.parent


def _root_options(config: Path | None, backend: str | None) -> tuple[str, ...]:
    out: tuple[str, ...] = ()
    if config is not None:
        out += ("--config", str(config.resolve()))
    if backend is not None:
        out += ("--backend", backend)
    return out


def _print_entry(client: str | None, launch: Launch, options: tuple[str, ...], name: str) -> None:
    entry = server_entry(launch, client or "any", options)
    if client == "codex":
        document = tomlkit.document()
        servers = tomlkit.table(is_super_table=True)
        servers[name] = entry
        document["mcp_servers"] = servers
        typer.echo(tomlkit.dumps(document), nl=False)
    else:
        typer.echo(json.dumps({"mcpServers": {name: entry}}, indent=2))


def _models(settings: Settings, *, install: bool) -> None:
    """Say how search will run: the semantic model missing is one command away."""
    from memory_orchestrator.derived.embedders import lexical_only

    sem = settings.semantic
    missing = lexical_only(sem.enabled, sem.model, model_dir=sem.model_dir, data_dir=None)
    if missing is None:
        return
    if not install:
        render.note(f"next: {missing} (or setup --models)")
        return
    from memory_orchestrator.derived import model_install

    folder = sem.model_dir or model_install.default_model_dir()
    done = guarded(lambda: model_install.install(folder))
    render.note(f"installed the semantic model in {done.folder}")


def hook(
    ctx: typer.Context,
    event: Annotated[str, typer.Argument(help="session-start, prompt, pre-compact or stop.")],
    client: Annotated[str, typer.Option("--client", help="claude-code, codex or cursor.")],
    budget_ms: Annotated[
        int, typer.Option("--budget-ms", help="The time budget from the start (at most 1000).")
    ] = DEFAULT_BUDGET_MS,
    tokens: Annotated[
        int, typer.Option("--tokens", help="The context block's budget, in tokens.")
    ] = DEFAULT_TOKENS,
    project: Annotated[
        str, typer.Option("--project", help="The project: auto (from the payload) or a path.")
    ] = AUTO,
) -> None:
    """What an agent's lifecycle hooks run (`setup --hooks` installs them): read the client's
    JSON on stdin, answer in its format on stdout; ask the project's shared process within
    the time budget, else add nothing (and say why in hooks.log). The console script runs
    this before the command line loads (standard library only)."""
    from memory_orchestrator.faces.hook import main

    state = state_of(ctx)
    args = [event, "--client", client, "--budget-ms", str(budget_ms), "--tokens", str(tokens)]
    args += ["--project", project, *_root_options(state.config, state.backend)]
    if state.data_dir is not None:
        args += ["--data-dir", str(state.data_dir)]
    raise typer.Exit(main(args))

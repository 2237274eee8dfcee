"""`orchestrator import PATH`: another source's memories through the write path, with a
progress bar on stderr and a summary (added / updated / skipped / refused, each with why).
A thin command over `transfer.sources` (reading) and `service.importing` (writing)."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from memory_orchestrator.faces.cli import render
from memory_orchestrator.faces.cli.common import (
    FAILURE,
    JsonFlag,
    call_service,
    fail,
    guarded,
    state_of,
)
from memory_orchestrator.faces.cli.transfer_cmd import bars
from memory_orchestrator.service.importing import ImportSummary, quiet_settings
from memory_orchestrator.state.imports import Ledger
from memory_orchestrator.transfer.sources import read_source

__all__ = ["import_memories"]

LEDGER = "imports.db"
_SHOWN = 4  # reasons shown per action


class ImportFormat(StrEnum):
    JSONL = "jsonl"
    MARKDOWN = "markdown"
    MNEMON = "mnemon"
    TRANSCRIPT = "transcript"


def import_memories(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="A file or a folder of notes.")],
    fmt: Annotated[
        ImportFormat | None,
        typer.Option("--format", help="Say the format when its name does not tell it."),
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Bring memories in, each judged as `memory_write` judges it; twice adds nothing.

    Reads memories as JSON Lines, a folder of markdown notes with frontmatter (Mnemonic,
    basic-memory), a Mnemon store's SQLite file, or a chat transcript (LoCoMo's JSON, or
    turns as JSON / JSON Lines). Exit code 1 when the store failed before the end.
    """
    settings = quiet_settings(guarded(state_of(ctx).settings))
    chosen, incoming = guarded(lambda: read_source(path, fmt.value if fmt else None))
    if not incoming:
        fail(f"{path}: no records to import", 2)
    ledger = guarded(lambda: Ledger(settings.data_dir / LEDGER))
    summary = ImportSummary(str(path), chosen, len(incoming))
    try:
        with bars() as progress:
            done = call_service(
                ctx,
                lambda o: o.transfer().bring_in(incoming, summary, ledger, progress),
                settings,
                creates=True,
            )
    finally:
        ledger.close()
    if json_out or state_of(ctx).json:
        sys.stdout.write(json.dumps(asdict(done), indent=2) + "\n")
    else:
        _print(done)
    if done.stopped is not None:
        render.error(f"{done.stopped}; run the import again to go on (what is in is skipped)")
        raise typer.Exit(FAILURE)


def _print(summary: ImportSummary) -> None:
    counts = summary.counts
    parts = [f"{counts.get(a, 0)} {a}" for a in ("added", "updated", "skipped", "refused")]
    rate = len(summary.items) / summary.seconds if summary.seconds else 0.0
    render.note(
        f"imported {summary.source} ({summary.format}, {summary.records} records) in"
        f" {summary.seconds:.1f} s ({rate:.0f}/s): {', '.join(parts)}"
    )
    first: dict[tuple[str, str], str] = {}
    for item in summary.items:
        first.setdefault((item.action, item.why), item.where)
    for action in ("updated", "skipped", "refused"):
        reasons = sorted(summary.why.get(action, {}).items(), key=lambda kv: -kv[1])
        for why, count in reasons[:_SHOWN]:
            render.note(f"  {action} {count}: {why} (first: {first[action, why]})")
        if len(reasons) > _SHOWN:
            render.note(f"  {action}: {len(reasons) - _SHOWN} more reasons (--json lists all)")

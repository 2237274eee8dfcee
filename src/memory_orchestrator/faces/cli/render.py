"""How the CLI shows results: rich tables and panels for people, one JSON document for tools.

Nothing here calls the service; every function takes a finished record and prints it.
Memory text goes through `Text` so brackets in it are never read as rich markup, and through
`visible` so control characters a memory holds (an escape sequence, a bidi override) are shown
as escapes instead of driving the terminal.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime

from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from memory_orchestrator.models import (
    ContextItem,
    ContextPackage,
    Explanation,
    ForgetReport,
    HealthReport,
    OutboxReport,
    ReplayReport,
    SearchResult,
    Status,
    TimeRange,
    TraceSummary,
    WriteAction,
    WriteReport,
    describe_errors,
)
from memory_orchestrator.pipeline.explainer import drop_line
from memory_orchestrator.state.forgotten import Tombstone
from memory_orchestrator.state.observability import StatsReport

_STATUS_STYLE = {Status.OK: "green", Status.DEGRADED: "yellow", Status.ERROR: "red"}
_ACTION_STYLE = {
    WriteAction.ADDED: "green",
    WriteAction.UPDATED: "cyan",
    WriteAction.SKIPPED: "yellow",
    WriteAction.QUEUED: "blue",
}


# C0 controls but tab and newline, DEL, C1 controls, and the bidi embeddings/overrides/isolates.
_CONTROLS = [*range(0x09), 0x0B, 0x0C, *range(0x0D, 0x20), *range(0x7F, 0xA0)]
_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_VISIBLE = {c: f"\\x{c:02x}" for c in _CONTROLS} | {c: f"\\u{c:04x}" for c in _BIDI}


def visible(text: str) -> str:
    """`text` with control characters written as escapes (`\\x1b`), tabs and newlines kept."""
    return text.translate(_VISIBLE)


def _text(text: str, style: str = "") -> Text:
    return Text(visible(text), style=style)


def _out() -> Console:
    # Built per call: the console then writes to whatever sys.stdout is now (tests swap it).
    return Console(highlight=False)


def _err() -> Console:
    return Console(stderr=True, highlight=False)


# ---------------------------------------------------------------- machine output and messages


def print_json(value: object) -> None:
    """Print exactly one JSON document on stdout."""
    if isinstance(value, BaseModel):
        text = value.model_dump_json(indent=2)
    else:
        text = json.dumps(value, indent=2, default=str)
    sys.stdout.write(text + "\n")


def error(message: str) -> None:
    """One line on stderr: what went wrong, without a traceback."""
    line = visible(" ".join(message.split()))
    _err().print(Text.assemble(("error: ", "bold red"), line), soft_wrap=True)


def note(message: str) -> None:
    """A status line on stderr, so stdout stays clean for `--json`."""
    _err().print(_text(message, style="dim"), soft_wrap=True)


def describe(exc: ValidationError) -> str:
    return "invalid input: " + describe_errors(exc)


# ---------------------------------------------------------------- results


def search_result(result: SearchResult, verbose: bool = False) -> None:
    console = _out()
    if result.warning:  # the store itself could not be searched: said first
        console.print(_text(result.warning, style="bold yellow"))
    title = f"{len(result.items)} memories for {result.query!r} ({result.strategy})"
    if result.passthrough:
        title += " - raw store ranking"
    console.print(_items_table(result.items, title, verbose))
    console.print(_text(result.summary))
    _trace_footer(console, result.trace_id, result.trace, verbose)


def context_package(package: ContextPackage, verbose: bool = False) -> None:
    console = _out()
    title = f"context for {package.query!r} ({package.strategy})"
    if package.task:
        title += f" - task: {visible(package.task)}"
    console.print(_items_table(package.items, title, verbose))
    facts = []
    if package.linked_entities:
        facts.append("entities: " + ", ".join(package.linked_entities))
    if package.time_span is not None:
        facts.append("time span: " + _span(package.time_span))
    if facts:
        console.print(_text("  ".join(facts), style="dim"))
    console.print(Panel(_text(package.context_block), title="context block", expand=False))
    _trace_footer(console, package.trace_id, package.trace, verbose)


def write_report(report: WriteReport) -> None:
    console = _out()
    head = Text.assemble(
        (str(report.action), f"bold {_ACTION_STYLE.get(report.action, '')}"),
        " ",
        report.id or (f"outbox #{report.outbox_seq}" if report.outbox_seq else "(no id)"),
        " (dry run: nothing written)" if report.dry_run else "",
    )
    console.print(head)
    console.print(_text(report.reason))
    similarity = "" if report.similarity is None else f" (similarity {report.similarity:.2f})"
    if report.supersedes:
        console.print(_text(f"supersedes {report.supersedes}{similarity}: {report.changed}"))
    elif report.duplicate_of:
        console.print(_text(f"duplicate of {report.duplicate_of}{similarity}"))
    for edge in report.links:
        console.print(
            _text(f"linked {edge.source_id} -[{edge.type} {edge.weight:.2f}]-> {edge.target_id}")
        )
    console.print(_text(f"trace {report.trace_id}", style="dim"))


def explanation(result: Explanation, verbose: bool = False) -> None:
    console = _out()
    trace = result.trace
    title = f"trace {trace.trace_id} - {trace.tool} on {trace.backend}"
    console.print(Panel(_text(result.text), title=title, expand=False))
    if not verbose:
        return
    table = Table(title="candidates", show_lines=False)
    for column in ("rank", "id", "total", "relevance", "recency", "graph", "type", "hops"):
        table.add_column(column, justify="right" if column != "id" else "left")
    ranked = sorted(trace.candidates, key=lambda c: (c.final_rank is None, c.final_rank or 0))
    for cand in ranked:
        b = cand.breakdown
        scores = (
            [f"{b.total:.3f}", f"{b.relevance:.2f}", f"{b.recency:.2f}", f"{b.graph:.2f}"]
            if b
            else ["-"] * 4
        )
        type_match = f"{b.type_match:.2f}" if b else "-"
        rank = str(cand.final_rank) if cand.final_rank is not None else "-"
        table.add_row(rank, _text(cand.id), *scores, type_match, str(cand.hops))
    console.print(table)
    for drop in trace.dropped:
        console.print(_text(f"dropped {drop_line(drop)}"))


def health_report(report: HealthReport) -> None:
    console = _out()
    style = _STATUS_STYLE.get(report.status, "")
    console.print(Text.assemble(("health: ", "bold"), (str(report.status), f"bold {style}")))
    table = Table(title=f"backend {report.backend}")
    for column in ("check", "status", "latency ms", "detail"):
        table.add_column(column)
    for check in report.checks:
        latency = "" if check.latency_ms is None else f"{check.latency_ms:.1f}"
        status = _text(str(check.status), style=_STATUS_STYLE.get(check.status, ""))
        table.add_row(_text(check.name), status, latency, _text(check.detail))
    console.print(table)
    caps = report.capabilities.model_dump()
    on = [name for name, value in caps.items() if value is True]
    off = [name for name, value in caps.items() if value is False]
    console.print(_text(f"can: {', '.join(on) or '-'}; cannot: {', '.join(off) or '-'}"))
    if report.capabilities.edge_types:
        console.print(_text("edge types: " + ", ".join(report.capabilities.edge_types)))


def replay_report(report: ReplayReport) -> None:
    console = _out()
    verdict = "identical" if report.identical else "changed"
    console.print(
        _text(f"replayed {report.trace_id} as {report.new_trace_id}: {verdict}", style="bold")
    )
    for label, ids in (
        ("added", report.added),
        ("removed", report.removed),
        ("moved", report.moved),
        ("before", report.before),
        ("after", report.after),
    ):
        if ids:
            console.print(_text(f"{label}: {', '.join(ids)}"))


def forget_report(report: ForgetReport) -> None:
    console = _out()
    console.print(_text(report.summary, style="bold"))
    for label, ids in (
        (str(report.action), report.done),
        ("unchanged", report.unchanged),
        ("not found", report.not_found),
        ("refused", report.refused),
    ):
        if ids:
            console.print(_text(f"{label}: {', '.join(ids)}"))
    console.print(_text(f"trace {report.trace_id}", style="dim"))


def forgotten_list(stones: Sequence[Tombstone]) -> None:
    table = Table(title=f"{len(stones)} forgotten memories (oldest first)")
    for column in ("id", "forgotten", "store", "reason", "purged"):
        table.add_column(column)
    for t in stones:
        purged = _when(t.purged_at) if t.purged_at else "-"
        table.add_row(_text(t.memory_id), _when(t.forgotten_at), t.store, _text(t.reason), purged)
    _out().print(table)


def new_token(name: str, secret: str, toml: str) -> None:
    console = _out()
    console.print(
        _text(f"# secret for {name!r}, shown once; clients send it as 'Authorization: Bearer …'")
    )
    console.print(_text(secret), soft_wrap=True)
    console.print(_text("\n# add to orchestrator.toml (only the hash is kept):"))
    console.print(_text(toml.rstrip("\n")), soft_wrap=True)


def stats_report(report: StatsReport) -> None:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    title = f"requests since {report.since}" if report.since else "requests (all kept traces)"
    table = Table(title=title)
    for column in ("tool", "count", "errors", "error rate", "p50 ms", "p95 ms", "p99 ms"):
        table.add_column(column, justify="left" if column == "tool" else "right")
    table.add_column("avg candidates", justify="right")
    table.add_column("dedup ratio", justify="right")
    for row in (*report.tools, report.total):
        table.add_row(
            row.tool,
            str(row.count),
            str(row.errors),
            f"{row.error_rate:.1%}",
            ms(row.p50_ms),
            ms(row.p95_ms),
            ms(row.p99_ms),
            f"{row.avg_candidates:.1f}",
            f"{row.dedup_ratio:.1%}",
        )
    _out().print(table)


def backends(names: Iterable[str], selected: str) -> None:
    console = _out()
    for name in names:
        marker = "*" if name == selected else " "
        console.print(_text(f"{marker} {name}"))


# ---------------------------------------------------------------- helpers


def _items_table(items: Sequence[ContextItem], title: str, verbose: bool) -> Table:
    # Reasons sit under the summary (dim) so the table stays readable at 80 columns.
    table = Table(title=title, title_justify="left", show_lines=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("id", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("type", no_wrap=True)
    table.add_column("time", no_wrap=True)
    table.add_column("summary / reasons")
    for rank, item in enumerate(items, start=1):
        cell = _text(item.summary)
        if item.changed:
            cell.append("\n" + item.changed, style="yellow")
        reasons = item.reasons if verbose else item.reasons[:3]
        if reasons:
            cell.append("\n" + "; ".join(reasons), style="dim")
        if verbose and item.breakdown is not None:
            b = item.breakdown
            cell.append(
                f"\nrelevance {b.relevance:.2f}  recency {b.recency:.2f}  graph {b.graph:.2f}"
                f"  type {b.type_match:.2f}  cross-ref {b.cross_reference:.2f}",
                style="cyan",
            )
        table.add_row(
            str(rank),
            _text(item.memory_id),
            f"{item.score:.3f}",
            str(item.type),
            _when(item.timestamp, verbose),
            cell,
        )
    return table


def _trace_footer(console: Console, trace_id: str, trace: TraceSummary, verbose: bool) -> None:
    console.print(_text(f"trace {trace_id}", style="dim"))
    if not verbose:
        return
    if trace.subqueries:
        console.print(_text("subqueries: " + " | ".join(trace.subqueries)))
    if trace.expanded_from:
        console.print(_text("expanded from: " + ", ".join(trace.expanded_from)))
    for drop in trace.dropped:
        console.print(_text(f"dropped {drop_line(drop)}"))
    for line in trace.notes:
        console.print(_text(f"note: {line}", style="yellow"))


def _when(moment: datetime | None, precise: bool = True) -> str:
    if moment is None:
        return ""
    return moment.strftime("%Y-%m-%d %H:%M" if precise else "%Y-%m-%d")


def _span(span: TimeRange) -> str:
    return f"{_when(span.start) or '...'} - {_when(span.end) or '...'}"


def outbox_report(report: OutboxReport) -> None:
    """Queued writes, oldest first: what waits, why, and what was replayed."""
    console = _out()
    rows = [*report.delivered, *report.pending]
    if not rows:
        console.print(_text(f"outbox empty{'; ' + report.note if report.note else ''}"))
        return
    table = Table(title=f"outbox: {report.depth} waiting")
    for column in ("#", "state", "queued at", "tries", "memory", "content", "why / last error"):
        table.add_column(column)
    for item in sorted(rows, key=lambda r: r.seq):
        content = " ".join(item.request.memory.content.split())
        done = item.delivered_at
        why = f"delivered {done:%Y-%m-%d %H:%M:%S}" if done else item.last_error or item.reason
        table.add_row(
            str(item.seq),
            _text(str(item.state), style="green" if item.memory_id else "yellow"),
            f"{item.queued_at:%Y-%m-%d %H:%M:%S}",
            str(item.attempts),
            _text(item.memory_id or "-"),
            _text(content[:60] + ("..." if len(content) > 60 else "")),
            _text(why),
        )
    console.print(table)
    if report.note:
        console.print(_text(report.note, style="dim"))

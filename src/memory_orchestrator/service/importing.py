"""`orchestrator import`: records of another source (`transfer.sources`) written one by one
through the write path of `memory_write` (`WritePath`: limits, restatements skipped,
corrections marked, related memories linked), in one process.

Idempotent through the import ledger (`state.imports`): a record an earlier import brought
in, whose memory the store still holds, is skipped before anything is asked of the store;
so is a record the same source gives twice. A record that cannot be a memory is refused with
the reason, and the import goes on; a store that fails stops it (what was done is kept, and
running it again goes on where it stopped).

The import leaves one trace (tool `import`: the source, the counts and the reasons), not one
per write: thousands would push the requests people look at out of the kept traces, and what
became of each record is in the summary. Run with `quiet_settings`: no outbox (a store that
fails stops the import instead of queueing the rest).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.errors import BackendError, InvalidRequest, OutboxError, describe
from memory_orchestrator.models import (
    EventKind,
    Stage,
    ToolName,
    Trace,
    TraceEvent,
    WriteAction,
    WriteReport,
    WriteRequest,
    event,
)
from memory_orchestrator.service.writing import WritePath
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.imports import Ledger
from memory_orchestrator.transfer.sources import Incoming

Outcome = Literal["added", "updated", "skipped", "refused"]
Progress = Callable[[str, int, int | None], None]
_CHUNK = 500  # ids per lookup of what earlier imports brought in
_RECORD_EVERY = 200  # ledger rows committed together
_TRACE_REASONS = 10  # reasons per action in the import's trace (the summary has them all)


@dataclass(frozen=True)
class ImportedItem:
    """What became of one record: where it came from, what was done, why, and the memory."""

    where: str
    action: Outcome
    why: str
    reason: str
    id: str | None = None


@dataclass
class ImportSummary:
    """What an import did: counts per action, each with its reasons counted (`why`), and
    every record's outcome (`items`). `stopped` says why it ended before the last record."""

    source: str
    format: str
    records: int
    counts: dict[str, int] = field(default_factory=dict)
    why: dict[str, dict[str, int]] = field(default_factory=dict)
    items: list[ImportedItem] = field(default_factory=list)
    seconds: float = 0.0  # wall time of the loop over the records
    cpu_seconds: float = 0.0  # this process's CPU time over it (all threads)
    stopped: str | None = None

    def add(self, item: ImportedItem) -> None:
        self.items.append(item)
        self.counts[item.action] = self.counts.get(item.action, 0) + 1
        reasons = self.why.setdefault(item.action, {})
        reasons[item.why] = reasons.get(item.why, 0) + 1


def quiet_settings(settings: Settings) -> Settings:
    """`settings` for an import (see the module docstring)."""
    return settings.model_copy(
        update={"outbox": settings.outbox.model_copy(update={"enabled": False})}
    )


class Importer:
    """Runs `Incoming` records through the write path (see the module docstring)."""

    def __init__(self, writes: WritePath, store: MemoryBackend, ledger: Ledger) -> None:
        self._writes, self._store, self._ledger = writes, store, ledger

    async def run(
        self,
        incoming: Sequence[Incoming],
        summary: ImportSummary,
        progress: Progress,
    ) -> ImportSummary:
        started, cpu = time.perf_counter(), time.process_time()
        asked = {"source": summary.source, "format": summary.format, "records": len(incoming)}
        trace = self._writes.begin_many(ToolName.IMPORT, asked)
        try:
            await self._each(incoming, summary, progress, trace)
        finally:
            summary.seconds = round(time.perf_counter() - started, 3)
            summary.cpu_seconds = round(time.process_time() - cpu, 3)
            trace.add(*_told(summary))
            trace.error = summary.stopped
            self._writes.finish_many(trace, started)
        return summary

    async def _each(
        self,
        incoming: Sequence[Incoming],
        summary: ImportSummary,
        progress: Progress,
        trace: Trace,
    ) -> None:
        before = await self._imported_before([i.key for i in incoming])
        done: dict[str, str] = {}  # key -> where, for a record the source gives twice
        rows: list[tuple[str, str, str]] = []
        progress("import", 0, len(incoming))
        for number, item in enumerate(incoming, start=1):
            outcome = self._known(item, before, done)
            if outcome is None and item.memory is not None:
                try:
                    report = await self._writes.write_one(WriteRequest(memory=item.memory), trace)
                except InvalidRequest as exc:
                    outcome = ImportedItem(item.where, "refused", str(exc), str(exc))
                except (BackendError, OutboxError, TimeoutError) as exc:
                    summary.stopped = f"the store failed at {item.where}: {describe(exc)}"
                    break
                else:
                    outcome = _written(item.where, report)
                    if outcome.id is not None:
                        rows.append((item.key, outcome.id, outcome.action))
            done.setdefault(item.key, item.where)
            summary.add(outcome or _not_written(item))
            if len(rows) >= _RECORD_EVERY:
                self._ledger.record(rows, summary.source)
                rows.clear()
            progress("import", number, len(incoming))
        self._ledger.record(rows, summary.source)

    async def _imported_before(self, keys: Sequence[str]) -> dict[str, str]:
        """key -> memory id, for the keys an earlier import recorded whose memory the store
        still holds."""
        seen = self._ledger.seen(keys)
        ids = list(dict.fromkeys(memory_id for memory_id, _ in seen.values()))
        live: set[str] = set()
        for start in range(0, len(ids), _CHUNK):
            live.update(m.id for m in await self._store.get_memories(ids[start : start + _CHUNK]))
        return {key: memory_id for key, (memory_id, _) in seen.items() if memory_id in live}

    @staticmethod
    def _known(item: Incoming, before: dict[str, str], done: dict[str, str]) -> ImportedItem | None:
        """The outcome of a record decided without the store: imported before, or given twice."""
        if item.key in before:
            memory_id = before[item.key]
            reason = f"imported before (as {memory_id})"
            return ImportedItem(item.where, "skipped", "imported before", reason, memory_id)
        if item.key in done:
            reason = f"the source gives it twice (first at {done[item.key]})"
            return ImportedItem(item.where, "skipped", "the source gives it twice", reason)
        return None


def _written(where: str, report: WriteReport) -> ImportedItem:
    action = report.action
    if action is WriteAction.ADDED:
        why = "new"
    elif action is WriteAction.UPDATED:
        why = "corrects a stored memory" if report.supersedes else "updates a near-duplicate"
    elif report.duplicate_of is not None and report.similarity is not None:
        why = "restates a stored memory"
    else:
        why = "the store holds its text already"
    done: dict[WriteAction, Outcome] = {WriteAction.ADDED: "added", WriteAction.UPDATED: "updated"}
    return ImportedItem(where, done.get(action, "skipped"), why, report.reason, report.id)


def _told(summary: ImportSummary) -> list[TraceEvent]:
    """What the import's trace says: the counts, then each action's reasons, counted."""
    counts = ", ".join(f"{n} {action}" for action, n in summary.counts.items())
    done = {"done": len(summary.items), "records": summary.records}
    out = [event(Stage.WRITER, EventKind.IMPORTED, **done, counts=counts or "nothing done")]
    for action, reasons in summary.why.items():
        ranked = sorted(reasons.items(), key=lambda kv: -kv[1])
        out.extend(
            event(Stage.WRITER, EventKind.IMPORT_REASON, action=action, count=n, why=why)
            for why, n in ranked[:_TRACE_REASONS]
        )
        if len(ranked) > _TRACE_REASONS:
            other = len(ranked) - _TRACE_REASONS
            out.append(
                event(Stage.WRITER, EventKind.IMPORT_OTHER_REASONS, action=action, count=other)
            )
    return out


def _not_written(item: Incoming) -> ImportedItem:
    if item.skip is not None:
        return ImportedItem(item.where, "skipped", _kind(item.skip), item.skip)
    problem = item.problem or "no memory"
    return ImportedItem(item.where, "refused", _kind(problem), problem)


def _kind(reason: str) -> str:
    """A reason without what is particular to one record (ids, turn ids), so that alike
    reasons are counted together."""
    words = ["#" if _particular(w) else w for w in reason.split()]
    return " ".join(words)[:120]


__all__ = ["ImportSummary", "ImportedItem", "Importer", "quiet_settings"]


def _particular(word: str) -> bool:
    """An id-like word: letters and digits both (`mem_4db03cb1`, `D1:3`)."""
    return any(c.isdigit() for c in word) and any(c.isalpha() for c in word)

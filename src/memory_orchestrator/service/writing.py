"""The write path: limits, the near-duplicate policy, and the outbox that keeps writes the
store could not take.

`WritePath.write` refuses a memory over the configured limits before anything is done, sends
earlier queued writes first (order is kept), then writes through `pipeline.writer`. When the
store cannot take the write now (a timeout, a transient error, or a permanent one its own
health check confirms), the write is queued in the outbox and answered `queued`; it is
delivered exactly once later (`replay`: before a queued write is sent, the store is searched
for its content hash). Both the first try and the replay use one policy builder (`policy`).
`write_one` writes one of many (an import) the same way, without the outbox, counted in one
trace for them all (`begin_many`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio

from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.derived.entities import KnownEntities
from memory_orchestrator.errors import (
    STORE_ERRORS,
    BackendError,
    CapabilityMissing,
    InvalidRequest,
    OrchestratorError,
    OutboxError,
    describe,
)
from memory_orchestrator.models import (
    MAX_LABEL_CHARS,
    MAX_LIST_ITEMS,
    EventKind,
    HealthCheck,
    NewMemory,
    OutboxReport,
    QueuedWrite,
    Stage,
    Status,
    ToolName,
    Trace,
    TraceEvent,
    WriteAction,
    WriteReport,
    WriteRequest,
    event,
    render,
)
from memory_orchestrator.pipeline.conflicts import SameMeaning
from memory_orchestrator.pipeline.planner import extract_entities
from memory_orchestrator.pipeline.writer import WritePolicy, Written, write_memory
from memory_orchestrator.service.recorder import TraceRecorder
from memory_orchestrator.service.resilience import find_written
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.outbox import AsyncOutbox, Outbox

# The time one replay of the outbox may take (on a write, a health call or in the
# background): long enough to send a backlog of queued writes to a store that is back, short
# enough that the write or health call it runs in still answers in reasonable time. Part of
# the bound on a tool call (`call_bound_s`).
REPLAY_S = 10.0


def call_bound_s(settings: Settings) -> float:
    """The longest a tool call may take (docs/explanation/reliability.md): four rounds of
    bounded store calls for a read, the outbox's replay plus its own calls for a write."""
    return REPLAY_S + 8 * settings.retrieval.timeout_s


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


class WritePath:
    """Writes through one store, with the outbox behind it."""

    def __init__(
        self,
        store: MemoryBackend,
        outbox: Outbox,
        recorder: TraceRecorder,
        settings: Settings,
        entities: KnownEntities,
        *,
        on_written: Callable[[], None] = lambda: None,
        taken: Callable[[], Awaitable[None]] | None = None,
        meaning: SameMeaning | None = None,
    ) -> None:
        # `settings` is read at each call (its sections: dedup, write, limits, outbox and
        # retrieval's time limit); `entities` gives the names the store knows, for the
        # extraction; `on_written` tells the derived indexes to pull, `taken` has them pull
        # the write and embed it now (the writer waits for a long memory's embedding, not
        # the next reader); `meaning` reads a swapped word as a synonym or not
        # (`pipeline.paraphrase`, the semantic model where it runs).
        self._store, self._recorder = store, recorder
        self._outbox = AsyncOutbox(outbox)  # its calls off the event loop
        self._settings, self._entities = settings, entities
        self._on_written = on_written
        self._taken = taken
        self._meaning = meaning
        self._replaying = False

    def policy(self, request: WriteRequest) -> WritePolicy:
        """The write policy of `request`: the one builder, for first tries and replays."""
        s = self._settings
        return WritePolicy(
            threshold=s.dedup.threshold,
            on_duplicate=request.on_duplicate or s.write.on_duplicate,
            link_related=s.write.link_related if request.link_related else 0,
            timeout_s=s.retrieval.timeout_s,
            dry_run=request.dry_run,
            max_query_chars=s.limits.max_query_chars,
            on_conflict=s.write.on_conflict,
            update_threshold=s.write.update_threshold,
            lookalike_threshold=s.dedup.soft_threshold,
            meaning=self._meaning,
        )

    def check(self, memory: NewMemory) -> None:
        """Reject a memory over the configured limits: one message naming every problem."""
        lim = self._settings.limits
        problems: list[str] = []
        if len(memory.content) > lim.max_write_chars:
            problems.append(
                f"content: {len(memory.content)} characters; the limit is"
                f" {lim.max_write_chars} (limits.max_write_chars)"
            )
        # the schema's caps, again: a caller in Python may grow a list after validation
        for name, values in (("entities", memory.entities), ("tags", memory.tags)):
            if len(values) > MAX_LIST_ITEMS:
                problems.append(f"{name}: {len(values)} values; the limit is {MAX_LIST_ITEMS}")
            if any(len(v) > MAX_LABEL_CHARS for v in values):
                problems.append(f"{name}: a value over {MAX_LABEL_CHARS} characters")
        if memory.source is not None and len(memory.source) > MAX_LABEL_CHARS:
            problems.append(f"source: over {MAX_LABEL_CHARS} characters")
        if problems:
            raise InvalidRequest("; ".join(problems) + "; nothing written")

    async def write(self, request: WriteRequest) -> WriteReport:
        """Raises InvalidRequest, before anything is written, when a limit is broken."""
        self.check(request.memory)
        started = time.perf_counter()
        trace = self._recorder.begin(ToolName.WRITE, request.model_dump(mode="json"))
        request = await self._with_entities(request, trace)
        outbox_on = self._settings.outbox.enabled
        if outbox_on and not request.dry_run:
            try:
                waiting = await self.replay()
            except OutboxError as exc:
                self._recorder.finish(trace)
                raise OutboxError(
                    f"not written and not queued: {exc}; nothing was stored, send it again later"
                ) from exc
            if waiting:
                behind = f"{waiting} earlier write(s) still queued; kept in order behind them"
                return await self._queued(trace, request, behind, started)
        try:
            written = await write_memory(self._store, request.memory, self.policy(request))
        except (BackendError, TimeoutError) as exc:
            if request.dry_run or not outbox_on:
                raise
            why = await self._unavailable(exc)
            if why is None:  # the store is up and refused this write: an error, not queued
                raise
            return await self._queued(trace, request, why, started)
        await self._taken_in(written)
        trace.backend_calls = written.calls
        trace.add(_written(written), *written.events)
        trace.result_ids = [written.id] if written.id else []
        trace.timings_ms["total"] = _ms(started)
        self._recorder.finish(trace)
        return _report(written, request, trace.trace_id)

    # ------------------------------------------------------------------ many writes

    def begin_many(self, tool: ToolName, request: dict[str, Any]) -> Trace:
        """One trace for many writes (`write_one`, an import), in place of one each: thousands
        would push the requests people look at out of the kept traces, each built and kept
        for nobody to read; what became of each record is the caller's summary. Ended by
        `finish_many`."""
        return self._recorder.begin(tool, request)

    def finish_many(self, trace: Trace, started: float) -> None:
        trace.timings_ms["total"] = _ms(started)
        self._recorder.finish(trace)

    async def write_one(self, request: WriteRequest, trace: Trace) -> WriteReport:
        """`request` judged and written as `write` does it (the same limits, entities,
        judgement, links and marks), counted in `trace` (`begin_many`), with no outbox: a
        store that fails raises. Raises InvalidRequest as `write` does."""
        self.check(request.memory)
        memory = request.memory
        if not memory.entities and self._settings.write.extract_entities:
            (memory,) = await self.with_entities([memory], trace)
            request = request.model_copy(update={"memory": memory})
        written = await write_memory(self._store, memory, self.policy(request))
        await self._taken_in(written)
        trace.backend_calls += written.calls
        return _report(written, request, trace.trace_id)

    async def _taken_in(self, written: Written) -> None:
        """The derived indexes told of a write (see `taken`)."""
        self._on_written()
        if self._taken is not None and written.action is not WriteAction.SKIPPED:
            await self._taken()

    async def with_entities(self, memories: Sequence[NewMemory], trace: Trace) -> list[NewMemory]:
        """`memories`, each written without entities given the names its text carries
        (`write.extract_entities`): names the store knows, capitalised names, identifiers."""
        if not self._settings.write.extract_entities:
            return list(memories)
        if all(m.entities for m in memories):
            return list(memories)
        known = await self._entities.names(trace)
        out = []
        for memory in memories:
            if not memory.entities:
                found = extract_entities(memory.content, known)
                names = [n for n in found if len(n) <= MAX_LABEL_CHARS][:MAX_LIST_ITEMS]
                memory = memory.model_copy(update={"entities": names})
            out.append(memory)
        return out

    async def _with_entities(self, request: WriteRequest, trace: Trace) -> WriteRequest:
        if request.memory.entities or not self._settings.write.extract_entities:
            return request
        (memory,) = await self.with_entities([request.memory], trace)
        if memory.entities:
            entities = ", ".join(memory.entities)
            trace.add(event(Stage.WRITER, EventKind.ENTITIES_EXTRACTED, entities=entities))
        return request.model_copy(update={"memory": memory})

    # ------------------------------------------------------------------ the outbox

    async def flush(self) -> OutboxReport:
        """Replay queued writes, oldest first, until one fails or the queue is empty."""
        delivered: list[QueuedWrite] = []
        waiting = await self.replay(delivered)
        last = await self._outbox.last_error() if waiting else None
        note = f"{len(delivered)} replayed, {waiting} waiting" + (
            f"; the oldest fails with: {last}" if last else ""
        )
        return OutboxReport(
            depth=waiting,
            delivered=tuple(delivered),
            pending=tuple(await self._outbox.pending()),
            note=note,
        )

    async def replay(self, delivered: list[QueuedWrite] | None = None) -> int:
        """Send queued writes in order within `REPLAY_S`; returns how many still wait.

        Exactly once: before a queued write is sent, the store is searched for its content
        hash; one found there (an earlier try reached the store) is marked delivered instead.
        One replay at a time per process; a write meanwhile queues behind it."""
        if self._replaying:
            return await self._outbox.depth()
        self._replaying = True  # before the first await: one replay at a time
        try:
            if await self._outbox.depth() == 0:
                return 0
            with anyio.move_on_after(REPLAY_S):
                for item in await self._outbox.pending():
                    async with self._outbox.claim(item) as mine:  # None: another replica has it
                        done = None if mine is None else await self._deliver(mine)
                    if done is None:
                        break
                    if delivered is not None:
                        delivered.append(done)
        finally:
            self._replaying = False
        return await self._outbox.depth()

    async def _deliver(self, item: QueuedWrite) -> QueuedWrite | None:
        """Send one queued write; None (and the error kept) when it fails."""
        trace = self._recorder.begin(ToolName.WRITE, item.request.model_dump(mode="json"))
        try:
            with anyio.fail_after(self._settings.retrieval.timeout_s):
                found = await find_written(
                    self._store, item.request.memory, self._settings.limits.max_query_chars
                )
            if found is not None:
                written = Written(found.id, found.action, f"already stored as {found.id}")
            else:
                policy = self.policy(item.request)
                written = await write_memory(self._store, item.request.memory, policy)
        except STORE_ERRORS as exc:
            try:
                await self._outbox.failed(item.seq, describe(exc))
            except OutboxError as broken:
                raise OutboxError(
                    f"the store cannot take queued write #{item.seq} ({describe(exc)}), and"
                    f" the outbox cannot keep track of it ({broken})"
                ) from broken
            return None
        done = await self._outbox.delivered(item.seq, written.id, written.action)
        queued = f"{item.queued_at:%c}"
        replayed = event(Stage.OUTBOX, EventKind.REPLAYED, seq=item.seq, queued_at=queued)
        trace.add(replayed, _written(written), *written.events)
        trace.result_ids = [written.id] if written.id else []
        self._recorder.finish(trace)
        return done

    async def health_check(self, *, replay: bool = True) -> HealthCheck:
        """Replays what it can (unless `replay` is off: the queue is only read), then: ok
        when empty, degraded with the reason otherwise."""
        started = time.perf_counter()
        try:
            replayed: list[QueuedWrite] = []
            waiting = await self.replay(replayed) if replay else await self._outbox.depth()
            last = await self._outbox.last_error() if waiting else None
        except (OrchestratorError, OSError) as exc:
            return HealthCheck(name="outbox", status=Status.ERROR, detail=describe(exc))
        done = f"; {len(replayed)} replayed now" if replayed else ""
        if not waiting:
            return HealthCheck(
                name="outbox", status=Status.OK, detail="empty" + done, latency_ms=_ms(started)
            )
        oldest = (await self._outbox.pending(1))[0]
        detail = (
            f"{waiting} write(s) queued since {oldest.queued_at:%Y-%m-%d %H:%M:%S} UTC{done};"
            f" waiting for the store: {last or oldest.reason}"
        )
        return HealthCheck(
            name="outbox", status=Status.DEGRADED, detail=detail, latency_ms=_ms(started)
        )

    def close(self) -> None:
        self._outbox.close()

    async def _unavailable(self, exc: BaseException) -> str | None:
        """Why the store cannot take a write now, or None when it refused this write itself.

        Timeouts and transient errors mean unavailable; a permanent error counts only when
        the store's own health check fails too (a broken file, a missing binary)."""
        timeout = self._settings.retrieval.timeout_s
        if isinstance(exc, TimeoutError):
            return f"store did not answer within {timeout:g}s"
        if not isinstance(exc, BackendError) or isinstance(exc, CapabilityMissing):
            return None
        if exc.transient:
            return describe(exc)
        try:
            with anyio.fail_after(timeout):
                checks = await self._store.health()
        except (OrchestratorError, OSError) as health_exc:
            return f"{describe(exc)} (health check failed: {describe(health_exc)})"
        bad = [c for c in checks if c.status is Status.ERROR]
        if not bad:
            return None
        same = bad[0].detail in str(exc)
        return f"{describe(exc)} (health: {bad[0].name}: {'fails too' if same else bad[0].detail})"

    async def _queued(
        self, trace: Trace, request: WriteRequest, why: str, started: float
    ) -> WriteReport:
        """Keep `request` in the outbox; raises OutboxError naming both failures when the
        outbox cannot keep it either (then nothing was written, nothing is kept)."""
        try:
            item = await self._outbox.put(request, why)
        except OutboxError as exc:
            self._recorder.finish(trace)
            raise OutboxError(
                f"not written and not queued: the store cannot take it ({why}), and the outbox"
                f" cannot keep it ({exc}); nothing was stored, send it again later"
            ) from exc
        queued = event(Stage.OUTBOX, EventKind.QUEUED, seq=item.seq, why=why)
        trace.add(queued)
        reason = render(queued)
        trace.timings_ms["total"] = _ms(started)
        self._recorder.finish(trace)
        return WriteReport(
            id=None,
            action=WriteAction.QUEUED,
            reason=reason,
            trace_id=trace.trace_id,
            outbox_seq=item.seq,
        )


def _report(written: Written, request: WriteRequest, trace_id: str) -> WriteReport:
    return WriteReport(
        id=written.id,
        action=written.action,
        reason=written.reason,
        duplicate_of=written.duplicate_of,
        similarity=written.similarity,
        links=tuple(written.links),
        trace_id=trace_id,
        entities=request.memory.entities,
        dry_run=request.dry_run,
        supersedes=written.supersedes,
        changed=written.changed,
    )


def _written(written: Written) -> TraceEvent:
    """The write's decision (its report's reason), as an event."""
    ids = (written.id,) if written.id else ()
    return event(
        Stage.WRITER, EventKind.WRITTEN, *ids, action=written.action.value, reason=written.reason
    )

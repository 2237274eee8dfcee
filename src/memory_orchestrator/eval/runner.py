"""One case on its own store: ingest, ask every question of every system, run the write checks.

After the ingest, the runner waits until the derived indexes hold every memory (the semantic
index's background embedding included, with no bound: `Orchestrator.settle`), so that the
answers are the same on a busy machine as on a quiet one; an agent's request does not wait so.

See `memory_orchestrator.eval.systems` for what each system is and how latency and context
length are measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime

from memory_orchestrator.eval import metrics
from memory_orchestrator.eval.datasets import Dataset, EvalCase, EvalQuestion, WriteCheck
from memory_orchestrator.eval.diagnose import diagnose, relabel
from memory_orchestrator.eval.records import (
    Answer,
    CaseResult,
    QuestionResult,
    RunOptions,
    UpdateResult,
    WriteCheckResult,
)
from memory_orchestrator.models import (
    ContextItem,
    ContextPackage,
    ContextRequest,
    Memory,
    NewMemory,
    SearchRequest,
    WriteAction,
    WriteOutcome,
    WriteRequest,
)
from memory_orchestrator.models.views import context_answer
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.text import normalize

__all__ = ["CaseRunner", "KeyIndex", "quiet"]

INGEST_CHUNK = 250
DIAGNOSIS_DEPTH = 50  # how deep the raw store is searched to place a missed evidence turn
SHOWN_SHARE = 0.8  # an item counts as shown in the block when this much of its text is

Advance = Callable[[str, int], None]  # (phase, steps done)
Embedding = Callable[[int, int], None]  # (memories embedded, memories to embed) of this case


class KeyIndex:
    """Maps stored memories back to dataset keys: by the id each write returned (so a memory
    the store kept once for several identical turns stands for all of them), else by the key
    the memory carries in its metadata or tags."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset
        self.by_id: dict[str, set[str]] = {}
        self.id_of: dict[str, str] = {}
        self.text_of: dict[str, str] = {}

    def learn(self, key: str, content: str, outcome: WriteOutcome) -> None:
        if outcome.action is WriteAction.QUEUED or not outcome.id:
            return
        target = outcome.existing_id or outcome.id
        self.by_id.setdefault(target, set()).add(key)
        self.id_of.setdefault(key, target)
        self.text_of.setdefault(target, content)

    def see(self, memory: Memory) -> None:
        keys = self.dataset.keys_of(memory)
        self.by_id.setdefault(memory.id, set()).update(keys)
        self.text_of.setdefault(memory.id, memory.content)
        for key in keys:
            self.id_of.setdefault(key, memory.id)

    async def resolve(self, orchestrator: Orchestrator, ids: Sequence[str]) -> None:
        unknown = [i for i in dict.fromkeys(ids) if i not in self.by_id]
        if unknown:
            for memory in await orchestrator.memories(unknown):
                self.see(memory)

    def of(self, memory_id: str) -> frozenset[str]:
        return frozenset(self.by_id.get(memory_id, ()))


class CaseRunner:
    def __init__(
        self,
        dataset: Dataset,
        case: EvalCase,
        settings: Settings,
        options: RunOptions,
        advance: Advance,
        embedding: Embedding | None = None,
        *,
        loaded: Orchestrator | None = None,
    ) -> None:
        # `loaded`: an orchestrator over a store already loaded, asked as it is (nothing
        # ingested, no write check) and left open
        self.dataset, self.case, self.settings = dataset, case, settings
        self.options, self.advance, self.embedding = options, advance, embedding
        self.keys = KeyIndex(dataset)
        self._owned = loaded is None
        self.orchestrator = loaded or Orchestrator.from_settings(quiet(settings), clock=self._now)

    def _now(self) -> datetime:
        return self.case.as_of

    async def run(self, questions: Sequence[EvalQuestion]) -> CaseResult:
        try:
            result = await self._ingest() if self._owned else self._as_loaded()
            for question in questions:
                if question.skip_reason is not None:
                    result.skipped.append(question)
                else:
                    result.questions.append(await self._ask(question))
                self.advance("queries", 1)
            for check in self.case.write_checks if self._owned else ():
                result.writes.append(await self._check_write(check))
            return result
        finally:
            if self._owned:
                await self.orchestrator.close()

    # ------------------------------------------------------------------ ingest

    async def _ingest(self) -> CaseResult:
        """The case's memories into its store, and the derived indexes settled over them."""
        if self.case.ingest == "write":
            result = await self._ingest_by_writes()
        else:
            result = await self._ingest_in_bulk()
        await self.orchestrator.settle(self.embedding)
        return result

    def _as_loaded(self) -> CaseResult:
        checks = self.case.write_checks
        skipped = f"; {len(checks)} write check(s) not run" if checks else ""
        note = f"asked of the store as it was loaded: no memory added{skipped}"
        return CaseResult(id=self.case.id, memories=0, stored=0, ingest_s=0.0, notes=[note])

    async def _ingest_in_bulk(self) -> CaseResult:
        caps = self.orchestrator.capabilities
        notes = []
        items = list(self.case.memories)
        if not caps.timestamps:
            notes.append("the store keeps no timestamps: each memory's date is in its content")
        started = time.perf_counter()
        step = INGEST_CHUNK if caps.bulk_write else 1
        for start in range(0, len(items), step):
            chunk = items[start : start + step]
            memories = [self._stored_form(m.memory, caps.timestamps) for m in chunk]
            if self.options.ingest == "content":
                memories = [_as_an_agent_writes(m) for m in memories]
            outcomes = await self.orchestrator.ingest(memories)
            for item, memory, outcome in zip(chunk, memories, outcomes, strict=True):
                self.keys.learn(item.key, memory.content, outcome)
            self.advance("ingest", len(chunk))
        seconds = time.perf_counter() - started
        notes.append(
            f"ingested {len(items)} memories "
            + ("in bulk" if caps.bulk_write else "one by one")
            + f" in {seconds:.2f} s"
        )
        return CaseResult(
            id=self.case.id,
            memories=len(items),
            stored=len(self.keys.by_id),
            ingest_s=round(seconds, 3),
            notes=notes,
        )

    async def _ingest_by_writes(self) -> CaseResult:
        """Each memory through `memory_write`, in order: the write path decides what is a
        restatement, an update or a new fact (a knowledge-update case)."""
        started = time.perf_counter()
        updates: list[UpdateResult] = []
        for item in self.case.memories:
            memory = self._stored_form(item.memory, self.orchestrator.capabilities.timestamps)
            report = await self.orchestrator.write(WriteRequest(memory=memory))
            skipped = report.action is WriteAction.SKIPPED
            outcome = WriteOutcome(
                id=report.id or "",
                action=report.action,
                existing_id=report.duplicate_of if skipped else None,
            )
            self.keys.learn(item.key, memory.content, outcome)
            replaced = self.keys.of(report.supersedes) if report.supersedes else frozenset()
            updates.append(
                UpdateResult(
                    key=item.key,
                    expect=item.expect,
                    got=report.action.value,
                    supersedes=item.supersedes,
                    superseded=_named(replaced, item.supersedes),
                    lookalike_of=item.lookalike_of,
                    detail=relabel(report.reason, self.keys.by_id),
                )
            )
            self.advance("ingest", 1)
        seconds = time.perf_counter() - started
        return CaseResult(
            id=self.case.id,
            memories=len(self.case.memories),
            stored=len(self.keys.by_id),
            ingest_s=round(seconds, 3),
            notes=[f"wrote {len(updates)} memories one by one through memory_write"],
            updates=updates,
        )

    @staticmethod
    def _stored_form(memory: NewMemory, timestamps: bool) -> NewMemory:
        if timestamps or memory.created_at is None:
            return memory
        dated = f"[{memory.created_at:%Y-%m-%d %H:%M}] {memory.content}"
        return memory.model_copy(update={"content": dated})

    # ------------------------------------------------------------------ questions

    async def _ask(self, question: EvalQuestion) -> QuestionResult:
        as_of = question.as_of or self.case.as_of
        answers: dict[str, Answer] = {}
        for system in self.options.systems:
            if system == "raw":
                answers[system] = await self._raw(question.text)
            else:
                answers[system] = await self._orchestrated(
                    question.text, as_of, expand=system == "expanded"
                )
        result = QuestionResult(case=self.case.id, question=question, answers=answers)
        if self.options.diagnose and any(
            metrics.recall_at(a.ranking, question.evidence, self.options.max_k) < 1.0
            for a in answers.values()
        ):
            result.diagnosis = await diagnose(
                self.orchestrator,
                question,
                answers,
                self.keys.id_of,
                self.keys.text_of,
                self.keys.by_id,
                max_k=self.options.max_k,
                depth=DIAGNOSIS_DEPTH,
            )
        return result

    async def _raw(self, query: str) -> Answer:
        started = time.perf_counter()
        hits = await self.orchestrator.store_search(query, self.options.max_k)
        latency = (time.perf_counter() - started) * 1000
        for hit in hits:
            if hit.memory.id not in self.keys.by_id:
                self.keys.see(hit.memory)
        texts = tuple(h.memory.content for h in hits)
        return Answer(
            ranking=tuple(self.keys.of(h.memory.id) | self.dataset.keys_of(h.memory) for h in hits),
            ids=tuple(h.memory.id for h in hits),
            texts=texts,
            latency_ms=latency,
            context_chars=len("\n".join(texts)),
        )

    async def _orchestrated(self, query: str, as_of: datetime, *, expand: bool) -> Answer:
        request = SearchRequest(
            query=query, top_k=self.options.max_k, expand=expand, as_of=as_of, passthrough=False
        )
        started = time.perf_counter()
        result = await self.orchestrator.search(request)
        latency = (time.perf_counter() - started) * 1000
        # only the item's own memory counts: what it absorbed (`merged_ids`) the agent never reads
        returned = [item.memory_id for item in result.items]
        await self.keys.resolve(self.orchestrator, returned)
        chars, text, shown = 0, 0, None  # (no block measured)
        if self.options.measure_context:  # what an agent's memory_context call reads
            package = await self.orchestrator.context(
                ContextRequest(query=query, expand=expand, as_of=as_of)
            )
            chars = len(package.context_block)
            text = len(context_answer(package)[0])
            shown = await self._shown(package)
        return Answer(
            ranking=tuple(self.keys.of(i) for i in returned),
            ids=tuple(item.memory_id for item in result.items),
            texts=tuple(
                self.keys.text_of.get(item.memory_id, item.summary) for item in result.items
            ),
            latency_ms=latency,
            context_chars=chars,
            trace_id=result.trace_id,
            shown=shown,
            text_chars=text,
        )

    async def _shown(self, package: ContextPackage) -> tuple[frozenset[str], ...]:
        """The dataset keys of each item the block shows with at least `SHOWN_SHARE` of its
        text (an item cut shorter tells the agent too little of it)."""
        await self.keys.resolve(self.orchestrator, [i.memory_id for i in package.items])
        return tuple(
            self.keys.of(item.memory_id)
            for item in package.items
            if _shown_share(item, self.keys.text_of.get(item.memory_id, "")) >= SHOWN_SHARE
        )

    # ------------------------------------------------------------------ write checks

    async def _check_write(self, check: WriteCheck) -> WriteCheckResult:
        report = await self.orchestrator.write(
            WriteRequest(memory=check.memory, on_duplicate=check.on_duplicate)
        )
        got = report.action.value
        problems = []
        if got != check.expect:
            problems.append(f"expected {check.expect}, got {got}")
        if check.duplicate_of is not None:
            found = self.keys.of(report.duplicate_of) if report.duplicate_of else frozenset()
            if check.duplicate_of not in found:
                named = ", ".join(sorted(found)) or report.duplicate_of or "nothing"
                problems.append(f"expected a duplicate of {check.duplicate_of}, found {named}")
        if check.expect == "updated" and self.orchestrator.capabilities.link:
            target = self.keys.id_of.get(check.duplicate_of or "")
            kinds = ("update", "supersedes")
            if not any(e.type in kinds and e.target_id == target for e in report.links):
                problems.append("no 'update' or 'supersedes' link to the revised memory")
        detail = relabel("; ".join(problems) or report.reason, self.keys.by_id)
        return WriteCheckResult(
            id=check.id, expect=check.expect, got=got, passed=not problems, detail=detail
        )


def quiet(settings: Settings) -> Settings:
    """`settings` with traces in memory: a case's run is explained from its answers, then
    dropped."""
    return settings.model_copy(
        update={"traces": settings.traces.model_copy(update={"enabled": False})}
    )


def _shown_share(item: ContextItem, content: str) -> float:
    """How much of the memory's text its line in the block shows (a cut one ends in "…")."""
    whole = normalize(content)
    if not whole or item.summary == whole:
        return 1.0
    return min(1.0, len(item.summary.removesuffix("…").rstrip()) / len(whole))


def _as_an_agent_writes(memory: NewMemory) -> NewMemory:
    """Content and the time it was written, nothing else: no entities, tags or metadata (the
    dataset key then travels by the id the write returned)."""
    return NewMemory(content=memory.content, created_at=memory.created_at)


def _named(keys: frozenset[str], expected: str | None) -> str | None:
    """The key a superseded memory stands for: the expected one when it is among them."""
    if expected in keys:
        return expected
    return min(keys) if keys else None

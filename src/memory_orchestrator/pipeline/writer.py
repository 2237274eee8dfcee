"""The write path: look for a near-duplicate first, then write, then link to related memories.

The closest live memories (the store's top 10 for the new text) decide (`judge`, with
`pipeline.conflicts`), by what each asserts, not by how many words they share:
- a restatement (the same values and content words, in any order or voice, synonyms read by
  `pipeline.paraphrase`) is a duplicate: skipped (the answer names the memory that already
  holds the fact), or with `on_duplicate = update` written and linked;
- a correction (the same fact with one thing it says changed: a number, date, name,
  negation, antonym or word) is written, linked `supersedes` to the memory it corrects, and
  that one marked superseded through the store (`write.on_conflict`: supersede, keep_both,
  skip);
- anything else is added: a look-alike about another subject, or a change this reading
  cannot be sure of, is linked `related` to the close memory and supersedes nothing.
Nothing that differs from what the store holds is ever skipped. The answer always says what
was done.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import anyio

from memory_orchestrator.backends.base import MemoryBackend, superseding
from memory_orchestrator.errors import STORE_ERRORS
from memory_orchestrator.models import (
    Edge,
    EventKind,
    Memory,
    NewMemory,
    SearchFilters,
    SearchHit,
    Stage,
    TraceEvent,
    WriteAction,
    WriteOutcome,
    correcting,
    event,
)
from memory_orchestrator.pipeline.conflicts import Change, SameMeaning, compare
from memory_orchestrator.pipeline.currency import superseded
from memory_orchestrator.pipeline.deduper import similarity
from memory_orchestrator.text import cut_at_word


@dataclass(frozen=True)
class WritePolicy:
    threshold: float  # with on_conflict = skip: an update this close is taken as a duplicate
    on_duplicate: Literal["skip", "update"]
    link_related: int
    timeout_s: float
    dry_run: bool = False
    max_query_chars: int | None = None  # the duplicate and related lookups send no longer query
    on_conflict: Literal["supersede", "keep_both", "skip"] = "supersede"
    update_threshold: float = 0.7  # a close memory with one thing changed is an update from here
    lookalike_threshold: float = 0.6  # a close memory about something else is linked from here
    meaning: SameMeaning | None = None  # reads a swapped word as a synonym (pipeline.paraphrase)
    candidates: int = 10  # the store's closest memories compared (many look alike)

    def query(self, text: str) -> str:
        return text if self.max_query_chars is None else cut_at_word(text, self.max_query_chars)


@dataclass
class Written:
    id: str | None
    action: WriteAction
    reason: str
    duplicate_of: str | None = None
    similarity: float | None = None
    links: list[Edge] = field(default_factory=list)
    events: list[TraceEvent] = field(default_factory=list)
    calls: int = 0
    timeout_s: float = 60.0  # per link call
    supersedes: str | None = None
    changed: str | None = None


@dataclass(frozen=True)
class Verdict:
    """What the closest live memories make of a new one: `new`, `duplicate` (a restatement),
    or `update` (same fact, other values: `change` says which)."""

    kind: Literal["new", "duplicate", "update"]
    id: str | None = None
    similarity: float = 0.0
    change: Change | None = None
    lookalike: tuple[str, Change, float] | None = None  # a close memory about something else


def judge(memory: NewMemory, near: Sequence[SearchHit], policy: WritePolicy) -> Verdict:
    """Restatement, update or new fact, from the closest live memories.

    Closeness is the larger of the word-order-free similarity and the share of content both
    hold. The closest restatement wins over a less close update. Among updates, one that
    keeps the names (another number, date, negation, opposite, word) wins over a swap of
    names, the weakest sign of the same fact. A memory a later one corrected is never
    compared: the current value is what counts."""
    live = [h.memory for h in near if not superseded(h.memory)]
    lookalike: tuple[str, Change, float] | None = None
    duplicate: Verdict | None = None
    updates: list[Verdict] = []
    for close, mem_id, change in _read(memory.content, live, policy):
        if change.kind == "same" and duplicate is None:
            duplicate = Verdict("duplicate", mem_id, close, change)
        elif change.kind == "update" and close >= policy.update_threshold:
            if policy.on_conflict == "skip" and close >= policy.threshold:
                duplicate = duplicate or Verdict("duplicate", mem_id, close, change)
            elif policy.on_conflict != "skip":
                updates.append(Verdict("update", mem_id, close, change))
        elif change.kind != "same" and close >= policy.lookalike_threshold:
            lookalike = lookalike or (mem_id, change, close)
    if duplicate is not None and (not updates or duplicate.similarity >= updates[0].similarity):
        return duplicate
    if updates:
        return min(updates, key=lambda v: "name" in v.change.what if v.change else True)
    return Verdict("new", *_closest(memory.content, live), lookalike=lookalike)


def _read(
    content: str, live: Sequence[Memory], policy: WritePolicy
) -> list[tuple[float, str, Change]]:
    """Each live memory close enough to compare, with its closeness and what changed, the
    closest first."""
    out = []
    floor = min(policy.lookalike_threshold, policy.update_threshold)
    for m in live:
        change = compare(m.content, content, policy.meaning)
        close = round(max(similarity(content, m.content), change.shared), 4)
        if close >= floor or change.kind == "same":
            out.append((close, m.id, change))
    return sorted(out, key=lambda c: -c[0])


def _closest(content: str, live: Sequence[Memory]) -> tuple[str | None, float]:
    if not live:
        return None, 0.0
    sim, mem_id = max((similarity(content, m.content), m.id) for m in live)
    return mem_id, sim


async def write_memory(backend: MemoryBackend, memory: NewMemory, policy: WritePolicy) -> Written:
    """Validate against what the store holds, then write. Backend errors propagate."""
    with anyio.fail_after(policy.timeout_s):
        near = await backend.search(policy.query(memory.content), policy.candidates)
    # Reading what each close memory asserts is CPU work that grows with the texts (up to
    # `limits.max_write_chars` each): a worker thread does it, so that the event loop goes
    # on serving the other clients meanwhile.
    verdict = await anyio.to_thread.run_sync(judge, memory, near, policy)
    best_id, best_sim = verdict.id, verdict.similarity
    duplicate = verdict.kind == "duplicate"
    if duplicate and policy.on_duplicate == "skip":
        return Written(
            id=best_id,
            action=WriteAction.SKIPPED,
            reason=f"near-duplicate of {best_id}: {_restates(verdict)}; nothing written",
            duplicate_of=best_id,
            similarity=round(best_sim, 4),
            calls=1,
        )
    if policy.dry_run:
        return _dry_run(verdict, policy)
    if verdict.kind == "update" and policy.on_conflict == "supersede" and verdict.id:
        memory = correcting(memory, verdict.id)
    with anyio.fail_after(policy.timeout_s):
        outcome = await backend.write(memory)
    written = Written(
        id=outcome.id,
        action=outcome.action,
        reason=outcome.detail or f"{outcome.action.value} by the store",
        duplicate_of=outcome.existing_id,
        similarity=round(best_sim, 4) if best_id else None,
        calls=2,
        timeout_s=policy.timeout_s,
    )
    if _store_superseded(verdict, outcome, written):
        return written
    if outcome.action is not WriteAction.ADDED:
        if verdict.kind == "update" and outcome.action is WriteAction.SKIPPED:
            written.reason += (  # e.g. Mnemon: a reversal to a value it holds, superseded
                f"; the store refused it as a copy of {outcome.existing_id}, so the correction"
                f" of {verdict.id} ({verdict.change.detail if verdict.change else ''}) is lost"
            )
        return written
    await _settle(backend, outcome.id, verdict, policy, written)
    if memory.entities and policy.link_related > 0:
        await _link_shared_entities(backend, outcome.id, memory, policy, written)
    return written


async def _settle(
    backend: MemoryBackend, new_id: str, verdict: Verdict, policy: WritePolicy, written: Written
) -> None:
    """Link the memory just added to the one it corrects, restates or resembles."""
    best_id, best_sim = verdict.id, verdict.similarity
    if verdict.kind == "update":
        await _update(backend, new_id, verdict, policy, written)
    elif verdict.kind == "duplicate" and best_id is not None:  # on_duplicate = update
        written.action = WriteAction.UPDATED
        written.duplicate_of = best_id
        written.reason = f"written as an update of near-duplicate {best_id} ({best_sim:.2f})"
        await _link(backend, new_id, best_id, "update", 1.0, written)
    else:
        written.reason = _added_reason(verdict)
        if verdict.lookalike is not None:  # unsure, or another fact: kept apart, linked
            other, _, close = verdict.lookalike
            await _link(backend, new_id, other, "related", close, written)


def _store_superseded(verdict: Verdict, outcome: WriteOutcome, written: Written) -> bool:
    """Whether the store itself wrote the memory as the new version of the one it corrects
    (a write carrying the orchestrator's `supersedes` key, e.g. mnemon-mcp's `memory_update`)."""
    if verdict.kind != "update" or verdict.change is None:
        return False
    if outcome.action is not WriteAction.UPDATED or outcome.existing_id != verdict.id:
        return False
    written.supersedes, written.changed = verdict.id, verdict.change.detail
    written.duplicate_of = verdict.id
    written.reason = f"updated: {verdict.change.detail}; supersedes {verdict.id} (by the store)"
    return True


def _restates(verdict: Verdict) -> str:
    change = verdict.change
    if change is not None and change.kind == "update":  # on_conflict = skip
        return f"an update ({change.detail}) taken as a duplicate (on_conflict = skip)"
    alike = f"; {', '.join(change.same_meaning)}" if change and change.same_meaning else ""
    return f"restates it ({verdict.similarity:.2f}: the same values and words{alike})"


def _added_reason(verdict: Verdict) -> str:
    if verdict.lookalike is not None:
        other, change, close = verdict.lookalike
        why = f"{change.why}; {change.detail}" if change.why else change.detail
        return f"added: close to {other} ({close:.2f}) but not the same fact ({why}); linked"
    closest = f" (closest {verdict.id} at {verdict.similarity:.2f})" if verdict.id else ""
    return "added: no near-duplicate" + closest


def _dry_run(verdict: Verdict, policy: WritePolicy) -> Written:
    best_id, sim = verdict.id, verdict.similarity
    if verdict.kind == "update" and verdict.change is not None:
        verb = "supersede" if policy.on_conflict == "supersede" else "be kept beside"
        reason = f"dry run: would {verb} {best_id} ({verdict.change.detail}); nothing written"
    elif verdict.kind == "duplicate":
        reason = f"dry run: would be written as an update of {best_id}; nothing written"
    else:
        reason = "dry run: would be added; nothing written"
    # the action that would be taken; the report's `dry_run` marks it as not taken
    would = WriteAction.ADDED if verdict.kind == "new" else WriteAction.UPDATED
    return Written(
        id=None,
        action=would,
        reason=reason,
        duplicate_of=best_id if verdict.kind != "new" else None,
        similarity=round(sim, 4) if best_id else None,
        calls=1,
        changed=verdict.change.detail if verdict.change is not None else None,
    )


async def _update(
    backend: MemoryBackend, new_id: str, verdict: Verdict, policy: WritePolicy, written: Written
) -> None:
    """The new memory corrects `verdict.id`: linked `supersedes`; with `on_conflict =
    supersede`, the old one is marked superseded through the store as well."""
    old, change = verdict.id, verdict.change
    assert old is not None
    assert change is not None
    written.action = WriteAction.UPDATED
    written.duplicate_of, written.supersedes, written.changed = old, old, change.detail
    await _link(backend, new_id, old, "supersedes", 1.0, written)
    if policy.on_conflict != "supersede":
        written.reason = f"updated: {change.detail}; {old} kept as current too (keep_both)"
        return
    written.reason = f"updated: {change.detail}; supersedes {old}"
    marker = superseding(backend)
    if marker is None:
        written.events.append(event(Stage.WRITER, EventKind.NO_SUPERSEDED_MARK, old))
        return
    try:
        written.calls += 1
        with anyio.fail_after(policy.timeout_s):
            await marker.supersede(old, new_id)
    except STORE_ERRORS as exc:
        written.events.append(event(Stage.WRITER, EventKind.SUPERSEDE_FAILED, old, error=str(exc)))


async def _link(
    backend: MemoryBackend, source: str, target: str, relation: str, weight: float, written: Written
) -> None:
    if not backend.capabilities.link:
        written.events.append(event(Stage.WRITER, EventKind.CANNOT_LINK, target, relation=relation))
        return
    try:
        written.calls += 1
        with anyio.fail_after(written.timeout_s):
            written.links.append(await backend.link(source, target, relation, weight))
    except STORE_ERRORS as exc:
        written.events.append(event(Stage.WRITER, EventKind.LINK_FAILED, target, error=str(exc)))


async def _link_shared_entities(
    backend: MemoryBackend, new_id: str, memory: NewMemory, policy: WritePolicy, written: Written
) -> None:
    query = policy.query(" ".join(memory.entities))
    filters = (
        SearchFilters(entity_ids=list(memory.entities))
        if backend.capabilities.entity_filter
        else None
    )
    try:
        written.calls += 1
        with anyio.fail_after(policy.timeout_s):
            related = await backend.search(query, policy.link_related + 5, filters)
    except STORE_ERRORS as exc:
        written.events.append(event(Stage.WRITER, EventKind.RELATED_SEARCH_FAILED, error=str(exc)))
        return
    mine = {e.casefold() for e in memory.entities}
    linked = 0
    for hit in related:
        theirs = {e.casefold() for e in hit.memory.entities}
        shared = mine & theirs
        done = hit.memory.id == new_id or any(e.target_id == hit.memory.id for e in written.links)
        if done or not shared or linked >= policy.link_related:
            continue
        weight = round(len(shared) / len(mine | theirs), 4)
        await _link(backend, new_id, hit.memory.id, "related", weight, written)
        linked += 1

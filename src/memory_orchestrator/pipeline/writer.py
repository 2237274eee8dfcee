"""The write path: look for a near-duplicate first, then write, then link to related memories.

A duplicate is either skipped (the answer names the memory that already holds the fact) or
written as an update linked to the memory it revises. The answer always says what was done.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import anyio

from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.models import Edge, NewMemory, SearchFilters, WriteAction
from memory_orchestrator.pipeline.deduper import similarity
from memory_orchestrator.text import cut_at_word


@dataclass(frozen=True)
class WritePolicy:
    threshold: float
    on_duplicate: Literal["skip", "update"]
    link_related: int
    timeout_s: float
    dry_run: bool = False
    max_query_chars: int | None = None  # the duplicate and related lookups send no longer query

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
    notes: list[str] = field(default_factory=list)
    calls: int = 0
    timeout_s: float = 60.0  # per link call


async def write_memory(backend: MemoryBackend, memory: NewMemory, policy: WritePolicy) -> Written:
    """Validate against what the store holds, then write. Backend errors propagate."""
    calls = 1
    with anyio.fail_after(policy.timeout_s):
        near = await backend.search(policy.query(memory.content), 5)
    best_id, best_sim = None, 0.0
    for hit in near:
        sim = similarity(memory.content, hit.memory.content)
        if sim > best_sim:
            best_id, best_sim = hit.memory.id, sim
    duplicate = best_id is not None and best_sim >= policy.threshold
    if duplicate and policy.on_duplicate == "skip":
        return Written(
            id=best_id,
            action=WriteAction.SKIPPED,
            reason=f"near-duplicate of {best_id} ({best_sim:.2f} >= {policy.threshold:.2f});"
            " nothing written",
            duplicate_of=best_id,
            similarity=round(best_sim, 4),
            calls=calls,
        )
    if policy.dry_run:  # the action that would be taken; `dry_run` marks it as not taken
        verb = f"would be written as an update of {best_id}" if duplicate else "would be added"
        return Written(
            id=None,
            action=WriteAction.UPDATED if duplicate else WriteAction.ADDED,
            reason=f"dry run: {verb}; nothing written",
            duplicate_of=best_id if duplicate else None,
            similarity=round(best_sim, 4) if best_id else None,
            calls=calls,
        )
    with anyio.fail_after(policy.timeout_s):
        outcome = await backend.write(memory)
    calls += 1
    written = Written(
        id=outcome.id,
        action=outcome.action,
        reason=outcome.detail or f"{outcome.action.value} by the store",
        duplicate_of=outcome.existing_id,
        similarity=round(best_sim, 4) if best_id else None,
        calls=calls,
        timeout_s=policy.timeout_s,
    )
    if outcome.action is not WriteAction.ADDED:
        return written
    if duplicate and best_id is not None:
        written.action = WriteAction.UPDATED
        written.duplicate_of = best_id
        written.reason = f"written as an update of near-duplicate {best_id} ({best_sim:.2f})"
        await _link(backend, outcome.id, best_id, "update", 1.0, written)
    else:
        written.reason = "added: no near-duplicate" + (
            f" (closest {best_id} at {best_sim:.2f})" if best_id else ""
        )
    if memory.entities and policy.link_related > 0:
        await _link_shared_entities(backend, outcome.id, memory, policy, written)
    return written


async def _link(
    backend: MemoryBackend, source: str, target: str, relation: str, weight: float, written: Written
) -> None:
    if not backend.capabilities.link:
        written.notes.append(f"store cannot link; {relation} link to {target} not made")
        return
    try:
        written.calls += 1
        with anyio.fail_after(written.timeout_s):
            written.links.append(await backend.link(source, target, relation, weight))
    except Exception as exc:
        written.notes.append(f"link to {target} failed: {exc}")


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
    except Exception as exc:
        written.notes.append(f"related-memory search failed: {exc}; no entity links")
        return
    mine = {e.casefold() for e in memory.entities}
    linked = 0
    for hit in related:
        theirs = {e.casefold() for e in hit.memory.entities}
        shared = mine & theirs
        if hit.memory.id == new_id or not shared or linked >= policy.link_related:
            continue
        weight = round(len(shared) / len(mine | theirs), 4)
        await _link(backend, new_id, hit.memory.id, "related", weight, written)
        linked += 1

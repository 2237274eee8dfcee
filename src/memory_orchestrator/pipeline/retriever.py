"""Stage 2: run the subqueries concurrently against the store and fuse the lists with RRF.

A failed or slow call does not fail the request: the others still count, and the trace says
which call was lost and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.models import Candidate, SearchFilters, SearchHit, SourceRank
from memory_orchestrator.pipeline.filters import matches, missing_filter_support
from memory_orchestrator.pipeline.fusion import rrf
from memory_orchestrator.text import cut_at_word


@dataclass(frozen=True)
class SubQuery:
    text: str
    weight: float = 1.0
    filters: SearchFilters | None = None


@dataclass
class Retrieval:
    candidates: list[Candidate]
    notes: list[str] = field(default_factory=list)
    calls: int = 0
    failed: int = 0


async def retrieve(
    backend: MemoryBackend,
    subqueries: Sequence[SubQuery],
    *,
    per_query: int,
    timeout_s: float,
    rrf_k: int = 60,
    max_chars: int | None = None,
) -> Retrieval:
    """Search every subquery at once; fuse; apply filters the store could not apply.

    With `max_chars`, no store receives a longer query: a longer subquery is cut at a word
    boundary (a note says so)."""
    results: list[list[SearchHit] | None] = [None] * len(subqueries)
    notes: list[str] = []

    async def one(index: int, sub: SubQuery) -> None:
        text = sub.text if max_chars is None else cut_at_word(sub.text, max_chars)
        if text != sub.text:
            notes.append(f"a subquery was cut to {len(text)} characters (max {max_chars})")
        try:
            with anyio.fail_after(timeout_s):
                results[index] = await backend.search(text, per_query, sub.filters)
        except TimeoutError:
            notes.append(f"search {sub.text!r} timed out after {timeout_s:g}s; partial results")
        except Exception as exc:  # a store error must not fail the request
            notes.append(
                f"search {sub.text!r} failed: {type(exc).__name__}: {exc}; partial results"
            )

    async with anyio.create_task_group() as group:
        for index, sub in enumerate(subqueries):
            group.start_soon(one, index, sub)

    for sub in subqueries:
        for name in missing_filter_support(sub.filters, backend.capabilities):
            notes.append(f"store cannot filter by {name}; filtered after retrieval")

    by_id: dict[str, Candidate] = {}
    rankings: list[list[str]] = []
    weights: list[float] = []
    for sub, hits in zip(subqueries, results, strict=True):
        if hits is None:
            continue
        kept = [hit for hit in hits if matches(hit.memory, sub.filters)]
        rankings.append([hit.memory.id for hit in kept])
        weights.append(sub.weight)
        for rank, hit in enumerate(kept, start=1):
            source = SourceRank(query=sub.text, rank=rank, score=hit.score, store=hit.memory.store)
            known = by_id.get(hit.memory.id)
            sources = (*known.sources, source) if known else (source,)
            by_id[hit.memory.id] = Candidate(memory=hit.memory, sources=sources)
    fused = rrf(rankings, k=rrf_k, weights=weights)
    candidates = [c.model_copy(update={"fused_score": fused[i]}) for i, c in by_id.items()]
    candidates.sort(key=lambda c: (-c.fused_score, c.memory.id))
    failed = sum(1 for hits in results if hits is None)
    return Retrieval(
        candidates=candidates, notes=sorted(set(notes)), calls=len(subqueries), failed=failed
    )

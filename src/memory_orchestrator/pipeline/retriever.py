"""Stage 2: run the subqueries concurrently against the store and fuse the lists with RRF.

A failed or slow call does not fail the request: the others still count, and the trace says
which call was lost and why.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import anyio

from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.filtering import matches
from memory_orchestrator.models import Candidate, Memory, SearchFilters, SearchHit, SourceRank
from memory_orchestrator.pipeline.filters import missing_filter_support
from memory_orchestrator.pipeline.fusion import rrf
from memory_orchestrator.pipeline.reranker import tie_order
from memory_orchestrator.text import cut_at_word


@dataclass(frozen=True)
class SubQuery:
    text: str
    weight: float = 1.0
    filters: SearchFilters | None = None


Prefetch = Callable[[], Awaitable[list[tuple[SubQuery, list[SearchHit]]]]]


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
    prefetch: Prefetch | None = None,
    max_chars: int | None = None,
) -> Retrieval:
    """Search every subquery at once, and run `prefetch` (ranked lists from elsewhere, e.g.
    the derived local indexes') alongside; fuse them all; apply filters the store could not
    apply. `prefetch` must not raise (it reports its own failures).

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

    prefetched: list[tuple[SubQuery, list[SearchHit]]] = []

    async def other(fetch: Prefetch) -> None:
        prefetched.extend(await fetch())

    async with anyio.create_task_group() as group:
        # the store's searches first: they wait in worker threads (the store's own I/O)
        # while `prefetch` does its work on this one
        for index, sub in enumerate(subqueries):
            group.start_soon(one, index, sub)
        if prefetch is not None:
            group.start_soon(other, prefetch)

    for sub in subqueries:
        for name in missing_filter_support(sub.filters, backend.capabilities):
            notes.append(f"store cannot filter by {name}; filtered after retrieval")

    lists = [*zip(subqueries, results, strict=True), *prefetched]
    candidates = _fuse([(sub, hits) for sub, hits in lists if hits is not None], rrf_k)
    failed = sum(1 for hits in results if hits is None)
    return Retrieval(
        candidates=candidates, notes=sorted(set(notes)), calls=len(subqueries), failed=failed
    )


def _fuse(lists: Sequence[tuple[SubQuery, list[SearchHit]]], rrf_k: int) -> list[Candidate]:
    """One candidate per memory, with every list's rank for it, ordered by weighted RRF."""
    found: dict[str, tuple[Memory, list[SourceRank]]] = {}
    rankings: list[list[str]] = []
    weights: list[float] = []
    for sub, hits in lists:
        kept = [hit for hit in hits if matches(hit.memory, sub.filters)]
        rankings.append([hit.memory.id for hit in kept])
        weights.append(sub.weight)
        for rank, hit in enumerate(kept, start=1):
            source = SourceRank(query=sub.text, rank=rank, score=hit.score, store=hit.memory.store)
            found.setdefault(hit.memory.id, (hit.memory, []))[1].append(source)
    fused = rrf(rankings, k=rrf_k, weights=weights)
    candidates = [
        Candidate(memory=memory, sources=tuple(sources), fused_score=fused[i])
        for i, (memory, sources) in found.items()
    ]
    candidates.sort(key=lambda c: (-c.fused_score, *tie_order(c.memory)))
    return candidates

"""Stage 3b: context neighbours, the memories just before and after the best candidates.

Conversations are local: the answer often sits in the turn next to the one that matches the
question. In one store call this stage fetches the temporal neighbours of the best
`context_seeds` candidates; they lend their words to the candidates' term match (the table's
`around`, read by `context_window`) and, when `neighbor_share` > 0, join the candidates with a
share of their seed's relevance (the table's `context_of`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import anyio

from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.errors import STORE_ERRORS, describe
from memory_orchestrator.filtering import matches
from memory_orchestrator.models import (
    Candidate,
    EventKind,
    ExpansionDecision,
    Memory,
    Neighbor,
    SearchFilters,
    Stage,
    TraceEvent,
    event,
    far_apart,
)
from memory_orchestrator.pipeline.relevance import RankContext
from memory_orchestrator.pipeline.reranker import by_relevance
from memory_orchestrator.pipeline.table import CandidateTable, Similarity

TEMPORAL = "temporal"


@dataclass(frozen=True)
class NeighbourLimits:
    seeds: int  # how many of the best candidates get their neighbours fetched
    share: float  # neighbor_share: > 0 lets neighbours join the candidates
    timeout_s: float
    gap_s: float | None = None  # ranking.context_gap_s: neighbours only within a session


@dataclass
class Neighbourhood:
    table: CandidateTable
    decisions: list[ExpansionDecision] = field(default_factory=list)
    events: list[TraceEvent] = field(default_factory=list)
    calls: int = 0


async def add_context_neighbours(
    store: MemoryBackend,
    table: CandidateTable,
    ctx: RankContext,
    limits: NeighbourLimits,
    filters: SearchFilters | None = None,
    similarity: Similarity | None = None,
) -> Neighbourhood:
    """`table` with the context neighbours of the best candidates added (their similarity
    from `similarity`). A store without temporal links, or a failed store call, leaves it as
    it was with a note (anything else is a bug and is raised)."""
    caps = store.capabilities
    if not caps.graph or (caps.edge_types and TEMPORAL not in caps.edge_types):
        return Neighbourhood(table, events=[event(Stage.NEIGHBOURS, EventKind.NO_TEMPORAL_LINKS)])
    seeds = by_relevance(table, ctx, limits.seeds)
    try:
        with anyio.fail_after(limits.timeout_s):
            found = await store.neighbors(seeds, (TEMPORAL,), 1, 4 * len(seeds))
    except STORE_ERRORS as exc:  # an enrichment: a store failure must not fail the request
        lost = event(
            Stage.NEIGHBOURS,
            EventKind.UNAVAILABLE,
            what="context neighbours",
            error=describe(exc),
            then="",
        )
        return Neighbourhood(table, events=[lost], calls=1)
    joined = _joined(table, found, limits.share, filters, limits.gap_s)
    lent = replace(table, around=joined.around, context_of=joined.context_of)
    return Neighbourhood(
        lent.extended(joined.added, similarity), decisions=joined.decisions, calls=1
    )


@dataclass
class _Joined:
    around: dict[str, list[Memory]]
    context_of: dict[str, str]
    added: list[Candidate]
    decisions: list[ExpansionDecision]


def _joined(
    table: CandidateTable,
    found: Sequence[Neighbor],
    share: float,
    filters: SearchFilters | None,
    gap_s: float | None = None,
) -> _Joined:
    """The neighbours `found` as `around` and `context_of`, and the candidates they add."""
    memories = {c.memory.id: c.memory for c in table.candidates}
    around: dict[str, list[Memory]] = {}
    context_of: dict[str, str] = {}
    added: list[Candidate] = []
    decisions: list[ExpansionDecision] = []
    for n in found:
        if n.edge_type != TEMPORAL or n.hops != 1 or not matches(n.memory, filters):
            continue
        seed = memories.get(n.seed_id)
        if seed is not None and far_apart(seed.created_at, n.memory.created_at, gap_s):
            continue  # another session: no context
        around.setdefault(n.seed_id, []).append(n.memory)
        if n.seed_id in memories:
            around.setdefault(n.memory.id, []).append(memories[n.seed_id])
        if share <= 0:
            continue
        context_of.setdefault(n.memory.id, n.seed_id)
        if n.memory.id in memories:
            continue
        memories[n.memory.id] = n.memory
        added.append(
            Candidate(
                memory=n.memory,
                hops=1,
                expanded_from=n.seed_id,
                edge_type=TEMPORAL,
                edge_weight=1.0,
            )
        )
        decisions.append(
            ExpansionDecision(
                seed_id=n.seed_id,
                neighbor_id=n.memory.id,
                edge_type=TEMPORAL,
                hops=1,
                accepted=True,
                reason="context neighbour of a top candidate",
            )
        )
    return _Joined(around, context_of, added, decisions)

"""Equal scores are ordered by something that survives writing the same memories again.

Stores make ids at random on write, so an order that falls back on ids changed from one
ingest of the same data to the next (the evaluation harness measured it: the same LoCoMo run
gave different numbers twice). Ties now go newest first, and the expander keeps the store's
nearest-first order among equally weighted neighbours.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from memory_orchestrator.models import Capabilities, Memory, Neighbor
from memory_orchestrator.pipeline.expander import ExpansionLimits, expand
from memory_orchestrator.pipeline.relevance import RankContext
from memory_orchestrator.pipeline.reranker import by_relevance, rerank
from memory_orchestrator.pipeline.table import CandidateTable
from memory_orchestrator.settings import RankingProfile
from tests.factories import NOW, candidate, memory, plan

EARLY, LATE = NOW - timedelta(days=3), NOW - timedelta(days=3) + timedelta(seconds=1)


def ctx() -> RankContext:
    return RankContext(plan=plan("painted sunrise"), now=NOW, settings=RankingProfile())


def test_equal_scores_rank_the_newer_memory_first_whatever_the_ids() -> None:
    older = memory("mem_a", "Melanie painted a sunrise", created_at=EARLY)
    newer = memory("mem_z", "Melanie painted a sunrise", created_at=LATE)
    for first, second in ((older, newer), (newer, older)):
        items = rerank([candidate(first, fused=0.01), candidate(second, fused=0.01)], ctx())
        assert items[0].breakdown.total == items[1].breakdown.total
        assert [i.id for i in items] == ["mem_z", "mem_a"]
        both = CandidateTable.of([candidate(first, fused=0.01), candidate(second, fused=0.01)])
        seeds = by_relevance(both, ctx())
        assert seeds == ["mem_z", "mem_a"]


class NeighboursInOrder:
    """A store whose `neighbors` answers a fixed list, nearest first (as the Protocol says)."""

    name = "fixed"
    capabilities = Capabilities(graph=True, edge_types=("temporal",))

    def __init__(self, found: Sequence[Neighbor]) -> None:
        self.found = list(found)

    async def neighbors(
        self,
        node_ids: Sequence[str],
        edge_types: Sequence[str] | None = None,
        hops: int = 1,
        limit: int = 50,
    ) -> list[Neighbor]:
        return self.found


def neighbour(mem: Memory) -> Neighbor:
    return Neighbor(
        memory=mem, seed_id="seed", via_id="seed", edge_type="temporal", weight=1.0, hops=1
    )


async def test_expansion_keeps_the_stores_nearest_first_order_among_equal_weights() -> None:
    near, far = memory("mem_z", "the next turn"), memory("mem_a", "a turn further away")
    store = NeighboursInOrder([neighbour(near), neighbour(far)])
    limits = ExpansionLimits(hops=1, edge_types=("temporal",), fanout=1, max_new=5, timeout_s=5)
    grown = await expand(store, ["seed"], limits)  # type: ignore[arg-type]
    assert [c.memory.id for c in grown.candidates] == ["mem_z"]


def test_best_first_orders_as_one_sort_by_score_then_tie_order() -> None:
    """`best_first` works out the tie order only where scores tie; the order it gives is
    the one sort by (-score, tie order) gives, on runs of ties of every length."""
    import random

    from memory_orchestrator.pipeline.reranker import best_first, tie_order

    draw = random.Random(7)
    for _ in range(200):
        items = [
            (
                draw.choice([0.0, -0.0, 0.25, 0.5, 0.5000001, 1.0]),
                memory(
                    f"m{draw.randrange(5)}",
                    draw.choice(["a", "b"]),
                    created_at=draw.choice([None, EARLY, LATE]),
                ),
            )
            for _ in range(draw.randrange(12))
        ]
        expected = sorted(items, key=lambda i: (-i[0], *tie_order(i[1])))
        got = list(items)
        best_first(got, lambda i: i[0], lambda i: i[1])
        assert [(s, m.id, m.content, m.created_at) for s, m in got] == [
            (s, m.id, m.content, m.created_at) for s, m in expected
        ]

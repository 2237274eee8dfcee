"""Small typed records for unit tests of the pipeline stages (real records, no mocks)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memory_orchestrator.models import (
    Candidate,
    Intent,
    Memory,
    MemoryType,
    NewMemory,
    QueryPlan,
    QuestionType,
    Source,
    Strategy,
    TimeRange,
)
from memory_orchestrator.text import content_words, terms

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)

# four memories on four topics that share no word: the semantic stage's tests find each by
# meaning ("dog playing outside" -> the first)
TOPICS = (
    "The puppy chased the ball around the garden all afternoon",
    "Quarterly revenue grew in Europe after the price change",
    "We booked a campsite near the lake for the weekend",
    "The deploy of the billing service failed twice on Tuesday",
)

# a short chat, one turn a minute from NOW: the second turn never says "painting", and is found
# for it only through the local index's context (the turn before it)
CHAT = (
    "Mel: we love painting together on weekends",
    "Mel: here is our latest work, a sunset over the lake",
    "Car: the support group met on Tuesday",
    "Car: my grandma gave me this necklace",
)


def chat_turns() -> list[NewMemory]:
    """`CHAT` as episodic memories to write, one a minute from `NOW`."""
    return [
        NewMemory(content=c, type=MemoryType.EPISODIC, created_at=NOW + timedelta(minutes=i))
        for i, c in enumerate(CHAT)
    ]


def memory(
    mem_id: str,
    content: str,
    *,
    kind: MemoryType = MemoryType.SEMANTIC,
    entities: tuple[str, ...] = (),
    created_at: datetime | None = None,
    store: str = "test",
) -> Memory:
    return Memory(
        id=mem_id,
        content=content,
        type=kind,
        entities=entities,
        created_at=created_at,
        store=store,
    )


def candidate(
    mem: Memory,
    *,
    rank: int = 1,
    fused: float = 0.0,
    hops: int = 0,
    expanded_from: str | None = None,
    edge_weight: float = 1.0,
) -> Candidate:
    sources = (Source("q", rank, 1.0),) if hops == 0 else ()
    return Candidate(
        memory=mem,
        sources=sources,
        fused_score=fused or (1 / (60 + rank) if hops == 0 else 0.0),
        hops=hops,
        expanded_from=expanded_from,
        edge_type="temporal" if hops else None,
        edge_weight=edge_weight,
    )


def plan(
    query: str,
    *,
    entities: tuple[str, ...] = (),
    strategy: Strategy = Strategy.DIRECT,
    intent: Intent = Intent.DIRECT,
    window: TimeRange | None = None,
    preferred: tuple[MemoryType, ...] = (),
    hop_budget: int = 0,
) -> QueryPlan:
    return QueryPlan(
        raw_query=query,
        canonical_query=" ".join(content_words(query)) or query,
        terms=tuple(dict.fromkeys(terms(query))),
        keywords=tuple(dict.fromkeys(content_words(query))),
        entities=entities,
        intent=intent,
        question_type=QuestionType.WHAT,
        time_window=window,
        subqueries=(query,),
        strategy=strategy,
        hop_budget=hop_budget,
        preferred_types=preferred,
        confidence=0.8,
    )

"""Stage 4: the transparent weighted formula.

    total = w_relevance * relevance + w_recency * recency + w_graph * graph
          + w_type * type_match + w_xref * cross_reference
          - w_duplicate * duplicate_penalty - w_noise * noise_penalty

Every signal lies in [0, 1] and travels with the item in its `ScoreBreakdown`, so explain
mode shows exactly what ranked it; nothing is recomputed later.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

from memory_orchestrator.models import (
    Candidate,
    Memory,
    MemoryType,
    QueryPlan,
    ScoreBreakdown,
    ScoredItem,
    TimeRange,
    to_utc,
)
from memory_orchestrator.settings import RankingSettings, Weights
from memory_orchestrator.text import content_word_count, term_set

_DAY = 86_400.0
_SHORT_WORDS = 3  # fewer content words than this looks like chatter ("ok thanks")
_XREF_SATURATION = 3  # an entity shared with this many other results gives the full boost


@dataclass(frozen=True)
class RankContext:
    plan: QueryPlan
    now: datetime
    settings: RankingSettings

    @cached_property
    def weights_dump(self) -> dict[str, float]:
        return self.settings.weights.model_dump()


def weighted_total(
    weights: Weights,
    *,
    relevance: float,
    recency: float,
    graph: float,
    type_match: float,
    cross_reference: float,
    duplicate_penalty: float = 0.0,
    noise_penalty: float = 0.0,
) -> float:
    return (
        weights.relevance * relevance
        + weights.recency * recency
        + weights.graph * graph
        + weights.type_match * type_match
        + weights.cross_reference * cross_reference
        - weights.duplicate * duplicate_penalty
        - weights.noise * noise_penalty
    )


def with_penalties(
    breakdown: ScoreBreakdown, weights: Weights, *, duplicate: float | None = None
) -> ScoreBreakdown:
    """The same breakdown with a new duplicate penalty and its total recomputed."""
    dup = breakdown.duplicate_penalty if duplicate is None else duplicate
    total = weighted_total(
        weights,
        relevance=breakdown.relevance,
        recency=breakdown.recency,
        graph=breakdown.graph,
        type_match=breakdown.type_match,
        cross_reference=breakdown.cross_reference,
        duplicate_penalty=dup,
        noise_penalty=breakdown.noise_penalty,
    )
    return breakdown.model_copy(update={"duplicate_penalty": dup, "total": round(total, 6)})


def rerank(candidates: Sequence[Candidate], ctx: RankContext) -> list[ScoredItem]:
    """Score every candidate; best first (ties: see `tie_order`), so the order is deterministic."""
    if not candidates:
        return []
    lexical, relevance, max_fused = _relevance(candidates, ctx)
    entity_counts = _entity_counts(candidates)
    query_entities = {e.casefold() for e in ctx.plan.entities}
    items = [
        _score(
            c,
            ctx,
            lexical[c.memory.id],
            relevance[c.memory.id],
            max_fused,
            _xref(c, entity_counts, query_entities),
        )
        for c in candidates
    ]
    items.sort(key=lambda item: (-item.breakdown.total, *tie_order(item.candidate.memory)))
    return items


def tie_order(memory: Memory) -> tuple[float, str]:
    """How equal scores are ordered: newer first, then by id. Stores often make ids at random
    on write, so ties broken by id alone ranked the same memories differently each time they
    were written again (the evaluation harness caught it)."""
    created = memory.created_at
    return (-to_utc(created).timestamp() if created else math.inf, memory.id)


def by_relevance(candidates: Sequence[Candidate], ctx: RankContext) -> list[str]:
    """Ids ordered by relevance alone: the cheap ordering used to pick expansion seeds."""
    if not candidates:
        return []
    _, relevance, _ = _relevance(candidates, ctx)
    memories = {c.memory.id: c.memory for c in candidates}
    return sorted(relevance, key=lambda i: (-relevance[i], *tie_order(memories[i])))


def _relevance(
    candidates: Sequence[Candidate], ctx: RankContext
) -> tuple[dict[str, float], dict[str, float], float]:
    plan = ctx.plan
    doc_terms = {c.memory.id: _doc_terms(c) for c in candidates}
    idf = _idf(plan.terms, list(doc_terms.values()))
    max_fused = max(c.fused_score for c in candidates) or 1.0
    share = ctx.settings.lexical_share
    lexical = {c.memory.id: _lexical(plan, doc_terms[c.memory.id], idf, c) for c in candidates}
    relevance: dict[str, float] = {}
    for c in candidates:
        if c.hops == 0:
            own = share * lexical[c.memory.id]
            relevance[c.memory.id] = own + (1 - share) * (c.fused_score / max_fused)
    for c in candidates:  # expanded items inherit part of their seed's relevance
        if c.hops > 0:
            inherited = relevance.get(c.expanded_from or "", 0.0) * c.edge_weight
            inherited *= ctx.settings.expansion_decay**c.hops
            relevance[c.memory.id] = max(lexical[c.memory.id], inherited)
    return lexical, relevance, max_fused


def _score(
    c: Candidate,
    ctx: RankContext,
    lexical: float,
    relevance: float,
    max_fused: float,
    xref: tuple[float, str | None],
) -> ScoredItem:
    settings = ctx.settings
    recency, recency_reason = _recency(c, ctx)
    graph = 1.0 if c.hops == 0 else c.edge_weight / (1 + c.hops)
    type_match = _type_match(c.memory.type, ctx.plan.preferred_types)
    noise = _noise(c, lexical)
    weights = settings.weights
    total = weighted_total(
        weights,
        relevance=relevance,
        recency=recency,
        graph=graph,
        type_match=type_match,
        cross_reference=xref[0],
        noise_penalty=noise,
    )
    # model_construct: every value here is computed, not user input; validation would only
    # cost time on the hot path (tens of candidates per request).
    breakdown = ScoreBreakdown.model_construct(
        relevance=round(relevance, 6),
        lexical=round(lexical, 6),
        fused=round(c.fused_score / max_fused, 6),
        recency=round(recency, 6),
        graph=round(graph, 6),
        type_match=type_match,
        cross_reference=round(xref[0], 6),
        noise_penalty=noise,
        duplicate_penalty=0.0,
        weights=ctx.weights_dump,
        total=round(total, 6),
    )
    reasons = _reasons(c, ctx.plan, lexical, recency_reason, xref[1], noise)
    return ScoredItem.model_construct(
        candidate=c,
        breakdown=breakdown,
        reasons=tuple(reasons),
        merged_ids=(),
        cross_validated=False,
    )


def _doc_terms(c: Candidate) -> frozenset[str]:
    return term_set(c.memory.content + " " + " ".join(c.memory.entities))


def _idf(query_terms: Sequence[str], docs: Sequence[frozenset[str]]) -> dict[str, float]:
    n = len(docs)
    idf = {}
    for term in query_terms:
        df = sum(1 for d in docs if term in d)
        idf[term] = math.log(1.0 + (n + 1) / (df + 0.5))
    return idf


def _lexical(plan: QueryPlan, terms: frozenset[str], idf: dict[str, float], c: Candidate) -> float:
    """IDF-weighted share of the query's terms found in the memory, with entity matches."""
    total = sum(idf.values())
    coverage = sum(w for t, w in idf.items() if t in terms) / total if total else 0.0
    if not plan.entities:
        return coverage
    memory_entities = {e.casefold() for e in c.memory.entities}
    text = c.memory.content.casefold()
    hit = sum(1 for e in plan.entities if e.casefold() in memory_entities or e.casefold() in text)
    return 0.75 * coverage + 0.25 * hit / len(plan.entities)


def _entity_counts(candidates: Sequence[Candidate]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for c in candidates:
        counts.update({e.casefold() for e in c.memory.entities})
    return counts


def _xref(c: Candidate, counts: Counter[str], query_entities: set[str]) -> tuple[float, str | None]:
    """Entities this memory shares with other results (Memory Fabric's cross-reference boost)."""
    best, best_entity = 0.0, None
    for entity in c.memory.entities:
        others = counts[entity.casefold()] - 1
        if others <= 0:
            continue
        value = min(1.0, others / _XREF_SATURATION)
        value *= 1.0 if entity.casefold() in query_entities else 0.5
        if value > best:
            best, best_entity = value, entity
    return best, best_entity


def _recency(c: Candidate, ctx: RankContext) -> tuple[float, str | None]:
    created = c.memory.created_at
    if created is None:
        return 0.5, None
    window = ctx.plan.time_window
    if window is not None:
        return _window_score(to_utc(created), window)
    half_life = ctx.settings.half_life_days.get(c.memory.type)
    if half_life is None:
        return 1.0, None
    age_days = max(0.0, (to_utc(ctx.now) - to_utc(created)).total_seconds() / _DAY)
    score = 0.5 ** (age_days / half_life)
    return score, (f"recent ({age_days:.0f} days old)" if score >= 0.5 else None)


def _window_score(when: datetime, window: TimeRange) -> tuple[float, str | None]:
    start = to_utc(window.start) if window.start else None
    end = to_utc(window.end) if window.end else None
    if (start is None or when >= start) and (end is None or when <= end):
        return 1.0, "inside the asked time window"
    edge = start if start is not None and when < start else end
    assert edge is not None
    days_out = abs((edge - when).total_seconds()) / _DAY
    return 0.5 ** (days_out / 7.0), None


def _type_match(kind: MemoryType, preferred: Sequence[MemoryType]) -> float:
    if not preferred:
        return 0.5
    return 1.0 if kind in preferred else 0.0


def _noise(c: Candidate, lexical: float) -> float:
    if c.hops == 0 and lexical == 0.0:
        return 1.0  # the store returned it, but it shares nothing with the question
    if content_word_count(c.memory.content) < _SHORT_WORDS:
        return 0.5
    return 0.0


def _reasons(
    c: Candidate,
    plan: QueryPlan,
    lexical: float,
    recency_reason: str | None,
    xref_entity: str | None,
    noise: float,
) -> list[str]:
    reasons = []
    text = c.memory.content.casefold()
    entities = {e.casefold() for e in c.memory.entities}
    matched = [e for e in plan.entities if e.casefold() in entities or e.casefold() in text]
    if matched:
        reasons.append("entity match: " + ", ".join(matched))
    if lexical >= 0.5:
        reasons.append(f"strong term match ({lexical:.0%})")
    elif lexical > 0:
        reasons.append(f"partial term match ({lexical:.0%})")
    if c.sources:
        best = min(c.sources, key=lambda s: s.rank)
        reasons.append(f"store rank {best.rank} for {best.query!r}")
        if len({s.query for s in c.sources}) > 1:
            reasons.append(f"found by {len({s.query for s in c.sources})} subqueries")
    if c.expanded_from:
        reasons.append(f"{c.hops} hop(s) from {c.expanded_from} via {c.edge_type}")
    if recency_reason:
        reasons.append(recency_reason)
    if plan.preferred_types and c.memory.type in plan.preferred_types:
        reasons.append(f"{c.memory.type.value} memory fits the question")
    if xref_entity:
        reasons.append(f"recurring entity: {xref_entity}")
    if noise >= 1.0:
        reasons.append("penalised: shares no term with the query")
    elif noise > 0:
        reasons.append("penalised: very short")
    return reasons

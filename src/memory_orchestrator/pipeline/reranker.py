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
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TypeVar

from memory_orchestrator.models import (
    LOCAL_SOURCE,
    SEMANTIC_SOURCE,
    Candidate,
    Memory,
    MemoryType,
    QueryPlan,
    ScoreBreakdown,
    ScoredItem,
    TimeRange,
    to_utc,
)
from memory_orchestrator.pipeline.relevance import (
    RankContext,
    Words,
    best_by_relevance,
    relevance_scores,
    words_of,
)
from memory_orchestrator.pipeline.scored import Ranked, Scored
from memory_orchestrator.settings import RankingProfile, Weights

_DAY = 86_400.0
RECENT_DAYS = 14  # "recent" in a reason: at most this many days old
_DERIVED_LISTS = {SEMANTIC_SOURCE: "semantic index", LOCAL_SOURCE: "local index"}
_CLOSE_IN_MEANING = 0.5  # cosine from which "close in meaning" is worth saying

T = TypeVar("T")


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
    return _total(
        _weight_terms(weights),
        relevance,
        recency,
        graph,
        type_match,
        cross_reference,
        duplicate_penalty,
        noise_penalty,
    )


_Terms = tuple[float, float, float, float, float, float, float]


def _weight_terms(w: Weights) -> _Terms:
    """The weights in the formula's order (read once per request on the hot path)."""
    return (w.relevance, w.recency, w.graph, w.type_match, w.cross_reference, w.duplicate, w.noise)


def _total(
    w: _Terms,
    relevance: float,
    recency: float,
    graph: float,
    type_match: float,
    cross_reference: float,
    duplicate_penalty: float,
    noise_penalty: float,
) -> float:
    """The formula, term by term in its order (so a sum is the same to the last bit)."""
    w_relevance, w_recency, w_graph, w_type, w_xref, w_duplicate, w_noise = w
    return (
        w_relevance * relevance
        + w_recency * recency
        + w_graph * graph
        + w_type * type_match
        + w_xref * cross_reference
        - w_duplicate * duplicate_penalty
        - w_noise * noise_penalty
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


def rerank(
    candidates: Sequence[Candidate], ctx: RankContext, *, reasons: bool = True
) -> list[ScoredItem]:
    """Score every candidate; best first (ties: see `tie_order`), so the order is deterministic.

    `reasons=False` leaves the human-readable reasons out (the service adds them with
    `with_reasons` to the few items it returns, not to every candidate)."""
    return [row.item for row in rank(candidates, ctx, reasons=reasons)]


def rank(
    candidates: Sequence[Candidate], ctx: RankContext, *, reasons: bool = True
) -> list[Scored]:
    """`rerank` as plain rows (see `Scored`): the same scores, the same order."""
    if not candidates:
        return []
    words = [words_of(c.memory) for c in candidates]
    lexical, relevance, store = relevance_scores(candidates, ctx, words)
    entity_counts = _xref_counts(words)
    query_entities = {e.casefold() for e in ctx.plan.entities}
    power = ctx.settings.name_trust_power
    trust = _name_trust(candidates, words, relevance, query_entities, power)
    score = _Scorer(ctx, reasons)
    rows = [
        score(
            c,
            w,
            lexical[c.memory.id],
            relevance[c.memory.id],
            store.get(c.memory.id, 0.0),
            _xref(w, entity_counts, query_entities, ctx.settings.xref_saturation, trust),
        )
        for c, w in zip(candidates, words, strict=True)
    ]
    best_first(rows, lambda row: row.total, lambda row: row.candidate.memory)
    return rows


def with_reasons(
    items: Sequence[Ranked],
    candidates: Sequence[Candidate],
    ctx: RankContext,
    rows: Mapping[str, Scored] | None = None,
) -> list[ScoredItem]:
    """`items` (scored by `rerank(..., reasons=False)` over `candidates`, or `rank`'s rows)
    with the reasons `rerank` would have given them, ahead of any a later stage added (the
    deduper's). `rows`: `rank`'s rows by id, when the caller has them: an item whose memory
    is its row's takes what its row worked out (its age, the entity it shares) instead of
    counting the candidates' entities again; a merged one (its memory carries its
    duplicates' entities too) is worked out anew. A row is made its `ScoredItem` once, with
    its reasons."""
    counts: Counter[str] | None = None  # (counted only for an item that needs it)
    query_entities = {e.casefold() for e in ctx.plan.entities}
    out = []
    for item in items:
        c = item.candidate
        row: Scored | None
        if isinstance(item, Scored):
            row, (lexical, noise, semantic) = item, item.reason_signals()
        else:
            row = rows.get(item.id) if rows is not None else None
            b = item.breakdown
            lexical, noise, semantic = b.lexical, b.noise_penalty, b.semantic
        if row is not None and row.candidate.memory is c.memory:
            recency_reason, xref_entity = row.recency_reason, row.xref_entity
        else:
            if counts is None:
                counts = _xref_counts([words_of(m.memory) for m in candidates])
            _, recency_reason = _recency(c, ctx)
            saturation = ctx.settings.xref_saturation
            _, xref_entity = _xref(words_of(c.memory), counts, query_entities, saturation)
        own = _reasons(c, ctx.plan, lexical, recency_reason, xref_entity, noise, semantic)
        reasons = (*own, *item.reasons)
        if isinstance(item, Scored):
            out.append(item.with_reasons(reasons))
        else:
            out.append(item.model_copy(update={"reasons": reasons}))
    return out


def _xref_counts(words: Sequence[Words]) -> Counter[str]:
    """How many candidates (`words`: theirs) carry each entity, case-folded."""
    counts: Counter[str] = Counter()
    for w in words:
        for entity in w.entities:
            counts[entity] += 1
    return counts


def tie_order(memory: Memory) -> tuple[float, str, str]:
    """How equal scores are ordered: newer first, then by content, then by id. Stores often
    make ids at random on write, so ties broken by id ranked the same memories differently
    each time they were written again (the evaluation harness caught it, first with
    memories of different times, then with the many turns of one conversation session that
    share one timestamp)."""
    created = memory.created_at
    return (-to_utc(created).timestamp() if created else math.inf, memory.content, memory.id)


def best_first(items: list[T], score: Callable[[T], float], memory: Callable[[T], Memory]) -> None:
    """Sort `items` in place, highest `score` first, equal scores in `tie_order`: the order
    of `items.sort(key=lambda i: (-score(i), *tie_order(memory(i))))`, with `tie_order`
    (a timestamp, on the hot path three times a request) worked out only where scores tie."""
    scores = [score(i) for i in items]
    # (stable, like the one sort: a reversed sort keeps equal items in their order)
    order = sorted(range(len(items)), key=scores.__getitem__, reverse=True)
    ranked = [items[i] for i in order]
    start = 0
    while start < len(order):
        end, value = start + 1, scores[order[start]]
        while end < len(order) and scores[order[end]] == value:
            end += 1
        if end - start > 1:
            ranked[start:end] = sorted(ranked[start:end], key=lambda i: tie_order(memory(i)))
        start = end
    items[:] = ranked


def by_relevance(
    candidates: Sequence[Candidate], ctx: RankContext, limit: int | None = None
) -> list[str]:
    """Ids ordered by relevance alone (the first `limit`): the cheap ordering used to pick
    expansion and context seeds."""
    if not candidates:
        return []
    relevance = best_by_relevance(candidates, ctx, limit) if limit is not None else None
    if relevance is None:
        _, relevance, _ = relevance_scores(candidates, ctx)
    memories = {c.memory.id: c.memory for c in candidates}
    ids = list(relevance)
    best_first(ids, relevance.__getitem__, memories.__getitem__)
    return ids[:limit]


class _Scorer:
    """Scores candidates one by one against a request's `RankContext`: what does not depend
    on the candidate (the weights, the question's time window and types, the moment of the
    request) is read once, not once a candidate."""

    def __init__(self, ctx: RankContext, explain: bool) -> None:
        settings = ctx.settings
        self.ctx, self.explain, self.dump = ctx, explain, ctx.weights_dump
        self.weights = _weight_terms(settings.weights)
        self.gate = settings.xref_gate  # the boost counts in proportion to own relevance
        self.preferred = ctx.plan.preferred_types
        self.semantic = ctx.semantic
        self.window = ctx.plan.time_window
        self.profile = settings
        self.now = to_utc(ctx.now)

    def __call__(
        self,
        c: Candidate,
        words: Words,
        lexical: float,
        relevance: float,
        store: float,
        xref: tuple[float, str | None],
    ) -> Scored:
        memory = c.memory
        recency, recency_reason = _recency_at(memory, self.now, self.window, self.profile)
        graph = 1.0 if c.hops == 0 else c.edge_weight / (1 + c.hops)
        type_match = _type_match(memory.type, self.preferred)
        noise = _noise(c, lexical, words.content_words, self.profile.short_words)
        gate = self.gate
        cross = (1.0 - gate + gate * relevance) * xref[0]
        # (no duplicate penalty yet: the deduper gives it)
        total = _total(self.weights, relevance, recency, graph, type_match, cross, 0.0, noise)
        semantic = self.semantic.get(memory.id) if self.semantic else None
        signals = (lexical, store, recency, graph, type_match, cross, noise, semantic)
        reasons: tuple[str, ...] = ()
        if self.explain:
            reasons = tuple(
                _reasons(c, self.ctx.plan, lexical, recency_reason, xref[1], noise, semantic)
            )
        why = (recency_reason, xref[1])
        return Scored(c, round(relevance, 6), round(total, 6), signals, self.dump, reasons, why)


def _name_trust(
    candidates: Sequence[Candidate],
    words: Sequence[Words],
    relevance: Mapping[str, float],
    query_entities: set[str],
    power: float,
) -> float:
    """How far a name in the question is trusted: 1 when a memory carrying that name matches
    the question as well as any other, less (by `power`) when memories of someone else match
    it much better. A question may name the wrong person ("what did Caroline realise after
    her charity race?" when Melanie ran it); then the name must not outrank the content."""
    if power <= 0 or not query_entities:
        return 1.0
    best = max((relevance.get(c.memory.id, 0.0) for c in candidates), default=0.0)
    named = max(
        (
            relevance.get(c.memory.id, 0.0)
            for c, w in zip(candidates, words, strict=True)
            if not query_entities.isdisjoint(w.entities)
        ),
        default=0.0,
    )
    return 1.0 if best <= 0 else float(min(1.0, named / best) ** power)


def _xref(
    words: Words,
    counts: Counter[str],
    query_entities: set[str],
    saturation: int,
    trust: float = 1.0,
) -> tuple[float, str | None]:
    """Entities this memory (`words`: its words) shares with other results (Memory Fabric's
    cross-reference boost); an entity the question names counts double, as far as the name
    is trusted."""
    best, best_entity = 0.0, None
    for entity, folded in words.pairs:
        others = counts.get(folded, 0) - 1
        if others <= 0:
            continue
        value = min(1.0, others / saturation)
        value *= 0.5 + 0.5 * trust if folded in query_entities else 0.5
        if value > best:
            best, best_entity = value, entity
    return best, best_entity


def _recency(c: Candidate, ctx: RankContext) -> tuple[float, str | None]:
    return _recency_at(c.memory, to_utc(ctx.now), ctx.plan.time_window, ctx.settings)


def _recency_at(
    memory: Memory,
    now: datetime,
    window: TimeRange | None,
    profile: RankingProfile,
) -> tuple[float, str | None]:
    """1 inside an asked time window (fading outside it); else halving every half-life of its
    type (`now` in UTC); 0.5 without a time."""
    created = memory.created_at
    if created is None:
        return 0.5, None
    if window is not None:
        return _window_score(to_utc(created), window, profile.window_fade_days)
    half_life = profile.half_life_days.get(memory.type)
    if half_life is None:
        return 1.0, None
    age_days = max(0.0, (now - to_utc(created)).total_seconds() / _DAY)
    score = 0.5 ** (age_days / half_life)
    return score, (_age_reason(age_days, half_life) if score >= 0.5 else None)


def _age_reason(age_days: float, half_life: float) -> str:
    """ "recent" only for days-old memories; older ones name the half-life they are within."""
    days = round(age_days)
    if days <= RECENT_DAYS:
        return "recent (today)" if days == 0 else f"recent ({days} day{'s' * (days != 1)} old)"
    return f"{days} days old, within its {half_life:g}-day half-life"


def _window_score(when: datetime, window: TimeRange, fade_days: float) -> tuple[float, str | None]:
    start = to_utc(window.start) if window.start else None
    end = to_utc(window.end) if window.end else None
    if (start is None or when >= start) and (end is None or when <= end):
        return 1.0, "inside the asked time window"
    edge = start if start is not None and when < start else end
    assert edge is not None
    days_out = abs((edge - when).total_seconds()) / _DAY
    return 0.5 ** (days_out / fade_days), None


def _type_match(kind: MemoryType, preferred: Sequence[MemoryType]) -> float:
    if not preferred:
        return 0.5
    return 1.0 if kind in preferred else 0.0


def _noise(c: Candidate, lexical: float, content_words: int, short_words: int) -> float:
    if c.hops == 0 and lexical == 0.0 and not any(s.query == SEMANTIC_SOURCE for s in c.sources):
        # the store returned it, but it shares nothing with the question (a memory the
        # semantic index proposed is close in meaning: its list keeps only those)
        return 1.0
    if content_words < short_words:
        return 0.5
    return 0.0


def _reasons(
    c: Candidate,
    plan: QueryPlan,
    lexical: float,
    recency_reason: str | None,
    xref_entity: str | None,
    noise: float,
    semantic: float | None = None,
) -> list[str]:
    reasons = _match_reasons(c, plan, lexical, semantic)
    if c.sources:
        best = min(c.sources, key=lambda s: s.rank)
        derived = _DERIVED_LISTS.get(best.query)
        if derived is not None:
            reasons.append(f"{derived} rank {best.rank}")
        else:
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


def _match_reasons(
    c: Candidate, plan: QueryPlan, lexical: float, semantic: float | None
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
    if semantic is not None and semantic >= _CLOSE_IN_MEANING:
        reasons.append(f"close in meaning (cosine {semantic:.2f})")
    return reasons

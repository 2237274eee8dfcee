"""Stage 4: the transparent weighted formula.

    total = w_relevance * relevance + w_recency * recency + w_graph * graph
          + w_type * type_match + w_xref * cross_reference
          - w_noise * duplicate_penalty - w_noise * noise_penalty

Every signal lies in [0, 1] and travels with the item in its `ScoreBreakdown`, so explain
mode shows exactly what ranked it; nothing is recomputed later.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TypeVar

import numpy as np

from memory_orchestrator.models import (
    LOCAL_SOURCE,
    SEMANTIC_SOURCE,
    Candidate,
    Memory,
    MemoryType,
    QueryPlan,
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
from memory_orchestrator.pipeline.table import CandidateTable, Column, Scores, column
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
    """The weights in the formula's order (read once per request on the hot path); the two
    penalties share one weight."""
    return (w.relevance, w.recency, w.graph, w.type_match, w.cross_reference, w.noise, w.noise)


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


def penalised(table: CandidateTable, row: int, duplicate: float) -> float:
    """Row `row`'s total with this duplicate penalty, from the signals its breakdown shows."""
    b = table.breakdown(row)
    total = weighted_total(
        Weights(**table.scores.weights) if table.scores is not None else Weights(),
        relevance=b.relevance,
        recency=b.recency,
        graph=b.graph,
        type_match=b.type_match,
        cross_reference=b.cross_reference,
        duplicate_penalty=duplicate,
        noise_penalty=b.noise_penalty,
    )
    return round(total, 6)


def rerank(
    candidates: CandidateTable | Sequence[Candidate], ctx: RankContext, *, reasons: bool = True
) -> list[ScoredItem]:
    """Score every candidate; best first (ties: see `tie_order`), so the order is deterministic.

    `reasons=False` leaves the human-readable reasons out (the read path adds them with
    `with_reasons` to the few items it returns, not to every candidate)."""
    table = candidates if isinstance(candidates, CandidateTable) else CandidateTable.of(candidates)
    ranked = rank(table, ctx)
    if reasons:
        return with_reasons(ranked, ctx)
    return [ranked.item(row) for row in range(len(ranked))]


def rank(table: CandidateTable, ctx: RankContext) -> CandidateTable:
    """The table scored (its `scores` columns) and ordered best first (ties: `tie_order`)."""
    candidates, profile = table.candidates, ctx.settings
    words = [words_of(c.memory) for c in candidates]
    lexical, relevance, store = relevance_scores(table, ctx, words)
    counts = _xref_counts(words)
    query_entities = {e.casefold() for e in ctx.plan.entities}
    trust = _name_trust(candidates, words, relevance, query_entities, profile.name_trust_power)
    saturation = profile.xref_saturation
    xrefs = [_xref(w, counts, query_entities, saturation, trust) for w in words]
    now, window = to_utc(ctx.now), ctx.plan.time_window
    ages = [_recency_at(c.memory, now, window, profile) for c in candidates]
    preferred, short = ctx.plan.preferred_types, profile.short_words
    recency = column([score for score, _ in ages])
    graph = column([1.0 if c.hops == 0 else c.edge_weight / (1 + c.hops) for c in candidates])
    type_match = column([_type_match(c.memory.type, preferred) for c in candidates])
    noise = column(
        [
            _noise(c, value, w.content_words, short)
            for c, value, w in zip(candidates, lexical.tolist(), words, strict=True)
        ]
    )
    gate = profile.xref_gate  # the boost counts in proportion to own relevance
    cross = (1.0 - gate + gate * relevance) * column([value for value, _ in xrefs])
    w = profile.weights
    # the formula, term by term in its order (elementwise: the same sums to the last bit);
    # no duplicate penalty yet: the deduper gives it
    total = (
        w.relevance * relevance
        + w.recency * recency
        + w.graph * graph
        + w.type_match * type_match
        + w.cross_reference * cross
        - w.noise * 0.0
        - w.noise * noise
    )
    scores = Scores(
        lexical=lexical,
        store=store,
        relevance=_rounded(relevance),
        recency=recency,
        graph=graph,
        type_match=type_match,
        cross_reference=cross,
        noise=noise,
        duplicate=np.zeros(len(candidates)),
        total=_rounded(total),
        weights=ctx.weights_dump,
        recency_reason=tuple(why for _, why in ages),
        xref_entity=tuple(entity for _, entity in xrefs),
    )
    totals = scores.total.tolist()
    order = list(range(len(candidates)))
    best_first(order, totals.__getitem__, lambda row: candidates[row].memory)
    return replace(table, scores=scores).take(order)


def _rounded(values: Column) -> Column:
    """`values` rounded to 6 decimals as Python rounds (numpy's `round` may differ in the
    last bit), as a breakdown shows them."""
    return column([round(v, 6) for v in values.tolist()])


def with_reasons(
    table: CandidateTable,
    ctx: RankContext,
    rows: Sequence[int] | None = None,
    candidates: Sequence[Candidate] | None = None,
) -> list[ScoredItem]:
    """The `ScoredItem`s of `rows` (all, by default) of a ranked table, with the reasons
    `rerank` gives, ahead of any a later stage added (the deduper's). A merged row (its
    memory carries its duplicates' entities too) has the entity it shares worked out anew,
    among `candidates` (the rows ranked; by default the table's)."""
    scores = table.scores
    assert scores is not None, "the table is not ranked yet"
    counts: Counter[str] | None = None  # (counted only for a row that needs it)
    query_entities = {e.casefold() for e in ctx.plan.entities}
    out = []
    for row in range(len(table)) if rows is None else rows:
        c = table.candidates[row]
        xref_entity = scores.xref_entity[row]
        if table.merged_ids and table.merged_ids[row]:
            if counts is None:
                every = table.candidates if candidates is None else candidates
                counts = _xref_counts([words_of(m.memory) for m in every])
            saturation = ctx.settings.xref_saturation
            _, xref_entity = _xref(words_of(c.memory), counts, query_entities, saturation)
        lexical = round(float(scores.lexical[row]), 6)
        noise, semantic = float(scores.noise[row]), table.cosine(row)
        why = scores.recency_reason[row]
        own = _reasons(c, ctx.plan, lexical, why, xref_entity, noise, semantic)
        out.append(table.item(row, tuple(own)))
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


def by_relevance(table: CandidateTable, ctx: RankContext, limit: int | None = None) -> list[str]:
    """Ids ordered by relevance alone (the first `limit`): the cheap ordering used to pick
    expansion and context seeds."""
    if not len(table):
        return []
    relevance = best_by_relevance(table, ctx, limit) if limit is not None else None
    if relevance is None:
        _, column_, _ = relevance_scores(table, ctx)
        relevance = dict(zip(table.ids, column_.tolist(), strict=True))
    memories = {c.memory.id: c.memory for c in table.candidates}
    ids = list(relevance)
    best_first(ids, relevance.__getitem__, memories.__getitem__)
    return ids[:limit]


def _name_trust(
    candidates: Sequence[Candidate],
    words: Sequence[Words],
    relevance: Column,
    query_entities: set[str],
    power: float,
) -> float:
    """How far a name in the question is trusted: 1 when a memory carrying that name matches
    the question as well as any other, less (by `power`) when memories of someone else match
    it much better. A question may name the wrong person ("what did Caroline realise after
    her charity race?" when Melanie ran it); then the name must not outrank the content."""
    if power <= 0 or not query_entities or not len(candidates):
        return 1.0
    best = float(relevance.max())
    named = max(
        (
            float(relevance[row])
            for row, w in enumerate(words)
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


def _recency_at(
    memory: Memory,
    now: datetime,
    window: TimeRange | None,
    profile: RankingProfile,
) -> tuple[float, str | None]:
    """1 inside an asked time window (0 outside it); else halving every half-life of its
    type (`now` in UTC); 0.5 without a time."""
    created = memory.created_at
    if created is None:
        return 0.5, None
    if window is not None:
        return _window_score(to_utc(created), window)
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


def _window_score(when: datetime, window: TimeRange) -> tuple[float, str | None]:
    start = to_utc(window.start) if window.start else None
    end = to_utc(window.end) if window.end else None
    if (start is None or when >= start) and (end is None or when <= end):
        return 1.0, "inside the asked time window"
    return 0.0, None


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

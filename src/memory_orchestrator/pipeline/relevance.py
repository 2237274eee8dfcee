"""Relevance, the first signal of the re-ranking formula: how well a candidate answers the
query, from its own words (a BM25-like term match with the query's entities weighted in, and
its neighbours' words at a lower weight), the store's and the derived indexes' scores, its
meaning (optional), and what it inherits from the candidate it was reached from.

`RankContext` is what ranking reads besides the candidate table (`pipeline.table`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property, lru_cache

import numpy as np

from memory_orchestrator.models import (
    LOCAL_SOURCE,
    Candidate,
    Memory,
    QueryPlan,
    QuestionType,
)
from memory_orchestrator.pipeline.table import CandidateTable, Column, column
from memory_orchestrator.settings import RankingProfile
from memory_orchestrator.text import content_word_count, term_set

_MONTH = (
    r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
)


# A time expression in a memory's text: a date, a month or weekday, a year, "yesterday",
# "last week", "two days ago", "next month"... (English; general, not tied to any dataset).
_TIME_EXPRESSION = re.compile(
    r"\b(?:"
    rf"(?:{_MONTH})\b|(?:mon|tues|wednes|thurs|fri|satur|sun)day|yesterday|today|tonight|tomorrow"
    r"|(?:last|next|this|past|coming|previous)\s+(?:week(?:end)?|month|year|night|time|summer"
    r"|winter|spring|fall|autumn|morning|evening)"
    r"|(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|few|couple(?:\s+of)?|several"
    r"|\d+)\s+(?:days?|weeks?|months?|years?)\s+(?:ago|back|earlier|later)"
    r"|(?:19|20)\d\d|\d{1,2}[/.-]\d{1,2}(?:[/.-]\d{2,4})?|ago|recently|lately|weekend"
    r")",
    re.IGNORECASE,
)


@lru_cache(maxsize=16_384)
def has_time_expression(text: str) -> bool:
    """Whether a memory's text names a time (memoized: the same memories come back for
    question after question, and the pattern is costly to run)."""
    return _TIME_EXPRESSION.search(text) is not None


@dataclass(frozen=True)
class RankContext:
    """What ranking reads besides the candidate table: the question's plan, the moment of
    the request and the ranking profile; one for a whole read (what changes as the read
    goes, the candidates and what they lend each other, is the table)."""

    plan: QueryPlan
    now: datetime
    settings: RankingProfile

    @cached_property
    def weights_dump(self) -> dict[str, float]:
        return self.settings.weights.model_dump()


def list_signals(candidates: Sequence[Candidate], score_share: float) -> tuple[Column, Column]:
    """Each candidate's store signal and local index score, from the lists that found it
    (0 for a candidate no list found: a context neighbour, a graph hop)."""
    if not candidates:
        return column(), column()
    fused = column([c.fused_score for c in candidates])
    best = float(fused.max()) or 1.0
    store = fused / best
    if score_share > 0:
        scores = _store_scores(candidates)
        own = column([scores.get(c.memory.id, 0.0) for c in candidates])
        store = (1 - score_share) * store + score_share * own
    found = {c.memory.id: s.score for c in candidates for s in c.sources if s.query == LOCAL_SOURCE}
    top = max(found.values(), default=0.0)
    local = column([found.get(c.memory.id, 0.0) / top if top > 0 else 0.0 for c in candidates])
    return store, local


def relevance_scores(
    table: CandidateTable, ctx: RankContext, words: Sequence[Words] | None = None
) -> tuple[Column, Column, Column]:
    """Per row: own term match, relevance, and the store signal it was blended with.
    `words`: each row's `words_of`, in order, when the caller has them already."""
    candidates = table.candidates
    if words is None:
        words = [words_of(c.memory) for c in candidates]
    lexical = _Lexical(table, ctx, words).scores()
    blend = _Blend(table, ctx)
    relevance = blend.values(lexical)
    inherits = table.context_of or any(c.hops for c in candidates)
    if inherits:
        relevance = _inherited(table, ctx, lexical, relevance)
    if blend.boost:
        relevance = blend.timed(relevance)
    return lexical, relevance, blend.store


def _inherited(
    table: CandidateTable, ctx: RankContext, lexical: Column, relevance: Column
) -> Column:
    """`relevance` with what context neighbours and graph hops inherit from their seeds."""
    settings, semantic = ctx.settings, table.semantic
    share, semantic_share = settings.neighbor_share, settings.semantic_share
    meaning = bool(semantic_share > 0 and not np.isnan(semantic).all())
    base = {c.memory.id: float(relevance[i]) for i, c in enumerate(table.candidates) if not c.hops}
    out = relevance.tolist()
    for i, c in enumerate(table.candidates):
        seed = table.context_of.get(c.memory.id)
        if c.hops == 0 and seed is not None:
            # a neighbour in time of a top candidate: a share of that candidate's relevance
            out[i] = max(out[i], base.get(seed, 0.0) * share)
        elif c.hops > 0:  # expanded items inherit part of their seed's relevance
            seed_relevance = base.get(c.expanded_from or "", 0.0)
            if seed is not None:
                inherited = seed_relevance * share
            else:
                inherited = seed_relevance * c.edge_weight * share**c.hops
            own = float(lexical[i])
            if meaning:
                cosine = table.cosine(i)
                own = (1 - semantic_share) * own + semantic_share * (cosine or 0.0)
            out[i] = max(own, inherited)
    return column(out)


class _Blend:
    """A row's relevance from its term match and what the lists say of it, step by step,
    over a column or one row (the one place the steps are written: `relevance_scores` and
    `best_by_relevance` must agree to the last bit, and elementwise array arithmetic is the
    same IEEE arithmetic, in the same order)."""

    def __init__(self, table: CandidateTable, ctx: RankContext) -> None:
        settings = ctx.settings
        self.share = settings.lexical_share
        self.store, local = list_signals(table.candidates, settings.store_score_share)
        # the local index's score keeps how far apart its hits are
        self.local_share = settings.local_share
        self.local = local if self.local_share > 0 else None
        # meaning, not words: the optional semantic stage
        self.semantic_share = settings.semantic_share
        known = ~np.isnan(table.semantic)
        wanted = self.semantic_share > 0 and bool(known.any())
        self.semantic = np.where(known, table.semantic, 0.0) if wanted else None
        boost = settings.when_time_boost
        self.boost = boost if boost > 0 and ctx.plan.question_type is QuestionType.WHEN else 0.0
        self.timed_rows = (
            column([has_time_expression(c.memory.content) for c in table.candidates]) > 0
            if self.boost
            else None
        )

    def values(self, term_match: Column) -> Column:
        share = self.share
        value = share * term_match + (1 - share) * self.store
        if self.local is not None:
            share = self.local_share
            value = (1 - share) * value + share * self.local
        if self.semantic is not None:
            share = self.semantic_share
            value = (1 - share) * value + share * self.semantic
        return value

    def one(self, row: int, term_match: float) -> float:
        share = self.share
        value = share * term_match + (1 - share) * float(self.store[row])
        if self.local is not None:
            share = self.local_share
            value = (1 - share) * value + share * float(self.local[row])
        if self.semantic is not None:
            share = self.semantic_share
            value = (1 - share) * value + share * float(self.semantic[row])
        if self.timed_rows is not None and self.timed_rows[row]:
            value = min(1.0, value + self.boost)
        return value

    def timed(self, values: Column) -> Column:
        """`values`, lifted for the rows carrying a time expression on a "when" question."""
        assert self.timed_rows is not None
        return np.where(self.timed_rows, np.minimum(1.0, values + self.boost), values)


class _Lexical:
    """The term match of a read's rows: what it reads of them all (the terms' IDF, the
    entities) worked out at once, each row's own score on demand."""

    def __init__(self, table: CandidateTable, ctx: RankContext, listed: Sequence[Words]) -> None:
        plan, settings = ctx.plan, ctx.settings
        self.ids = table.ids
        # (the IDF counts each memory once)
        idf = _idf(plan.terms, [w.terms for w in dict(zip(self.ids, listed, strict=True)).values()])
        window = settings.context_window
        self.match = _TermMatch(plan, idf, settings.entity_share, window)
        self.around = table.around if window > 0 else {}
        self.words = listed

    def score(self, row: int) -> float:
        near: list[frozenset[str]] = []
        memory_id = self.ids[row]
        if memory_id in self.around:  # (each text's terms, cached: neighbours recur question
            # after question, their combinations much less; no term spans two texts)
            near = [term_set(m.content) for m in self.around[memory_id]]
        return self.match.score(self.words[row], near)

    def scores(self) -> Column:
        return column([self.score(row) for row in range(len(self.ids))])


def best_by_relevance(
    table: CandidateTable, ctx: RankContext, limit: int
) -> dict[str, float] | None:
    """The relevance `relevance_scores` gives of at least the `limit` most relevant rows,
    and of every other row that could tie with them, for a caller that ranks only the best
    few (`reranker.by_relevance`). A row's ceiling, its relevance were its term match the
    best possible, costs no term match: the term match is worked out in the order of the
    ceilings, until the next ceiling is below the `limit`-th best relevance found (each step
    of the blend is a rounded product or sum with weights >= 0, so a larger term match never
    gives a smaller relevance, to the last bit). None where a row inherits another's
    relevance (a graph hop or a context neighbour): the caller scores them all (and where
    two rows are one memory)."""
    candidates = table.candidates
    if limit < 1:
        return {}
    if limit >= len(candidates) or table.context_of or any(c.hops for c in candidates):
        return None
    ids = table.ids
    if len(set(ids)) < len(ids):
        return None
    lexical = _Lexical(table, ctx, [words_of(c.memory) for c in candidates])
    blend = _Blend(table, ctx)
    ceiling = lexical.match.ceiling
    bounds = [blend.one(row, ceiling) for row in range(len(ids))]
    found: dict[str, float] = {}
    best: list[float] = []  # the `limit` highest relevances found, highest first
    for row in sorted(range(len(ids)), key=bounds.__getitem__, reverse=True):
        if len(best) == limit and bounds[row] < best[-1]:
            break
        value = found[ids[row]] = blend.one(row, lexical.score(row))
        if len(best) < limit or value > best[-1]:
            best = sorted([*best, value], reverse=True)[:limit]
    return found


def _store_scores(candidates: Sequence[Candidate]) -> dict[str, float]:
    """The store's own scores, min-max scaled per subquery (best 1, worst 0), best over the
    subqueries that found each candidate: unlike a rank, they keep how far apart hits are."""
    low: dict[str, float] = {}
    high: dict[str, float] = {}
    for c in candidates:
        for query, _, score, _ in c.sources:  # (unpacked: a named field is a slower read)
            if query not in low:
                low[query] = high[query] = score
            elif score < low[query]:  # (what min() and max() keep, ties included)
                low[query] = score
            elif score > high[query]:
                high[query] = score
    out: dict[str, float] = {}
    for c in candidates:
        best = 0.0
        for query, _, score, _ in c.sources:
            span = high[query] - low[query]
            scaled = (score - low[query]) / span if span > 0 else 1.0
            best = max(best, scaled)
        out[c.memory.id] = best
    return out


@dataclass(frozen=True, slots=True)
class Words:
    """What ranking reads from a memory's text, worked out once per text: its stemmed
    terms (entities included), its text and entities case-folded, each entity with its
    case-folded form (in the memory's order), and how many content words it has."""

    terms: frozenset[str]
    text: str
    entities: frozenset[str]
    pairs: tuple[tuple[str, str], ...]
    content_words: int


def words_of(memory: Memory) -> Words:
    return _words(memory.content, memory.entities)


@lru_cache(maxsize=32_768)
def _words(content: str, entities: tuple[str, ...]) -> Words:
    pairs = tuple((e, e.casefold()) for e in entities)
    return Words(
        # (the terms of the text and its entities joined: a neighbour's own text shares the
        # cache entry, see `_lexicals`)
        term_set(content) | term_set(" ".join(entities)),
        content.casefold(),
        frozenset(folded for _, folded in pairs),
        pairs,
        content_word_count(content),
    )


def _idf(query_terms: Sequence[str], docs: Sequence[frozenset[str]]) -> dict[str, float]:
    n = len(docs)
    idf = {}
    for term in query_terms:
        df = len([d for d in docs if term in d])
        idf[term] = math.log(1.0 + (n + 1) / (df + 0.5))
    return idf


class _TermMatch:
    """IDF-weighted share of the query's terms found in a memory (a term found only in the
    memories next to it counts `window`), with entity matches weighted by rarity. What does
    not depend on the memory is worked out once per request, not once per candidate."""

    def __init__(
        self,
        plan: QueryPlan,
        idf: dict[str, float],
        entity_share: float,
        window: float,
    ) -> None:
        self.idf = list(idf.items())
        self.total = sum(idf.values())
        self.window = window
        self.entities = [e.casefold() for e in plan.entities]
        self.distinct = float(len(set(self.entities)))  # (the entities' total weight)
        self.entity_share = (
            entity_share * self.distinct / len(plan.entities) if plan.entities else 0.0
        )

    @property
    def ceiling(self) -> float:
        """No memory's `score` is higher: every term found in its own text, every entity
        named, summed and combined as `score` sums and combines them (a norm of 1)."""
        found = 0.0
        for _, w in self.idf:
            found += w
        hit = 0.0
        for _ in self.entities:
            hit += 1.0
        return self._combined(found, hit)

    def score(self, own: Words, near: Sequence[frozenset[str]]) -> float:
        """`near`: the term sets of the memories next to it (a term in any counts)."""
        window, terms = self.window, own.terms
        found = 0.0  # (the same sum, in the same order, as sum() over the terms)
        for t, w in self.idf:
            if t in terms:
                found += w
            else:
                for other in near:
                    if t in other:
                        found += w * window
                        break
        memory_entities, text = own.entities, own.text
        hit = 0.0
        for e in self.entities:
            if e in memory_entities or e in text:
                hit += 1.0
        return self._combined(found, hit)

    def _combined(self, found: float, hit: float) -> float:
        """The term match from the terms' found IDF and the entities named."""
        coverage = found / self.total if self.total else 0.0
        if not self.entities:
            return coverage
        share = self.entity_share
        hit_share = hit / self.distinct if share else 0.0
        return (1 - share) * coverage + share * hit_share

"""Relevance, the first signal of the re-ranking formula: how well a candidate answers the
query, from its own words (a BM25-like term match with the query's entities weighted in, and
its neighbours' words at a lower weight), the store's and the derived indexes' scores, its
meaning (optional), and what it inherits from the candidate it was reached from.

`RankContext` is what ranking reads besides the candidates.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property, lru_cache
from typing import Protocol

from memory_orchestrator.models import (
    LOCAL_SOURCE,
    Candidate,
    Memory,
    QueryPlan,
    QuestionType,
)
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


class _StoreSignals:
    """Each candidate's store signal and local index score, worked out once a request: the
    stages after the retrieval add candidates no list found (context neighbours, graph
    hops), which change neither (no list's best or worst score, no best fused rank) and
    get 0 from both; when the candidates are the ones seen before (the same objects, in
    order) followed by only such, the values seen are kept, else worked out anew."""

    def __init__(self) -> None:
        self._seen: list[Candidate] = []
        self._share = -1.0
        self._store: dict[str, float] = {}
        self._local: dict[str, float] = {}

    def of(
        self, candidates: Sequence[Candidate], score_share: float
    ) -> tuple[dict[str, float], dict[str, float]]:
        seen = len(self._seen)
        if (
            score_share != self._share
            or len(candidates) < seen
            or any(a is not b for a, b in zip(candidates, self._seen, strict=False))
            or any(c.sources or c.fused_score for c in candidates[seen:])
        ):
            self._seen, self._share = list(candidates), score_share
            self._store = _store_signal(candidates, score_share)
            self._local = _local_scores(candidates)
            return self._store, self._local
        store = dict(self._store)
        store.update((c.memory.id, 0.0) for c in candidates[seen:])
        return store, self._local


class Text(Protocol):
    """What ranking reads of a memory next to another in time: its id and its text (a
    `Memory`, or the local index's `Neighbour`)."""

    @property
    def id(self) -> str: ...

    @property
    def content(self) -> str: ...


@dataclass(frozen=True)
class RankContext:
    """What ranking reads besides the candidates. `around` maps a memory id to the memories
    next to it in time (fetched by the service in one store call, when
    `context_seeds` > 0, or from the local index); `context_of` maps a neighbour fetched
    that way to its seed."""

    plan: QueryPlan
    now: datetime
    settings: RankingProfile
    around: Mapping[str, Sequence[Text]] = field(default_factory=dict)
    context_of: Mapping[str, str] = field(default_factory=dict)
    semantic: Mapping[str, float] = field(default_factory=dict)
    # what the store's lists say of the candidates, kept by `_StoreSignals` for the later
    # stages of the request (a context made from this one with `replace` shares it)
    signals: _StoreSignals = field(default_factory=_StoreSignals, compare=False)

    @cached_property
    def weights_dump(self) -> dict[str, float]:
        return self.settings.weights.model_dump()


def relevance_scores(
    candidates: Sequence[Candidate], ctx: RankContext, words: Sequence[Words] | None = None
) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """Per candidate: own term match, relevance, and the store signal it was blended with.
    `words`: each candidate's `words_of`, in order, when the caller has them already."""
    settings = ctx.settings
    if words is None:
        words = [words_of(c.memory) for c in candidates]
    lexical = _lexicals(candidates, ctx, words)
    store, local = ctx.signals.of(candidates, settings.store_score_share)
    blend = _Blend(ctx, store, local)
    relevance = {
        c.memory.id: blend(c.memory.id, lexical[c.memory.id]) for c in candidates if c.hops == 0
    }
    semantic, semantic_share = blend.semantic, settings.semantic_share
    base = dict(relevance)
    for c in candidates:
        seed = ctx.context_of.get(c.memory.id)
        if c.hops == 0 and seed is not None:
            # a neighbour in time of a top candidate: a share of that candidate's relevance
            inherited = base.get(seed, 0.0) * settings.neighbor_share
            relevance[c.memory.id] = max(relevance[c.memory.id], inherited)
        elif c.hops > 0:  # expanded items inherit part of their seed's relevance
            seed_relevance = base.get(c.expanded_from or "", 0.0)
            if seed is not None:
                inherited = seed_relevance * settings.neighbor_share
            else:
                inherited = seed_relevance * c.edge_weight * settings.expansion_decay**c.hops
            own = lexical[c.memory.id]
            if semantic is not None:
                own = (1 - semantic_share) * own + semantic_share * semantic.get(c.memory.id, 0.0)
            relevance[c.memory.id] = max(own, inherited)
    if blend.boost:
        for c in candidates:
            relevance[c.memory.id] = blend.timed(c.memory, relevance[c.memory.id])
    return lexical, relevance, store


class _Blend:
    """A candidate's relevance from its term match and what the lists say of it, step by
    step (the one place the steps are written: `relevance_scores` and `best_by_relevance`
    must agree to the last bit)."""

    def __init__(
        self, ctx: RankContext, store: Mapping[str, float], local: Mapping[str, float]
    ) -> None:
        settings = ctx.settings
        self.share, self.store = settings.lexical_share, store
        # the local index's score keeps how far apart its hits are
        self.local_share = settings.local_share
        self.local = local if self.local_share > 0 else None
        # meaning, not words: the optional semantic stage
        self.semantic_share = settings.semantic_share
        self.semantic = ctx.semantic if ctx.semantic and self.semantic_share > 0 else None
        boost = settings.when_time_boost
        self.boost = boost if boost > 0 and ctx.plan.question_type is QuestionType.WHEN else 0.0

    def __call__(self, memory_id: str, term_match: float) -> float:
        share = self.share
        value = share * term_match + (1 - share) * self.store[memory_id]
        if self.local is not None:
            share = self.local_share
            value = (1 - share) * value + share * self.local.get(memory_id, 0.0)
        if self.semantic is not None:
            share = self.semantic_share
            value = (1 - share) * value + share * self.semantic.get(memory_id, 0.0)
        return value

    def timed(self, memory: Memory, value: float) -> float:
        """`value`, lifted for a memory carrying a time expression on a "when" question."""
        if self.boost and has_time_expression(memory.content):
            return min(1.0, value + self.boost)
        return value


def _lexicals(
    candidates: Sequence[Candidate], ctx: RankContext, listed: Sequence[Words]
) -> dict[str, float]:
    lexical = _Lexical(candidates, ctx, listed)
    return {c.memory.id: lexical.score(c.memory.id) for c in candidates}


class _Lexical:
    """The term match of a request's candidates: what it reads of them all (the terms' IDF,
    the entities' weights, the average length) worked out at once, each one's own score on
    demand."""

    def __init__(
        self, candidates: Sequence[Candidate], ctx: RankContext, listed: Sequence[Words]
    ) -> None:
        plan, settings = ctx.plan, ctx.settings
        words = {c.memory.id: w for c, w in zip(candidates, listed, strict=True)}
        idf = _idf(plan.terms, [w.terms for w in words.values()])
        window = settings.context_window
        self.match = _TermMatch(plan, idf, settings.entity_share, window)
        self.around = ctx.around if window > 0 else {}
        self.words = words

    def score(self, memory_id: str) -> float:
        near: list[frozenset[str]] = []
        if memory_id in self.around:  # (each text's terms, cached: neighbours recur question
            # after question, their combinations much less; no term spans two texts)
            near = [term_set(m.content) for m in self.around[memory_id]]
        return self.match.score(self.words[memory_id], near)


def best_by_relevance(
    candidates: Sequence[Candidate], ctx: RankContext, limit: int
) -> dict[str, float] | None:
    """The relevance `relevance_scores` gives of at least the `limit` most relevant
    candidates, and of every other candidate that could tie with them, for a caller that
    ranks only the best few (`reranker.by_relevance`). A candidate's ceiling, its relevance
    were its term match the best possible, costs no term match: the term match is worked out
    in the order of the ceilings, until the next ceiling is below the `limit`-th best
    relevance found (each step of the blend is a rounded product or sum with weights >= 0,
    so a larger term match never gives a smaller relevance, to the last bit). None where a
    candidate inherits another's relevance (a graph hop or a context neighbour): the caller
    scores them all (and where two candidates are one memory)."""
    if limit < 1:
        return {}
    if limit >= len(candidates) or ctx.context_of or any(c.hops for c in candidates):
        return None
    lexical = _Lexical(candidates, ctx, [words_of(c.memory) for c in candidates])
    blend = _Blend(ctx, *ctx.signals.of(candidates, ctx.settings.store_score_share))

    def blended(memory: Memory, term_match: float) -> float:
        return blend.timed(memory, blend(memory.id, term_match))

    ceiling = lexical.match.ceiling
    bounds = {c.memory.id: blended(c.memory, ceiling) for c in candidates}
    if len(bounds) < len(candidates):
        return None
    found: dict[str, float] = {}
    best: list[float] = []  # the `limit` highest relevances found, highest first
    for c in sorted(candidates, key=lambda c: bounds[c.memory.id], reverse=True):
        memory_id = c.memory.id
        if len(best) == limit and bounds[memory_id] < best[-1]:
            break
        value = found[memory_id] = blended(c.memory, lexical.score(memory_id))
        if len(best) < limit or value > best[-1]:
            best = sorted([*best, value], reverse=True)[:limit]
    return found


def _store_signal(candidates: Sequence[Candidate], score_share: float) -> dict[str, float]:
    """The fused rank scaled to the best candidate, blended with the store's own scores."""
    max_fused = max(c.fused_score for c in candidates) or 1.0
    store = {c.memory.id: c.fused_score / max_fused for c in candidates}
    if score_share > 0:
        scores = _store_scores(candidates)
        store = {
            i: (1 - score_share) * v + score_share * scores.get(i, 0.0) for i, v in store.items()
        }
    return store


def _local_scores(candidates: Sequence[Candidate]) -> dict[str, float]:
    """The local index's score of each candidate it found, scaled to its best hit."""
    found = {c.memory.id: s.score for c in candidates for s in c.sources if s.query == LOCAL_SOURCE}
    best = max(found.values(), default=0.0)
    return {i: v / best for i, v in found.items()} if best > 0 else {}


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

"""The seeds' short cut: the best few candidates by relevance without every term match, and
the store's signals worked out once a request. Both must give what the full computation
gives, to the last bit."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_orchestrator.models import (
    LOCAL_SOURCE,
    SEMANTIC_SOURCE,
    Candidate,
    QuestionType,
    Source,
)
from memory_orchestrator.pipeline import relevance
from memory_orchestrator.pipeline.relevance import (
    RankContext,
    best_by_relevance,
    relevance_scores,
)
from memory_orchestrator.pipeline.reranker import by_relevance
from memory_orchestrator.settings import RankingProfile
from tests.factories import NOW, memory, plan

WORDS = ("ana", "hike", "lake", "paint", "sunset", "dog", "garden", "bo", "yesterday", "may")
QUESTION = "when did Ana hike to the lake and paint the sunset"

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)


@st.composite
def candidate_sets(draw: st.DrawFn) -> tuple[list[Candidate], dict[str, float]]:
    """Candidates found by two subqueries, the local index and the semantic index (each
    list ranked, with scores), some with Ana's name; and their cosines."""
    count = draw(st.integers(min_value=2, max_value=24))
    out: list[Candidate] = []
    cosines: dict[str, float] = {}
    for n in range(count):
        sources = []
        for query in ("q1", "q2", LOCAL_SOURCE, SEMANTIC_SOURCE):
            if draw(st.booleans()):
                score = draw(st.floats(min_value=0, max_value=30, allow_nan=False))
                sources.append(Source(query, n + 1, score))
        text = draw(texts)
        named = ("Ana",) if "ana" in text else ()
        when = NOW - timedelta(days=draw(st.integers(min_value=0, max_value=90)))
        out.append(
            Candidate(
                memory=memory(f"m{n}", text, entities=named, created_at=when),
                sources=tuple(sources),
                fused_score=draw(st.sampled_from((0.0, 1 / 61, 1 / 62, 2 / 61, 1 / 70))),
            )
        )
        if draw(st.booleans()):
            cosines[f"m{n}"] = draw(st.floats(min_value=0, max_value=1, allow_nan=False))
    return out, cosines


def context(cosines: dict[str, float], when: bool) -> RankContext:
    asked = plan(QUESTION, entities=("Ana",))
    if when:
        asked = asked.model_copy(update={"question_type": QuestionType.WHEN})
    return RankContext(plan=asked, now=NOW, settings=RankingProfile(), semantic=cosines)


@settings(max_examples=300, deadline=None)
@given(found=candidate_sets(), when=st.booleans(), limit=st.integers(min_value=1, max_value=8))
def test_the_best_few_by_relevance_are_the_full_orderings_first(
    found: tuple[list[Candidate], dict[str, float]], when: bool, limit: int
) -> None:
    candidates, cosines = found
    ctx = context(cosines, when)
    full = by_relevance(candidates, ctx)
    assert by_relevance(candidates, context(cosines, when), limit) == full[:limit]
    scored = best_by_relevance(candidates, context(cosines, when), limit)
    if scored is not None:  # each relevance it worked out is the full computation's
        _, every, _ = relevance_scores(candidates, context(cosines, when))
        assert {i: every[i] for i in scored} == scored


def test_the_best_few_skip_the_term_match_of_candidates_that_cannot_reach_them() -> None:
    strong = [
        Candidate(
            memory=memory(f"s{n}", "Ana hiked to the lake and painted the sunset"),
            sources=(Source("q1", n + 1, 10.0), Source(LOCAL_SOURCE, n + 1, 9.0)),
            fused_score=1 / (61 + n),
        )
        for n in range(3)
    ]
    weak = [
        Candidate(memory=memory(f"w{n}", "the dog dug in the garden"), sources=(), fused_score=0)
        for n in range(20)
    ]
    ctx = context({}, when=False)
    scored = best_by_relevance([*strong, *weak], ctx, 3)
    assert scored is not None
    assert set(scored) == {"s0", "s1", "s2"}  # no weak one's term match was worked out
    assert by_relevance([*strong, *weak], context({}, when=False), 3) == ["s0", "s1", "s2"]


def test_inherited_relevance_and_a_memory_twice_take_the_full_computation() -> None:
    first = Candidate(memory=memory("a", "Ana hiked"), sources=(Source("q1", 1, 1.0),))
    hop = Candidate(memory=memory("b", "the lake"), hops=1, expanded_from="a")
    ctx = context({}, when=False)
    assert best_by_relevance([first, hop, first], ctx, 1) is None
    assert best_by_relevance([first, hop], replace(ctx, context_of={"b": "a"}), 1) is None
    again = replace(first, sources=(Source("q2", 1, 1.0),))
    other = Candidate(memory=memory("c", "the lake"), sources=(Source("q1", 2, 0.5),))
    assert best_by_relevance([first, other, again], ctx, 1) is None  # one memory twice
    assert by_relevance([first, other, again], ctx, 0) == []


def test_store_signals_are_kept_for_candidates_added_without_a_list() -> None:
    """Neighbours and graph hops (found by no list) added after the retrieval keep every
    retrieved candidate's store signal and local score, and get 0; a list's candidate added,
    one changed or one dropped has them worked out anew."""
    retrieved = [
        Candidate(
            memory=memory(f"m{n}", f"note {n}"),
            sources=(Source("q1", n + 1, 5.0 - n), Source(LOCAL_SOURCE, n + 1, 3.0 / (n + 1))),
            fused_score=1 / (61 + n),
        )
        for n in range(4)
    ]
    neighbour = Candidate(memory=memory("n", "next turn"))
    listed = Candidate(
        memory=memory("x", "found late"), sources=(Source("q1", 9, 9.0),), fused_score=0.5
    )
    changed = replace(retrieved[0], sources=(Source("q1", 1, 50.0), Source(LOCAL_SOURCE, 1, 7.0)))
    signals = relevance._StoreSignals()
    _, first = signals.of(retrieved, 0.5)
    for later, kept in (
        ([*retrieved, neighbour], True),
        ([*retrieved, neighbour, listed], False),  # a list's candidate
        ([changed, *retrieved[1:], neighbour, listed], False),  # another candidate first
        (retrieved[1:], False),  # one dropped
    ):
        store, local = signals.of(later, 0.5)
        assert store == relevance._store_signal(later, 0.5)
        assert local == relevance._local_scores(later)
        assert (local is first) is kept
        first = local

"""The seeds' short cut: the best few candidates by relevance without every term match must
give what the full computation gives, to the last bit; and the lists' signals of the rows no
list found are 0, the others' unchanged by them."""

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
from memory_orchestrator.pipeline.relevance import (
    RankContext,
    best_by_relevance,
    list_signals,
    relevance_scores,
)
from memory_orchestrator.pipeline.reranker import by_relevance
from memory_orchestrator.pipeline.table import CandidateTable
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


def context(when: bool) -> RankContext:
    asked = plan(QUESTION, entities=("Ana",))
    if when:
        asked = asked.model_copy(update={"question_type": QuestionType.WHEN})
    return RankContext(plan=asked, now=NOW, settings=RankingProfile())


def table(
    candidates: list[Candidate], cosines: dict[str, float] | None = None, **kwargs: object
) -> CandidateTable:
    return CandidateTable.of(candidates, known=cosines or {}, **kwargs)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(found=candidate_sets(), when=st.booleans(), limit=st.integers(min_value=1, max_value=8))
def test_the_best_few_by_relevance_are_the_full_orderings_first(
    found: tuple[list[Candidate], dict[str, float]], when: bool, limit: int
) -> None:
    candidates, cosines = found
    ctx, rows = context(when), table(candidates, cosines)
    full = by_relevance(rows, ctx)
    assert by_relevance(rows, ctx, limit) == full[:limit]
    scored = best_by_relevance(rows, ctx, limit)
    if scored is not None:  # each relevance it worked out is the full computation's
        _, every, _ = relevance_scores(rows, ctx)
        by_id = dict(zip(rows.ids, every.tolist(), strict=True))
        assert {i: by_id[i] for i in scored} == scored


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
    ctx = context(when=False)
    scored = best_by_relevance(table([*strong, *weak]), ctx, 3)
    assert scored is not None
    assert set(scored) == {"s0", "s1", "s2"}  # no weak one's term match was worked out
    assert by_relevance(table([*strong, *weak]), ctx, 3) == ["s0", "s1", "s2"]


def test_inherited_relevance_and_a_memory_twice_take_the_full_computation() -> None:
    first = Candidate(memory=memory("a", "Ana hiked"), sources=(Source("q1", 1, 1.0),))
    hop = Candidate(memory=memory("b", "the lake"), hops=1, expanded_from="a")
    ctx = context(when=False)
    assert best_by_relevance(table([first, hop, first]), ctx, 1) is None
    assert best_by_relevance(table([first, hop], context_of={"b": "a"}), ctx, 1) is None
    again = replace(first, sources=(Source("q2", 1, 1.0),))
    other = Candidate(memory=memory("c", "the lake"), sources=(Source("q1", 2, 0.5),))
    assert best_by_relevance(table([first, other, again]), ctx, 1) is None  # one memory twice
    assert by_relevance(table([first, other, again]), ctx, 0) == []


def test_rows_no_list_found_get_no_list_signal_and_change_no_others() -> None:
    """Neighbours and graph hops (found by no list) added below the retrieved rows get a
    store signal and a local score of 0, and leave the retrieved rows' as they were."""
    retrieved = [
        Candidate(
            memory=memory(f"m{n}", f"note {n}"),
            sources=(Source("q1", n + 1, 5.0 - n), Source(LOCAL_SOURCE, n + 1, 3.0 / (n + 1))),
            fused_score=1 / (61 + n),
        )
        for n in range(4)
    ]
    neighbour = Candidate(memory=memory("n", "next turn"))
    store, local = list_signals(retrieved, 0.5)
    grown_store, grown_local = list_signals([*retrieved, neighbour], 0.5)
    assert grown_store.tolist() == [*store.tolist(), 0.0]
    assert grown_local.tolist() == [*local.tolist(), 0.0]
    assert local.max() == 1.0  # scaled to the local index's best hit

"""The LoCoMo levers of the re-ranker: context neighbours, participant-aware entities,
time expressions for "when" questions, the store's own scores, and the tuning search."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from memory_orchestrator.eval.tune import Step, coordinate_search, with_value
from memory_orchestrator.models import Candidate, QuestionType, Source
from memory_orchestrator.pipeline.relevance import RankContext
from memory_orchestrator.pipeline.reranker import rerank
from memory_orchestrator.pipeline.table import CandidateTable, column
from memory_orchestrator.settings import RankingProfile, Settings
from memory_orchestrator.settings.presets import PRESETS
from tests.factories import NOW, candidate, memory, plan


def ctx(query: str, settings: RankingProfile | None = None, **kwargs: Any) -> RankContext:
    return RankContext(plan=plan(query, **kwargs), now=NOW, settings=settings or RankingProfile())


def by_id(items: Sequence[Any]) -> dict[str, Any]:
    return {i.id: i for i in items}


def test_a_neighbours_words_count_toward_a_memorys_term_match_at_the_window_weight() -> None:
    turn = candidate(memory("t", "Caroline: I went there yesterday"))
    before = memory("b", "Melanie: How was the pottery class?")
    off = ctx("pottery class", RankingProfile(context_window=0.0))
    on = ctx("pottery class", RankingProfile(context_window=0.5))
    around = {"t": [before]}
    table = CandidateTable.of([turn], around=around)
    assert rerank(table, off)[0].breakdown.lexical == 0.0
    assert rerank(table, on)[0].breakdown.lexical == pytest.approx(0.5)


def test_a_fetched_neighbour_inherits_its_share_of_the_seeds_relevance() -> None:
    seed = candidate(memory("s", "pottery class on Sunday"), rank=1)
    near = candidate(memory("n", "it was lovely"), hops=2, expanded_from="s")
    settings = RankingProfile(neighbor_share=0.9)
    table = CandidateTable.of([seed, near], context_of={"n": "s"})
    items = by_id(rerank(table, ctx("pottery class", settings)))
    assert items["n"].breakdown.relevance == pytest.approx(0.9 * items["s"].breakdown.relevance)
    # the same memory reached by plain graph expansion (two hops) inherits the share per hop
    items = by_id(rerank([seed, near], ctx("pottery class", settings)))
    assert items["n"].breakdown.relevance == pytest.approx(0.81 * items["s"].breakdown.relevance)


def test_when_questions_lift_memories_that_carry_a_time_expression() -> None:
    dated = candidate(memory("d", "We adopted the puppy from the shelter last week"), rank=2)
    undated = candidate(memory("u", "We adopted the puppy from the shelter"), rank=1)
    settings = RankingProfile(when_time_boost=0.2)
    # "kitten" matches neither, so relevance stays under its cap and the boost can show
    when = replace(
        ctx("adopt puppy kitten", settings),
        plan=plan("adopt puppy kitten").model_copy(update={"question_type": QuestionType.WHEN}),
    )
    what = ctx("adopt puppy kitten", settings)
    assert rerank([dated, undated], when)[0].id == "d"
    assert rerank([dated, undated], what)[0].id == "u"


def test_the_store_score_share_keeps_how_far_apart_the_stores_hits_are() -> None:
    def hit(mem_id: str, rank: int, score: float) -> Candidate:
        source = Source("q", rank, score)
        return Candidate(
            memory=memory(mem_id, "unrelated words"), sources=(source,), fused_score=1 / (60 + rank)
        )

    hits = [hit("a", 1, 10.0), hit("b", 2, 9.9), hit("c", 3, 1.0)]
    by_rank = by_id(rerank(hits, ctx("query", RankingProfile(store_score_share=0.0))))
    by_score = by_id(rerank(hits, ctx("query", RankingProfile(store_score_share=1.0))))
    assert by_rank["c"].breakdown.fused > 0.9  # ranks 1 and 3 look alike under RRF
    assert by_score["c"].breakdown.fused == 0.0
    assert by_score["b"].breakdown.fused == pytest.approx(8.9 / 9.0)


def test_with_value_sets_a_dotted_setting_and_rejects_unknown_or_invalid_ones() -> None:
    settings = Settings()
    before = settings.ranking.weights.recency
    tuned = with_value(settings, "ranking.weights.recency", 0.0)
    assert tuned.ranking.weights.recency == 0.0
    assert settings.ranking.weights.recency == before > 0
    with pytest.raises(KeyError):
        with_value(settings, "ranking.no_such_knob", 1)
    with pytest.raises(ValueError, match="context_window"):
        with_value(settings, "ranking.context_window", 2.0)


class FakeBench:
    """Scores a setting by how close two knobs are to a known optimum."""

    def __init__(self) -> None:
        self.calls = 0

    async def score(self, settings: Settings, cases: object = None) -> dict[str, float]:
        self.calls += 1
        r = settings.ranking
        value = -abs(r.context_window - 0.5) - abs(r.when_time_boost - 0.2)
        return {"objective": value}


async def test_coordinate_search_keeps_only_values_that_raise_the_objective() -> None:
    bench = FakeBench()
    steps: list[Step] = []
    grid = {"ranking.context_window": [0.25, 0.5, 1.0], "ranking.when_time_boost": [0.1, 0.2]}
    start = with_value(
        with_value(Settings(), "ranking.context_window", 0.2), "ranking.when_time_boost", 0.1
    )
    result = await coordinate_search(bench, start, grid, rounds=2, report=steps.append)  # type: ignore[arg-type]
    assert result.values == {"ranking.context_window": 0.5, "ranking.when_time_boost": 0.2}
    assert result.best["objective"] == pytest.approx(0.0)
    assert [s.kept for s in steps[:3]] == [True, True, False]


def test_a_preset_fills_in_only_what_the_configuration_does_not_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(
        PRESETS, "demo", {"ranking": {"context_window": 0.3, "weights": {"recency": 0.0}}}
    )
    tuned = Settings(preset="demo")
    assert tuned.ranking.context_window == 0.3
    assert tuned.ranking.weights.recency == 0.0
    assert tuned.ranking.weights.relevance == Settings().ranking.weights.relevance
    monkeypatch.setenv("ORCHESTRATOR_RANKING__CONTEXT_WINDOW", "0.7")
    assert Settings(preset="demo").ranking.context_window == 0.7
    with pytest.raises(ValueError, match="unknown preset"):
        Settings(preset="no-such-preset")


def test_every_shipped_preset_is_valid() -> None:
    for name in PRESETS:
        assert Settings(preset=name).preset == name


def test_a_name_the_content_contradicts_loses_its_boost() -> None:
    """A question may name the wrong person: when someone else's memory matches it much
    better, the named person's memories keep only the boost everyone gets."""
    from memory_orchestrator.pipeline.relevance import words_of
    from memory_orchestrator.pipeline.reranker import _name_trust

    caroline = candidate(memory("c", "Caroline: I went hiking", entities=("Caroline",)), rank=2)
    melanie = candidate(
        memory("m", "Melanie: I ran the charity race for mental health", entities=("Melanie",)),
        rank=1,
    )
    relevance = column([0.2, 0.9])
    both = [caroline, melanie]
    words = [words_of(c.memory) for c in both]
    assert _name_trust(both, words, relevance, {"caroline"}, 0.0) == 1.0
    assert _name_trust(both, words, relevance, {"caroline"}, 4.0) < 0.01
    assert _name_trust(both, words, relevance, {"melanie"}, 4.0) == 1.0

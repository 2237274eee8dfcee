"""Re-ranking, dedup and fusion on small typed inputs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

import pytest

from memory_orchestrator.models import Candidate, MemoryType, ScoreBreakdown, ScoredItem, TimeRange
from memory_orchestrator.pipeline.currency import newest_first
from memory_orchestrator.pipeline.deduper import dedupe, similarity
from memory_orchestrator.pipeline.fusion import rrf
from memory_orchestrator.pipeline.relevance import RankContext, has_time_expression
from memory_orchestrator.pipeline.reranker import rank, rerank, weighted_total, with_reasons
from memory_orchestrator.pipeline.table import CandidateTable
from memory_orchestrator.settings import RankingProfile, Weights
from tests.factories import NOW, candidate, memory, plan


def ctx(query: str, **kwargs: object) -> RankContext:
    return RankContext(plan=plan(query, **kwargs), now=NOW, settings=RankingProfile())  # type: ignore[arg-type]


def ranked(cands: Sequence[Candidate], context: RankContext) -> CandidateTable:
    return rank(CandidateTable.of(cands), context)


def items(table: CandidateTable) -> list[ScoredItem]:
    return [table.item(row) for row in range(len(table))]


def test_rrf_sums_reciprocal_ranks_across_lists() -> None:
    scores = rrf([["a", "b"], ["b", "c"]], k=60)
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["a"] == pytest.approx(1 / 61)
    assert max(scores, key=scores.__getitem__) == "b"


def test_rrf_weights_scale_each_list_and_must_match() -> None:
    assert rrf([["a"], ["a"]], k=0, weights=[1.0, 0.5])["a"] == pytest.approx(1.5)
    with pytest.raises(ValueError, match="weights"):
        rrf([["a"]], weights=[1.0, 2.0])


def test_relevance_is_computed_from_text_not_only_the_store_rank() -> None:
    good = candidate(memory("m1", "Vendor X missed the firmware milestone"), rank=2)
    off = candidate(memory("m2", "Lunch order for the team offsite"), rank=1)
    ranked = rerank([good, off], ctx("vendor firmware milestone"))
    assert [i.id for i in ranked] == ["m1", "m2"]
    assert ranked[0].breakdown.lexical == pytest.approx(1.0)
    assert ranked[1].breakdown.lexical == 0.0
    assert ranked[1].breakdown.noise_penalty == 1.0


def recomputed(b: ScoreBreakdown) -> float:
    """The total of breakdown `b` recomputed from its signals with the default weights."""
    return weighted_total(
        Weights(),
        relevance=b.relevance,
        recency=b.recency,
        graph=b.graph,
        type_match=b.type_match,
        cross_reference=b.cross_reference,
        duplicate_penalty=b.duplicate_penalty,
        noise_penalty=b.noise_penalty,
    )


def test_every_item_carries_a_breakdown_whose_total_is_the_weighted_sum() -> None:
    item = rerank([candidate(memory("m1", "deploy atlas-core with the runbook"))], ctx("deploy"))[0]
    b = item.breakdown
    expected = recomputed(b)
    assert b.total == pytest.approx(expected, abs=1e-5)
    assert b.weights == Weights().model_dump()
    assert item.reasons


def test_episodic_memories_fade_but_semantic_facts_do_not() -> None:
    old = NOW - timedelta(days=60)
    episode = candidate(
        memory("e", "standup notes atlas", kind=MemoryType.EPISODIC, created_at=old)
    )
    fact = candidate(memory("f", "atlas uses postgres", kind=MemoryType.SEMANTIC, created_at=old))
    by_id = {i.id: i for i in rerank([episode, fact], ctx("atlas"))}
    assert by_id["e"].breakdown.recency == pytest.approx(0.25)  # two 30-day half-lives
    assert by_id["f"].breakdown.recency == 1.0


def test_a_time_window_rewards_memories_inside_it() -> None:
    window = TimeRange(start=NOW - timedelta(days=7), end=NOW)
    inside = candidate(memory("in", "atlas demo", created_at=NOW - timedelta(days=2)))
    outside = candidate(memory("out", "atlas demo notes", created_at=NOW - timedelta(days=40)))
    # a day outside is outside: no fading at the window's edge
    near = candidate(memory("near", "atlas demo plan", created_at=NOW - timedelta(days=8)))
    ranked = rerank([inside, outside, near], ctx("atlas demo", window=window))
    by_id = {i.id: i for i in ranked}
    assert by_id["in"].breakdown.recency == 1.0
    assert by_id["out"].breakdown.recency == 0.0
    assert by_id["near"].breakdown.recency == 0.0
    assert "inside the asked time window" in by_id["in"].reasons


def test_expanded_items_inherit_decayed_relevance_from_their_seed() -> None:
    seed = candidate(memory("s", "Vendor X firmware unstable"))
    hop = candidate(memory("n", "we escalated it"), hops=1, expanded_from="s", edge_weight=1.0)
    by_id = {i.id: i for i in rerank([seed, hop], ctx("vendor firmware"))}
    seed_rel = by_id["s"].breakdown.relevance
    share = RankingProfile().neighbor_share
    assert by_id["n"].breakdown.relevance == pytest.approx(seed_rel * share, abs=1e-5)
    assert by_id["n"].breakdown.graph == pytest.approx(0.5)
    assert any("1 hop(s) from s" in r for r in by_id["n"].reasons)


def test_entities_shared_across_results_get_a_cross_reference_boost() -> None:
    a = candidate(memory("a", "atlas slip", entities=("Vendor X",)))
    b = candidate(memory("b", "atlas budget", entities=("Vendor X",)))
    c = candidate(memory("c", "atlas party", entities=("Dana",)))
    by_id = {i.id: i for i in rerank([a, b, c], ctx("atlas", entities=("Vendor X",)))}
    assert by_id["a"].breakdown.cross_reference > 0
    assert by_id["c"].breakdown.cross_reference == 0


def test_preferred_memory_types_match_or_not() -> None:
    proc = candidate(memory("p", "how to deploy atlas", kind=MemoryType.PROCEDURAL))
    epi = candidate(memory("e", "deployed atlas today", kind=MemoryType.EPISODIC, created_at=NOW))
    by_id = {
        i.id: i
        for i in rerank([proc, epi], ctx("deploy atlas", preferred=(MemoryType.PROCEDURAL,)))
    }
    assert by_id["p"].breakdown.type_match == 1.0
    assert by_id["e"].breakdown.type_match == 0.0


def test_near_duplicates_merge_into_the_better_item_marked_cross_validated() -> None:
    first = candidate(memory("a", "Vendor X missed the March milestone.", entities=("Vendor X",)))
    second = candidate(
        memory("b", "Vendor X missed the March milestone", entities=("Atlas",)), rank=2
    )
    result = dedupe(
        ranked([first, second], ctx("vendor milestone")), threshold=0.85, soft_threshold=0.6
    )
    assert [i.id for i in items(result.table)] == ["a"]
    kept = items(result.table)[0]
    assert kept.cross_validated
    assert kept.merged_ids == ("b",)
    assert set(kept.candidate.memory.entities) == {"Vendor X", "Atlas"}
    assert result.dropped[0].id == "b"
    assert result.dropped[0].reason.value == "duplicate"


def test_dedup_threshold_is_configurable() -> None:
    texts = ["Dana prefers short written updates", "Short written updates are preferred by Dana"]
    cands = [candidate(memory(str(i), t), rank=i + 1) for i, t in enumerate(texts)]
    table = ranked(cands, ctx("dana updates"))
    sim = similarity(*texts)
    assert 0.6 < sim < 0.95
    strict = items(dedupe(table, threshold=0.99, soft_threshold=0.5).table)
    loose = items(dedupe(table, threshold=0.6, soft_threshold=0.5).table)
    assert len(strict) == 2
    assert strict[1].breakdown.duplicate_penalty > 0  # kept, but penalised
    assert len(loose) == 1


@pytest.mark.parametrize(
    ("first", "then"),
    [
        (
            "Parking spot 41 belongs to the design team",
            "Parking spot 42 belongs to the design team",
        ),
        ("User bob77 has admin rights on the wiki", "User bob78 has admin rights on the wiki"),
        ("Host db-stage-05 runs the nightly backup", "Host db-stage-06 runs the nightly backup"),
        ("Dana prefers short written updates", "Dana prefers short updates in writing"),
    ],
)
def test_two_facts_alike_in_words_are_neither_merged_nor_penalised(first: str, then: str) -> None:
    """Merged only where the write path would have skipped the second: a number, a code, a
    user or a word that differs is another fact, shown as it ranks."""
    cands = [candidate(memory("a", first)), candidate(memory("b", then), rank=2)]
    table = ranked(cands, ctx("design team wiki backup dana"))
    assert similarity(first, then) >= 0.85
    result = dedupe(table, threshold=0.85, soft_threshold=0.6)
    assert [i.id for i in items(result.table)] == ["a", "b"]
    assert not result.dropped
    assert all(i.breakdown.duplicate_penalty == 0 for i in items(result.table))


def test_distinct_memories_are_not_merged() -> None:
    cands = [
        candidate(memory("a", "Atlas launch moved to December")),
        candidate(memory("b", "Priya joined the infra team"), rank=2),
    ]
    result = dedupe(ranked(cands, ctx("atlas")), threshold=0.85, soft_threshold=0.6)
    assert {i.id for i in items(result.table)} == {"a", "b"}
    assert not result.dropped


def test_reasons_added_later_match_the_ones_rerank_gives_and_keep_later_ones() -> None:
    """The read path ranks without reasons and adds them to the rows it returns: they must
    be the reasons `rerank` gives, followed by any a later stage (the deduper) added."""
    old = NOW - timedelta(days=2)
    cands = [
        candidate(memory("a", "Ana met Bo at the vendor fair", entities=("Ana", "Bo")), rank=1),
        candidate(memory("b", "Bo fixed the firmware", entities=("Bo",), created_at=old), rank=2),
        candidate(memory("c", "lunch", kind=MemoryType.EPISODIC), rank=3),
        candidate(
            memory("d", "Ana at the fair again", entities=("Ana",)), hops=1, expanded_from="a"
        ),
    ]
    context = ctx("when did Ana meet the vendor", entities=("Ana",))
    full = rerank(cands, context)
    bare = rerank(cands, context, reasons=False)
    assert all(not item.reasons for item in bare)
    assert [i.breakdown for i in bare] == [i.breakdown for i in full]
    table = ranked(cands, context)
    noted = replace(table, notes=(("penalised: 90% like x",), *[()] * (len(table) - 1)))
    added = with_reasons(noted, context)
    assert added[0].reasons == (*full[0].reasons, "penalised: 90% like x")
    assert [i.reasons for i in added[1:]] == [i.reasons for i in full[1:]]


def test_a_merged_rows_shared_entity_is_worked_out_anew_among_the_candidates() -> None:
    """A row's reasons take its age and shared entity from its columns (where the question's
    name is not trusted, another entity may be named); a merged row (its memory carries its
    duplicate's entities) has its shared entity worked out anew, among the candidates."""
    cands = [
        candidate(memory("m1", "Ana and Bo went out", entities=("Ana", "Bo")), rank=2),
        candidate(memory("m2", "Ana cooked", entities=("Ana",)), rank=3),
        candidate(memory("m3", "Bo swam", entities=("Bo",)), rank=4),
        candidate(memory("m4", "Bo ran", entities=("Bo",)), rank=5),
        candidate(memory("m5", "Cy hiked the mountains near the lake", entities=("Cy",)), rank=1),
    ]
    context = ctx("when did Ana hike the mountains near the lake", entities=("Ana",))
    table = ranked(cands, context)
    row = table.ids.index("m1")
    assert "recurring entity: Bo" in with_reasons(table, context)[row].reasons  # not trusted
    memory_ = table.candidates[row].memory.model_copy(update={"entities": ("Ana", "Bo", "Cy")})
    merged = replace(
        table,
        candidates=tuple(
            replace(c, memory=memory_) if i == row else c for i, c in enumerate(table.candidates)
        ),
        merged_ids=tuple(("x",) if i == row else () for i in range(len(table))),
    )
    # (counted again, with the name fully trusted, the shared entity is Ana)
    assert "recurring entity: Ana" in with_reasons(merged, context, candidates=cands)[row].reasons


def test_the_deduper_newest_first_and_reasons_over_one_table() -> None:
    """A ranked table through the deduper, `newest_first` and `with_reasons`: merges,
    penalties (each total the formula's over the row's breakdown) and replaced facts."""
    old = NOW - timedelta(days=3)
    cands = [
        candidate(memory("a", "Vendor X missed the March milestone.", entities=("Vendor X",))),
        candidate(memory("b", "Vendor X missed the March milestone", entities=("Atlas",)), rank=2),
        candidate(memory("c", "Bo runs the on-call rota"), rank=3),
        candidate(memory("d", "The on-call rota is run by Bo"), rank=4),
        candidate(memory("e", "The launch budget is 40k", created_at=old), rank=5),
        candidate(memory("f", "The launch budget is 55k", created_at=NOW), rank=6),
        candidate(memory("g", "Priya joined the infra team"), rank=7),
        candidate(memory("h", "Priya joined the infra team last spring"), rank=8),
        candidate(memory("i", "Kim reviews the firmware"), rank=9),
    ]
    context = ctx("vendor milestone dana updates launch budget priya rota")
    found = dedupe(ranked(cands, context), threshold=0.9, soft_threshold=0.6)
    out = with_reasons(newest_first(found.table, 0.75), context, candidates=cands)
    assert any(i.merged_ids for i in out)
    assert any(i.changed for i in out)
    penalised = [i for i in out if i.breakdown.duplicate_penalty > 0]
    assert penalised
    for item in penalised:
        b = item.breakdown
        total = recomputed(b)
        assert b.total == round(total, 6)
        assert any(r.startswith("penalised: ") for r in item.reasons)


def test_time_expressions_are_found_in_memory_text() -> None:
    assert has_time_expression("we went camping last weekend")
    assert has_time_expression("It was on 8 May 2023")
    assert has_time_expression("two days ago I painted")
    assert not has_time_expression("I painted a lake")


def test_local_share_blends_in_the_local_index_score_scaled_to_its_best_hit() -> None:
    from memory_orchestrator.models import LOCAL_SOURCE, Source

    def found(mem_id: str, local: float | None) -> object:
        c = candidate(memory(mem_id, "Mel painted a sunset by the lake"))
        if local is None:
            return c
        extra = Source(LOCAL_SOURCE, 1, local)
        return replace(c, sources=(*c.sources, extra))

    cands = [found("a", 8.0), found("b", 2.0), found("c", None)]
    off_settings = RankingProfile(local_share=0.0)
    off = rerank(cands, RankContext(plan=plan("sunset lake"), now=NOW, settings=off_settings))  # type: ignore[arg-type]
    assert len({i.breakdown.relevance for i in off}) == 1  # same words, same store rank
    settings = RankingProfile(local_share=0.5)
    on = rerank(cands, RankContext(plan=plan("sunset lake"), now=NOW, settings=settings))  # type: ignore[arg-type]
    relevance = {i.id: i.breakdown.relevance for i in on}
    base = off[0].breakdown.relevance
    assert relevance["a"] == pytest.approx(0.5 * base + 0.5 * 1.0, abs=1e-6)
    assert relevance["b"] == pytest.approx(0.5 * base + 0.5 * 0.25, abs=1e-6)
    assert relevance["c"] == pytest.approx(0.5 * base, abs=1e-6)  # the index did not find it
    assert [i.id for i in on] == ["a", "b", "c"]

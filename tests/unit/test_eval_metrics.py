"""The evaluation metrics, each checked against values computed by hand."""

from __future__ import annotations

import math

import pytest

from memory_orchestrator.eval.metrics import (
    duplicate_rate,
    mean,
    mrr,
    ndcg_at,
    precision_at,
    recall_all_at,
    recall_at,
)
from memory_orchestrator.pipeline.deduper import similarity

# Evidence a, b, c, d; the system returned a, x, b, y, c (x and y are not evidence).
RANKING = [{"a"}, {"x"}, {"b"}, {"y"}, {"c"}]
EVIDENCE = {"a", "b", "c", "d"}


def same_ignoring_case(a: str, b: str) -> float:
    return 1.0 if a.casefold() == b.casefold() else 0.0


def test_recall_at_k_is_the_share_of_evidence_in_the_top_k() -> None:
    assert recall_at(RANKING, EVIDENCE, 1) == 0.25  # a
    assert recall_at(RANKING, EVIDENCE, 2) == 0.25  # a, x
    assert recall_at(RANKING, EVIDENCE, 3) == 0.5  # a, x, b
    assert recall_at(RANKING, EVIDENCE, 5) == 0.75  # a, b, c of four
    assert recall_at(RANKING, EVIDENCE, 10) == 0.75  # nothing more was returned


def test_recall_all_is_one_only_when_every_evidence_turn_is_in_the_top_k() -> None:
    assert recall_all_at(RANKING, EVIDENCE, 5) == 0.0  # d is missing
    assert recall_all_at(RANKING, {"a", "b"}, 2) == 0.0
    assert recall_all_at(RANKING, {"a", "b"}, 3) == 1.0


def test_precision_divides_by_k_even_when_fewer_items_came_back() -> None:
    assert precision_at(RANKING, EVIDENCE, 1) == 1.0
    assert precision_at(RANKING, EVIDENCE, 5) == 3 / 5
    assert precision_at(RANKING, EVIDENCE, 10) == 3 / 10
    assert precision_at(RANKING, EVIDENCE, 0) == 0.0


def test_mrr_is_the_inverse_rank_of_the_first_evidence_item() -> None:
    assert mrr(RANKING, EVIDENCE) == 1.0
    assert mrr([{"x"}, {"y"}, {"b"}], EVIDENCE) == pytest.approx(1 / 3)
    assert mrr([{"x"}, {"y"}], EVIDENCE) == 0.0


def test_ndcg_uses_binary_gains_against_all_evidence_first() -> None:
    # DCG: evidence at ranks 1, 3 and 5. Ideal: four evidence items at ranks 1..4.
    dcg = 1 / math.log2(2) + 1 / math.log2(4) + 1 / math.log2(6)
    ideal = 1 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4) + 1 / math.log2(5)
    assert ndcg_at(RANKING, EVIDENCE, 5) == pytest.approx(dcg / ideal)
    assert ndcg_at(RANKING, EVIDENCE, 5) == pytest.approx(0.736590, abs=1e-6)
    # At k = 2 the ideal holds two evidence items; only a (rank 1) was found.
    assert ndcg_at(RANKING, EVIDENCE, 2) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert ndcg_at([{"a"}, {"b"}], {"a", "b"}, 10) == 1.0


def test_an_item_standing_for_several_turns_counts_once_and_found_evidence_never_twice() -> None:
    merged = [{"a", "b"}]  # a near-duplicate merged into a: one item, two evidence turns
    assert recall_at(merged, {"a", "b"}, 1) == 1.0
    assert precision_at(merged, {"a", "b"}, 1) == 1.0
    assert ndcg_at(merged, {"a", "b"}, 2) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert ndcg_at([{"a"}, {"a"}], {"a"}, 2) == 1.0


def test_metrics_of_a_question_without_evidence_are_zero() -> None:
    assert recall_at(RANKING, set(), 5) == 0.0
    assert recall_all_at(RANKING, set(), 5) == 0.0
    assert ndcg_at(RANKING, set(), 5) == 0.0


def test_duplicate_rate_counts_items_that_repeat_a_higher_ranked_one() -> None:
    texts = ["A", "a", "b", "B", "c"]  # the 2nd and the 4th repeat an earlier item
    assert duplicate_rate(texts, same_ignoring_case, 0.85) == 2 / 5
    assert duplicate_rate(["A", "b"], same_ignoring_case, 0.85) == 0.0
    assert duplicate_rate([], same_ignoring_case, 0.85) == 0.0


def test_duplicate_rate_with_the_deduper_similarity() -> None:
    texts = [
        "Caroline went to the LGBTQ support group yesterday.",
        "Yesterday Caroline went to the LGBTQ support group.",  # same words, other order
        "Melanie painted a sunrise over the lake.",
    ]
    assert duplicate_rate(texts, similarity, 0.85) == 1 / 3


def test_mean_of_nothing_is_zero() -> None:
    assert mean([0.25, 0.75, 0.5]) == 0.5
    assert mean([]) == 0.0

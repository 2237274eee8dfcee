"""Retrieval metrics: pure functions over one question's ranked results.

A ranking is a sequence of returned items, best first; each item is the set of dataset keys
it stands for (one key for a plain memory; more when the store kept one memory for several
identical turns). The near-duplicates an orchestrated item absorbed (`merged_ids`) are not
among them: the agent reads the item, not those ids. `relevant` is the set of evidence keys.
Every function returns a float in [0, 1].

- recall@k: |evidence found in the top k| / |evidence| (LoCoMo's own definition).
- recall_all@k: 1 when every evidence key is in the top k, else 0.
- precision@k: items in the top k that hold evidence, divided by k (not by the number
  returned: a system that returns fewer items is not rewarded for it).
- MRR: 1 / rank of the first item holding evidence (0 when none does).
- nDCG@k: binary gain, log2 discount; an item gains only for evidence not already found
  higher up, and the ideal ranking puts min(|evidence|, k) evidence items first.
- duplicate rate: share of returned items that are near-duplicates (similarity at or above
  the threshold) of an item ranked higher.
- block recall: |evidence among the items a context block shows| / |evidence| (the runner
  counts an item when at least 80 % of its text is shown): what the agent reads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence

__all__ = [
    "Ranking",
    "block_recall",
    "duplicate_rate",
    "mean",
    "mrr",
    "ndcg_at",
    "precision_at",
    "recall_all_at",
    "recall_at",
]

Ranking = Sequence[Collection[str]]


def _found(ranking: Ranking, relevant: Collection[str], k: int) -> set[str]:
    hits: set[str] = set()
    for item in ranking[: max(k, 0)]:
        hits.update(key for key in item if key in relevant)
    return hits


def recall_at(ranking: Ranking, relevant: Collection[str], k: int) -> float:
    if not relevant:
        return 0.0
    return len(_found(ranking, relevant, k)) / len(set(relevant))


def recall_all_at(ranking: Ranking, relevant: Collection[str], k: int) -> float:
    if not relevant:
        return 0.0
    return 1.0 if _found(ranking, relevant, k) >= set(relevant) else 0.0


def precision_at(ranking: Ranking, relevant: Collection[str], k: int) -> float:
    if k <= 0:
        return 0.0
    hits = sum(1 for item in ranking[:k] if any(key in relevant for key in item))
    return hits / k


def mrr(ranking: Ranking, relevant: Collection[str]) -> float:
    for rank, item in enumerate(ranking, start=1):
        if any(key in relevant for key in item):
            return 1.0 / rank
    return 0.0


def ndcg_at(ranking: Ranking, relevant: Collection[str], k: int) -> float:
    wanted = set(relevant)
    if not wanted or k <= 0:
        return 0.0
    seen: set[str] = set()
    dcg = 0.0
    for rank, item in enumerate(ranking[:k], start=1):
        new = (wanted & set(item)) - seen
        if new:
            dcg += 1.0 / math.log2(rank + 1)
            seen |= new
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(wanted), k) + 1))
    return dcg / ideal


def block_recall(shown: Ranking, relevant: Collection[str]) -> float:
    """recall over every item shown, whatever their number."""
    return recall_at(shown, relevant, len(shown))


def duplicate_rate(
    texts: Sequence[str], similarity: Callable[[str, str], float], threshold: float
) -> float:
    """Share of `texts` (best first) that are near-duplicates of a text ranked above them."""
    if not texts:
        return 0.0
    duplicates = sum(
        1
        for index, text in enumerate(texts)
        if any(similarity(text, earlier) >= threshold for earlier in texts[:index])
    )
    return duplicates / len(texts)


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0

"""Stage 5: near-duplicates are merged; the better one stays, marked cross-validated.

Similarity is rapidfuzz's token-sort ratio over normalized text (0..1). At or above
`threshold` (default 0.85, as in Memory Fabric) two items merge: sources and entities are
combined. Between `soft_threshold` and `threshold` an item stays but pays a duplicate
penalty in proportion, so the top of the list is not a row of near-copies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

from rapidfuzz import fuzz, process

from memory_orchestrator.models import Dropped, DropReason, ScoredItem
from memory_orchestrator.pipeline.reranker import best_first, with_penalties
from memory_orchestrator.pipeline.scored import Ranked
from memory_orchestrator.settings import Weights
from memory_orchestrator.text import normalize


@lru_cache(maxsize=16_384)
def _key(text: str) -> str:
    """Sorted lower-case tokens: `fuzz.ratio` over keys equals token-sort ratio over texts
    (memoized: the same memories come back question after question)."""
    return " ".join(sorted(normalize(text).casefold().split()))


def similarity_key(text: str) -> str:
    """What `similarity` compares: `fuzz.ratio` of two keys is the similarity of the texts."""
    return _key(text)


def similarity(a: str, b: str) -> float:
    """0..1 near-duplicate similarity of two texts (case, spacing and word order ignored)."""
    return fuzz.ratio(_key(a), _key(b)) / 100.0


@dataclass
class Dedup:
    items: list[Ranked]  # `ScoredItem`s, or `rank`'s rows where nothing changed them
    dropped: list[Dropped] = field(default_factory=list)


def dedupe(
    items: Sequence[Ranked],
    *,
    threshold: float,
    soft_threshold: float,
    weights: Weights,
    limit: int | None = None,
    keep_apart: Callable[[Ranked, Ranked, float], bool] | None = None,
) -> Dedup:
    """Merge near-duplicates of `items` (best first); returns the survivors re-sorted.

    With `limit`, work stops once that many survivors (plus a margin for re-sorting after
    penalties) are found: what lies below can never be returned. Two items `keep_apart`
    says disagree (the same fact with other values; it is given their similarity) are neither
    merged nor penalised.
    """
    kept: list[Ranked] = []
    keys: list[str] = []
    dropped: list[Dropped] = []
    enough = None if limit is None else limit + max(5, limit // 2)
    for item in items:
        if enough is not None and len(kept) >= enough:
            break
        key = _key(item.candidate.memory.content)
        match = process.extractOne(
            key, keys, scorer=fuzz.ratio, processor=None, score_cutoff=soft_threshold * 100
        )
        if match is None:
            kept.append(item)
            keys.append(key)
            continue
        best_sim, best_index = match[1] / 100.0, match[2]
        if keep_apart is not None and keep_apart(kept[best_index], item, best_sim):
            kept.append(item)
            keys.append(key)
            continue
        if best_sim >= threshold:
            kept[best_index] = _merge(kept[best_index], item)
            dropped.append(
                Dropped(
                    id=item.id,
                    reason=DropReason.DUPLICATE,
                    stage="deduper",
                    detail=f"near-duplicate of {kept[best_index].id} ({best_sim:.2f}); merged",
                    score=item.score,
                )
            )
            continue
        penalty = (best_sim - soft_threshold) / max(1e-9, threshold - soft_threshold)
        item = item.model_copy(
            update={
                "breakdown": with_penalties(item.breakdown, weights, duplicate=round(penalty, 6)),
                "reasons": (*item.reasons, f"penalised: {best_sim:.0%} like {kept[best_index].id}"),
            }
        )
        kept.append(item)
        keys.append(key)
    best_first(kept, lambda i: i.score, lambda i: i.candidate.memory)
    return Dedup(items=kept, dropped=dropped)


def _merge(winner: Ranked, loser: Ranked) -> ScoredItem:
    memory = winner.candidate.memory
    entities = tuple(dict.fromkeys((*memory.entities, *loser.candidate.memory.entities)))
    sources = tuple(dict.fromkeys((*winner.candidate.sources, *loser.candidate.sources)))
    candidate = replace(
        winner.candidate, memory=memory.model_copy(update={"entities": entities}), sources=sources
    )
    stores = {memory.store, loser.candidate.memory.store}
    reason = (
        f"cross-validated: same fact in {len(stores)} stores"
        if len(stores) > 1
        else f"cross-validated: merged near-duplicate {loser.id}"
    )
    return winner.model_copy(
        update={
            "candidate": candidate,
            "merged_ids": (*winner.merged_ids, loser.id, *loser.merged_ids),
            "cross_validated": True,
            "reasons": (*winner.reasons, reason),
        }
    )

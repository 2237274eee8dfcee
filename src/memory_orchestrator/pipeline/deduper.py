"""Stage 5: restatements are merged; the better one stays, marked cross-validated.

Similarity is rapidfuzz's token-sort ratio over normalized text (0..1); it only finds the
pairs worth reading. Two items merge only when the write path would have skipped the second
as a restatement of the first (`conflicts.same_fact`: the same values and content words, in
any order or voice) and their similarity is at or above `threshold` (default 0.85, as in
Memory Fabric): sources and entities are combined, the merged ids named. A restatement
between `soft_threshold` and `threshold` stays but pays a duplicate penalty in proportion, so
the top of the list is not a row of near-copies. Two items that differ in anything the write
path reads as a fact (a number, a name, a code, a place, a date, a word) are neither merged
nor penalised: both are facts, and both reach the answer (a correction never gets this far:
`pipeline.currency` leaves the corrected memory out first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

from rapidfuzz import fuzz, process

from memory_orchestrator.models import Dropped, DropReason, ScoredItem, to_utc
from memory_orchestrator.pipeline.conflicts import same_fact
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
) -> Dedup:
    """Merge restatements among `items` (best first); returns the survivors re-sorted.

    With `limit`, work stops once that many survivors (plus a margin for re-sorting after
    penalties) are found: what lies below can never be returned. Each item is read against
    the kept item most alike, when at least `soft_threshold` alike: unless it states the same
    fact (see the module docstring), it is kept as it is.
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
        if match is None or not _restates(kept[match[2]], item):
            kept.append(item)
            keys.append(key)
            continue
        best_sim, best_index = match[1] / 100.0, match[2]
        if best_sim >= threshold:
            kept[best_index] = _merge(kept[best_index], item)
            dropped.append(
                Dropped(
                    id=item.id,
                    reason=DropReason.DUPLICATE,
                    stage="deduper",
                    detail=f"restates {kept[best_index].id} ({best_sim:.2f}); merged",
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


def _restates(first: Ranked, then: Ranked) -> bool:
    """Whether the write path would have skipped the later of two memories as a restatement
    of the earlier (by `created_at`; as ranked where either has none)."""
    a, b = first.candidate.memory, then.candidate.memory
    dated = a.created_at is not None and b.created_at is not None
    if dated and to_utc(b.created_at) < to_utc(a.created_at):  # type: ignore[arg-type]
        a, b = b, a
    return same_fact(a.content, b.content)


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

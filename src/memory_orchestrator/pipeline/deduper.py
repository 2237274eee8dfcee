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

from memory_orchestrator.models import Candidate, Dropped, DropReason, Stage, to_utc
from memory_orchestrator.pipeline.conflicts import same_fact
from memory_orchestrator.pipeline.reranker import best_first, penalised
from memory_orchestrator.pipeline.table import CandidateTable, column
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
    table: CandidateTable  # the rows kept, merged rows updated, best first
    dropped: list[Dropped] = field(default_factory=list)


@dataclass
class _Kept:
    """A row kept so far, with what the deduper changed of it."""

    row: int
    candidate: Candidate
    merged_ids: tuple[str, ...]
    cross_validated: bool
    notes: tuple[str, ...]
    duplicate: float
    total: float


def dedupe(
    table: CandidateTable,
    *,
    threshold: float,
    soft_threshold: float,
    limit: int | None = None,
) -> Dedup:
    """Merge restatements among the rows of a ranked table (best first); returns the
    survivors re-sorted.

    With `limit`, work stops once that many survivors (plus a margin for re-sorting after
    penalties) are found: what lies below can never be returned. Each row is read against
    the kept row most alike, when at least `soft_threshold` alike: unless it states the same
    fact (see the module docstring), it is kept as it is.
    """
    scores = table.scores
    assert scores is not None, "the table is not ranked yet"
    kept: list[_Kept] = []
    keys: list[str] = []
    dropped: list[Dropped] = []
    enough = None if limit is None else limit + max(5, limit // 2)
    for row, candidate in enumerate(table.candidates):
        if enough is not None and len(kept) >= enough:
            break
        entry = _Kept(
            row,
            candidate,
            table.merged_ids[row] if table.merged_ids else (),
            table.cross_validated[row] if table.cross_validated else False,
            table.notes[row] if table.notes else (),
            float(scores.duplicate[row]),
            float(scores.total[row]),
        )
        key = _key(candidate.memory.content)
        match = process.extractOne(
            key, keys, scorer=fuzz.ratio, processor=None, score_cutoff=soft_threshold * 100
        )
        if match is None or not _restates(kept[match[2]].candidate, candidate):
            kept.append(entry)
            keys.append(key)
            continue
        best_sim, best_index = match[1] / 100.0, match[2]
        winner = kept[best_index]
        if best_sim >= threshold:
            _merge(winner, entry)
            dropped.append(
                Dropped(
                    id=candidate.memory.id,
                    reason=DropReason.DUPLICATE,
                    stage=Stage.DEDUPER,
                    detail=f"restates {winner.candidate.memory.id} ({best_sim:.2f}); merged",
                    score=entry.total,
                )
            )
            continue
        penalty = round((best_sim - soft_threshold) / max(1e-9, threshold - soft_threshold), 6)
        entry.duplicate, entry.total = penalty, penalised(table, row, penalty)
        like = winner.candidate.memory.id
        entry.notes = (*entry.notes, f"penalised: {best_sim:.0%} like {like}")
        kept.append(entry)
        keys.append(key)
    best_first(kept, lambda k: k.total, lambda k: k.candidate.memory)
    return Dedup(_table(table, kept), dropped)


def _table(table: CandidateTable, kept: Sequence[_Kept]) -> CandidateTable:
    """`table`'s kept rows, in order, with what the deduper changed of them."""
    rows = table.take([k.row for k in kept])
    assert rows.scores is not None
    scores = replace(
        rows.scores,
        duplicate=column([k.duplicate for k in kept]),
        total=column([k.total for k in kept]),
    )
    return replace(
        rows,
        candidates=tuple(k.candidate for k in kept),
        scores=scores,
        merged_ids=tuple(k.merged_ids for k in kept),
        cross_validated=tuple(k.cross_validated for k in kept),
        notes=tuple(k.notes for k in kept),
    )


def _restates(first: Candidate, then: Candidate) -> bool:
    """Whether the write path would have skipped the later of two memories as a restatement
    of the earlier (by `created_at`; as ranked where either has none)."""
    a, b = first.memory, then.memory
    dated = a.created_at is not None and b.created_at is not None
    if dated and to_utc(b.created_at) < to_utc(a.created_at):  # type: ignore[arg-type]
        a, b = b, a
    return same_fact(a.content, b.content)


def _merge(winner: _Kept, loser: _Kept) -> None:
    """`winner` takes `loser`'s entities, sources and merged ids, and is cross-validated."""
    memory, lost = winner.candidate.memory, loser.candidate.memory
    entities = tuple(dict.fromkeys((*memory.entities, *lost.entities)))
    sources = tuple(dict.fromkeys((*winner.candidate.sources, *loser.candidate.sources)))
    winner.candidate = replace(
        winner.candidate, memory=memory.model_copy(update={"entities": entities}), sources=sources
    )
    stores = {memory.store, lost.store}
    reason = (
        f"cross-validated: same fact in {len(stores)} stores"
        if len(stores) > 1
        else f"cross-validated: merged near-duplicate {lost.id}"
    )
    winner.merged_ids = (*winner.merged_ids, lost.id, *loser.merged_ids)
    winner.cross_validated = True
    winner.notes = (*winner.notes, reason)

"""The current truth first: what the read path does with corrected and disagreeing memories.

- A memory a later one corrected (`superseded_by`, see `pipeline.conflicts`) leaves the
  candidates; the trace names the memory that superseded it. Unless the request asks for
  history, or for `as_of` a moment before the correction: then it was the truth, and the
  correction, written after `as_of`, is what leaves.
- Two current memories that disagree (the same fact with other values, not only another
  name) and are not linked: the newer ranks above the older and says what it replaced
  ("changed on DATE: was ...").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy
from rapidfuzz import fuzz, process

from memory_orchestrator.models import (
    Candidate,
    Dropped,
    DropReason,
    Memory,
    Stage,
    legacy_supersedes,
    supersedes,
    to_utc,
)
from memory_orchestrator.pipeline.conflicts import compare, values_only
from memory_orchestrator.pipeline.deduper import similarity_key
from memory_orchestrator.pipeline.table import CandidateTable

_WAS_CHARS = 120


@dataclass
class Current:
    candidates: list[Candidate]
    dropped: list[Dropped] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)  # the kept candidates' places in the input


def _day(moment: datetime | None) -> str:
    return to_utc(moment).strftime("%Y-%m-%d") if moment else "an unknown date"


def superseded(memory: Memory) -> bool:
    """Corrected by a later memory, by the store's own record: marked (`superseded_by`), or
    flagged by a store that only says so (`Memory.superseded`: Mnemon's recall). Never from
    metadata, which a client writes."""
    return memory.superseded_by is not None or memory.superseded


Marks = frozenset[tuple[str, str]]  # (corrected memory, the memory the store says corrected it)


def marks_of(memories: Sequence[Memory]) -> Marks:
    return frozenset((m.id, m.superseded_by) for m in memories if m.superseded_by)


def corrects(memory: Memory, marks: Marks = frozenset()) -> str | None:
    """The memory `memory` corrected: the orchestrator's own key, or in a record stored
    before that key, the bare `supersedes` when the store marked the memory it names as
    corrected by this one (`marks`); a client's bare key has no such mark."""
    named = supersedes(memory)
    if named is not None:
        return named
    legacy = legacy_supersedes(memory)
    return legacy if legacy is not None and (legacy, memory.id) in marks else None


def valid_at(
    memory: Memory, as_of: datetime | None, marks: Marks = frozenset()
) -> tuple[bool, str]:
    """Whether `memory` was the current truth at `as_of` (now when None), and if not why.
    `marks`: the store's marks among the memories read with it (see `corrects`)."""
    by = memory.superseded_by
    when = memory.superseded_at
    if by is None and superseded(memory):
        return False, "superseded (flagged by the store)"
    if by is not None and (as_of is None or when is None or to_utc(when) <= to_utc(as_of)):
        return False, f"superseded by {by} on {_day(when)}"
    created = memory.created_at
    late = as_of is not None and created is not None and to_utc(created) > to_utc(as_of)
    replaced = corrects(memory, marks) if late else None
    if replaced is not None:
        return False, f"corrects {replaced} on {_day(created)}, after as_of {_day(as_of)}"
    return True, ""


def current_only(candidates: Sequence[Candidate], as_of: datetime | None, history: bool) -> Current:
    """The candidates that were current at `as_of` (all of them with `history`)."""
    if history:
        return Current(list(candidates), rows=list(range(len(candidates))))
    out = Current([])
    marks = marks_of([c.memory for c in candidates]) if as_of is not None else frozenset()
    for row, candidate in enumerate(candidates):
        ok, why = valid_at(candidate.memory, as_of, marks)
        if ok:
            out.candidates.append(candidate)
            out.rows.append(row)
        else:
            out.dropped.append(
                Dropped(
                    id=candidate.memory.id,
                    reason=DropReason.SUPERSEDED,
                    stage=Stage.CURRENCY,
                    detail=why + ("; ask with history to see it" if "superseded" in why else ""),
                )
            )
    return out


def disagreement(a: Memory, b: Memory) -> bool:
    """Other values of one fact (a number, a date, a negation, an antonym), and not only
    another name or word: two memories that differ in a name or a word alone may be two
    subjects (the Hermes export, the Orion export); unlinked, both stay as ranked. (On write,
    such a swap in what a memory says may still be a correction: `pipeline.writer`.)"""
    if not values_only(a.content, b.content):  # (cheap: most close pairs end here)
        return False
    change = compare(a.content, b.content)
    return change.kind == "update" and "word" not in change.what and change.what != ("name",)


def newest_first(table: CandidateTable, threshold: float) -> CandidateTable:
    """The rows with each newer memory of a disagreeing pair moved just above the older one,
    and saying what changed; corrected memories (history) say what corrected them."""
    memories = [c.memory for c in table.candidates]
    changed: dict[int, str] = {}
    notes: dict[int, tuple[str, ...]] = {}
    out = _corrections_first(memories, changed)
    close = _close_pairs([memories[row] for row in out], threshold)
    paired = {a for a, _ in close}  # (most rows have no close pair: nothing to look at)
    for first in range(len(out)):
        a = memories[out[first]]
        if a.id not in paired or a.superseded_by is not None or out[first] in changed:
            continue
        for second in range(first + 1, len(out)):
            b = memories[out[second]]
            if (a.id, b.id) not in close or b.superseded_by is not None:
                continue
            if not disagreement(a, b):
                continue
            if _newer(b, a):
                row = out.pop(second)
                out.insert(first, row)
                _changed(row, b, a, changed, notes)
            elif _newer(a, b):
                _changed(out[first], a, b, changed, notes)
            break
    rows = table.take(out)
    if not changed:
        return rows
    notes_before = table.notes or ((),) * len(table)
    changed_before = table.changed or (None,) * len(table)
    return replace(
        rows,
        changed=tuple(changed.get(row, changed_before[row]) for row in out),
        notes=tuple((*notes_before[row], *notes.get(row, ())) for row in out),
    )


def _close_pairs(memories: Sequence[Memory], threshold: float) -> set[tuple[str, str]]:
    """The id pairs (both orders) at or above `threshold` similarity: one C call for all."""
    if len(memories) < 2:
        return set()
    keys = [similarity_key(m.content) for m in memories]
    scores = process.cdist(
        keys, keys, scorer=fuzz.ratio, processor=None, score_cutoff=threshold * 100
    )
    ids = [m.id for m in memories]
    return {(ids[a], ids[b]) for a, b in zip(*numpy.nonzero(scores), strict=True) if a != b}


def _corrections_first(memories: Sequence[Memory], changed: dict[int, str]) -> list[int]:
    """History: each corrected memory says what corrected it (in `changed`, by row) and
    ranks below it. The rows in their new order."""
    out = list(range(len(memories)))
    for row, memory in enumerate(memories):
        if memory.superseded_by is None:
            continue
        at = out.index(row)
        changed[row] = f"superseded by {memory.superseded_by} on {_day(memory.superseded_at)}"
        later = [i for i, x in enumerate(out) if memories[x].id == memory.superseded_by]
        if later and later[0] > at:
            out.insert(at, out.pop(later[0]))
    return out


def _changed(
    row: int,
    new: Memory,
    older: Memory,
    changed: dict[int, str],
    notes: dict[int, tuple[str, ...]],
) -> None:
    """Row `row` (memory `new`) says which older memory it replaced and what changed."""
    was = (
        older.content if len(older.content) <= _WAS_CHARS else older.content[: _WAS_CHARS - 3] + "…"
    )
    what = compare(older.content, new.content).detail
    note = f"changed on {_day(new.created_at)}: was {was!r} ({what}; {older.id})"
    changed[row] = note
    notes[row] = (*notes.get(row, ()), note)


def _newer(a: Memory, b: Memory) -> bool:
    if a.created_at is None or b.created_at is None:
        return False
    return to_utc(a.created_at) > to_utc(b.created_at)

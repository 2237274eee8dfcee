"""Knowledge-update figures: did the write path tell corrections from restatements, and does
the read path give the current value first?

From the writes of "write" cases (`jsonl`: `ingest: "write"`) and their questions:
- `updates_detected`: writes expected `updated` that answered `updated` and superseded the
  memory named by `supersedes`; `updates_missed` the others.
- `restatements_written`: writes expected `skipped` (a restatement) that were written.
- `lookalikes_superseded`: writes of a look-alike (`lookalike_of`) that superseded something.
- `new_facts_superseding`: other writes expected `added` that superseded something;
  `added_skipped`: writes expected `added` (look-alikes included) skipped as near-duplicates.
- `corrections_skipped`: writes expected `updated` that were skipped (the correction lost).
- `by_kind`: the same per kind of write sequence, the prefix of each write's key as
  `scripts/make_knowledge_updates.py` names them ("swap-branch-03-1" -> "swap-branch"):
  corrections (detected, skipped, added), restatements (written), look-alikes (superseded),
  other new facts (superseding, skipped).
- per system, over the questions: `current_recall@1` (the first item holds the current
  fact, of the questions about one) and `stale_leakage` (a corrected memory ranks above the
  current one, or is returned while the current one is not); over the questions that name
  several relevant memories (two facts that differ in an identifier: `identifier-pairs`),
  `kept_apart`: each of them returned as an item of its own, none folded into another's
  merged ids.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from memory_orchestrator.eval import metrics
from memory_orchestrator.eval.records import EvalRun, QuestionResult, UpdateResult

__all__ = ["knowledge_updates"]

_PLACES = 4
_LISTED = 20  # wrong writes listed by key


def knowledge_updates(run: EvalRun) -> dict[str, Any] | None:
    """The figures above, or None when the run had no "write" case."""
    writes = [u for c in run.cases for u in c.updates]
    if not writes:
        return None
    names = {c.id for c in run.cases if c.updates}
    asked = [q for c in run.cases if c.id in names for q in c.questions]
    updates = [u for u in writes if u.expect == "updated"]
    detected = [u for u in updates if u.got == "updated" and u.superseded == u.supersedes]
    restated = [u for u in writes if u.expect == "skipped"]
    restated_written = [u for u in restated if u.got != "skipped"]
    lookalikes = [u for u in writes if u.lookalike_of is not None]
    lookalikes_hit = [u for u in lookalikes if u.superseded is not None]
    fresh = [u for u in writes if u.expect == "added" and u.lookalike_of is None]
    fresh_hit = [u for u in fresh if u.superseded is not None]
    lost = [u for u in writes if u.expect == "added" and u.got == "skipped"]
    wrong = [u for u in writes if not _as_expected(u)]
    return {
        "writes": len(writes),
        "updates": len(updates),
        "updates_detected": len(detected),
        "update_recall": _share(len(detected), len(updates)),
        "corrections_skipped": sum(u.got == "skipped" for u in updates),
        "restatements": len(restated),
        "restatements_written": len(restated_written),
        "lookalikes": len(lookalikes),
        "lookalikes_superseded": len(lookalikes_hit),
        "new_facts": len(fresh),
        "new_facts_superseding": len(fresh_hit),
        "added_skipped": len(lost),
        "questions": len(asked),
        "systems": {s: _reads(asked, s) for s in run.options.systems},
        "by_kind": _by_kind(writes),
        "wrong_writes": [_entry(u) for u in wrong[:_LISTED]],
    }


def kind_of(key: str) -> str:
    """ "swap-branch-03-1" -> "swap-branch" (a key without the two numbers is its own kind)."""
    parts = key.rsplit("-", 2)
    return parts[0] if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit() else key


def _by_kind(writes: Sequence[UpdateResult]) -> dict[str, dict[str, int]]:
    """Per kind, the writes that answer something (a sequence's first write, expected
    `added` with nothing to resemble, counts as a new fact)."""
    out: dict[str, Counter[str]] = {}
    for u in writes:
        row = out.setdefault(kind_of(u.key), Counter())
        if u.expect == "updated":
            row["corrections"] += 1
            row["detected"] += u.got == "updated" and u.superseded == u.supersedes
            row["skipped"] += u.got == "skipped"
            row["added"] += u.got == "added"
        elif u.expect == "skipped":
            row["restatements"] += 1
            row["written"] += u.got != "skipped"
        elif u.lookalike_of is not None:
            row["lookalikes"] += 1
            row["superseded"] += u.superseded is not None
            row["lookalikes_skipped"] += u.got == "skipped"
        else:
            row["new_facts"] += 1
            row["superseding"] += u.superseded is not None
            row["new_skipped"] += u.got == "skipped"
    return {kind: dict(row) for kind, row in sorted(out.items())}


def _as_expected(u: UpdateResult) -> bool:
    if u.expect is not None and u.got != u.expect:
        return False
    return u.superseded == (u.supersedes if u.expect == "updated" else None)


def _entry(u: UpdateResult) -> dict[str, Any]:
    return {
        "key": u.key,
        "expect": u.expect,
        "got": u.got,
        "supersedes": u.supersedes,
        "superseded": u.superseded,
        "detail": u.detail,
    }


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, _PLACES) if whole else None


def _reads(results: Sequence[QuestionResult], system: str) -> dict[str, Any]:
    recall1 = [  # (of one current fact: two facts cannot both come first)
        metrics.recall_at(r.answers[system].ranking, r.question.evidence, 1)
        for r in results
        if len(r.question.evidence) == 1
    ]
    with_stale = [r for r in results if r.question.stale]
    leaked = [r for r in with_stale if _leaks(r, system)]
    several = [r for r in results if len(r.question.evidence) > 1]
    apart = [r for r in several if _apart(r.answers[system].ranking, r.question.evidence)]
    return {
        "current_recall@1": round(metrics.mean(recall1), _PLACES),
        "stale_questions": len(with_stale),
        "stale_leaked": len(leaked),
        "stale_leakage": _share(len(leaked), len(with_stale)),
        "several_questions": len(several),
        "kept_apart": _share(len(apart), len(several)),
    }


def _apart(ranking: Sequence[frozenset[str]], evidence: Sequence[str]) -> bool:
    """Every relevant memory returned, and no item holding two of them (one merged into
    another is not shown to the agent)."""
    held = [keys & set(evidence) for keys in ranking]
    return all(len(h) <= 1 for h in held) and set().union(*held) >= set(evidence)


def _leaks(r: QuestionResult, system: str) -> bool:
    """A corrected memory ranks above the first current one (or comes without it)."""
    evidence, stale = set(r.question.evidence), set(r.question.stale)
    for keys in r.answers[system].ranking:
        if keys & evidence:
            return False
        if keys & stale:
            return True
    return False

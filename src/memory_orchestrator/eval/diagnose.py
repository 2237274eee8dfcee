"""Why was the evidence not retrieved? An account of one missed question, from its traces.

For each evidence turn: where it ranked in every system (if at all), where it sits in the
store's own ranking further down (`depth`), and, from the orchestrated traces, why it was not
returned: never a candidate, dropped (merged as a duplicate), or
scored below the last item returned (with its score breakdown). The plan (canonical query,
subqueries, entities, time window) comes first, so tuning starts from evidence.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memory_orchestrator.models import CandidateTrace, QueryPlan, Trace
from memory_orchestrator.pipeline.packager import shorten

if TYPE_CHECKING:
    from memory_orchestrator.eval.datasets import EvalQuestion
    from memory_orchestrator.eval.records import Answer
    from memory_orchestrator.service import Orchestrator

__all__ = ["describe_plan", "diagnose", "rank_of", "relabel"]

_TEXT_CHARS = 160
_TOKEN = re.compile(r"[\w-]+")


def rank_of(ranking: Sequence[Collection[str]], key: str) -> int | None:
    """1-based rank of the first item that holds `key`, or None."""
    return next((n for n, item in enumerate(ranking, start=1) if key in item), None)


def describe_plan(plan: QueryPlan | None) -> dict[str, Any]:
    if plan is None:
        return {}
    window = None
    if plan.time_window is not None:
        start, end = plan.time_window.start, plan.time_window.end
        window = f"{start:%Y-%m-%d}" if start else "..."
        window += " .. " + (f"{end:%Y-%m-%d}" if end else "...")
    return {
        "canonical_query": plan.canonical_query,
        "intent": plan.intent.value,
        "question_type": plan.question_type.value,
        "strategy": plan.strategy.value,
        "entities": list(plan.entities),
        "subqueries": list(plan.subqueries),
        "time_window": window,
        "time_phrase": plan.time_phrase,
    }


async def diagnose(
    orchestrator: Orchestrator,
    question: EvalQuestion,
    answers: Mapping[str, Answer],
    id_of: Mapping[str, str],
    text_of: Mapping[str, str],
    keys_of: Mapping[str, Collection[str]],
    *,
    max_k: int,
    depth: int,
) -> dict[str, Any]:
    deep = await orchestrator.store_search(question.text, depth)
    deep_rank = {hit.memory.id: n for n, hit in enumerate(deep, start=1)}
    traces: dict[str, Trace] = {}
    for system, answer in answers.items():
        trace = orchestrator.trace(answer.trace_id) if answer.trace_id else None
        if trace is not None:
            traces[system] = trace
    plan = next((t.plan for t in traces.values() if t.plan is not None), None)
    candidate_k = orchestrator.settings.retrieval.candidate_k
    evidence = []
    for key in question.evidence:
        memory_id = id_of.get(key)
        entry: dict[str, Any] = {
            "turn": key,
            "text": shorten(text_of.get(memory_id or "", ""), _TEXT_CHARS),
        }
        for system, answer in answers.items():
            entry[f"{system}_rank"] = rank_of(answer.ranking, key)
        entry[f"store_rank_top{depth}"] = deep_rank.get(memory_id or "")
        for system, trace in traces.items():
            why = _why(trace, memory_id, entry[f"{system}_rank"], max_k, candidate_k)
            entry[f"{system}_why"] = relabel(why, keys_of)
        evidence.append(entry)
    notes = sorted({note for t in traces.values() for note in t.notes})
    return {"plan": describe_plan(plan), "evidence": evidence, "notes": notes}


def relabel(text: str, keys_of: Mapping[str, Collection[str]]) -> str:
    """Memory ids (random per run) replaced by the dataset keys they stand for."""

    def label(match: re.Match[str]) -> str:
        token = match.group(0)
        return ",".join(sorted(keys_of.get(token, ()))) or token

    return _TOKEN.sub(label, text)


def _why(
    trace: Trace, memory_id: str | None, rank: int | None, max_k: int, candidate_k: int
) -> str:
    if rank is not None:
        return f"returned at #{rank}"
    if memory_id is None:
        return "not in the store (its write was not stored)"
    dropped = [d for d in trace.dropped if d.id == memory_id]
    if dropped:
        return "; ".join(
            f"dropped by the {d.stage}: {d.reason.value} ({d.detail})" for d in dropped
        )
    candidate = next((c for c in trace.candidates if c.id == memory_id), None)
    if candidate is None:
        return f"never a candidate: in no subquery's top {candidate_k}" + (
            ", and expansion did not reach it" if trace.expansions else ""
        )
    return _outranked(candidate, trace, max_k)


def _outranked(candidate: CandidateTrace, trace: Trace, max_k: int) -> str:
    found = ", ".join(f"store #{s.rank} for {s.query!r}" for s in candidate.sources) or (
        f"{candidate.hops} hop(s) from {candidate.expanded_from}"
    )
    b = candidate.breakdown
    if b is None:
        return f"candidate ({found}), not returned"
    returned = [c for c in trace.candidates if c.final_rank is not None and c.breakdown]
    last = max(returned, key=lambda c: c.final_rank or 0, default=None)
    cut = (
        f" < #{last.final_rank} at {last.breakdown.total:.3f}"
        if last is not None and last.breakdown is not None and len(returned) >= max_k
        else ""
    )
    return (
        f"candidate ({found}) scored {b.total:.3f}{cut}: relevance {b.relevance:.2f}"
        f" (lexical {b.lexical:.2f}, store {b.fused:.2f}), recency {b.recency:.2f},"
        f" graph {b.graph:.2f}, xref {b.cross_reference:.2f}, noise -{b.noise_penalty:.2f},"
        f" dup -{b.duplicate_penalty:.2f}"
    )

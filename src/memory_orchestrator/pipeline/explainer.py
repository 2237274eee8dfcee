"""Stage 7: the account of a request, from its trace alone.

Query rewrites, subqueries, every candidate with its source ranks, expansion decisions,
score breakdowns and drop reasons. Nothing is recomputed: the trace carries it all.
"""

from __future__ import annotations

from memory_orchestrator.models import CandidateTrace, Dropped, Trace, TraceSummary


def summarize(trace: Trace) -> TraceSummary:
    """The short trace that travels inside every answer. `expanded_from`: the seeds of the
    expanded memories the answer shows (none when no expanded memory made it in)."""
    shown = set(trace.result_ids)
    expanded_from = sorted(
        {d.seed_id for d in trace.expansions if d.accepted and d.neighbor_id in shown}
    )
    return TraceSummary(
        subqueries=trace.plan.subqueries if trace.plan else (),
        expanded_from=tuple(expanded_from),
        dropped=tuple(trace.dropped),
        notes=tuple(trace.notes),
    )


def drop_line(drop: Dropped) -> str:
    """`ID: why (STAGE stage)`, the reason said once: a detail that already begins with it
    ("superseded by ...") stands alone, any other follows the reason ("duplicate: ...")."""
    reason = drop.reason.value.replace("_", " ")
    detail = drop.detail.strip()
    if not detail:
        why = reason
    elif detail.lower().startswith(reason.split()[0]):
        why = detail
    else:
        why = f"{reason}: {detail}"
    return f"{drop.id}: {why} ({drop.stage} stage)"


def _candidate_line(c: CandidateTrace) -> str:
    where = ", ".join(f"#{s.rank} for {s.query!r}" for s in c.sources) or (
        f"{c.hops} hop(s) from {c.expanded_from}"
    )
    rank = f"final #{c.final_rank}" if c.final_rank else "not returned"
    line = f"  {c.id}: {rank}; {where}"
    if c.breakdown:
        b = c.breakdown
        line += (
            f"\n      total {b.total:.3f} = relevance {b.relevance:.2f} (lexical {b.lexical:.2f},"
            f" store {b.fused:.2f}) · recency {b.recency:.2f} · graph {b.graph:.2f}"
            f" · type {b.type_match:.2f} · xref {b.cross_reference:.2f}"
            f" - dup {b.duplicate_penalty:.2f} - noise {b.noise_penalty:.2f}"
        )
    return line


def explain_text(trace: Trace) -> str:
    lines = [
        f"Trace {trace.trace_id} ({trace.tool} on {trace.backend},"
        f" {trace.created_at:%Y-%m-%d %H:%M:%S} UTC)"
    ]
    plan = trace.plan
    if plan:
        lines.append(f"Query: {plan.raw_query!r} -> canonical {plan.canonical_query!r}")
        lines.append(
            f"Plan: intent {plan.intent.value}, question {plan.question_type.value}, strategy "
            f"{plan.strategy.value}, hop budget {plan.hop_budget}, confidence {plan.confidence:.2f}"
        )
        if plan.entities:
            lines.append("Entities: " + ", ".join(plan.entities))
        if plan.time_window:
            tw = plan.time_window
            lines.append(f"Time window: {tw.start} .. {tw.end} (from {plan.time_phrase!r})")
        lines.append("Subqueries: " + "; ".join(repr(s) for s in plan.subqueries))
        lines.extend(f"Planner: {note}" for note in plan.notes)
    lines.append(f"Candidates ({len(trace.candidates)}):")
    ordered = sorted(
        trace.candidates, key=lambda c: (c.final_rank is None, c.final_rank or 0, c.id)
    )
    lines.extend(_candidate_line(c) for c in ordered)
    if trace.expansions:
        lines.append(f"Expansion decisions ({len(trace.expansions)}):")
        for d in trace.expansions:
            verdict = "took" if d.accepted else "skipped"
            lines.append(
                f"  {verdict} {d.neighbor_id} from {d.seed_id} via {d.edge_type}: {d.reason}"
            )
    if trace.dropped:
        lines.append(f"Dropped ({len(trace.dropped)}):")
        lines.extend(f"  {drop_line(d)}" for d in trace.dropped)
    if trace.notes:
        lines.append("Notes:")
        lines.extend(f"  {note}" for note in trace.notes)
    timings = ", ".join(f"{k} {v:.1f} ms" for k, v in trace.timings_ms.items())
    lines.append(
        f"Result: {', '.join(trace.result_ids) or 'nothing'};"
        f" backend calls {trace.backend_calls}; {timings}"
    )
    return "\n".join(lines)

"""Stage 6: the context object and the `context_block` text an agent reads.

`max_items` and `max_chars` are hard limits: the block never exceeds `max_chars` characters,
and what did not fit is named in the trace.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memory_orchestrator.models import (
    ContextItem,
    GroupBy,
    QueryPlan,
    ScoredItem,
    Strategy,
    TimeRange,
    to_utc,
)
from memory_orchestrator.text import normalize

_ELLIPSIS = "…"


@dataclass(frozen=True)
class Budget:
    max_items: int
    max_chars: int
    item_chars: int
    group_by: GroupBy = "auto"


@dataclass(frozen=True)
class Packed:
    items: tuple[ContextItem, ...]
    summary: str
    linked_entities: tuple[str, ...]
    time_span: TimeRange | None
    context_block: str
    cut: tuple[str, ...]  # ids that did not fit the budget


def shorten(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word boundary with an ellipsis."""
    text = normalize(text)
    if len(text) <= limit:
        return text
    cut = text[: max(1, limit - 1)]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,.;:") + _ELLIPSIS


def to_context_item(
    item: ScoredItem, item_chars: int, *, with_breakdown: bool = True
) -> ContextItem:
    memory = item.candidate.memory
    return ContextItem(
        memory_id=memory.id,
        summary=shorten(memory.content, item_chars),
        score=round(item.score, 4),
        reasons=item.reasons,
        linked_entities=memory.entities,
        timestamp=memory.created_at,
        type=memory.type,
        store=memory.store,
        cross_validated=item.cross_validated,
        merged_ids=item.merged_ids,
        hops=item.candidate.hops,
        breakdown=item.breakdown if with_breakdown else None,
        changed=item.changed,
    )


def package(
    items: Sequence[ScoredItem],
    plan: QueryPlan,
    budget: Budget,
    *,
    task: str | None,
    candidate_count: int,
) -> Packed:
    chosen = [to_context_item(i, budget.item_chars) for i in items[: budget.max_items]]
    cut = [i.id for i in items[budget.max_items :]]
    entities = _top_entities(chosen)
    span = _span(chosen)
    summary = _summary(chosen, plan, entities, span, candidate_count)
    header = _header(plan, task, summary, entities)
    block, fitted = _fit(header, chosen, plan, budget)
    cut = [c.memory_id for c in chosen[len(fitted) :]] + cut
    return Packed(
        items=tuple(fitted),
        summary=summary,
        linked_entities=entities,
        time_span=span,
        context_block=block,
        cut=tuple(cut),
    )


def _top_entities(items: Sequence[ContextItem], limit: int = 8) -> tuple[str, ...]:
    counts: Counter[str] = Counter()
    names: dict[str, str] = {}
    for item in items:
        for entity in item.linked_entities:
            counts[entity.casefold()] += 1
            names.setdefault(entity.casefold(), entity)
    ranked = sorted(counts, key=lambda k: (-counts[k], k))
    return tuple(names[k] for k in ranked[:limit])


def _span(items: Sequence[ContextItem]) -> TimeRange | None:
    times = [to_utc(i.timestamp) for i in items if i.timestamp]
    return TimeRange(start=min(times), end=max(times)) if times else None


def _day(moment: datetime | None) -> str:
    return to_utc(moment).strftime("%Y-%m-%d") if moment else "undated"


def _summary(
    items: Sequence[ContextItem],
    plan: QueryPlan,
    entities: Sequence[str],
    span: TimeRange | None,
    candidate_count: int,
) -> str:
    if not items:
        return f"No memory matched {plan.canonical_query!r}."
    parts = [f"{len(items)} of {candidate_count} candidate memories"]
    if entities:
        parts.append("about " + ", ".join(entities[:3]))
    if span and span.start and span.end:
        parts.append(
            f"from {_day(span.start)}"
            + ("" if _day(span.start) == _day(span.end) else f" to {_day(span.end)}")
        )
    crossed = sum(1 for i in items if i.cross_validated)
    if crossed:
        parts.append(f"{crossed} cross-validated")
    return " ".join(parts) + f". Best: {shorten(items[0].summary, 120)}"


def _header(plan: QueryPlan, task: str | None, summary: str, entities: Sequence[str]) -> str:
    lines = [f"Memory context for task: {shorten(task, 200)}" if task else "Memory context"]
    lines.append(f"Query: {shorten(plan.raw_query, 200)} (strategy: {plan.strategy.value})")
    lines.append(f"Summary: {summary}")
    if entities:
        lines.append("Relevant entities: " + ", ".join(entities))
    return "\n".join(lines)


def _line(number: int, item: ContextItem) -> str:
    flags = f"{item.memory_id}; {item.type.value}; score {item.score:.2f}"
    if item.cross_validated:
        flags += "; cross-validated"
    if item.changed:
        flags += f"; {item.changed}"
    return f"{number}. [{_day(item.timestamp)}] {item.summary} ({flags})"


def _grouping(plan: QueryPlan, group_by: GroupBy) -> GroupBy:
    if group_by != "auto":
        return group_by
    if plan.strategy is Strategy.EPISODIC:
        return "time"
    return "entity" if len(plan.entities) >= 2 else "none"


def _sections(
    items: Sequence[ContextItem], plan: QueryPlan, group_by: GroupBy
) -> list[tuple[str, list[ContextItem]]]:
    mode = _grouping(plan, group_by)
    if mode == "time":
        ordered = sorted(
            items, key=lambda i: (i.timestamp is None, i.timestamp and to_utc(i.timestamp))
        )
        return [("Key recalled memories (chronological):", ordered)]
    if mode == "entity":
        sections: dict[str, list[ContextItem]] = {}
        for item in items:
            key = next(
                (
                    e
                    for e in plan.entities
                    if e.casefold() in {x.casefold() for x in item.linked_entities}
                ),
                item.linked_entities[0] if item.linked_entities else "other",
            )
            sections.setdefault(key, []).append(item)
        return [(f"About {key}:", group) for key, group in sections.items()]
    return [("Key recalled memories (best first):", list(items))]


def _fit(
    header: str, items: Sequence[ContextItem], plan: QueryPlan, budget: Budget
) -> tuple[str, list[ContextItem]]:
    """The longest prefix of `items` (rank order) whose rendered block fits in max_chars.

    Every added item adds a line, so the block grows with the prefix: a binary search over
    its length renders O(log n) blocks instead of one per item."""

    def render(count: int) -> str:
        return _render(header, items[:count], plan, budget.group_by)

    block = render(len(items))
    if len(block) <= budget.max_chars:  # the usual case: everything fits
        return block, list(items)
    low, high = 0, len(items)  # render(low) fits, or low is 0; render(high) does not
    block = render(0)
    while high - low > 1:
        middle = (low + high) // 2
        trial = render(middle)
        if len(trial) <= budget.max_chars:
            low, block = middle, trial
        else:
            high = middle
    if len(block) > budget.max_chars:  # the header alone is over budget
        block = block[: budget.max_chars - 1] + _ELLIPSIS
    return block, list(items[:low])


def _render(header: str, items: Sequence[ContextItem], plan: QueryPlan, group_by: GroupBy) -> str:
    lines = [header, ""]
    if not items:
        lines.append("No relevant memories found.")
        return "\n".join(lines)
    number = 1
    for title, group in _sections(items, plan, group_by):
        lines.append(title)
        for item in group:
            lines.append(_line(number, item))
            number += 1
        lines.append("")
    lines.append("Supporting memory IDs: " + ", ".join(i.memory_id for i in items))
    return "\n".join(lines)

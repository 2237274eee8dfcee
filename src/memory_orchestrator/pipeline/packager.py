"""Stage 6: the context object and the `context_block` text an agent reads.

`max_items` and `max_chars` are hard limits: the block never exceeds `max_chars` characters,
and what did not fit is named in the trace. Fitting (`_fit`): the full header and the longest
prefix of the ranked items that fits; when not even the best item fits, every item under a
shorter header (the summary cut, no entity line), then under a one-line header, then the most
of the best items that fit cut to at least `MIN_CUT_CHARS`. The summary always counts the
items the block shows; "No relevant memories found" only when none were. A `warning` (the store
itself could not be searched) is the block's first line, whatever else is cut. An item that
absorbed near-duplicates names them on its line (`merged: ...`): they were stored.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from memory_orchestrator.models import (
    ContextItem,
    GroupBy,
    QueryPlan,
    ResponseBudget,
    ScoredItem,
    Strategy,
    TimeRange,
    to_utc,
)
from memory_orchestrator.text import normalize

_ELLIPSIS = "…"
MIN_CUT_CHARS = 40  # an item cut shorter than this says too little to be worth its line
# An item's summary is cut to this many characters: a short fact whole, a long note's first
# lines, so that one long memory cannot take the block's whole budget (packaging.max_chars,
# chosen by cross-validation with items cut so).
ITEM_CHARS = 400


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


def limits(asked: ResponseBudget | None, max_items: int, max_chars: int) -> tuple[int, int]:
    """The package's limits: those the caller's budget sets, the configured ones for the rest
    (not the request model's own defaults)."""
    given = asked.model_fields_set if asked is not None else set()
    return (
        asked.max_items if asked is not None and "max_items" in given else max_items,
        asked.max_chars if asked is not None and "max_chars" in given else max_chars,
    )


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
    warning: str | None = None,
) -> Packed:
    chosen = [to_context_item(i, budget.item_chars) for i in items[: budget.max_items]]
    cut = [i.id for i in items[budget.max_items :]]
    draw = _Draw(plan, budget, task, candidate_count, len(chosen), warning)
    packed = _fit(chosen, draw)
    cut = [c.memory_id for c in chosen[len(packed.items) :]] + cut
    return replace(packed, cut=tuple(cut))


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
    found: int = 0,
) -> str:
    if not items and found:
        return f"{found} of {candidate_count} candidate memories matched; none fit the budget."
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


def _header(
    plan: QueryPlan, task: str | None, summary: str, entities: Sequence[str], level: int = 0
) -> str:
    """Level 0: task, query, summary, entities; 1: the same cut short, no entities; 2: one
    line with the summary's first sentence."""
    if level >= 2:
        return f"Memory context: {summary.split('. Best: ', maxsplit=1)[0].rstrip('.')}."
    size = 200 if level == 0 else 60
    lines = [f"Memory context for task: {shorten(task, size)}" if task else "Memory context"]
    lines.append(f"Query: {shorten(plan.raw_query, size)} (strategy: {plan.strategy.value})")
    lines.append(f"Summary: {summary if level == 0 else shorten(summary, 100)}")
    if entities and level == 0:
        lines.append("Relevant entities: " + ", ".join(entities))
    return "\n".join(lines)


def _line(number: int, item: ContextItem) -> str:
    flags = f"{item.memory_id}; {item.type.value}; score {item.score:.2f}"
    if item.cross_validated:
        flags += "; cross-validated"
    if item.changed:
        flags += f"; {item.changed}"
    if item.merged_ids:
        flags += "; merged: " + ", ".join(item.merged_ids)
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


@dataclass(frozen=True)
class _Draw:
    """What every trial rendering of the block shares."""

    plan: QueryPlan
    budget: Budget
    task: str | None
    candidate_count: int
    found: int  # items chosen before fitting
    warning: str | None = None  # the block's first line, when set

    def block(self, items: Sequence[ContextItem], level: int, chars: int | None = None) -> Packed:
        """The package showing `items` (each cut to `chars`) under a header of `level`."""
        if chars is not None:
            items = [i.model_copy(update={"summary": shorten(i.summary, chars)}) for i in items]
        entities = _top_entities(items)
        span = _span(items)
        summary = _summary(items, self.plan, entities, span, self.candidate_count, self.found)
        header = _header(self.plan, self.task, summary, entities, level)
        if self.warning:
            header = f"{self.warning}\n{header}"
        text = _render(
            header, items, self.plan, self.budget.group_by, footer=level == 0, found=self.found
        )
        return Packed(tuple(items), summary, entities, span, text, ())

    def fits(self, packed: Packed) -> bool:
        return len(packed.context_block) <= self.budget.max_chars


def _longest_prefix(items: Sequence[ContextItem], draw: _Draw, level: int) -> Packed:
    """The longest prefix of `items` (rank order) whose block fits (possibly none). Every
    added item adds a line, so the block grows with the prefix: a binary search renders
    O(log n) blocks instead of one per item."""
    whole = draw.block(items, level)
    if draw.fits(whole):  # the usual case: everything fits
        return whole
    low, high = 0, len(items)  # block(low) fits, or low is 0; block(high) does not
    best = draw.block(items[:0], level)
    while high - low > 1:
        middle = (low + high) // 2
        trial = draw.block(items[:middle], level)
        if draw.fits(trial):
            low, best = middle, trial
        else:
            high = middle
    return best


def _widest_cut(items: Sequence[ContextItem], draw: _Draw, low: int) -> Packed | None:
    """`items`, each cut to the most characters (at least `low`) that fit; None if none do."""
    found, high = None, max((len(i.summary) for i in items), default=low)
    while low <= high:
        middle = (low + high) // 2
        trial = draw.block(items, 2, middle)
        if draw.fits(trial):
            found, low = trial, middle + 1
        else:
            high = middle - 1
    return found


def _fit(items: Sequence[ContextItem], draw: _Draw) -> Packed:
    """The block for `items` within `max_chars` (see the module docstring)."""
    packed = _longest_prefix(items, draw, 0)
    if packed.items or not items:
        if draw.fits(packed):
            return packed
        return _truncated(packed, draw)
    for level in (1, 2):  # a shorter header, every item whole
        packed = draw.block(items, level)
        if draw.fits(packed):
            return packed
    for count in range(len(items), 0, -1):  # the best items, cut to fit
        cut = _widest_cut(items[:count], draw, MIN_CUT_CHARS)
        if cut is not None:
            return cut
    cut = _widest_cut(items[:1], draw, 1)
    if cut is not None:
        return cut
    return _truncated(draw.block(items[:0], 2), draw)


def _truncated(packed: Packed, draw: _Draw) -> Packed:
    """A block with no item whose header alone is over budget, cut."""
    text = packed.context_block
    return replace(packed, context_block=text[: draw.budget.max_chars - 1] + _ELLIPSIS)


def _render(
    header: str,
    items: Sequence[ContextItem],
    plan: QueryPlan,
    group_by: GroupBy,
    *,
    footer: bool = True,
    found: int = 0,
) -> str:
    lines = [header, ""]
    if not items:
        if not found:  # some matched but none fit: the header says so
            lines.append("No relevant memories found.")
        return "\n".join(lines)
    number = 1
    for title, group in _sections(items, plan, group_by):
        lines.append(title)
        for item in group:
            lines.append(_line(number, item))
            number += 1
        lines.append("")
    if not footer:
        return "\n".join(lines).rstrip()
    lines.append("Supporting memory IDs: " + ", ".join(i.memory_id for i in items))
    return "\n".join(lines)

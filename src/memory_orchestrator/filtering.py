"""Whether a memory passes a request's filters: the one rule, for the pipeline and the stores.

Neutral ground between them: the pipeline applies it to what a store could not filter
(`pipeline/filters.py`), and a store that filters in its own process (Mnemonic) applies the
same rule, so the two can never disagree. It imports only `models`.
"""

from __future__ import annotations

from datetime import datetime

from memory_orchestrator.models import Memory, SearchFilters, TimeRange, to_utc

__all__ = ["matches"]


def matches(memory: Memory, filters: SearchFilters | None) -> bool:
    """True when the memory passes every filter: one of the memory types, at least one of the
    entities (case folded), and within the time range (a memory without a time passes)."""
    if filters is None:
        return True
    if filters.memory_types and memory.type not in filters.memory_types:
        return False
    if filters.entity_ids:
        wanted = {e.casefold() for e in filters.entity_ids}
        if not wanted & {e.casefold() for e in memory.entities}:
            return False
    window = filters.time_range
    if window is None or memory.created_at is None:
        return True
    return _within(memory.created_at, window)


def _within(created_at: datetime, window: TimeRange) -> bool:
    when = to_utc(created_at)
    start = to_utc(window.start) if window.start else None
    end = to_utc(window.end) if window.end else None
    return (start is None or when >= start) and (end is None or when <= end)

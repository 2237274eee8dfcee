"""Filters the orchestrator applies itself when a store cannot (see Capabilities)."""

from __future__ import annotations

from datetime import datetime

from memory_orchestrator.models import Capabilities, Memory, SearchFilters, TimeRange, to_utc


def missing_filter_support(filters: SearchFilters | None, caps: Capabilities) -> list[str]:
    """Names of the requested filters that the store cannot apply itself."""
    if filters is None:
        return []
    missing = []
    if filters.memory_types and not caps.memory_types:
        missing.append("memory_types")
    if filters.entity_ids and not caps.entity_filter:
        missing.append("entity_ids")
    if filters.time_range and not caps.time_filter:
        missing.append("time_range")
    return missing


def matches(memory: Memory, filters: SearchFilters | None) -> bool:
    """True when the memory passes every filter (a memory without a time passes time filters)."""
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

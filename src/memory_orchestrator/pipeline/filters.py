"""Filters the orchestrator applies itself when a store cannot (see Capabilities).

Which filters those are is decided here; whether a memory passes them is `filtering.matches`,
the one rule the pipeline and the stores that filter in process share.
"""

from __future__ import annotations

from memory_orchestrator.models import Capabilities, SearchFilters

__all__ = ["missing_filter_support"]


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

"""The one filter rule the pipeline and the stores share (`filtering.matches`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from memory_orchestrator.filtering import matches
from memory_orchestrator.models import Memory, MemoryType, SearchFilters, TimeRange

NOON = datetime(2026, 5, 1, 12, tzinfo=UTC)


def mem(**fields: object) -> Memory:
    return Memory.model_validate({"id": "m1", "content": "x", **fields})


def test_no_filters_let_everything_pass() -> None:
    assert matches(mem(), None)
    assert matches(mem(), SearchFilters())


def test_a_memory_type_filter_keeps_the_types_asked_for() -> None:
    episodic = SearchFilters(memory_types=[MemoryType.EPISODIC, MemoryType.RESOURCE])
    assert matches(mem(type="episodic"), episodic)
    assert not matches(mem(type="semantic"), episodic)


def test_an_entity_filter_needs_one_shared_entity_whatever_its_case() -> None:
    wanted = SearchFilters(entity_ids=["Jolene", "Anthony"])
    assert matches(mem(entities=("JOLENE", "x")), wanted)
    assert not matches(mem(entities=("Jo",)), wanted)
    assert not matches(mem(), wanted)


def test_a_time_range_is_inclusive_and_a_memory_without_a_time_passes() -> None:
    window = SearchFilters(time_range=TimeRange(start=NOON, end=NOON + timedelta(hours=1)))
    assert matches(mem(created_at=NOON), window)
    assert matches(mem(created_at=NOON + timedelta(hours=1)), window)
    assert not matches(mem(created_at=NOON - timedelta(seconds=1)), window)
    assert matches(mem(), window)


def test_times_compare_as_instants_and_naive_ones_are_taken_as_utc() -> None:
    window = SearchFilters(time_range=TimeRange(start=NOON))
    paris = timezone(timedelta(hours=2))
    assert not matches(mem(created_at=datetime(2026, 5, 1, 13, tzinfo=paris)), window)
    assert matches(mem(created_at=datetime(2026, 5, 1, 12)), window)

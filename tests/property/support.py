"""Shared pieces of the property tests: the settings profile, input strategies and a spy.

Example counts are modest and the runs are derandomized (the same examples every run), so
the suite stays fast and never flakes; `deadline=None` because a few examples open SQLite
files and the time an example takes is not what these tests check.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.models import (
    Capabilities,
    Edge,
    Memory,
    MetaValue,
    Neighbor,
    NewMemory,
    SearchFilters,
    SearchHit,
    WriteOutcome,
)
from memory_orchestrator.models import (
    HealthCheck as StoreCheck,
)
from tests.faults import forwarded

PROPS = settings(
    max_examples=40,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FEW = settings(PROPS, max_examples=15)

# ---------------------------------------------------------------- strategies

# Any code point (control characters, combining marks, NUL, right-to-left, emoji) except
# lone surrogates, which no JSON or UTF-8 transport can carry.
ANY_CHAR = st.characters(codec="utf-8")
WORDS = st.sampled_from(
    """what when who why how did Caroline Melanie Vendor X last week yesterday since
    before in March May 2023 2023-02-30 9999-12-31 0000-01-01 past 99999999 years ago days
    the of and or ? ; , . - _ mem_1 ISSUE-42 ﷺ Ⅻ ß İ 東京 🚀 \x00 \t \n \u202e""".split()
)
# Free text: raw code points, word salads that hit the planner's patterns, and repetitions
# that make long inputs cheaply.
TEXT = st.one_of(
    st.text(ANY_CHAR, max_size=200),
    st.lists(WORDS, max_size=60).map(" ".join),
    st.tuples(st.text(ANY_CHAR, min_size=1, max_size=12), st.integers(1, 2500)).map(
        lambda pair: pair[0] * pair[1]
    ),
)
BIG_INTS = st.one_of(st.integers(-10, 10), st.integers(-(2**70), 2**70))
TIMEZONES: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.just(UTC),
    st.integers(-23 * 60 - 59, 23 * 60 + 59).map(lambda m: timezone(timedelta(minutes=m))),
)
# Every datetime Python can hold, naive or with any fixed offset, plus ordinary ones.
MOMENTS = st.one_of(
    st.datetimes(timezones=TIMEZONES),
    st.sampled_from(
        [
            datetime.min,
            datetime.max,
            datetime.min.replace(tzinfo=timezone(timedelta(hours=5))),
            datetime.max.replace(tzinfo=timezone(timedelta(hours=-5))),
            datetime(2026, 11, 22, 12, tzinfo=UTC),
        ]
    ),
    st.datetimes(datetime(1990, 1, 1), datetime(2040, 1, 1), timezones=TIMEZONES),
)


def mostly(
    valid: st.SearchStrategy[Any], anything: st.SearchStrategy[Any]
) -> st.SearchStrategy[Any]:
    """Valid values about two times in three, so most examples get past validation."""
    return st.integers(0, 2).flatmap(lambda pick: anything if pick == 2 else valid)


def ints(low: int, high: int) -> st.SearchStrategy[int]:
    return mostly(st.integers(low, high), BIG_INTS)


LABEL = mostly(
    st.text(st.characters(codec="utf-8", exclude_characters=","), min_size=1, max_size=30).filter(
        str.strip
    ),
    TEXT,
)
JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    BIG_INTS,
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(ANY_CHAR, max_size=30),
)
JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


# ---------------------------------------------------------------- a spy backend


class RecordingBackend:
    """A spy (named as such): delegates every call to a real backend and records the text
    each search received and each memory each write received."""

    def __init__(self, inner: MemoryBackend) -> None:
        self.inner = inner
        self.name = inner.name
        self.capabilities: Capabilities = forwarded(inner.capabilities)
        self.queries: list[str] = []
        self.writes: list[NewMemory] = []

    @property
    def notes(self) -> tuple[str, ...]:
        return self.inner.notes

    async def search(
        self, query: str, top_k: int, filters: SearchFilters | None = None
    ) -> list[SearchHit]:
        self.queries.append(query)
        return await self.inner.search(query, top_k, filters)

    async def get_memories(self, ids: Sequence[str]) -> list[Memory]:
        return await self.inner.get_memories(ids)

    async def neighbors(
        self,
        node_ids: Sequence[str],
        edge_types: Sequence[str] | None = None,
        hops: int = 1,
        limit: int = 50,
    ) -> list[Neighbor]:
        return await self.inner.neighbors(node_ids, edge_types, hops, limit)

    async def known_entities(self, limit: int = 500) -> list[str]:
        return await self.inner.known_entities(limit)

    async def write(self, memory: NewMemory) -> WriteOutcome:
        self.writes.append(memory)
        return await self.inner.write(memory)

    async def write_many(self, memories: Sequence[NewMemory]) -> list[WriteOutcome]:
        self.writes.extend(memories)
        return await self.inner.write_many(memories)

    async def link(
        self,
        source_id: str,
        target_id: str,
        relation: str,
        weight: float = 1.0,
        meta: dict[str, MetaValue] | None = None,
    ) -> Edge:
        return await self.inner.link(source_id, target_id, relation, weight, meta)

    async def forget(self, memory_id: str) -> bool:
        return await self.inner.forget(memory_id)

    async def health(self) -> list[StoreCheck]:
        return await self.inner.health()

    async def close(self) -> None:
        await self.inner.close()

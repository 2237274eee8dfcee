"""Every tool's request, with arbitrary parameters, over the real embedded store (loaded with
the demo sample) behind a recording spy: a request is either rejected with a clear
validation error and changes nothing, or answered within its bounds; and no store call ever
carries a query longer than `[limits] max_query_chars`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime, timedelta
from typing import Any, TypeVar

import anyio
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.demo import load_demo
from memory_orchestrator.errors import InvalidRequest, TraceNotFound
from memory_orchestrator.models import (
    MAX_QUERY_CHARS,
    ContextRequest,
    EventKind,
    ExpandRequest,
    ExplainRequest,
    SearchRequest,
    WriteAction,
    WriteRequest,
    describe_errors,
)
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.traces import TraceStore
from memory_orchestrator.text import cut_at_word
from tests.events import said
from tests.factories import NOW
from tests.property.support import (
    ANY_CHAR,
    BIG_INTS,
    FEW,
    JSON,
    JSON_SCALARS,
    LABEL,
    MOMENTS,
    PROPS,
    TEXT,
    RecordingBackend,
    ints,
    mostly,
)

pytestmark = pytest.mark.integration
T = TypeVar("T")
_SHARED = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]
SHARED = settings(
    PROPS, max_examples=80, suppress_health_check=_SHARED
)  # one store across the examples
SHARED_FEW = settings(FEW, suppress_health_check=_SHARED)
LIMIT = 120  # a small [limits] max_query_chars, so that many generated queries exceed it


def run(fn: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(fn)


@pytest.fixture
def spy(settings: Settings) -> Iterator[tuple[Orchestrator, RecordingBackend]]:
    settings.limits.max_query_chars = LIMIT
    backend = RecordingBackend(EmbeddedBackend(settings.embedded_path()))
    orch = Orchestrator(
        backend, settings, traces=TraceStore(settings.trace_path()), clock=lambda: NOW
    )
    run(lambda: load_demo(orch))
    backend.queries.clear()
    backend.writes.clear()
    yield orch, backend
    run(orch.close)


def _validated(model: type[T], values: dict[str, Any]) -> T | None:
    """The request model, or None after checking the rejection reads clearly."""
    try:
        request = model.model_validate(values)  # type: ignore[attr-defined]
    except ValidationError as exc:
        event("rejected: " + describe_errors(exc)[:50])
        message = describe_errors(exc)
        assert message
        assert "Traceback" not in message
        assert "errors.pydantic.dev" not in message
        return None
    event("accepted")
    return request  # type: ignore[no-any-return]


def _later(moment: datetime, delta: timedelta) -> str:
    try:
        return (moment + delta).isoformat()
    except OverflowError:
        return moment.isoformat()


def _bounded(backend: RecordingBackend) -> None:
    longest = max((len(q) for q in backend.queries), default=0)
    assert longest <= LIMIT, f"a store received a {longest}-character query"


def _query_cut(orch: Orchestrator, trace_id: str) -> bool:
    """Whether the trace says the query was cut, to at most the limit."""
    trace = orch.trace(trace_id)
    assert trace is not None
    cut = [v for v in said(trace, EventKind.QUERY_CUT) if v["what"] == "query"]
    return len(cut) == 1 and int(cut[0]["kept"]) <= LIMIT == cut[0]["limit"]


def _planned_within_limit(orch: Orchestrator, trace_id: str) -> None:
    """The planner, too, only ever saw the cut query and task: its work is bounded."""
    trace = orch.trace(trace_id)
    assert trace is not None
    if trace.plan is not None:
        assert len(trace.plan.raw_query) <= LIMIT


LONG = st.one_of(
    TEXT, st.integers(LIMIT - 5, MAX_QUERY_CHARS + 50).map(lambda n: ("word " * n)[:n])
)
QUERY = mostly(LONG.filter(str.strip), LONG)
BUDGET = st.none() | st.fixed_dictionaries(
    {"max_items": ints(1, 100), "max_chars": ints(200, 100_000)}
)
ORDERED = st.tuples(MOMENTS, st.timedeltas(timedelta(0), timedelta(days=4000))).map(
    lambda pair: {"start": pair[0].isoformat(), "end": _later(*pair)}
)
TIME_RANGE = mostly(
    ORDERED,
    st.fixed_dictionaries(
        {"start": MOMENTS.map(datetime.isoformat), "end": MOMENTS.map(datetime.isoformat)}
    ),
)
FILTERS = st.none() | st.fixed_dictionaries(
    {},
    optional={
        "entity_ids": st.lists(LABEL, max_size=4),
        "memory_types": st.lists(
            mostly(st.sampled_from(["episodic", "semantic"]), st.just("rumour")), max_size=3
        ),
        "time_range": TIME_RANGE,
    },
)


@SHARED
@given(
    query=QUERY,
    task=st.none() | LONG,
    budget=BUDGET,
    filters=FILTERS,
    expand=st.none() | st.booleans(),
    as_of=st.none() | MOMENTS.map(datetime.isoformat),
    group_by=st.none() | st.sampled_from(["auto", "entity", "time", "none", "colour"]),
)
async def test_memory_context_is_valid_and_bounded(
    spy: tuple[Orchestrator, RecordingBackend],
    query: str,
    task: str | None,
    budget: dict[str, int] | None,
    filters: dict[str, Any] | None,
    expand: bool | None,
    as_of: str | None,
    group_by: str | None,
) -> None:
    orch, backend = spy
    values: dict[str, Any] = {"query": query, "task": task, "response_budget": budget}
    values |= {"filters": filters}
    values |= {"expand": expand, "as_of": as_of, "group_by": group_by}
    request = _validated(ContextRequest, {k: v for k, v in values.items() if v is not None})
    if request is None:
        return
    backend.queries.clear()
    package = await orch.context(request)
    max_items = request.response_budget.max_items if request.response_budget else 8
    max_chars = request.response_budget.max_chars if request.response_budget else 3000
    assert len(package.items) <= max_items
    assert len(package.context_block) <= max_chars
    if package.time_span and package.time_span.start and package.time_span.end:
        assert package.time_span.start <= package.time_span.end
    _bounded(backend)
    _planned_within_limit(orch, package.trace_id)
    if len(query) > LIMIT:
        assert _query_cut(orch, package.trace_id)


@SHARED
@given(
    query=QUERY,
    top_k=ints(1, 100),
    expand=st.booleans(),
    passthrough=st.none() | st.booleans(),
    filters=FILTERS,
)
async def test_memory_search_is_valid_and_bounded(
    spy: tuple[Orchestrator, RecordingBackend],
    query: str,
    top_k: int,
    expand: bool,
    passthrough: bool | None,
    filters: dict[str, Any] | None,
) -> None:
    orch, backend = spy
    values = {"query": query, "top_k": top_k, "expand": expand, "passthrough": passthrough}
    request = _validated(SearchRequest, values | ({"filters": filters} if filters else {}))
    if request is None:
        return
    backend.queries.clear()
    result = await orch.search(request)
    assert len(result.items) <= request.top_k
    assert len({i.memory_id for i in result.items}) == len(result.items)
    _bounded(backend)
    _planned_within_limit(orch, result.trace_id)
    if len(query) > LIMIT:
        assert _query_cut(orch, result.trace_id)


@SHARED
@given(
    seed_ids=st.lists(LABEL | st.sampled_from(["mem_1", ""]), max_size=5),
    entities=st.lists(LABEL | st.just("Vendor X"), max_size=4),
    query=st.none() | LONG,
    hops=ints(1, 4),
    edge_types=st.none() | st.lists(st.sampled_from(["temporal", "entity", "nope"]), max_size=3),
    limit=ints(1, 100),
)
async def test_memory_expand_is_valid_and_bounded(
    spy: tuple[Orchestrator, RecordingBackend],
    seed_ids: list[str],
    entities: list[str],
    query: str | None,
    hops: int,
    edge_types: list[str] | None,
    limit: int,
) -> None:
    orch, backend = spy
    values = {"seed_ids": seed_ids, "entities": entities, "query": query, "hops": hops}
    values |= {"edge_types": edge_types, "limit": limit}
    request = _validated(ExpandRequest, {k: v for k, v in values.items() if v is not None})
    if request is None:
        return
    backend.queries.clear()
    result = await orch.expand(request)
    assert len(result.items) <= request.limit
    assert not {i.memory_id for i in result.items} & set(request.seed_ids)
    _bounded(backend)


@SHARED
@given(trace_id=st.none() | TEXT, query=st.none() | LONG)
async def test_memory_explain_answers_or_names_the_unknown_trace(
    spy: tuple[Orchestrator, RecordingBackend], trace_id: str | None, query: str | None
) -> None:
    orch, backend = spy
    request = _validated(ExplainRequest, {"trace_id": trace_id, "query": query})
    if request is None:
        return
    backend.queries.clear()
    try:
        explanation = await orch.explain(request)
    except TraceNotFound as exc:
        message = str(exc)
    else:
        assert explanation.text
        _bounded(backend)
        return
    assert request.trace_id is not None
    assert repr(request.trace_id) in message
    _bounded(backend)


WRITE_LIMIT = 300


@SHARED
@given(
    content=st.one_of(
        TEXT, TEXT, st.integers(WRITE_LIMIT - 3, 9000).map(lambda n: ("zebra " * n)[:n])
    ),
    kind=mostly(
        st.sampled_from(["semantic", "episodic", "procedural", "resource"]),
        st.sampled_from(["rumour", 3]),
    ),
    entities=st.lists(LABEL, max_size=6),
    tags=st.lists(mostly(LABEL, st.text(ANY_CHAR, max_size=12)), max_size=6),
    created_at=st.none() | MOMENTS.map(datetime.isoformat),
    importance=st.none() | mostly(st.floats(0, 1), st.floats(allow_nan=True) | BIG_INTS),
    metadata=st.none()
    | mostly(
        st.dictionaries(st.text(max_size=6), JSON_SCALARS, max_size=4),
        st.dictionaries(st.text(max_size=6), JSON, max_size=4),
    ),
    dry_run=st.booleans(),
)
async def test_memory_write_writes_valid_input_and_nothing_else(
    spy: tuple[Orchestrator, RecordingBackend],
    content: str,
    kind: Any,
    entities: list[str],
    tags: list[str],
    created_at: str | None,
    importance: float | None,
    metadata: dict[str, Any] | None,
    dry_run: bool,
) -> None:
    orch, backend = spy
    orch.settings.limits.max_write_chars = WRITE_LIMIT
    memory = {"content": content, "type": kind, "entities": entities, "tags": tags}
    memory |= {"created_at": created_at, "importance": importance, "metadata": metadata}
    values = {"memory": {k: v for k, v in memory.items() if v is not None}, "dry_run": dry_run}
    request = _validated(WriteRequest, values)
    backend.writes.clear()
    backend.queries.clear()
    if request is None:
        return
    over = len(content) > WRITE_LIMIT  # the labels: within the schema's caps once validated
    try:
        report = await orch.write(request)
    except InvalidRequest as exc:
        message = str(exc)
    else:
        message = ""
    if message:
        assert over
        assert "nothing written" in message
        assert backend.writes == []
        assert backend.queries == []  # rejected before the store was asked anything
        return
    assert not over
    _bounded(backend)
    if dry_run:
        assert backend.writes == []
    elif report.action is WriteAction.SKIPPED:  # by the duplicate check, or by the store itself
        assert [w.content for w in backend.writes] in ([], [content])
    else:
        assert [w.content for w in backend.writes] == [content]


@SHARED_FEW
@given(size=st.integers(LIMIT + 1, MAX_QUERY_CHARS), words=st.lists(TEXT, min_size=1, max_size=5))
async def test_an_oversized_query_is_cut_at_a_word_boundary_before_any_store_call(
    spy: tuple[Orchestrator, RecordingBackend], size: int, words: list[str]
) -> None:
    orch, backend = spy
    query = ("Vendor X firmware " + " ".join(words) + " ") * (size // 20 + 1)
    query = query[:size].strip() or "Vendor"
    request = _validated(SearchRequest, {"query": query, "passthrough": True})
    if request is None:
        return
    backend.queries.clear()
    result = await orch.search(request)
    assert backend.queries == [cut_at_word(query, LIMIT)] or len(query) <= LIMIT
    _bounded(backend)
    if len(query) > LIMIT:
        assert _query_cut(orch, result.trace_id)


async def test_health_stays_ok_after_all_that(spy: tuple[Orchestrator, RecordingBackend]) -> None:
    orch, _ = spy
    assert (await orch.health()).status.value == "ok"

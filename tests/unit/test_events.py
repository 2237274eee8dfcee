"""Trace events (`models.events`): every kind reads through its template, values keep their
types through JSON, and the renderer is the one place the text comes from."""

from __future__ import annotations

from string import Formatter

import pytest

from memory_orchestrator.models import EventKind, Stage, Trace, TraceEvent, event, render
from memory_orchestrator.models.events import TEMPLATES
from tests.factories import NOW


def _filled(kind: EventKind) -> TraceEvent:
    """An event of `kind` with a value for each field its template names."""
    values: dict[str, str | float] = {}
    for _, name, spec, _ in Formatter().parse(TEMPLATES[kind]):
        if name and name not in {"id", "ids"}:
            values[name] = 1.5 if spec else "v"
    return event(Stage.SERVICE, kind, "mem_1", **values)


def test_every_kind_has_a_template() -> None:
    assert set(TEMPLATES) == set(EventKind)


@pytest.mark.parametrize("kind", list(EventKind))
def test_every_kind_renders_from_its_values(kind: EventKind) -> None:
    ev = _filled(kind)
    text = render(ev)
    assert text
    assert "{" not in text  # every field filled
    assert ev.text == text


def test_values_keep_their_types_through_json() -> None:
    ev = event(Stage.RETRIEVER, EventKind.SEARCH_TIMED_OUT, query="q", timeout_s=0.3)
    counted = event(Stage.INDEXES, EventKind.LOCAL_INDEX_ADDED, count=4)
    trace = Trace(
        trace_id="t", tool="search", created_at=NOW, backend="x", request={}, events=[ev, counted]
    )
    again = Trace.model_validate_json(trace.model_dump_json())
    assert again.events == [ev, counted]
    assert again.events[1].values["count"] == 4
    assert isinstance(again.events[1].values["count"], int)
    assert again.notes == trace.notes


def test_a_value_may_be_called_kind_or_stage() -> None:
    ev = event(Stage.STORE, EventKind.NOT_A_LIST, what="search", kind="a dict", then="none")
    assert ev.kind is EventKind.NOT_A_LIST
    assert ev.values["kind"] == "a dict"


def test_an_unknown_tool_name_reads_back_as_unknown() -> None:
    trace = Trace(trace_id="t", tool="reindex", created_at=NOW, backend="x", request={})
    assert trace.tool == "unknown"

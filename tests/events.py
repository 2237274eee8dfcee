"""What tests read of a trace's events (`models.events`): kinds and values, never the text a
note renders to (`tests/unit/test_note_text.py` keeps it so)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from memory_orchestrator.models import EventKind, TraceEvent, Value


class HasEvents(Protocol):
    @property
    def events(self) -> Iterable[TraceEvent]: ...


def kinds(source: HasEvents) -> list[EventKind]:
    """The kinds of `source`'s events, in order."""
    return [e.kind for e in source.events]


def said(source: HasEvents, kind: EventKind) -> list[dict[str, Value]]:
    """The values of `source`'s events of `kind`, in order."""
    return [e.values for e in source.events if e.kind is kind]


def about(source: HasEvents, kind: EventKind) -> list[tuple[str, ...]]:
    """The memory ids of `source`'s events of `kind`, in order."""
    return [e.ids for e in source.events if e.kind is kind]

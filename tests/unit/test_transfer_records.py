"""The export file: written and read back the same, and refused (with the line and the
reason) when it is cut short, altered or inconsistent."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memory_orchestrator.errors import TransferError
from memory_orchestrator.models import SUPERSEDES_KEY, Memory, MemoryType
from memory_orchestrator.state.forgotten import Tombstone
from memory_orchestrator.transfer.records import (
    EdgeRecord,
    Header,
    forgotten_of,
    lines,
    memory_of,
    new_memory,
    read_export,
    record_of,
    tombstone_of,
)

WHEN = datetime(2024, 5, 8, 13, 56, 0, 123456, tzinfo=UTC)


def memories() -> list[Memory]:
    old = Memory(
        id="m1",
        content="The group meets on Tuesday.",
        type=MemoryType.EPISODIC,
        entities=("Caroline",),
        tags=("dia:D1:1",),
        created_at=WHEN,
        source="locomo",
        importance=0.5,
        confidence=0.9,
        metadata={"dia_id": "D1:1", "n": 3, "ok": True, "x": None, "f": 0.25},
        superseded_by="m2",
        superseded_at=WHEN,
    )
    new = Memory(
        id="m2",
        content="The group meets on Thursday.",
        created_at=WHEN,
        metadata={SUPERSEDES_KEY: "m1"},
    )
    return [old, new]


def file_text() -> str:
    edge = EdgeRecord(source_id="m2", target_id="m1", type="supersedes", meta={"w": 1})
    records = [record_of(m) for m in memories()]
    return "".join(lines(Header(store="embedded"), records, [edge]))


def test_a_memory_comes_back_as_the_store_held_it() -> None:
    found = read_export(file_text().splitlines(), "f")
    assert [memory_of(r) for r in found.memories] == [
        m.model_copy(update={"store": ""}) for m in memories()
    ]
    assert found.edges[0].meta == {"w": 1}


def test_supersession_travels_as_fields_not_as_client_metadata() -> None:
    first, second = read_export(file_text().splitlines(), "f").memories
    assert second.supersedes == "m1"
    assert SUPERSEDES_KEY not in second.metadata
    assert first.superseded_by == "m2"
    written = new_memory(second, {"m1": "new-1"})  # a store that assigns its own ids
    assert written.metadata[SUPERSEDES_KEY] == "new-1"


def test_a_tombstone_travels_with_its_memory_and_comes_back_under_the_new_id() -> None:
    stone = Tombstone("m1", "embedded", "a secret", WHEN)
    first, second = (record_of(m) for m in memories())
    first = first.model_copy(update={"forgotten": forgotten_of(stone)})
    text = "".join(lines(Header(store="embedded"), [first, second], []))
    back, live = read_export(text.splitlines(), "f").memories
    assert (back.forgotten, live.forgotten) == (first.forgotten, None)
    assert tombstone_of(back, "new-1", "mnemon") == Tombstone("new-1", "mnemon", "a secret", WHEN)
    assert tombstone_of(live, "new-2", "mnemon") is None


def test_a_file_cut_short_is_refused() -> None:
    cut = file_text().splitlines()[:-1]
    with pytest.raises(TransferError, match="cut short"):
        read_export(cut, "f")


def test_counts_that_do_not_match_are_refused() -> None:
    text = file_text().splitlines()
    del text[2]  # a memory line gone, the end line kept
    with pytest.raises(TransferError, match="counts 2 memories"):
        read_export(text, "f")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.update(superseded_by="m9"), "superseded_by 'm9'"),
        (lambda r: r.update(id="m2"), "comes twice"),
        (lambda r: r.update(content=""), "line 2: content"),
        (lambda r: r.update(importance=2), "line 2: importance"),
        (lambda r: r.update(kind="memo"), "line 2: expected an object whose kind"),
    ],
)
def test_an_inconsistent_record_is_refused_with_its_line(change: object, message: str) -> None:
    text = file_text().splitlines()
    record = json.loads(text[1])
    change(record)  # type: ignore[operator]
    text[1] = json.dumps(record)
    with pytest.raises(TransferError, match=message):
        read_export(text, "f")


def test_an_edge_to_a_memory_not_in_the_file_is_refused() -> None:
    text = file_text().splitlines()
    edge = json.loads(text[3])
    edge["target_id"] = "elsewhere"
    text[3] = json.dumps(edge)
    with pytest.raises(TransferError, match="'elsewhere', which is no memory"):
        read_export(text, "f")


def test_a_file_that_is_no_export_is_refused_with_a_pointer_to_import() -> None:
    with pytest.raises(TransferError, match="orchestrator import"):
        read_export(['{"content": "a memory"}'], "f")
    with pytest.raises(TransferError, match="line 1: not JSON"):
        read_export(["not json"], "f")
    with pytest.raises(TransferError, match="empty"):
        read_export([], "f")

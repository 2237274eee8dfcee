"""Dataset loading: LoCoMo (with its known defects) and the hand-made JSONL format."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_orchestrator.errors import DatasetError
from memory_orchestrator.eval.datasets import (
    Dataset,
    load_dataset,
    memory_keys,
    normalize_evidence,
    parse_session_time,
)
from memory_orchestrator.eval.jsonl import parse_jsonl
from memory_orchestrator.models import Memory, MemoryType

LOCOMO: list[dict[str, Any]] = [
    {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bob, how was the trip?"},
                {
                    "speaker": "Bob",
                    "dia_id": "D1:2",
                    "text": "Great, look at this!",
                    "img_url": ["https://example.invalid/dog.jpg"],
                    "blip_caption": "a photo of a dog on a beach",
                },
                {"speaker": "Ann", "dia_id": "D1:3", "text": "   "},
            ],
            "session_2_date_time": "10:04 am on 12 June, 2023",
            "session_2": [
                {"speaker": "Bob", "dia_id": "D2:1", "text": "I moved to Lisbon last week."},
                {"speaker": "Ann", "dia_id": "D2:2", "text": "Congratulations!"},
            ],
            # A date with no turns (as some LoCoMo conversations have): ignored.
            "session_3_date_time": "9:00 am on 1 July, 2023",
        },
        "qa": [
            {
                "question": "Where did Bob move?",
                "answer": "Lisbon",
                "evidence": ["D2:1"],
                "category": 4,
            },
            {
                "question": "What did Bob share?",
                "answer": "x",
                "evidence": ["D1:2; D2:1"],
                "category": 1,
            },
            {"question": "When?", "answer": 2023, "evidence": ["D:1:2", "D02:01"], "category": 2},
            {"question": "Who is Carl?", "answer": "?", "evidence": ["D", "D9:9"], "category": 3},
            {
                "question": "Did Ann move?",
                "adversarial_answer": "no",
                "evidence": ["D2:2"],
                "category": 5,
            },
        ],
    }
]


@pytest.fixture
def locomo(tmp_path: Path) -> Dataset:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(LOCOMO))
    return load_dataset(path)


def test_session_dates_are_read_as_utc() -> None:
    assert parse_session_time("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert parse_session_time("12:06 am on 11 November, 2022") == datetime(
        2022, 11, 11, 0, 6, tzinfo=UTC
    )
    assert parse_session_time("9:00  am on 1 Jul 2023") == datetime(2023, 7, 1, 9, 0, tzinfo=UTC)
    with pytest.raises(DatasetError, match="unreadable session date"):
        parse_session_time("yesterday")


def test_malformed_evidence_ids_are_split_and_normalized() -> None:
    raw = ["D8:6; D9:17", "D:11:26", "D30:05", "D", "D8:6"]
    assert normalize_evidence(raw) == ["D8:6", "D9:17", "D11:26", "D30:5"]


def test_every_turn_with_text_becomes_an_episodic_memory_of_its_speaker(locomo: Dataset) -> None:
    (case,) = locomo.cases
    assert [m.key for m in case.memories] == ["D1:1", "D1:2", "D2:1", "D2:2"]  # D1:3 is blank
    bob = case.memories[1].memory
    assert bob.content == "Bob: Great, look at this! [shared a photo: a photo of a dog on a beach]"
    assert bob.entities == ["Bob"]
    assert bob.type is MemoryType.EPISODIC
    assert bob.tags == ["dia:D1:2"]
    assert bob.metadata == {"dia_id": "D1:2"}


def test_turns_take_their_session_time_plus_a_second_per_earlier_turn(locomo: Dataset) -> None:
    (case,) = locomo.cases
    first = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert [m.memory.created_at for m in case.memories[:2]] == [first, first + timedelta(seconds=1)]
    second = datetime(2023, 6, 12, 10, 4, tzinfo=UTC)
    assert case.memories[3].memory.created_at == second + timedelta(seconds=1)


def test_now_is_the_last_session_with_turns_not_a_date_without_any(locomo: Dataset) -> None:
    (case,) = locomo.cases
    assert case.as_of == datetime(2023, 6, 12, 10, 4, 1, tzinfo=UTC)


def test_evidence_naming_no_turn_is_dropped_and_a_question_left_without_any_is_skipped(
    locomo: Dataset,
) -> None:
    questions = {q.text: q for q in locomo.cases[0].questions}
    assert questions["What did Bob share?"].evidence == ("D1:2", "D2:1")
    assert questions["When?"].evidence == ("D1:2", "D2:1")
    carl = questions["Who is Carl?"]
    assert carl.evidence == ()
    assert carl.skip_reason is not None
    assert "no evidence id names a turn" in carl.skip_reason
    assert all(q.skip_reason is None for q in questions.values() if q is not carl)


def test_adversarial_questions_are_kept_apart_from_the_headline(locomo: Dataset) -> None:
    categories = [q.category for q in locomo.cases[0].questions]
    assert categories == ["4", "1", "2", "3", "5"]
    assert locomo.headline_categories == ("1", "2", "3", "4")
    assert locomo.apart_categories == {"5": "adversarial"}
    assert locomo.category_names["5"] == "adversarial"


def test_a_stored_memory_maps_back_by_metadata_or_by_tag() -> None:
    by_tag = Memory(id="m1", content="x", tags=("dia:D3:4", "other"))
    by_meta = Memory(id="m2", content="x", metadata={"dia_id": "D5:6"})
    assert memory_keys(by_tag, "dia_id", "dia:") == {"D3:4"}
    assert memory_keys(by_meta, "dia_id", "dia:") == {"D5:6"}
    assert memory_keys(Memory(id="m3", content="x"), "dia_id", "dia:") == set()


def test_unreadable_locomo_files_are_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="not found"):
        load_dataset(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list"}')
    with pytest.raises(DatasetError, match="JSON list"):
        load_dataset(bad)


# ---------------------------------------------------------------- JSONL

JSONL = """
# a comment, then a case
{"case": "team", "as_of": "2026-03-20T17:00:00Z"}
{"memories": [{"id": "m1", "content": "Dana leads the Platform team.", "entities": ["Dana"], "created_at": "2026-01-05T09:00:00Z"}, {"id": "m2", "content": "No date here.", "tags": ["x"]}]}
{"memory": {"id": "m3", "content": "The deploy failed on Tuesday.", "type": "episodic", "created_at": "2026-03-17T09:00:00Z"}}
{"id": "q1", "query": "Who leads Platform?", "relevant": ["m1"], "category": "direct"}
{"query": "What failed?", "relevant": ["m3", "m3"], "category": "episodic", "as_of": "2026-03-18T00:00:00Z"}
{"query": "Nothing relevant", "relevant": []}
{"id": "w1", "write": {"content": "Dana is leading the Platform team."}, "expect": "skipped", "duplicate_of": "m1"}
{"case": "other"}
{"memory": {"id": "m1", "content": "Same id, other case.", "created_at": "2025-01-01T00:00:00Z"}}
"""


def test_jsonl_cases_memories_queries_and_write_checks() -> None:
    data = parse_jsonl(JSONL, name="mine")
    team, other = data.cases
    assert (team.id, other.id) == ("team", "other")
    assert team.as_of == datetime(2026, 3, 20, 17, tzinfo=UTC)
    assert other.as_of == datetime(2025, 1, 1, tzinfo=UTC)  # its newest memory
    m1, m2, m3 = team.memories
    assert m1.memory.tags == ["eval:m1"]
    assert m1.memory.metadata == {"eval_id": "m1"}
    assert m2.memory.tags == ["x", "eval:m2"]
    assert m2.memory.created_at == team.as_of  # undated memories are dated at as_of
    assert m3.memory.type is MemoryType.EPISODIC
    q1, q2, q3 = team.questions
    assert (q1.id, q1.evidence, q1.category) == ("team#q1", ("m1",), "direct")
    assert q2.evidence == ("m3",)
    assert q2.as_of == datetime(2026, 3, 18, tzinfo=UTC)
    assert (q3.category, q3.skip_reason) == ("uncategorized", "no relevant memory listed")
    (check,) = team.write_checks
    assert (check.id, check.expect, check.duplicate_of) == ("team#w1", "skipped", "m1")
    assert data.headline_categories == ("direct", "episodic", "uncategorized")
    assert data.apart_categories == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"memory": {"id": "m1", "content": "x"}}\n{"query": "q", "relevant": ["m9"]}',
            ":2: relevant id",
        ),
        ('{"memory": {"id": "m1", "content": "x"}}\nnot json', ":2: not JSON"),
        (
            '{"memory": {"id": "m1", "content": "x"}, "query": "q"}',
            ":1: a record holds exactly one",
        ),
        (
            '{"memory": {"id": "m1", "content": "x"}}\n{"memory": {"id": "m1", "content": "y"}}',
            "repeats",
        ),
        ('{"memory": {"content": "no id"}}', "needs an 'id'"),
        ('{"memory": {"id": "m1", "content": "x", "colour": "red"}}', ":1: colour"),
        ('{"query": "q", "relevant": [], "bogus": 1}', ":1: bogus"),
        ('{"write": {"content": "x"}, "expect": "maybe"}', ":1: expect"),
        ('{"case": "a"}\n{"case": "a"}', "already defined"),
        ("# only a comment", "no records"),
    ],
)
def test_jsonl_mistakes_are_reported_with_their_line(text: str, message: str) -> None:
    with pytest.raises(DatasetError, match=message):
        parse_jsonl(text, name="bad.jsonl")


def test_a_jsonl_file_is_loaded_by_its_suffix(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(
        '{"memory": {"id": "m1", "content": "x"}}\n{"query": "x?", "relevant": ["m1"]}\n'
    )
    data = load_dataset(path)
    assert data.name == "mine.jsonl"
    assert [c.id for c in data.cases] == ["default"]


def test_the_golden_set_covers_every_use_case() -> None:
    golden = load_dataset("golden")
    assert {"direct", "multi_hop", "episodic"} <= set(golden.headline_categories)
    checks = [w for case in golden.cases for w in case.write_checks]
    assert {"added", "skipped", "updated"} <= {w.expect for w in checks}
    questions = [q for case in golden.cases for q in case.questions]
    assert all(q.skip_reason is None for q in questions)
    assert any(len(q.evidence) > 1 for q in questions if q.category == "multi_hop")

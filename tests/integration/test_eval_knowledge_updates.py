"""The knowledge-update set: its format (a "write" case), and its figures from a real run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memory_orchestrator.errors import DatasetError
from memory_orchestrator.eval import RunOptions, build_report, load_dataset, run_eval
from memory_orchestrator.eval.jsonl import parse_jsonl
from memory_orchestrator.settings import Settings

pytestmark = pytest.mark.integration

RATE = "The API rate limit for the billing service is {} requests per minute."
SET: list[dict[str, Any]] = [
    {"case": "tiny", "ingest": "write", "as_of": "2026-10-01T00:00:00Z"},
    {
        "memory": {
            "id": "r0",
            "content": RATE.format(100),
            "created_at": "2026-09-01T09:00:00Z",
            "expect": "added",
        }
    },
    {
        "memory": {
            "id": "s0",
            "content": "Backups of the staging search database are kept for 7 days.",
            "created_at": "2026-09-02T09:00:00Z",
            "expect": "added",
        }
    },
    {
        "memory": {
            "id": "r1",
            "content": RATE.format(500),
            "created_at": "2026-09-03T09:00:00Z",
            "expect": "updated",
            "supersedes": "r0",
        }
    },
    {
        "memory": {
            "id": "r2",
            "content": "The billing service's API rate limit is 500 requests per minute.",
            "created_at": "2026-09-04T09:00:00Z",
            "expect": "skipped",
        }
    },
    {
        "memory": {
            "id": "s1",
            "content": "Backups of the production search database are kept for 30 days.",
            "created_at": "2026-09-05T09:00:00Z",
            "expect": "added",
            "lookalike_of": "s0",
        }
    },
    {
        "query": "What is the billing API rate limit?",
        "relevant": ["r1"],
        "stale": ["r0"],
        "category": "number",
    },
    {
        "query": "How long are production search backups kept?",
        "relevant": ["s1"],
        "category": "lookalike",
    },
]


def text(records: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(r) for r in records)


def test_a_write_case_keeps_what_each_write_must_answer() -> None:
    (case,) = parse_jsonl(text(SET), name="tiny").cases
    assert case.ingest == "write"
    by_key = {m.key: m for m in case.memories}
    assert (by_key["r1"].expect, by_key["r1"].supersedes) == ("updated", "r0")
    assert by_key["s1"].lookalike_of == "s0"
    assert "expect" not in by_key["r1"].memory.metadata
    assert case.questions[0].stale == ("r0",)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"memory": {"id": "x", "content": "c", "expect": "maybe"}}, "expect"),
        ({"memory": {"id": "x", "content": "c", "supersedes": "nope"}}, "nope"),
        ({"query": "q?", "relevant": ["r0"], "stale": ["gone"]}, "gone"),
    ],
)
def test_bad_expectations_are_refused_naming_the_line(record: dict[str, Any], message: str) -> None:
    with pytest.raises(DatasetError, match=message):
        parse_jsonl(text([*SET, record]), name="tiny")


async def test_a_write_case_runs_through_memory_write_and_reports_the_figures(
    settings: Settings,
) -> None:
    data = parse_jsonl(text(SET), name="tiny")
    run = await run_eval(data, settings, RunOptions(backend="embedded", k=(1, 5)))
    block = build_report(run)["knowledge_updates"]
    assert {k: block[k] for k in ("writes", "updates", "updates_detected")} == {
        "writes": 5,
        "updates": 1,
        "updates_detected": 1,
    }
    assert (block["restatements"], block["restatements_written"]) == (1, 0)
    assert (block["lookalikes"], block["lookalikes_superseded"]) == (1, 0)
    assert block["wrong_writes"] == []
    orchestrated = block["systems"]["orchestrated"]
    assert orchestrated["current_recall@1"] == 1.0
    assert (orchestrated["stale_questions"], orchestrated["stale_leakage"]) == (1, 0.0)
    # the store alone returns the corrected memory too, and first (it is older, same words)
    assert block["systems"]["raw"]["stale_leakage"] == 1.0


def test_the_shipped_set_has_150_sequences_and_more() -> None:
    data = load_dataset("knowledge-updates")
    firsts = [m for c in data.cases for m in c.memories if m.key.endswith("-0")]
    assert len(firsts) >= 150
    assert all(c.ingest == "write" for c in data.cases)
    kinds = {q.category for c in data.cases for q in c.questions}
    assert {"number", "date", "person", "place", "negation", "reversal"} <= kinds
    assert {"restatement", "lookalike"} <= kinds


BY_KIND: list[dict[str, Any]] = [
    {"case": "kinds", "ingest": "write", "as_of": "2026-10-01T00:00:00Z"},
    *(
        {
            "memory": {
                "id": key,
                "content": text,
                "created_at": f"2026-09-0{n + 1}T09:00:00Z",
                **more,
            }
        }
        for n, (key, text, more) in enumerate(
            [
                ("swap-branch-00-0", "We publish the docs site from the gh-pages branch.", {}),
                (
                    "swap-branch-00-1",
                    "We publish the docs site from the main branch.",
                    {"expect": "updated", "supersedes": "swap-branch-00-0"},
                ),
                ("restated-passive-01-0", "Kim maintains the payments SDK.", {}),
                (
                    "restated-passive-01-1",
                    "The payments SDK is maintained by Kim.",
                    {"expect": "skipped"},
                ),
                ("lookalike-same-02-0", "The staging cluster runs Postgres 15.", {}),
                (
                    "lookalike-same-02-1",
                    "The production cluster runs Postgres 15.",
                    {"expect": "added", "lookalike_of": "lookalike-same-02-0"},
                ),
            ]
        )
    ),
    {"query": "Which branch is the docs site published from?", "relevant": ["swap-branch-00-1"]},
]


async def test_the_figures_are_reported_per_kind_of_write_sequence(settings: Settings) -> None:
    data = parse_jsonl(text(BY_KIND), name="kinds")
    run = await run_eval(data, settings, RunOptions(backend="embedded", k=(1,)))
    block = build_report(run)["knowledge_updates"]
    assert block["corrections_skipped"] == 0
    kinds = block["by_kind"]
    assert kinds["swap-branch"] == {
        "corrections": 1,
        "detected": 1,
        "skipped": 0,
        "added": 0,
        "new_facts": 1,
        "superseding": 0,
        "new_skipped": 0,
    }
    assert (kinds["restated-passive"]["restatements"], kinds["restated-passive"]["written"]) == (
        1,
        0,
    )
    assert (kinds["lookalike-same"]["lookalikes"], kinds["lookalike-same"]["superseded"]) == (1, 0)

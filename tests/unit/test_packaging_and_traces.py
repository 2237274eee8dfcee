"""Packager limits and grouping, explainer text, and the trace store."""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
from contextlib import closing
from datetime import timedelta
from pathlib import Path

import pytest

from memory_orchestrator.models import (
    Dropped,
    DropReason,
    EventKind,
    ExpansionDecision,
    MemoryType,
    Stage,
    Strategy,
    Trace,
    event,
    render,
)
from memory_orchestrator.pipeline.explainer import explain_text, summarize
from memory_orchestrator.pipeline.packager import Budget, package, shorten
from memory_orchestrator.pipeline.relevance import RankContext
from memory_orchestrator.pipeline.reranker import rerank
from memory_orchestrator.settings import RankingProfile
from memory_orchestrator.state.traces import TraceStore
from tests.factories import NOW, candidate, memory, plan
from tests.faults import FailingTraceStore


def ranked_items(count: int, query: str = "atlas vendor", **plan_args: object) -> list:  # type: ignore[type-arg]
    cands = [
        candidate(
            memory(
                f"m{i}",
                f"Atlas vendor note number {i} " + "with details " * 10,
                kind=MemoryType.EPISODIC,
                entities=("Atlas",) if i % 2 else ("Vendor X",),
                created_at=NOW - timedelta(days=i),
            ),
            rank=i + 1,
        )
        for i in range(count)
    ]
    p = plan(query, **plan_args)  # type: ignore[arg-type]
    return rerank(cands, RankContext(plan=p, now=NOW, settings=RankingProfile()))


def test_shorten_cuts_at_a_word_boundary_with_an_ellipsis() -> None:
    assert shorten("short text", 50) == "short text"
    cut = shorten("alpha beta gamma delta epsilon", 17)
    assert len(cut) <= 17
    assert cut.endswith("…")
    assert "gam" not in cut or "gamma" in cut


def test_max_items_and_max_chars_are_hard_limits() -> None:
    items = ranked_items(20)
    p = plan("atlas vendor")
    for max_chars in (200, 500, 1500, 5000):
        packed = package(items, p, Budget(5, max_chars, 120), task="t", candidate_count=20)
        assert len(packed.context_block) <= max_chars
        assert len(packed.items) <= 5
        assert len(packed.items) + len(packed.cut) == 20
        for item in packed.items:
            assert item.memory_id in packed.context_block


def test_the_block_keeps_the_longest_prefix_that_fits() -> None:
    """However the limit falls, the block holds exactly the items that fit one by one: no
    item is left out while a later, lower-ranked one gets in."""
    items = ranked_items(12)
    p = plan("atlas vendor")
    whole = package(items, p, Budget(12, 100_000, 120), task=None, candidate_count=12)
    one = package(items, p, Budget(1, 100_000, 120), task=None, candidate_count=12)
    sizes = []  # from the budget that holds the full header and one item (below it, see next)
    for max_chars in range(len(one.context_block), len(whole.context_block) + 50, 37):
        packed = package(items, p, Budget(12, max_chars, 120), task=None, candidate_count=12)
        count = len(packed.items)
        assert [i.memory_id for i in packed.items] == [i.id for i in items[:count]]
        assert len(packed.context_block) <= max_chars
        if count < 12:  # one more item would not have fitted
            more = package(items, p, Budget(count + 1, 100_000, 120), task=None, candidate_count=12)
            assert len(more.context_block) > max_chars
        sizes.append(count)
    assert sizes == sorted(sizes)
    assert sizes[0] == 1
    assert sizes[-1] == 12


def test_episodic_strategy_lists_items_chronologically() -> None:
    items = ranked_items(5, strategy=Strategy.EPISODIC)
    p = plan("atlas vendor", strategy=Strategy.EPISODIC)
    packed = package(items, p, Budget(5, 5000, 200), task=None, candidate_count=5)
    assert "chronological" in packed.context_block
    positions = [packed.context_block.index(f"(m{i};") for i in range(5)]
    assert positions == sorted(positions, reverse=True)  # m4 is oldest, listed first


def test_two_named_entities_group_the_block_by_entity() -> None:
    p = plan("atlas vendor", entities=("Atlas", "Vendor X"))
    packed = package(ranked_items(4), p, Budget(4, 5000, 200), task=None, candidate_count=4)
    assert "About Atlas:" in packed.context_block
    assert "About Vendor X:" in packed.context_block


def test_the_package_names_entities_span_and_task() -> None:
    p = plan("atlas vendor")
    packed = package(
        ranked_items(3), p, Budget(3, 5000, 200), task="draft update", candidate_count=9
    )
    assert packed.context_block.startswith("Memory context for task: draft update")
    assert set(packed.linked_entities) == {"Atlas", "Vendor X"}
    assert packed.time_span is not None
    assert packed.summary.startswith("3 of 9 candidate memories")


@pytest.mark.parametrize("task", [None, "draft the weekly update for the Atlas programme"])
@pytest.mark.parametrize("max_chars", [200, 300, 400, 500])
def test_a_tight_budget_keeps_the_best_items_cut_to_fit(task: str | None, max_chars: int) -> None:
    """Six memories, max_items 3: the header shrinks first, then the best items are cut;
    the block never says none were found, and the summary counts what it shows."""
    items = ranked_items(6, query="Atlas blockers")
    p = plan("Atlas blockers")
    packed = package(items, p, Budget(3, max_chars, 240), task=task, candidate_count=6)
    assert len(packed.context_block) <= max_chars
    assert "No relevant memories found" not in packed.context_block
    assert len(packed.items) >= 1
    assert packed.items[0].memory_id == items[0].id
    assert packed.summary.startswith(f"{len(packed.items)} of 6 candidate memories")
    for item in packed.items:
        assert item.memory_id in packed.context_block
        assert item.summary in packed.context_block


def test_when_nothing_fits_at_all_the_block_says_so_not_none_found() -> None:
    items = ranked_items(3)
    packed = package(items, plan("atlas vendor"), Budget(3, 30, 240), task=None, candidate_count=3)
    assert len(packed.context_block) <= 30
    assert "No relevant" not in packed.context_block
    assert packed.summary.startswith("3 of 3 candidate memories matched; none fit")


def test_an_empty_result_still_gives_a_clear_block() -> None:
    packed = package([], plan("nothing"), Budget(3, 500, 100), task=None, candidate_count=0)
    assert "No relevant memories found." in packed.context_block
    assert packed.items == ()


def test_an_item_names_on_its_line_the_memories_it_absorbed() -> None:
    """The agent reads the block, not `merged_ids`: what was stored is named where it looks."""
    items = ranked_items(3)
    items[0] = items[0].model_copy(update={"merged_ids": ("m7", "m9")})
    packed = package(
        items, plan("atlas vendor"), Budget(3, 5000, 240), task=None, candidate_count=3
    )
    (line,) = [row for row in packed.context_block.splitlines() if f"({items[0].id};" in row]
    assert line.endswith("; merged: m7, m9)")
    assert sum("merged:" in row for row in packed.context_block.splitlines()) == 1


WARNING = "Warning: the memory store could not be searched (it is gone); these come from elsewhere."


@pytest.mark.parametrize("max_chars", [150, 400, 5000])
def test_a_warning_is_the_first_line_of_the_block_whatever_the_budget(max_chars: int) -> None:
    items = ranked_items(4)
    budget = Budget(4, max_chars, 240)
    packed = package(
        items, plan("atlas vendor"), budget, task=None, candidate_count=4, warning=WARNING
    )
    assert packed.context_block.splitlines()[0] == WARNING
    assert len(packed.context_block) <= max_chars
    if max_chars >= 400:
        assert packed.items


def sample_trace() -> Trace:
    return Trace(
        trace_id="tr_1",
        tool="search",
        created_at=NOW,
        backend="embedded",
        request={"query": "atlas"},
        plan=plan("atlas"),
        expansions=[
            ExpansionDecision(
                seed_id="a",
                neighbor_id="b",
                edge_type="temporal",
                hops=1,
                accepted=True,
                reason="1 hop(s) via temporal",
            ),
        ],
        dropped=[Dropped(id="c", reason=DropReason.DUPLICATE, stage=Stage.DEDUPER, detail="of a")],
        result_ids=["a", "b"],
        events=[FILTERED],
    )


FILTERED = event(Stage.RETRIEVER, EventKind.FILTERED_AFTER, filter="time_range")


def test_explanation_names_rewrites_expansions_drops_and_notes() -> None:
    text = explain_text(sample_trace())
    assert "canonical" in text
    assert "took b from a via temporal" in text
    assert "c: duplicate: of a (deduper stage)" in text
    assert render(FILTERED) in text  # the explanation tells each event
    summary = summarize(sample_trace())
    assert summary.notes == (render(FILTERED),)
    assert summary.expanded_from == ("a",)
    assert summary.subqueries == ("atlas",)


def test_the_summary_names_no_seed_when_no_expanded_memory_is_shown() -> None:
    """The "expanded from" footer appeared when the expanded memory did not make it in."""
    trace = sample_trace().model_copy(update={"result_ids": ["a"]})
    assert summarize(trace).expanded_from == ()


@pytest.mark.parametrize(
    ("days", "half_life", "reason"),
    [
        (0, 30, "recent (today)"),
        (1, 30, "recent (1 day old)"),
        (9, 30, "recent (9 days old)"),
        (112, 180, "112 days old, within its 180-day half-life"),
        (40, 30, None),
    ],
)
def test_an_old_memory_is_not_called_recent(
    days: int, half_life: float, reason: str | None
) -> None:
    """ "recent (112 days old)" read wrong."""
    ranking = RankingProfile()
    ranking = ranking.model_copy(update={"half_life_days": {MemoryType.EPISODIC: float(half_life)}})
    cand = candidate(
        memory(
            "m",
            "Atlas vendor note",
            kind=MemoryType.EPISODIC,
            created_at=NOW - timedelta(days=days),
        ),
        rank=1,
    )
    (item,) = rerank([cand], RankContext(plan=plan("atlas vendor"), now=NOW, settings=ranking))
    ages = [r for r in item.reasons if "day" in r or "recent" in r]
    assert ages == ([reason] if reason else [])


def test_traces_persist_in_sqlite_and_old_ones_are_pruned(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "traces.db", keep=10)
    try:
        for i in range(120):
            store.save(sample_trace().model_copy(update={"trace_id": f"tr_{i}"}))
        assert store.get("tr_119") is not None
        assert store.get("tr_5") is None
        assert [t.trace_id for t in store.recent(2)] == ["tr_119", "tr_118"]
    finally:
        store.close()
    reopened = TraceStore(tmp_path / "traces.db")
    try:
        trace = reopened.get("tr_119")
        assert trace is not None
        assert trace.plan is not None
        assert trace.plan.raw_query == "atlas"
    finally:
        reopened.close()


def older(trace: Trace, notes: list[str], plan_notes: list[str]) -> str:
    """`trace` as a trace store kept it before events: notes as text, in the trace and its
    plan, and no events."""
    body = trace.model_dump(mode="json")
    del body["events"]
    body["notes"] = notes
    del body["plan"]["events"]
    body["plan"]["notes"] = plan_notes
    return json.dumps(body)


def test_a_trace_stored_before_events_reads_back_with_its_notes(tmp_path: Path) -> None:
    notes = ["search 'atlas' timed out after 5s; partial results", "passthrough: as it was"]
    plan_notes = ["entity 'Atlas' known to the store"]
    path = tmp_path / "traces.db"
    TraceStore(path).close()  # the table, as the store makes it
    with closing(sqlite3.connect(path)) as db, db:
        db.execute(
            "INSERT INTO traces (trace_id, tool, created_at, body) VALUES (?, ?, ?, ?)",
            ("tr_old", "search", NOW.isoformat(), older(sample_trace(), notes, plan_notes)),
        )
    store = TraceStore(path)
    try:
        trace = store.get("tr_old")
    finally:
        store.close()
    assert trace is not None
    assert [e.kind for e in trace.events] == [EventKind.NOTE, EventKind.NOTE]
    assert trace.notes == tuple(notes)  # told as it was
    assert trace.plan is not None
    assert trace.plan.notes == tuple(plan_notes)
    again = Trace.model_validate_json(trace.model_dump_json())  # stored again: events kept
    assert again.events == trace.events


def test_in_memory_trace_store_keeps_the_newest() -> None:
    store = TraceStore(None, keep=10)
    for i in range(15):
        store.save(sample_trace().model_copy(update={"trace_id": f"tr_{i}"}))
    assert store.get("tr_0") is None
    assert store.get("tr_14") is not None


def test_traces_are_stored_behind_the_request_and_read_back_at_once(tmp_path: Path) -> None:
    """`save` returns before the trace is written; every read waits for what was saved."""
    for path in (tmp_path / "traces.db", None):
        store = TraceStore(path, keep=1000)
        try:
            for i in range(300):
                store.save(sample_trace().model_copy(update={"trace_id": f"tr_{i}"}))
            assert store.get("tr_299") is not None
            assert [t.trace_id for t in store.recent(3)] == ["tr_299", "tr_298", "tr_297"]
            assert len(store.since()) == 300
            assert store.errors == 0
        finally:
            store.close()


def test_traces_saved_by_a_process_that_exits_without_closing_are_kept(tmp_path: Path) -> None:
    db = tmp_path / "traces.db"
    script = (
        "import sys\n"
        "from tests.unit.test_packaging_and_traces import sample_trace\n"
        "from memory_orchestrator.state.traces import TraceStore\n"
        "store = TraceStore(__import__('pathlib').Path(sys.argv[1]))\n"
        "for i in range(200):\n"
        "    store.save(sample_trace().model_copy(update={'trace_id': f'tr_{i}'}))\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script, str(db)],
        check=False,
        cwd=root,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    reopened = TraceStore(db)
    try:
        assert len(reopened.since()) == 200
    finally:
        reopened.close()


def test_a_trace_that_cannot_be_stored_is_counted_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = FailingTraceStore(tmp_path / "traces.db")
    try:
        with caplog.at_level(logging.WARNING, logger="memory_orchestrator.state.traces"):
            store.save(sample_trace())
            assert store.get("tr_x") is None  # waits for the failed write
        assert store.errors == 1
        assert store.last_error == "OperationalError: disk I/O error"
        assert "not stored" in caplog.text
    finally:
        store.close()

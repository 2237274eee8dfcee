"""The identifier-pairs set through every store kind the suite can start: two facts that differ
in an identifier are both written and both shown in the context block; a restatement is
skipped; a correction shows only the current fact; and two restatements stored side by side
(an import, two stores) are merged into one item that names the other.

Real parts: SQLite files, the real Mnemon build, the npm MCP servers (mnemon-mcp, the
knowledge-graph server), markdown files, a real PostgreSQL, the fused store."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import anyio
import pytest

from memory_orchestrator.eval import load_dataset
from memory_orchestrator.eval.datasets import EvalCase
from memory_orchestrator.models import ContextRequest, NewMemory, ResponseBudget, WriteRequest
from memory_orchestrator.pipeline.deduper import similarity
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.traces import TraceStore
from tests.mnemon_double import real_binary
from tests.stores import make_store

pytestmark = pytest.mark.integration

T = TypeVar("T")
SET = load_dataset("identifier-pairs")
REAL = [pytest.param("mnemon-real", marks=pytest.mark.mnemon_real)] if real_binary() else []
STORES = ["embedded", *REAL, "mnemon-mcp", "kg-memory", "mnemonic", "postgres", "fused"]


def run(fn: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(fn)


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def orchestrator(
    kind: str, settings: Settings, folder: Path, request: pytest.FixtureRequest, now: datetime
) -> Orchestrator:
    dsn = request.getfixturevalue("pg_dsn") if kind == "postgres" else None
    store = make_store(kind, folder, dsn)
    return Orchestrator(
        store, settings, traces=TraceStore(settings.trace_path()), clock=lambda: now
    )


def _by_key(case: EvalCase) -> dict[str, str]:
    return {m.key: m.memory.content for m in case.memories}


@pytest.mark.parametrize("case", SET.cases, ids=[c.id for c in SET.cases])
def test_two_facts_that_differ_in_an_identifier_are_both_in_the_block(
    store_kind: str,
    case: EvalCase,
    settings: Settings,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """The case written through `memory_write` into a fresh store, in order: every write
    answers what the set expects; then each pair's question shows both facts in the block,
    and each correction's the current fact (alone where the store marks the corrected one,
    as all but postgres do)."""
    o = orchestrator(store_kind, settings, tmp_path, request, case.as_of)
    text = _by_key(case)
    ids: dict[str, str] = {}
    lost: list[str] = []
    try:
        for item in case.memories:
            write = WriteRequest(memory=item.memory, link_related=False)
            report = run(lambda w=write: o.write(w))  # type: ignore[misc]
            assert report.action.value == item.expect, (item.key, report.reason)
            ids[item.key] = report.id or ""
        for q in case.questions:
            budget = ResponseBudget(max_items=8, max_chars=3000)
            request_ = ContextRequest(query=q.text, response_budget=budget)
            package = run(lambda r=request_: o.context(r))  # type: ignore[misc]
            if q.category == "kept-apart":
                missing = [
                    k for k in q.evidence if text[k].rstrip(".") not in package.context_block
                ]
                lost.extend(f"{q.id}: {text[k]}" for k in missing)
            elif q.category == "correction":
                (current,), (stale,) = q.evidence, q.stale
                shown = [i.memory_id for i in package.items]
                assert ids[current] in shown, (q.id, package.context_block)
                # only a store that keeps no mark of a correction (postgres) shows both
                assert ids[stale] not in shown or not o.capabilities.supersede, q.id
    finally:
        run(o.close)
    assert not lost, lost


def test_two_restatements_stored_side_by_side_are_one_item_naming_the_other(
    store_kind: str, settings: Settings, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Stored as they are (an import), the pairs of facts stay two items each; a restatement
    as alike in words as the merge threshold becomes one item with the other (named in its
    merged ids); a less alike one ("Omar patches the hosts" / "the hosts are patched by
    Omar") stays, penalised as a duplicate."""
    now = datetime(2026, 11, 1, tzinfo=UTC)
    o = orchestrator(store_kind, settings, tmp_path, request, now)
    case = next(c for c in SET.cases if c.id == "ids-hosts")
    text = _by_key(case)
    merged = 0
    try:
        memories = [
            NewMemory(content=m.memory.content, created_at=m.memory.created_at)
            for m in case.memories
        ]
        outcomes = run(lambda: o.ingest(memories))
        ids = {
            m.key: out.existing_id or out.id for m, out in zip(case.memories, outcomes, strict=True)
        }
        for q in case.questions:
            wide = ResponseBudget(max_items=20, max_chars=8000)  # both, whatever else ranks
            asked = ContextRequest(query=q.text, response_budget=wide)
            found = run(lambda r=asked: o.context(r))  # type: ignore[misc]
            if q.category == "kept-apart":
                shown = {i.memory_id for i in found.items}
                assert all(ids[k] in shown for k in q.evidence), (q.id, found.context_block)
            if q.category != "restatement":
                continue
            group = q.id.split("#")[1]
            first, again = ids[f"{group}-0"], ids[f"{group}-1"]
            kept = [i for i in found.items if {first, again} & {i.memory_id, *i.merged_ids}]
            if first == again:  # the store kept one itself
                assert len(kept) == 1, q.id
            elif similarity(text[f"{group}-0"], text[f"{group}-1"]) >= settings.dedup.threshold:
                assert len(kept) == 1, (q.id, [(i.memory_id, i.merged_ids) for i in kept])
                assert {first, again} == {kept[0].memory_id, *kept[0].merged_ids}
                merged += 1
            else:  # the same fact in other words, less alike: one penalised, not merged
                penalties = [i.breakdown.duplicate_penalty if i.breakdown else 0 for i in kept]
                assert len(kept) == 2, q.id
                assert sorted(p > 0 for p in penalties) == [False, True], (q.id, penalties)
        assert merged or store_kind.startswith("mnemon"), "no restatement merged"
    finally:
        run(o.close)

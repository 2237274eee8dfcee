"""A slow or locked Mnemon costs a list, not the request's time (`retrieval.list_budget_s`).

Over the contract double with its hang knob (every `mnemon` process sleeps 30 s first): the
local index is fed from the store file, so `memory_context` answers from it once the budget
has passed, stops the hanging `recall`, and says so in the trace. The time the request takes
is bounded by the test, never asserted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from memory_orchestrator.backends.mnemon import MnemonBackend
from memory_orchestrator.models import ContextRequest, EventKind, NewMemory, Value
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import MnemonSettings, Settings
from memory_orchestrator.state.traces import TraceStore
from tests.events import said
from tests.mnemon_double import fast_launcher

pytestmark = pytest.mark.integration

NOTES = [
    "Dana moved the Atlas review to Friday.",
    "The radio firmware ships with the March release.",
    "Lee owns the billing service's rate limits.",
]


@pytest.fixture
def orch(settings: Settings, tmp_path: Path) -> Iterator[Orchestrator]:
    binary = fast_launcher(tmp_path / "bin")
    store = MnemonBackend(MnemonSettings(binary=binary, data_dir=tmp_path / "mnemon", timeout_s=60))
    anyio.run(store.write_many, [NewMemory(content=text) for text in NOTES])
    settings.retrieval.timeout_s = 60
    o = Orchestrator(store, settings, traces=TraceStore(settings.trace_path()))
    yield o
    anyio.run(o.close)


async def context(orch: Orchestrator, query: str) -> tuple[list[str], list[dict[str, Value]]]:
    """The items' texts, and the store searches left out once the local lists were in."""
    with anyio.fail_after(45):  # a bound on a hang, not a speed assertion
        package = await orch.context(ContextRequest(query=query, expand=False))
    trace = orch.trace(package.trace_id)
    assert trace is not None
    return [item.summary for item in package.items], said(trace, EventKind.SEARCH_LEFT_OUT)


async def test_a_hanging_recall_costs_its_list_once_the_local_lists_are_in(
    orch: Orchestrator, monkeypatch: pytest.MonkeyPatch
) -> None:
    await context(orch, "Atlas review")  # the local index is built from the store file here
    orch.settings.retrieval.list_budget_s = 0.05
    monkeypatch.setenv("MNEMON_DOUBLE_SLEEP_S", "30")  # every mnemon process hangs first
    found, left_out = await context(orch, "when is the Atlas review")
    assert found[:1] == [NOTES[0]]
    assert left_out
    assert all(v["budget_s"] == 0.05 for v in left_out), left_out


async def test_with_no_budget_the_recall_is_waited_for(orch: Orchestrator) -> None:
    orch.settings.retrieval.list_budget_s = 0
    found, left_out = await context(orch, "when is the Atlas review")
    assert found[:1] == [NOTES[0]]
    assert left_out == []

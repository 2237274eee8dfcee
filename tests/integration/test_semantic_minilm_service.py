"""The minilm semantic stage in the whole pipeline: the real embedded store, the real ONNX
model, its vectors kept under the data dir across a restart, and a missing model degrading
`health` with the command that fixes it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.derived import indexes
from memory_orchestrator.derived.embedders import Embedder, load_embedder
from memory_orchestrator.models import (
    ContextRequest,
    EventKind,
    MemoryType,
    NewMemory,
    SearchRequest,
    Status,
    WriteRequest,
)
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.traces import TraceStore
from tests.events import kinds, said
from tests.factories import NOW, TOPICS

pytestmark = pytest.mark.integration

MEMORIES = TOPICS


class Counting:
    """The real model, counting the texts it embeds."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.name = inner, inner.name
        self.texts: list[str] = []
        self.fingerprint = getattr(inner, "fingerprint", inner.name)

    def embed(self, texts: Sequence[str]) -> Any:
        self.texts.extend(texts)
        return self.inner.embed(texts)


def minilm(settings: Settings, model_dir: Path) -> Settings:
    settings = settings.model_copy(deep=True)
    settings.semantic.enabled = True
    settings.semantic.model = "minilm"
    settings.semantic.model_dir = model_dir
    return settings


def orchestrator(settings: Settings) -> Orchestrator:
    backend = EmbeddedBackend(settings.embedded_path())
    return Orchestrator(backend, settings, traces=TraceStore(None), clock=lambda: NOW)


@pytest.fixture
def loaded(settings: Settings) -> Settings:
    async def load() -> None:
        o = orchestrator(settings)
        await o.ingest([NewMemory(content=c, type=MemoryType.EPISODIC) for c in MEMORIES])
        await o.close()

    anyio.run(load)
    return settings


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[Counting]:
    """Every embedder the orchestrators of a test load, wrapped in a counter."""
    made: list[Counting] = []

    def load(model: str, **where: Any) -> Embedder:
        made.append(Counting(load_embedder(model, **where)))
        return made[-1]

    monkeypatch.setattr(indexes, "load_embedder", load)
    return made


async def test_minilm_finds_a_memory_sharing_no_word_with_the_question(
    loaded: Settings, minilm_dir: Path
) -> None:
    o = orchestrator(minilm(loaded, minilm_dir))
    result = await o.search(SearchRequest(query="dog playing outside"))
    top = result.items[0]
    assert top.summary == MEMORIES[0]
    assert "semantic index rank 1" in top.reasons
    report = await o.health()
    check = next(c for c in report.checks if c.name == "semantic")
    assert check.status is Status.OK
    assert check.detail.startswith("all-MiniLM-L6-v2, 4 memories indexed")
    await o.close()


async def test_a_restart_reuses_the_kept_vectors_and_embeds_only_what_changed(
    loaded: Settings, minilm_dir: Path, counted: list[Counting]
) -> None:
    settings = minilm(loaded, minilm_dir)

    async def first() -> str:
        o = orchestrator(settings)
        await o.search(SearchRequest(query="dog playing outside"))
        report = await o.write(WriteRequest(memory=NewMemory(content="My kitten sleeps all day")))
        await o.search(SearchRequest(query="cat napping"))
        await o.close()
        assert report.id is not None
        return report.id

    kitten = await first()
    assert set(MEMORIES) <= set(counted[0].texts)
    assert (settings.data_dir / "semantic" / "all-MiniLM-L6-v2.db").is_file()

    o = orchestrator(settings)
    result = await o.search(SearchRequest(query="cat napping"))
    assert result.items[0].memory_id == kitten
    report = await o.health()
    check = next(c for c in report.checks if c.name == "semantic")
    assert "5 memories indexed" in check.detail
    assert "(5 loaded at start)" in check.detail
    await o.close()
    assert counted[1].texts == ["cat napping"]  # the question only: no memory embedded again


async def test_a_missing_model_degrades_health_names_the_fix_and_words_still_work(
    loaded: Settings, tmp_path: Path
) -> None:
    empty = tmp_path / "no-model-here"
    empty.mkdir()
    o = orchestrator(minilm(loaded, empty))
    pack = await o.context(ContextRequest(query="revenue in Europe"))
    assert pack.items[0].summary == MEMORIES[1]
    trace = o.trace(pack.trace_id)
    assert trace is not None
    (off,) = said(trace, EventKind.SEMANTIC_OFF)
    assert "orchestrator models install" in str(off["error"])  # the error says what to do
    report = await o.health()
    check = next(c for c in report.checks if c.name == "semantic")
    assert check.status is Status.DEGRADED
    assert "orchestrator models install" in check.detail
    assert "model_dir" in check.detail
    assert report.status is Status.DEGRADED
    await o.close()


async def test_a_query_waits_for_the_background_embedding_only_up_to_its_bound(
    loaded: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.unit.test_semantic_queue import Gated

    gated = Gated()
    monkeypatch.setattr(indexes, "load_embedder", lambda model, **where: gated)
    settings = loaded.model_copy(deep=True)
    settings.semantic.enabled = True
    monkeypatch.setattr(indexes, "INDEX_WAIT_S", 0.2)
    o = orchestrator(settings)
    held = await o.search(SearchRequest(query="revenue"))
    trace = o.trace(held.trace_id)
    assert trace is not None
    assert said(trace, EventKind.SEMANTIC_EMBEDDING) == [{"count": 4}]
    assert held.items[0].summary == MEMORIES[1]  # words do not wait
    monkeypatch.setattr(indexes, "INDEX_WAIT_S", 30.0)  # from now on, wait as long as it takes
    gated.gate.set()  # the worker now has 4 hash vectors to make
    # a write makes the next query pull, queue one more, and wait (for all five)
    await o.write(WriteRequest(memory=NewMemory(content="Sales in Europe rose again")))
    again = await o.search(SearchRequest(query="revenue"))
    trace = o.trace(again.trace_id)
    assert trace is not None
    assert EventKind.SEMANTIC_EMBEDDING not in kinds(trace)
    report = await o.health()
    check = next(c for c in report.checks if c.name == "semantic")
    assert check.status is Status.OK
    await o.close()


async def test_auto_runs_minilm_where_its_model_is_found(
    loaded: Settings, minilm_dir: Path
) -> None:
    """The default (`enabled = "auto"`, `model = "auto"`): the best model that can run."""
    settings = loaded.model_copy(deep=True)
    settings.semantic.enabled, settings.semantic.model = "auto", "auto"
    settings.semantic.model_dir = minilm_dir
    o = orchestrator(settings)
    result = await o.search(SearchRequest(query="dog playing outside"))
    assert result.items[0].summary == MEMORIES[0]
    report = await o.health()
    check = next(c for c in report.checks if c.name == "semantic")
    assert check.status is Status.OK
    assert check.detail.startswith("all-MiniLM-L6-v2")
    await o.close()


async def test_auto_without_the_model_is_off_and_health_says_search_is_lexical_only(
    loaded: Settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "wordllama", None)  # as if the `semantic` extra were not in
    settings = loaded.model_copy(deep=True)
    (tmp_path / "no-model").mkdir()
    settings.semantic.enabled, settings.semantic.model = "auto", "auto"
    settings.semantic.model_dir = tmp_path / "no-model"  # where `models install` has not run
    o = orchestrator(settings)
    pack = await o.context(ContextRequest(query="revenue in Europe"))
    assert pack.items[0].summary == MEMORIES[1]  # words still work
    trace = o.trace(pack.trace_id)
    assert trace is not None
    semantic = {EventKind.SEMANTIC_OFF, EventKind.SEMANTIC_EMBEDDING}
    assert not semantic & set(kinds(trace))  # no event on every request
    report = await o.health()
    check = next(c for c in report.checks if c.name == "semantic")
    assert check.status is Status.OK
    assert check.detail == (
        "off (auto): search is lexical only: the semantic model (all-MiniLM-L6-v2) is not"
        " installed; run `orchestrator models install`"
    )
    assert report.status is Status.OK
    await o.close()

"""Loading the derived indexes behind the server's start (`Orchestrator.warming`), and
serving reads meanwhile: a real embedded store and the real wordllama model."""

from __future__ import annotations

import io
import threading
from collections.abc import Sequence
from pathlib import Path

import anyio
import numpy as np
import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.derived import indexes, query_vectors
from memory_orchestrator.derived.embedders import WordLlamaEmbedder, computing
from memory_orchestrator.derived.semantic import SemanticIndex
from memory_orchestrator.models import (
    ContextRequest,
    EventKind,
    Memory,
    MemoryType,
    NewMemory,
    SearchRequest,
    Status,
    Value,
)
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.observability import Observer
from memory_orchestrator.state.traces import TraceStore
from tests.events import said
from tests.factories import NOW, TOPICS

pytestmark = pytest.mark.integration

MEMORIES = TOPICS


class SlowListing(EmbeddedBackend):
    """Fault injection: a store whose listing waits until the test lets it go (a large store
    being listed at start)."""

    def __init__(self, path: Path, gate: anyio.Event) -> None:
        super().__init__(path)
        self.gate = gate

    async def list_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[Memory], str | None]:
        await self.gate.wait()
        return await super().list_memories(cursor, limit)


def loading_of(o: Orchestrator, trace_id: str) -> list[dict[str, Value]]:
    """What the trace says was still loading (`STILL_LOADING` events)."""
    trace = o.trace(trace_id)
    assert trace is not None
    return said(trace, EventKind.STILL_LOADING)


async def test_reads_are_served_while_the_indexes_load_and_use_them_once_loaded(
    settings: Settings,
) -> None:
    settings.semantic.enabled = True
    settings.semantic.model = "wordllama"
    plain = EmbeddedBackend(settings.embedded_path())
    await plain.write_many([NewMemory(content=c, type=MemoryType.EPISODIC) for c in MEMORIES])
    await plain.close()
    gate = anyio.Event()
    o = Orchestrator(
        SlowListing(settings.embedded_path(), gate),
        settings,
        traces=TraceStore(None),
        clock=lambda: NOW,
    )
    async with o.warming():
        early = await o.context(ContextRequest(query="revenue in Europe"))
        assert early.items[0].summary == MEMORIES[1]  # the store's own search still works
        (loading,) = loading_of(o, early.trace_id)
        assert str(loading["what"]).startswith("local index")
        health = await o.health()
        assert health.status is Status.OK
        semantic = next(c for c in health.checks if c.name == "semantic").detail
        assert "loading" in semantic  # the model, or the listing and the local index
        gate.set()
        await o.warm_up(wait_s=60)  # waits for the one running behind the server
        later = await o.context(ContextRequest(query="dog playing outside"))
        assert later.items[0].summary == MEMORIES[0]  # found by meaning: the index is in
        assert loading_of(o, later.trace_id) == []
        check = next(c for c in (await o.health()).checks if c.name == "semantic")
        assert "4 memories indexed" in check.detail
        assert "loading" not in check.detail
    await o.close()


class HeldObserver(Observer):
    """Fault injection: the request log, except that making its logger (the warm-up's first
    step, structlog's imports) waits until the test lets it go (a slow import on a busy
    machine)."""

    def __init__(self) -> None:
        super().__init__(io.StringIO())
        self.release = threading.Event()

    def prepare(self) -> None:
        assert self.release.wait(60)
        super().prepare()


async def test_a_read_while_the_warm_up_makes_the_request_log_does_not_load_the_indexes(
    settings: Settings,
) -> None:
    """The indexes say they are warming from the warm-up's first moment: a read that comes
    while it is still making the request log's logger is served with what is ready, not by
    listing the store and waiting for the semantic index itself (a large store's first call
    in the server then took as long as `INDEX_WAIT_S` allows)."""
    settings.semantic.enabled = False
    plain = EmbeddedBackend(settings.embedded_path())
    await plain.write_many([NewMemory(content=c, type=MemoryType.EPISODIC) for c in MEMORIES])
    await plain.close()
    gate, observer = anyio.Event(), HeldObserver()
    o = Orchestrator(
        SlowListing(settings.embedded_path(), gate),  # the warm-up is still listing
        settings,
        traces=TraceStore(None),
        clock=lambda: NOW,
        observer=observer,
    )
    async with o.warming():
        early = await o.context(ContextRequest(query="revenue in Europe"))
        (loading,) = loading_of(o, early.trace_id)
        assert str(loading["what"]).startswith("local index"), said
        gate.set()
        observer.release.set()
        await o.warm_up()
    await o.close()


class HeldEmbedder:
    """Fault injection: wordllama, except that the background worker's batches wait until
    the test lets them go (a long backlog being embedded)."""

    def __init__(self) -> None:
        self.inner = WordLlamaEmbedder()
        self.name = self.inner.name
        self.release = threading.Event()
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.typing.NDArray[np.float32]:
        if threading.current_thread().name == "semantic-index":
            assert self.release.wait(60)
        self.texts.extend(texts)
        return self.inner.embed(texts)


def memory(n: int, content: str) -> Memory:
    return Memory(id=f"m{n}", content=content, type=MemoryType.EPISODIC)


def test_memories_queued_for_the_worker_are_not_embedded_on_the_request_path() -> None:
    embedder = HeldEmbedder()
    index = SemanticIndex(embedder)
    queued = [memory(n, text) for n, text in enumerate(MEMORIES)]
    assert index.queue(queued) == 4
    unseen = memory(9, "My kitten sleeps on the sofa all day")
    sims = index.similarities("cat napping", [*queued, unseen])
    assert set(sims) == {"m9"}  # the one never seen is embedded now; the queued ones wait
    assert MEMORIES[0] not in embedder.texts
    embedder.release.set()
    assert index.wait(60) == 0
    assert set(index.similarities("cat napping", [*queued, unseen])) == {
        "m0",
        "m1",
        "m2",
        "m3",
        "m9",
    }
    assert "a second: about" in index.progress() or index.progress() == ""


class HeldQueries:
    """Fault injection: wordllama, except that on the query worker it says it computes and
    then waits until the test lets it go (a slow encoder)."""

    def __init__(self) -> None:
        self.inner = WordLlamaEmbedder()
        self.name = self.inner.name
        self.release = threading.Event()
        self.holding = threading.Event()  # set when a query's encoder is held

    def embed(self, texts: Sequence[str]) -> np.typing.NDArray[np.float32]:
        if threading.current_thread().name.startswith("semantic-query"):
            computing()
            self.holding.set()
            assert self.release.wait(60)
        return self.inner.embed(texts)


def test_a_request_waits_for_the_query_worker_only_when_the_worker_is_free(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A second question, queued behind the first, does not hold its request up (were it
    waited for, its encoder could not start before the test's timeout)."""
    monkeypatch.setattr(query_vectors, "_START_WAIT_S", 120.0)
    embedder = HeldQueries()
    index = SemanticIndex(embedder)
    index.encode_ahead("dog playing outside")  # the worker is free: its encoder runs
    index.encode_ahead("cat napping")  # queued behind it: no wait
    embedder.release.set()
    for query in ("dog playing outside", "cat napping"):
        expected = WordLlamaEmbedder().embed([query])[0]
        assert np.array_equal(index.query_vector(query), expected)


def test_a_query_embedded_ahead_is_the_same_vector_and_embedded_once() -> None:
    embedder = HeldEmbedder()
    embedder.release.set()
    index = SemanticIndex(embedder)
    index.encode_ahead("dog playing outside")
    index.encode_ahead("dog playing outside")  # already on its way: not again
    ahead = index.query_vector("dog playing outside")
    assert np.array_equal(ahead, WordLlamaEmbedder().embed(["dog playing outside"])[0])
    assert embedder.texts.count("dog playing outside") == 1
    assert index.query_vector("dog playing outside") is ahead  # cached


async def test_a_new_question_being_embedded_leaves_the_event_loop_to_other_requests(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a new question's vector is worked out on the query worker (held here), the
    request that asked waits for it without holding the event loop: another request (the
    store's own results, which need no vector) is answered meanwhile. Were the loop held,
    the other request would be answered only after the encoder let go (10 s at most here)."""
    settings.semantic.enabled = True
    settings.semantic.model = "wordllama"
    embedder = HeldQueries()
    monkeypatch.setattr(indexes, "load_embedder", lambda *args, **kwargs: embedder)
    plain = EmbeddedBackend(settings.embedded_path())
    await plain.write_many([NewMemory(content=c, type=MemoryType.EPISODIC) for c in MEMORIES])
    await plain.close()
    o = Orchestrator(
        EmbeddedBackend(settings.embedded_path()),
        settings,
        traces=TraceStore(None),
        clock=lambda: NOW,
    )
    await o.warm_up(wait_s=60)
    answered: list[str] = []
    letting_go = threading.Timer(10, embedder.release.set)  # (were the loop held)
    letting_go.start()

    async def new_question() -> None:
        pack = await o.context(ContextRequest(query="dog playing outside"))
        assert pack.items[0].summary == MEMORIES[0]  # found by meaning, once let go
        answered.append("new question")

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(new_question)
            assert await anyio.to_thread.run_sync(embedder.holding.wait, 60)
            raw = await o.search(SearchRequest(query="revenue in Europe", passthrough=True))
            assert raw.items[0].summary == MEMORIES[1]
            answered.append("store's own results")
            embedder.release.set()
    finally:
        letting_go.cancel()
    assert answered == ["store's own results", "new question"]
    await o.close()

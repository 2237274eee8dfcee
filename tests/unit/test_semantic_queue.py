"""The semantic index embeds what the feed hands it in the background: a query waits for it
only up to a bound, and a batch that fails is logged, not fatal."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from memory_orchestrator.derived.semantic import SemanticIndex
from tests.factories import memory
from tests.unit.test_semantic_vectors import HashEmbedder

WAIT = 10.0  # seconds: a bound that is never reached when the code is right


class Gated(HashEmbedder):
    """In the background worker, embeds only once `gate` is open (a request's own embedding,
    of its question and unseen candidates, is never held); fails on texts with 'boom'."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def embed(self, texts: Sequence[str]) -> Any:
        if threading.current_thread().name == "semantic-index":
            assert self.gate.wait(WAIT)
        if any("boom" in t for t in texts):
            raise RuntimeError("the model failed")
        return super().embed(texts)


def test_queued_memories_are_indexed_in_the_background() -> None:
    embedder = Gated()
    index = SemanticIndex(embedder)
    items = [memory(f"m{i}", f"note {i}") for i in range(150)]
    assert index.queue(items) == 150
    assert index.wait(0.05) == 150  # nothing embedded while the model is held
    assert index.waiting() == 150
    embedder.gate.set()
    assert index.wait(WAIT) == 0
    assert len(index) == 150
    assert index.queue(items) == 0  # known and unchanged: nothing to do
    assert [i for i, _ in index.ranked("note 7", 1)] == ["m7"]


def test_a_batch_that_fails_is_logged_and_the_rest_go_on(caplog: pytest.LogCaptureFixture) -> None:
    embedder = Gated()
    embedder.gate.set()
    index = SemanticIndex(embedder)
    with caplog.at_level(logging.WARNING, "memory_orchestrator.derived.semantic"):
        index.queue([memory("bad", "boom")])
        assert index.wait(WAIT) == 0
        index.queue([memory("good", "fine")])
        assert index.wait(WAIT) == 0
    assert "1 memories not embedded: the model failed" in caplog.text
    assert index.nearest("fine", 5) == {"good": 1.0}


class Recording(Gated):
    """Gated, and keeps the texts of each background batch in the order they were taken."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []
        self._order = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Any:
        if threading.current_thread().name == "semantic-index":
            with self._order:
                self.batches.append(list(texts))
        return super().embed(texts)


def test_a_page_is_embedded_shortest_text_first_in_batches_of_a_length() -> None:
    embedder = Recording()
    index = SemanticIndex(embedder)
    items = [memory(f"m{i}", "word " * (1 + (i * 37) % 100)) for i in range(100)]
    assert index.queue(items) == 100
    embedder.gate.set()
    assert index.wait(WAIT) == 0
    by_length = sorted(len(m.content) for m in items)
    firsts = sorted(embedder.batches, key=lambda batch: min(len(t) for t in batch))[0]
    assert sorted(len(t) for t in firsts) == by_length[:64]


def test_health_tells_the_pace_and_the_time_left() -> None:
    from memory_orchestrator.derived.semantic import _Rate

    now = [100.0]
    rate = _Rate(clock=lambda: now[0])
    assert rate.describe(500) == ""  # nothing known yet
    rate.done(64)  # the first batch starts the clock
    now[0] = 102.0
    rate.done(64)
    rate.done(64)
    assert rate.describe(3200) == " (64 a second: about 50 s left)"
    now[0] = 110.0
    assert rate.describe(64 * 600) == " (13 a second: about 50 min left)"
    rate.reset()
    assert rate.describe(10) == ""

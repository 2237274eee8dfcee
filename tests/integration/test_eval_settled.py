"""The evaluation waits for the semantic index: its answers do not depend on how fast the
machine embeds. The real embedded store and the real ONNX model; the slowness and the failure
are fault injection (`SlowEmbeddingFault`, `FailingEmbeddingFault`), named as such.

An agent's request waits for the background embedding only up to `indexes.INDEX_WAIT_S`
(here 0: not at all); an evaluation must wait for all of it before it asks, else a busy machine
measures some questions without the semantic lists (the development split's figures moved in
the third decimal from one run to the next under load).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_orchestrator.derived import indexes
from memory_orchestrator.derived.embedders import Embedder, load_embedder
from memory_orchestrator.errors import EmbeddingFailed
from memory_orchestrator.eval import Dataset, RunOptions, build_report, load_dataset, run_eval
from memory_orchestrator.settings import Settings
from tests.integration.test_eval import without_latency

pytestmark = pytest.mark.integration

HELD_S = 120.0  # a fault's bound, never reached when the code is right: no test hangs


class SlowEmbeddingFault:
    """Fault injection: the real model, except that the semantic index's background workers
    embed nothing until `release` is set (as on a machine far too busy to keep up: the test
    sets it once the eval says it waits for them); a request's own embedding (its question,
    unseen candidates) is never held."""

    def __init__(self, inner: Embedder, release: threading.Event) -> None:
        self.inner, self.name, self.release = inner, inner.name, release
        self.fingerprint = getattr(inner, "fingerprint", inner.name)
        self.min_similarity = getattr(inner, "min_similarity", 0.0)
        self.background = 0  # batches the background workers embedded

    def embed(self, texts: Sequence[str]) -> Any:
        if threading.current_thread().name == "semantic-index":
            self.release.wait(HELD_S)
            self.background += 1
        return self.inner.embed(texts)


class FailingEmbeddingFault(SlowEmbeddingFault):
    """Fault injection: the background workers' model raises (as a model out of memory would)."""

    def embed(self, texts: Sequence[str]) -> Any:
        if threading.current_thread().name == "semantic-index":
            raise RuntimeError("the model ran out of memory")
        return self.inner.embed(texts)


class Progress:
    """The eval's progress; it lets the held embedding go once the eval says it waits for it."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release
        self.seen: dict[str, list[tuple[int, int]]] = {}

    def update(self, phase: str, completed: int, total: int) -> None:
        self.seen.setdefault(phase, []).append((completed, total))
        if phase == "embedding":
            self.release.set()


@pytest.fixture
def semantic(settings: Settings, minilm_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The defaults' semantic stage (minilm), and a request that never waits for the index."""
    monkeypatch.setattr(indexes, "INDEX_WAIT_S", 0.0)
    settings = settings.model_copy(deep=True)
    settings.semantic.enabled = True
    settings.semantic.model = "minilm"
    settings.semantic.model_dir = minilm_dir
    return settings


@pytest.fixture
def faulty(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[type[SlowEmbeddingFault]], Any]]:
    """Every model the eval's orchestrators load, wrapped in the given fault."""
    release = threading.Event()
    made: list[SlowEmbeddingFault] = []

    def wrap(fault: type[SlowEmbeddingFault]) -> tuple[threading.Event, list[SlowEmbeddingFault]]:
        def loading(*args: Any, **kwargs: Any) -> Embedder:
            made.append(fault(load_embedder(*args, **kwargs), release))
            return made[-1]

        monkeypatch.setattr(indexes, "load_embedder", loading)
        return release, made

    yield wrap
    release.set()  # a worker still held (a failing test) goes on


async def evaluate(data: Dataset, settings: Settings, progress: Any = None) -> dict[str, Any]:
    options = RunOptions(backend="embedded", systems=("orchestrated",), measure_context=False)
    return build_report(await run_eval(data, settings, options, progress))


async def test_the_eval_waits_for_a_slow_embedding_and_answers_as_an_unhindered_run(
    semantic: Settings, faulty: Callable[[type[SlowEmbeddingFault]], Any]
) -> None:
    data = load_dataset("golden")
    unhindered = await evaluate(data, semantic)
    release, made = faulty(SlowEmbeddingFault)
    progress = Progress(release)
    slowed = await evaluate(data, semantic, progress)

    assert without_latency(slowed) == without_latency(unhindered)
    assert sum(m.background for m in made) > 0  # the memories were embedded in the background
    waits = progress.seen["embedding"]
    assert waits[0][0] == 0  # the first report: nothing embedded yet
    assert all(done <= total for done, total in waits)
    assert waits[-1][0] == waits[-1][1] > 0  # and the last: all of it


async def test_the_eval_stops_with_a_clear_error_when_the_model_fails(
    semantic: Settings, faulty: Callable[[type[SlowEmbeddingFault]], Any]
) -> None:
    faulty(FailingEmbeddingFault)
    with pytest.raises(
        EmbeddingFailed, match=r"could not be embedded \(the model ran out of memory\)"
    ):
        await evaluate(load_dataset("golden"), semantic)

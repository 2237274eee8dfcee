"""The semantic index's first pass at scale (derived/coarse.py): below its threshold the
ranking is exact; above it the reduced coordinates pick a pool that holds the exact nearest
rows, a replaced vector is projected again, and the directions follow the index's growth."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from memory_orchestrator.derived.coarse import Coarse
from memory_orchestrator.derived.semantic import SemanticIndex
from tests.factories import memory

DIM = 32


def clustered(rows: int, seed: int = 1) -> np.ndarray:
    """Unit vectors that, like sentence vectors, vary mostly along a few directions (6 of
    32), with a little noise along the others."""
    rng = np.random.default_rng(seed)
    mixing = np.random.default_rng(0).normal(size=(6, DIM))  # the same directions every call
    out = 0.3 + rng.normal(size=(rows, 6)) @ mixing + 0.3 * rng.normal(size=(rows, DIM))
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out.astype(np.float32)


def exact_top(matrix: np.ndarray, vector: np.ndarray, k: int) -> set[int]:
    return set(np.argsort(-(matrix @ vector))[:k].tolist())


def test_below_its_threshold_there_is_no_first_pass() -> None:
    coarse = Coarse(dims=8, pool=64, from_rows=1000)
    matrix = clustered(999)
    assert coarse.sync(matrix, 999, set()) is None
    assert not coarse.active(999)
    assert coarse.active(1000)


def test_the_pool_holds_the_exact_nearest_rows() -> None:
    matrix = clustered(4000)
    coarse = Coarse(dims=8, pool=400, from_rows=1000)
    first = coarse.sync(matrix, len(matrix), set())
    assert first is not None
    queries = clustered(100, seed=2)
    recalls = [len(exact_top(matrix, q, 10) & set(first.pool_of(q).tolist())) / 10 for q in queries]
    assert np.mean(recalls) >= 0.97
    # the pool is no bigger than asked, and a stored row is found for itself
    assert len(first.pool_of(queries[0])) == 400
    assert 1234 in first.pool_of(matrix[1234]).tolist()


def test_a_replaced_vector_is_projected_again() -> None:
    matrix = clustered(2000)
    coarse = Coarse(dims=8, pool=50, from_rows=1000)
    coarse.sync(matrix, len(matrix), set())
    far = -matrix[7]  # row 7 now points the other way
    matrix[7] = far
    stale = coarse.sync(matrix, len(matrix), set())
    assert stale is not None
    fresh = coarse.sync(matrix, len(matrix), {7})
    assert fresh is not None
    assert 7 in fresh.pool_of(far).tolist()


def test_new_rows_are_projected_and_the_directions_follow_the_growth() -> None:
    matrix = clustered(5000)
    coarse = Coarse(dims=8, pool=100, from_rows=1000)
    first = coarse.sync(matrix, 1200, set())
    assert first is not None
    assert len(first.low) == 1200
    basis = first.basis
    grown = coarse.sync(matrix, 1500, set())  # appended under the same directions
    assert grown is not None
    assert len(grown.low) == 1500
    assert grown.basis is basis
    assert 1400 in grown.pool_of(matrix[1400]).tolist()
    doubled = coarse.sync(matrix, 2400, set())  # worked out again from the grown index
    assert doubled is not None
    assert doubled.basis is not basis
    assert len(doubled.low) == 2400


class ClusteredEmbedder:
    """Test double for the model: a text's vector is a clustered unit vector picked by a hash
    of the text (the same text, the same vector)."""

    name = "clustered-32"
    _table = clustered(50_000, seed=9)

    def embed(self, texts: Sequence[str]) -> Any:
        rows = [
            int.from_bytes(hashlib.sha256(t.encode()).digest()[:4], "big") % len(self._table)
            for t in texts
        ]
        return self._table[rows]


def numbered(count: int) -> tuple[list[str], list[Any], SemanticIndex]:
    """`count` texts, their memories, and an exact index of them all."""
    texts = [f"memory number {i}" for i in range(count)]
    memories = [memory(f"m{i}", t) for i, t in enumerate(texts)]
    exact = SemanticIndex(ClusteredEmbedder())
    exact.add(memories)
    return texts, memories, exact


def test_the_index_ranks_through_the_first_pass_at_scale() -> None:
    texts, memories, exact = numbered(600)
    scaled = SemanticIndex(ClusteredEmbedder())
    scaled._coarse = Coarse(dims=8, pool=120, from_rows=300)
    scaled.add(memories)
    agree = 0
    for text in texts[:50]:
        want, got = exact.ranked(text, 10), scaled.ranked(text, 10)
        assert got[0] == want[0]  # the memory itself, cosine 1
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
        agree += len({i for i, _ in want} & {i for i, _ in got})
    assert agree / 500 >= 0.95
    # below the threshold nothing changes: the same ranking as the exact index
    small = SemanticIndex(ClusteredEmbedder())
    small._coarse = Coarse(dims=8, pool=120, from_rows=10_000)
    small.add(memories)
    assert all(small.ranked(t, 10) == exact.ranked(t, 10) for t in texts[:20])


def test_prepare_works_the_first_pass_out_before_the_first_query() -> None:
    index = SemanticIndex(ClusteredEmbedder())
    index._coarse = Coarse(dims=8, pool=50, from_rows=200)
    index.add([memory(f"m{i}", f"memory number {i}") for i in range(300)])
    assert index._coarse._basis is None  # nothing asked yet
    index.prepare()
    basis = index._coarse._basis
    assert basis is not None
    index.ranked("memory number 3", 5)
    assert index._coarse._basis is basis  # the query found it ready


class SteppedEmbedder(ClusteredEmbedder):
    """The same vectors; the background workers embed a batch only when the test allows one
    (`step`), so rankings and appends interleave however fast the machine."""

    def __init__(self) -> None:
        super().__init__()
        self._allowed = threading.Semaphore(0)

    def step(self) -> None:
        self._allowed.release()

    def embed(self, texts: Sequence[str]) -> Any:
        if threading.current_thread().name == "semantic-index":
            assert self._allowed.acquire(timeout=30)
        return super().embed(texts)


def test_ranking_at_scale_while_the_background_workers_embed() -> None:
    """Rows appended by the workers while queries rank through the first pass: no error, and
    once everything is in, the first pass has caught up and ranks as the exact index does."""
    texts, memories, exact = numbered(900)
    embedder = SteppedEmbedder()
    index = SemanticIndex(embedder)
    index._coarse = Coarse(dims=8, pool=100, from_rows=200)
    index.add(memories[:250])
    index.queue(memories[250:])
    asked = 0
    while index.waiting():
        found = index.ranked(texts[asked % 250], 5)
        assert found[0][1] == 1.0  # the text itself (or one with its very vector)
        asked += 1
        embedder.step()  # one more batch may be appended before the next ranking
    assert asked > 0  # some rankings ran while rows were being added
    assert index.wait(30) == 0
    assert len(index) == 900
    index.ranked(texts[0], 5)
    assert index._coarse._done == 900  # every row projected
    for text in texts[::37]:
        assert index.ranked(text, 1) == exact.ranked(text, 1)

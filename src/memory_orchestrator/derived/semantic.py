"""Optional stage: semantic relevance from a small local embedding model.

Off by default (`[semantic] enabled = true` turns it on); needs the `semantic` extra. The
models (`[semantic] model`) are in `derived.embedders`: `wordllama` static embeddings that
ship inside their package, or all-MiniLM-L6-v2 on ONNX Runtime from a folder `make models`
builds. Nothing is downloaded at run time and no torch is needed.

It gives the pipeline two things a word match cannot:
- a candidate list of its own: the memories nearest to the question in meaning, fused with
  the store's lists by RRF, so that a turn sharing no word with the question can still come
  back ("What is her relationship status?" -> "It'll be tough as a single parent");
- a similarity per candidate, blended into relevance by `ranking.semantic_share`.

The index is a cache the orchestrator owns, never the source of truth: it is filled from the
store's own listing where the store has one (`derived.feed`), and from every candidate it
ranks; semantic hits are read back from the store before use, so a memory deleted or changed
there never comes back stale. Its vectors can be kept on disk (`derived.vectors`), keyed by
memory id and a digest of the text, so that a restart embeds only what is new or changed.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import threading
import time
from array import array
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from functools import lru_cache
from itertools import islice
from typing import TYPE_CHECKING, Any

from memory_orchestrator.derived.coarse import Coarse, Pass
from memory_orchestrator.derived.embedders import (
    Embedder,
    MiniLMEmbedder,
    WordLlamaEmbedder,
    embedding_text,
    load_embedder,
    model_errors,
)
from memory_orchestrator.derived.query_vectors import QUERY_CACHE, QueryVectors
from memory_orchestrator.derived.vectors import VectorFile
from memory_orchestrator.errors import SemanticUnavailable, unexpected
from memory_orchestrator.models import Memory
from memory_orchestrator.text import duration

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]
else:
    Matrix = Any

__all__ = [
    "Embedder",
    "MiniLMEmbedder",
    "SemanticIndex",
    "SemanticUnavailable",
    "WordLlamaEmbedder",
    "embedding_text",
    "load_embedder",
]

log = logging.getLogger(__name__)

_AHEAD = 8  # rankings worked out ahead and not read yet, kept at most
Ranked = list[tuple[str, float]]  # memory ids and cosines, best first
_BATCH = 64  # memories a background worker embeds and keeps per step
_ROOM = 1024  # rows a matrix has room for beyond those it holds, at least
_WORKERS = max(1, min(4, os.cpu_count() or 1))


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=8).digest()


def _number(digest: bytes) -> int:
    return int.from_bytes(digest, "little")


class SemanticIndex:
    """Memory vectors in one matrix (brute-force cosine, through a first pass at scale:
    `derived.coarse`), keyed by memory id, re-embedded when a memory's text changes (known
    by a digest of the text: no memory is kept, only its id, digest and vector).

    `add` embeds now; `queue` hands memories to a background worker (the feed's pages: a
    contextual model is slow per memory), and `wait` waits for it within a bound.

    With `vectors`, what it embeds is kept on disk and what was kept is loaded now: a memory
    whose text is unchanged is not embedded again."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        max_memories: int = 200_000,
        vectors: VectorFile | None = None,
    ) -> None:
        self.embedder = embedder
        self.max_memories = max_memories
        self.vectors = vectors
        self.restored = 0  # vectors loaded from `vectors` at start
        self._ids: list[str] = []  # by row
        self._rows: dict[str, int] = {}
        self._digests = array("Q")  # by row: the digest of the text its vector was made from
        self._matrix: Matrix | None = None
        self._size = 0
        self._queries = QueryVectors(embedder)
        self._generation = 0  # counts the changes to the matrix: a result ahead must be current
        self._coarse = Coarse()  # the first pass at scale (from 20,000 memories)
        self._coarse_lock = threading.Lock()
        self._replaced: set[int] = set()  # rows whose vector changed since the first pass saw
        self._ranked_ahead: OrderedDict[tuple[str, int], Future[tuple[int, Ranked]]] = OrderedDict()
        # the last rankings, each with the generation it was worked out at (current or unused)
        self._rankings: OrderedDict[tuple[str, int], tuple[int, Ranked]] = OrderedDict()
        # the feed adds from a worker thread while requests read and add on the event loop
        self._lock = threading.Lock()
        # memories queued for the background worker, and how many it is embedding now
        self._work = threading.Condition()
        self._pending: dict[str, Memory] = {}
        self._busy: set[str] = set()  # the batches the workers are embedding now
        self._workers = 0
        self._rate = _Rate()  # how fast the worker embeds (health reports it)
        self.failed = 0  # memories the background workers could not embed, and the last error
        self.failure: str | None = None
        if vectors is not None:
            self._restore(vectors)

    def __len__(self) -> int:
        return self._size

    # ------------------------------------------------------------------ filling

    def _restore(self, vectors: VectorFile) -> None:
        kept = vectors.load(limit=self.max_memories, spare=_spare)
        if kept is None:
            return
        self._matrix = kept.matrix  # (read into its place, with room to grow)
        self._ids = kept.ids
        self._rows = {mem_id: row for row, mem_id in enumerate(kept.ids)}
        self._digests = array("Q", map(_number, kept.digests))
        self._size = self.restored = len(kept.ids)

    def add(self, memories: Sequence[Memory]) -> int:
        """Index these memories now (new ones appended, changed ones re-embedded); returns
        how many were embedded. Beyond `max_memories`, new memories are not indexed."""
        fresh = self._stale(memories)
        if not fresh:
            return 0
        vectors = self.embedder.embed([m.content for m in fresh])  # the slow part: unlocked
        with self._lock:
            for memory, vector in zip(fresh, vectors, strict=True):
                self._put(memory, vector)
        if self.vectors is not None:
            self.vectors.save(
                [(m.id, _digest(m.content), v) for m, v in zip(fresh, vectors, strict=True)]
            )
        return len(fresh)

    def queue(self, memories: Sequence[Memory]) -> int:
        """Index these memories in the background, in batches (worker threads, one per core
        up to 4, started when there is work); returns how many are new or changed. `wait`
        waits for them. Each page is queued shortest text first, so that a batch's texts
        are of a length and little padding is computed (a text's vector does not depend on
        the batch it is in)."""
        fresh = self._stale(memories)
        if not fresh:
            return 0
        with self._work:
            for memory in sorted(fresh, key=lambda m: len(m.content)):
                self._pending[memory.id] = memory
            wanted = min(_WORKERS, -(-len(self._pending) // _BATCH))
            while self._workers < wanted:
                self._workers += 1
                threading.Thread(target=self._drain, name="semantic-index", daemon=True).start()
        return len(fresh)

    def waiting(self) -> int:
        """Memories queued and not yet indexed."""
        with self._work:
            return len(self._pending) + len(self._busy)

    def progress(self) -> str:
        """How fast the background worker embeds, and how long the rest will take at that
        pace (empty before its first batch)."""
        return self._rate.describe(self.waiting())

    def wait(self, timeout_s: float) -> int:
        """Wait up to `timeout_s` for the queued memories; returns how many still wait."""
        deadline = time.monotonic() + timeout_s
        with self._work:
            while self._pending or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._work.wait(left)
            return len(self._pending) + len(self._busy)

    def close(self, timeout_s: float = 30.0) -> int:
        """Stop the background workers: what is still queued is dropped (the store still
        lists it: the next start embeds it) and the batches in hand are finished, within
        `timeout_s`, so that no worker is inside the model when the process exits (ONNX
        Runtime aborts the process then). Returns how many memories were dropped."""
        deadline = time.monotonic() + timeout_s
        with self._work:
            dropped = len(self._pending)
            self._pending.clear()
            while self._workers and (left := deadline - time.monotonic()) > 0:
                self._work.wait(left)
        return dropped

    def _drain(self) -> None:
        while True:
            with self._work:
                if not self._pending:
                    self._workers -= 1
                    if not self._workers:
                        self._rate.reset()
                    self._work.notify_all()
                    return
                batch = [self._pending.pop(i) for i in list(islice(self._pending, _BATCH))]
                self._busy.update(m.id for m in batch)
            try:
                self._rate.done(self.add(batch))
            except Exception as exc:  # a process edge (a worker thread); a cache: what fails
                # is embedded when it is seen again, and a bug is reported, not only noted
                if isinstance(exc, model_errors()):
                    log.warning("semantic index: %d memories not embedded: %s", len(batch), exc)
                else:
                    unexpected("semantic index worker", exc)
                with self._work:
                    self.failed += len(batch)
                    self.failure = str(exc) or type(exc).__name__
            finally:
                with self._work:
                    self._busy.difference_update(m.id for m in batch)
                    self._work.notify_all()

    def _queued(self, memories: Sequence[Memory]) -> set[str]:
        with self._work:
            return {m.id for m in memories if m.id in self._pending or m.id in self._busy}

    def _stale(self, memories: Sequence[Memory]) -> list[Memory]:
        """The memories not indexed yet or whose text changed (within `max_memories`)."""
        fresh: list[Memory] = []
        with self._lock:
            seen: set[str] = set()
            for memory in memories:
                if memory.id in seen:
                    continue
                seen.add(memory.id)
                row = self._rows.get(memory.id)
                if row is not None and self._digests[row] == _number(_digest(memory.content)):
                    continue
                if row is None and self._size + len(fresh) >= self.max_memories:
                    continue
                fresh.append(memory)
        return fresh

    def _put(self, memory: Memory, vector: Matrix) -> None:
        row = self._rows.get(memory.id)
        if row is not None:
            if self._coarse.active(self._size):  # below, a first pass projects every row
                self._replaced.add(row)
        else:
            if self._size >= self.max_memories:
                return
            row = self._size
            self._grow(row + 1, vector.shape[0])
            self._rows[memory.id] = row
            self._ids.append(memory.id)
            self._digests.append(0)
            self._size += 1
        assert self._matrix is not None
        self._matrix[row] = vector
        self._digests[row] = _number(_digest(memory.content))
        self._generation += 1

    def _grow(self, rows: int, dim: int) -> None:
        """Room for `rows` rows: a new matrix `_spare(rows)` rows long, the rows so far copied
        in (the zeros beyond them take no memory until written: the allocator maps them
        lazily)."""
        import numpy as np

        if self._matrix is None:
            self._matrix = np.zeros((_spare(rows), dim), dtype=np.float32)
        elif rows > self._matrix.shape[0]:
            bigger = np.zeros((_spare(rows), dim), dtype=np.float32)
            bigger[: self._size] = self._matrix[: self._size]
            self._matrix = bigger

    # ------------------------------------------------------------------ reading

    def query_vector(self, query: str) -> Matrix:
        """The query's vector: cached (the last 256 queries), being embedded ahead (waited
        for), or embedded now."""
        return self._queries.get(query)

    def encode_ahead(self, query: str) -> None:
        """Start embedding `query` on a worker thread, so that the encoder runs while the
        request plans and waits for the store, and `query_vector` finds it ready, or nearly."""
        self._queries.ahead(query)

    def rank_ahead(self, query: str, k: int) -> None:
        """Start `ranked(query, k)` on the query worker thread, after the query's vector: the
        product with every memory's vector (memory-bound) runs while the request waits for the
        store; `ranked` then takes its result when no vector changed meanwhile, and works it out
        anew when one did. Nothing to start when the ranking is kept from an earlier request."""
        with self._lock:
            if (query, k) in self._ranked_ahead or self._kept(query, k) is not None:
                return
            self._ranked_ahead[(query, k)] = self._queries.submit(self._ranked, query, k)
            while len(self._ranked_ahead) > _AHEAD:  # asked for and never read (a failure)
                self._ranked_ahead.popitem(last=False)

    def pending(self, query: str, k: int) -> Future[Any] | None:
        """What `ranked(query, k)` would wait for while another thread works it out (the
        ranking started ahead, or the query's vector being embedded ahead); None when it
        would not wait. An async caller awaits it first, so that its event loop serves other
        requests meanwhile (a new question's encoder runs for milliseconds)."""
        with self._lock:
            ahead = self._ranked_ahead.get((query, k))
            if ahead is not None and not ahead.done() and self._kept(query, k) is None:
                return ahead
        return self._queries.pending(query)

    def ranked(self, query: str, k: int) -> Ranked:
        """Ids and cosines of the `k` indexed memories nearest to `query`, best first (not to
        be changed: it is kept for the next request that asks the same while no vector
        changes, e.g. an agent's memory_search and then memory_context on one question)."""
        with self._lock:
            kept = self._kept(query, k)
            ahead = self._ranked_ahead.pop((query, k), None)
        if kept is not None:
            return kept
        if ahead is not None:
            generation, found = ahead.result()
            with self._lock:
                if generation == self._generation:
                    self._keep(query, k, generation, found)
                    return found
        generation, found = self._ranked(query, k)
        with self._lock:
            self._keep(query, k, generation, found)
        return found

    def _kept(self, query: str, k: int) -> Ranked | None:
        """The ranking kept for `query` and `k` while it is current (call under the lock)."""
        kept = self._rankings.get((query, k))
        if kept is None or kept[0] != self._generation:
            return None
        self._rankings.move_to_end((query, k))
        return kept[1]

    def _keep(self, query: str, k: int, generation: int, found: Ranked) -> None:
        """Keep a ranking worked out at `generation` (call under the lock); one from before
        a change is not kept."""
        if generation != self._generation:
            return
        self._rankings[(query, k)] = (generation, found)
        self._rankings.move_to_end((query, k))
        while len(self._rankings) > QUERY_CACHE:
            self._rankings.popitem(last=False)

    def _ranked(self, query: str, k: int) -> tuple[int, Ranked]:
        import numpy as np

        with self._lock:
            matrix, size, generation = self._matrix, self._size, self._generation
        if matrix is None or size == 0 or k < 1:
            return generation, []
        first = self._first_pass(matrix, size)
        vector = self.query_vector(query)
        if first is not None and k <= first.pool:  # at scale: the exact cosine of a pool
            rows = first.pool_of(vector)
            sims = _cosines(matrix[rows], vector)
        else:
            rows, sims = None, _cosines(matrix[:size], vector)
        k = min(k, len(sims))
        top = np.argpartition(-sims, k - 1)[:k]
        found = zip((top if rows is None else rows[top]).tolist(), sims[top].tolist(), strict=True)
        best = [(self._ids[r], s) for r, s in found]
        # best first; equal similarities by id, so the order never depends on insert order
        best.sort(key=lambda f: (-f[1], f[0]))
        return generation, [(i, _clip(s)) for i, s in best]

    def prepare(self) -> None:
        """Work out the first pass now (at scale: a few hundred milliseconds at 100,000
        memories), so that the first query does not (the servers' warm-up calls it)."""
        with self._lock:
            matrix, size = self._matrix, self._size
        if matrix is not None and size > 0:
            self._first_pass(matrix, size)

    def _first_pass(self, matrix: Matrix, size: int) -> Pass | None:
        """The first pass over `matrix[:size]` (rows below `size` are written whole: they
        were, under the lock, before `size` counted them), brought up to date outside the
        index's lock: embedding and reads go on while it is worked out. A row replaced
        meanwhile is projected again at the next call."""
        if not self._coarse.active(size):
            return None
        with self._lock:
            replaced, self._replaced = self._replaced, set()
        with self._coarse_lock:
            return self._coarse.sync(matrix, size, replaced)

    def nearest(self, query: str, k: int) -> dict[str, float]:
        """Memory id -> cosine for the `k` indexed memories nearest to `query`."""
        return dict(self.ranked(query, k))

    def similarities(self, query: str, memories: Sequence[Memory]) -> dict[str, float]:
        """Cosine of `query` with each memory (in [0, 1]). Memories not yet indexed are
        embedded and indexed now, except those queued for the background worker (a first
        start over a large store queues them all): they have none until it reaches them."""
        if not memories:
            return {}
        queued = self._queued(memories)
        self.add([m for m in memories if m.id not in queued] if queued else memories)
        vector = self.query_vector(query)
        with self._lock:
            matrix, rows = self._matrix, [self._rows.get(m.id) for m in memories]
        found = [(m.id, row) for m, row in zip(memories, rows, strict=True) if row is not None]
        if matrix is None or not found:
            return {}
        cosines = _row_dots(matrix[[row for _, row in found]], vector)
        return {memory_id: _clip(c) for (memory_id, _), c in zip(found, cosines, strict=True)}


def _spare(rows: int) -> int:
    """The rows a matrix for `rows` vectors is made with: a quarter more (at least `_ROOM`),
    so that a store that grows is copied now and then, not at each write."""
    return rows + max(_ROOM, rows // 4)


class _Rate:
    """Memories the background workers embedded per second (wall clock) since they started
    on the current backlog."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._count = 0
        self._since: float | None = None
        self._lock = threading.Lock()

    def done(self, count: int) -> None:
        with self._lock:
            now = self._clock()
            if self._since is None:  # the first batch: its time is not known, only later ones'
                self._since = now
                return
            self._count += count

    def reset(self) -> None:
        with self._lock:
            self._count, self._since = 0, None

    def describe(self, left: int) -> str:
        with self._lock:
            count, since = self._count, self._since
        seconds = self._clock() - since if since is not None else 0.0
        if not count or seconds <= 0:
            return ""
        per_s = count / seconds
        return f" ({per_s:.0f} a second: about {duration(left / per_s)} left)"


def _cosines(matrix: Matrix, vector: Matrix) -> Matrix:
    """Each row's dot product with `vector` (cosines: both are L2-normalised): numpy's BLAS
    product on the calling thread. The BLAS's own threads wait on each other when the
    machine's cores are busy, which made the product's time erratic; on one thread it is
    steady (and the same numbers to the last bit). So the BLAS is held to one thread, once
    for the process: limiting it around each product (threadpoolctl's context) cost as much
    as the product itself."""
    _one_blas_thread()
    sims: Matrix = matrix @ vector
    return sims


@lru_cache(maxsize=1)
def _one_blas_thread() -> None:
    """Hold numpy's BLAS to one thread, for the rest of the process (nothing else in the
    service runs a BLAS product worth a second thread). Without threadpoolctl (the semantic
    extra brings it), the BLAS's own threads."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover
        return
    threadpool_limits(limits=1, user_api="blas")


def _row_dots(rows: Matrix, vector: Matrix) -> list[float]:
    """Each row's dot product with `vector`, as `float(row @ vector)` gives it to the last
    bit, in one call: numpy's vecdot runs the same BLAS dot per row, where `rows @ vector`
    (a matrix-vector product) sums in another order and differs in the last bits, in a way
    that depends on the row's place in the matrix. A cosine must not depend on which other
    memories are scored with it (`similarities` is called over the lists, then over the
    memories added later)."""
    import numpy as np

    dots: list[float] = np.vecdot(rows, vector).tolist()
    return dots


def _clip(value: float) -> float:
    if math.isnan(value):
        return 0.0
    return min(1.0, max(0.0, round(value, 6)))

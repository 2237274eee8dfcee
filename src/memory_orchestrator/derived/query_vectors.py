"""The vectors of the questions a semantic index is asked: each embedded once, on the
caller's thread or ahead of need on one worker thread, and kept (`SemanticIndex` reads them).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, TypeVar

from memory_orchestrator.derived.embedders import Embedder, on_computing

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]
else:
    Matrix = Any

QUERY_CACHE = 256  # question vectors kept (and a semantic index's rankings)
# the longest a request waits for the query worker to hand its encoder the question
_START_WAIT_S = 0.002
_POOL_LOCK = threading.Lock()
T = TypeVar("T")


class QueryVectors:
    """The vectors of recent queries, each embedded once: on the caller's thread, or ahead of
    need on one worker thread (ONNX Runtime lets go of the GIL while it computes)."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._cache: OrderedDict[str, Matrix] = OrderedDict()
        self._ahead: dict[str, Future[Matrix]] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._queued = 0  # jobs submitted to the worker and not finished

    def get(self, query: str) -> Matrix:
        with self._lock:
            cached = self._cache.get(query)
            if cached is not None:
                self._cache.move_to_end(query)
                return cached
            future = self._ahead.get(query)
        if future is not None:
            return future.result()
        return self._embed(query)

    def pending(self, query: str) -> Future[Matrix] | None:
        """`query`'s vector being embedded ahead, when it is not done yet."""
        with self._lock:
            future = self._ahead.get(query)
        return future if future is not None and not future.done() else None

    def ahead(self, query: str) -> None:
        """Start embedding `query` on the worker. When the worker is free, wait (a bounded
        moment) until its encoder computes: the worker needs Python's lock until then, and
        the caller, planning its request, would hold it, starting the encoder late."""
        with self._lock:
            if query in self._cache or query in self._ahead:
                return
            started = threading.Event() if self._queued == 0 else None
            hook = started.set if started is not None else None
            self._ahead[query] = self._submit(self._embed, query, hook)
        if started is not None:
            started.wait(_START_WAIT_S)

    def submit(self, work: Callable[..., T], *args: Any) -> Future[T]:
        """`work(*args)` on the query worker thread, after what was submitted before."""
        with self._lock:
            return self._submit(work, *args)

    def _submit(self, work: Callable[..., T], *args: Any) -> Future[T]:
        # (the caller holds `_lock`)
        if self._pool is None:
            with _POOL_LOCK:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(1, thread_name_prefix="semantic-query")
        future = self._pool.submit(self._counted, work, *args)
        self._queued += 1  # (before the job can end: it takes `_lock` to count itself out)
        return future

    def _counted(self, work: Callable[..., T], *args: Any) -> T:
        try:
            return work(*args)
        finally:
            with self._lock:
                self._queued -= 1

    def _embed(self, query: str, started: Callable[[], None] | None = None) -> Matrix:
        """`query`'s vector, kept; `started` is called once its encoder computes (or, for a
        model that does not say so, once it is done or has failed)."""
        try:
            with on_computing(started) if started is not None else nullcontext():
                vector: Matrix = self._embedder.embed([query])[0]
        finally:
            if started is not None:
                started()
            with self._lock:
                self._ahead.pop(query, None)
        with self._lock:
            self._cache[query] = vector
            if len(self._cache) > QUERY_CACHE:
                self._cache.popitem(last=False)
        return vector

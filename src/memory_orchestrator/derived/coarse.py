"""A first pass for the semantic index at scale: fewer bytes read per query.

The exact ranking multiplies the query with every memory's vector: at 100,000 memories that
is 150 MB of float32 read per query (the time goes to the memory's bandwidth, not to
arithmetic). `Coarse` keeps each vector's coordinates along the `dims`
directions in which the index's vectors vary most (the principal components of their
covariance, worked out from the vectors themselves: no training data, nothing downloaded),
so a query reads a sixth of the bytes; the `pool` rows nearest by those coordinates are then
ranked by their exact cosine. Below `from_rows` rows the index ranks every row exactly (the
first pass would save under a millisecond there, and every figure of the evaluation, whose
stores are small, stays that of the exact ranking).

The directions are worked out again when the index has doubled since they were, so they
follow what the store holds; a row whose vector changed is projected again. What it costs in
recall against the exact ranking is measured by `bench/bench_semantic_scale.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]
    Rows = npt.NDArray[np.intp]
else:
    Matrix = Rows = Any

__all__ = ["Coarse", "Pass"]

_SAMPLE = 20_000  # rows the directions are worked out from (a strided sample beyond that)
_BLOCK = 8192  # rows projected at a time


@dataclass(frozen=True)
class Pass:
    """The first pass as `Coarse.sync` left it: arrays no later sync changes, but for a
    replaced row projected again in place (a reader then sees the old or the new one)."""

    mean: Matrix
    basis: Matrix  # dim x dims
    low: Matrix  # rows x dims
    pool: int

    def pool_of(self, vector: Matrix) -> Rows:
        """The rows (indexes into the matrix) worth an exact look for a query `vector`:
        the `pool` nearest by the reduced coordinates."""
        import numpy as np

        query = ((vector - self.mean) @ self.basis).astype(np.float32)
        scores = self.low @ query
        if len(scores) <= self.pool:
            return np.arange(len(scores))
        rows: Rows = np.argpartition(-scores, self.pool - 1)[: self.pool]
        return rows


class Coarse:
    """The reduced copy of a growing matrix of unit vectors (see the module's text). Not
    thread-safe: its owner calls `sync` under its own lock; what that returns is read
    without one."""

    def __init__(self, *, dims: int = 64, pool: int = 4096, from_rows: int = 20_000) -> None:
        self.dims, self.pool, self.from_rows = dims, pool, from_rows
        self._mean: Matrix | None = None
        self._basis: Matrix | None = None  # dim x dims
        self._basis_rows = 0  # how many rows the index held when the basis was worked out
        self._low: Matrix | None = None  # rows x dims, grown by doubling
        self._done = 0  # rows projected

    def active(self, size: int) -> bool:
        """Whether a matrix of `size` rows is ranked through the first pass."""
        return size >= max(self.from_rows, 2 * self.pool)

    def sync(self, matrix: Matrix, size: int, changed: set[int]) -> Pass | None:
        """Project what is new in `matrix[:size]` and the `changed` rows (their vector was
        replaced); work the directions out again when the rows doubled since they were.
        The first pass to rank `matrix[:size]` with; None below `from_rows` (rank exactly)."""
        if not self.active(size):
            return None
        if self._basis is None or size >= 2 * self._basis_rows:
            self._fit(matrix, size)
        elif size > self._done:
            self._store(self._project(matrix[self._done : size]), self._done)
            self._done = size
        assert self._low is not None
        assert self._mean is not None
        assert self._basis is not None
        stale = sorted(r for r in changed if r < self._done)
        if stale:
            self._low[stale] = self._project(matrix[stale])
        return Pass(self._mean, self._basis, self._low[: self._done], self.pool)

    def _fit(self, matrix: Matrix, size: int) -> None:
        import numpy as np

        step = max(1, size // _SAMPLE)
        centred = matrix[:size:step].astype(np.float64)  # (a copy: centred in place)
        mean = centred.mean(axis=0)
        centred -= mean
        # eigenvectors of the covariance, largest variance first
        _, vectors = np.linalg.eigh(centred.T @ centred)
        self._mean = mean.astype(np.float32)
        self._basis = np.ascontiguousarray(vectors[:, ::-1][:, : self.dims], dtype=np.float32)
        self._basis_rows = size
        self._low = None
        self._store(self._project(matrix[:size]), 0)
        self._done = size

    def _project(self, rows: Matrix) -> Matrix:
        """`rows` in the reduced coordinates, a block at a time (no full-size temporary)."""
        import numpy as np

        mean, basis = self._mean, self._basis
        assert mean is not None
        assert basis is not None
        out = np.empty((len(rows), self.dims), dtype=np.float32)
        for start in range(0, len(rows), _BLOCK):
            out[start : start + _BLOCK] = (rows[start : start + _BLOCK] - mean) @ basis
        return out

    def _store(self, projected: Matrix, at: int) -> None:
        import numpy as np

        end = at + len(projected)
        if self._low is None or end > len(self._low):
            rows = max(end, 2 * (len(self._low) if self._low is not None else 0))
            bigger = np.zeros((rows, self.dims), dtype=np.float32)
            if self._low is not None:
                bigger[:at] = self._low[:at]
            self._low = bigger
        self._low[at:end] = projected

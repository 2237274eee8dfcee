"""Optional stage: semantic relevance from a small local embedding model.

Off by default (`[semantic] enabled = true` turns it on); needs the `semantic` extra
(`wordllama`, whose 256-dimension static embeddings ship inside the package: nothing is
downloaded at run time and no torch is needed).

It gives the pipeline two things a word match cannot:
- a candidate list of its own: the memories nearest to the question in meaning, fused with
  the store's lists by RRF, so that a turn sharing no word with the question can still come
  back ("What is her relationship status?" -> "It'll be tough as a single parent");
- a similarity per candidate, blended into relevance by `ranking.semantic_share`.

The index is a cache the orchestrator owns, never the source of truth: it is filled from the
store's own listing where the store has one (`derived.feed`), and from every candidate it
ranks; semantic hits are read back from the store before use, so a memory deleted or changed
there never comes back stale.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memory_orchestrator.errors import SemanticUnavailable
from memory_orchestrator.models import Memory
from memory_orchestrator.text import content_words

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]
else:
    Matrix = Any

__all__ = [
    "Embedder",
    "SemanticIndex",
    "SemanticUnavailable",
    "WordLlamaEmbedder",
    "embedding_text",
    "load_embedder",
]

_INSTALL = (
    "semantic relevance needs the optional extra: "
    "uv sync --extra semantic  (or pip install 'mnemon-memory-orchestrator[semantic]')"
)
_QUERY_CACHE = 256


class Embedder(Protocol):
    """Turns texts into L2-normalised vectors (one row per text)."""

    name: str

    def embed(self, texts: Sequence[str]) -> Matrix: ...


def embedding_text(text: str) -> str:
    """What is embedded: the content words (stop words out). Static word embeddings are an
    average over tokens, so filler words pull every text towards the same point; measured
    on the LoCoMo development split, dropping them lifts semantic-only recall@10 from 0.40
    to 0.44 (`bench/semantic_only.py`)."""
    return " ".join(content_words(text)) or text


class WordLlamaEmbedder:
    """`wordllama` static embeddings, loaded once, lazily, from the package's own folder
    with downloads disabled."""

    def __init__(self, dim: int = 256) -> None:
        self.name = f"wordllama-l2_supercat-{dim}"
        self._dim = dim
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            try:
                import wordllama
                from wordllama import WordLlama
            except ImportError as exc:
                raise SemanticUnavailable(_INSTALL) from exc
            folder = Path(wordllama.__file__).parent
            try:
                self._model = WordLlama.load(cache_dir=folder, disable_download=True, dim=self._dim)
            except (FileNotFoundError, OSError, ValueError) as exc:
                raise SemanticUnavailable(
                    f"wordllama weights not found in {folder} (downloads are disabled): {exc}"
                ) from exc
        return self._model

    def embed(self, texts: Sequence[str]) -> Matrix:
        import numpy as np

        model = self._load()
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        vectors = model.embed([embedding_text(t) for t in texts], norm=True)
        return np.asarray(vectors, dtype=np.float32)


def load_embedder(model: str) -> Embedder:
    if model != "wordllama":
        raise SemanticUnavailable(f"unknown semantic model {model!r}; known: wordllama")
    embedder = WordLlamaEmbedder()
    embedder._load()  # fail now, with the install hint, not in the middle of a request
    return embedder


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=8).digest()


class SemanticIndex:
    """Memory vectors in one matrix (brute-force cosine: ~10k x 256 floats is well under a
    millisecond per query), keyed by memory id, re-embedded when a memory's text changes."""

    def __init__(self, embedder: Embedder, *, max_memories: int = 200_000) -> None:
        self.embedder = embedder
        self.max_memories = max_memories
        self._ids: list[str] = []
        self._rows: dict[str, int] = {}
        self._digests: list[bytes] = []
        self._memories: dict[str, Memory] = {}
        self._matrix: Matrix | None = None
        self._size = 0
        self._queries: OrderedDict[str, Matrix] = OrderedDict()

    def __len__(self) -> int:
        return self._size

    # ------------------------------------------------------------------ filling

    def add(self, memories: Sequence[Memory]) -> int:
        """Index these memories (new ones appended, changed ones re-embedded); returns how
        many were embedded. Beyond `max_memories`, new memories are not indexed."""

        fresh: list[Memory] = []
        seen: set[str] = set()
        for memory in memories:
            if memory.id in seen:
                continue
            seen.add(memory.id)
            row = self._rows.get(memory.id)
            if row is not None and self._digests[row] == _digest(memory.content):
                self._memories[memory.id] = memory
                continue
            if row is None and self._size + len(fresh) >= self.max_memories:
                continue
            fresh.append(memory)
        if not fresh:
            return 0
        vectors = self.embedder.embed([m.content for m in fresh])
        for memory, vector in zip(fresh, vectors, strict=True):
            row = self._rows.get(memory.id)
            if row is None:
                row = self._size
                self._grow(row + 1, vector.shape[0])
                self._rows[memory.id] = row
                self._ids.append(memory.id)
                self._digests.append(b"")
                self._size += 1
            assert self._matrix is not None
            self._matrix[row] = vector
            self._digests[row] = _digest(memory.content)
            self._memories[memory.id] = memory
        return len(fresh)

    def _grow(self, rows: int, dim: int) -> None:
        import numpy as np

        if self._matrix is None:
            self._matrix = np.zeros((max(rows, 1024), dim), dtype=np.float32)
        elif rows > self._matrix.shape[0]:
            bigger = np.zeros((max(rows, 2 * self._matrix.shape[0]), dim), dtype=np.float32)
            bigger[: self._size] = self._matrix[: self._size]
            self._matrix = bigger

    # ------------------------------------------------------------------ reading

    def query_vector(self, query: str) -> Matrix:
        cached = self._queries.get(query)
        if cached is not None:
            self._queries.move_to_end(query)
            return cached
        vector: Matrix = self.embedder.embed([query])[0]
        self._queries[query] = vector
        if len(self._queries) > _QUERY_CACHE:
            self._queries.popitem(last=False)
        return vector

    def search(self, query: str, k: int) -> list[tuple[Memory, float]]:
        """The `k` indexed memories nearest to `query`, best first, with their cosine."""
        import numpy as np

        if self._matrix is None or self._size == 0 or k < 1:
            return []
        sims = self._matrix[: self._size] @ self.query_vector(query)
        k = min(k, self._size)
        top = np.argpartition(-sims, k - 1)[:k]
        # best first; equal similarities by id, so the order never depends on insert order
        order = sorted(top.tolist(), key=lambda r: (-float(sims[r]), self._ids[r]))
        return [(self._memories[self._ids[r]], _clip(float(sims[r]))) for r in order]

    def nearest(self, query: str, k: int) -> dict[str, float]:
        """Memory id -> cosine for the `k` indexed memories nearest to `query`."""
        return {m.id: score for m, score in self.search(query, k)}

    def similarities(self, query: str, memories: Sequence[Memory]) -> dict[str, float]:
        """Cosine of `query` with each memory (in [0, 1]); memories not yet indexed are
        embedded and indexed now."""
        if not memories:
            return {}
        self.add(memories)
        assert self._matrix is not None
        vector = self.query_vector(query)
        out: dict[str, float] = {}
        for memory in memories:
            row = self._rows.get(memory.id)
            if row is not None:
                out[memory.id] = _clip(float(self._matrix[row] @ vector))
        return out


def _clip(value: float) -> float:
    if math.isnan(value):
        return 0.0
    return min(1.0, max(0.0, round(value, 6)))

"""The semantic index over the real wordllama model (the `semantic` extra, in the dev group)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_orchestrator.derived.semantic import (
    SemanticIndex,
    WordLlamaEmbedder,
    _row_dots,
    embedding_text,
    load_embedder,
)
from memory_orchestrator.errors import SemanticUnavailable
from memory_orchestrator.models import Memory, MemoryType

TEXTS = {
    "puppy": "The puppy chased the ball around the garden all afternoon",
    "revenue": "Quarterly revenue grew in Europe after the price change",
    "camp": "We booked a campsite near the lake for the weekend",
}


def mem(mem_id: str, content: str) -> Memory:
    return Memory(id=mem_id, content=content, type=MemoryType.EPISODIC)


@pytest.fixture(scope="module")
def embedder() -> WordLlamaEmbedder:
    return WordLlamaEmbedder()


class CountingEmbedder:
    """Wraps the real model and counts the texts it embeds."""

    def __init__(self, inner: WordLlamaEmbedder) -> None:
        self.inner, self.name, self.texts = inner, inner.name, 0

    def embed(self, texts: Sequence[str]) -> Any:
        self.texts += len(texts)
        return self.inner.embed(texts)


def test_nearest_in_meaning_without_a_shared_word(embedder: WordLlamaEmbedder) -> None:
    index = SemanticIndex(embedder)
    index.add([mem(i, t) for i, t in TEXTS.items()])
    assert index.ranked("dog playing outside", 3)[0][0] == "puppy"
    assert index.ranked("company sales figures", 3)[0][0] == "revenue"
    assert index.ranked("outdoor trip in nature", 3)[0][0] == "camp"
    assert all(0.0 <= s <= 1.0 for _, s in index.ranked("dog", 3))


def test_memories_are_embedded_once_and_again_only_when_their_text_changes(
    embedder: WordLlamaEmbedder,
) -> None:
    counting = CountingEmbedder(embedder)
    index = SemanticIndex(counting)
    assert index.add([mem("a", TEXTS["puppy"]), mem("a", TEXTS["puppy"])]) == 1
    assert index.add([mem("a", TEXTS["puppy"])]) == 0
    assert index.add([mem("a", TEXTS["revenue"])]) == 1  # changed in the store: re-embedded
    assert len(index) == 1
    assert counting.texts == 2
    for text in ("puppy", "revenue"):  # its vector is the new text's
        alone = SemanticIndex(embedder)
        alone.add([mem("a", TEXTS[text])])
        same = alone.nearest("sales", 1) == index.nearest("sales", 1)
        assert same is (text == "revenue")
    index.ranked("sales", 2)
    assert counting.texts == 3  # the question once: query vectors are cached


def test_the_index_is_bounded_and_grows_past_its_first_block(
    embedder: WordLlamaEmbedder,
) -> None:
    index = SemanticIndex(embedder, max_memories=1500)
    index.add([mem(f"m{i}", f"note number {i} about topic {i % 7}") for i in range(2000)])
    assert len(index) == 1500
    assert len(index.ranked("topic", 2000)) == 1500


def test_similarities_index_what_they_score(embedder: WordLlamaEmbedder) -> None:
    index = SemanticIndex(embedder)
    sims = index.similarities("dog", [mem("p", TEXTS["puppy"]), mem("r", TEXTS["revenue"])])
    assert set(sims) == {"p", "r"}
    assert sims["p"] > sims["r"]
    assert len(index) == 2


def test_a_cosine_is_the_rows_own_dot_product_whichever_rows_come_with_it() -> None:
    """`_row_dots` gives each row's `float(row @ vector)` to the last bit, whatever rows it is
    given with and in what order (a matrix-vector product sums in another order, which
    depends on the row's place: its last bits differ for about half the rows)."""
    import numpy as np

    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((300, 384)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    vector = matrix[0] + np.float32(0.1) * matrix[1]
    own = [float(row @ vector) for row in matrix]
    assert _row_dots(matrix, vector) == own
    for size in (1, 7, 64, 129):
        rows = rng.permutation(300)[:size]
        assert _row_dots(matrix[rows], vector) == [own[r] for r in rows]


def test_similarities_do_not_depend_on_which_memories_are_scored_together(
    embedder: WordLlamaEmbedder,
) -> None:
    memories = [mem(f"m{i}", f"note {i}: " + list(TEXTS.values())[i % 3]) for i in range(30)]
    index = SemanticIndex(embedder)
    together = index.similarities("a dog in the garden", memories)
    assert len(together) == 30
    for start in range(0, 30, 7):
        part = memories[start : start + 7][::-1]
        assert index.similarities("a dog in the garden", part) == {
            m.id: together[m.id] for m in part
        }


def test_similarities_of_memories_seen_before_are_those_of_their_own_text(
    embedder: WordLlamaEmbedder,
) -> None:
    """Memories scored again are not embedded again; a memory whose text changed since (a
    new object with the same id) is embedded again first, and one never seen is added: the
    same cosines as a fresh index gives."""
    counting = CountingEmbedder(embedder)
    index = SemanticIndex(counting)
    seen = [mem(i, t) for i, t in TEXTS.items()]
    first = index.similarities("a dog in the garden", seen)
    embedded = counting.texts
    assert index.similarities("a dog in the garden", seen) == first
    assert counting.texts == embedded  # nothing embedded again
    for batch in (
        [mem("puppy", TEXTS["revenue"]), seen[1]],  # its text changed in the store
        [mem("puppy", TEXTS["camp"]), seen[2], mem("new", TEXTS["puppy"])],  # and a new one
    ):
        again = index.similarities("a dog in the garden", batch)
        assert again == SemanticIndex(embedder).similarities("a dog in the garden", batch)
        assert again["puppy"] != first["puppy"]


def test_stop_words_are_not_embedded() -> None:
    assert embedding_text("What is the status of it?") == "status"
    assert embedding_text("the of") == "the of"  # nothing left: the text as it is


def test_unknown_model_is_a_clear_error() -> None:
    with pytest.raises(SemanticUnavailable, match="unknown semantic model"):
        load_embedder("bert")


def test_auto_falls_back_to_wordllama_and_says_why(tmp_path: Path) -> None:
    chosen = load_embedder("auto", model_dir=tmp_path)  # a folder without the minilm model
    assert isinstance(chosen, WordLlamaEmbedder)
    assert chosen.fallback is not None
    assert chosen.fallback.startswith(f"minilm: [semantic] model_dir {tmp_path} does not hold")


def test_auto_without_a_model_says_search_is_lexical_only_and_how_to_fix_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "wordllama", None)  # as if the `semantic` extra were not in
    with pytest.raises(SemanticUnavailable) as caught:
        load_embedder("auto", model_dir=tmp_path)  # a folder without the model
    assert str(caught.value) == (
        "search is lexical only: the semantic model (all-MiniLM-L6-v2) is not installed;"
        " run `orchestrator models install`"
    )


def test_a_ranking_worked_out_ahead_is_the_one_asked_for_and_never_stale() -> None:
    from tests.factories import memory
    from tests.unit.test_semantic_vectors import HashEmbedder

    notes = [memory(f"m{i}", f"note number {i}") for i in range(50)]
    index, inline = SemanticIndex(HashEmbedder()), SemanticIndex(HashEmbedder())
    index.add(notes)
    inline.add(notes)
    index.rank_ahead("note number 7", 5)
    assert index.ranked("note number 7", 5) == inline.ranked("note number 7", 5)  # the worker's
    index.rank_ahead("note number 7", 6)
    index._ranked_ahead[("note number 7", 6)].result()  # done before the change below
    index.add([memory("new", "note number 7")])  # a vector changes meanwhile
    assert ("new", 1.0) in index.ranked("note number 7", 6)  # worked out anew
    assert index.ranked("note number 7", 6) == index.ranked("note number 7", 6)


def test_a_ranking_is_kept_for_the_same_question_until_a_vector_changes() -> None:
    from tests.factories import memory
    from tests.unit.test_semantic_vectors import HashEmbedder

    index = SemanticIndex(HashEmbedder())
    index.add([memory(f"m{i}", f"note number {i}") for i in range(50)])
    worked: list[tuple[str, int]] = []
    work = index._ranked

    def counted(query: str, k: int) -> Any:
        worked.append((query, k))
        return work(query, k)

    index._ranked = counted  # type: ignore[method-assign]
    first = index.ranked("note number 7", 5)
    assert index.ranked("note number 7", 5) == first
    index.rank_ahead("note number 7", 5)  # kept: nothing to start
    assert ("note number 7", 5) not in index._ranked_ahead
    assert index.ranked("note number 7", 5) == first
    assert worked == [("note number 7", 5)]
    index.ranked("note number 7", 6)  # another depth is another ranking
    index.ranked("note number 8", 5)
    assert len(worked) == 3
    index.add([memory("new", "note number 7")])  # a vector changes: worked out anew
    again = index.ranked("note number 7", 5)
    assert len(worked) == 4
    fresh = SemanticIndex(HashEmbedder())
    fresh.add(
        [*(memory(f"m{i}", f"note number {i}") for i in range(50)), memory("new", "note number 7")]
    )
    assert again == fresh.ranked("note number 7", 5)
    assert ("new", 1.0) in again

"""The semantic index's vectors kept on disk: a restart embeds nothing it already has, a
changed memory is embedded again, and a file that cannot be used is dropped and rebuilt."""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memory_orchestrator.derived.semantic import SemanticIndex
from memory_orchestrator.derived.vectors import VectorFile, vector_path
from tests.factories import memory

TEXTS = {
    "a": "The puppy chased the ball around the garden",
    "b": "Quarterly revenue grew in Europe",
    "c": "We booked a campsite near the lake",
}


class HashEmbedder:
    """Deterministic unit vectors from a hash of the text; counts what it embeds."""

    name = "hash-8"

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> Any:
        self.texts.extend(texts)
        rows = [
            np.frombuffer(hashlib.sha256(t.encode()).digest(), dtype=np.uint8)[:8].astype(
                np.float32
            )
            + 1
            for t in texts
        ]
        matrix = np.array(rows, dtype=np.float32).reshape(len(texts), 8)
        return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def start(path: Path, *, fingerprint: str = "v1") -> tuple[SemanticIndex, HashEmbedder]:
    embedder = HashEmbedder()
    vectors = VectorFile(path, model=embedder.name, fingerprint=fingerprint)
    return SemanticIndex(embedder, vectors=vectors), embedder


def memories() -> list[Any]:
    return [memory(i, t) for i, t in TEXTS.items()]


def test_a_restart_loads_the_same_vectors_and_embeds_nothing_again(tmp_path: Path) -> None:
    path = vector_path(tmp_path, "hash-8")
    first, _ = start(path)
    assert first.add(memories()) == 3
    before = first.nearest("puppy", 3)

    again, embedder = start(path)
    assert again.restored == 3
    assert len(again) == 3
    assert again.nearest("puppy", 3) == before  # the same vectors, known by id at once
    assert again.add(memories()) == 0
    assert embedder.texts == ["puppy"]  # only the question was embedded
    assert [i for i, _ in again.ranked("puppy", 3)] == list(before)


def test_a_changed_memory_is_embedded_again_and_kept(tmp_path: Path) -> None:
    path = vector_path(tmp_path, "hash-8")
    first, _ = start(path)
    first.add(memories())
    changed = memory("b", "Quarterly revenue fell in Asia")

    second, embedder = start(path)
    assert second.add([*memories()[:1], changed, memories()[2]]) == 1
    assert embedder.texts == [changed.content]

    third, embedder = start(path)
    assert third.add([changed]) == 0
    assert third.nearest(changed.content, 1) == {"b": 1.0}
    assert len(third) == 3


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda p: p.write_bytes(b"not a database at all" * 100), id="garbage"),
        pytest.param(lambda p: p.write_bytes(p.read_bytes()[:700]), id="truncated"),
        pytest.param(
            lambda p: _sql(p, "UPDATE vectors SET vector = x'00' WHERE id = 'b'"), id="bad-row"
        ),
    ],
)
def test_a_corrupt_file_is_logged_dropped_and_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: Any
) -> None:
    path = vector_path(tmp_path, "hash-8")
    first, _ = start(path)
    first.add(memories())
    assert first.vectors is not None
    first.vectors.close()
    _sql(path, "PRAGMA wal_checkpoint(TRUNCATE)")
    damage(path)

    with caplog.at_level(logging.WARNING, "memory_orchestrator.derived.vectors"):
        rebuilt, _ = start(path)
    assert "unusable" in caplog.text
    assert rebuilt.restored == 0
    assert rebuilt.add(memories()) == 3  # embedded again, and kept again
    assert start(path)[0].restored == 3


def test_vectors_of_another_model_are_not_reused(tmp_path: Path) -> None:
    path = vector_path(tmp_path, "hash-8")
    start(path)[0].add(memories())
    other, _ = start(path, fingerprint="v2")  # same name, other weights
    assert other.restored == 0
    assert other.add(memories()) == 3


def test_an_unwritable_place_leaves_the_index_in_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be")
    with caplog.at_level(logging.WARNING, "memory_orchestrator.derived.vectors"):
        index, _ = start(vector_path(blocker, "hash-8"))
        assert index.add(memories()) == 3
    assert "cannot be kept" in caplog.text
    assert index.nearest(TEXTS["a"], 1) == {"a": 1.0}


def test_the_file_is_named_after_the_model_and_lives_in_the_data_dir(tmp_path: Path) -> None:
    assert vector_path(tmp_path, "all-MiniLM-L6-v2") == tmp_path / "semantic/all-MiniLM-L6-v2.db"
    assert vector_path(tmp_path, "a/b c").name == "a_b_c.db"


def _sql(path: Path, statement: str) -> None:
    db = sqlite3.connect(path)
    with db:
        db.execute(statement)
    db.close()

"""`ReadBack`: the derived indexes' candidates read from the store once per store version."""

from __future__ import annotations

from collections.abc import Hashable

from memory_orchestrator.derived.readback import ReadBack
from memory_orchestrator.models import Memory

STORE = {i: Memory(id=i, content=f"memory {i}") for i in ("a", "b", "c")}


class Store:
    """The store's side: a version to report and the reads it was asked for."""

    def __init__(self) -> None:
        self.version: Hashable | None = 1
        self.asked: list[list[str]] = []
        self.fail = False

    async def read(self, ids: list[str]) -> list[Memory] | None:
        self.asked.append(ids)
        if self.fail:
            return None
        return [STORE[i] for i in ids if i in STORE]


async def ask(kept: ReadBack, store: Store, *ids: str) -> dict[str, Memory] | None:
    return await kept.memories(list(ids), store.read)


async def test_what_was_read_at_a_version_is_not_read_again_at_that_version() -> None:
    store = Store()
    kept = ReadBack(lambda: store.version)
    assert await ask(kept, store, "a", "b") == {"a": STORE["a"], "b": STORE["b"]}
    assert await ask(kept, store, "b", "a") == {"b": STORE["b"], "a": STORE["a"]}
    assert await ask(kept, store, "a", "c") == {"a": STORE["a"], "c": STORE["c"]}
    assert store.asked == [["a", "b"], ["c"]]  # only what was not read yet
    assert (kept.reads, kept.kept) == (3, 3)


async def test_a_new_version_reads_everything_again() -> None:
    store = Store()
    kept = ReadBack(lambda: store.version)
    await ask(kept, store, "a", "b")
    store.version = 2  # something committed to the store
    await ask(kept, store, "a", "b")
    assert store.asked == [["a", "b"], ["a", "b"]]


async def test_a_store_that_cannot_tell_is_read_every_time() -> None:
    store = Store()
    store.version = None
    kept = ReadBack(lambda: store.version)
    await ask(kept, store, "a")
    await ask(kept, store, "a")
    unversioned = ReadBack(None)
    await ask(unversioned, store, "a")
    assert store.asked == [["a"], ["a"], ["a"]]


async def test_a_memory_gone_from_the_store_stays_out_and_is_not_asked_again() -> None:
    store = Store()
    kept = ReadBack(lambda: store.version)
    assert await ask(kept, store, "a", "gone") == {"a": STORE["a"]}
    assert await ask(kept, store, "gone", "a") == {"a": STORE["a"]}
    assert store.asked == [["a", "gone"]]


async def test_a_failed_read_is_reported_and_keeps_nothing() -> None:
    store = Store()
    kept = ReadBack(lambda: store.version)
    store.fail = True
    assert await ask(kept, store, "a") is None
    store.fail = False
    assert await ask(kept, store, "a") == {"a": STORE["a"]}
    assert store.asked == [["a"], ["a"]]


async def test_what_was_read_while_another_query_saw_a_newer_version_is_not_kept() -> None:
    store = Store()
    kept = ReadBack(lambda: store.version)

    async def first() -> dict[str, Memory] | None:
        async def read(ids: list[str]) -> list[Memory] | None:
            store.version = 2  # a write commits while this read runs...
            await kept.memories(["c"], store.read)  # ...and another query sees it
            return await store.read(ids)

        return await kept.memories(["a"], read)

    assert await first() == {"a": STORE["a"]}  # answered
    assert await ask(kept, store, "a", "c") == {"a": STORE["a"], "c": STORE["c"]}
    assert store.asked == [["c"], ["a"], ["a"]]  # "a" (begun at 1) was not kept for 2


async def test_a_moment_without_a_version_reads_everything_and_drops_nothing() -> None:
    store = Store()
    kept = ReadBack(lambda: store.version)
    await ask(kept, store, "a")
    store.version = None  # e.g. the store's lock held for a moment
    assert await ask(kept, store, "a") == {"a": STORE["a"]}
    store.version = 1  # the same version: nothing committed meanwhile
    await ask(kept, store, "a")
    assert store.asked == [["a"], ["a"]]

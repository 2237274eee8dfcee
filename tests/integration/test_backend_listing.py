"""Listing is a declared capability: a store lists its memories (`list_memories`) exactly when
it says `listing`, and the wrappers around stores say and do the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memory_orchestrator.backends import registry
from memory_orchestrator.backends.base import MemoryBackend, enumerable
from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.backends.fused import FusedBackend, Member
from memory_orchestrator.errors import CapabilityMissing
from memory_orchestrator.models import Memory, NewMemory
from memory_orchestrator.service.resilience import GuardedBackend, RetryPolicy
from memory_orchestrator.settings import Settings, load_settings
from tests.faults import METHOD_OF

pytestmark = pytest.mark.integration


def built(name: str, tmp_path: Path) -> MemoryBackend:
    """A backend as the registry builds it; none of them starts a process to be built."""
    options: dict[str, Any] = {"data_dir": tmp_path}
    if name == "fused":
        options["fused"] = {"stores": [{"backend": "embedded"}, {"backend": "mnemonic"}]}
    if name == "mnemon":
        options["mnemon"] = {"data_dir": tmp_path / "mnemon"}
    settings: Settings = load_settings(**options)
    return registry.create(name, settings)


@pytest.mark.parametrize("name", registry.names())
async def test_every_ability_a_store_declares_comes_with_its_method(
    name: str, tmp_path: Path
) -> None:
    """A flag is the one declaration of an ability (docs/explanation/store-abilities.md): a
    store that sets one must have its method, a link mypy cannot see."""
    backend = built(name, tmp_path)
    try:
        declared = backend.capabilities.model_dump()
        for flag, method in METHOD_OF.items():
            if declared[flag]:
                assert callable(getattr(backend, method, None)), f"{name}: {flag} without {method}"
    finally:
        await backend.close()


def test_every_builtin_store_but_the_fused_one_can_list(tmp_path: Path) -> None:
    listing = {name: built(name, tmp_path).capabilities.listing for name in registry.names()}
    assert listing == {name: name != "fused" for name in registry.names()}


def test_mnemon_lists_only_with_direct_reads_of_its_store_file(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path, mnemon={"direct_reads": False})
    assert not registry.create("mnemon", settings).capabilities.listing


async def test_the_fused_store_lists_nothing_even_over_stores_that_can(tmp_path: Path) -> None:
    members = [
        Member("a", EmbeddedBackend(tmp_path / "a.db")),
        Member("b", EmbeddedBackend(tmp_path / "b.db")),
    ]
    fused = FusedBackend(members)
    assert all(m.backend.capabilities.listing for m in members)
    assert not fused.capabilities.listing
    assert enumerable(fused) is None
    await fused.close()


async def test_the_guard_forwards_listing_and_pages_through_the_store(tmp_path: Path) -> None:
    inner = EmbeddedBackend(tmp_path / "m.db")
    guarded = GuardedBackend(inner, RetryPolicy())
    await inner.write_many([NewMemory(content=f"memory number {n}") for n in range(3)])
    assert guarded.capabilities.listing
    first, cursor = await guarded.list_memories(None, 2)
    rest, cursor = await guarded.list_memories(cursor, 2)
    assert [m.content for m in first + rest] == [f"memory number {n}" for n in range(3)]
    assert await guarded.list_memories(cursor, 2) == ([], cursor)
    await guarded.close()


async def test_the_guard_refuses_to_list_a_store_that_does_not_declare_it(tmp_path: Path) -> None:
    inner = EmbeddedBackend(tmp_path / "m.db")
    inner.capabilities = inner.capabilities.model_copy(update={"listing": False})
    guarded = GuardedBackend(inner, RetryPolicy())
    assert not guarded.capabilities.listing
    with pytest.raises(CapabilityMissing, match="cannot list"):
        await guarded.list_memories(None, 5)
    await guarded.close()


class JunkLister(EmbeddedBackend):
    """Fault injection: a listing that answers with repeats and records of the wrong type."""

    async def list_memories(self, cursor: str | None, limit: int) -> tuple[list[Any], str | None]:
        page, after = await super().list_memories(cursor, limit)
        return [*page, page[0], "not a memory", None], after


async def test_the_guard_drops_junk_from_a_listing(tmp_path: Path) -> None:
    inner = JunkLister(tmp_path / "m.db")
    guarded = GuardedBackend(inner, RetryPolicy())
    await inner.write_many([NewMemory(content="one"), NewMemory(content="two")])
    page, _ = await guarded.list_memories(None, 10)
    assert all(isinstance(m, Memory) for m in page)
    assert [m.content for m in page] == ["one", "two"]
    await guarded.close()

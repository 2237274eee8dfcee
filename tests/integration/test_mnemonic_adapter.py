"""The Mnemonic adapter against a real directory of markdown files (and real git)."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from memory_orchestrator.backends import registry
from memory_orchestrator.backends.mnemonic import MnemonicBackend
from memory_orchestrator.backends.mnemonic_files import split_frontmatter
from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import (
    MemoryType,
    NewMemory,
    SearchFilters,
    Status,
    TimeRange,
    WriteAction,
)
from memory_orchestrator.settings import load_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

SEED_FILE = """---
id: 6f1c2a9e-0000-4000-8000-000000000001
type: procedural
namespace: patterns
created: 2026-01-10T09:00:00Z
modified: 2026-01-10T09:00:00Z
title: "Release checklist"
tags: [release, ci]
temporal:
  valid_from: 2026-01-10T09:00:00Z
  recorded_at: 2026-01-10T09:00:00Z
  decay:
    model: exponential
    half_life: P14D
    strength: 0.9
provenance:
  source_type: user_explicit
  agent: claude-opus
  confidence: 0.95
---

# Release checklist

Tag the commit, wait for the pipeline, then publish the wheel.
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "mnemonic"
    (folder / "patterns").mkdir(parents=True)
    (folder / "patterns" / "release-checklist.memory.md").write_text(SEED_FILE)
    (folder / ".blackboard").mkdir()
    (folder / ".blackboard" / "x.memory.md").write_text(SEED_FILE.replace("0001", "0002"))
    return folder


async def test_an_existing_mnemonic_file_is_read_and_found(root: Path) -> None:
    store = MnemonicBackend(root)
    hits = await store.search("how do I publish a release?", 5)
    assert [h.memory.id for h in hits] == ["6f1c2a9e-0000-4000-8000-000000000001"]
    memory = hits[0].memory
    assert memory.content == "Tag the commit, wait for the pipeline, then publish the wheel."
    assert (memory.type, memory.tags, memory.confidence, memory.source) == (
        MemoryType.PROCEDURAL,
        ("release", "ci"),
        0.95,
        "claude-opus",
    )
    assert memory.created_at == datetime(2026, 1, 10, 9, tzinfo=UTC)
    assert (memory.store, memory.metadata["namespace"]) == ("mnemonic", "patterns")


async def test_a_write_is_a_valid_mif_file_that_reads_back(root: Path) -> None:
    store = MnemonicBackend(root)
    when = datetime(2023, 5, 7, 10, tzinfo=UTC)
    outcome = await store.write(
        NewMemory(
            content='Caroline said "ship it" --\nthen went to the support group',
            type=MemoryType.EPISODIC,
            entities=["Caroline"],
            tags=["chat"],
            created_at=when,
            confidence=0.7,
            importance=0.4,
        )
    )
    assert outcome.action is WriteAction.ADDED
    (path,) = (root / "episodic").glob("*.memory.md")
    split = split_frontmatter(path.read_text())
    assert split is not None
    front, body = split
    assert front["id"] == outcome.id
    assert (front["type"], front["namespace"], front["tags"]) == (
        "episodic",
        "episodic",
        ["chat"],
    )
    assert front["temporal"]["valid_from"] == "2023-05-07T10:00:00Z"
    assert front["temporal"]["decay"] == {
        "model": "exponential",
        "half_life": "P7D",
        "strength": 1.0,
    }
    assert front["provenance"]["confidence"] == 0.7
    assert body.startswith("# Caroline said")
    (memory,) = await MnemonicBackend(root).get_memories([outcome.id])  # a fresh reader
    assert memory.content == 'Caroline said "ship it" --\nthen went to the support group'
    assert (memory.entities, memory.created_at, memory.importance) == (("Caroline",), when, 0.4)
    again = await store.write(
        NewMemory(content='Caroline said "ship it" --\nthen went to the support group')
    )
    assert (again.action, again.existing_id) == (WriteAction.SKIPPED, outcome.id)
    resource = await store.write(NewMemory(content="Docs at example.org", type=MemoryType.RESOURCE))
    (back,) = await store.get_memories([resource.id])
    assert back.type is MemoryType.RESOURCE


async def test_filters_by_type_entity_and_time(root: Path) -> None:
    store = MnemonicBackend(root)
    a = await store.write(
        NewMemory(
            content="Melanie painted a lake",
            type=MemoryType.EPISODIC,
            entities=["Melanie"],
            created_at=datetime(2022, 1, 1, tzinfo=UTC),
        )
    )
    b = await store.write(
        NewMemory(
            content="Melanie painted a sunset over the lake",
            entities=["Mel"],
            created_at=datetime(2023, 1, 1, tzinfo=UTC),
        )
    )
    window = TimeRange(start=datetime(2022, 6, 1, tzinfo=UTC))
    assert [
        h.memory.id for h in await store.search("painted lake", 5, SearchFilters(time_range=window))
    ] == [b.id]
    episodic = SearchFilters(memory_types=[MemoryType.EPISODIC])
    assert [h.memory.id for h in await store.search("painted lake", 5, episodic)] == [a.id]
    mel = SearchFilters(entity_ids=["mel"])
    assert [h.memory.id for h in await store.search("painted lake", 5, mel)] == [b.id]


async def test_neighbours_follow_links_and_shared_entities(root: Path) -> None:
    store = MnemonicBackend(root)
    a = await store.write(
        NewMemory(
            content="Jolene bought a kayak",
            entities=["Jolene"],
            created_at=datetime(2023, 1, 1, tzinfo=UTC),
        )
    )
    b = await store.write(
        NewMemory(
            content="Jolene kayaked the bay",
            entities=["Jolene"],
            created_at=datetime(2023, 1, 5, tzinfo=UTC),
        )
    )
    c = await store.write(NewMemory(content="The bay was calm on Sunday"))
    await store.link(b.id, c.id, "causal", 0.8)
    found = await store.neighbors([a.id], hops=2, limit=10)
    assert [(n.memory.id, n.edge_type, n.hops) for n in found] == [
        (b.id, "entity", 1),
        (c.id, "causal", 2),
    ]
    assert await store.neighbors([a.id], edge_types=["causal"]) == []
    assert "Jolene" in await store.known_entities()
    with pytest.raises(BackendError):
        await store.link(a.id, "nope", "x")


async def test_edits_by_hand_are_picked_up_and_forget_removes_the_file(root: Path) -> None:
    store = MnemonicBackend(root, rescan_s=0)
    path = root / "patterns" / "release-checklist.memory.md"
    path.write_text(SEED_FILE.replace("publish the wheel", "publish the sdist"))
    hits = await store.search("sdist", 5)
    assert [h.memory.id for h in hits] == ["6f1c2a9e-0000-4000-8000-000000000001"]
    assert await store.forget(hits[0].memory.id) is True
    assert not path.exists()
    assert await store.search("sdist", 5) == []
    assert await store.forget("nope") is False


async def test_health_reports_broken_files_as_degraded(root: Path) -> None:
    store = MnemonicBackend(root)
    (check,) = await store.health()
    assert (check.status, check.detail.split(" ")[0]) == (Status.OK, "1")
    (root / "context").mkdir()
    (root / "context" / "broken.memory.md").write_text("---\n: : not yaml [\n---\nbody\n")
    (check,) = await store.health()
    assert check.status is Status.DEGRADED
    assert "1 *.memory.md files without valid frontmatter" in check.detail


async def test_concurrent_writes_are_all_kept(root: Path) -> None:
    store = MnemonicBackend(root)
    ids: list[str] = []

    async def add(n: int) -> None:
        ids.append((await store.write(NewMemory(content=f"ocelot fact number {n}"))).id)

    async with anyio.create_task_group() as tg:
        for n in range(20):
            tg.start_soon(add, n)
    assert len(set(ids)) == 20
    assert len(list((root / "context").glob("*.memory.md"))) == 20
    hits = await MnemonicBackend(root).search("ocelot fact", 50)
    assert {h.memory.id for h in hits} == set(ids)


async def test_a_folder_gone_while_open_is_an_error_never_an_empty_memory(root: Path) -> None:
    store = MnemonicBackend(root, rescan_s=3600)  # its files were read: the folder is gone after
    assert await store.search("publish a release", 5)
    shutil.rmtree(root)
    with pytest.raises(BackendError, match="does not exist") as read:
        await store.search("publish a release", 5)
    assert not read.value.transient  # a read says what to fix
    with pytest.raises(BackendError, match="does not exist"):
        await store.get_memories(["6f1c2a9e-0000-4000-8000-000000000001"])
    with pytest.raises(BackendError, match="does not exist") as written:
        await store.write(NewMemory(content="a memory for a folder that is gone"))
    assert written.value.transient  # the orchestrator queues it
    assert not root.exists()  # no empty folder made behind the operator's back
    (check,) = await store.health()
    assert check.status is Status.ERROR
    assert "does not exist" in check.detail


async def test_the_folder_is_made_when_the_store_opens_its_parents_only_when_ours(
    tmp_path: Path,
) -> None:
    settings = load_settings(data_dir=tmp_path / "data", backend="mnemonic")
    registry.create("mnemonic", settings)
    assert (tmp_path / "data" / "mnemonic").is_dir()
    unmounted = tmp_path / "drive" / "notes"  # [mnemonic] path on a drive not mounted
    settings = load_settings(data_dir=tmp_path / "data", backend="mnemonic")
    settings.mnemonic.path = unmounted
    store = registry.create("mnemonic", settings)
    assert not (tmp_path / "drive").exists()
    with pytest.raises(BackendError, match="does not exist"):
        await store.search("anything", 5)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not on PATH")
async def test_git_commit_records_every_write(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    store = MnemonicBackend(root, git_commit=True)
    outcome = await store.write(NewMemory(content="--help is not an option here"))
    await store.forget(outcome.id)
    log = subprocess.run(
        ["git", "-C", str(root), "log", "--format=%s"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert log == [f"memory: forget {outcome.id}", f"memory: add {outcome.id} (context)"]


async def test_the_registry_builds_it_from_settings(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path, backend="mnemonic")
    store = registry.create("mnemonic", settings)
    await store.write(NewMemory(content="a lemurish memory"))
    assert list((tmp_path / "mnemonic" / "context").glob("*.memory.md"))


async def test_listing_pages_through_the_files_and_resumes_with_new_and_changed_ones(
    root: Path,
) -> None:
    store = MnemonicBackend(root, rescan_s=0)
    seed_id = "6f1c2a9e-0000-4000-8000-000000000001"

    async def collect(cursor: str | None) -> tuple[list[str], str | None]:
        ids: list[str] = []
        while True:
            page, cursor = await store.list_memories(cursor, 2)
            assert len(page) <= 2
            ids += [m.id for m in page]
            if len(page) < 2:
                return ids, cursor

    written = [await store.write(NewMemory(content=f"listed note {n}")) for n in range(4)]
    listed, cursor = await collect(None)
    assert listed == [seed_id, *(o.id for o in written)]
    assert await store.list_memories(cursor, 5) == ([], cursor)
    # another process adds a file with an old time stamp, and edits the seed file
    old = root / "context" / "copied-in.memory.md"
    old.write_text(SEED_FILE.replace("0001", "0009").replace("Release", "Copied"))
    when = datetime(2020, 1, 1, tzinfo=UTC).timestamp()
    os.utime(old, (when, when))
    seed = root / "patterns" / "release-checklist.memory.md"
    seed.write_text(SEED_FILE.replace("publish the wheel", "publish the sdist"))
    later, cursor = await collect(cursor)
    assert sorted(later) == sorted([seed_id, "6f1c2a9e-0000-4000-8000-000000000009"])
    mine = await store.write(NewMemory(content="written after the copy"))
    assert (await collect(cursor))[0] == [mine.id]
    # another backend object's cursor is not ours: it starts over
    other = MnemonicBackend(root)
    assert len((await other.list_memories(cursor, 100))[0]) == 7

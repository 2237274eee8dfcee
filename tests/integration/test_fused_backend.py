"""Several stores at once: real members (embedded SQLite, a Mnemonic directory and, when node
is there, the npm servers), faults injected by `tests.faults.FaultyBackend`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from memory_orchestrator.backends import registry
from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.backends.fused import FusedBackend, Member
from memory_orchestrator.backends.kg_memory import PACKAGE as KG_PACKAGE
from memory_orchestrator.backends.mnemon_mcp import PACKAGE as MM_PACKAGE
from memory_orchestrator.backends.mnemonic import MnemonicBackend
from memory_orchestrator.errors import BackendError, CapabilityMissing
from memory_orchestrator.models import NewMemory, SearchRequest, Status, WriteAction
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import load_settings
from tests.faults import FaultyBackend
from tests.npm_servers import require_script

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def stores(tmp_path: Path) -> tuple[EmbeddedBackend, MnemonicBackend]:
    return EmbeddedBackend(tmp_path / "e.db"), MnemonicBackend(tmp_path / "notes")


async def test_search_fans_out_fuses_and_says_which_store_each_item_came_from(
    tmp_path: Path,
) -> None:
    embedded, mnemonic = stores(tmp_path)
    fused = FusedBackend(
        [Member("embedded", embedded, 1.0), Member("mnemonic", mnemonic, 0.5)], primary="embedded"
    )
    await embedded.write(NewMemory(content="The gateway firmware is flashed over USB"))
    await mnemonic.write(NewMemory(content="Gateway firmware updates need a reboot"))
    hits = await fused.search("gateway firmware", 10)
    assert {h.memory.store for h in hits} == {"embedded", "mnemonic"}
    assert hits[0].memory.store == "embedded"  # the heavier weight wins the tie in rank
    assert all(h.memory.id.startswith(f"{h.memory.store}:") for h in hits)
    assert [h.rank for h in hits] == [1, 2]
    got = await fused.get_memories([h.memory.id for h in reversed(hits)] + ["x:y", "bare"])
    assert [m.id for m in got] == [h.memory.id for h in reversed(hits)]


async def test_writes_go_to_the_primary_and_ids_route_back(tmp_path: Path) -> None:
    embedded, mnemonic = stores(tmp_path)
    fused = FusedBackend([Member("embedded", embedded), Member("notes", mnemonic)], primary="notes")
    outcome = await fused.write(NewMemory(content="Carol likes oolong tea", entities=["Carol"]))
    assert outcome.action is WriteAction.ADDED
    assert outcome.id.startswith("notes:")
    assert await embedded.search("oolong", 5) == []
    second = await fused.write(NewMemory(content="Carol brews oolong daily", entities=["Carol"]))
    neighbours = await fused.neighbors([outcome.id])
    assert [n.memory.id for n in neighbours] == [second.id]
    assert neighbours[0].seed_id == outcome.id
    edge = await fused.link(outcome.id, second.id, "related")
    assert (edge.source_id, edge.target_id) == (outcome.id, second.id)
    with pytest.raises(CapabilityMissing):
        await fused.link(outcome.id, "embedded:mem_1", "related")
    assert "Carol" in await fused.known_entities()
    assert await fused.forget(outcome.id) is True
    assert await fused.forget("nope") is False


async def test_mirrored_writes_reach_every_store_and_a_failing_mirror_is_noted(
    tmp_path: Path,
) -> None:
    embedded, mnemonic = stores(tmp_path)
    broken = FaultyBackend(EmbeddedBackend(tmp_path / "b.db"), {"write_many": "error"})
    fused = FusedBackend(
        [Member("embedded", embedded), Member("notes", mnemonic), Member("broken", broken)],
        mirror_writes=True,
    )
    outcome = await fused.write(NewMemory(content="Gina opened an online clothing store"))
    assert outcome.id.startswith("embedded:")
    assert [h.memory.content for h in await mnemonic.search("clothing store", 3)] == [
        "Gina opened an online clothing store"
    ]
    assert any(n.startswith("fused: broken left out") for n in fused.notes)
    tagged = await fused.write(NewMemory(content="Gina hired a designer", tags=["turn:D2:1"]))
    hits = await fused.search("designer", 5)
    assert {h.memory.store for h in hits} == {"embedded", "notes"}
    assert all("turn:D2:1" in h.memory.tags for h in hits)
    assert tagged.id in {h.memory.id for h in hits}


@pytest.mark.parametrize("mode", ["error", "hang"])
async def test_a_failing_or_slow_store_leaves_a_partial_answer_a_note_and_degraded_health(
    tmp_path: Path, mode: str
) -> None:
    embedded, mnemonic = stores(tmp_path)
    broken = FaultyBackend(mnemonic, {"search": mode, "health": mode})  # type: ignore[dict-item]
    fused = FusedBackend([Member("embedded", embedded), Member("broken", broken)], timeout_s=0.3)
    await embedded.write(NewMemory(content="Quarterly report is due Friday"))
    start = time.perf_counter()
    hits = await fused.search("quarterly report", 5)
    assert time.perf_counter() - start < 20  # (the hanging member never answers: a bound)
    assert [h.memory.store for h in hits] == ["embedded"]
    assert any(n.startswith("fused: broken left out") for n in fused.notes)
    checks = await fused.health()
    assert checks[0].status is Status.DEGRADED
    assert "not ok: broken" in checks[0].detail


async def test_every_store_failing_is_an_error(tmp_path: Path) -> None:
    embedded, _ = stores(tmp_path)
    fused = FusedBackend([Member("a", FaultyBackend(embedded, {"search": "error"}))])
    with pytest.raises(BackendError, match="every store failed"):
        await fused.search("anything", 5)


async def test_the_pipeline_merges_the_same_fact_from_two_stores_as_cross_validated(
    tmp_path: Path,
) -> None:
    embedded, mnemonic = stores(tmp_path)
    fused = FusedBackend([Member("embedded", embedded), Member("mnemonic", mnemonic)])
    settings = load_settings(data_dir=tmp_path)
    orch = Orchestrator(fused, settings)
    fact = "Melanie signed up for a pottery class on Tuesday"
    await embedded.write(NewMemory(content=fact, entities=["Melanie"]))
    await mnemonic.write(NewMemory(content=fact, entities=["Melanie"]))
    await embedded.write(NewMemory(content="Melanie's pottery bowl cracked in the kiln"))
    result = await orch.search(SearchRequest(query="When did Melanie start pottery class?"))
    top = result.items[0]
    assert top.cross_validated
    assert top.store in {"embedded", "mnemonic"}
    assert len([i for i in result.items if "pottery class" in i.summary]) == 1
    await orch.close()


async def test_the_registry_builds_it_from_settings_with_weights(tmp_path: Path) -> None:
    settings = load_settings(
        data_dir=tmp_path,
        backend="fused",
        fused={
            "stores": [{"backend": "mnemonic"}, {"backend": "embedded", "weight": 2}],
        },
    )
    fused = registry.create("fused", settings)
    assert isinstance(fused, FusedBackend)
    assert [(m.label, m.weight) for m in fused.members] == [("mnemonic", 1.0), ("embedded", 2.0)]
    outcome = await fused.write(NewMemory(content="written to the primary"))
    assert outcome.id.startswith("mnemonic:")
    await fused.close()
    with pytest.raises(ValueError, match="cannot itself be `fused`"):
        registry.create(
            "fused", load_settings(data_dir=tmp_path, fused={"stores": [{"backend": "fused"}]})
        )


async def test_the_npm_stores_fused_over_real_servers(tmp_path: Path) -> None:
    require_script(MM_PACKAGE)
    require_script(KG_PACKAGE)
    settings = load_settings(
        data_dir=tmp_path,
        fused={"stores": [{"backend": "mnemon-mcp"}, {"backend": "kg-memory", "weight": 0.5}]},
    )
    fused = registry.create("fused", settings)
    assert isinstance(fused, FusedBackend)
    mm, kg = (m.backend for m in fused.members)
    try:
        await mm.write(NewMemory(content="Nate won a gaming tournament", entities=["Nate"]))
        await kg.write(NewMemory(content="Nate won a gaming tournament", entities=["Nate"]))
        hits = await fused.search("What tournament did Nate win?", 5)
        assert {h.memory.store for h in hits} == {"mnemon-mcp", "kg-memory"}
        checks = await fused.health()
        assert checks[0].status is Status.OK, checks
    finally:
        await fused.close()

"""`orchestrator forget` over a real embedded store: forget with a reason, list, undo, purge
(the store's own delete, only for what was forgotten first), and a forget made by another
process reaching an orchestrator that is running (its caches included)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner, Result

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.faces.cli import app
from memory_orchestrator.models import SearchRequest
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import load_settings

ORCHESTRATOR = Path(sys.executable).with_name("orchestrator")
QUERY = "Vendor X firmware"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    result = CliRunner().invoke(app, ["demo", "--data-dir", str(data)])
    assert result.exit_code == 0, result.output
    return data


def cli(store: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["--data-dir", str(store), *args])


def as_json(store: Path, *args: str, code: int = 0) -> Any:
    result = cli(store, "--json", *args)
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def found(store: Path) -> list[str]:
    return [i["memory_id"] for i in as_json(store, "search", QUERY, "--top-k", "20")["items"]]


def one_line(result: Result, code: int, phrase: str) -> None:
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert phrase in lines[0]


def test_forget_list_and_undo(store: Path) -> None:
    victim = found(store)[0]
    one_line(cli(store, "forget", victim), 2, "--reason")
    assert victim in found(store)  # nothing was forgotten
    report = as_json(store, "forget", victim, "--reason", "wrong vendor")
    assert (report["action"], report["done"]) == ("forget", [victim])
    assert victim not in found(store)
    (stone,) = as_json(store, "forget", "--list")
    assert (stone["memory_id"], stone["reason"], stone["store"]) == (
        victim,
        "wrong vendor",
        "embedded",
    )
    assert stone["purged_at"] is None
    missing = as_json(store, "forget", "no-such-id", "--reason", "x", code=1)
    assert missing["not_found"] == ["no-such-id"]
    one_line(cli(store, "forget", victim, "--undo", "--purge"), 2, "give one of")
    back = as_json(store, "forget", "--undo", victim)
    assert back["done"] == [victim]
    assert victim in found(store)
    assert as_json(store, "forget", "--undo", victim)["unchanged"] == [victim]
    assert as_json(store, "forget", "--list") == []


def test_purge_erases_from_the_store_only_what_was_forgotten(store: Path) -> None:
    victim, other = found(store)[:2]
    refused = as_json(store, "forget", "--purge", other, code=1)
    assert refused["refused"] == [other]
    assert other in found(store)
    as_json(store, "forget", victim, "--reason", "for good")
    purged = as_json(store, "forget", "--purge", victim)
    assert purged["done"] == [victim]

    async def in_the_store() -> list[str]:
        raw = EmbeddedBackend(store / "memories.db")
        try:
            return [m.id for m in await raw.get_memories([victim, other])]
        finally:
            await raw.close()

    assert anyio.run(in_the_store) == [other]
    undo = as_json(store, "forget", "--undo", victim, code=1)
    assert undo["refused"] == [victim]
    (stone,) = as_json(store, "forget", "--list")
    assert stone["purged_at"] is not None
    assert victim not in found(store)


async def test_a_forget_in_another_process_reaches_a_running_orchestrator(store: Path) -> None:
    settings = load_settings(data_dir=store)

    def forget(*args: str) -> None:
        argv = [str(ORCHESTRATOR), "--data-dir", str(store), "forget", *args]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr

    orchestrator = Orchestrator.from_settings(settings)
    try:

        async def ids() -> list[str]:
            result = await orchestrator.search(SearchRequest(query=QUERY, top_k=20))
            return [i.memory_id for i in result.items]

        first = await ids()  # its caches warm: the local index, the memories read back
        victim = first[0]
        await anyio.to_thread.run_sync(forget, victim, "--reason", "elsewhere")
        assert victim not in await ids()
        await anyio.to_thread.run_sync(forget, "--undo", victim)
        assert await ids() == first
    finally:
        await orchestrator.close()

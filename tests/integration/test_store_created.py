"""A store file that did not exist is created empty, and that is said: the server's log has a
line, health has a note (an MCP config with a mistyped data dir gave the agent no memories
and health said ok)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from memory_orchestrator.models import Status
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import load_settings
from memory_orchestrator.state.observability import Observer

pytestmark = pytest.mark.integration


async def test_a_store_created_empty_is_logged_and_noted_in_health(tmp_path: Path) -> None:
    typo = tmp_path / "demo-date"
    log = io.StringIO()

    async def main() -> dict[str, str]:
        orch = Orchestrator.from_settings(load_settings(data_dir=typo), observer=Observer(log))
        try:
            report = await orch.health()
        finally:
            await orch.close()
        assert report.status is Status.OK
        return {c.name: c.detail for c in report.checks}

    checks = await main()
    store = typo / "memories.db"
    assert checks["store_created"] == f"store created empty at {store} by this process"
    (line,) = [json.loads(x) for x in log.getvalue().splitlines()]
    assert (line["event"], line["level"], line["path"]) == (
        "store created empty",
        "warning",
        str(store),
    )


async def test_an_existing_store_is_not_noted(tmp_path: Path) -> None:
    log = io.StringIO()

    async def open_once() -> list[str]:
        orch = Orchestrator.from_settings(load_settings(data_dir=tmp_path), observer=Observer(log))
        try:
            return [c.name for c in (await orch.health()).checks]
        finally:
            await orch.close()

    assert "store_created" in await open_once()
    assert "store_created" not in await open_once()
    assert len(log.getvalue().splitlines()) == 1

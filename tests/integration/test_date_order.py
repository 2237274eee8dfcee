"""`retrieval.date_order` decides how a numeric date in a query reads."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import SearchRequest
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import load_settings

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("order", "month", "day"), [("month-first", 11, 10), ("day-first", 10, 11)]
)
async def test_a_numeric_date_reads_in_the_configured_order(
    tmp_path: Path, order: str, month: int, day: int
) -> None:
    settings = load_settings(data_dir=tmp_path)
    settings.retrieval.date_order = order  # type: ignore[assignment]

    async def main() -> datetime | None:
        orch = Orchestrator(EmbeddedBackend(tmp_path / "m.db"), settings)
        try:
            found = await orch.search(SearchRequest(query="what broke on 11/10/2026"))
            trace = orch.trace(found.trace_id)
            assert trace is not None
            assert trace.plan is not None
            window = trace.plan.time_window
            return window.start if window else None
        finally:
            await orch.close()

    assert await main() == datetime(2026, month, day, tzinfo=UTC)

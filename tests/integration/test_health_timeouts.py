"""A health probe that runs past `retrieval.timeout_s` names the call that timed out (a bare
"TimeoutError" told nobody which call was slow)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import Status
from memory_orchestrator.service.store_calls import StoreCalls, store_checks
from memory_orchestrator.settings import Settings
from tests.faults import FaultyBackend

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("op", "check", "call"), [("search", "retrieval", "search"), ("health", "backend", "health")]
)
async def test_a_probe_past_the_time_limit_names_the_call(
    tmp_path: Path, op: str, check: str, call: str
) -> None:
    settings = Settings(data_dir=tmp_path)
    settings.retrieval.timeout_s = 0.2
    store = FaultyBackend(EmbeddedBackend(tmp_path / "store.db"), {op: "hang"})

    async def main() -> dict[str, str]:
        try:
            return {
                c.name: f"{c.status.value}: {c.detail}"
                for c in await store_checks(store, StoreCalls(settings))
            }
        finally:
            await store.inner.close()

    checks = await main()
    assert (
        checks[check]
        == f"{Status.ERROR.value}: TimeoutError: faulty-embedded {call} timed out after 0.2s"
    )

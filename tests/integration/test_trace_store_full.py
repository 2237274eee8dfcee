"""The trace store on a disk that fills up, for real: a small tmpfs mounted for the test
(root only; skipped elsewhere). Health names the cause while traces cannot be stored, and is
healthy again once space returns, without a restart."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import HealthCheck, NewMemory, SearchRequest, Status, WriteRequest
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.traces import TraceStore

pytestmark = pytest.mark.integration


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs, unmounted after the test."""
    where = tmp_path / "small"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace')}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path) -> Path:
    """A file taking every free byte of `disk`."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 4096)
    return filler


async def traces_check(o: Orchestrator) -> HealthCheck | None:
    report = await o.health()
    return next((c for c in report.checks if c.name == "traces"), None)


async def test_a_full_disk_is_named_by_health_and_health_recovers_when_space_returns(
    settings: Settings, small_disk: Path
) -> None:
    o = Orchestrator(
        EmbeddedBackend(settings.embedded_path()),
        settings,
        traces=TraceStore(small_disk / "traces.db"),
    )

    async def ask() -> None:
        await o.search(SearchRequest(query="when does the dock close?"))

    try:
        await o.write(WriteRequest(memory=NewMemory(content="The dock closes at 6.")))
        await ask()
        assert await traces_check(o) is None
        filler = fill(small_disk)
        await ask()
        failing = await traces_check(o)
        assert failing is not None
        assert failing.status is Status.DEGRADED
        assert "database or disk is full" in failing.detail, failing.detail
        assert "no transaction is active" not in failing.detail
        filler.unlink()  # space again: the next trace is stored, and health says so
        await ask()
        recovered = await traces_check(o)
        assert recovered is not None
        assert recovered.status is Status.OK, recovered.detail
        assert "stored again since" in recovered.detail
    finally:
        await o.close()

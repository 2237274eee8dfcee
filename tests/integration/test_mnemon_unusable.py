"""An unusable Mnemon binary, for real: the real build copied beside the test, then made
unexecutable (mode 0644) or removed while a service that has used it (health answered,
versions cached) keeps serving. Both are the installation's fault, not the write's: the
write is queued with the reason, health says what is wrong with the binary, and once it is
fixed the queue is delivered, once."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from memory_orchestrator.backends.mnemon import MnemonBackend
from memory_orchestrator.models import (
    NewMemory,
    Status,
    WriteAction,
    WriteReport,
    WriteRequest,
)
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import MnemonSettings, Settings
from memory_orchestrator.state.outbox import Outbox
from tests.mnemon_double import real_binary

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _chmod_off(binary: Path) -> Callable[[], None]:
    binary.chmod(0o644)
    return lambda: binary.chmod(0o755)


def _removed(binary: Path) -> Callable[[], None]:
    kept = binary.with_name("mnemon.kept")
    binary.rename(kept)

    def put_back() -> None:
        kept.rename(binary)

    return put_back


@pytest.mark.parametrize(
    ("make_unusable", "said"),
    [(_chmod_off, "not executable"), (_removed, "not found")],
    ids=["unexecutable", "missing"],
)
async def test_an_unusable_binary_queues_the_write_and_health_says_why(
    settings: Settings,
    tmp_path: Path,
    make_unusable: Callable[[Path], Callable[[], None]],
    said: str,
) -> None:
    real = real_binary()
    if real is None:
        pytest.skip("no real Mnemon build here")
    binary = tmp_path / "bin" / "mnemon"
    binary.parent.mkdir()
    shutil.copy(real, binary)
    binary.chmod(0o755)
    s = settings.model_copy(deep=True)
    s.retrieval.timeout_s = 20
    store = MnemonBackend(MnemonSettings(binary=binary, data_dir=tmp_path / "mnemon"))
    o = Orchestrator(store, s, outbox=Outbox(s.outbox_path()))

    async def write(content: str) -> WriteReport:
        return await o.write(WriteRequest(memory=NewMemory(content=content)))

    try:
        assert (await write("The Orion gate code is 4412.")).action is WriteAction.ADDED
        assert (await o.health()).status is not Status.ERROR  # used: answers are cached
        fix = make_unusable(binary)
        queued = await write("Nadia rotated the staging database password.")
        assert queued.action is WriteAction.QUEUED, queued.reason
        assert said in queued.reason, queued.reason
        health = await o.health()
        assert health.status is Status.ERROR
        binary_check = next(c for c in health.checks if c.name == "binary")
        assert binary_check.status is Status.ERROR
        assert said in binary_check.detail, binary_check.detail
        fix()
        assert (await o.flush_outbox()).depth == 0
        hits = await o.store_search("Nadia rotated the staging database password", 10)
        contents = [h.memory.content for h in hits]
        assert contents.count("Nadia rotated the staging database password.") == 1
    finally:
        await o.close()

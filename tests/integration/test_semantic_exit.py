"""A process that closes its orchestrator while the semantic index embeds a backlog exits
cleanly: ONNX Runtime aborts the process ("terminate called without an active exception",
exit code 134) when the interpreter exits with a worker inside the model. A real process, the
real embedded store and the real ONNX model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

SCRIPT = """
import sys, threading
from pathlib import Path

import anyio

from memory_orchestrator.derived import indexes
from memory_orchestrator.models import MemoryType, NewMemory, SearchRequest
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import load_settings

started = threading.Event()


class Watched:
    # the real model; tells the main thread when a background worker is inside it
    def __init__(self, inner):
        self.inner, self.name = inner, inner.name
        self.fingerprint = getattr(inner, "fingerprint", inner.name)
        self.min_similarity = getattr(inner, "min_similarity", 0.0)

    def embed(self, texts):
        if threading.current_thread().name == "semantic-index":
            started.set()
        return self.inner.embed(texts)


load = indexes.load_embedder
indexes.load_embedder = lambda *a, **k: Watched(load(*a, **k))


async def main():
    settings = load_settings(data_dir=Path(sys.argv[1]))
    settings.semantic.enabled = True
    settings.semantic.model = "minilm"
    settings.semantic.model_dir = Path(sys.argv[2])
    indexes.INDEX_WAIT_S = 0.0  # the query never waits for the backlog
    orch = Orchestrator.from_settings(settings)
    text = "Note {} about the quarterly budget review with the vendor team in Berlin"
    await orch.ingest([NewMemory(content=text.format(n), type=MemoryType.EPISODIC)
                       for n in range(1500)])
    await orch.search(SearchRequest(query="budget review"))  # queues the backlog
    assert await anyio.to_thread.run_sync(started.wait, 120)
    await orch.close()
    print("closed", flush=True)


anyio.run(main)
"""


def test_closing_during_a_backlog_finishes_the_batches_in_hand_and_exits_cleanly(
    tmp_path: Path, minilm_dir: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "data"), str(minilm_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.stdout.strip() == "closed", done.stderr[-2000:]
    assert done.returncode == 0, done.stderr[-2000:]
    assert "terminate called" not in done.stderr

"""The write path reading a swapped word with the real all-MiniLM-L6-v2 model: a synonym of a
deeper WordNet sense counts only when the model agrees; antonyms, co-hyponyms and other
relations are never taken for one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.derived.embedders import MiniLMEmbedder
from memory_orchestrator.models import NewMemory, WriteAction, WriteReport, WriteRequest
from memory_orchestrator.pipeline.paraphrase import Meaning
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.traces import TraceStore
from tests.factories import NOW

pytestmark = pytest.mark.integration

TOUR = "The harbour tour leaves from the north gate."


@pytest.fixture(scope="module")
def model(minilm_dir: Path) -> MiniLMEmbedder:
    return MiniLMEmbedder(minilm_dir)


@pytest.mark.parametrize(
    ("sentence", "was", "now", "same"),
    [
        ("The design review starts at 10:00.", "starts", "begins", True),  # common senses
        (TOUR, "leaves", "departs", True),  # a deeper sense the model confirms
        ("Anna visits her mother on Sundays.", "visits", "calls", False),  # the model refuses
        ("The API is hosted on the staging cluster.", "staging", "production", False),
        ("Kim maintains the payments SDK.", "maintains", "wrote", False),
    ],
)
def test_the_model_decides_only_what_the_lexicon_cannot(
    model: MiniLMEmbedder, sentence: str, was: str, now: str, same: bool
) -> None:
    assert Meaning(lambda: model)(sentence, was, now) is same


def test_without_the_model_only_the_common_senses_count() -> None:
    lexical = Meaning()
    assert lexical("The design review starts at 10:00.", "starts", "begins")
    assert not lexical(TOUR, "leaves", "departs")


def minilm(settings: Settings, model_dir: Path) -> Settings:
    settings = settings.model_copy(deep=True)
    settings.semantic.enabled = True
    settings.semantic.model = "minilm"
    settings.semantic.model_dir = model_dir
    return settings


@pytest.fixture
def orch(settings: Settings, minilm_dir: Path) -> Iterator[Orchestrator]:
    tuned = minilm(settings, minilm_dir)
    o = Orchestrator(
        EmbeddedBackend(tuned.embedded_path()),
        tuned,
        traces=TraceStore(tuned.trace_path()),
        clock=lambda: NOW,
    )
    yield o
    anyio.run(o.close)


def write(orch: Orchestrator, content: str) -> WriteReport:
    request = WriteRequest(memory=NewMemory(content=content, created_at=NOW))
    return anyio.run(lambda: orch.write(request))


def test_a_restatement_the_model_reads_is_skipped(orch: Orchestrator) -> None:
    first = write(orch, TOUR)
    again = write(orch, "The harbour tour departs from the north gate.")
    assert (again.action, again.duplicate_of) == (WriteAction.SKIPPED, first.id)
    assert "leaves ~ departs" in again.reason


def test_a_correction_is_never_read_as_a_synonym(orch: Orchestrator) -> None:
    first = write(orch, "The search API is hosted on the staging cluster.")
    fixed = write(orch, "The search API is hosted on the production cluster.")
    assert (fixed.action, fixed.supersedes) == (WriteAction.UPDATED, first.id)

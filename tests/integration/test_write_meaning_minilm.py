"""The write path reading a swapped word with the real all-MiniLM-L6-v2 model and wordllama's
static word vectors: a synonym of a deeper WordNet sense counts only when the model agrees; two
verbs WordNet does not tie, only when each is among the other's nearest; antonyms,
co-hyponyms and other relations are never taken for one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.derived.embedders import Embedder, MiniLMEmbedder, load_embedder
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


@pytest.fixture(scope="module")
def words() -> Embedder:
    return load_embedder("wordllama")


@pytest.mark.parametrize(
    ("sentence", "was", "now", "same"),
    [
        ("The frontend repository uses npm for dependencies.", "uses", "relies on", True),
        ("The business plan is priced at 12 dollars a seat.", "priced", "costs", True),
        ("Omar approves expenses for the sales team.", "approves", "submits", False),
        ("Priya fixed the login bug.", "fixed", "reported", False),
        ("Kim maintains the payments SDK.", "maintains", "wrote", False),
    ],
)
def test_two_verbs_wordnet_does_not_tie_count_when_near_in_the_word_vectors(
    model: MiniLMEmbedder, words: Embedder, sentence: str, was: str, now: str, same: bool
) -> None:
    assert Meaning(lambda: model, lambda: words)(sentence, was, now, verb=True) is same


def test_the_word_vectors_read_only_verbs_and_only_with_the_model(
    model: MiniLMEmbedder, words: Embedder
) -> None:
    sentence = "The frontend repository uses npm for dependencies."
    assert not Meaning(lambda: model)(sentence, "uses", "relies on", verb=True)
    assert not Meaning(lambda: None, lambda: words)(sentence, "uses", "relies on", verb=True)
    assert not Meaning(lambda: model, lambda: words)(sentence, "uses", "relies on", verb=False)


def test_without_the_model_only_the_common_senses_count() -> None:
    lexical = Meaning()
    assert lexical("The design review starts at 10:00.", "starts", "begins")
    assert not lexical(TOUR, "leaves", "departs")
    assert lexical(TOUR, "leaves", "departs", verb=True)  # a verb: within its first 4 senses


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


async def write(orch: Orchestrator, content: str) -> WriteReport:
    request = WriteRequest(memory=NewMemory(content=content, created_at=NOW))
    return await orch.write(request)


async def test_a_restatement_the_model_reads_is_skipped(orch: Orchestrator) -> None:
    first = await write(orch, TOUR)
    again = await write(orch, "The harbour tour departs from the north gate.")
    assert (again.action, again.duplicate_of) == (WriteAction.SKIPPED, first.id)
    assert "leaves ~ departs" in again.reason


async def test_a_correction_is_never_read_as_a_synonym(orch: Orchestrator) -> None:
    first = await write(orch, "The search API is hosted on the staging cluster.")
    fixed = await write(orch, "The search API is hosted on the production cluster.")
    assert (fixed.action, fixed.supersedes) == (WriteAction.UPDATED, first.id)


async def test_a_restated_verb_the_word_vectors_read_is_skipped_another_verb_added(
    orch: Orchestrator,
) -> None:
    first = await write(orch, "The frontend repository uses npm for dependencies.")
    again = await write(orch, "The frontend repository relies on npm for dependencies.")
    assert (again.action, again.duplicate_of) == (WriteAction.SKIPPED, first.id)
    assert "uses ~ relies on" in again.reason
    approves = await write(orch, "Omar approves expenses for the sales team.")
    submits = await write(orch, "Omar submits expenses for the sales team.")
    assert (submits.action, submits.supersedes) == (WriteAction.ADDED, None)
    assert [(e.type, e.target_id) for e in submits.links][:1] == [("related", approves.id)]

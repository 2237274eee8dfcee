"""Export, restore and `eval --store` over real stores: a LoCoMo conversation loaded as the
evaluation loads it, exported, restored into an empty store of the same kind, and every
question asked of both stores as they are: the same ranked ids, system by system."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from memory_orchestrator.errors import TransferError
from memory_orchestrator.eval import RunOptions, load_dataset, run_eval
from memory_orchestrator.eval.datasets import Dataset
from memory_orchestrator.eval.systems import EvalRun
from memory_orchestrator.models import NewMemory, WriteRequest
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings, load_settings
from memory_orchestrator.transfer.records import Export, read_export
from tests.pg_fixtures import new_schema

# a conversation loaded, exported, restored and asked twice: the bound catches a hang only
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
LOCOMO = REPO.parent / "shared" / "datasets" / "locomo" / "locomo-dev.json"
needs_locomo = pytest.mark.skipif(
    not LOCOMO.is_file(), reason=f"the LoCoMo development split is not at {LOCOMO}"
)
CASE = "conv-26"


async def load_case(settings: Settings, data: Dataset) -> None:
    """The case's memories into the store, as `orchestrator eval` ingests them."""
    case = next(c for c in data.cases if c.id == CASE)

    orchestrator = Orchestrator.from_settings(settings)
    try:
        await orchestrator.ingest([m.memory for m in case.memories])
        # and a correction through the write path: a supersede mark and its link
        for day in ("Tuesday", "Thursday"):
            text = f"Caroline's support group meets on {day} evenings."
            await orchestrator.write(WriteRequest(memory=NewMemory(content=text)))
    finally:
        await orchestrator.close()


async def export_of(settings: Settings) -> str:
    orchestrator = Orchestrator.from_settings(settings)
    try:
        out = io.StringIO()
        await orchestrator.transfer().export(out.write)
        return out.getvalue()
    finally:
        await orchestrator.close()


async def restore_into(settings: Settings, found: Export) -> Any:
    orchestrator = Orchestrator.from_settings(settings)
    try:
        return await orchestrator.transfer().restore(found)
    finally:
        await orchestrator.close()


async def answers(settings: Settings, data: Dataset) -> dict[tuple[str, str], tuple[str, ...]]:
    """(question, system) -> the ranked ids, every question of the case asked of the store."""
    options = RunOptions(
        backend=settings.backend, cases=(CASE,), store=True, measure_context=False, diagnose=False
    )
    run: EvalRun = await run_eval(data, settings, options)
    found = {}
    for case in run.cases:
        assert case.memories == 0  # nothing ingested
        for result in case.questions:
            for system, answer in result.answers.items():
                found[result.question.id, system] = answer.ids
    return found


def without_header(text: str) -> list[str]:
    return [line for line in text.splitlines() if '"kind":"header"' not in line]


async def round_trip(original: Settings, copy: Settings, *, marks: bool = True) -> None:
    data = load_dataset(LOCOMO)
    await load_case(original, data)
    exported = await export_of(original)
    found = read_export(exported.splitlines(), "export")
    assert found.header.lossless
    assert any(r.superseded_by for r in found.memories) is marks  # postgres keeps no marks
    assert any(r.supersedes for r in found.memories)
    assert any(e.type == "supersedes" for e in found.edges)
    report = await restore_into(copy, found)
    assert report.verbatim
    assert not report.ids
    assert report.memories == len(found.memories)
    assert report.edges == len(found.edges)
    assert without_header(await export_of(copy)) == without_header(exported)
    before, after = await answers(original, data), await answers(copy, data)
    questions = {q for q, _ in before}
    assert len(questions) > 100
    assert after == before
    with pytest.raises(TransferError, match="not empty"):
        await restore_into(copy, found)


@needs_locomo
async def test_an_embedded_store_restored_answers_every_question_alike(
    tmp_path: Path, minilm_dir: Path
) -> None:
    semantic = {"enabled": True, "model": "minilm", "model_dir": minilm_dir}
    original = load_settings(data_dir=tmp_path / "original", semantic=semantic)
    copy = load_settings(data_dir=tmp_path / "copy", semantic=semantic)
    await round_trip(original, copy)


@needs_locomo
async def test_a_postgres_store_restored_answers_every_question_alike(
    tmp_path: Path, pg_dsn: str, pg_server: Any
) -> None:
    _, other = new_schema(pg_server)
    original = load_settings(data_dir=tmp_path / "a", backend="postgres", postgres={"dsn": pg_dsn})
    copy = load_settings(data_dir=tmp_path / "b", backend="postgres", postgres={"dsn": other})
    await round_trip(original, copy, marks=False)

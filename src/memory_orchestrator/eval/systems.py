"""The systems compared, run on the same fresh store per case, in one run.

- `raw`: the store's own search, `backend.search(question, max_k)`, called directly;
- `orchestrated`: `Orchestrator.search` with graph expansion off;
- `expanded`: the same with graph expansion on.

Each case (a LoCoMo conversation, a hand-made case) gets a temporary data dir and a backend
made by the registry from settings that point into it, with traces kept in memory and the
clock fixed at the case's `as_of`, so a run depends on nothing but its inputs. Memories are
ingested in bulk when the store declares `bulk_write`, else one by one; a store that keeps no
timestamps gets the date written into the content (and the report says so). The questions are
asked once the semantic index has embedded every memory (an "embedding" phase in the progress
while it does), however long that takes on a busy machine.

Latency is the wall time of the one call that answers the question, per system, measured in
the same run. Context length: for `raw`, the characters of the returned contents joined by
newlines; for the orchestrated systems, the characters of the `context_block` that
`Orchestrator.context` packs for the same question and expansion setting at the default budget
(`packaging.max_items`, `packaging.max_chars`, as an agent's call gets) — a second, untimed
call. From that call too: block recall (the evidence among the items the block shows with at
least 80 % of their text) and tokens per call (the characters of the text content the MCP face
sends for it, `models.views.context_answer`, divided by 4).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from memory_orchestrator.errors import DatasetError
from memory_orchestrator.eval.datasets import Dataset, EvalCase, EvalQuestion
from memory_orchestrator.eval.records import (
    SYSTEMS,
    Answer,
    CaseResult,
    EvalRun,
    NoProgress,
    Progress,
    QuestionResult,
    RunOptions,
    SystemName,
    WriteCheckResult,
)
from memory_orchestrator.eval.runner import CaseRunner, quiet
from memory_orchestrator.postgres.scratch import scratch_store
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings

__all__ = [
    "SYSTEMS",
    "Answer",
    "CaseResult",
    "EvalRun",
    "NoProgress",
    "Progress",
    "QuestionResult",
    "RunOptions",
    "SystemName",
    "WriteCheckResult",
    "run_eval",
    "select_cases",
]


def select_cases(dataset: Dataset, which: int | tuple[str, ...] | None) -> list[EvalCase]:
    if which is None:
        return list(dataset.cases)
    if isinstance(which, int):
        if which < 1:
            raise DatasetError("select at least one case")
        return list(dataset.cases[:which])
    known = {c.id: c for c in dataset.cases}
    missing = [name for name in which if name not in known]
    if missing:
        raise DatasetError(f"unknown case(s) {', '.join(missing)}; known: {', '.join(known)}")
    return [known[name] for name in which]


async def run_eval(
    dataset: Dataset,
    settings: Settings,
    options: RunOptions,
    progress: Progress | None = None,
) -> EvalRun:
    """Run every selected case on its own fresh store; return the raw observations."""
    report = progress or NoProgress()
    cases = select_cases(dataset, options.cases)
    plan = [(case, _limited(case.questions, options.limit_questions)) for case in cases]
    loaded = 0 if options.store else sum(len(c.memories) for c in cases)
    counter = _Counter(report, loaded, sum(len(q) for _, q in plan))
    results = []
    if options.store:
        results = await _on_the_store(dataset, settings, options, plan, counter)
    for case, questions in [] if options.store else plan:
        with (
            tempfile.TemporaryDirectory(prefix="orchestrator-eval-") as folder,
            scratch_store(_case_settings(settings, options.backend, Path(folder))) as scoped,
        ):
            runner = CaseRunner(dataset, case, scoped, options, counter.add, counter.embedding)
            results.append(await runner.run(questions))
    return EvalRun(
        dataset=dataset,
        options=options,
        cases=results,
        dedup_threshold=settings.dedup.threshold,
    )


async def _on_the_store(
    dataset: Dataset,
    settings: Settings,
    options: RunOptions,
    plan: Sequence[tuple[EvalCase, list[EvalQuestion]]],
    counter: _Counter,
) -> list[CaseResult]:
    """Every case's questions asked of the store `settings` names, as it is loaded (one
    orchestrator, its clock at each case's `as_of`), once its derived indexes are settled."""
    now = [plan[0][0].as_of] if plan else []
    scoped = _systems_only(settings, options.backend)
    orchestrator = Orchestrator.from_settings(quiet(scoped), clock=lambda: now[0])
    results = []
    try:
        await orchestrator.settle(counter.embedding)
        for case, questions in plan:
            now[0] = case.as_of
            runner = CaseRunner(
                dataset, case, scoped, options, counter.add, counter.embedding, loaded=orchestrator
            )
            results.append(await runner.run(questions))
    finally:
        await orchestrator.close()
    return results


def _limited(questions: Sequence[EvalQuestion], limit: int | None) -> list[EvalQuestion]:
    return list(questions if limit is None else questions[:limit])


def _case_settings(settings: Settings, backend: str, folder: Path) -> Settings:
    """The caller's settings with every file in `folder`: a section's `path` is reset to its
    default under `data_dir` (the embedded store, traces) and a section's own `data_dir` (a
    store with a home of its own, such as Mnemon's) becomes `folder/<section>`, so no run ever
    touches a real store. Passthrough and automatic expansion are off, so that each system is
    exactly what it says."""
    update: dict[str, Any] = {"data_dir": folder}
    for name in type(settings).model_fields:
        section = getattr(settings, name)
        if not isinstance(section, BaseModel):
            continue
        fields = type(section).model_fields
        changes: dict[str, Any] = {}
        if "path" in fields:
            changes["path"] = None
        if "data_dir" in fields:
            changes["data_dir"] = folder / name
        if changes:
            update[name] = section.model_copy(update=changes)
    return _systems_only(settings.model_copy(update=update), backend)


def _systems_only(settings: Settings, backend: str) -> Settings:
    """Passthrough and automatic expansion off, so that each system is exactly what it
    says."""
    update: dict[str, Any] = {
        "backend": backend,
        "passthrough": False,
        "expansion": settings.expansion.model_copy(update={"enabled": False}),
    }
    return settings.model_copy(update=update)


class _Counter:
    def __init__(self, progress: Progress, memories: int, questions: int) -> None:
        self.progress = progress
        self.totals = {"ingest": memories, "queries": questions}
        self.done = dict.fromkeys(self.totals, 0)
        for phase, total in self.totals.items():
            progress.update(phase, 0, total)

    def add(self, phase: str, steps: int) -> None:
        self.done[phase] += steps
        self.progress.update(phase, self.done[phase], self.totals[phase])

    def embedding(self, done: int, total: int) -> None:
        """A case's wait for the semantic index (its own bar, shown only when there is one)."""
        self.progress.update("embedding", done, total)

"""Reproducible tuning of the ranking settings: a coordinate search on a dataset.

Each case's store is built once; every candidate setting is then measured on the same stores
with the same questions (one system: `orchestrated` or `expanded`), by the mean of
recall@k, nDCG@k and MRR over the headline categories. The search walks the parameters in
the given order, keeps a value only when it raises the objective, and repeats for `rounds`
passes: same inputs, same result. Used by `bench/tune_ranking.py`, which prints the winning
values as a TOML preset.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from memory_orchestrator.eval import metrics
from memory_orchestrator.eval.datasets import Dataset, EvalQuestion
from memory_orchestrator.eval.records import RunOptions
from memory_orchestrator.eval.runner import CaseRunner
from memory_orchestrator.eval.systems import _case_settings, select_cases
from memory_orchestrator.settings import Settings

__all__ = ["Step", "TuneResult", "Workbench", "coordinate_search", "with_value"]

Score = dict[str, float]


def with_value(settings: Settings, path: str, value: Any) -> Settings:
    """`settings` with the dotted `path` (e.g. `ranking.weights.recency`) set to `value`,
    validated as if it had been read from the config file."""
    data = settings.model_dump()
    node = data
    *parents, last = path.split(".")
    for name in parents:
        if not isinstance(node.get(name), dict):
            raise KeyError(f"unknown setting {path!r}")
        node = node[name]
    if last not in node:
        raise KeyError(f"unknown setting {path!r}")
    node[last] = value
    return type(settings).model_validate(data)


@dataclass
class Step:
    path: str
    value: Any
    score: Score
    kept: bool


@dataclass
class TuneResult:
    start: Score
    best: Score
    values: dict[str, Any]  # the values that won, by path
    settings: Settings | None = None  # the settings the search ended with
    steps: list[Step] = field(default_factory=list)

    def final(self, paths: Sequence[str]) -> dict[str, Any]:
        """The final value of each of `paths` (changed or not): the preset to store."""
        assert self.settings is not None
        out: dict[str, Any] = {}
        for path in paths:
            node: Any = self.settings
            for name in path.split("."):
                node = getattr(node, name)
            out[path] = node
        return out


class Workbench:
    """The dataset's stores, ingested once, and a way to score one setting on them."""

    def __init__(
        self,
        dataset: Dataset,
        backend: str,
        system: str,
        k: int,
        cases: int | None,
        ingest: Literal["protocol", "content"] = "protocol",
    ) -> None:
        self.dataset, self.backend, self.system, self.k = dataset, backend, system, k
        self.ingest = ingest
        self.cases = select_cases(dataset, cases)
        self.runners: list[tuple[CaseRunner, list[EvalQuestion]]] = []
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> Workbench:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for runner, _ in self.runners:
            await runner.orchestrator.close()
        await self._stack.aclose()

    async def prepare(self, settings: Settings) -> None:
        headline = set(self.dataset.headline_categories)
        options = RunOptions(
            backend=self.backend,
            k=(self.k,),
            measure_context=False,
            diagnose=False,
            ingest=self.ingest,
        )
        for case in self.cases:
            folder = self._stack.enter_context(tempfile.TemporaryDirectory(prefix="tune-"))
            case_settings = _case_settings(settings, self.backend, Path(folder))
            runner = CaseRunner(self.dataset, case, case_settings, options, lambda *_: None)
            await runner._ingest()
            asked = [
                q
                for q in case.questions
                if q.skip_reason is None and (not headline or q.category in headline)
            ]
            self.runners.append((runner, asked))

    async def score(self, settings: Settings, cases: Collection[str] | None = None) -> Score:
        """The objective (and its parts) of `settings` over the questions of `cases` (by id;
        default all), pooled over questions."""
        recall, ndcg, mrr = [], [], []
        for runner, questions in self.runners:
            if cases is not None and runner.case.id not in cases:
                continue
            case_settings = runner.settings
            runner.orchestrator.reconfigure(
                _case_settings(settings, self.backend, case_settings.data_dir)
            )
            for q in questions:
                answer = await runner._orchestrated(
                    q.text, q.as_of or runner.case.as_of, expand=self.system == "expanded"
                )
                recall.append(metrics.recall_at(answer.ranking, q.evidence, self.k))
                ndcg.append(metrics.ndcg_at(answer.ranking, q.evidence, self.k))
                mrr.append(metrics.mrr(answer.ranking, q.evidence))
        r, n, m = metrics.mean(recall), metrics.mean(ndcg), metrics.mean(mrr)
        return {
            "objective": round((r + n + m) / 3, 4),
            f"recall@{self.k}": round(r, 4),
            f"ndcg@{self.k}": round(n, 4),
            "mrr": round(m, 4),
        }


async def coordinate_search(
    bench: Workbench,
    settings: Settings,
    grid: Mapping[str, Sequence[Any]],
    rounds: int = 1,
    report: Callable[[Step], None] = lambda _: None,
    cases: Collection[str] | None = None,
) -> TuneResult:
    """Walk `grid` one parameter at a time, keeping a value only when it wins (on `cases`,
    default all)."""
    current = settings
    best = await bench.score(current, cases)
    result = TuneResult(start=best, best=best, values={})
    for _ in range(rounds):
        improved = False
        for path, values in grid.items():
            for value in values:
                trial = with_value(current, path, value)
                if trial == current:
                    continue
                score = await bench.score(trial, cases)
                kept = score["objective"] > best["objective"]
                step = Step(path, value, score, kept)
                result.steps.append(step)
                report(step)
                if kept:
                    current, best, improved = trial, score, True
                    result.values[path] = value
        if not improved:
            break
    result.best, result.settings = best, current
    return result

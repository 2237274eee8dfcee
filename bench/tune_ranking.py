"""Tune the ranking settings on a dataset by coordinate search (reproducible: same inputs,
same result) and print the winners as a TOML preset.

    .venv/bin/python bench/tune_ranking.py \
        --dataset ../shared/datasets/locomo/locomo-dev.json --system expanded

Each case's store is built once; each trial re-runs every headline question on it. The
objective is the mean of recall@k, nDCG@k and MRR. `--grid path=v1,v2,...` (repeatable)
replaces the default grid. The search starts from the configured settings (config file,
`ORCHESTRATOR_*` variables), so a lever that needs another one on can be walked from there;
the output lists the final value of every path of the grid. Tune on the development split
only: the held-out half checks it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from memory_orchestrator.eval.datasets import load_dataset
from memory_orchestrator.eval.tune import Step, Workbench, coordinate_search
from memory_orchestrator.settings import Settings

DEFAULT_GRID: dict[str, list[Any]] = {
    "ranking.context_seeds": [10, 5, 20],
    "ranking.neighbor_share": [0.9, 0.7, 0.8, 1.0],
    "ranking.context_window": [0.0, 0.2, 0.4],
    "ranking.weights.graph": [0.1, 0.0, 0.05],
    "ranking.rrf_k": [60, 20, 10, 5],
    "ranking.store_score_share": [0.0, 0.5, 1.0],
    "ranking.lexical_share": [0.6, 0.4, 0.5, 0.7, 0.8],
    "ranking.weights.recency": [0.1, 0.0, 0.05],
    "ranking.weights.cross_reference": [0.15, 0.05, 0.1, 0.2],
    "ranking.when_time_boost": [0.0, 0.1, 0.2],
    "retrieval.candidate_k": [40, 60],
}


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _grid(specs: list[str]) -> dict[str, list[Any]]:
    grid: dict[str, list[Any]] = {}
    for spec in specs:
        path, _, values = spec.partition("=")
        grid[path.strip()] = [_value(v.strip()) for v in values.split(",") if v.strip()]
    return grid


def _toml(values: dict[str, Any]) -> str:
    lines = []
    for path, value in sorted(values.items()):
        lines.append(f"{path} = {json.dumps(value)}")
    return "\n".join(lines)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--backend", default="embedded")
    parser.add_argument("--system", choices=("orchestrated", "expanded"), default="expanded")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cases", type=int, default=None, help="only the first N cases")
    parser.add_argument("--grid", action="append", default=[], help="path=v1,v2,...")
    args = parser.parse_args()
    grid = _grid(args.grid) if args.grid else DEFAULT_GRID
    settings = Settings()
    dataset = load_dataset(args.dataset)

    def report(step: Step) -> None:
        mark = "kept" if step.kept else "    "
        print(f"{mark} {step.path} = {step.value!r}: {step.score}", file=sys.stderr, flush=True)

    async with Workbench(dataset, args.backend, args.system, args.k, args.cases) as bench:
        await bench.prepare(settings)
        result = await coordinate_search(bench, settings, grid, args.rounds, report)
    print(f"# start {result.start}", file=sys.stderr)
    print(f"# best  {result.best}", file=sys.stderr)
    print(_toml(result.final(list(grid))))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))

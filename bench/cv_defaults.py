"""Choose default values by leave-one-conversation-out cross-validation, and say per lever
what it is worth on conversations it was not tuned on.

    .venv/bin/python bench/cv_defaults.py \\
        --dataset ../shared/datasets/locomo/locomo-dev.json --out bench/cv-defaults.json

Two modes. `--mode folds`: a full coordinate search per fold (five searches: slow).
`--mode shared` (default, about five times cheaper): one coordinate walk in which every
candidate value is scored once per case; at each lever every fold picks the value that is best
on its own training cases, the held-out case scores the fold's pick, and the walk moves on
with the median (or majority) of the folds' picks, so no step is ever fitted to all cases at
once. Per lever it reports the held-out gain of the folds' picks over the value before the
step and, at the end, the held-out loss of switching each lever off.

Every case (conversation) is ingested once. For each fold, a coordinate search
(`eval/tune.py`, deterministic) tunes the grid on the other cases, starting from the
configured settings; the tuned values are then scored on the held-out case, and so is the
start. Per lever, the held-out objective with the lever switched off (its neutral value,
`OFF`) shows what it adds on unseen data: the mean and spread over folds. The proposed
default of a lever is the median (numbers) or the majority (switches) of the folds' choices,
never a value fitted to all cases at once. The objective is the mean of recall@k, nDCG@k and
MRR of the `--system` over the headline categories.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from memory_orchestrator.eval.datasets import load_dataset
from memory_orchestrator.eval.tune import Step, Workbench, coordinate_search, with_value
from memory_orchestrator.settings import Settings

GRID: dict[str, list[Any]] = {
    "ranking.local_list_weight": [2.0, 3.0, 4.0],
    "local_index.candidates": [20, 30, 40],
    "ranking.local_context_weight": [0.5, 1.0],
    "ranking.bm25_k1": [0.9, 1.2],
    "ranking.bm25_b": [0.5, 0.75],
    "ranking.local_share": [0.2, 0.4, 0.6],
    "ranking.lexical_share": [0.6, 0.7, 0.8],
    "ranking.context_seeds": [3, 4, 5],
    "ranking.neighbor_share": [0.6, 0.8, 0.9],
    "ranking.context_window": [0.4, 0.6],
    "ranking.rrf_k": [10, 30, 60],
    "ranking.weights.cross_reference": [0.15, 0.3],
    "ranking.weights.recency": [0.05, 0.1],
    "ranking.when_time_boost": [0.1, 0.2],
}

# What "off" means for each lever whose worth is reported (the held-out ablation).
OFF: dict[str, Any] = {
    "local_index.enabled": False,
    "ranking.local_share": 0.0,
    "ranking.context_seeds": 0,
    "ranking.neighbor_share": 0.0,
    "ranking.context_window": 0.0,
    "ranking.weights.cross_reference": 0.0,
    "ranking.when_time_boost": 0.0,
    "ranking.semantic_share": 0.0,
    "ranking.xref_gate": 0.0,
    "ranking.name_trust_power": 0.0,
    "ranking.context_gap_s": 0.0,
    "semantic.enabled": False,
    "write.extract_entities": False,
}


def _value_of(settings: Settings, path: str) -> Any:
    node: Any = settings
    for name in path.split("."):
        node = getattr(node, name)
    return node


def _proposed(choices: list[Any]) -> Any:
    if all(isinstance(c, bool) for c in choices):
        return max(set(choices), key=choices.count)
    if all(isinstance(c, int | float) for c in choices):
        middle = statistics.median_low(sorted(choices))
        return middle
    return max(set(map(str, choices)), key=[str(c) for c in choices].count)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--backend", default="embedded")
    parser.add_argument("--system", choices=("orchestrated", "expanded"), default="orchestrated")
    parser.add_argument("--ingest", choices=("protocol", "content"), default="protocol")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--grid", type=Path, default=None, help="a JSON {path: [values]}")
    parser.add_argument("--off", action="append", default=[], help="only these levers' worth")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--mode", choices=("shared", "folds"), default="shared")
    args = parser.parse_args()
    grid: dict[str, list[Any]] = json.loads(args.grid.read_text()) if args.grid else GRID
    off = {p: OFF[p] for p in args.off} if args.off else OFF
    if args.mode == "shared":
        return await shared_walk(args, grid, off)
    start = Settings()
    dataset = load_dataset(args.dataset)
    folds: list[dict[str, Any]] = []

    def report(step: Step) -> None:
        mark = "kept" if step.kept else "    "
        print(f"  {mark} {step.path} = {step.value!r}: {step.score}", file=sys.stderr, flush=True)

    async with Workbench(
        dataset, args.backend, args.system, args.k, None, ingest=args.ingest
    ) as bench:
        await bench.prepare(start)
        ids = [case.id for case in bench.cases]
        for held in ids:
            train = [i for i in ids if i != held]
            print(f"fold: held out {held}", file=sys.stderr, flush=True)
            tuned = await coordinate_search(bench, start, grid, args.rounds, report, train)
            assert tuned.settings is not None
            fold: dict[str, Any] = {
                "held_out": held,
                "train": tuned.best,
                "start_held_out": await bench.score(start, [held]),
                "tuned_held_out": await bench.score(tuned.settings, [held]),
                "values": {p: _value_of(tuned.settings, p) for p in grid},
                "off": {},
            }
            for path, value in off.items():
                if _value_of(tuned.settings, path) == value:
                    continue
                score = await bench.score(with_value(tuned.settings, path, value), [held])
                fold["off"][path] = score
            print(json.dumps(fold), file=sys.stderr, flush=True)
            folds.append(fold)
    summary = _summary(folds, grid, off)
    document = {
        "dataset": str(args.dataset),
        "system": args.system,
        "ingest": args.ingest,
        "folds": folds,
        "summary": summary,
    }
    if args.out:
        args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


def _summary(
    folds: list[dict[str, Any]], grid: dict[str, Any], off: dict[str, Any]
) -> dict[str, Any]:
    spread = _spread
    keys = [k for k in folds[0]["tuned_held_out"] if k != "objective"] + ["objective"]
    out: dict[str, Any] = {
        "start_held_out": {k: spread([f["start_held_out"][k] for f in folds]) for k in keys},
        "tuned_held_out": {k: spread([f["tuned_held_out"][k] for f in folds]) for k in keys},
        "proposed": {p: _proposed([f["values"][p] for f in folds]) for p in grid},
        "choices": {p: [f["values"][p] for f in folds] for p in grid},
        "lever_worth": {},
    }
    for path in off:
        gains = [
            f["tuned_held_out"]["objective"] - f["off"][path]["objective"]
            for f in folds
            if path in f["off"]
        ]
        if gains:
            out["lever_worth"][path] = spread(gains)
    return out


# ---------------------------------------------------------------- the shared walk

PerCase = dict[str, dict[str, float]]  # case id -> its score (objective and parts)


async def _per_case(bench: Workbench, settings: Settings, ids: list[str]) -> PerCase:
    return {case: await bench.score(settings, [case]) for case in ids}


def _pooled(scores: PerCase, weights: dict[str, int], cases: list[str]) -> float:
    """The objective pooled over the questions of `cases` (as `Workbench.score` pools)."""
    total = sum(weights[c] for c in cases)
    return sum(scores[c]["objective"] * weights[c] for c in cases) / total


async def shared_walk(
    args: argparse.Namespace, grid: dict[str, list[Any]], off: dict[str, Any]
) -> int:
    dataset = load_dataset(args.dataset)
    async with Workbench(
        dataset, args.backend, args.system, args.k, None, ingest=args.ingest
    ) as bench:
        current = Settings()
        await bench.prepare(current)
        ids = [case.id for case in bench.cases]
        weights = {runner.case.id: len(asked) for runner, asked in bench.runners}
        folds = {held: [i for i in ids if i != held] for held in ids}
        now = await _per_case(bench, current, ids)
        start = now
        levers: dict[str, Any] = {}
        for path, values in grid.items():
            before = _value_of(current, path)
            tried: dict[str, PerCase] = {json.dumps(before): now}
            for value in values:
                key = json.dumps(value)
                if key not in tried:
                    tried[key] = await _per_case(bench, with_value(current, path, value), ids)
            picks = {
                held: _best(tried, weights, train, json.dumps(before))
                for held, train in folds.items()
            }
            gains = [tried[picks[h]][h]["objective"] - now[h]["objective"] for h in ids]
            chosen = _proposed([json.loads(picks[h]) for h in ids])
            levers[path] = {
                "before": before,
                "picks": [json.loads(picks[h]) for h in ids],
                "chosen": chosen,
                "held_out_gain": _spread(gains),
                "per_value_pooled": {
                    k: round(_pooled(v, weights, ids), 4) for k, v in tried.items()
                },
            }
            print(
                f"{path}: picks {levers[path]['picks']} -> {chosen!r}; held-out gain "
                f"{levers[path]['held_out_gain']}",
                file=sys.stderr,
                flush=True,
            )
            current = with_value(current, path, chosen)
            now = (
                tried[json.dumps(chosen)]
                if json.dumps(chosen) in tried
                else await _per_case(bench, current, ids)
            )
        worth: dict[str, Any] = {}
        for path, value in off.items():
            if _value_of(current, path) == value:
                continue
            switched = await _per_case(bench, with_value(current, path, value), ids)
            worth[path] = _spread([now[h]["objective"] - switched[h]["objective"] for h in ids])
            print(f"off {path}: {worth[path]}", file=sys.stderr, flush=True)
    document = {
        "dataset": str(args.dataset),
        "system": args.system,
        "ingest": args.ingest,
        "mode": "shared",
        "cases": weights,
        "start": start,
        "final": now,
        "final_pooled": round(_pooled(now, weights, ids), 4),
        "start_pooled": round(_pooled(start, weights, ids), 4),
        "levers": levers,
        "lever_worth_off": worth,
        "values": {p: _value_of(current, p) for p in grid},
    }
    if args.out:
        args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(json.dumps({"values": document["values"], "worth": worth}, indent=1))
    return 0


def _best(tried: dict[str, PerCase], weights: dict[str, int], train: list[str], keep: str) -> str:
    """The value (as JSON) best on `train`; on a tie, the value the walk already has."""
    return max(tried, key=lambda k: (_pooled(tried[k], weights, train), k == keep))


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "mean": round(statistics.mean(values), 4),
        "sd": round(statistics.pstdev(values), 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
    }


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))

"""Choose the default context budget (`packaging.max_chars`) by cross-validation on LoCoMo.

For each budget of the grid, the LoCoMo development split is evaluated (the `orchestrated`
system, the embedded store, everything else at its default) and, for every question, the
block recall (the evidence among the items the packed `memory_context` block shows with at
least 80 % of their text) and the tokens of the tool's text content (characters / 4) are kept.

The rule (issue 48): leaving one conversation out at a time, the budget chosen on the other
conversations is the smallest whose block recall (mean over their questions) is within
`--tolerance` (0.01) of the best budget's; it is then scored on the conversation left out. The
default is the rule applied to all conversations; the folds show how stable that choice is.

    .venv/bin/python bench/cv_budget.py [--budgets 1000,1500,...] [--dataset PATH]
        [--json OUT] [--tolerance 0.01]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from memory_orchestrator.eval import RunOptions, load_dataset, run_eval
from memory_orchestrator.eval.metrics import block_recall
from memory_orchestrator.settings import load_settings

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "locomo" / "locomo-dev.json"
BUDGETS = (800, 1000, 1200, 1500, 1800, 2000, 2500, 3000, 3500, 4000, 5000)

Rows = dict[str, list[tuple[float, float]]]  # conversation -> (block recall, tokens) per question


async def measure(dataset: Path, budget: int) -> Rows:
    data = load_dataset(dataset)
    settings = load_settings()
    settings = settings.model_copy(
        update={"packaging": settings.packaging.model_copy(update={"max_chars": budget})}
    )
    options = RunOptions(backend="embedded", k=(10,), systems=("orchestrated",), diagnose=False)
    run = await run_eval(data, settings, options)
    headline = set(data.headline_categories)
    rows: Rows = {}
    for case in run.cases:
        for result in case.questions:
            if result.question.category not in headline:
                continue
            answer = result.answers["orchestrated"]
            assert answer.shown is not None
            recall = block_recall(answer.shown, result.question.evidence)
            rows.setdefault(case.id, []).append((recall, answer.text_chars / 4))
    return rows


def mean_of(rows: Rows, cases: Sequence[str], which: int) -> float:
    return statistics.fmean(row[which] for case in cases for row in rows[case])


def choose(by_budget: dict[int, Rows], cases: Sequence[str], tolerance: float) -> int:
    recall = {b: mean_of(rows, cases, 0) for b, rows in by_budget.items()}
    best = max(recall.values())
    return min(b for b, r in recall.items() if r >= best - tolerance)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument("--dataset", type=Path, default=LOCOMO)
    parser.add_argument("--tolerance", type=float, default=0.01)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    budgets = [int(b) for b in args.budgets.split(",")]
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    by_budget: dict[int, Rows] = {}
    for budget in budgets:
        by_budget[budget] = anyio.run(measure, args.dataset, budget)
        print(f"  max_chars {budget}: measured", file=sys.stderr)
    cases = sorted(next(iter(by_budget.values())))
    table = {
        b: {
            "block_recall": round(mean_of(rows, cases, 0), 4),
            "tokens_per_call": round(mean_of(rows, cases, 1), 1),
        }
        for b, rows in by_budget.items()
    }
    folds = []
    for out in cases:
        kept = [c for c in cases if c != out]
        chosen = choose(by_budget, kept, args.tolerance)
        folds.append(
            {
                "held_out": out,
                "chosen": chosen,
                "held_out_block_recall": round(mean_of(by_budget[chosen], [out], 0), 4),
                "held_out_tokens": round(mean_of(by_budget[chosen], [out], 1), 1),
                "held_out_best_block_recall": round(
                    max(mean_of(rows, [out], 0) for rows in by_budget.values()), 4
                ),
            }
        )
    report: dict[str, Any] = {
        "started": started,
        "ended": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "dataset": args.dataset.name,
        "tolerance": args.tolerance,
        "budgets": table,
        "folds": folds,
        "chosen_on_all": choose(by_budget, cases, args.tolerance),
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

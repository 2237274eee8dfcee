"""Screen ranking-profile variants: each variant's quality figures minus the defaults'.

    .venv/bin/python bench/screen_profile.py --dataset ../shared/datasets/locomo/locomo-dev.json \\
        --variants variants.json

`variants.json` is `{"name": {"ranking.path": value, ...}, ...}`. Every case is ingested once
(`eval/tune.py`'s Workbench); each variant is then asked every headline question, as
`orchestrated` and as `expanded`, and recall@1/5/10, nDCG@10 and MRR are compared with the
defaults'. A line says OK when no figure moved by more than `--gate` (the quality gate of
issue 52), BAD otherwise. Used to choose which profile fields could go
(bench/results/2026-11-29-profile-cut.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from memory_orchestrator.eval import metrics
from memory_orchestrator.eval.datasets import load_dataset
from memory_orchestrator.eval.systems import _case_settings
from memory_orchestrator.eval.tune import Workbench, with_value
from memory_orchestrator.settings import Settings

KS = (1, 5, 10)


async def figures(bench: Workbench, settings: Settings) -> dict[str, float]:
    out: dict[str, float] = {}
    for system in ("orchestrated", "expanded"):
        recall: dict[int, list[float]] = {k: [] for k in KS}
        ndcg, mrr = [], []
        for runner, questions in bench.runners:
            case = _case_settings(settings, bench.backend, runner.settings.data_dir)
            runner.orchestrator.reconfigure(case)
            for q in questions:
                answer = await runner._orchestrated(
                    q.text, q.as_of or runner.case.as_of, expand=system == "expanded"
                )
                for k in KS:
                    recall[k].append(metrics.recall_at(answer.ranking, q.evidence, k))
                ndcg.append(metrics.ndcg_at(answer.ranking, q.evidence, 10))
                mrr.append(metrics.mrr(answer.ranking, q.evidence))
        for k in KS:
            out[f"{system}.recall@{k}"] = metrics.mean(recall[k])
        out[f"{system}.ndcg@10"] = metrics.mean(ndcg)
        out[f"{system}.mrr"] = metrics.mean(mrr)
    return out


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--backend", default="embedded")
    parser.add_argument("--variants", type=Path, required=True)
    parser.add_argument("--gate", type=float, default=0.002)
    args = parser.parse_args()
    variants: dict[str, dict[str, Any]] = json.loads(args.variants.read_text())
    dataset = load_dataset(args.dataset)
    async with Workbench(dataset, args.backend, "orchestrated", 10, None) as bench:
        start = Settings()
        await bench.prepare(start)
        base = await figures(bench, start)
        print("defaults", json.dumps({k: round(v, 4) for k, v in base.items()}), flush=True)
        for name, changes in variants.items():
            settings = start
            for path, value in changes.items():
                settings = with_value(settings, path, value)
            got = await figures(bench, settings)
            delta = {k: round(got[k] - base[k], 4) for k in base}
            worst = max(abs(d) for d in delta.values())
            mark = "OK " if worst <= args.gate else "BAD"
            print(mark, name, f"worst {worst:.4f}", json.dumps(delta), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))

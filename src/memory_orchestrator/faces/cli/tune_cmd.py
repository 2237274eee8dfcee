"""`orchestrator tune`: learn re-ranking weights per question type on a dataset, say what they
are worth by cross-validation, and save them for `ranking.learned_weights` (off by default)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import anyio
import typer
from rich.console import Console
from rich.table import Table

from memory_orchestrator.eval import controller
from memory_orchestrator.eval.datasets import Dataset, load_dataset
from memory_orchestrator.eval.tune import Workbench
from memory_orchestrator.faces.cli import render
from memory_orchestrator.faces.cli.common import USAGE_ERROR, fail, guarded
from memory_orchestrator.service import store_names
from memory_orchestrator.settings import Settings, load_settings
from memory_orchestrator.state.learned import FEATURES, LearnedWeights


def tune(
    ctx: typer.Context,
    dataset: Annotated[
        str, typer.Option("--dataset", "-d", help="A LoCoMo .json or a hand-made .jsonl set.")
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Where to write the learned weights (JSON).")
    ] = Path("learned-weights.json"),
    backend: Annotated[
        str | None, typer.Option("--backend", "-b", help="Store to run on (see `backends`).")
    ] = None,
    k: Annotated[int, typer.Option("--k", min=1, max=100, help="Cut-off of the objective.")] = 10,
) -> None:
    """Learn the formula's weights per question type from a dataset's answers; report their
    worth by leave-one-case-out cross-validation; write them for `ranking.learned_weights`."""
    root = ctx.find_root().obj
    config = getattr(root, "config", None)
    settings = guarded(lambda: load_settings(config, backend=backend))
    if settings.backend not in store_names():
        fail(
            f"unknown backend {settings.backend!r}; known: {', '.join(store_names())}", USAGE_ERROR
        )
    data = guarded(lambda: load_dataset(dataset))
    learned = guarded(lambda: anyio.run(_learn, data, settings, k))
    learned.dataset = dataset
    guarded(lambda: learned.save(out))
    _print(learned)
    render.note(f"wrote {out}; use it with ranking.learned_weights = {str(out)!r}")


async def _learn(data: Dataset, settings: Settings, k: int) -> LearnedWeights:
    async with Workbench(data, settings.backend, "orchestrated", k, None) as bench:
        render.note(f"ingesting {len(bench.cases)} case(s) ...")
        await bench.prepare(settings)
        pools = await controller.collect(bench, settings)
    cases = len({p.case for p in pools})
    if cases < 2:
        render.note("one case only: no cross-validation (it leaves one case out)")
    render.note(f"{len(pools)} questions in {cases} case(s); cross-validating ...")
    cv = controller.cross_validate(pools, settings.ranking.weights, k)
    weights = controller.fit(pools, settings.ranking.weights, k)
    return LearnedWeights(weights=weights, k=k, cross_validation=cv)


_SHORT = {"relevance": "rel", "recency": "rec", "type_match": "type", "cross_reference": "xref"}


def _print(learned: LearnedWeights) -> None:
    console = Console(highlight=False)
    table = Table(title="Learned weights per question type")
    table.add_column("questions")
    for name in FEATURES:
        table.add_column(_SHORT.get(name, name), justify="right")
    for qtype, values in learned.weights.items():
        table.add_row(qtype, *(f"{values[f]:.2f}" for f in FEATURES))
    console.print(table)
    cv = learned.cross_validation
    folds = Table(title="Leave one case out: held-out objective (mean of R@k, nDCG@k, MRR)")
    for column in ("held out", "configured", "learned"):
        folds.add_column(column, justify="right")
    for fold in cv.get("folds", []):
        folds.add_row(
            fold["held_out"],
            f"{fold['configured']['objective']:.4f}",
            f"{fold['learned']['objective']:.4f}",
        )
    console.print(folds)
    console.print(f"held-out gain: {cv.get('gain_mean', 0):+.4f} (sd {cv.get('gain_sd', 0):.4f})")

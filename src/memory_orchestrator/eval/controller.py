"""The adaptive controller (the brief's phase 3): re-ranking weights learned per question type.

The reranker already scores every candidate with a transparent formula over seven signals
(`ScoreBreakdown`: relevance, recency, graph, type match, cross-reference, and the duplicate
and noise penalties). What the controller learns is the weight of each signal, separately for
each kind of question ("when" questions may want recency and the time window more than "what"
questions), from questions whose answers are known:

1. `collect`: every question of a dataset is asked once; its trace keeps every candidate's
   breakdown (the pool), and the dataset says which candidates answer it.
2. `fit`: a deterministic coordinate ascent over a grid of weights, re-ranking the fixed pools
   (no store calls), maximising the mean of recall@k, nDCG@k and MRR. Relevance keeps its
   weight (a ranking does not change when every weight is scaled), every other weight moves.
   A question type with fewer than `MIN_QUESTIONS` questions gets the weights fitted on all
   questions (`default`).
3. `cross_validate`: leave one case (conversation) out: fit on the others, score the held-out
   case with the fitted weights and with the configured ones. That estimate, not the fit on
   everything, says what the controller is worth.

The learned weights are saved as JSON (`LearnedWeights`) and used only when the config names
the file (`ranking.learned_weights`); `memory_explain` shows which weights ranked a request.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory_orchestrator.eval import metrics
from memory_orchestrator.eval.systems import _case_settings
from memory_orchestrator.eval.tune import Workbench
from memory_orchestrator.models import ScoreBreakdown
from memory_orchestrator.settings import Settings, Weights
from memory_orchestrator.state.learned import DEFAULT, FEATURES

__all__ = ["Pool", "collect", "cross_validate", "fit", "score_pools"]
_SIGN = {"duplicate": -1.0, "noise": -1.0}
GRID: dict[str, tuple[float, ...]] = {
    "recency": (0.0, 0.05, 0.1, 0.2, 0.3),
    "graph": (0.0, 0.05, 0.1, 0.2),
    "type_match": (0.0, 0.05, 0.1, 0.2),
    "cross_reference": (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4),
    "duplicate": (0.0, 0.2, 0.4, 0.6),
    "noise": (0.0, 0.15, 0.3, 0.5),
}
MIN_QUESTIONS = 40


@dataclass(frozen=True)
class Pool:
    """One question: its type, its case, and each candidate's signals and dataset keys, in
    the order the pipeline ranked them (the tie-break)."""

    case: str
    question_type: str
    signals: tuple[tuple[float, ...], ...]  # one row per candidate, in FEATURES order
    keys: tuple[frozenset[str], ...]
    evidence: frozenset[str]


def _total(row: Sequence[float], weights: Mapping[str, float]) -> float:
    return sum(
        _SIGN.get(f, 1.0) * weights[f] * value for f, value in zip(FEATURES, row, strict=True)
    )


def score_pools(
    pools: Sequence[Pool], weights: Mapping[str, Mapping[str, float]], k: int
) -> dict[str, float]:
    """Mean recall@k, nDCG@k and MRR (and their mean, `objective`) of `pools` re-ranked with
    the weights of each pool's question type (else `default`)."""
    recall, ndcg, mrr = [], [], []
    for pool in pools:
        w = weights.get(pool.question_type) or weights[DEFAULT]
        order = sorted(range(len(pool.keys)), key=lambda i: (-_total(pool.signals[i], w), i))
        ranking = [pool.keys[i] for i in order]
        recall.append(metrics.recall_at(ranking, pool.evidence, k))
        ndcg.append(metrics.ndcg_at(ranking, pool.evidence, k))
        mrr.append(metrics.mrr(ranking, pool.evidence))
    r, n, m = metrics.mean(recall), metrics.mean(ndcg), metrics.mean(mrr)
    return {"objective": (r + n + m) / 3, f"recall@{k}": r, f"ndcg@{k}": n, "mrr": m}


def _ascend(pools: Sequence[Pool], start: Mapping[str, float], k: int) -> dict[str, float]:
    best = dict(start)
    best_score = score_pools(pools, {DEFAULT: best}, k)["objective"]
    for _ in range(3):
        moved = False
        for name, values in GRID.items():
            for value in values:
                if value == best[name]:
                    continue
                trial = {**best, name: value}
                score = score_pools(pools, {DEFAULT: trial}, k)["objective"]
                if score > best_score + 1e-9:
                    best, best_score, moved = trial, score, True
        if not moved:
            break
    return best


def fit(pools: Sequence[Pool], start: Weights, k: int) -> dict[str, dict[str, float]]:
    """Weights per question type (and `default`, fitted on every question), from `start`."""
    base = {f: float(getattr(start, f)) for f in FEATURES}
    learned = {DEFAULT: _ascend(pools, base, k)}
    for qtype in sorted({p.question_type for p in pools}):
        own = [p for p in pools if p.question_type == qtype]
        if len(own) >= MIN_QUESTIONS:
            learned[qtype] = _ascend(own, learned[DEFAULT], k)
    return learned


def cross_validate(pools: Sequence[Pool], start: Weights, k: int) -> dict[str, Any]:
    """Leave one case out: per case, the held-out score with weights fitted on the others,
    and with `start`; their means and spreads."""
    configured = {DEFAULT: {f: float(getattr(start, f)) for f in FEATURES}}
    folds: list[dict[str, Any]] = []
    cases = sorted({p.case for p in pools})
    for case in cases if len(cases) > 1 else []:
        train = [p for p in pools if p.case != case]
        held = [p for p in pools if p.case == case]
        learned = fit(train, start, k)
        folds.append(
            {
                "held_out": case,
                "configured": _rounded(score_pools(held, configured, k)),
                "learned": _rounded(score_pools(held, learned, k)),
            }
        )
    gains = [f["learned"]["objective"] - f["configured"]["objective"] for f in folds]
    return {
        "folds": folds,
        "gain_mean": round(statistics.mean(gains), 4) if gains else 0.0,
        "gain_sd": round(statistics.pstdev(gains), 4) if gains else 0.0,
    }


def _rounded(score: Mapping[str, float]) -> dict[str, float]:
    return {key: round(value, 4) for key, value in score.items()}


async def collect(bench: Workbench, settings: Settings) -> list[Pool]:
    """Ask every headline question of the bench's cases once (with `settings`) and keep each
    candidate's signals from the trace, labelled by the dataset."""
    pools: list[Pool] = []
    for runner, questions in bench.runners:
        runner.orchestrator.reconfigure(
            _case_settings(settings, bench.backend, runner.settings.data_dir)
        )
        for q in questions:
            answer = await runner._orchestrated(
                q.text, q.as_of or runner.case.as_of, expand=bench.system == "expanded"
            )
            trace = runner.orchestrator.trace(answer.trace_id or "")
            if trace is None or trace.plan is None or not trace.candidates:
                continue
            await runner.keys.resolve(runner.orchestrator, [c.id for c in trace.candidates])
            ordered = sorted(
                (c for c in trace.candidates if c.breakdown is not None),
                key=lambda c: (c.final_rank or 10**6, -_total_of(c.breakdown)),
            )
            pools.append(
                Pool(
                    case=runner.case.id,
                    question_type=trace.plan.question_type.value,
                    signals=tuple(_signals(c.breakdown) for c in ordered),
                    keys=tuple(runner.keys.of(c.id) for c in ordered),
                    evidence=frozenset(q.evidence),
                )
            )
    return pools


def _total_of(b: ScoreBreakdown | None) -> float:
    return b.total if b is not None else 0.0


def _signals(b: ScoreBreakdown | None) -> tuple[float, ...]:
    assert b is not None
    return (
        b.relevance,
        b.recency,
        b.graph,
        b.type_match,
        b.cross_reference,
        b.duplicate_penalty,
        b.noise_penalty,
    )

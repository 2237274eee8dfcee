"""The report: the JSON of the protocol's output contract (its markdown: `eval.markdown`).

`build_report` turns the observations of a run into one JSON-ready dict:

    {"dataset", "backend", "k", "questions", "skipped",
     "systems": {system: {"recall@k", "recall_all@k", "precision@k", "ndcg@k" (every k),
                          "mrr", "duplicate_rate", "context_chars", "p50_ms", "p95_ms",
                          "mean_ms", "questions", "by_category": {category: {...}}},
                 orchestrated systems also "block_recall" (evidence shown in the context block
                 at the default budget) and "tokens_per_call" (its text content / 4)},
     extras: "category_names", "cases", "skipped_questions", "adversarial" (categories reported
     apart, e.g. LoCoMo's 5), "recall_curve" (recall@1..max k), "ingest", "write_checks",
     "knowledge_updates" (a set written through memory_write: see `eval.updates`),
     "worst_missed" (with the diagnosis of each), "regressions" (questions where the store
     alone found more evidence than the orchestrator, diagnosed alike), "notes"}

Metrics are averaged over questions (macro), rounded to 4 places; latencies are in ms. Every
number but the latencies and ingest seconds depends on the inputs alone.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory_orchestrator.eval import metrics
from memory_orchestrator.eval.markdown import to_markdown
from memory_orchestrator.eval.records import Answer, EvalRun, QuestionResult
from memory_orchestrator.eval.updates import knowledge_updates
from memory_orchestrator.pipeline.deduper import similarity
from memory_orchestrator.state.observability import percentile

__all__ = ["LATENCY_KEYS", "build_report", "recall_curve", "to_json", "write_report"]

LATENCY_KEYS = frozenset({"p50_ms", "p95_ms", "mean_ms", "seconds"})
_PLACES = 4
_WORST = 20


# ---------------------------------------------------------------- aggregation


def _question_metrics(
    answer: Answer, evidence: Sequence[str], ks: Sequence[int], threshold: float
) -> dict[str, float]:
    ranking = answer.ranking
    values: dict[str, float] = {}
    for k in ks:
        values[f"recall@{k}"] = metrics.recall_at(ranking, evidence, k)
        values[f"recall_all@{k}"] = metrics.recall_all_at(ranking, evidence, k)
        values[f"precision@{k}"] = metrics.precision_at(ranking, evidence, k)
        values[f"ndcg@{k}"] = metrics.ndcg_at(ranking, evidence, k)
    values["mrr"] = metrics.mrr(ranking, evidence)
    values["duplicate_rate"] = metrics.duplicate_rate(answer.texts, similarity, threshold)
    values["context_chars"] = float(answer.context_chars)
    if answer.shown is not None:  # an orchestrated system's memory_context, as read
        values["block_recall"] = metrics.block_recall(answer.shown, evidence)
        values["tokens_per_call"] = answer.text_chars / 4
    return values


def _aggregate(
    results: Sequence[QuestionResult], system: str, ks: Sequence[int], threshold: float
) -> dict[str, Any]:
    if not results:
        return {"questions": 0}
    rows = [
        _question_metrics(r.answers[system], r.question.evidence, ks, threshold) for r in results
    ]
    summary: dict[str, Any] = {
        key: round(metrics.mean([row[key] for row in rows]), _PLACES) for key in rows[0]
    }
    summary["context_chars"] = round(summary["context_chars"], 1)
    if "tokens_per_call" in summary:
        summary["tokens_per_call"] = round(summary["tokens_per_call"], 1)
    latencies = [r.answers[system].latency_ms for r in results]
    summary["p50_ms"] = round(percentile(latencies, 50) or 0.0, 3)
    summary["p95_ms"] = round(percentile(latencies, 95) or 0.0, 3)
    summary["mean_ms"] = round(metrics.mean(latencies), 3)
    summary["questions"] = len(results)
    return summary


def _systems(
    results: Sequence[QuestionResult],
    run: EvalRun,
    categories: Sequence[str] | None,
) -> dict[str, Any]:
    ks, threshold = run.options.k, run.dedup_threshold
    out: dict[str, Any] = {}
    for system in run.options.systems:
        block = _aggregate(results, system, ks, threshold)
        if categories is not None:
            block["by_category"] = {
                category: _aggregate(
                    [r for r in results if r.question.category == category], system, ks, threshold
                )
                for category in categories
            }
        out[system] = block
    return out


def recall_curve(results: Sequence[QuestionResult], system: str, max_k: int) -> list[float]:
    """Mean recall@k for k = 1..max_k."""
    return [
        round(
            metrics.mean(
                [
                    metrics.recall_at(r.answers[system].ranking, r.question.evidence, k)
                    for r in results
                ]
            ),
            _PLACES,
        )
        for k in range(1, max_k + 1)
    ]


def build_report(run: EvalRun, *, worst: int = _WORST) -> dict[str, Any]:
    dataset, options = run.dataset, run.options
    headline = set(dataset.headline_categories)
    asked = [q for c in run.cases for q in c.questions]
    skipped = [q for c in run.cases for q in c.skipped]
    main = [q for q in asked if q.question.category in headline]
    report: dict[str, Any] = {
        "dataset": dataset.name,
        "backend": options.backend,
        "ingest": options.ingest,
        "k": list(options.k),
        "questions": len(main),
        "skipped": sum(1 for q in skipped if q.category in headline),
        "systems": _systems(main, run, dataset.headline_categories),
    }
    if dataset.category_names:
        report["category_names"] = dict(dataset.category_names)
    report["cases"] = [c.id for c in run.cases]
    report["skipped_questions"] = [
        {"id": q.id, "category": q.category, "reason": q.skip_reason} for q in skipped
    ]
    for category, label in dataset.apart_categories.items():
        apart = [q for q in asked if q.question.category == category]
        report[label] = {
            "category": category,
            "questions": len(apart),
            "skipped": sum(1 for q in skipped if q.category == category),
            "systems": _systems(apart, run, None),
        }
    report["recall_curve"] = {s: recall_curve(main, s, options.max_k) for s in options.systems}
    report["ingest"] = {
        "memories": sum(c.memories for c in run.cases),
        "stored": sum(c.stored for c in run.cases),
        "seconds": round(sum(c.ingest_s for c in run.cases), 3),
    }
    checks = [w for c in run.cases for w in c.writes]
    if checks:
        report["write_checks"] = {
            "passed": sum(w.passed for w in checks),
            "failed": sum(not w.passed for w in checks),
            "checks": [vars(w) for w in checks],
        }
    updates = knowledge_updates(run)
    if updates is not None:
        report["knowledge_updates"] = updates
    report["worst_missed"] = _worst_missed(main, run, worst)
    report["regressions"] = _regressions(main, run, worst)
    report["notes"] = sorted({n for c in run.cases for n in c.notes if "ingested" not in n})
    return report


def _focus(systems: Sequence[str]) -> str:
    for name in ("orchestrated", "expanded", "raw"):
        if name in systems:
            return name
    return systems[0]


def _missed_entry(r: QuestionResult, run: EvalRun, focus: str) -> dict[str, Any]:
    systems, max_k = run.options.systems, run.options.max_k
    diagnosis = r.diagnosis or {}
    return {
        "id": r.question.id,
        "question": r.question.text,
        "category": r.question.category,
        "evidence": list(r.question.evidence),
        "system": focus,
        f"recall@{max_k}": {s: round(_recall(r, s, max_k), _PLACES) for s in systems},
        "mrr": {s: round(_mrr(r, s), _PLACES) for s in systems},
        "plan": diagnosis.get("plan", {}),
        "evidence_ranks": diagnosis.get("evidence", []),
        "notes": diagnosis.get("notes", []),
    }


def _recall(r: QuestionResult, system: str, k: int) -> float:
    return metrics.recall_at(r.answers[system].ranking, r.question.evidence, k)


def _mrr(r: QuestionResult, system: str) -> float:
    return metrics.mrr(r.answers[system].ranking, r.question.evidence)


def _worst_missed(results: Sequence[QuestionResult], run: EvalRun, limit: int) -> list[Any]:
    """Lowest recall@max(k) of the orchestrated system first, then lowest MRR."""
    focus, max_k = _focus(run.options.systems), run.options.max_k
    order = {id(r): n for n, r in enumerate(results)}
    missed = [r for r in results if _recall(r, focus, max_k) < 1.0]
    missed.sort(key=lambda r: (_recall(r, focus, max_k), _mrr(r, focus), order[id(r)]))
    return [_missed_entry(r, run, focus) for r in missed[:limit]]


def _regressions(results: Sequence[QuestionResult], run: EvalRun, limit: int) -> dict[str, Any]:
    """Questions where the store alone found more evidence than the orchestrator: the losses,
    largest first."""
    focus, max_k = _focus(run.options.systems), run.options.max_k
    if focus == "raw" or "raw" not in run.options.systems:
        return {"system": focus, "count": 0, "questions": []}
    order = {id(r): n for n, r in enumerate(results)}

    def loss(r: QuestionResult) -> float:
        return _recall(r, "raw", max_k) - _recall(r, focus, max_k)

    lost = [r for r in results if loss(r) > 0]
    lost.sort(key=lambda r: (-loss(r), order[id(r)]))
    gained = sum(1 for r in results if loss(r) < 0)
    return {
        "system": focus,
        "count": len(lost),
        "gained": gained,
        "questions": [_missed_entry(r, run, focus) for r in lost[:limit]],
    }


# ---------------------------------------------------------------- rendering


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False)


def write_report(report: dict[str, Any], folder: Path) -> list[Path]:
    """report.json and report.md in `folder` (made if needed); plots are `plots.write_plots`."""
    folder.mkdir(parents=True, exist_ok=True)
    json_path, md_path = folder / "report.json", folder / "report.md"
    json_path.write_text(to_json(report) + "\n", encoding="utf-8")
    md_path.write_text(to_markdown(report), encoding="utf-8")
    return [json_path, md_path]

"""In-process study: how far do lexical levers go on LoCoMo, without the pipeline around them?

One `LocalIndex` per conversation (BM25 over each turn plus its neighbours' terms), then simple
additive levers on its scores, each given as a JSON object of options; prints recall@5/10/20/60,
nDCG@10, MRR and recall@10 per category (1-4) for each. Not a test, asserts nothing; it is how
the "lexical plateau" figures of docs/explanation/quality.md were found. Seconds per
configuration.

    .venv/bin/python bench/lexical_levers.py '{}' '{"date": true, "speaker": 0.3, "when": 0.2}'

Options (all off by default): `context_weight` (1.0), `radius` (2), `k1` (.9), `b` (.5),
`depth` (60 hits scored), `date` (index the turn's date as words), `own` (share of an own-text
BM25 without context), `speaker` (added when the turn's speaker is named in the question),
`when` (added for "when" questions to turns with a time expression), `semantic` (share of a
min-max scaled wordllama similarity; needs the `semantic` extra), `session` (share of the best
score in the turn's session), `neighbours` (insert the neighbours of the best N after them),
`diversity` (penalty per already chosen turn within 2 turns), `coverage` (share of the
idf-weighted query terms the turn itself holds), `feedback` (pseudo-relevance feedback:
`{"share": .2, "docs": 5, "terms": 8, "min": 2}`, the terms the best hits share run as a second
query and blended in).
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from memory_orchestrator.derived.local_index import LocalIndex
from memory_orchestrator.eval.datasets import EvalCase, load_locomo
from memory_orchestrator.eval.metrics import mrr, ndcg_at, recall_at
from memory_orchestrator.models import Memory, QuestionType
from memory_orchestrator.pipeline.planner import plan_query
from memory_orchestrator.pipeline.relevance import has_time_expression
from memory_orchestrator.text import terms

DATASET = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "locomo" / "locomo-dev.json"
HEADLINE = {"1", "2", "3", "4"}


def turns(case: EvalCase) -> list[Memory]:
    return [
        Memory(
            id=e.key,
            content=e.memory.content,
            type=e.memory.type,
            entities=e.memory.entities,
            created_at=e.memory.created_at,
        )
        for e in case.memories
    ]


def _scaled(values: dict[str, float]) -> dict[str, float]:
    low, high = min(values.values()), max(values.values())
    return {i: (v - low) / (high - low) if high > low else 1.0 for i, v in values.items()}


class Study:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.embedder: Any = None
        if cfg.get("semantic"):
            from memory_orchestrator.derived.semantic import load_embedder

            self.embedder = load_embedder("wordllama")

    def index(self, memories: list[Memory], context_weight: float) -> LocalIndex:
        cfg = self.cfg
        index = LocalIndex(
            context_weight=context_weight,
            radius=cfg.get("radius", 2),
            k1=cfg.get("k1", 0.9),
            b=cfg.get("b", 0.5),
            date_terms=bool(cfg.get("date")),
        )
        index.add(memories)
        return index

    def rank(self, case: EvalCase) -> dict[str, list[str]]:
        cfg = self.cfg
        memories = turns(case)
        text = {m.id: m for m in memories}
        index = self.index(memories, cfg.get("context_weight", 1.0))
        own = self.index(memories, 0.0) if cfg.get("own") else None
        semantic = None
        if self.embedder is not None:
            from memory_orchestrator.derived.semantic import SemanticIndex

            semantic = SemanticIndex(self.embedder)
            semantic.add(memories)
        speakers = sorted({m.entities[0] for m in memories if m.entities})
        position = {m.id: i for i, m in enumerate(memories)}  # the case's turns, in order
        held = {m.id: frozenset(terms(f"{m.content} {' '.join(m.entities)}")) for m in memories}
        out: dict[str, list[str]] = {}
        for q in case.questions:
            if q.skip_reason or q.category not in HEADLINE:
                continue
            plan = plan_query(q.text, now=case.as_of, known_entities=speakers)
            hits = index.search(q.text, cfg.get("depth", 60))
            if not hits:
                out[q.id] = []
                continue
            top = hits[0][1]
            scores = {memory_id: s / top for memory_id, s in hits}
            if own is not None:
                self._blend(own.search(q.text, cfg.get("depth", 60)), cfg["own"], scores)
            if semantic is not None:
                sims = semantic.similarities(q.text, [text[i] for i in scores])
                for i, v in _scaled(sims).items():
                    scores[i] += cfg["semantic"] * v
            if cfg.get("feedback"):
                self._feedback(index, held, q.text, scores)
            if cfg.get("coverage"):
                self._coverage(held, q.text, scores)
            self._boosts(scores, text, plan.entities, plan.question_type)
            order = sorted(scores, key=lambda i: (-scores[i], i))
            if cfg.get("diversity"):
                order = self._diverse(order, scores, position)
            if cfg.get("neighbours"):
                order = self._with_neighbours(index, order, cfg["neighbours"])
            out[q.id] = order
        return out

    def _boosts(
        self,
        scores: dict[str, float],
        text: dict[str, Memory],
        entities: tuple[str, ...],
        question: QuestionType,
    ) -> None:
        cfg = self.cfg
        if cfg.get("session"):
            best: dict[str, float] = {}
            for i, v in scores.items():
                key = i.split(":")[0]  # LoCoMo's session; a time-gap split elsewhere
                best[key] = max(best.get(key, 0.0), v)
            for i in scores:
                scores[i] += cfg["session"] * best[i.split(":")[0]]
        named = {e.casefold() for e in entities}
        for i in scores:
            m = text[i]
            if cfg.get("speaker") and m.entities and m.entities[0].casefold() in named:
                scores[i] += cfg["speaker"]
            if cfg.get("when") and question is QuestionType.WHEN and has_time_expression(m.content):
                scores[i] += cfg["when"]

    def _feedback(
        self,
        index: LocalIndex,
        held: dict[str, frozenset[str]],
        query: str,
        scores: dict[str, float],
    ) -> None:
        """Pseudo-relevance feedback: the terms the best hits share, as a second query."""
        fb = self.cfg["feedback"]
        wanted = set(terms(query))
        n = len(held)
        best = sorted(scores, key=lambda i: (-scores[i], i))[: fb.get("docs", 5)]
        counts: dict[str, int] = defaultdict(int)
        for i in best:
            for t in held[i] - wanted:
                counts[t] += 1
        df = {t: sum(1 for h in held.values() if t in h) for t in counts}
        weight = {
            t: c * math.log(1 + n / (1 + df[t])) for t, c in counts.items() if c >= fb.get("min", 2)
        }
        extra = sorted(weight, key=lambda t: (-weight[t], t))[: fb.get("terms", 8)]
        if not extra:
            return
        hits = index.search(query + " " + " ".join(extra), self.cfg.get("depth", 60))
        self._blend(hits, fb["share"], scores)

    @staticmethod
    def _blend(hits: list[tuple[str, float]], share: float, scores: dict[str, float]) -> None:
        """Add `share` of each hit's score, scaled to the best hit's."""
        if not hits:
            return
        top = hits[0][1]
        for memory_id, score in hits:
            scores[memory_id] = scores.get(memory_id, 0.0) + share * score / top

    def _coverage(
        self, held: dict[str, frozenset[str]], query: str, scores: dict[str, float]
    ) -> None:
        wanted = list(dict.fromkeys(terms(query)))
        n = len(held)
        df = {t: sum(1 for h in held.values() if t in h) for t in wanted}
        idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in wanted}
        total = sum(idf.values()) or 1.0
        for i in scores:
            own = held[i]
            scores[i] += self.cfg["coverage"] * sum(idf[t] for t in wanted if t in own) / total

    def _diverse(
        self, order: list[str], scores: dict[str, float], position: dict[str, int]
    ) -> list[str]:
        chosen: list[str] = []
        rest = list(order)
        while rest and len(chosen) < 20:

            def effective(i: str) -> float:
                near = sum(1 for c in chosen if abs(position[c] - position[i]) <= 2)
                return scores[i] - float(self.cfg["diversity"]) * near

            best = max(rest, key=effective)
            chosen.append(best)
            rest.remove(best)
        return chosen + rest

    @staticmethod
    def _with_neighbours(index: LocalIndex, order: list[str], seeds: int) -> list[str]:
        around = index.around(order[:seeds])
        out: list[str] = []
        for i in order:
            if i not in out:
                out.append(i)
            for n in around.get(i, []) if i in order[:seeds] else []:
                if n.id not in out:
                    out.append(n.id)
        return out


def run(cfg: dict[str, Any]) -> dict[str, float]:
    dataset = load_locomo(DATASET)
    study = Study(cfg)
    found: dict[str, list[float]] = defaultdict(list)
    for case in dataset.cases:
        ranked = study.rank(case)
        for q in case.questions:
            if q.id not in ranked:
                continue
            ranking = [{i} for i in ranked[q.id]]
            evidence = set(q.evidence)
            for k in (5, 10, 20, 60):
                found[f"recall@{k}"].append(recall_at(ranking, evidence, k))
            found["ndcg@10"].append(ndcg_at(ranking, evidence, 10))
            found["mrr"].append(mrr(ranking, evidence))
            found[f"category {q.category} recall@10"].append(recall_at(ranking, evidence, 10))
    return {k: round(float(sum(v)) / len(v), 4) for k, v in sorted(found.items())}


def main() -> None:
    for arg in sys.argv[1:] or ["{}"]:
        started = time.perf_counter()
        result = run(json.loads(arg))
        print(arg, json.dumps(result), f"{time.perf_counter() - started:.1f}s", flush=True)


if __name__ == "__main__":
    main()

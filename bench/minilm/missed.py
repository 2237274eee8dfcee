"""Evidence turns the plateau config misses in its top 10 -- are they in the semantic model's
own top 10 / top 30 (whole conversation, no words)? And are they among the BM25 candidates at
all (the `semantic` lever can only reorder those)?

Compares MiniLM (whole text and content words) with wordllama (content words). Setup and the
command are in the docstring of `drive.py` (MINILM_MODEL_DIR must name the model folder):

    MINILM_MODEL_DIR=... .venv/bin/python bench/minilm/missed.py
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from encoder import MiniLMEmbedder  # this folder, first on sys.path when run as a script

import memory_orchestrator.derived.semantic as sem
from memory_orchestrator.eval.datasets import load_locomo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for lexical_levers

import lexical_levers as L

PLATEAU = {
    "date": True,
    "speaker": 0.3,
    "when": 0.2,
    "own": 0.3,
    "context_weight": 0.7,
    "radius": 4,
}

Embed = Callable[[Sequence[str]], np.ndarray]


def _found_by_models(
    stats: dict[str, int],
    models: dict[str, Embed],
    mats: dict[str, np.ndarray],
    question: str,
    position: int,
    candidate: bool,
) -> None:
    """Counts, per model, whether the missed turn at `position` is in its top 10 / top 30."""
    for k, f in models.items():
        qv = f([question])[0]
        sims = mats[k] @ qv
        rank = int((sims > sims[position]).sum())
        for n in (10, 30):
            if rank < n:
                stats[f"{k}: in its top {n}"] += 1
                if not candidate:
                    stats[f"{k}: in its top {n}, not in BM25 candidates"] += 1


def main() -> None:
    dataset = load_locomo(L.DATASET)
    minilm = MiniLMEmbedder()
    wl = sem.WordLlamaEmbedder()
    models: dict[str, Embed] = {
        "minilm raw": lambda ts: minilm.embed(list(ts)),
        "minilm content": lambda ts: minilm.embed([sem.embedding_text(t) for t in ts]),
        "wordllama content": wl.embed,
    }
    study = L.Study(PLATEAU)
    stats: dict[str, int] = defaultdict(int)
    for case in dataset.cases:
        ranked = study.rank(case)
        memories = L.turns(case)
        ids = [m.id for m in memories]
        mats = {k: f([m.content for m in memories]) for k, f in models.items()}
        # the plateau's candidate set (BM25 depth 60 + own-text hits): the scored ids
        for q in case.questions:
            if q.id not in ranked:
                continue
            order = ranked[q.id]
            top10 = set(order[:10])
            cands = set(order)
            for ev in q.evidence:
                stats["evidence"] += 1
                if ev in top10:
                    continue
                stats["missed"] += 1
                stats[f"missed cat {q.category}"] += 1
                if ev not in cands:
                    stats["missed, not in BM25 candidates"] += 1
                if ev not in ids:
                    stats["missed, not a turn"] += 1
                    continue
                _found_by_models(stats, models, mats, q.text, ids.index(ev), ev in cands)
    for k, v in stats.items():
        print(f"{k}: {v}" + (f"  ({v / stats['missed']:.3f} of missed)" if k != "evidence" else ""))


if __name__ == "__main__":
    main()

"""Benchmark: the semantic index's first pass at scale against its exact ranking.

Loads the vectors an earlier `bench/bench_context.py --keep DIR` run kept (DIR/embedded-N/
semantic/all-MiniLM-L6-v2.db: LoCoMo development turns, then synthetic filler memories),
embeds LoCoMo questions, and ranks each question's `--k` nearest memories twice: exactly
(every row's cosine) and through the first pass (`derived/coarse.py`: the reduced
coordinates pick a pool, the pool is ranked by exact cosine). Prints, per size (the first N
vectors of the file), each one's p50 milliseconds on one thread and the first pass's recall
of the exact top k (the share of the exact k it also returns, and whether the order of what
both return is the same). Not a test: it asserts nothing.

The questions' nearest memories are LoCoMo turns, far from the synthetic filler, so they are
easy to find; a second set of queries makes the hard case: stored filler vectors, slightly
moved (noise of 0.02 per coordinate, normalised again), whose neighbours sit in a crowd of
~97,000 alike vectors. Both are printed.

    .venv/bin/python bench/bench_semantic_scale.py \
        --vectors DIR/embedded-100000/semantic/all-MiniLM-L6-v2.db \
        [--sizes 20000,50000,100000] [--k 40] [--queries 200]
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_context as bc

from memory_orchestrator.derived.coarse import Coarse
from memory_orchestrator.derived.embedders import load_embedder


def exact(matrix: np.ndarray, vector: np.ndarray, k: int) -> list[int]:
    sims = matrix @ vector
    top = np.argpartition(-sims, k - 1)[:k]
    return sorted(top.tolist(), key=lambda r: (-float(sims[r]), r))


def first_pass(coarse: Coarse, matrix: np.ndarray, vector: np.ndarray, k: int) -> list[int]:
    found = coarse.sync(matrix, len(matrix), set())
    assert found is not None
    rows = found.pool_of(vector)
    sims = matrix[rows] @ vector
    top = np.argpartition(-sims, k - 1)[:k]
    return sorted((int(rows[t]) for t in top), key=lambda r: (-float(matrix[r] @ vector), r))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--vectors", type=Path, required=True)
    parser.add_argument("--sizes", default="20000,50000,100000")
    parser.add_argument("--k", type=int, default=40)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    with sqlite3.connect(args.vectors) as conn:
        blobs = [row[0] for row in conn.execute("SELECT vector FROM vectors ORDER BY rowid")]
    everything = np.vstack([np.frombuffer(b, dtype=np.float32) for b in blobs])
    _, questions = bc.locomo_turns()
    questions = random.Random(3).sample(questions, min(args.queries, len(questions)))
    asked = load_embedder("minilm").embed(questions)
    rng = np.random.default_rng(5)
    start = min(len(everything) - 1, 3000)  # past the LoCoMo turns: filler
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")
    print(f"{len(everything)} vectors kept; {len(asked)} queries of each kind; k = {args.k}")
    print(
        f"{'memories':>9s} {'queries':>10s} {'exact ms':>9s} {'first ms':>9s} {'recall@k':>9s}"
        f" {'min':>6s} {'same order':>10s}"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        matrix = np.ascontiguousarray(everything[:size])
        coarse = Coarse()
        started = time.perf_counter()
        if coarse.sync(matrix, size, set()) is None:
            print(f"{size:9d} below the first pass's threshold ({coarse.from_rows})")
            continue
        fit_ms = (time.perf_counter() - started) * 1000
        picked = everything[rng.choice(np.arange(start, size), len(asked), replace=False)]
        moved = picked + rng.normal(0, 0.02, picked.shape).astype(np.float32)
        moved /= np.linalg.norm(moved, axis=1, keepdims=True)
        for kind, queries in (("questions", asked), ("crowd", moved)):
            measure(kind, coarse, matrix, queries, args.k, fit_ms)


def measure(
    kind: str, coarse: Coarse, matrix: np.ndarray, queries: np.ndarray, k: int, fit_ms: float
) -> None:
    exact_ms, first_ms, recalls, same = [], [], [], 0
    for vector in queries:
        started = time.perf_counter()
        want = exact(matrix, vector, k)
        exact_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        got = first_pass(coarse, matrix, vector, k)
        first_ms.append((time.perf_counter() - started) * 1000)
        recalls.append(len(set(want) & set(got)) / k)
        same += want == got
    print(
        f"{len(matrix):9d} {kind:>10s} {statistics.median(exact_ms):9.2f}"
        f" {statistics.median(first_ms):9.2f} {statistics.mean(recalls):9.4f}"
        f" {min(recalls):6.3f} {same / len(queries):10.3f}"
        f"   (directions and projection: {fit_ms:.0f} ms)"
    )


if __name__ == "__main__":
    main()

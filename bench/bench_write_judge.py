"""What the write path's judging costs per write, on a knowledge-update set.

`--part judge` (the default): for every write of the set, in order, the judging alone
(`pipeline.writer.judge`: the comparisons of the new memory with the 10 earlier memories of
its case closest by the near-duplicate similarity, as a store's top 10 would give them), with
the readers a process keeps: the lexicon alone (no model), all-MiniLM-L6-v2, and
all-MiniLM-L6-v2 with wordllama's word vectors for swapped verbs (the defaults). The models
are loaded, and the WordNet table read, before the clock starts: what each costs once per
process is printed apart (`cold_ms`).

`--part service`: every write through the service (`Orchestrator.write` over a fresh
embedded store per case: the store's search, the judging, the write, the links), with the
semantic stage on (the defaults) and off; each case's orchestrator loads its models anew, as
a fresh process would, so its mean holds those loads.

Prints milliseconds per write (mean, median, 95th percentile). Not a test; it asserts
nothing. The machine is shared: compare two builds only within one run, interleaved
(`--rounds`); to run another build, put its source first on the path.

    .venv/bin/python bench/bench_write_judge.py [--dataset knowledge-updates] [--part judge]
    PYTHONPATH=OTHER/src .venv/bin/python bench/bench_write_judge.py ...   # another build
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.derived.embedders import Embedder, find_minilm, load_embedder
from memory_orchestrator.eval import load_dataset
from memory_orchestrator.models import Memory, MemoryType, SearchHit, WriteRequest
from memory_orchestrator.pipeline import conflicts, paraphrase, synonyms
from memory_orchestrator.pipeline.deduper import similarity
from memory_orchestrator.pipeline.writer import WritePolicy, judge
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.traces import TraceStore

CANDIDATES = 10


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "writes": len(times),
        "mean_ms": round(statistics.fmean(times), 3),
        "p50_ms": round(statistics.median(times), 3),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 3),
    }


def timed(run: Callable[[], Any]) -> float:
    started = time.perf_counter()
    run()
    return round((time.perf_counter() - started) * 1000, 1)


# ---------------------------------------------------------------- the judging alone


def readers() -> tuple[dict[str, Any], dict[str, float]]:
    """The three readers, their models loaded, and what loading each cost."""
    cold: dict[str, float] = {}
    loaded: dict[str, Embedder] = {}
    cold["wordnet_table"] = timed(lambda: synonyms.sense_rank("starts", "begins"))
    if hasattr(synonyms, "is_verb"):  # this build reads WordNet's verbs too
        cold["wordnet_verbs"] = timed(lambda: synonyms.is_verb("starts"))
    cold["minilm"] = timed(lambda: loaded.update(minilm=load_embedder("minilm")))
    cold["wordllama"] = timed(lambda: loaded.update(words=load_embedder("wordllama")))
    minilm, words = loaded["minilm"], loaded["words"]
    out: dict[str, Any] = {
        "no model": paraphrase.Meaning(),
        "minilm": paraphrase.Meaning(lambda: minilm),
    }
    try:  # this build reads verbs with word vectors
        full = paraphrase.Meaning(lambda: minilm, words=lambda: words)
        vectors = getattr(full, "vectors", None)
        if vectors is not None:
            cold["verb_vocabulary"] = timed(lambda: vectors.neighbours("start", "begin"))
        out["minilm + word vectors"] = full
    except TypeError:
        pass
    return out, cold


def policy(meaning: Any) -> WritePolicy:
    return WritePolicy(
        threshold=0.85, on_duplicate="skip", link_related=0, timeout_s=60, meaning=meaning
    )


def judge_all(dataset: str, meaning: Any) -> list[float]:
    times = []
    for case in load_dataset(dataset).cases:
        earlier: list[Memory] = []
        for n, item in enumerate(case.memories):
            new = item.memory
            near = sorted(earlier, key=lambda m: -similarity(new.content, m.content))
            hits = [SearchHit(memory=m, rank=r + 1, score=0.0) for r, m in enumerate(near)]
            started = time.perf_counter()
            judge(new, hits[:CANDIDATES], policy(meaning))
            times.append((time.perf_counter() - started) * 1000)
            earlier.append(Memory(id=f"m{n}", content=new.content, type=MemoryType.SEMANTIC))
    return times


def judge_part(dataset: str, rounds: int) -> dict[str, Any]:
    found, cold = readers()
    out: dict[str, Any] = {"cold_ms": cold}
    for _ in range(rounds):
        for name, meaning in found.items():
            conflicts.compare.cache_clear()  # every pair is new to a fresh process
            out.setdefault(name, []).append(summary(judge_all(dataset, meaning)))
    return out


# ---------------------------------------------------------------- through the service


async def write_all(dataset: str, semantic: bool) -> list[float]:
    times: list[float] = []
    for case in load_dataset(dataset).cases:
        with tempfile.TemporaryDirectory() as tmp:
            settings = Settings()
            settings.data_dir = Path(tmp)
            settings.semantic.enabled = semantic
            orch = Orchestrator(
                EmbeddedBackend(settings.embedded_path()),
                settings,
                traces=TraceStore(None, keep=10),
            )
            try:
                for item in case.memories:
                    started = time.perf_counter()
                    await orch.write(WriteRequest(memory=item.memory))
                    times.append((time.perf_counter() - started) * 1000)
            finally:
                await orch.close()
    return times


def service_part(dataset: str, rounds: int) -> dict[str, Any]:
    find_minilm(None, None)  # fails here, with its fix, when the model is not built
    out: dict[str, Any] = {}
    for _ in range(rounds):
        for mode, semantic in (("model", True), ("no model", False)):
            out.setdefault(mode, []).append(summary(anyio.run(write_all, dataset, semantic)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="knowledge-updates")
    parser.add_argument("--part", choices=("judge", "service"), default="judge")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    run = judge_part if args.part == "judge" else service_part
    print(json.dumps(run(args.dataset, args.rounds), indent=1))


if __name__ == "__main__":
    main()

"""Experiment: could an import find each record's closest memories in the local index?

The write path (`memory_write`, and the import through it) compares a new memory with the
store's ten closest for its text (the embedded store: SQLite FTS5's BM25), a search whose cost
grows with the store. This loads the embedded store with the first count - N memories of
`bench_import.py`'s file (bulk, unjudged), indexes them in the derived local index (plain
BM25: no neighbours' terms, no times, so that each memory is appended), then, for each of the
last N: the store's ten closest and the local index's ten closest (read back from the store),
the CPU time of each lookup, whether the two sets are the same, and whether the write path's
judge (`pipeline.writer.judge`, the default thresholds) makes the same verdict of each: the
kind (new, duplicate, update), the memory restated or corrected, and the look-alike it links.
Then the memory is written to the store and added to the index. Not a test: it asserts
nothing.

    .venv/bin/python bench/import_candidates.py [--count 10000] [--last 300]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_import import memories_file

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.derived.local_index import LocalIndex
from memory_orchestrator.models import Memory, SearchHit
from memory_orchestrator.pipeline.writer import Verdict, WritePolicy, judge
from memory_orchestrator.settings import load_settings
from memory_orchestrator.transfer.sources import read_source


def verdict(v: Verdict) -> tuple[str, str | None, str | None]:
    """What a verdict decides: its kind, the memory it restates or corrects, the look-alike."""
    return v.kind, v.id if v.kind != "new" else None, v.lookalike[0] if v.lookalike else None


def untimed(memory: Memory) -> Memory:
    return memory.model_copy(update={"created_at": None})


async def compare(count: int, last: int) -> None:
    s = load_settings()
    policy = WritePolicy(
        threshold=s.dedup.threshold,
        on_duplicate=s.write.on_duplicate,
        link_related=s.write.link_related,
        timeout_s=s.retrieval.timeout_s,
        on_conflict=s.write.on_conflict,
        update_threshold=s.write.update_threshold,
        lookalike_threshold=s.dedup.soft_threshold,
    )
    with tempfile.TemporaryDirectory(prefix="bench-candidates-") as folder:
        source = Path(folder) / "memories.jsonl"
        memories_file(source, count)
        memories = [i.memory for i in read_source(source)[1] if i.memory is not None]
        store = EmbeddedBackend(Path(folder) / "store.db")
        try:
            await store.write_many(memories[:-last])
            index = LocalIndex(context_weight=0.0)
            cursor = None
            while True:
                page, cursor = await store.list_memories(cursor, 5000)
                index.add([untimed(m) for m in page])
                if len(page) < 5000:
                    break
            index.prepare()
            spent = {"store": 0.0, "local": 0.0}
            same_set = same_verdict = same_kind = 0
            for memory in memories[-last:]:
                cpu = time.process_time()
                theirs = await store.search(memory.content, policy.candidates)
                spent["store"] += time.process_time() - cpu
                cpu = time.process_time()
                ids = [i for i, _ in index.search(memory.content, policy.candidates)]
                found = {m.id: m for m in await store.get_memories(ids)}
                mine = [SearchHit(memory=found[i], rank=n, score=0.0) for n, i in enumerate(ids, 1)]
                spent["local"] += time.process_time() - cpu
                same_set += {h.memory.id for h in theirs} == {h.memory.id for h in mine}
                a, b = verdict(judge(memory, theirs, policy)), verdict(judge(memory, mine, policy))
                same_verdict += a == b
                same_kind += a[:2] == b[:2]
                written = await store.write(memory)
                cpu = time.process_time()
                index.add([untimed(m) for m in await store.get_memories([written.id])])
                spent["local"] += time.process_time() - cpu
        finally:
            await store.close()
    each = {k: round(v / last * 1000, 2) for k, v in spent.items()}
    print(f"{count - last} memories, then {last}: CPU per lookup {each} ms")
    print(f"same ten closest: {same_set}/{last}; same verdict: {same_verdict}/{last}")
    print(f"same kind and memory restated or corrected (look-alike aside): {same_kind}/{last}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--last", type=int, default=300)
    args = parser.parse_args()
    anyio.run(compare, args.count, args.last)


if __name__ == "__main__":
    main()

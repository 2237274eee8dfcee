"""What the semantic stage costs per query and per write, for each model.

Texts are LoCoMo's (the development split's turns, "speaker: text [photo]", and its
questions); the 10k set repeats the split's 2,760 turns with a number appended, so that every
text is new to the index. For each model it prints the median milliseconds of:

- one query (a LoCoMo question), one memory (a turn), a batch of 64 memories;
- one write: a new memory embedded, indexed and kept on disk (`SemanticIndex.add`);
- a search (`ranked`, k = 40) over the 10k index, with a new question and a cached one;
- building the index, with its vectors kept in a fresh file, for one conversation (~600
  turns) and for 10k memories;
- a restart: loading the kept vectors (`SemanticIndex` over the file) for both sizes.

Not a test; it asserts nothing. The machine's speed drifts, so each number is the median of
`--repeat` runs (the 10k build of `--repeat-10k`). ONNX Runtime uses every core it finds.

    .venv/bin/python bench/bench_embedder.py [--models minilm,wordllama] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory_orchestrator.derived.embedders import Embedder, load_embedder
from memory_orchestrator.derived.semantic import SemanticIndex
from memory_orchestrator.derived.vectors import VectorFile, vector_path
from memory_orchestrator.models import Memory, MemoryType

sys.path.insert(0, str(Path(__file__).resolve().parent))
from semantic_only import DEFAULT, turns  # this folder


def median_ms(run: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def memories(texts: list[str], prefix: str) -> list[Memory]:
    return [
        Memory(id=f"{prefix}{i}", content=t, type=MemoryType.EPISODIC) for i, t in enumerate(texts)
    ]


def index_over(embedder: Embedder, path: Path) -> SemanticIndex:
    fingerprint = str(getattr(embedder, "fingerprint", embedder.name))
    return SemanticIndex(
        embedder, vectors=VectorFile(path, model=embedder.name, fingerprint=fingerprint)
    )


def build_ms(
    embedder: Embedder, items: list[Memory], folder: Path, repeat: int
) -> tuple[float, float]:
    """Median ms to build the index (vectors kept in a fresh file), then to load it back."""
    paths: list[Path] = []

    def build() -> None:
        path = vector_path(folder / f"run{len(paths)}", embedder.name)
        paths.append(path)
        index_over(embedder, path).add(items)

    built = median_ms(build, repeat)
    loads = []
    for path in paths:
        started = time.perf_counter()
        index = index_over(embedder, path)
        loads.append((time.perf_counter() - started) * 1000)
        assert index.restored == len(items), (index.restored, len(items))
    return built, statistics.median(loads)


def bench(model: str, texts: list[str], questions: list[str], args: argparse.Namespace) -> None:
    started = time.perf_counter()
    embedder = load_embedder(model)
    print(f"\n{model} ({embedder.name}): loaded in {(time.perf_counter() - started) * 1000:.0f} ms")
    conversation = texts[:600]
    many = [f"{t} (#{i})" for i, t in enumerate((texts * (10_000 // len(texts) + 1))[:10_000])]
    question, turn, batch = iter(questions), iter(texts), texts[:64]
    n = args.repeat * 10
    rows = [
        ("embed one query", median_ms(lambda: embedder.embed([next(question)]), n)),
        ("embed one memory", median_ms(lambda: embedder.embed([next(turn)]), n)),
        ("embed a batch of 64 memories", median_ms(lambda: embedder.embed(batch), args.repeat)),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        built, loaded = build_ms(embedder, memories(conversation, "c"), folder / "600", args.repeat)
        big_built, big_loaded = build_ms(
            embedder, memories(many, "m"), folder / "10k", args.repeat_10k
        )
        index = index_over(embedder, vector_path(folder / "10k" / "run0", embedder.name))
        fresh = iter(memories([f"{t} [new]" for t in texts], "w"))
        rows += [
            (
                "one write: embed, index, keep (10k index)",
                median_ms(lambda: index.add([next(fresh)]), n),
            ),
            (
                "search k=40 over 10k (query embedded)",
                median_ms(lambda: index.ranked(next(question), 40), n),
            ),
            (
                "search k=40 over 10k (query vector cached)",
                median_ms(lambda: index.ranked(questions[0], 40), n),
            ),
            (f"build index, {len(conversation)} memories, kept", built),
            (f"load kept vectors, {len(conversation)} memories", loaded),
            ("build index, 10,000 memories, kept", big_built),
            ("load kept vectors, 10,000 memories", big_loaded),
        ]
    for label, ms in rows:
        print(f"  {label:<44} {ms:>10.2f} ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT)
    parser.add_argument("--models", default="minilm,wordllama")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--repeat-10k", type=int, default=1)
    args = parser.parse_args()
    data = json.loads(args.dataset.read_text())
    texts = [t for item in data for t in turns(item["conversation"])[1]]
    questions = [qa["question"] for item in data for qa in item["qa"]]
    print(f"{len(texts)} turns, {len(questions)} questions; medians of {args.repeat} runs")
    for model in args.models.split(","):
        bench(model, texts, questions, args)


if __name__ == "__main__":
    main()

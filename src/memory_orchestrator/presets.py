"""Named presets: tuned values for a kind of data, chosen with `preset = "NAME"` in the config
(or `ORCHESTRATOR_PRESET=NAME`). A preset fills in only the settings the configuration does
not set itself, so any value given in the file, the environment or code still wins.

Every preset records the command that produced it; re-running that command on the same data
gives the same values (`bench/tune_ranking.py` is a deterministic coordinate search).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["PRESETS", "apply_preset"]

# LoCoMo-style conversation logs (two speakers, turns in sessions), tuned on the development
# split with:
#   .venv/bin/python bench/tune_ranking.py \
#       --dataset ../shared/datasets/locomo/locomo-dev.json --system expanded
# started from ORCHESTRATOR_RANKING__CONTEXT_SEEDS=10 ORCHESTRATOR_RANKING__NEIGHBOR_SHARE=0.9
# (2 rounds; objective 0.579 -> 0.631: mean of recall@10, nDCG@10, MRR of `expanded`).
PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "locomo-dev": {
        "retrieval": {"candidate_k": 60, "rrf_k": 10},
        "ranking": {
            "common_entity_share": 1.0,
            "context_seeds": 5,
            "context_window": 0.4,
            "lexical_share": 0.6,
            "neighbor_share": 0.9,
            "neighbor_slots": 0,
            "store_score_share": 0.5,
            "when_time_boost": 0.2,
            "weights": {"cross_reference": 0.2, "graph": 0.05, "recency": 0.05},
        },
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

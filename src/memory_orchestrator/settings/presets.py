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
# split with `bench/tune_ranking.py --dataset ../shared/datasets/locomo/locomo-dev.json
# --system expanded` (a deterministic coordinate search; objective: the mean of recall@10,
# nDCG@10 and MRR of `expanded`), in three passes, each starting from the last one's values:
#   1. ranking and retrieval, from ORCHESTRATOR_RANKING__CONTEXT_SEEDS=10
#      ORCHESTRATOR_RANKING__NEIGHBOR_SHARE=0.9 (2 rounds): objective 0.579 -> 0.631;
#   2. with ORCHESTRATOR_LOCAL_INDEX__ENABLED=true, the grid local_index.weight,
#      ranking.lexical_share, local_index.context_weight, ranking.store_score_share,
#      local_index.candidates (1 round): 0.635 -> 0.646;
#   3. local_index.lend_context, ranking.context_window, local_index.b, local_index.k1,
#      ranking.neighbor_share (1 round): 0.646 -> 0.649;
#   4. local_index.radius (1, 2, 3): 0.649 -> 0.653; then, with radius 2, local_index.weight,
#      local_index.context_weight, local_index.candidates (1 round): 0.653 -> 0.654;
#   5. with local_index.date_terms (new, on by default): 0.663; then --grid
#      ranking.local_share=0,.3,.5,.7 --grid ranking.lexical_share=.5,.3,.7: 0.663 -> 0.672; then
#      from there, lexical_share, local_share, context_window, when_time_boost,
#      weights.cross_reference, local_index.weight/context_weight/k1/b, retrieval.rrf_k,
#      neighbor_share (1 round): 0.672 -> 0.677; a last round over cross_reference (.4, .5),
#      neighbor_share (.7), local_share (.5), weights.recency (0), context_seeds (10) kept
#      nothing (0.677);
#   6. fewer candidates: --grid retrieval.candidate_k=60,40,30,20 --grid
#      local_index.candidates=40,30,20 --grid retrieval.max_subqueries=4,2,1: 0.677 -> 0.680 (20,
#      30); from there candidate_k 15/10, local_index.candidates 25, context_seeds 3 kept nothing.
_LOCOMO: dict[str, dict[str, Any]] = {
    "retrieval": {"candidate_k": 20, "rrf_k": 10},
    "ranking": {
        "common_entity_share": 1.0,
        "context_seeds": 5,
        "context_window": 0.6,
        "lexical_share": 0.7,
        "local_share": 0.4,
        "neighbor_share": 0.8,
        "neighbor_slots": 0,
        "store_score_share": 0.0,
        "when_time_boost": 0.2,
        "weights": {"cross_reference": 0.3, "graph": 0.05, "recency": 0.05},
    },
    "local_index": {
        "enabled": True,
        "candidates": 30,
        "weight": 4.0,
        "context_weight": 1.0,
        "radius": 2,
        "k1": 0.9,
        "b": 0.5,
        "lend_context": True,
    },
}

PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "locomo-dev": _LOCOMO,
    # The same, plus semantic relevance (the optional `semantic` extra), measured after pass 3: with
    # ORCHESTRATOR_SEMANTIC__ENABLED=true ORCHESTRATOR_SEMANTIC__CANDIDATES=0, the grid
    # local_index.semantic_share, ranking.semantic_share (1 round): 0.649 -> 0.653. On pass 6's
    # values it no longer pays (expanded 0.786 / 0.634 / 0.614 against 0.789 / 0.635 / 0.616).
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

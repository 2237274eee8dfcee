"""Settings that moved or went, read from a configuration written for an earlier version.

A moved setting is read under its new name (the ranking coefficients now all live in
`[ranking]`, the ranking profile); a removed one stops the program with a line that says why
it went and what to do, instead of pydantic's bare "extra inputs are not permitted".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

__all__ = ["MOVED", "REMOVED", "renamed"]

# (section, old name) -> (section, new name)
MOVED: dict[tuple[str, str], tuple[str, str]] = {
    ("retrieval", "rrf_k"): ("ranking", "rrf_k"),
    ("local_index", "weight"): ("ranking", "local_list_weight"),
    ("local_index", "context_weight"): ("ranking", "local_context_weight"),
    ("local_index", "radius"): ("ranking", "local_radius"),
    ("local_index", "k1"): ("ranking", "bm25_k1"),
    ("local_index", "b"): ("ranking", "bm25_b"),
    ("semantic", "weight"): ("ranking", "semantic_list_weight"),
}

# (section, name) -> why it went
REMOVED: dict[tuple[str, str], str] = {
    ("ranking", "length_norm"): "it shipped switched off (0) with no measured use",
    ("ranking", "neighbor_slots"): "it shipped switched off (0) with no measured use",
    ("ranking", "common_entity_share"): "it shipped switched off (1.0) with no measured use",
    ("local_index", "semantic_share"): "it shipped switched off (0) with no measured use;"
    " meaning joins relevance through ranking.semantic_share",
}


def renamed(data: Mapping[str, Any]) -> dict[str, Any]:
    """`data` (raw settings input) with moved settings under their new names. A removed
    setting, or one given under both its old and its new name, raises ValueError."""
    out = dict(data)
    for (section, name), why in REMOVED.items():
        given = out.get(section)
        if isinstance(given, Mapping) and name in given:
            raise ValueError(
                f"{section}.{name} was removed: {why}; delete it from the configuration"
            )
    for (section, name), (target, new) in MOVED.items():
        given = out.get(section)
        if not isinstance(given, Mapping) or name not in given:
            continue
        rest = dict(given)
        value = rest.pop(name)
        out[section] = rest
        into: Any = out.get(target)
        if isinstance(into, BaseModel):  # a section given as a settings object
            into = into.model_dump(exclude_unset=True)
        into = dict(into) if isinstance(into, Mapping) else {}
        if new in into:
            raise ValueError(
                f"{section}.{name} is now {target}.{new}, and both are given: keep {target}.{new}"
            )
        into[new] = value
        out[target] = into
    return out

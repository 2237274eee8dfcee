"""Stage 3: graph neighbours of the best seeds, within a hop budget, an edge-type allowlist
and a fan-out cap. Every neighbour considered gets a recorded decision."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import anyio

from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.errors import STORE_ERRORS, describe
from memory_orchestrator.filtering import matches
from memory_orchestrator.models import (
    Candidate,
    EventKind,
    ExpansionDecision,
    Neighbor,
    SearchFilters,
    Stage,
    TraceEvent,
    event,
)

# Neighbours one seed of a search's expansion brings, at most: a memory linked to dozens
# (a busy entity, a long session) would otherwise crowd out the other seeds' neighbours.
FANOUT = 6
# New candidates one expansion of a search adds, at most: as many as its seeds' neighbours
# (`expansion.seeds` x `FANOUT` with the defaults), so that a second hop cannot flood the
# candidates with memories further away than the first hop's.
MAX_EXPANDED = 30


@dataclass(frozen=True)
class ExpansionLimits:
    hops: int
    edge_types: tuple[str, ...]
    fanout: int
    max_new: int
    timeout_s: float


@dataclass
class Expansion:
    candidates: list[Candidate]
    decisions: list[ExpansionDecision] = field(default_factory=list)
    events: list[TraceEvent] = field(default_factory=list)
    calls: int = 0
    links_to_present: dict[str, float] = field(default_factory=dict)


async def expand(
    backend: MemoryBackend,
    seeds: Sequence[str],
    limits: ExpansionLimits,
    *,
    present: Iterable[str] = (),
    filters: SearchFilters | None = None,
) -> Expansion:
    """Walk from `seeds`; return new candidates (never one already `present`).

    `links_to_present` maps a present candidate to the best edge weight that joins it to
    another seed: being linked to other good results is itself evidence (graph proximity).
    """
    result = Expansion(candidates=[])
    if not seeds or limits.hops <= 0:
        return result
    caps = backend.capabilities
    if not caps.graph:
        result.events.append(event(Stage.EXPANDER, EventKind.NO_GRAPH))
        return result
    allowed = tuple(t for t in limits.edge_types if not caps.edge_types or t in caps.edge_types)
    if not allowed:
        result.events.append(event(Stage.EXPANDER, EventKind.NO_EDGE_TYPE))
        return result
    try:
        with anyio.fail_after(limits.timeout_s):
            result.calls += 1
            found = await backend.neighbors(
                list(seeds), allowed, limits.hops, limits.fanout * len(seeds) * 3
            )
    except TimeoutError:
        timed_out = event(Stage.EXPANDER, EventKind.EXPANSION_TIMED_OUT, timeout_s=limits.timeout_s)
        result.events.append(timed_out)
        return result
    except STORE_ERRORS as exc:
        failed = event(Stage.EXPANDER, EventKind.EXPANSION_FAILED, error=describe(exc))
        result.events.append(failed)
        return result
    _decide(found, seeds, limits, set(present), filters, result)
    return result


def _decide(
    found: Sequence[Neighbor],
    seeds: Sequence[str],
    limits: ExpansionLimits,
    present: set[str],
    filters: SearchFilters | None,
    result: Expansion,
) -> None:
    per_seed: dict[str, int] = dict.fromkeys(seeds, 0)
    taken: set[str] = set()
    seed_set = set(seeds)
    # Stable: among equal hops and weight the store's order (nearest first, as the Protocol
    # says) is kept. Breaking those ties by id threw proximity away for an order that, with
    # store-made random ids, changes every time the same memories are written again.
    ordered = sorted(found, key=lambda n: (n.hops, -n.weight))
    for neighbor in ordered:
        mem_id = neighbor.memory.id

        def decide(accepted: bool, reason: str, n: Neighbor = neighbor) -> None:
            result.decisions.append(
                ExpansionDecision(
                    seed_id=n.seed_id,
                    neighbor_id=n.memory.id,
                    edge_type=n.edge_type,
                    hops=n.hops,
                    accepted=accepted,
                    reason=reason,
                )
            )

        if mem_id in present or mem_id in seed_set:
            weight = max(result.links_to_present.get(mem_id, 0.0), neighbor.weight)
            result.links_to_present[mem_id] = weight
            decide(False, "already a candidate")
        elif mem_id in taken:
            decide(False, "already expanded from another seed")
        elif neighbor.edge_type not in limits.edge_types:
            decide(False, f"edge type {neighbor.edge_type!r} not allowed")
        elif neighbor.hops > limits.hops:
            decide(False, f"beyond hop budget {limits.hops}")
        elif not matches(neighbor.memory, filters):
            decide(False, "excluded by filters")
        elif per_seed.get(neighbor.seed_id, 0) >= limits.fanout:
            decide(False, f"fan-out cap {limits.fanout} reached for seed")
        elif len(taken) >= limits.max_new:
            decide(False, f"expansion cap {limits.max_new} reached")
        else:
            per_seed[neighbor.seed_id] = per_seed.get(neighbor.seed_id, 0) + 1
            taken.add(mem_id)
            result.candidates.append(
                Candidate(
                    memory=neighbor.memory,
                    hops=neighbor.hops,
                    expanded_from=neighbor.seed_id,
                    edge_type=neighbor.edge_type,
                    edge_weight=neighbor.weight,
                )
            )
            decide(True, f"{neighbor.hops} hop(s) via {neighbor.edge_type}")

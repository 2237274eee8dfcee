"""The graph page's picture, laid out on the server: rings by hop around the centre.

The centre (the entity asked about, or the memory) sits in the middle; each hop is a ring
further out; on a ring, nodes follow the angle of the node they were reached from, so edges
stay short and rarely cross. Edge types get a colour class each (`edge-0` .. `edge-7`, in the
stylesheet) and a legend; memory types a node class. The template turns this into SVG.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from memory_orchestrator.faces.ui.views import memory_href, query_href
from memory_orchestrator.service.inspecting import Graph, GraphNode

__all__ = ["EDGE_COLOURS", "Drawing", "Line", "Spot", "draw"]

EDGE_COLOURS = 8
WIDTH, HEIGHT = 960, 640
_MARGIN = 60
_LABEL_CHARS = 24
_LABELLED_PER_RING = 14  # more than this on a ring: labels only in the tooltip


@dataclass(frozen=True)
class Spot:
    """A node, placed."""

    id: str
    x: float
    y: float
    r: float
    kind: str  # "entity" or the memory type
    label: str  # short, drawn when `labelled`
    title: str  # the whole text, in the tooltip
    href: str
    labelled: bool
    hops: int


@dataclass(frozen=True)
class Line:
    x1: float
    y1: float
    x2: float
    y2: float
    type: str
    colour: int
    title: str


@dataclass(frozen=True)
class Drawing:
    width: int
    height: int
    spots: tuple[Spot, ...]
    lines: tuple[Line, ...]
    legend: tuple[tuple[str, int], ...]  # edge type, colour class


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _LABEL_CHARS else flat[: _LABEL_CHARS - 1] + "…"


def _href(node: GraphNode) -> str:
    if node.memory is None:
        return query_href("/graph", entity=node.label)
    return memory_href(node.id)


def _angles(graph: Graph) -> dict[str, float]:
    """An angle per node: ring by ring, each ring ordered by its parents' angles."""
    parent: dict[str, str] = {}
    for edge in graph.edges:
        parent.setdefault(edge.target, edge.source)
    rings: dict[int, list[GraphNode]] = {}
    for node in graph.nodes:
        rings.setdefault(node.hops, []).append(node)
    angle: dict[str, float] = {}
    for hops in sorted(rings):
        ring = rings[hops]
        ring.sort(key=lambda n: (angle.get(parent.get(n.id, ""), 0.0), n.id))
        step = 2 * math.pi / max(1, len(ring))
        start = -math.pi / 2 + (step / 2 if hops % 2 else 0.0)
        for i, node in enumerate(ring):
            angle[node.id] = start + i * step
    return angle


def draw(graph: Graph, width: int = WIDTH, height: int = HEIGHT) -> Drawing:
    """Place every node and edge of `graph`."""
    angle = _angles(graph)
    depth = max((n.hops for n in graph.nodes), default=0)
    inner = 0 if sum(1 for n in graph.nodes if n.hops == 0) == 1 else 1
    radius = (min(width, height) / 2 - _MARGIN) / max(1, depth + inner)
    per_ring: dict[int, int] = {}
    for node in graph.nodes:
        per_ring[node.hops] = per_ring.get(node.hops, 0) + 1
    cx, cy = width / 2, height / 2
    spots: dict[str, Spot] = {}
    for node in graph.nodes:
        ring = (node.hops + inner) * radius
        kind = "entity" if node.memory is None else node.memory.type.value
        spots[node.id] = Spot(
            id=node.id,
            x=round(cx + ring * math.cos(angle[node.id]), 1),
            y=round(cy + ring * math.sin(angle[node.id]), 1),
            r=14.0 if node.hops == 0 else 9.0,
            kind=kind,
            label=_short(node.label),
            title=node.label,
            href=_href(node),
            labelled=node.hops == 0 or per_ring[node.hops] <= _LABELLED_PER_RING,
            hops=node.hops,
        )
    colours: dict[str, int] = {}
    lines = []
    for edge in graph.edges:
        a, b = spots.get(edge.source), spots.get(edge.target)
        if a is None or b is None:
            continue
        colour = colours.setdefault(edge.type, len(colours) % EDGE_COLOURS)
        lines.append(
            Line(a.x, a.y, b.x, b.y, edge.type, colour, f"{edge.type} (weight {edge.weight:g})")
        )
    return Drawing(
        width=width,
        height=height,
        spots=tuple(spots.values()),
        lines=tuple(lines),
        legend=tuple(colours.items()),
    )

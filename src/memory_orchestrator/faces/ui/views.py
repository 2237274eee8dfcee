"""What the templates draw, worked out in Python: score bars, stage bars, times, pages.

Numbers become geometry here (widths in pixels), so the templates only place what they are
given; nothing from a memory ever reaches an attribute but through the template's escaping.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

from memory_orchestrator.models import ScoreBreakdown, to_utc

__all__ = [
    "BAR_WIDTH",
    "Bar",
    "Pager",
    "Segment",
    "memory_href",
    "pretty_json",
    "query_href",
    "score_bar",
    "stage_bars",
    "when",
]

BAR_WIDTH = 240
# The signals the weighted formula adds, and the penalties it takes away (ScoreBreakdown
# field, weight key; both penalties have the noise weight).
_PARTS = (
    ("relevance", "relevance"),
    ("recency", "recency"),
    ("graph", "graph"),
    ("type_match", "type_match"),
    ("cross_reference", "cross_reference"),
)
_PENALTIES = (("duplicate_penalty", "noise"), ("noise_penalty", "noise"))


@dataclass(frozen=True)
class Segment:
    name: str
    value: float  # what it adds to (or takes from) the score: signal x weight
    signal: float  # the signal itself, in [0, 1]
    weight: float
    x: float
    width: float


@dataclass(frozen=True)
class Bar:
    """A score drawn as stacked parts (above) and penalties (below), on one scale."""

    parts: tuple[Segment, ...]
    penalties: tuple[Segment, ...]
    total: float
    total_x: float
    width: int
    label: str  # the whole breakdown in words, for screen readers and the tooltip


def score_bar(breakdown: ScoreBreakdown, width: int = BAR_WIDTH) -> Bar:
    weights = breakdown.weights
    most = sum(max(0.0, weights.get(key, 0.0)) for _, key in _PARTS) or 1.0
    scale = width / most

    def segments(names: tuple[tuple[str, str], ...]) -> tuple[Segment, ...]:
        out, x = [], 0.0
        for field, key in names:
            signal = float(getattr(breakdown, field))
            weight = weights.get(key, 0.0)
            value = signal * weight
            if value <= 0:
                continue
            w = min(value * scale, width - x)
            name = field.removesuffix("_penalty")
            out.append(Segment(name, round(value, 4), signal, weight, round(x, 2), round(w, 2)))
            x += w
        return tuple(out)

    parts, penalties = segments(_PARTS), segments(_PENALTIES)
    words = [f"{s.name} {s.value:.3f}" for s in parts]
    words += [f"minus {s.name} {s.value:.3f}" for s in penalties]
    total = breakdown.total
    return Bar(
        parts=parts,
        penalties=penalties,
        total=total,
        total_x=round(min(max(total, 0.0) * scale, width), 2),
        width=width,
        label=f"score {total:.3f}: " + ", ".join(words),
    )


@dataclass(frozen=True)
class StageBar:
    stage: str
    ms: float
    width: float


def stage_bars(timings: Mapping[str, float], width: int = BAR_WIDTH) -> list[StageBar]:
    """Time per stage, each against the total (or the slowest stage without one)."""
    stages = {k: v for k, v in timings.items() if k != "total"}
    top = timings.get("total") or max(stages.values(), default=0.0) or 1.0
    return [
        StageBar(stage, round(ms, 3), round(min(ms / top, 1.0) * width, 2))
        for stage, ms in stages.items()
    ]


def when(moment: datetime | None) -> str:
    """`2026-11-20 10:00 UTC`, or an empty string."""
    return to_utc(moment).strftime("%Y-%m-%d %H:%M UTC") if moment else ""


def memory_href(memory_id: str) -> str:
    """The page of a memory: the id quoted whole, so no id can leave the path."""
    return "/memories/" + quote(memory_id, safe="")


def query_href(path: str, **params: Any) -> str:
    """`path` with the given query parameters (None and empty values left out)."""
    kept = [
        (key, str(v))
        for key, value in params.items()
        for v in (value if isinstance(value, list | tuple) else [value])
        if v not in (None, "", False)
    ]
    return path + ("?" + urlencode(kept) if kept else "")


def pretty_json(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class Pager:
    """Where a page sits in a list, and the links around it."""

    offset: int
    limit: int
    total: int
    shown: int

    @property
    def first(self) -> int:
        return self.offset + 1 if self.shown else 0

    @property
    def last(self) -> int:
        return self.offset + self.shown

    @property
    def previous(self) -> int | None:
        return max(0, self.offset - self.limit) if self.offset > 0 else None

    @property
    def next(self) -> int | None:
        return self.offset + self.limit if self.offset + self.limit < self.total else None

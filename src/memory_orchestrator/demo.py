"""The built-in sample: a small, coherent team memory to try the orchestrator on.

The story (`demo_sample.json`, beside this module): a team builds "Project Atlas", an edge
gateway for the launch customer Acme Corp. Vendor X supplies the radio module and its
firmware; the firmware is unstable, Vendor X misses its support SLA, the Infra team escalates
a procurement risk, and the March delivery milestone is declared missed. Around that sit facts
(who is who, preferences), procedures (how to deploy atlas-core, flash firmware, escalate to
the vendor), resources (runbooks, dashboards), a few near-duplicates (to show de-duplication)
and some noise (to show it is filtered out).

Dates run from late July to 2026-11-20 (UTC). `SAMPLE` is in time order; `LINKS` holds explicit
relations as (source index, target index, relation, weight) into `SAMPLE`.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import TYPE_CHECKING, Any

from memory_orchestrator.models import NewMemory, WriteAction

if TYPE_CHECKING:
    from memory_orchestrator.service import Orchestrator

__all__ = ["DEFAULT_QUERY", "DEFAULT_TASK", "LINKS", "SAMPLE", "load_demo"]

DEFAULT_QUERY = "recent issues with Vendor X"
DEFAULT_TASK = "draft vendor update"


def _read() -> dict[str, Any]:
    text = resources.files("memory_orchestrator").joinpath("demo_sample.json")
    data: dict[str, Any] = json.loads(text.read_text(encoding="utf-8"))
    return data


def _memories(data: dict[str, Any]) -> tuple[NewMemory, ...]:
    return tuple(
        NewMemory(
            content=entry["content"],
            type=entry["type"],
            entities=entry["entities"],
            tags=entry["tags"],
            created_at=entry["at"],
            source=data["source"],
            importance=entry.get("importance"),
        )
        for entry in data["memories"]
    )


def _links(data: dict[str, Any]) -> tuple[tuple[int, int, str, float], ...]:
    index = {entry["key"]: i for i, entry in enumerate(data["memories"])}
    return tuple(
        (index[link["from"]], index[link["to"]], link["relation"], float(link["weight"]))
        for link in data["links"]
    )


_DATA = _read()
SAMPLE: tuple[NewMemory, ...] = _memories(_DATA)
LINKS: tuple[tuple[int, int, str, float], ...] = _links(_DATA)


async def load_demo(orchestrator: Orchestrator) -> int:
    """Write `SAMPLE` to the orchestrator's store and add `LINKS`; return how many were written.

    Memories the store skipped (e.g. as duplicates) are not counted; links to them go to the
    memory the store kept. Links are left out when the store has no graph.
    """
    outcomes = await orchestrator.ingest(SAMPLE, LINKS)
    return sum(outcome.action is not WriteAction.SKIPPED for outcome in outcomes)

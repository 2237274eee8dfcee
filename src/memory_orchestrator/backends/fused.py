"""Several stores behind one `MemoryBackend` (Memory Fabric's unified search, RRF fusion).

- Retrieval fans out to every member at once, each bounded by `MEMBER_TIMEOUT_S`; the lists
  are fused by weighted reciprocal-rank fusion (`weight / (rrf_k + rank)`, summed when one id
  comes back twice). The same fact held by two stores comes back once from each, with its
  own `store`: the pipeline's deduper merges them into one item marked cross-validated.
- Ids are qualified as `<member>:<id>`, so reads, neighbours, links and forgets go back to the
  store that holds the memory. Writes go to the primary member only (with `mirror_writes`, to
  every member: the primary's outcome is the answer, the others' failures are noted).
- A member that fails or is slow does not fail the request: the others answer, the failure
  is named in `notes` (copied into the trace), a search says it left the member out
  (`base.left_out`: the answer's first line says part of the memory could not be searched)
  and `health` reports degraded. When every member fails, the call fails.
Capabilities: a filter is claimed only when every member applies it (otherwise the pipeline
filters); graph, timestamps and the entity index when any member has them; writing ones are
the primary's; listing never (whatever the members can do, the fused store lists nothing).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import anyio

from memory_orchestrator.backends.base import MemoryBackend, left_out, superseding
from memory_orchestrator.errors import BackendError, CapabilityMissing, describe
from memory_orchestrator.models import (
    SUPERSEDES_KEY,
    Capabilities,
    Edge,
    HealthCheck,
    Memory,
    MetaValue,
    Neighbor,
    NewMemory,
    SearchFilters,
    SearchHit,
    Status,
    WriteOutcome,
)

if TYPE_CHECKING:
    from memory_orchestrator.settings import Settings

T = TypeVar("T")
NAME = "fused"
# Per member and call: below `retrieval.timeout_s`'s default, so a slow member is left out
# (the others answer, the trace says so) before the whole fused call runs out of time.
MEMBER_TIMEOUT_S = 3.0
log = logging.getLogger(__name__)
SEP = ":"


@dataclass
class Member:
    label: str
    backend: MemoryBackend
    weight: float = 1.0


def _qualify(label: str, memory: Memory) -> Memory:
    by = f"{label}{SEP}{memory.superseded_by}" if memory.superseded_by else None
    return memory.model_copy(
        update={"id": f"{label}{SEP}{memory.id}", "store": label, "superseded_by": by}
    )


def _for_member(memory: NewMemory, label: str) -> NewMemory:
    """`memory` as member `label` gets it: a `supersedes` id of that member unqualified, of
    another member left out (ids are per store)."""
    named = memory.metadata.get(SUPERSEDES_KEY)
    if not isinstance(named, str):
        return memory
    mine, sep, inner = named.partition(SEP)
    meta = {k: v for k, v in memory.metadata.items() if k != SUPERSEDES_KEY}
    if sep and mine == label and inner:
        meta[SUPERSEDES_KEY] = inner
    return memory.model_copy(update={"metadata": meta})


class FusedBackend:
    """A `MemoryBackend` over several members (see the module docstring)."""

    name = NAME

    def __init__(
        self,
        members: Sequence[Member],
        *,
        primary: str | None = None,
        timeout_s: float = MEMBER_TIMEOUT_S,
        rrf_k: int = 60,
        mirror_writes: bool = False,
        mirror_timeout_s: float = 600.0,
    ) -> None:
        if not members:
            raise ValueError("fused: at least one member store is needed")
        labels = [m.label for m in members]
        if len(set(labels)) != len(labels) or any(SEP in label for label in labels):
            raise ValueError(f"fused: member labels must be unique and free of {SEP!r}: {labels}")
        self.members = list(members)
        self.by_label = {m.label: m for m in self.members}
        if primary and primary not in self.by_label:
            raise ValueError(f"fused: primary {primary!r} is not a member")
        self.primary = self.by_label[primary] if primary else self.members[0]
        self.timeout_s = timeout_s
        self.rrf_k = rrf_k
        self.mirror_writes = mirror_writes
        self.mirror_timeout_s = mirror_timeout_s
        self._written: dict[str, tuple[tuple[str, ...], dict[str, MetaValue]]] = {}
        self.failures: dict[str, str] = {}  # label -> why its last call failed
        caps = [m.backend.capabilities for m in self.members]
        prim = self.primary.backend.capabilities
        self.capabilities = Capabilities(
            graph=any(c.graph for c in caps),
            timestamps=any(c.timestamps for c in caps),
            memory_types=all(c.memory_types for c in caps),
            bulk_write=prim.bulk_write,
            link=prim.link,
            time_filter=all(c.time_filter for c in caps),
            entity_filter=all(c.entity_filter for c in caps),
            entity_index=any(c.entity_index for c in caps),
            soft_delete=prim.soft_delete,
            delete=all(c.delete for c in caps),  # a memory is purged in the member holding it
            supersede=prim.supersede,  # writes go to the primary, so do corrections
            listing=False,  # no list_memories: one cursor cannot span the members' listings
            edge_types=tuple(dict.fromkeys(t for c in caps for t in c.edge_types)),
        )

    @property
    def notes(self) -> tuple[str, ...]:
        notes = [f"{m.label}: {n}" for m in self.members for n in m.backend.notes]
        notes += [f"fused: {label} left out ({why})" for label, why in self.failures.items()]
        return tuple(notes)

    # ------------------------------------------------------------------ plumbing

    async def _each(
        self,
        members: Sequence[Member],
        call: Callable[[Member], Awaitable[T]],
        timeout_s: float | None = None,
        failed: dict[str, str] | None = None,
    ) -> dict[str, T]:
        """`call` on every member at once; failures and timeouts are recorded (in
        `self.failures`, and in `failed` for this call alone), not raised."""
        results: dict[str, T] = {}
        failed = {} if failed is None else failed

        async def one(member: Member) -> None:
            limit = self.timeout_s if timeout_s is None else timeout_s
            try:
                with anyio.fail_after(limit):
                    results[member.label] = await call(member)
                self.failures.pop(member.label, None)
                return
            except TimeoutError:
                failed[member.label] = f"no answer within {limit:g}s"
            except (BackendError, OSError) as exc:
                failed[member.label] = describe(exc)
            self.failures[member.label] = failed[member.label]

        async with anyio.create_task_group() as tg:
            for member in members:
                tg.start_soon(one, member)
        return results

    def _split(self, ids: Sequence[str]) -> dict[str, list[str]]:
        """Qualified ids grouped by member (unknown members and bare ids are left out)."""
        grouped: dict[str, list[str]] = {}
        for qualified in ids:
            if not isinstance(qualified, str):
                continue
            label, sep, inner = qualified.partition(SEP)
            if sep and inner and label in self.by_label:
                grouped.setdefault(label, []).append(inner)
        return grouped

    def _all_failed(self, asked: Sequence[Member], got: Mapping[str, object]) -> None:
        if asked and not got:
            why = "; ".join(f"{m.label}: {self.failures.get(m.label, '?')}" for m in asked)
            raise BackendError(f"fused: every store failed ({why})", transient=True)

    # ------------------------------------------------------------------ reading

    async def search(
        self, query: str, top_k: int, filters: SearchFilters | None = None
    ) -> list[SearchHit]:
        if not isinstance(query, str) or top_k < 1:
            return []
        failed: dict[str, str] = {}
        lists = await self._each(
            self.members, lambda m: m.backend.search(query, top_k, filters), failed=failed
        )
        self._all_failed(self.members, lists)
        for label, why in failed.items():  # the others answered: a partial answer, said so
            left_out(f"{label}: {why}")
        fused: dict[str, tuple[float, Memory]] = {}
        for label, hits in lists.items():
            weight = self.by_label[label].weight
            for hit in hits:
                memory = self._restore(_qualify(label, hit.memory))
                score = weight / (self.rrf_k + hit.rank)
                before = fused.get(memory.id)
                fused[memory.id] = (score + (before[0] if before else 0.0), memory)
        ranked = sorted(fused.values(), key=lambda sm: (-sm[0], sm[1].id))[:top_k]
        return [
            SearchHit(memory=m, rank=n, score=round(s, 8)) for n, (s, m) in enumerate(ranked, 1)
        ]

    async def get_memories(self, ids: Sequence[str]) -> list[Memory]:
        grouped = self._split(ids)
        asked = [self.by_label[label] for label in grouped]
        found = await self._each(asked, lambda m: m.backend.get_memories(grouped[m.label]))
        self._all_failed(asked, found)
        by_id = {
            q.id: q
            for label, memories in found.items()
            for q in (self._restore(_qualify(label, x)) for x in memories)
        }
        return [by_id[i] for i in dict.fromkeys(ids) if i in by_id]

    async def neighbors(
        self,
        node_ids: Sequence[str],
        edge_types: Sequence[str] | None = None,
        hops: int = 1,
        limit: int = 50,
    ) -> list[Neighbor]:
        grouped = self._split(node_ids)
        asked = [self.by_label[label] for label in grouped]
        found = await self._each(
            asked, lambda m: m.backend.neighbors(grouped[m.label], edge_types, hops, limit)
        )
        out: list[Neighbor] = []
        for label, neighbours in found.items():
            for n in neighbours:
                out.append(
                    n.model_copy(
                        update={
                            "memory": self._restore(_qualify(label, n.memory)),
                            "seed_id": f"{label}{SEP}{n.seed_id}",
                            "via_id": f"{label}{SEP}{n.via_id}",
                        }
                    )
                )
        out.sort(key=lambda n: (n.hops, -n.weight))
        return out[:limit]

    async def known_entities(self, limit: int = 500) -> list[str]:
        found = await self._each(self.members, lambda m: m.backend.known_entities(limit))
        merged: dict[str, str] = {}
        for names in found.values():
            for name in names:
                merged.setdefault(name.casefold(), name)
        return list(merged.values())[: max(limit, 0)]

    # ------------------------------------------------------------------ writing (primary)

    def _qualify_outcome(self, outcome: WriteOutcome) -> WriteOutcome:
        label = self.primary.label
        existing = f"{label}{SEP}{outcome.existing_id}" if outcome.existing_id else None
        return outcome.model_copy(
            update={"id": f"{label}{SEP}{outcome.id}", "existing_id": existing}
        )

    async def write(self, memory: NewMemory) -> WriteOutcome:
        return (await self.write_many([memory]))[0]

    async def write_many(self, memories: Sequence[NewMemory]) -> list[WriteOutcome]:
        """To the primary; with `mirror_writes`, to the other members too (their failures are
        noted, not raised: the primary's outcome is the answer)."""
        batch = list(memories)
        mirrored: dict[str, list[WriteOutcome]] = {}
        if self.mirror_writes:
            others = [m for m in self.members if m is not self.primary]
            mirrored = await self._each(
                others,
                lambda m: m.backend.write_many([_for_member(x, m.label) for x in batch]),
                self.mirror_timeout_s,
            )
        primary = [_for_member(x, self.primary.label) for x in batch]
        outcomes = [
            self._qualify_outcome(o) for o in await self.primary.backend.write_many(primary)
        ]
        for label, copies in mirrored.items():
            for memory, copy in zip(batch, copies, strict=False):
                copy_id = copy.existing_id or copy.id
                if copy_id:
                    self._written[f"{label}{SEP}{copy_id}"] = (tuple(memory.tags), memory.metadata)
        return outcomes

    def _restore(self, memory: Memory) -> Memory:
        """A mirrored copy gets back the tags and metadata it was written with, which a store
        such as kg-memory cannot keep (known to this process only)."""
        written = self._written.get(memory.id)
        if written is None:
            return memory
        tags, meta = written
        return memory.model_copy(
            update={
                "tags": tuple(dict.fromkeys((*memory.tags, *tags))),
                "metadata": {**meta, **memory.metadata},
            }
        )

    async def link(
        self,
        source_id: str,
        target_id: str,
        relation: str,
        weight: float = 1.0,
        meta: dict[str, MetaValue] | None = None,
    ) -> Edge:
        grouped = self._split([source_id, target_id])
        if len(grouped) != 1 or sum(len(v) for v in grouped.values()) != 2:
            raise CapabilityMissing("fused: a link joins two memories of the same store")
        ((label, (source, target)),) = grouped.items()
        edge = await self.by_label[label].backend.link(source, target, relation, weight, meta)
        return edge.model_copy(update={"source_id": source_id, "target_id": target_id})

    async def supersede(self, old_id: str, new_id: str) -> None:
        """The mark, by the member holding both memories (`SupersedingBackend`)."""
        grouped = self._split([old_id, new_id])
        if len(grouped) != 1 or sum(len(v) for v in grouped.values()) != 2:
            raise CapabilityMissing("fused: a correction joins two memories of the same store")
        ((label, (old, new)),) = grouped.items()
        member = superseding(self.by_label[label].backend)
        if member is None:
            raise CapabilityMissing(f"fused: {label} cannot mark a memory superseded")
        await member.supersede(old, new)

    async def forget(self, memory_id: str) -> bool:
        grouped = self._split([memory_id])
        if not grouped:
            return False
        ((label, (inner,)),) = grouped.items()
        return await self.by_label[label].backend.forget(inner)

    # ------------------------------------------------------------------ lifecycle

    async def health(self) -> list[HealthCheck]:
        start = time.perf_counter()
        found = await self._each(self.members, lambda m: m.backend.health())
        checks: list[HealthCheck] = []
        bad: list[str] = []
        for member in self.members:
            member_checks = found.get(member.label)
            if member_checks is None:
                why = self.failures.get(member.label, "no answer")
                checks.append(HealthCheck(name=f"{member.label}", status=Status.ERROR, detail=why))
                bad.append(member.label)
                continue
            for check in member_checks:
                checks.append(check.model_copy(update={"name": f"{member.label}/{check.name}"}))
            if any(c.status is not Status.OK for c in member_checks):
                bad.append(member.label)
        ms = round((time.perf_counter() - start) * 1000, 3)
        if len(bad) == len(self.members):
            status = Status.ERROR
        elif bad:
            status = Status.DEGRADED
        else:
            status = Status.OK
        weights = ", ".join(f"{m.label} x{m.weight:g}" for m in self.members)
        detail = f"{len(self.members) - len(bad)}/{len(self.members)} stores ok ({weights});"
        detail += f" writes go to {self.primary.label}"
        if bad:
            detail += f"; not ok: {', '.join(bad)}"
        return [HealthCheck(name=NAME, status=status, detail=detail, latency_ms=ms), *checks]

    async def close(self) -> None:
        # each closed whatever the others raise (a bug in one is raised once all are closed)
        async with AsyncExitStack() as closing:
            for member in reversed(self.members):
                closing.push_async_callback(_close, member)


async def _close(member: Member) -> None:
    try:
        await member.backend.close()
    except (BackendError, OSError) as exc:  # closing one must not keep the others open
        log.warning("fused backend: closing %s failed: %s", member.label, exc)


def from_settings(settings: Settings) -> FusedBackend:
    """The registry's factory: `[fused]` names the member backends, weights and primary."""
    from memory_orchestrator.backends import registry  # lazily: the registry imports us

    section = settings.fused
    if not section.stores:
        raise ValueError("fused backend: [fused] stores is empty (e.g. stores = [{backend = ...}])")
    members = []
    for store in section.stores:
        if store.backend == NAME:
            raise ValueError("fused backend: a member cannot itself be `fused`")
        label = store.label or store.backend
        members.append(Member(label, registry.create(store.backend, settings), store.weight))
    return FusedBackend(
        members,
        rrf_k=settings.ranking.rrf_k,
        mirror_writes=section.mirror_writes,
    )

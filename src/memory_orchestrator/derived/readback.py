"""The derived indexes' candidates as the store holds them, read back once per store version.

The local and semantic indexes are caches: a memory they list may have been deleted or changed
in the store since they took it in, so their candidates are read back from the store before
they count (`DerivedIndexes.candidate_lists`). Answers come back to the same memories question
after question (a conversation's turns, a project's facts), and that read costs a store call
(a worker thread, a query, the rows' checks) on every query.

`ReadBack` keeps what the store answered while the store says nothing changed since: with a
store that can tell (`VersionedBackend.data_version`: the embedded store's SQLite file), a
query reads back only the memories not read at this version, and none when all were. Any
change committed to the store, by this process or another, gives a new version and the kept
memories are dropped, so an answer never holds a copy older than the store's. A store that
cannot tell is read every time, as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Sequence

from memory_orchestrator.models import Memory

Read = Callable[[list[str]], Awaitable[list[Memory] | None]]  # None: the read failed

_KEEP = 10_000  # memories kept at most (ids read back at one version), then begun anew


class ReadBack:
    """The memories read back from one store at its current version."""

    def __init__(self, version: Callable[[], Hashable | None] | None, *, keep: int = _KEEP) -> None:
        self._version, self._keep = version, keep
        self._at: Hashable | None = None  # the version the kept memories were read at
        self._kept: dict[str, Memory] = {}
        self._absent: set[str] = set()  # asked at that version, not live in the store
        self.reads = 0  # memories read from the store (for tests and benchmarks)
        self.kept = 0  # memories answered from what was kept

    async def memories(self, ids: Sequence[str], read: Read) -> dict[str, Memory] | None:
        """The live memories among `ids`, by id: those read at the store's current version,
        and the rest read now with `read` (None, as its answer, when it failed)."""
        at = self._version() if self._version is not None else None
        if at is not None and at != self._at:
            self._at, self._kept, self._absent = at, {}, set()
        # No version now (a lock held for a moment, the file away): everything is read, and
        # what was kept stays for a later query that finds the same version again
        kept, absent = self._kept, self._absent
        missing = [i for i in ids if i not in kept and i not in absent] if at is not None else ids
        found: dict[str, Memory] = {}
        if missing:
            got = await read(list(missing))
            if got is None:
                return None
            found = {m.id: m for m in got}
            self.reads += len(missing)
            # kept only if no other query saw a newer version meanwhile (the store may have
            # changed after this read began)
            if at is not None and self._at == at:
                if len(self._kept) + len(found) > self._keep:
                    self._kept, self._absent = {}, set()
                self._kept.update(found)
                self._absent.update(i for i in missing if i not in found)
        self.kept += len(ids) - len(missing)
        out: dict[str, Memory] = {}
        for i in ids:
            memory = found.get(i) or kept.get(i)
            if memory is not None:
                out[i] = memory
        return out

"""The write side of `MnemonBackend`: remember, import, link, supersede.

One deduplicator decides, the orchestrator's. Mnemon has its own (`remember` and `import`
compare a new text with the closest memories); some builds answer a near-duplicate by
soft-deleting the older memory (`updated`), which loses distinct facts that differ by a
number ("Sprint 2 retro" replaced "Sprint 1 retro"). So every write goes with `--no-diff`
(where a build refuses the flag, Mnemon's own check applies and a note says so), and the
adapter skips only byte-identical repeats of a live memory itself (the store file read once
per write or batch; without direct reads, `search` per single write): what v0.2.9's own
check does. Restatements and corrections are the orchestrator's to judge (`pipeline.writer`);
a correction reaches the store as `supersede(old, new)`.

Corrections (`supersede`, and links named `update` or `supersedes`): a `supersedes` edge from
the new memory to the old one; on builds without that edge type, a `semantic` edge whose
metadata says `relation: supersedes` and names the old memory under `supersedes` (Mnemon
writes links both ways, so the direction is kept in the metadata). The old memory stays in
the store, so `history` still shows it; reads mark it `superseded_by` from the store file.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from memory_orchestrator.backends import kit
from memory_orchestrator.backends.mnemon import store_file
from memory_orchestrator.backends.mnemon.features import Features
from memory_orchestrator.backends.mnemon.mapping import (
    NATIVE_EDGES,
    RELATIONS,
    category_and_tags,
    check_new,
    import_row,
    importance_out,
    linked_edge,
    outcome,
)
from memory_orchestrator.backends.mnemon.process import MnemonRunner
from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import Edge, MetaValue, NewMemory, WriteAction, WriteOutcome
from memory_orchestrator.settings import MnemonSettings

T = TypeVar("T")
IMPORT_CHUNK = 1000
CORRECTIONS = frozenset({"update", "supersedes"})  # relations that mark the target corrected


class Host(Protocol):
    """What the write side uses of its `MnemonBackend`."""

    settings: MnemonSettings
    features: Features
    runner: MnemonRunner
    db_path: Path

    async def call(
        self,
        command: str,
        flags: Sequence[str] = (),
        positional: Sequence[str] = (),
        *,
        write: bool = False,
        timeout: float | None = None,
        held: bool = False,
    ) -> Any: ...

    async def direct(self, read: Callable[[sqlite3.Connection | None], T]) -> T | None: ...

    def written(self) -> None: ...

    def note(self, text: str) -> None: ...


def _skipped(memory_id: str) -> WriteOutcome:
    detail = f"the store already holds this text as {memory_id}; nothing written"
    return WriteOutcome(
        id=memory_id, action=WriteAction.SKIPPED, existing_id=memory_id, detail=detail
    )


class Writes:
    """Remember, import, link and supersede for one backend (see the module docstring)."""

    def __init__(self, host: Host) -> None:
        self.host = host

    # ------------------------------------------------------------------ one memory

    async def write(self, memory: NewMemory) -> WriteOutcome:
        check_new(memory)
        host = self.host
        async with host.runner.write_lock(host.db_path):
            copy = await self._copy_of(memory.content)
            if copy is not None:
                return _skipped(copy)
            if memory.created_at is not None:  # `or_else` falls back where import is missing
                return await host.features.or_else(
                    "import",
                    "a memory's created_at is not kept (remember has no time flag)",
                    lambda: self._first(self._import([memory])),
                    lambda: self._remember(memory),
                )
            return await self._remember(memory)

    @staticmethod
    async def _first(outcomes: Awaitable[list[WriteOutcome]]) -> WriteOutcome:
        return (await outcomes)[0]

    async def _copy_of(self, content: str) -> str | None:
        """The live memory holding `content` byte for byte: from the store file, else the
        closest `search` results."""
        found = await self.host.direct(lambda conn: store_file.exact_copies(conn, [content]))
        if found is not None:
            return found.get(content)
        rows = await self.host.call("search", ["--limit", "20"], [content])
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict) and row.get("content") == content and row.get("id"):
                return str(row["id"])
        return None

    async def _no_diff(
        self, command: str, flags: list[str], positional: list[str], **options: Any
    ) -> Any:
        """`command` with `--no-diff`, and without it on a build that refuses the flag."""
        return await self.host.features.or_else(
            "no-diff",
            "Mnemon's own duplicate check applies (builds of June 2026 replace near-duplicates)",
            lambda: self.host.call(command, [*flags, "--no-diff"], positional, **options),
            lambda: self.host.call(command, flags, positional, **options),
        )

    async def _remember(self, memory: NewMemory) -> WriteOutcome:
        category, tags = category_and_tags(memory)
        flags = ["--cat", category]
        if memory.importance is not None:
            flags += ["--imp", str(importance_out(memory.importance))]
        if tags:
            flags += ["--tags", ",".join(tags)]
        if memory.entities:
            flags += ["--entities", ",".join(memory.entities)]
        if memory.source:
            flags += ["--source", memory.source]
        text = [memory.content]
        data = await self._no_diff("remember", flags, text, write=True, held=True)
        self.host.written()
        if not isinstance(data, dict):
            raise BackendError("mnemon remember printed no JSON object")
        return outcome(data, "remember")

    # ------------------------------------------------------------------ many

    async def write_many(self, memories: Sequence[NewMemory]) -> list[WriteOutcome]:
        batch = list(memories)
        for index, memory in enumerate(batch):
            check_new(memory, index)
        if not batch:
            return []
        host = self.host

        async def imported() -> list[WriteOutcome]:
            outcomes: list[WriteOutcome] = []
            for start in range(0, len(batch), IMPORT_CHUNK):
                async with host.runner.write_lock(host.db_path):
                    outcomes += await self._import_new(batch[start : start + IMPORT_CHUNK])
            return outcomes

        async def one_by_one() -> list[WriteOutcome]:
            return [await self.write(m) for m in batch]

        return await host.features.or_else(
            "import", "write_many runs one remember per memory", imported, one_by_one
        )

    async def _import_new(self, batch: list[NewMemory]) -> list[WriteOutcome]:
        """One `import` of the memories in `batch` that are not byte-identical repeats of a
        live memory or of an earlier one in the batch; the repeats are skipped."""
        contents = [m.content for m in batch]
        held = await self.host.direct(lambda conn: store_file.exact_copies(conn, contents))
        if held is None:
            held = {}
            self.host.note(
                "write_many: byte-identical repeats are not looked for without direct reads"
            )
        first: dict[str, int] = {}
        fresh = [
            i
            for i, text in enumerate(contents)
            if text not in held and first.setdefault(text, i) == i
        ]
        done = dict(zip(fresh, await self._import([batch[i] for i in fresh]), strict=True))
        outcomes = []
        for index, text in enumerate(contents):
            if index in done:
                outcomes.append(done[index])
            else:
                outcomes.append(_skipped(held.get(text) or done[first[text]].id))
        return outcomes

    async def _import(self, batch: list[NewMemory]) -> list[WriteOutcome]:
        if not batch:
            return []
        draft = {"schema_version": "1", "insights": [import_row(m) for m in batch]}
        with tempfile.TemporaryDirectory(prefix="mnemon-import-") as folder:
            path = Path(folder) / "draft.json"
            path.write_text(json.dumps(draft, ensure_ascii=False), encoding="utf-8")
            timeout = self.host.settings.timeout_s + 0.05 * len(batch)
            data = await self._no_diff(
                "import", [], [str(path)], write=True, timeout=timeout, held=True
            )
        self.host.written()
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            raise BackendError("mnemon import printed no result list")
        rows = sorted(
            (r for r in data["results"] if isinstance(r, dict)), key=lambda r: r.get("index", 0)
        )
        failed = [r for r in rows if r.get("error") or not r.get("action")]
        if failed or len(rows) != len(batch):
            first = failed[0].get("error") if failed else "result rows missing"
            raise BackendError(
                f"mnemon import: {len(failed) or len(batch) - len(rows)} of {len(batch)}"
                f" memories failed (first: {first}); the others were stored (a retry skips"
                " them as repeats)",
                transient="locked" in str(first),
            )
        return [outcome(r, "import") for r in rows]

    # ------------------------------------------------------------------ edges

    async def link(
        self,
        source_id: str,
        target_id: str,
        relation: str,
        weight: float = 1.0,
        meta: dict[str, MetaValue] | None = None,
    ) -> Edge:
        relation = kit.checked_edge(source_id, target_id, relation, weight, argv_safe=True).type
        kind = RELATIONS.get(relation, relation if relation in NATIVE_EDGES else "semantic")
        metadata = {k: str(v) for k, v in (meta or {}).items() if v is not None}
        if kind != relation:
            metadata["relation"] = relation
        if kind == "supersedes":
            return await self._supersedes(source_id, target_id, weight, metadata)
        if relation not in NATIVE_EDGES:
            found = await self.host.direct(
                lambda c: store_file.edge_between(c, source_id, target_id, kind)
            )
            if isinstance(found, Edge) and found.meta.get("relation", relation) == relation:
                return found  # Mnemon linked the pair itself (e.g. by a shared entity)
            if isinstance(found, Edge) and "supersedes" in found.meta:
                self.host.note(  # one edge per pair and type: the correction is kept
                    "a link was not written: Mnemon keeps one `semantic` edge per pair, and"
                    " that pair's marks a correction"
                )
                return found
        data = await self.host.call(
            "link",
            ["--type", kind, *_weighed(weight, metadata)],
            [source_id, target_id],
            write=True,
        )
        self.host.written()
        return linked_edge(data, source_id, target_id, kind, weight)

    async def _supersedes(
        self, source_id: str, target_id: str, weight: float, metadata: dict[str, str]
    ) -> Edge:
        """`source_id` corrects `target_id`: a `supersedes` edge, else the `semantic` one of
        the module docstring."""
        ends = [source_id, target_id]
        fallback = {"relation": "supersedes", **metadata, "supersedes": target_id}
        data = await self.host.features.or_else(
            "supersedes",
            "corrections are `semantic` links naming the corrected memory in their metadata",
            lambda: self.host.call(
                "link", ["--type", "supersedes", *_weighed(weight, metadata)], ends, write=True
            ),
            lambda: self.host.call(
                "link", ["--type", "semantic", *_weighed(weight, fallback)], ends, write=True
            ),
        )
        self.host.written()
        kind = "supersedes" if self.host.features.has("supersedes") else "semantic"
        return linked_edge(data, source_id, target_id, kind, weight)

    async def supersede(self, old_id: str, new_id: str) -> None:
        """Mark `old_id` corrected by `new_id` (`SupersedingBackend`); nothing runs when the
        store file already says so (the write path's `supersedes` link made the mark)."""
        if len(kit.clean_ids([old_id, new_id], argv_safe=True)) != 2:
            raise BackendError("supersede: two different memory ids are needed")
        marks = await self.host.direct(lambda c: store_file.superseded_by(c, [old_id]))
        if marks is not None and marks.get(old_id, ("", None))[0] == new_id:
            return
        await self._supersedes(new_id, old_id, 1.0, {})


def _weighed(weight: float, metadata: dict[str, str]) -> list[str]:
    extra = ["--weight", f"{weight:.6g}"]
    if metadata:
        extra += ["--meta", json.dumps(metadata, ensure_ascii=False)]
    return extra

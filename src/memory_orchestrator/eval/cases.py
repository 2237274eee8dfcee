"""The records every dataset loader produces: cases, their memories, questions and write
checks (see `datasets` for the LoCoMo loader and `jsonl` for the hand-made format)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from memory_orchestrator.models import Memory, NewMemory

__all__ = [
    "Dataset",
    "EvalCase",
    "EvalMemory",
    "EvalQuestion",
    "WriteCheck",
    "memory_keys",
]


@dataclass(frozen=True)
class EvalMemory:
    """One memory to ingest, with the dataset key that identifies it."""

    key: str
    memory: NewMemory
    # Knowledge-update sets (written one by one through memory_write): what the write should
    # answer, the key of the memory it should supersede, the key of a look-alike it must not.
    expect: Literal["added", "skipped", "updated"] | None = None
    supersedes: str | None = None
    lookalike_of: str | None = None


@dataclass(frozen=True)
class EvalQuestion:
    """One query. `evidence` holds the keys of the memories that answer it; a question with
    none left after cleaning carries `skip_reason` and is counted, not asked."""

    id: str
    text: str
    evidence: tuple[str, ...]
    category: str
    as_of: datetime | None = None  # overrides the case's `as_of`
    skip_reason: str | None = None
    stale: tuple[str, ...] = ()  # keys of corrected memories that must not rank above evidence


@dataclass(frozen=True)
class WriteCheck:
    """A check of the write path: write `memory` and expect `expect`.

    `duplicate_of` names (by key) the memory the write should be found to duplicate, for
    "skipped" and "updated"; `on_duplicate` is the policy the write is made with.
    """

    id: str
    memory: NewMemory
    expect: Literal["added", "skipped", "updated"]
    duplicate_of: str | None = None
    on_duplicate: Literal["skip", "update"] | None = None


@dataclass(frozen=True)
class EvalCase:
    """One store's worth: memories, the questions asked of them, then the write checks."""

    id: str
    memories: tuple[EvalMemory, ...]
    questions: tuple[EvalQuestion, ...]
    as_of: datetime
    write_checks: tuple[WriteCheck, ...] = ()
    ingest: Literal["bulk", "write"] = "bulk"  # write: one by one through memory_write, in order


@dataclass(frozen=True)
class Dataset:
    """Cases plus how to read them: which categories make the headline, which stand apart."""

    name: str
    cases: tuple[EvalCase, ...]
    key_field: str
    tag_prefix: str
    headline_categories: tuple[str, ...]
    apart_categories: Mapping[str, str] = field(default_factory=dict)  # category -> label
    category_names: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def keys_of(self, memory: Memory) -> set[str]:
        return memory_keys(memory, self.key_field, self.tag_prefix)


def memory_keys(memory: Memory, key_field: str, tag_prefix: str) -> set[str]:
    """The dataset keys a stored memory carries, from its metadata and its tags."""
    keys = {t[len(tag_prefix) :] for t in memory.tags if t.startswith(tag_prefix)}
    value = memory.metadata.get(key_field)
    if isinstance(value, str) and value:
        keys.add(value)
    return keys

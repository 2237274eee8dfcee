"""Hand-made evaluation sets: one JSON object per line.

Blank lines and lines starting with `#` are ignored. Four kinds of record, told apart by
their first-level key:

    {"case": "atlas-team", "as_of": "2026-03-20T17:00:00Z", "description": "...",
     "ingest": "write"}
        Starts a case: a fresh store of its own. Records before any case line belong to the
        case "default". `as_of` ("now" for "last week" and for recency) is optional: it
        defaults to the newest `created_at` among the case's memories. `ingest` is "bulk"
        (default: stored as given) or "write": each memory written through `memory_write`, in
        file order, so the write path decides (a knowledge-update set).
    {"memories": [{"id": "m1", "content": "...", "type": "episodic", "entities": ["Dana"],
                   "tags": [], "created_at": "2026-03-02T10:00:00Z"}, ...]}
    {"memory": {"id": "m2", "content": "..."}}
        Memories to ingest. `id` (unique in the case, no commas) and `content` are required;
        the other fields are those of `memory_write` (type, entities, tags, created_at,
        source, importance, confidence, metadata). A memory without `created_at` is dated
        at the case's `as_of`. In a "write" case a memory may also say what its write must
        answer: "expect" (added / skipped / updated), "supersedes" (the key of the memory it
        corrects) and "lookalike_of" (the key of a close memory it must leave alone).
    {"query": "what did Dana decide about the firmware?", "relevant": ["m1", "m7"],
     "category": "direct", "as_of": "...", "id": "q1"}
        A question and the ids of the memories that answer it. `category` (free text, e.g.
        direct / multi_hop / episodic) groups the per-category report; `as_of` overrides
        the case's. A query with an empty `relevant` list is skipped and counted. `"stale":
        ["m0"]` names corrected memories that must not rank above the relevant ones.
    {"write": {"content": "...", "entities": ["Dana"]}, "expect": "skipped",
     "duplicate_of": "m1", "on_duplicate": "skip", "id": "w1"}
        A check of the write path, run through `memory_write` after the case's queries:
        `expect` is added / skipped / updated; `duplicate_of` (optional) is the id of the
        memory the write must be found to duplicate.

Every id a query or a write check names must be a memory of the same case.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memory_orchestrator.errors import DatasetError
from memory_orchestrator.eval.cases import (
    Dataset,
    EvalCase,
    EvalMemory,
    EvalQuestion,
    WriteCheck,
)
from memory_orchestrator.models import MAX_QUERY_CHARS, NewMemory, describe_errors, to_utc

__all__ = ["KEY_FIELD", "TAG_PREFIX", "load_jsonl", "parse_jsonl"]

KEY_FIELD = "eval_id"
TAG_PREFIX = "eval:"
DEFAULT_CASE = "default"
DEFAULT_CATEGORY = "uncategorized"
_FALLBACK_NOW = datetime(2000, 1, 1, tzinfo=UTC)
_KINDS = ("case", "memories", "memory", "query", "write")

Key = str
ModelT = TypeVar("ModelT", bound=BaseModel)


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _CaseRecord(_Record):
    case: str = Field(min_length=1, max_length=200)
    as_of: datetime | None = None
    description: str | None = None
    ingest: Literal["bulk", "write"] = "bulk"


class _Expect(_Record):
    expect: Literal["added", "skipped", "updated"] | None = None
    supersedes: Key | None = None
    lookalike_of: Key | None = None


class _QueryRecord(_Record):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    relevant: list[Key] = Field(default_factory=list)
    category: str = Field(default=DEFAULT_CATEGORY, min_length=1, max_length=100)
    as_of: datetime | None = None
    id: str | None = None
    answer: str | None = None  # documentation only
    stale: list[Key] = Field(default_factory=list)


class _WriteRecord(_Record):
    write: NewMemory
    expect: Literal["added", "skipped", "updated"]
    duplicate_of: Key | None = None
    on_duplicate: Literal["skip", "update"] | None = None
    id: str | None = None


@dataclass
class _Case:
    name: str
    as_of: datetime | None = None
    ingest: Literal["bulk", "write"] = "bulk"
    memories: list[tuple[Key, dict[str, Any], int]] = field(default_factory=list)
    queries: list[tuple[_QueryRecord, int]] = field(default_factory=list)
    writes: list[tuple[_WriteRecord, int]] = field(default_factory=list)


def load_jsonl(path: Path) -> Dataset:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read: {exc}") from exc
    return parse_jsonl(text, name=path.name, where=str(path))


def parse_jsonl(text: str, *, name: str, where: str | None = None) -> Dataset:
    """Parse the format described in the module docstring. Raises DatasetError naming the
    line and the problem."""
    where = where or name
    cases: dict[str, _Case] = {}
    current: _Case | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        place = f"{where}:{number}"
        record = _json_object(stripped, place)
        if "case" in record:
            header = _validated(_CaseRecord, record, place)
            if header.case in cases:
                raise DatasetError(f"{place}: case {header.case!r} is already defined")
            current = cases[header.case] = _Case(header.case, header.as_of, header.ingest)
            continue
        if current is None:
            current = cases[DEFAULT_CASE] = _Case(DEFAULT_CASE)
        _add(current, record, number, place)
    if not cases:
        raise DatasetError(f"{where}: no records")
    built = tuple(_build(case, where) for case in cases.values())
    categories = list(dict.fromkeys(q.category for c in built for q in c.questions))
    return Dataset(
        name=name,
        cases=built,
        key_field=KEY_FIELD,
        tag_prefix=TAG_PREFIX,
        headline_categories=tuple(categories),
    )


def _json_object(line: str, place: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{place}: not JSON: {exc.msg}") from exc
    if not isinstance(record, dict):
        raise DatasetError(f"{place}: expected a JSON object")
    return record


def _validated(model: type[ModelT], record: object, place: str) -> ModelT:
    try:
        return model.model_validate(record)
    except ValidationError as exc:
        raise DatasetError(f"{place}: {describe_errors(exc)}") from exc


def _add(case: _Case, record: dict[str, Any], number: int, place: str) -> None:
    kinds = [k for k in _KINDS if k in record]
    if len(kinds) != 1:
        raise DatasetError(f"{place}: a record holds exactly one of {', '.join(_KINDS)}")
    kind = kinds[0]
    if kind in ("memories", "memory"):
        if set(record) != {kind}:
            raise DatasetError(f"{place}: a {kind!r} record holds nothing else")
        items = record[kind] if kind == "memories" else [record[kind]]
        if not isinstance(items, list):
            raise DatasetError(f"{place}: 'memories' must be a list")
        for item in items:
            case.memories.append((*_memory_id(item, place), number))
    elif kind == "query":
        case.queries.append((_validated(_QueryRecord, record, place), number))
    else:
        case.writes.append((_validated(_WriteRecord, record, place), number))


def _memory_id(item: object, place: str) -> tuple[Key, dict[str, Any]]:
    if not isinstance(item, dict):
        raise DatasetError(f"{place}: a memory must be a JSON object")
    fields = dict(item)
    key = fields.pop("id", None)
    if not isinstance(key, str) or not key.strip() or "," in key or len(key) > 150:
        raise DatasetError(f"{place}: a memory needs an 'id' (text, no commas): {key!r}")
    return key.strip(), fields


def _build(case: _Case, where: str) -> EvalCase:
    stamps = [_stamp(fields) for _, fields, _ in case.memories]
    known = [s for s in stamps if s is not None]
    as_of = to_utc(case.as_of) if case.as_of else (max(known) if known else _FALLBACK_NOW)
    memories: list[EvalMemory] = []
    for key, fields, number in case.memories:
        if any(m.key == key for m in memories):
            raise DatasetError(f"{where}:{number}: memory id {key!r} repeats in {case.name!r}")
        memories.append(_memory(key, fields, as_of, f"{where}:{number}"))
    keys = {m.key for m in memories}
    for memory, (_, _, number) in zip(memories, case.memories, strict=True):
        named = [k for k in (memory.supersedes, memory.lookalike_of) if k is not None]
        if _unknown(named, keys):
            raise DatasetError(f"{where}:{number}: {_unknown(named, keys)} not in {case.name!r}")
    questions = [_question(case.name, q, n, keys, where) for q, n in case.queries]
    checks = [_check(case.name, w, n, keys, where) for w, n in case.writes]
    return EvalCase(
        id=case.name,
        memories=tuple(memories),
        questions=tuple(questions),
        as_of=as_of,
        write_checks=tuple(checks),
        ingest=case.ingest,
    )


def _stamp(fields: dict[str, Any]) -> datetime | None:
    value = fields.get("created_at")
    if not isinstance(value, str):
        return None
    try:
        return to_utc(datetime.fromisoformat(value))
    except ValueError:
        return None  # reported by validation below


def _memory(key: Key, fields: dict[str, Any], as_of: datetime, place: str) -> EvalMemory:
    expected = {k: fields.pop(k) for k in ("expect", "supersedes", "lookalike_of") if k in fields}
    expect = _validated(_Expect, expected, place)
    tags = fields.get("tags") or []
    metadata = fields.get("metadata") or {}
    if not isinstance(tags, list) or not isinstance(metadata, dict):
        raise DatasetError(f"{place}: 'tags' must be a list and 'metadata' an object")
    values = {
        **fields,
        "tags": [*tags, f"{TAG_PREFIX}{key}"],
        "metadata": {**metadata, KEY_FIELD: key},
        "created_at": fields.get("created_at") or as_of,
    }
    return EvalMemory(
        key=key,
        memory=_validated(NewMemory, values, place),
        expect=expect.expect,
        supersedes=expect.supersedes,
        lookalike_of=expect.lookalike_of,
    )


def _unknown(ids: Iterable[Key], keys: set[Key]) -> list[Key]:
    return [i for i in ids if i not in keys]


def _question(
    case: str, record: _QueryRecord, number: int, keys: set[Key], where: str
) -> EvalQuestion:
    missing = _unknown([*record.relevant, *record.stale], keys)
    if missing:
        raise DatasetError(f"{where}:{number}: relevant id(s) not in case {case!r}: {missing}")
    evidence = tuple(dict.fromkeys(record.relevant))
    return EvalQuestion(
        id=f"{case}#{record.id or f'line{number}'}",
        text=record.query.strip(),
        evidence=evidence,
        category=record.category,
        as_of=to_utc(record.as_of) if record.as_of else None,
        skip_reason=None if evidence else "no relevant memory listed",
        stale=tuple(record.stale),
    )


def _check(case: str, record: _WriteRecord, number: int, keys: set[Key], where: str) -> WriteCheck:
    if record.duplicate_of is not None and record.duplicate_of not in keys:
        raise DatasetError(
            f"{where}:{number}: duplicate_of {record.duplicate_of!r} is not in case {case!r}"
        )
    return WriteCheck(
        id=f"{case}#{record.id or f'line{number}'}",
        memory=record.write,
        expect=record.expect,
        duplicate_of=record.duplicate_of,
        on_duplicate=record.on_duplicate,
    )

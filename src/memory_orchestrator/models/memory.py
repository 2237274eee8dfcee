"""Memories and what stores say about them: the records every backend speaks."""

from __future__ import annotations

import math
import re
import unicodedata
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

# Schema caps: a request above them is rejected before anything runs. A query below the cap
# but above `[limits] max_query_chars` (settings) is cut at a word boundary with a note.
MAX_QUERY_CHARS = 20_000
MAX_CONTENT_CHARS = 8_000
MAX_TOP_K = 100
MAX_IDS = 200
MAX_LIST_ITEMS = 50
MAX_LABEL_CHARS = 200

Label = Annotated[str, Field(min_length=1, max_length=MAX_LABEL_CHARS)]
MetaValue = str | int | float | bool | None


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MemoryType(StrEnum):
    """What kind of memory a record is; recency decay depends on it."""

    EPISODIC = "episodic"  # something that happened at a time: fades
    SEMANTIC = "semantic"  # a fact: does not fade
    PROCEDURAL = "procedural"  # how to do something: does not fade
    RESOURCE = "resource"  # a pointer to a document, file or link: fades slowly


class Memory(Frozen):
    """One memory as the store holds it."""

    id: str
    content: str
    type: MemoryType = MemoryType.SEMANTIC
    entities: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    created_at: datetime | None = None
    source: str | None = None
    importance: float | None = None
    confidence: float | None = None
    store: str = ""
    metadata: dict[str, MetaValue] = Field(default_factory=dict)
    # Set when a later memory corrected this one (see `pipeline.conflicts`): which, and when.
    superseded_by: str | None = None
    superseded_at: datetime | None = None
    # Corrected, by a store that says so without naming the correction (Mnemon's recall).
    superseded: bool = False


# The orchestrator's own metadata keys live under this prefix; a client cannot write them
# (`NewMemory` refuses them), so a key found there was written by the orchestrator.
OWN_PREFIX = "orchestrator:"
# What a memory that corrects another carries: the id of the memory it replaced.
SUPERSEDES_KEY = OWN_PREFIX + "supersedes"
# The bare keys the orchestrator wrote and read as its own before the prefix: refused from
# clients too. In records stored before, `supersedes` may be the orchestrator's or a
# client's; `legacy_supersedes` reads it and the reads accept it only where the store's own
# mark on the memory it names confirms it (see docs/explanation/corrections.md).
LEGACY_SUPERSEDES_KEY = "supersedes"
_LEGACY_OWN = frozenset({LEGACY_SUPERSEDES_KEY, "superseded"})


def own_key(key: str) -> bool:
    """Whether `key` is the orchestrator's (its prefix, or a bare key it read as its own),
    whatever the case and surrounding blanks."""
    folded = key.strip().casefold()
    return folded.startswith(OWN_PREFIX) or folded in _LEGACY_OWN


def supersedes(memory: Memory) -> str | None:
    """The id of the memory `memory` corrected, by the orchestrator's own key; None else."""
    named = memory.metadata.get(SUPERSEDES_KEY)
    return named if isinstance(named, str) and named else None


def legacy_supersedes(memory: Memory) -> str | None:
    """The id under the bare `supersedes` key of a record stored before the prefix: the
    orchestrator's or a client's; only a confirming mark tells (see `_LEGACY_OWN`)."""
    if SUPERSEDES_KEY in memory.metadata:
        return None
    named = memory.metadata.get(LEGACY_SUPERSEDES_KEY)
    return named if isinstance(named, str) and named else None


def moved_aside(metadata: dict[str, MetaValue]) -> dict[str, MetaValue]:
    """`metadata` with the orchestrator's keys renamed `client:<key>`: for writes accepted
    (queued) before those keys were refused, so that they are delivered, not lost."""
    return {(f"client:{k}" if own_key(k) else k): v for k, v in metadata.items()}


def has_visible(text: str) -> bool:
    """True when `text` shows something once terminal escape sequences (`\x1b[2J`, an OSC
    title, ...) are left out: a character that is not control (Cc), format (Cf), unassigned,
    surrogate, a separator or blank, not a combining mark alone (it needs a base to show on),
    and not one of the letters and symbols drawn as nothing (Hangul fillers, the blank
    Braille pattern). NUL bytes, escape codes and filler alone are no memory."""
    return any(_shows(ch) for ch in _ESCAPES.sub("", text))


def _shows(ch: str) -> bool:
    return not ch.isspace() and ch not in _BLANK and unicodedata.category(ch) not in _INVISIBLE


_INVISIBLE = frozenset({"Cc", "Cf", "Cn", "Cs", "Zs", "Zl", "Zp", "Mn", "Mc", "Me"})
# Letters and symbols with no ink: Hangul Choseong/Jungseong fillers, the Hangul filler and
# its halfwidth form, the blank Braille pattern.
_BLANK = frozenset("\u115f\u1160\u3164\uffa0\u2800")
# ECMA-48 escape sequences, as a terminal reads them: CSI (ESC [ or C1 0x9B, parameters,
# intermediates, a final byte); OSC, DCS, SOS, PM and APC strings to their terminator (BEL or
# ST) or the end; any other ESC with its intermediates and final byte.
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
)


def finite_metadata(values: dict[str, MetaValue]) -> dict[str, MetaValue]:
    """`values`, when every number in it is finite: NaN and Infinity are not JSON, so a
    store that keeps metadata as JSON could not read them back."""
    bad = [k for k, v in values.items() if isinstance(v, float) and not math.isfinite(v)]
    if bad:
        raise ValueError(
            f"metadata values must be finite numbers; {', '.join(map(repr, bad))}"
            " is NaN or Infinity, which JSON cannot hold"
        )
    return values


class NewMemory(Frozen):
    """A memory to write. Validated: bounded sizes, no empty content."""

    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    type: MemoryType = MemoryType.SEMANTIC
    entities: list[Label] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    tags: list[Label] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    created_at: Moment = None
    source: str | None = Field(default=None, max_length=MAX_LABEL_CHARS)
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    metadata: dict[str, MetaValue] = Field(default_factory=dict, max_length=MAX_LIST_ITEMS)

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("content must not be blank")
        if not has_visible(value):
            raise ValueError(
                "content must hold visible text; it has only control, format or blank"
                " characters, escape sequences or filler"
            )
        return value

    @field_validator("metadata")
    @classmethod
    def _bounded_metadata(cls, values: dict[str, MetaValue]) -> dict[str, MetaValue]:
        own = sorted(k for k in values if own_key(k))
        if own:
            raise ValueError(
                f"{', '.join(map(repr, own))}: reserved for the orchestrator's own record"
                f" ({OWN_PREFIX}*, supersedes, superseded); a correction is found by the write"
                " itself and recorded by the store. Use another key"
            )
        for key, value in values.items():
            if len(key) > MAX_LABEL_CHARS:
                raise ValueError(f"metadata keys are at most {MAX_LABEL_CHARS} characters")
            if isinstance(value, str) and len(value) > MAX_CONTENT_CHARS:
                raise ValueError(f"metadata values are at most {MAX_CONTENT_CHARS} characters")
        return finite_metadata(values)

    @field_validator("entities", "tags")
    @classmethod
    def _no_commas(cls, values: list[str]) -> list[str]:
        # Several stores keep these as comma-separated lists.
        for value in values:
            if "," in value or not has_visible(value):
                raise ValueError(f"labels must be non-blank and contain no commas: {value!r}")
        return [v.strip() for v in values]


def correcting(memory: NewMemory, old_id: str) -> NewMemory:
    """`memory` as the write path sends a correction of `old_id`: the id under the
    orchestrator's own key, which no client's metadata can hold (`NewMemory` refuses it)."""
    if not isinstance(old_id, str) or not old_id.strip() or len(old_id) > MAX_LABEL_CHARS:
        raise ValueError(f"a corrected memory's id must be 1 to {MAX_LABEL_CHARS} characters")
    return memory.model_copy(update={"metadata": {**memory.metadata, SUPERSEDES_KEY: old_id}})


class Edge(Frozen):
    """A typed, weighted link between two memories in the store's graph."""

    source_id: str = Field(description="The memory the edge starts from.")
    target_id: str = Field(description="The memory it leads to.")
    type: str = Field(description="What joins them: related, causal, temporal, update...")
    weight: float = Field(default=1.0, description="How strong the link is (0 to 1).")
    meta: dict[str, MetaValue] = Field(
        default_factory=dict, description="Anything else the store keeps about the edge."
    )


class TimeRange(Frozen):
    """A span of time, both ends included; an end left out is open."""

    start: datetime | None = Field(
        default=None, description="From this moment (ISO 8601; UTC when no zone is given)."
    )
    end: datetime | None = Field(
        default=None, description="Up to this moment (ISO 8601; UTC when no zone is given)."
    )

    @field_validator("start", "end")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else to_utc(value)

    @model_validator(mode="after")
    def _ordered(self) -> TimeRange:
        if self.start and self.end and self.start > self.end:
            raise ValueError("time_range.start must not be after time_range.end")
        return self

    def contains(self, when: datetime) -> bool:
        return (self.start is None or when >= self.start) and (self.end is None or when <= self.end)


class SearchFilters(Frozen):
    """Restricts retrieval. Empty lists mean no restriction."""

    entity_ids: list[Label] = Field(
        default_factory=list,
        max_length=MAX_LIST_ITEMS,
        description="Only memories naming one of these entities (names, case ignored).",
    )
    time_range: TimeRange | None = Field(
        default=None, description="Only memories from this span of time."
    )
    memory_types: list[MemoryType] = Field(
        default_factory=list,
        max_length=MAX_LIST_ITEMS,
        description="Only memories of these types.",
    )


class SearchHit(Frozen):
    """A backend's answer to a search: the memory, its rank (1-based) and native score."""

    memory: Memory
    rank: int
    score: float


class Neighbor(Frozen):
    """A memory reached from a seed along the graph."""

    memory: Memory
    seed_id: str
    via_id: str
    edge_type: str
    weight: float
    hops: int


class WriteAction(StrEnum):
    ADDED = "added"
    UPDATED = "updated"
    SKIPPED = "skipped"
    QUEUED = "queued"


class WriteOutcome(Frozen):
    """What a backend did with one write. When skipped, `existing_id` names the kept memory."""

    id: str
    action: WriteAction
    existing_id: str | None = None
    detail: str = ""


class Status(StrEnum):
    OK = "ok"
    DEGRADED = "degraded"
    ERROR = "error"


class HealthCheck(Frozen):
    """One check of health: what was looked at, and how it went."""

    name: str = Field(description="What was checked: file, sqlite, retrieval, outbox...")
    status: Status = Field(description="ok, degraded (works, with a problem) or error.")
    detail: str = Field(default="", description="What was found, or what is wrong and why.")
    latency_ms: float | None = Field(default=None, description="How long the check took.")


class Capabilities(Frozen):
    """What a backend can do. The pipeline degrades (and notes it) when one is missing."""

    graph: bool = Field(default=False, description="Keeps edges between memories to walk.")
    timestamps: bool = Field(default=False, description="Keeps when each memory happened.")
    memory_types: bool = Field(
        default=False, description="Keeps each memory's type (episodic, semantic...)."
    )
    bulk_write: bool = Field(default=False, description="Takes many memories in one call.")
    link: bool = Field(default=False, description="Can add an edge between two memories.")
    time_filter: bool = Field(
        default=False, description="Applies a search's time range itself (or the service does)."
    )
    entity_filter: bool = Field(
        default=False, description="Applies a search's entity filter itself (or the service does)."
    )
    entity_index: bool = Field(default=False, description="Can list the entity names it has seen.")
    soft_delete: bool = Field(
        default=False, description="Its own delete keeps the memory's record (marked deleted)."
    )
    delete: bool = Field(  # forget(id): what `orchestrator forget --purge` calls
        default=False, description="Can remove a memory from the store (a purge)."
    )
    # The flags below bring a method of their own: the flag is the one declaration of the
    # ability (docs/explanation/store-abilities.md), the method is reached through its
    # accessor in `backends.base`.
    listing: bool = Field(  # list_memories: pages of every live memory (`EnumerableBackend`)
        default=False, description="Can list every memory, page by page (for derived indexes)."
    )
    supersede: bool = Field(  # supersede(old, new): marks a corrected memory
        default=False, description="Can mark a memory as corrected by a later one."
    )
    export: bool = Field(  # list_edges: with listing, a lossless export (`ExportingBackend`)
        default=False, description="Can list every edge too, for a lossless export."
    )
    restore: bool = Field(  # restore(memories, edges): verbatim (`RestoringBackend`)
        default=False,
        description="Can take an export verbatim (its ids, times and marks) into an empty store.",
    )
    backup: bool = Field(  # backup(dest): a consistent copy of its file (`BackingUpBackend`)
        default=False, description="Can copy its own file consistently while it is written."
    )
    versioned: bool = Field(  # data_version(): a token that moves on every change
        default=False,
        description="Can tell at once whether anything changed (read-back memories are kept).",
    )
    dispatch_signal: bool = Field(  # its searches call backends.base.dispatched()
        default=False,
        description="Says when a search reaches its database (retrieval overlaps the wait).",
    )
    edge_types: tuple[str, ...] = Field(
        default=(), description="The edge types it keeps; empty: any."
    )


def to_utc(moment: datetime) -> datetime:
    """Timezone-aware UTC; a naive datetime is taken to be UTC already. Raises ValueError
    (not OverflowError) for a moment that UTC cannot hold (year 1 or 9999 with an offset)."""
    if moment.tzinfo is UTC:  # the common case on the ranking hot path: nothing to do
        return moment
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{moment.isoformat()} is out of range once converted to UTC") from None


def _utc_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else to_utc(value)


Moment = Annotated[datetime | None, AfterValidator(_utc_or_none)]


def describe_errors(error: ValidationError) -> str:
    """Each bad field and what is wrong with it, on one line (no values, no URLs): the one
    wording both faces use for invalid input."""
    problems = []
    for item in error.errors(include_url=False, include_context=False):
        field = ".".join(str(part) for part in item["loc"])
        expected = _EXPECTED.get(item["type"])
        if expected is not None:  # the JSON types, named as a JSON client knows them
            message = f"expected {expected}, got {_json_kind(item.get('input'))}"
        else:
            message = item["msg"].removeprefix("Value error, ")
        problems.append(f"{field}: {message}" if field else message)
    return "; ".join(problems)


_ARRAY, _OBJECT = "an array", "an object"
_EXPECTED = {
    "tuple_type": _ARRAY,
    "list_type": _ARRAY,
    "set_type": _ARRAY,
    "frozen_set_type": _ARRAY,
    "dict_type": _OBJECT,
    "model_type": _OBJECT,
    "model_attributes_type": _OBJECT,
    "dataclass_type": _OBJECT,
    "string_type": "a string",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
}


def _json_kind(value: object) -> str:
    """What a JSON value is, in JSON's words (never the value itself)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    return "an object" if isinstance(value, dict) else f"a {type(value).__name__}"


def far_apart(a: datetime | None, b: datetime | None, gap_s: float | None) -> bool:
    """Whether more than `gap_s` seconds lie between two moments: two memories in different
    sessions (`ranking.context_gap_s`). No gap (None or 0), or a moment missing: no."""
    if not gap_s or a is None or b is None:
        return False
    return abs((to_utc(a) - to_utc(b)).total_seconds()) > gap_s

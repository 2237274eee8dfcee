"""The settings of the pipeline: retrieval, expansion, ranking, dedup, packaging, traces,
the derived indexes, retries, the outbox, writes and limits.
"""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
)

from memory_orchestrator.models import MAX_CONTENT_CHARS, MAX_QUERY_CHARS
from memory_orchestrator.settings.base import DirPath, Section


class RetrievalSettings(Section):
    """How a question is read and what is asked of the store: how many items and candidates,
    subqueries, the fusion of their lists, the time each store call may take."""

    top_k: int = Field(default=10, ge=1, le=100, description="items returned by default")
    candidate_k: int = Field(
        default=20, ge=1, le=500, description="candidates fetched per subquery (at least top_k)"
    )
    timeout_s: float = Field(default=5.0, gt=0, le=120, description="per backend call")
    list_budget_s: float = Field(
        default=0.3,
        ge=0,
        le=120,
        description="how long after a request's start a store search may still run once the"
        " local index's lists are in; a later list is left out, noted in the trace (a slow or"
        " locked store costs a list, not the request's time); 0 = wait for every list (up to"
        " timeout_s)",
    )
    fuzzy_names: bool = Field(
        default=True,
        description="read a name the store does not know as the known name it misspells",
    )
    date_order: Literal["month-first", "day-first"] = Field(
        default="month-first",
        description='how a numeric date in a query reads: "11/10/2026" is Nov 10 or 11 Oct',
    )


class ExpansionSettings(Section):
    """Graph expansion: from the best candidates along the store's edges to related memories
    (`memory_expand`, and a search when asked, planned or `enabled`)."""

    enabled: bool = Field(default=False, description="expand on every search, not only when asked")
    max_hops: int = Field(default=3, ge=0, le=6, description="hard cap on any request")
    seeds: int = Field(default=5, ge=1, le=50, description="best candidates expanded from")
    edge_types: list[str] = Field(
        default_factory=lambda: ["temporal", "entity", "causal", "semantic", "related", "update"],
        description="the edge types an expansion may follow (the store's own, where it has some)",
    )


class DedupSettings(Section):
    """Near-duplicates among the items: merged at `threshold`, penalised from
    `soft_threshold`."""

    threshold: float = Field(default=0.85, ge=0.5, le=1.0, description="merge at or above")
    soft_threshold: float = Field(
        default=0.6, ge=0.0, le=1.0, description="penalise similarity above this"
    )


class PackagingSettings(Section):
    """The context package of `memory_context`: how much it holds and how it is grouped."""

    max_items: int = Field(
        default=8, ge=1, le=100, description="items in a context package, at most"
    )
    max_chars: int = Field(
        default=2500,
        ge=200,
        le=100_000,
        description="characters in a context package, at most (chosen by leaving one LoCoMo"
        " conversation out at a time: docs/explanation/quality.md)",
    )
    group_by: Literal["auto", "entity", "time", "none"] = Field(
        default="auto",
        description="how the context block groups items; auto: by time for an episodic"
        " question, by entity when it names two or more, else not",
    )


class TraceSettings(Section):
    """The trace each request leaves (what it asked, every candidate with its scores, the
    drops), for `memory_explain`, replays and the inspector."""

    enabled: bool = Field(
        default=True, description="keep each request's trace on disk (off: in memory only)"
    )
    keep: int = Field(default=5000, ge=10, description="newest traces kept")


class SemanticSettings(Section):
    """Semantic relevance from a local embedding model (`orchestrator models install`)."""

    enabled: bool | Literal["auto"] = Field(
        default="auto",
        description='"auto": on where a model is installed (`orchestrator models install`), off '
        "elsewhere, and then every face says search is lexical only; true: on, and health is "
        "degraded when it cannot load; false: off",
    )
    model: Literal["auto", "wordllama", "minilm", "minilm-int8"] = Field(
        default="auto",
        description='"wordllama": static word vectors (256-d; the `semantic` extra); "minilm": '
        "the all-MiniLM-L6-v2 sentence encoder on ONNX Runtime (384-d; `orchestrator models "
        "install` installs it); "
        '"minilm-int8": its int8 copy (built beside it): a query and the first embedding of a '
        "store take about half the time, for a small loss of retrieval quality (measured in "
        'docs/explanation/performance.md); "auto": minilm where its model folder is found, '
        "else wordllama",
    )
    model_dir: DirPath = Field(
        default=None,
        description="minilm's model folder (model.onnx, tokenizer.json), where `orchestrator "
        "models install` writes it too; default: the first of .tools/models/all-MiniLM-L6-v2 "
        "above the working directory, the same above the installed package, "
        "<data_dir>/models/all-MiniLM-L6-v2, the user's "
        "$XDG_DATA_HOME/memory-orchestrator/models/all-MiniLM-L6-v2, fastembed's cache",
    )
    candidates: int = Field(
        default=40, ge=0, le=500, description="nearest memories added as a candidate list; 0 = off"
    )


class LocalIndexSettings(Section):
    """A derived local index (BM25 with a context window) kept in step with the store; the
    semantic vectors, when on, are kept the same way."""

    enabled: bool = Field(
        default=True, description="needs a store that can list its memories (all stores here can)"
    )
    candidates: int = Field(default=30, ge=1, le=500, description="hits added as a candidate list")
    max_memories: int = Field(
        default=200_000, ge=1, le=5_000_000, description="memories a derived index holds at most"
    )


class RetrySettings(Section):
    """Retries of transient store errors (see `service/resilience.py`); writes are checked first."""

    attempts: int = Field(
        default=3, ge=1, le=10, description="tries per store call on a transient error; 1 = none"
    )


class OutboxSettings(Section):
    """Writes the store cannot take now wait here (SQLite) and are replayed in order: in the
    background by a server, and on each write and health call."""

    enabled: bool = Field(default=True, description="false = such a write fails with an error")


class WriteSettings(Section):
    """What `memory_write` does with a memory close to one already stored."""

    on_duplicate: Literal["skip", "update"] = Field(
        default="skip",
        description="a near-duplicate write: skip it (the old one is kept), or update (write"
        " it, linked as an update of the old one)",
    )
    on_conflict: Literal["supersede", "keep_both", "skip"] = Field(
        default="supersede",
        description="a close memory that asserts other values (a number, date, name, negation,"
        " opposite): supersede = write the new one and mark the old superseded (the newest"
        " fact wins); keep_both = write and link, mark nothing; skip = treat as a duplicate",
    )
    update_threshold: float = Field(
        default=0.7,
        ge=0.0,
        le=1.0,
        description="similarity from which a close memory with other values is an update",
    )
    link_related: int = Field(
        default=3, ge=0, le=20, description="links to memories sharing entities"
    )
    extract_entities: bool = Field(
        default=True,
        description="give a memory written without entities the names its text carries",
    )


class LimitsSettings(Section):
    """Bounds on what one request may carry. Above the schema caps in `models` a request is
    rejected outright; these limits are at or below them."""

    max_query_chars: int = Field(
        default=2000,
        ge=32,
        le=MAX_QUERY_CHARS,
        description="longer queries and tasks are cut at a word boundary (with a note); no "
        "store ever receives a longer query",
    )
    max_write_chars: int = Field(
        default=MAX_CONTENT_CHARS,
        ge=1,
        le=MAX_CONTENT_CHARS,
        description="longer memory content is rejected, nothing written",
    )


class SharedProcessSettings(Section):
    """One orchestrator process per memory (docs/explanation/shared-process.md): `orchestrator
    serve` over stdio relays its session to it, the CLI's calls and the hooks use it."""

    enabled: bool = Field(
        default=True,
        description="false = every `orchestrator serve` loads and serves in its own process, as"
        " the CLI's commands do",
    )
    idle_stop_s: float = Field(
        default=600.0,
        ge=1,
        le=7 * 24 * 3600,
        description="the shared process stops after this long without a connection (an open"
        " agent session holds one)",
    )
    start_timeout_s: float = Field(
        default=30.0,
        ge=1,
        le=600,
        description="how long `orchestrator serve` waits for the shared process it started;"
        " past it, the session is served in its own process",
    )

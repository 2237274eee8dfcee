"""Tool inputs: one frozen request model per tool, checked before anything runs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from memory_orchestrator.models.memory import (
    MAX_IDS,
    MAX_LIST_ITEMS,
    MAX_QUERY_CHARS,
    MAX_TOP_K,
    Frozen,
    Label,
    Moment,
    NewMemory,
    SearchFilters,
)

Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)]
OptionalText = Annotated[str | None, Field(default=None, max_length=MAX_QUERY_CHARS)]


GroupBy = Literal["auto", "entity", "time", "none"]


class Request(Frozen):
    @field_validator("query", check_fields=False)
    @classmethod
    def _query_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query must not be blank")
        return value


class SearchRequest(Request):
    query: Query
    task: OptionalText = None
    filters: SearchFilters | None = None
    top_k: int = Field(default=10, ge=1, le=MAX_TOP_K)
    expand: bool = False
    as_of: Moment = None
    passthrough: bool | None = None
    history: bool = False  # True: corrected (superseded) memories stay in the results


class ResponseBudget(Frozen):
    """How much a context package may hold."""

    max_items: int = Field(
        default=8, ge=1, le=MAX_TOP_K, description="At most this many items (default: configured)."
    )
    max_chars: int = Field(
        default=2500,
        ge=200,
        le=100_000,
        description="At most this many characters of text (default: configured).",
    )


class ContextRequest(Request):
    query: Query
    task: OptionalText = None
    response_budget: ResponseBudget | None = None
    filters: SearchFilters | None = None
    expand: bool | None = None  # None: the planner decides
    as_of: Moment = None
    group_by: GroupBy | None = None
    history: bool = False  # True: corrected (superseded) memories stay in the results


class ExpandRequest(Frozen):
    seed_ids: list[Label] = Field(default_factory=list, max_length=MAX_IDS)
    entities: list[Label] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    query: OptionalText = None
    hops: int = Field(default=1, ge=1, le=4)
    edge_types: list[Label] | None = Field(default=None, max_length=MAX_LIST_ITEMS)
    limit: int = Field(default=20, ge=1, le=MAX_TOP_K)

    @model_validator(mode="after")
    def _has_seeds(self) -> ExpandRequest:
        if not self.seed_ids and not self.entities:
            raise ValueError("give seed_ids or entities to expand from")
        return self


class WriteRequest(Frozen):
    memory: NewMemory
    on_duplicate: Literal["skip", "update"] | None = None
    link_related: bool = True
    dry_run: bool = False


class ExplainRequest(Frozen):
    trace_id: Annotated[str | None, Field(default=None, max_length=64)] = None
    query: OptionalText = None

    @model_validator(mode="after")
    def _one_of(self) -> ExplainRequest:
        if (self.trace_id is None) == (self.query is None):
            raise ValueError("give exactly one of trace_id or query")
        if self.query is not None and not self.query.strip():
            raise ValueError("query must not be blank")
        return self


MAX_REASON_CHARS = 500


class ForgetRequest(Frozen):
    """Forget memories (every read leaves them out; nothing is deleted in the store), or
    with `undo`, bring them back."""

    ids: list[Label] = Field(min_length=1, max_length=MAX_IDS)
    reason: Annotated[str | None, Field(default=None, max_length=MAX_REASON_CHARS)] = None
    undo: bool = False

    @model_validator(mode="after")
    def _why(self) -> ForgetRequest:
        if not self.undo and not (self.reason and self.reason.strip()):
            raise ValueError("say why in reason (a few words) to forget; undo needs none")
        return self

"""The ranking profile: every coefficient that decides the order of a read's results, in one
place, each with the reason it is there (`[ranking]` in the configuration).

The read path's stages take their numbers from here and nowhere else (a test scans the
pipeline for module-level ranking constants). The defaults were chosen by cross-validation
over the LoCoMo development split (docs/explanation/quality.md); a preset
(`settings/presets.py`) swaps in another profile's values, and any value given in the file,
the environment or code still wins over the preset's.
"""

from __future__ import annotations

from pydantic import Field

from memory_orchestrator.models import MemoryType
from memory_orchestrator.settings.base import Section

__all__ = ["RankingProfile", "Weights"]


class Weights(Section):
    """The re-ranking formula's weights (docs/explanation/score.md). Penalties are
    subtracted."""

    relevance: float = Field(default=0.60, description="weight of relevance to the question")
    recency: float = Field(default=0.05, description="weight of how recent a memory is")
    graph: float = Field(
        default=0.10, description="weight of closeness in the graph (1 when searched directly)"
    )
    type_match: float = Field(
        default=0.05, description="weight of a memory type the question asks for"
    )
    cross_reference: float = Field(
        default=0.30, description="weight of naming entities that recur across the candidates"
    )
    noise: float = Field(
        default=0.30,
        description="weight of the penalties (subtracted): a row that adds nothing to the"
        " answer costs the same whether it shares no term with the question (noise) or"
        " restates a better item (the duplicate penalty, in proportion to how alike)",
    )


class RankingProfile(Section):
    """How candidates are fused and scored: the weights of the score, how relevance is made
    of its signals, the candidate lists' weights, the local index's BM25 and recency.
    Research-only: a user keeps the defaults or picks a preset."""

    weights: Weights = Field(default_factory=Weights)
    # ---------------------------------------------------------------- fusion of the lists
    rrf_k: int = Field(
        default=60,
        ge=1,
        description="RRF constant, 1 / (rrf_k + rank): larger flattens the lists' ranks",
    )
    local_list_weight: float = Field(
        default=4.0,
        ge=0,
        le=16,
        description="RRF weight of the local index's list: its BM25 with context reads the"
        " question better than most stores' own search",
    )
    semantic_list_weight: float = Field(
        default=1.0,
        ge=0,
        le=16,
        description="RRF weight of the semantic index's list (with [semantic] on)",
    )
    # ---------------------------------------------------------------- the local index's BM25
    bm25_k1: float = Field(
        default=0.9, ge=0, le=3, description="BM25 term-frequency saturation (local index)"
    )
    bm25_b: float = Field(
        default=0.75, ge=0, le=1, description="BM25 length normalization (local index)"
    )
    local_context_weight: float = Field(
        default=0.75,
        ge=0,
        le=1,
        description="weight of the neighbours' terms in a memory's local index score: the"
        " turn that answers often shares no word with the question",
    )
    local_radius: int = Field(
        default=3, ge=1, le=5, description="neighbours on each side that lend their terms"
    )
    # ---------------------------------------------------------------- relevance
    lexical_share: float = Field(
        default=0.6, ge=0, le=1, description="share of relevance from own term match vs store rank"
    )
    store_score_share: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="share of the store signal taken from the store's own scores (min-max "
        "scaled per subquery; they keep how far apart hits are) rather than from the fused rank",
    )
    local_share: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="with [local_index] on: share of relevance from the local index's own "
        "score (its BM25 with context, scaled to its best hit) rather than from ranks alone",
    )
    semantic_share: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="share of relevance from semantic similarity (only with [semantic] on):"
        " meaning, where the words differ",
    )
    entity_share: float = Field(
        default=0.25,
        ge=0,
        le=1,
        description="share of the term match that comes from the query's entities: a name"
        " asked for is worth more than any one word",
    )
    when_time_boost: float = Field(
        default=0.2,
        ge=0,
        le=1,
        description="'when' questions: relevance added to memories carrying a time expression",
    )
    # ---------------------------------------------------------------- context and graph
    context_seeds: int = Field(
        default=3,
        ge=0,
        le=200,
        description="best candidates whose neighbours in time are fetched (one store call): "
        "the answer often sits in the turn next to the one that matches; 0 = off",
    )
    context_window: float = Field(
        default=0.4,
        ge=0,
        le=1,
        description="weight of a neighbour's words in a memory's term match (context window)",
    )
    neighbor_share: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="share of its seed's relevance a memory one link away inherits: a fetched "
        "neighbour in time, or one reached by graph expansion (times the edge's weight, per "
        "hop): a memory next to a match is less sure to answer than the match; 0 = neighbours "
        "in time only lend context",
    )
    context_gap_s: float = Field(
        default=1800.0,
        ge=0,
        description="memories are context for each other (a neighbour's words, a context "
        "neighbour joining the candidates, the local index's context window) only within a "
        "session: no pause longer than this between them (30 min, the usual session timeout). "
        "Conversation turns share context; facts written hours or days apart do not; 0 = no "
        "sessions (every neighbour in time is context)",
    )
    # ---------------------------------------------------------------- the score's signals
    half_life_days: dict[MemoryType, float | None] = Field(
        default_factory=lambda: {
            MemoryType.EPISODIC: 30.0,
            MemoryType.SEMANTIC: None,
            MemoryType.PROCEDURAL: None,
            MemoryType.RESOURCE: 180.0,
        },
        description="recency half-life per memory type; null = never fades (a fact or a"
        " procedure does not age as an event does)",
    )
    xref_saturation: int = Field(
        default=3,
        ge=1,
        le=50,
        description="an entity shared with this many other results gives the full"
        " cross-reference boost",
    )
    xref_gate: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="share of the cross-reference boost that scales with the memory's own"
        " relevance (1: a memory that matches little gains little from naming an entity)",
    )
    name_trust_power: float = Field(
        default=4.0,
        ge=0,
        le=32,
        description="how fast a name in the question loses its boost when memories of someone"
        " else match the question better (0: never); a question may name the wrong person",
    )
    short_words: int = Field(
        default=3,
        ge=0,
        le=20,
        description="a memory of fewer content words than this looks like chatter ('ok"
        " thanks') and pays half the noise penalty",
    )

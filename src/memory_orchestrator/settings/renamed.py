"""Settings that moved or went, read from a configuration written for an earlier version.

A moved setting is read under its new name (the ranking coefficients now all live in
`[ranking]`, the ranking profile); a removed one stops the program with a line that says why
it went and what to do, instead of pydantic's bare "extra inputs are not permitted".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

__all__ = ["MOVED", "REMOVED", "renamed"]

# (section, old name) -> (section, new name)
MOVED: dict[tuple[str, str], tuple[str, str]] = {
    ("retrieval", "rrf_k"): ("ranking", "rrf_k"),
    ("local_index", "weight"): ("ranking", "local_list_weight"),
    ("local_index", "context_weight"): ("ranking", "local_context_weight"),
    ("local_index", "radius"): ("ranking", "local_radius"),
    ("local_index", "k1"): ("ranking", "bm25_k1"),
    ("local_index", "b"): ("ranking", "bm25_b"),
    ("semantic", "weight"): ("ranking", "semantic_list_weight"),
    # issue 52, the ranking profile: one name per idea
    ("ranking", "expansion_decay"): ("ranking", "neighbor_share"),
}

# (section, name) -> why it went; a section inside a section is dotted ("ranking.weights")
REMOVED: dict[tuple[str, str], str] = {
    ("ranking", "length_norm"): "it shipped switched off (0) with no measured use",
    ("ranking", "neighbor_slots"): "it shipped switched off (0) with no measured use",
    ("ranking", "common_entity_share"): "it shipped switched off (1.0) with no measured use",
    ("local_index", "semantic_share"): "it shipped switched off (0) with no measured use;"
    " meaning joins relevance through ranking.semantic_share",
    # the stores' sections (embedded, mnemon, mnemon_mcp, kg_memory, mnemonic, fused,
    # postgres, shared): plumbing now a named constant where it is used, Mnemon's own
    # variables read from the environment, and options that shipped off
    ("embedded", "temporal_links"): "memories are always linked in time (it shipped on)",
    ("embedded", "write_wait_ms"): "plumbing: WRITE_WAIT_MS in backends/embedded.py",
    ("mnemon", "retries"): "plumbing: LOCK_RETRIES in backends/mnemon/process.py",
    ("mnemon", "retry_backoff_s"): "plumbing: FIRST_RETRY_DELAY_S in backends/mnemon/process.py",
    ("mnemon", "read_lock_wait_s"): "plumbing: READ_LOCK_WAIT_S in backends/mnemon/process.py",
    ("mnemon", "max_processes"): "plumbing: MAX_PROCESSES in backends/mnemon/process.py",
    ("mnemon", "embed_endpoint"): "set Mnemon's own MNEMON_EMBED_ENDPOINT in the environment",
    ("mnemon", "embed_model"): "set Mnemon's own MNEMON_EMBED_MODEL in the environment",
    ("mnemon", "max_insights"): "set Mnemon's own MNEMON_MAX_INSIGHTS in the environment",
    ("mnemon", "entity_mode"): "it shipped as Mnemon's default (merge), other modes unmeasured",
    ("mnemon", "cache_ttl_s"): "one cache lifetime for what a store says about itself: the"
    " top-level cache_ttl_s",
    ("mnemonic", "rescan_s"): "plumbing: RESCAN_S in backends/mnemonic.py",
    ("fused", "timeout_s"): "plumbing: MEMBER_TIMEOUT_S in backends/fused.py",
    ("postgres", "pool_min"): "plumbing: POOL_MIN in backends/postgres.py",
    ("postgres", "connect_timeout_s"): "plumbing: CONNECT_TIMEOUT_S in postgres/database.py",
    ("postgres", "statement_timeout_ms"): "plumbing: STATEMENT_TIMEOUT_MS in postgres/database.py",
    ("postgres", "stats_ttl_s"): "plumbing: STATS_TTL_S in backends/postgres.py",
    ("postgres", "temporal_links"): "memories are always linked in time (it shipped on)",
    ("postgres", "entity_fanout"): "plumbing: ENTITY_FANOUT in backends/kit.py",
    ("shared", "pool_max"): "plumbing: POOL_MAX in state/shared.py",
    ("shared", "tokens_refresh_s"): "plumbing: TOKENS_REFRESH_S in state/shared.py",
    # issue 52, the ranking profile ([ranking])
    ("ranking", "learned_weights"): "it shipped switched off and scored below the configured"
    " weights on held-out conversations; `orchestrator tune` went with it",
    ("ranking", "subquery_weight"): "no measurable effect on the evaluation sets; every"
    " subquery's list weighs as the whole question's",
    ("ranking", "relevance_floor"): "it cut no answer on the evaluation sets; the noise"
    " penalty puts a memory that shares no term with the question last",
    ("ranking", "window_fade_days"): "no measured use: a memory outside an asked time window"
    " now scores recency 0, which ranks the evaluation sets as well or better",
    ("ranking.weights", "duplicate"): "the duplicate penalty now has the noise weight"
    " (ranking.weights.noise): a row that adds nothing costs the same either way",
    # retrieval, expansion, traces, retry, outbox, write, semantic, local_index, limits
    ("retry", "base_delay_s"): "a back-off nobody tunes; it is service/resilience.py's"
    " BASE_DELAY_S (0.05 s, doubling each retry)",
    ("retry", "max_delay_s"): "a back-off nobody tunes; it is service/resilience.py's"
    " MAX_DELAY_S (1 s)",
    ("outbox", "replay_s"): "plumbing nobody tunes; one replay may take service/writing.py's"
    " REPLAY_S (10 s)",
    ("outbox", "retry_every_s"): "a poll period nobody tunes; a server replays queued writes"
    " every service/resilience.py's REPLAY_EVERY_S (2 s, doubling while the store takes none)",
    ("traces", "verbosity"): "a trace always keeps every candidate and every expansion decision"
    ' ("full" was the same as the default "normal"; "minimal" had no measured use and'
    " left memory_explain and the eval's diagnosis without candidates)",
    ("semantic", "min_similarity"): "it shipped unset; a memory joins from the semantic list"
    " at its model's own floor (derived/embedders.py)",
    ("semantic", "index_wait_s"): "plumbing nobody tunes; a query waits for new memories'"
    " embedding up to derived/indexes.py's INDEX_WAIT_S (10 s)",
    ("local_index", "date_terms"): "always on: a memory's date is indexed as words (its"
    " measured worth: docs/explanation/quality.md)",
    ("local_index", "lend_context"): "always on: every candidate's term match reads its"
    " neighbours in time (weighed by ranking.context_window)",
    ("local_index", "sync_interval_s"): "a poll period nobody tunes; the store is asked for"
    " new memories every derived/indexes.py's SYNC_INTERVAL_S (5 s) and after each write",
    ("retrieval", "max_subqueries"): "plumbing nobody tunes; a question is split into at most"
    " pipeline/planner.py's MAX_SUBQUERIES (4) searches",
    ("expansion", "hop_budget"): "plumbing nobody tunes; a planned expansion walks"
    " pipeline/planner.py's HOP_BUDGET (1) hops, within expansion.max_hops",
    ("expansion", "max_expanded"): "plumbing nobody tunes; one expansion adds at most"
    " pipeline/expander.py's MAX_EXPANDED (30) candidates",
    ("expansion", "fanout"): "plumbing nobody tunes; a search's expansion keeps at most"
    " pipeline/expander.py's FANOUT (6) neighbours per seed (memory_expand: its `limit`)",
    ("limits", "max_labels"): "it only repeated the schema's cap (models.MAX_LIST_ITEMS, 50"
    " entities or tags on a write)",
    ("limits", "max_label_chars"): "it only repeated the schema's cap (models.MAX_LABEL_CHARS,"
    " 200 characters for an entity, tag or source)",
    ("limits", "max_seed_ids"): "it only repeated the schema's cap (models.MAX_IDS, 200 seed"
    " ids on an expand request)",
    # the orchestrator's own files; fused stores
    ("traces", "path"): "the orchestrator's own files live in data_dir (<data_dir>/traces.db)",
    ("outbox", "path"): "the orchestrator's own files live in data_dir (<data_dir>/outbox.db)",
    ("fused", "primary"): "writes go to the first store of fused.stores: list it first",
    ("packaging", "item_chars"): "plumbing nobody tunes; an item's summary is cut to"
    " pipeline/packager.py's ITEM_CHARS (400 characters), within packaging.max_chars",
}


def renamed(data: Mapping[str, Any]) -> dict[str, Any]:
    """`data` (raw settings input) with moved settings under their new names. A removed
    setting, or one given under both its old and its new name, raises ValueError."""
    out = dict(data)
    for (section, name), why in REMOVED.items():
        given: Any = out
        for part in section.split("."):
            given = given.get(part) if isinstance(given, Mapping) else None
        if isinstance(given, Mapping) and name in given:
            raise ValueError(
                f"{section}.{name} was removed: {why}; delete it from the configuration"
            )
    for (section, name), (target, new) in MOVED.items():
        given = out.get(section)
        if not isinstance(given, Mapping) or name not in given:
            continue
        rest = dict(given)
        value = rest.pop(name)
        out[section] = rest
        into: Any = out.get(target)
        if isinstance(into, BaseModel):  # a section given as a settings object
            into = into.model_dump(exclude_unset=True)
        into = dict(into) if isinstance(into, Mapping) else {}
        if new in into:
            raise ValueError(
                f"{section}.{name} is now {target}.{new}, and both are given: keep {target}.{new}"
            )
        into[new] = value
        out[target] = into
    return out

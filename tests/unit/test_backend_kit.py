"""The kit the backends share: ids, link checks and the two graph walks, on small inputs."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta, timezone

import pytest

from memory_orchestrator.backends.kit import (
    Reach,
    Step,
    Walk,
    by_time_distance,
    checked_edge,
    clean_ids,
    parse_time,
    require_known,
    utc_text,
    walk_in_order,
    walk_request,
    walk_strongest_first,
)
from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import Memory

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def mem(mem_id: str, minutes: int | None = None) -> Memory:
    when = None if minutes is None else T0 + timedelta(minutes=minutes)
    return Memory(id=mem_id, content=f"memory {mem_id}", created_at=when)


# ---------------------------------------------------------------- ids and requests


def test_clean_ids_keep_non_empty_strings_once_in_order() -> None:
    assert clean_ids(["b", "a", "", None, 3, "b", " "]) == ["b", "a", " "]


def test_argv_safe_ids_also_drop_blank_ids_and_ids_with_a_nul() -> None:
    assert clean_ids(["a", " ", "\t", "x\x00y", "a"], argv_safe=True) == ["a"]


def test_a_walk_request_reaching_nothing_is_none() -> None:
    assert walk_request([], None, 1, 5) is None
    assert walk_request(["", 7], None, 1, 5) is None
    assert walk_request(["a"], None, 0, 5) is None
    assert walk_request(["a"], None, 1, 0) is None
    assert walk_request(["a"], [], 1, 5) is None
    assert walk_request(["a"], ["causal"], 1, 5, known=("entity",)) is None


def test_a_walk_request_keeps_the_known_edge_types_asked_for() -> None:
    walk = walk_request(["a", "a", "b"], ["entity", "x"], 2, 5, known=("entity", "causal"))
    assert walk == Walk(["a", "b"], frozenset({"entity"}), 2, 5)
    assert walk_request(["a"], None, 1, 3) == Walk(["a"], None, 1, 3)


# ---------------------------------------------------------------- links


def test_a_checked_edge_has_a_stripped_relation_and_a_float_weight() -> None:
    edge = checked_edge("a", "b", " causal ", 1, {"why": "x"})
    assert (edge.source_id, edge.target_id, edge.type, edge.weight) == ("a", "b", "causal", 1.0)
    assert edge.meta == {"why": "x"}


@pytest.mark.parametrize(
    ("source", "target", "relation", "weight", "message"),
    [
        ("a", "b", " ", 0.5, "relation must be a non-empty string"),
        ("a", "b", "x", 1.5, "weight must be within 0..1"),
        ("a", "b", "x", float("nan"), "weight must be within 0..1"),
        ("a", "a", "x", 0.5, "two different memory ids"),
        ("a", "", "x", 0.5, "two different memory ids"),
    ],
)
def test_a_link_that_breaks_a_rule_is_refused_saying_which(
    source: str, target: str, relation: str, weight: float, message: str
) -> None:
    with pytest.raises(BackendError, match=message):
        checked_edge(source, target, relation, weight)


def test_an_argv_safe_link_refuses_ids_a_command_line_cannot_carry() -> None:
    checked_edge("a", "b\x00", "x")
    with pytest.raises(BackendError, match="two different"):
        checked_edge("a", "b\x00", "x", argv_safe=True)


def test_a_link_to_an_unknown_memory_names_it() -> None:
    require_known(["a", "b"], {"a", "b", "c"})
    with pytest.raises(BackendError, match=r"unknown memory id\(s\): b, z"):
        require_known(["a", "b", "z"], {"a"})


# ---------------------------------------------------------------- time


def test_times_are_written_in_utc_to_the_second_and_read_back_aware() -> None:
    paris = timezone(timedelta(hours=2))
    assert utc_text(datetime(2026, 5, 1, 14, 30, 15, 999, tzinfo=paris)) == "2026-05-01T12:30:15Z"
    assert utc_text(datetime(2026, 5, 1, 12)) == "2026-05-01T12:00:00Z"
    assert parse_time("2026-05-01T12:30:15Z") == datetime(2026, 5, 1, 12, 30, 15, tzinfo=UTC)
    assert parse_time("2026-05-01T14:30:15+02:00") == datetime(2026, 5, 1, 14, 30, 15, tzinfo=paris)
    assert parse_time("2026-05-01 12:00") == datetime(2026, 5, 1, 12, tzinfo=UTC)
    assert parse_time(datetime(2026, 5, 1)) == datetime(2026, 5, 1, tzinfo=UTC)
    assert [parse_time(v) for v in ("", "yesterday", None, 17)] == [None] * 4


def test_nearest_in_time_first_with_undated_last_or_first() -> None:
    found = [mem("far", 90), mem("undated"), mem("near", 5), mem("tie", -5)]
    assert [m.id for m in by_time_distance(found, T0)] == ["near", "tie", "far", "undated"]
    first = by_time_distance(found, T0, undated_first=True)
    assert [m.id for m in first] == ["undated", "near", "tie", "far"]
    assert by_time_distance(found, None) == found


# ---------------------------------------------------------------- walking in order

# a -- b -- c -- d, and a -- e
GRAPH = {"a": ["b", "e"], "b": ["a", "c"], "c": ["b", "d"], "d": ["c"], "e": ["a"]}
NODES = {i: mem(i, n) for n, i in enumerate("abcde")}


def in_order(node: Memory) -> list[Step]:
    return [(NODES[o], "related", 1.0) for o in GRAPH[node.id]]


def test_walking_in_order_stops_at_the_hop_budget() -> None:
    found = walk_in_order(Walk(["a"], None, 2, 50), NODES, in_order)
    assert [(n.memory.id, n.hops, n.via_id, n.seed_id) for n in found] == [
        ("b", 1, "a", "a"),
        ("e", 1, "a", "a"),
        ("c", 2, "b", "a"),
    ]


def test_walking_in_order_stops_at_the_limit_and_never_returns_a_seed() -> None:
    found = walk_in_order(Walk(["a", "c"], None, 3, 2), NODES, in_order)
    assert [n.memory.id for n in found] == ["b", "e"]
    everything = walk_in_order(Walk(["a", "c"], None, 3, 50), NODES, in_order)
    assert {n.memory.id for n in everything} == {"b", "e", "d"}
    assert [n.seed_id for n in everything if n.memory.id == "d"] == ["c"]


def test_walking_in_order_keeps_the_first_way_a_memory_is_reached() -> None:
    def steps(node: Memory) -> list[Step]:
        return [(NODES["c"], "weak", 0.1), (NODES["c"], "strong", 0.9)] if node.id == "a" else []

    found = walk_in_order(Walk(["a"], None, 1, 5), NODES, steps)
    assert [(n.memory.id, n.edge_type, n.weight) for n in found] == [("c", "weak", 0.1)]


def test_walking_in_order_skips_seeds_that_are_not_found() -> None:
    assert walk_in_order(Walk(["zz"], None, 2, 5), NODES, in_order) == []


# ---------------------------------------------------------------- strongest first

ROWS = {i: (i, n) for n, i in enumerate("abcdefg")}  # id -> (id, minute)
EDGES = [  # from, to, type, weight
    ("a", "b", "x", 0.2),
    ("a", "c", "y", 0.9),
    ("a", "d", "x", 0.5),
    ("d", "c", "x", 0.95),
    ("c", "e", "x", 0.7),
    ("b", "f", "x", 0.3),
    ("a", "g", "x", 1.7),
]


def load(ids: list[str]) -> Mapping[str, tuple[str, int]]:
    return {i: ROWS[i] for i in ids if i in ROWS and i != "g"}  # g is not live


def reach(frontier: Mapping[str, tuple[str, int]]) -> Iterator[Reach]:
    for src, dst, kind, weight in EDGES:
        yield src, dst, kind, weight
        yield dst, src, kind, weight


def as_memory(row: tuple[str, int]) -> Memory:
    return mem(row[0], row[1])


def strongest(walk: Walk) -> list[tuple[str, int, str, float]]:
    found = walk_strongest_first(walk, load=load, reach=reach, memory=as_memory)
    return [(n.memory.id, n.hops, n.via_id, n.weight) for n in found]


def test_strongest_first_ranks_a_whole_hop_by_weight_and_skips_memories_not_live() -> None:
    assert strongest(Walk(["a"], None, 1, 10)) == [
        ("c", 1, "a", 0.9),
        ("d", 1, "a", 0.5),
        ("b", 1, "a", 0.2),
    ]


def test_strongest_first_walks_on_from_what_it_took_up_to_the_hop_budget() -> None:
    assert strongest(Walk(["a"], None, 2, 10)) == [
        ("c", 1, "a", 0.9),
        ("d", 1, "a", 0.5),
        ("b", 1, "a", 0.2),
        ("e", 2, "c", 0.7),
        ("f", 2, "b", 0.3),
    ]


def test_strongest_first_stops_at_the_limit_and_never_returns_a_seed() -> None:
    assert strongest(Walk(["a"], None, 3, 2)) == [("c", 1, "a", 0.9), ("d", 1, "a", 0.5)]
    assert "a" not in [row[0] for row in strongest(Walk(["a", "c"], None, 3, 10))]


def test_strongest_first_keeps_the_strongest_edge_and_clamps_the_weight_it_reports() -> None:
    def reach_g(frontier: Mapping[str, tuple[str, int]]) -> Iterator[Reach]:
        yield "a", "c", "weak", 0.1
        yield "a", "c", "strong", 1.5
        yield "a", "c", "tie", 1.5

    found = walk_strongest_first(
        Walk(["a"], None, 1, 5), load=load, reach=reach_g, memory=as_memory
    )
    assert [(n.memory.id, n.edge_type, n.weight) for n in found] == [("c", "strong", 1.0)]


def test_strongest_first_breaks_ties_as_told_else_as_reached() -> None:
    def flat(frontier: Mapping[str, tuple[str, int]]) -> Iterator[Reach]:
        for other in ("f", "b", "e"):
            yield "c", other, "x", 0.5

    def nearest(cand: str, row: tuple[str, int], via: tuple[str, int]) -> tuple[int, str]:
        return abs(row[1] - via[1]), cand

    walk = Walk(["c"], None, 1, 5)
    as_reached = walk_strongest_first(walk, load=load, reach=flat, memory=as_memory)
    assert [n.memory.id for n in as_reached] == ["f", "b", "e"]
    near = walk_strongest_first(walk, load=load, reach=flat, memory=as_memory, tie_break=nearest)
    assert [n.memory.id for n in near] == ["b", "e", "f"]


def test_the_postgres_idf_survives_a_term_counted_after_the_collection() -> None:
    from memory_orchestrator.backends.postgres_sql import idf

    assert idf(10, 12) == 1e-6  # counted a moment later, after concurrent writes
    assert idf(1000, 1) > idf(1000, 10) > 0


def test_a_backend_whose_extra_is_missing_is_named_with_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    from memory_orchestrator.backends import registry
    from memory_orchestrator.errors import MissingExtra
    from memory_orchestrator.settings import load_settings

    monkeypatch.delitem(sys.modules, "memory_orchestrator.backends.postgres", raising=False)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if the extra were not installed
    with pytest.raises(MissingExtra, match=r"\[postgres\]"):
        registry.create("postgres", load_settings(backend="postgres"))

"""The Mnemon adapter against the contract double and the real binary.

Every test that describes Mnemon runs over three binaries: `[double]` (the contract double,
v0.2.9), `[june]` (the double acting as the June 2026 build in `../shared/mnemon` does: no
`show`, no `supersedes`, near-duplicates replaced, a `--readonly` that writes) and `[real]`
(the real binary: $MNEMON_REAL_BINARY, else `../shared/mnemon/bin/mnemon`; see
`tests.mnemon_double.real_binary`; under CI a real binary that is expected but missing or
failing fails the run). Where builds differ, a test finds out from what the binary does and
asserts per feature found, never per version string. A few tests use knobs only the double
has (a log of its argv, a hang, an older version): they take the `double` fixture and run
on the double alone, so no `[real]` test is ever skipped.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

from memory_orchestrator.backends import registry
from memory_orchestrator.backends.mnemon import (
    FAIL_FAST_ENDPOINT,
    MnemonBackend,
    MnemonTimeout,
    MnemonVersion,
    importance_in,
    importance_out,
    process,
    store_file,
)
from memory_orchestrator.backends.mnemon.mapping import outcome
from memory_orchestrator.backends.mnemon.store_file import SUPERSEDED_BY
from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import (
    MemoryType,
    NewMemory,
    SearchFilters,
    Status,
    WriteAction,
)
from memory_orchestrator.service.store_calls import StoreCalls, store_checks
from memory_orchestrator.settings import MnemonSettings, Settings, load_settings
from tests.mnemon_double import (
    JUNE_2026,
    fast_launcher,
    kinds,
    npm_launcher,
    real_binary,
    real_problem,
    renaming_binary,
)

pytestmark = pytest.mark.integration

AWKWARD = [
    "--help",
    "-rf / is not a flag here",
    "--",
    'she said "ship it" and it\'s done',
    "line one\nline two\n\ttabbed",
    "naïve café 東京 🚀 ünïcödé",
    "a, b, c; d",
]


@dataclass
class Mnemon:
    """One binary (`double`, `june` or `real`) and a fresh data dir."""

    kind: str
    binary: Path
    data_dir: Path

    @property
    def db(self) -> Path:
        return self.data_dir / "data" / "default" / "mnemon.db"

    def backend(self, *, cache_ttl_s: float = 30.0, **options: Any) -> MnemonBackend:
        fields: dict[str, Any] = {"binary": self.binary, "data_dir": self.data_dir}
        return MnemonBackend(MnemonSettings(**{**fields, **options}), cache_ttl_s=cache_ttl_s)

    def cli(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """The binary itself, as a user would run it (for the contract's raw shapes)."""
        full_env = {**os.environ, "MNEMON_EMBED_ENDPOINT": FAIL_FAST_ENDPOINT, **(env or {})}
        argv = [str(self.binary), "--data-dir", str(self.data_dir), *args]
        return subprocess.run(
            argv, check=False, capture_output=True, text=True, env=full_env, timeout=30
        )

    def active(self) -> list[str]:
        """The contents of the live memories, in insertion order, read from the store file."""
        with sqlite3.connect(f"{self.db.as_uri()}?mode=ro", uri=True) as conn:
            rows = conn.execute(
                "SELECT content FROM insights WHERE deleted_at IS NULL ORDER BY rowid"
            ).fetchall()
        conn.close()
        return [r[0] for r in rows]


def lock_retries(
    monkeypatch: pytest.MonkeyPatch, retries: int, first_delay_s: float, read_wait_s: float = 0
) -> None:
    """How the runner retries "database is locked" (constants in `mnemon/process.py`)."""
    monkeypatch.setattr(process, "LOCK_RETRIES", retries)
    monkeypatch.setattr(process, "FIRST_RETRY_DELAY_S", first_delay_s)
    monkeypatch.setattr(process, "READ_LOCK_WAIT_S", read_wait_s)


REAL = real_binary()
KINDS = kinds("june")


@pytest.mark.mnemon_real
def test_the_real_binary_runs_this_whole_suite_when_one_is_found(mnemon_real: Path) -> None:
    """Every test below that describes Mnemon is parametrised over the real binary too (the
    fixture skips, with the reason, where none is found; under CI, where one is expected,
    the run has failed before)."""
    assert mnemon_real == REAL
    assert real_problem() is None
    assert any(getattr(kind, "values", ()) == ("real",) for kind in KINDS)


@pytest.fixture(scope="module", params=KINDS)
def binary(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path]:
    if request.param == "real":
        assert REAL is not None
        return "real", REAL
    version = JUNE_2026 if request.param == "june" else None
    return request.param, fast_launcher(tmp_path_factory.mktemp("bin"), version)


@pytest.fixture
def mnemon(binary: tuple[str, Path], tmp_path: Path) -> Mnemon:
    kind, path = binary
    return Mnemon(kind, path, tmp_path / "mnemon-data")


@pytest.fixture
def double(tmp_path: Path) -> Mnemon:
    """The contract double alone, for its test knobs (`MNEMON_DOUBLE_*`)."""
    return Mnemon("double", fast_launcher(tmp_path / "double-bin"), tmp_path / "mnemon-data")


def mem(content: str, **fields: Any) -> NewMemory:
    return NewMemory(content=content, **fields)


@pytest.fixture
def double_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The double's log: one JSON line (argv, pid, embed endpoint) per process."""
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("MNEMON_DOUBLE_LOG", str(log))
    return log


def logged(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


# ---------------------------------------------------------------- write and read back


async def test_a_written_memory_is_found_with_its_type_importance_tags_and_entities(
    mnemon: Mnemon,
) -> None:
    backend = mnemon.backend()
    outcome = await backend.write(
        mem(
            "To flash the gateway firmware, hold reset and run the vendor tool over USB",
            type=MemoryType.PROCEDURAL,
            importance=0.75,
            tags=["runbook"],
            entities=["Gateway"],
            source="agent",
        )
    )
    assert outcome.action is WriteAction.ADDED
    hits = await backend.search("flash gateway firmware", 5)
    assert [h.memory.id for h in hits] == [outcome.id]
    memory = hits[0].memory
    assert (memory.type, memory.importance, memory.tags) == (
        MemoryType.PROCEDURAL,
        0.75,
        ("runbook",),
    )
    assert "Gateway" in memory.entities
    assert memory.source == "agent"
    assert memory.store == "mnemon"
    assert memory.metadata["category"] == "insight"
    assert memory.created_at is not None
    assert memory.created_at.tzinfo is not None
    assert hits[0].rank == 1


@pytest.mark.parametrize("kind", list(MemoryType))
async def test_every_memory_type_reads_back_as_written(mnemon: Mnemon, kind: MemoryType) -> None:
    backend = mnemon.backend()
    outcome = await backend.write(mem(f"a {kind.value} memory about zebracorns", type=kind))
    (memory,) = await backend.get_memories([outcome.id])
    assert memory.type is kind
    assert not [t for t in memory.tags if t.startswith("memory-type:")]


def test_importance_maps_onto_mnemons_one_to_five_and_back() -> None:
    assert [importance_out(x) for x in (0.0, 0.25, 0.5, 0.75, 1.0)] == [1, 2, 3, 4, 5]
    assert [importance_in(n) for n in (1, 2, 3, 4, 5)] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert importance_in(0) is None
    assert importance_in(True) is None


async def test_awkward_content_round_trips_byte_for_byte(mnemon: Mnemon) -> None:
    backend = mnemon.backend()
    ids = [(await backend.write(mem(text))).id for text in AWKWARD]
    got = await backend.get_memories(ids)
    assert [m.content for m in got] == AWKWARD
    hits = await backend.search("-rf / is not a flag here", 3)
    assert hits
    assert hits[0].memory.content == AWKWARD[1]


async def test_a_memory_with_its_own_time_keeps_it(mnemon: Mnemon) -> None:
    backend = mnemon.backend()
    when = datetime(2023, 5, 7, 18, 30, tzinfo=UTC)
    outcome = await backend.write(mem("The Atlas kickoff happened in Lisbon", created_at=when))
    (memory,) = await backend.get_memories([outcome.id])
    assert memory.created_at == when


# ---------------------------------------------------------------- added / updated / skipped


async def test_an_exact_repeat_is_skipped_and_names_the_memory_that_holds_it(
    mnemon: Mnemon,
) -> None:
    backend = mnemon.backend()
    text = "Dana prefers async standups on Mondays"
    first = await backend.write(mem(text))
    second = await backend.write(mem(text))
    assert second.action is WriteAction.SKIPPED
    assert second.id == second.existing_id == first.id
    assert first.id in second.detail


def test_mnemons_skipped_id_is_a_fresh_id_that_was_never_stored(mnemon: Mnemon) -> None:
    """The contract's trap, seen on the binary itself: the adapter must use `replaced_id`."""
    text = "Chose Qdrant over Milvus for filtering"
    first = json.loads(mnemon.cli("remember", "--", text).stdout)
    again = mnemon.cli("remember", "--", text)
    skipped = json.loads(again.stdout)
    assert skipped["action"] == "skipped"
    assert skipped["replaced_id"] == first["id"]
    assert skipped["id"] != first["id"]
    with sqlite3.connect(f"{mnemon.db.as_uri()}?mode=ro", uri=True) as conn:
        stored = {row[0] for row in conn.execute("SELECT id FROM insights")}
    conn.close()
    assert stored == {first["id"]}
    shown = mnemon.cli("show", "--", skipped["id"])
    assert shown.returncode == 1
    assert shown.stdout == ""
    if 'unknown command "show"' not in shown.stderr:  # a build with `show` (v0.2.x)
        assert "no rows in result set" in shown.stderr


NEAR = (
    "the atlas release train leaves every second tuesday",
    "the atlas release train leaves every second thursday",
)


async def test_near_duplicates_stay_two_memories_whatever_mnemons_own_diff_does(
    mnemon: Mnemon,
) -> None:
    """Mnemon's own diff, as this build has it: v0.2.x keeps both texts; the June 2026 build
    soft-deletes the first (`updated`). Through the adapter (`--no-diff`) both stay."""
    old = json.loads(mnemon.cli("--store", "raw", "remember", "--", NEAR[0]).stdout)
    new = json.loads(mnemon.cli("--store", "raw", "remember", "--", NEAR[1]).stdout)
    replaces = new["action"] == "updated"
    if replaces:  # the build's own answer to a near-duplicate: the older one is gone
        assert new["replaced_id"] == old["id"]
        assert new["diff_suggestion"] in ("UPDATE", "CONFLICT")
    else:
        assert new["action"] == "added"
    backend = mnemon.backend()
    first = await backend.write(mem(NEAR[0]))
    second = await backend.write(mem(NEAR[1]))
    assert (first.action, second.action) == (WriteAction.ADDED, WriteAction.ADDED)
    got = await backend.get_memories([first.id, second.id])
    assert [m.content for m in got] == list(NEAR)
    assert backend.notes == ()


def test_mnemons_updated_answer_names_the_memory_it_replaced() -> None:
    """A build that refused `--no-diff` would answer `updated` itself: reported as it is."""
    data = {"action": "updated", "id": "new-id", "replaced_id": "old-id"}
    got = outcome(data, "remember")
    assert (got.action, got.id, got.existing_id) == (WriteAction.UPDATED, "new-id", "old-id")
    assert "replaced old-id" in got.detail


# ---------------------------------------------------------------- bulk write


async def test_write_many_is_one_import_process_and_keeps_times(mnemon: Mnemon) -> None:
    backend = mnemon.backend()
    memories = [
        mem(
            f"Sprint {i} retro: the deploy pipeline was slow",
            created_at=datetime(2024, 2, i + 1, tzinfo=UTC),
            entities=["Pipeline"],
        )
        for i in range(6)
    ]
    existing = await backend.write(mem("Sprint 2 retro: the deploy pipeline was slow"))
    before = backend.calls_by_command["import"]
    outcomes = await backend.write_many(memories)
    assert backend.calls_by_command["import"] - before == 1
    assert [o.action for o in outcomes].count(WriteAction.SKIPPED) == 1
    assert outcomes[2].id == outcomes[2].existing_id == existing.id
    added = [o.id for o in outcomes if o.action is WriteAction.ADDED]
    got = await backend.get_memories(added)
    assert [m.created_at for m in got] == [
        datetime(2024, 2, i + 1, tzinfo=UTC) for i in (0, 1, 3, 4, 5)
    ]
    assert sorted(mnemon.active()) == sorted(m.content for m in memories)  # six stay six


async def test_byte_identical_repeats_in_one_batch_are_written_once(mnemon: Mnemon) -> None:
    backend = mnemon.backend()
    texts = [
        "Dana owns the Atlas budget",
        "Lee owns the radio firmware",
        "Dana owns the Atlas budget",
    ]
    outcomes = await backend.write_many([mem(t) for t in texts])
    assert [o.action for o in outcomes] == [
        WriteAction.ADDED,
        WriteAction.ADDED,
        WriteAction.SKIPPED,
    ]
    assert outcomes[2].id == outcomes[2].existing_id == outcomes[0].id
    again = await backend.write_many([mem(texts[1])])
    assert (again[0].action, again[0].id) == (WriteAction.SKIPPED, outcomes[1].id)
    assert mnemon.active() == texts[:2]


async def test_a_memory_over_mnemons_limits_is_refused_before_anything_runs(mnemon: Mnemon) -> None:
    backend = mnemon.backend()
    with pytest.raises(BackendError, match="8000"):
        await backend.write(mem("é" * 4001))  # 8002 bytes, within 8000 characters
    with pytest.raises(BackendError, match=r"memories\[1\].*tags"):
        await backend.write_many(
            [mem("fine"), mem("too many tags", tags=[f"t{i}" for i in range(21)])]
        )
    assert backend.process_calls == 0


# ---------------------------------------------------------------- search


async def test_recall_anchors_without_a_signal_are_dropped(mnemon: Mnemon) -> None:
    backend = mnemon.backend()
    await backend.write_many([mem(f"lunch menu item {i}: soup of the day") for i in range(8)])
    wanted = await backend.write(mem("The quarterly zeppelin audit found two leaks"))
    raw = json.loads(mnemon.cli("recall", "--verbose", "--", "zeppelin audit").stdout)
    assert len(raw["results"]) > 1  # Mnemon mixes in recent memories
    hits = await backend.search("zeppelin audit", 10)
    assert [h.memory.id for h in hits] == [wanted.id]


async def test_a_type_filter_is_honoured(mnemon: Mnemon) -> None:
    backend = mnemon.backend()
    await backend.write(mem("firmware incident on the radio module", type=MemoryType.EPISODIC))
    howto = await backend.write(
        mem("firmware flashing steps for the radio", type=MemoryType.PROCEDURAL)
    )
    only = SearchFilters(memory_types=[MemoryType.PROCEDURAL])
    assert [h.memory.id for h in await backend.search("firmware radio", 10, only)] == [howto.id]
    both = SearchFilters(memory_types=[MemoryType.PROCEDURAL, MemoryType.EPISODIC])
    assert len(await backend.search("firmware radio", 10, both)) == 2


async def test_blank_queries_give_nothing_without_a_process(mnemon: Mnemon) -> None:
    backend = mnemon.backend()
    assert await backend.search("   ", 5) == []
    assert await backend.search("x", 0) == []
    assert backend.process_calls == 0


# ---------------------------------------------------------------- by id, graph, entities


def _three_linked(backend: MnemonBackend) -> Callable[[], Awaitable[list[str]]]:
    async def write() -> list[str]:
        return [
            (await backend.write(mem(text, entities=entities))).id
            for text, entities in (
                ("Vendor X missed the March milestone", ["Vendor X"]),
                ("Procurement escalated the Vendor X risk", ["Vendor X", "Procurement"]),
                ("Procurement moved to a new ticket queue", ["Procurement"]),
            )
        ]

    return write


async def test_get_memories_reads_the_store_file_without_a_process(mnemon: Mnemon) -> None:
    backend = mnemon.backend()
    ids = await _three_linked(backend)()
    assert await backend.forget(ids[1])
    calls = backend.process_calls
    got = await backend.get_memories([ids[2], "unknown-id", ids[1], ids[0], ids[2]])
    assert [m.id for m in got] == [ids[2], ids[0]]
    assert backend.process_calls == calls


async def test_get_memories_with_more_ids_than_one_sql_statement_takes(mnemon: Mnemon) -> None:
    """900 ids (the store file is asked in chunks of SQL_CHUNK, under SQLite's variable
    limit): every live one comes back once, in the order asked, with no process."""
    assert store_file.SQL_CHUNK * 2 < 900
    backend = mnemon.backend()
    texts = [f"Ticket {n} was triaged by the on-call engineer" for n in range(900)]
    outcomes = await backend.write_many([mem(t) for t in texts])
    ids = [o.id for o in outcomes]
    assert len(set(ids)) == 900
    assert await backend.forget(ids[450])
    calls = backend.process_calls
    asked = [*reversed(ids), "unknown-id", *ids[:5]]
    got = await backend.get_memories(asked)
    assert [m.id for m in got] == [i for i in reversed(ids) if i != ids[450]]
    assert [m.content for m in got[:2]] == [texts[899], texts[898]]
    assert backend.process_calls == calls


async def test_a_store_file_of_an_unknown_schema_is_read_through_the_cli_and_noted(
    mnemon: Mnemon,
) -> None:
    backend = mnemon.backend()
    written = await backend.write(mem("a memory in a store from the future"))
    with sqlite3.connect(mnemon.db) as conn:
        conn.execute("PRAGMA user_version = 7")
    got = await backend.get_memories([written.id])
    assert [m.id for m in got] == [written.id]
    assert backend.calls_by_command["show"] == 1
    assert any("schema version 7 is newer" in note for note in backend.notes)
    direct = next(c for c in await backend.health() if c.name == "direct_reads")
    assert direct.status is Status.DEGRADED


async def test_get_memories_through_the_cli_asks_show_per_id(
    mnemon: Mnemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`show` per id; a build without `show` refuses the first and is listed once instead
    (one `recall --basic`), and is never asked `show` again."""
    monkeypatch.setattr(process, "MAX_PROCESSES", 1)  # no lock retries
    backend = mnemon.backend(direct_reads=False)
    ids = await _three_linked(backend)()
    for _ in range(2):
        before = Counter(backend.calls_by_command)
        got = await backend.get_memories([ids[2], "unknown-id", ids[0]])
        assert [m.id for m in got] == [ids[2], ids[0]]
        assert got[0].entities == ("Procurement",)
        spent = backend.calls_by_command - before
        if backend.features.has("show"):
            assert spent == Counter(show=3)
        else:  # refused once (the first call), then listed (the count from `status`)
            shown = 1 if before["show"] == 0 else 0
            assert (spent["show"], spent["recall"]) == (shown, 1)


@pytest.mark.parametrize("direct", [True, False], ids=["store-file", "related"])
async def test_neighbors_walk_the_graph_within_hops_types_and_limit(
    mnemon: Mnemon, direct: bool
) -> None:
    backend = mnemon.backend(direct_reads=direct)
    a, b, c = await _three_linked(backend)()
    one = await backend.neighbors([a], ["entity"], hops=1)
    assert [n.memory.id for n in one] == [b]
    assert (one[0].seed_id, one[0].edge_type, one[0].hops) == (a, "entity", 1)
    two = {n.memory.id: n.hops for n in await backend.neighbors([a], ["entity"], hops=2)}
    assert two == {b: 1, c: 2}
    assert len(await backend.neighbors([a], None, hops=2, limit=1)) == 1
    assert await backend.neighbors([a], [], hops=2) == []
    assert await backend.neighbors(["unknown-id"], None, hops=2) == []
    if direct:
        far = next(n for n in await backend.neighbors([a], ["entity"], hops=2) if n.hops == 2)
        assert far.via_id == b
        assert 0 < far.weight <= 1


async def test_known_entities_come_most_frequent_first(mnemon: Mnemon) -> None:
    async def main(backend: MnemonBackend) -> list[str]:
        await _three_linked(backend)()
        return await backend.known_entities()

    direct = await main(mnemon.backend())
    assert direct[:2] in (["Procurement", "Vendor X"], ["Vendor X", "Procurement"])
    by_status = mnemon.backend(direct_reads=False)
    assert set(await by_status.known_entities()) >= {"Vendor X", "Procurement"}
    assert by_status.calls_by_command["status"] == 1


# ---------------------------------------------------------------- link and forget


async def test_link_writes_a_typed_weighted_edge_with_string_metadata(mnemon: Mnemon) -> None:
    backend = mnemon.backend()
    a, b, c = await _three_linked(backend)()
    edge = await backend.link(a, c, "causal", 0.4, {"why": "escalation", "n": 2})
    assert (edge.type, edge.weight) == ("causal", 0.4)
    assert edge.meta["why"] == "escalation"
    assert edge.meta["n"] == "2"
    update = await backend.link(c, a, "update", 1.0)
    if backend.features.has("supersedes"):  # learned from the binary's answer
        assert (update.type, update.meta.get("relation")) == ("supersedes", "update")
    else:  # a build without the edge type: the direction is kept in the metadata
        assert (update.type, update.meta["supersedes"]) == ("semantic", a)
    odd = await backend.link(a, b, "blocks", 0.5)
    assert odd.type == "semantic"
    assert odd.meta.get("relation") == "blocks"
    with pytest.raises(BackendError, match="not found"):
        await backend.link(a, "unknown-id", "causal", 0.5)
    with pytest.raises(BackendError, match="weight"):
        await backend.link(a, c, "causal", 1.5)


async def test_a_related_link_mnemon_already_made_costs_no_process(mnemon: Mnemon) -> None:
    backend = mnemon.backend()
    a, b, _ = await _three_linked(backend)()  # Mnemon linked a and b by their entity
    calls = backend.process_calls
    edge = await backend.link(b, a, "related", 0.5)
    assert edge.type == "entity"
    assert {edge.source_id, edge.target_id} == {a, b}
    assert backend.process_calls == calls


async def test_forget_hides_a_memory_everywhere_and_is_false_the_second_time(
    mnemon: Mnemon,
) -> None:
    backend = mnemon.backend()
    a, b, _ = await _three_linked(backend)()
    assert await backend.forget(b) is True
    assert await backend.forget(b) is False
    assert await backend.forget("unknown-id") is False
    assert await backend.get_memories([b]) == []
    assert b not in {h.memory.id for h in await backend.search("Vendor X risk", 10)}
    assert b not in {n.memory.id for n in await backend.neighbors([a], None, hops=2)}


# ---------------------------------------------------------------- health and failures


async def test_health_reports_binary_version_store_and_direct_reads(mnemon: Mnemon) -> None:
    backend = mnemon.backend()
    await _three_linked(backend)()
    checks = {c.name: c for c in await backend.health()}
    assert {c.status for c in checks.values()} == {Status.OK}, checks
    assert checks["version"].detail.startswith("mnemon version ")
    assert "3 memories" in checks["store"].detail
    assert str(mnemon.db) in checks["direct_reads"].detail


async def test_a_missing_binary_is_a_clear_error_saying_how_to_install_it(tmp_path: Path) -> None:
    backend = MnemonBackend(MnemonSettings(binary=tmp_path / "nope" / "mnemon", data_dir=tmp_path))
    with pytest.raises(
        BackendError, match=r"not found.*go install github.com/mnemon-dev/mnemon@v0\.2\.9"
    ):
        await backend.search("anything", 5)
    with pytest.raises(BackendError, match="make mnemon"):
        await backend.write(mem("x"))
    checks = await backend.health()
    assert checks[0].name == "binary"
    assert checks[0].status is Status.ERROR
    assert "go install" in checks[0].detail


def test_binary_from_config_then_tools_in_the_working_directory_then_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    on_path = fast_launcher(tmp_path / "path-bin")
    monkeypatch.setenv("PATH", f"{on_path.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    local = fast_launcher(tmp_path / ".tools" / "bin")  # the working directory is tmp_path
    configured = fast_launcher(tmp_path / "configured")
    assert MnemonBackend(MnemonSettings(binary=configured)).binary() == configured
    assert MnemonBackend(MnemonSettings(binary=Path("mnemon"))).binary() == on_path
    assert MnemonBackend(MnemonSettings()).binary() == local
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # not the source checkout's, nor the last directory's
    assert MnemonBackend(MnemonSettings()).binary() == on_path
    monkeypatch.chdir(tmp_path)
    local.unlink()
    assert MnemonBackend(MnemonSettings()).binary() == on_path


async def test_a_bad_store_name_is_refused_before_anything_runs(
    mnemon: Mnemon, tmp_path: Path
) -> None:
    backend = mnemon.backend()
    backend.store, backend.store_error = "../escape", "invalid mnemon store name '../escape'"
    for call in (
        lambda: backend.write(mem("x")),
        lambda: backend.search("x", 3),
        lambda: backend.get_memories(["a"]),
        lambda: backend.forget("a"),
    ):
        with pytest.raises(BackendError, match="invalid mnemon store name"):
            await call()
    assert backend.process_calls == 0
    assert not mnemon.data_dir.exists()
    with pytest.raises(ValueError, match="store"):
        MnemonSettings(store="../x")


async def test_a_bad_store_name_from_the_environment_is_refused_too(
    mnemon: Mnemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNEMON_STORE", "no/slashes")
    backend = mnemon.backend()
    with pytest.raises(BackendError, match="no/slashes"):
        await backend.write(mem("x"))
    assert backend.process_calls == 0
    assert not mnemon.data_dir.exists()
    assert (await backend.health())[2].status is Status.ERROR


async def test_stores_are_isolated_by_name(mnemon: Mnemon) -> None:
    work, home = mnemon.backend(store="work"), mnemon.backend(store="home-2")
    await work.write(mem("the work store holds the zeppelin budget"))
    assert await home.search("zeppelin budget", 5) == []
    assert len(await work.search("zeppelin budget", 5)) == 1
    assert (mnemon.data_dir / "data" / "work" / "mnemon.db").is_file()


# ---------------------------------------------------------------- listing


async def test_listing_pages_through_the_store_file_and_resumes_with_later_writes(
    mnemon: Mnemon,
) -> None:
    backend = mnemon.backend()

    async def collect(cursor: str | None) -> tuple[list[str], str | None]:
        ids: list[str] = []
        while True:
            page, cursor = await backend.list_memories(cursor, 2)
            assert len(page) <= 2
            ids += [m.id for m in page]
            if len(page) < 2:
                return ids, cursor

    assert backend.capabilities.listing
    assert await backend.list_memories(None, 5) == ([], None)  # no store file yet
    first = await backend.write_many([mem(f"listed insight number {n}") for n in range(5)])
    calls = backend.process_calls
    listed, cursor = await collect(None)
    assert backend.process_calls == calls  # read from the file: no process
    assert listed == [o.id for o in first]
    assert await backend.list_memories(cursor, 5) == ([], cursor)
    assert await backend.forget(first[4].id)  # the last one handed out
    later = await backend.write(mem("an insight written later"))
    forgotten = await backend.write(mem("an insight forgotten before it was listed"))
    assert await backend.forget(forgotten.id)
    assert (await collect(cursor))[0] == [later.id]
    everything, _ = await collect("1:not-the-id-of-row-1")  # a rebuilt table: start over
    assert everything == [*(o.id for o in first[:4]), later.id]


async def test_without_direct_reads_nothing_is_listed_and_the_capability_says_so(
    mnemon: Mnemon,
) -> None:
    backend = mnemon.backend(direct_reads=False)
    await backend.write(mem("an insight the CLI alone can reach"))
    assert not backend.capabilities.listing
    assert await backend.list_memories(None, 5) == ([], None)
    assert any("nothing listed" in note for note in backend.notes)


async def test_a_store_file_of_an_unknown_schema_is_not_listed(mnemon: Mnemon) -> None:
    backend = mnemon.backend()
    await backend.write(mem("an insight in a store from the future"))
    with sqlite3.connect(mnemon.db) as conn:
        conn.execute("PRAGMA user_version = 7")
    assert await backend.list_memories(None, 5) == ([], None)
    assert any("schema version 7 is newer" in note for note in backend.notes)


@contextmanager
def write_locked(db: Path) -> Iterator[sqlite3.Connection]:
    """Another process's write transaction on the store (what Mnemon meets without a busy
    timeout when two writers overlap)."""
    conn = sqlite3.connect(db, timeout=0, isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.close()


async def test_a_writer_meeting_a_lock_fails_at_once_with_database_is_locked(
    mnemon: Mnemon,
) -> None:
    await mnemon.backend().write(mem("the store exists now"))
    with write_locked(mnemon.db):
        result = mnemon.cli("remember", "--", "blocked")
    assert result.returncode == 1
    assert result.stdout == ""
    assert "database is locked" in result.stderr


def release_when(
    held: sqlite3.Connection, ready: Callable[[], bool], within_s: float = 30.0
) -> None:
    """End the lock `held` once `ready()` (the adapter has met it and tried again), not after
    a fixed time: a slow process start must not let the lock clear before the first try."""

    def wait() -> None:
        deadline = time.monotonic() + within_s
        while not ready() and time.monotonic() < deadline:
            time.sleep(0.01)
        held.execute("ROLLBACK")

    threading.Thread(target=wait, daemon=True).start()


async def test_a_locked_store_is_retried_until_the_lock_clears(
    mnemon: Mnemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock_retries(monkeypatch, 8, 0.02)
    backend = mnemon.backend()
    await backend.write(mem("the store exists now"))
    with write_locked(mnemon.db) as held:
        # the write before, the first try under the lock, one retry: then the lock clears
        release_when(held, lambda: backend.calls_by_command["remember"] >= 3)
        outcome = await backend.write(mem("written once the lock cleared"))
    assert outcome.action is WriteAction.ADDED
    assert backend.calls_by_command["remember"] >= 3  # the first try, at least one retry


async def test_a_store_that_stays_locked_gives_a_clear_transient_error(
    mnemon: Mnemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock_retries(monkeypatch, 2, 0.01)
    backend = mnemon.backend()
    await backend.write(mem("the store exists now"))
    with write_locked(mnemon.db), pytest.raises(BackendError) as caught:
        await backend.write(mem("never written"))
    assert caught.value.transient
    assert "locked" in str(caught.value)
    assert "gave up after 3 tries" in str(caught.value)
    assert backend.calls_by_command["remember"] == 1 + 3


async def test_a_read_keeps_retrying_a_locked_store_for_its_time_budget(
    mnemon: Mnemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where this build's reads meet a held write lock at open (v0.2.x: every open runs a
    write), they retry for `READ_LOCK_WAIT_S`, not just `LOCK_RETRIES` times; the June 2026
    build's reads never meet it (its open ignores the busy error), so one process answers.
    Writes keep their count on every build."""
    lock_retries(monkeypatch, 0, 0.02, read_wait_s=60)
    backend = mnemon.backend()
    await backend.write(mem("the lighthouse keeper logs the storm"))
    with write_locked(mnemon.db) as held:
        meets_lock = mnemon.cli("recall", "--", "lighthouse").returncode != 0
        if meets_lock:
            release_when(held, lambda: backend.calls_by_command["recall"] >= 2)
        hits = await backend.search("lighthouse storm", 3)
    assert [h.memory.content for h in hits] == ["the lighthouse keeper logs the storm"]
    if meets_lock:
        assert backend.calls_by_command["recall"] >= 2  # met the lock, retried past `retries`
    else:
        assert backend.calls_by_command["recall"] == 1
    with write_locked(mnemon.db), pytest.raises(BackendError, match="gave up after 1 tries"):
        await backend.write(mem("a write still gives up after its retries"))


async def test_a_corrupted_store_is_a_clear_error_and_health_says_so(mnemon: Mnemon) -> None:
    mnemon.db.parent.mkdir(parents=True)
    mnemon.db.write_bytes(b"this is not a sqlite database, just bytes " * 200)
    backend = mnemon.backend()
    with pytest.raises(BackendError, match="not a database"):
        await backend.write(mem("x"))
    with pytest.raises(BackendError, match="not a database"):
        await backend.search("x", 3)
    with pytest.raises(BackendError, match="not a database"):
        await backend.get_memories(["a"])
    checks = {c.name: c for c in await backend.health()}
    assert checks["store"].status is Status.ERROR
    assert checks["direct_reads"].status is Status.ERROR


async def test_concurrent_writes_through_two_backends_lose_nothing(mnemon: Mnemon) -> None:
    first, second = mnemon.backend(), mnemon.backend()

    async def main() -> int:
        async with anyio.create_task_group() as group:
            for i in range(10):
                group.start_soon((first if i % 2 else second).write, mem(f"parallel note {i}"))
        return int((await first.status(fresh=True))["total_insights"])

    assert await main() == 10


async def test_a_process_past_its_timeout_is_killed(
    double: Mnemon, double_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNEMON_DOUBLE_SLEEP_S", "30")
    backend = double.backend(timeout_s=3)  # ample for the process to start and log itself
    with pytest.raises(MnemonTimeout, match=r"timed out after 3s and was killed"):
        await backend.status(fresh=True)
    (entry,) = logged(double_log)
    assert _gone(entry["pid"])  # killed; reaped a moment later (a zombie until then)


async def test_a_caller_giving_up_kills_the_process_at_once(
    double: Mnemon, double_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNEMON_DOUBLE_SLEEP_S", "30")
    backend = double.backend(timeout_s=60)

    async def main() -> float:
        async with anyio.create_task_group() as group:
            group.start_soon(partial(backend.status, fresh=True))
            with anyio.fail_after(30):  # the process has started: it wrote its log line
                while not logged(double_log):
                    await anyio.sleep(0.01)
            started = anyio.current_time()
            group.cancel_scope.cancel()  # the caller gives up
        return anyio.current_time() - started

    assert await main() < 5
    (entry,) = logged(double_log)
    assert _gone(entry["pid"])  # killed; reaped a moment later (a zombie until then)


def _gone(pid: int, within_s: float = 10.0) -> bool:
    """Whether `pid` has exited (a zombie waiting for its reaper counts as gone), polled for
    up to `within_s` (a bound, not a speed assertion)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("ignores_sigterm", [False, True])
async def test_a_timeout_stops_the_binary_behind_an_npm_style_launcher(
    double: Mnemon,
    double_log: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    ignores_sigterm: bool,
) -> None:
    """Mnemon's npm launcher runs the binary as a child and forwards only INT, TERM and HUP:
    killing the launcher alone leaves the binary running. The whole process group goes."""
    monkeypatch.setenv("MNEMON_DOUBLE_SLEEP_S", "30")
    if ignores_sigterm:
        monkeypatch.setenv("MNEMON_DOUBLE_IGNORE_TERM", "1")
    launcher = npm_launcher(tmp_path / "npm-bin", double.binary)
    # a timeout ample for the launcher and the binary to start (the binary sleeps 30 s)
    backend = MnemonBackend(MnemonSettings(binary=launcher, data_dir=double.data_dir, timeout_s=3))
    with pytest.raises(MnemonTimeout, match="timed out after 3s"):
        await backend.status(fresh=True)
    (entry,) = logged(double_log)  # the binary itself, a child of the launcher
    assert _gone(entry["pid"])


async def test_reads_and_writes_start_no_version_check(mnemon: Mnemon) -> None:
    """What the binary can do is learned from its answers, so the first request is one
    process (with a slow process start, two in a row passed the retrieval timeout)."""
    mnemon.cli("remember", "--", "the store exists before the concurrent reads")
    backend = mnemon.backend(direct_reads=False)
    async with anyio.create_task_group() as group:
        for query in ("alpha", "beta", "gamma", "delta"):
            group.start_soon(backend.search, query, 3)
    written = await backend.write(mem("a note", created_at=datetime(2026, 1, 2, tzinfo=UTC)))
    await backend.get_memories([written.id])
    assert "--version" not in backend.calls_by_command
    assert backend.calls_by_command["recall"] >= 4  # more when an open met a lock and retried
    lacks_show = 'unknown command "show"' in mnemon.cli("show", "--", "some-id").stderr
    assert [n for n in backend.notes if "has no `show`" not in n or not lacks_show] == []
    assert any("has no `show`" in n for n in backend.notes) is lacks_show


async def test_health_asks_version_and_status_at_once(tmp_path: Path) -> None:
    """A fake whose `--version` answers only once a `status` process has started: in a row,
    with a slow process start, the two passed the health timeout."""
    marker = tmp_path / "status-started"
    fake = _fake_binary(
        tmp_path / "bin",
        "import time, pathlib\n"
        f"marker = pathlib.Path({str(marker)!r})\n"
        "if '--version' in sys.argv:\n"
        "    deadline = time.monotonic() + 20\n"
        "    while not marker.exists() and time.monotonic() < deadline:\n"
        "        time.sleep(0.01)\n"
        "    print('mnemon version dev' if marker.exists() else 'too late')\n"
        "    sys.exit(0 if marker.exists() else 1)\n"
        "marker.touch()\n"
        'print(\'{"total_insights": 2, "edge_count": 1}\')',
    )
    backend = MnemonBackend(MnemonSettings(binary=fake, data_dir=tmp_path, timeout_s=30))
    checks = {c.name: c for c in await backend.health()}
    assert [c for c in checks] == ["binary", "version", "store", "direct_reads", "features"]
    assert checks["version"].status is Status.OK, checks["version"].detail
    assert checks["store"].status is Status.OK


async def test_concurrent_reads_that_meet_a_lock_at_open_are_retried(
    mnemon: Mnemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mnemon takes the write lock briefly on every open (its migration probes)."""
    lock_retries(monkeypatch, 8, 0.02)
    backend = mnemon.backend()
    await backend.write(mem("the zeppelin hangar opens at dawn"))

    async def main() -> list[int]:
        counts: list[int] = []

        async def one() -> None:
            counts.append(len(await backend.search("zeppelin hangar", 3)))

        async with anyio.create_task_group() as group:
            for _ in range(8):
                group.start_soon(one)
        return counts

    assert await main() == [1] * 8


def _fake_binary(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "mnemon"
    path.write_text(f"#!{sys.executable} -S\nimport sys\n{body}\n", encoding="utf-8")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("style", ["go", "camel"])
async def test_records_printed_with_go_or_camel_case_keys_are_read(
    mnemon: Mnemon, tmp_path: Path, style: str
) -> None:
    """Newer builds may print `ID`, `CreatedAt` or `createdAt`: the same fields."""
    renamed = renaming_binary(tmp_path / style, mnemon.binary, style)
    backend = MnemonBackend(
        MnemonSettings(binary=renamed, data_dir=mnemon.data_dir, direct_reads=False)
    )
    first = await backend.write(
        mem("the Atlas rollout is blocked on the vendor", entities=["Atlas"])
    )
    second = await backend.write(mem("the Atlas vendor promised a fix", entities=["Atlas"]))
    repeat = await backend.write(mem("the Atlas vendor promised a fix"))
    assert repeat.action is WriteAction.SKIPPED
    assert repeat.existing_id == second.id
    hits = await backend.search("Atlas vendor", 5)
    assert {h.memory.id for h in hits} == {first.id, second.id}
    assert all(h.memory.created_at is not None for h in hits)
    got = await backend.get_memories([first.id])
    assert [m.content for m in got] == ["the Atlas rollout is blocked on the vendor"]
    near = await backend.neighbors([first.id], hops=1)
    assert second.id in {n.memory.id for n in near}


async def test_records_without_an_id_are_an_error_never_no_results(
    mnemon: Mnemon, tmp_path: Path
) -> None:
    await mnemon.backend().write(mem("the Atlas rollout is blocked on the vendor"))
    renamed = renaming_binary(tmp_path / "no-id", mnemon.binary, "no-id")
    backend = MnemonBackend(MnemonSettings(binary=renamed, data_dir=mnemon.data_dir))
    with pytest.raises(BackendError, match=r"a record without an id .*uuid"):
        await backend.search("Atlas vendor", 5)
    assert any("without an id" in note for note in backend.notes)

    async def checks() -> dict[str, Status]:
        found = await store_checks(backend, StoreCalls(Settings()))
        return {c.name: c.status for c in found}

    statuses = await checks()
    assert statuses["retrieval"] is Status.ERROR
    assert statuses["features"] is Status.DEGRADED


async def test_the_correction_marks_start_from_the_edges_never_from_every_insight(
    mnemon: Mnemon,
) -> None:
    """Every read looks up correction marks: its plan must find edges by target first (a
    join let SQLite walk every live insight instead, for every page of a read)."""
    await _three_linked(mnemon.backend())()
    ids = [f"id-{n}" for n in range(200)]  # a page of ids, as a read asks
    marks = ",".join("?" * len(ids))
    with sqlite3.connect(f"{mnemon.db.as_uri()}?mode=ro", uri=True) as conn:
        query = "EXPLAIN QUERY PLAN " + SUPERSEDED_BY.format(marks=marks)
        plan = conn.execute(query, ids).fetchall()
    conn.close()
    steps = [str(row[-1]) for row in plan]
    assert not [s for s in steps if s.startswith("SCAN") or "idx_insights_deleted" in s], steps


async def test_a_build_without_no_diff_is_written_to_without_it_and_says_so(tmp_path: Path) -> None:
    """A (fake) build that refuses `--no-diff`: the write is made again without it, once,
    and the note says Mnemon's own duplicate check applies."""
    fake = _fake_binary(
        tmp_path / "bin",
        "import json\n"
        "if '--no-diff' in sys.argv:\n"
        "    sys.stderr.write('Error: unknown flag: --no-diff\\n')\n"
        "    sys.exit(1)\n"
        "print(json.dumps({'id': 'new-id', 'action': 'updated', 'replaced_id': 'old-id'}))",
    )
    backend = MnemonBackend(MnemonSettings(binary=fake, data_dir=tmp_path, direct_reads=False))
    first = await backend.write(mem("a note"))
    assert (first.action, first.existing_id) == (WriteAction.UPDATED, "old-id")
    await backend.write(mem("another note"))
    assert backend.calls_by_command["remember"] == 3  # refused once, then never asked again
    assert any("has no `no-diff`" in note for note in backend.notes)


async def test_output_that_is_not_json_is_a_backend_error(tmp_path: Path) -> None:
    fake = _fake_binary(
        tmp_path / "bin",
        "print('mnemon version 0.2.9' if '--version' in sys.argv else 'oops, not json')",
    )
    backend = MnemonBackend(MnemonSettings(binary=fake, data_dir=tmp_path, direct_reads=False))
    with pytest.raises(BackendError, match=r"no valid JSON.*oops"):
        await backend.search("x", 3)


async def test_stderr_becomes_the_error_message_and_warnings_do_not_fail(tmp_path: Path) -> None:
    fake = _fake_binary(
        tmp_path / "bin",
        "if '--version' in sys.argv:\n"
        "    print('mnemon version 0.2.9')\n"
        "    sys.exit(0)\n"
        "if 'status' in sys.argv:\n"
        "    sys.stderr.write('warning: invalid MNEMON_PRUNE_MIN_AGE (ignored)\\n')\n"
        "    print('{\"total_insights\": 0}')\n"
        "    sys.exit(0)\n"
        "sys.stderr.write('Error: recall: the sky fell\\nUsage:\\n  mnemon recall\\n\\nrecall: the sky fell\\n')\n"
        "sys.exit(1)",
    )
    backend = MnemonBackend(MnemonSettings(binary=fake, data_dir=tmp_path))
    assert await backend.status() == {"total_insights": 0}
    with pytest.raises(BackendError) as caught:
        await backend.search("x", 3)
    assert str(caught.value) == "mnemon recall failed (exit 1): recall: the sky fell"
    assert not caught.value.transient


async def test_arguments_are_a_list_with_free_text_after_a_double_dash(
    double: Mnemon, double_log: Path
) -> None:
    backend = double.backend()
    await backend.write(mem("--store=evil -- text", tags=["t"]))
    await backend.search("--limit 999", 3)
    calls = {
        entry["argv"][4]: entry["argv"] for entry in logged(double_log) if len(entry["argv"]) > 4
    }
    remember = calls["remember"]
    assert remember[:5] == ["--data-dir", str(double.data_dir), "--store", "default", "remember"]
    assert remember[-2:] == ["--", "--store=evil -- text"]
    assert calls["recall"][-2:] == ["--", "--limit 999"]


async def test_the_embedding_probe_is_pointed_at_an_address_that_fails_at_once(
    double: Mnemon, double_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unless Mnemon's own MNEMON_EMBED_ENDPOINT is set: then Mnemon uses it."""
    monkeypatch.delenv("MNEMON_EMBED_ENDPOINT", raising=False)
    await double.backend().write(mem("no embeddings here"))
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", "http://127.0.0.1:9")
    await double.backend().search("embeddings", 3)
    endpoints = [entry["embed_endpoint"] for entry in logged(double_log)]
    assert endpoints[0] == FAIL_FAST_ENDPOINT
    assert endpoints[-1] == "http://127.0.0.1:9"


async def test_readonly_reads_leave_no_trace_and_writes_are_refused(mnemon: Mnemon) -> None:
    """On every build: the adapter refuses writes before any process (some builds' own
    `--readonly` writes), reads leave the store's access counts alone, and the store stays a
    WAL store (some builds' `--readonly` reads switch it out of WAL mode: those read a
    snapshot instead, and a note says so)."""
    writer, reader = mnemon.backend(), mnemon.backend(readonly=True)
    outcome = await writer.write(mem("the readonly zeppelin"))
    before = (await writer.get_memories([outcome.id]))[0].metadata["access_count"]
    assert [h.memory.id for h in await reader.search("readonly zeppelin", 3)] == [outcome.id]
    after = (await writer.get_memories([outcome.id]))[0].metadata["access_count"]
    assert after == before
    calls = reader.process_calls
    for write in (
        lambda: reader.write(mem("refused")),
        lambda: reader.write_many([mem("refused too")]),
        lambda: reader.forget(outcome.id),
    ):
        with pytest.raises(BackendError, match="unavailable with --readonly"):
            await write()
    assert reader.process_calls == calls
    await writer.search("readonly zeppelin", 3)
    bumped = (await writer.get_memories([outcome.id]))[0].metadata["access_count"]
    assert isinstance(before, int)
    assert bumped == before + 1
    await reader.close()
    assert mnemon.active() == ["the readonly zeppelin"]
    with sqlite3.connect(mnemon.db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    honoured = reader.readonly.honoured
    assert any("--readonly still writes" in n for n in reader.notes) is (honoured is False)


async def test_an_older_build_runs_on_fallbacks_and_says_which(
    double: Mnemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNEMON_DOUBLE_VERSION", "0.1.8")
    backend = double.backend(direct_reads=False)

    outcomes = await backend.write_many([mem("old build note one"), mem("old build note two")])
    assert backend.calls_by_command["remember"] == 2
    assert backend.calls_by_command["import"] == 1  # refused: not asked again
    await backend.write(mem("timed", created_at=datetime(2026, 1, 2, tzinfo=UTC)))
    assert backend.calls_by_command["import"] == 1
    hits = await backend.search("old build note", 5)
    assert {h.memory.id for h in hits} == {o.id for o in outcomes}
    assert hits[0].memory.created_at is not None  # the full shape, without --verbose
    got = await backend.get_memories([outcomes[1].id])
    assert [m.id for m in got] == [outcomes[1].id]
    assert backend.calls_by_command["show"] == 1  # refused once, then the listing
    edge = await backend.link(outcomes[0].id, outcomes[1].id, "update", 1.0)
    assert edge.type == "semantic"
    notes = " | ".join(backend.notes)
    for missing in ("`import`", "`verbose`", "`show`", "`supersedes`"):
        assert f"this mnemon has no {missing}" in notes
    assert "--version" not in backend.calls_by_command  # learned from its answers
    features = next(c for c in await backend.health() if c.name == "features")
    assert features.status is Status.DEGRADED


async def test_version_and_status_are_cached(mnemon: Mnemon) -> None:
    backend = mnemon.backend()
    await backend.health()
    await backend.health()
    assert backend.calls_by_command["--version"] == 1
    assert backend.calls_by_command["status"] == 1
    fresh = mnemon.backend(cache_ttl_s=0)
    await fresh.health()
    await fresh.health()
    assert fresh.calls_by_command["status"] == 2


async def test_the_top_level_cache_ttl_s_is_mnemons_cache_lifetime(
    mnemon: Mnemon, tmp_path: Path
) -> None:
    """One setting for what a store says about itself (`[mnemon]` has none of its own)."""
    where = {"binary": mnemon.binary, "data_dir": mnemon.data_dir}
    settings = load_settings(data_dir=tmp_path / "o", cache_ttl_s=0, mnemon=where)
    backend = registry.create("mnemon", settings)
    assert isinstance(backend, MnemonBackend)
    await backend.health()
    await backend.health()
    assert backend.calls_by_command["status"] == 2


def test_version_text_is_parsed() -> None:
    assert MnemonVersion.parse("mnemon version 0.2.9\n").parts == (0, 2, 9)
    assert MnemonVersion.parse("mnemon version v0.1.10").parts == (0, 1, 10)
    assert MnemonVersion.parse("mnemon version dev").parts is None


async def test_a_build_from_source_versioned_dev_is_healthy_and_adds_no_note(
    double: Mnemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`go install` builds print `mnemon version dev`: nothing is assumed from that."""
    monkeypatch.setenv("MNEMON_DOUBLE_VERSION", "dev")
    backend = double.backend()
    await backend.write(mem("a build from source still finds this"))
    assert [h.memory.content for h in await backend.search("build from source", 3)]
    checks = {c.name: c for c in await backend.health()}
    assert all(c.status is Status.OK for c in checks.values()), checks
    assert "version dev" in checks["version"].detail
    assert backend.notes == ()


# ---------------------------------------------------------------- settings and the registry


def test_the_registry_builds_it_from_settings_without_starting_a_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCHESTRATOR_MNEMON__BINARY", str(tmp_path / "bin" / "mnemon"))
    monkeypatch.setenv("ORCHESTRATOR_MNEMON__DATA_DIR", str(tmp_path / "m"))
    monkeypatch.setenv("ORCHESTRATOR_MNEMON__STORE", "work")
    settings = load_settings(backend="mnemon")
    backend = registry.create("mnemon", settings)
    assert isinstance(backend, MnemonBackend)
    assert backend.db_path == tmp_path / "m" / "data" / "work" / "mnemon.db"
    assert backend.process_calls == 0
    assert "mnemon" in registry.names()
    monkeypatch.setenv("ORCHESTRATOR_MNEMON__STORE", "../escape")
    with pytest.raises(ValueError, match="store"):
        load_settings()


def test_the_default_store_follows_mnemons_own_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MNEMON_STORE", raising=False)
    monkeypatch.setenv("MNEMON_DATA_DIR", str(tmp_path))
    assert MnemonBackend().db_path == tmp_path / "data" / "default" / "mnemon.db"
    (tmp_path / "active").write_text("work\n")
    assert MnemonBackend().store == "work"
    (tmp_path / "active").write_text("../bad\n")
    assert MnemonBackend().store == "default"  # as in Mnemon: silently the default
    monkeypatch.setenv("MNEMON_STORE", "env-store")
    assert MnemonBackend().store == "env-store"
    assert MnemonBackend(MnemonSettings(store="cfg")).store == "cfg"
    monkeypatch.delenv("MNEMON_DATA_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert MnemonBackend().data_dir == tmp_path / "home" / ".mnemon"
    assert Settings().mnemon == MnemonSettings()

"""The `orchestrator` command line, driven through Typer's runner over a real embedded store.

Each test gets its own store in `tmp_path`, loaded with the built-in sample by `demo`. The
shared fixtures (see conftest) keep the developer's environment and config files out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner, Result

from memory_orchestrator.backends import registry
from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.faces.cli import app
from memory_orchestrator.models import (
    ContextPackage,
    Explanation,
    HealthCheck,
    HealthReport,
    ReplayReport,
    SearchResult,
    Status,
    WriteAction,
    WriteReport,
)
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.tokens import hash_token
from tests.faults import FaultyBackend

COMMANDS = (
    "search",
    "context",
    "expand",
    "write",
    "explain",
    "health",
    "replay",
    "serve",
    "config",
    "backends",
    "demo",
    "import",
    "export",
    "restore",
    "backup",
)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A data dir holding the built-in sample."""
    data = tmp_path / "data"
    result = invoke("demo", "--data-dir", str(data))
    assert result.exit_code == 0, result.output
    return data


def invoke(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(app, list(args), input=stdin)


def run(store: Path, *args: str, stdin: str | None = None) -> Result:
    """`orchestrator --data-dir STORE ARGS...`"""
    return invoke("--data-dir", str(store), *args, stdin=stdin)


def as_json(store: Path, *args: str, stdin: str | None = None) -> Any:
    result = run(store, "--json", *args, stdin=stdin)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # exactly one document, or this raises


def assert_fails(result: Result, code: int, *phrases: str) -> None:
    assert result.exit_code == code, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for phrase in phrases:
        assert phrase in lines[0]
    assert "Traceback" not in result.output


def first_id(store: Path, query: str = "Vendor X firmware") -> str:
    result = SearchResult.model_validate(as_json(store, "search", query, "--top-k", "1"))
    return result.items[0].memory_id


# ---------------------------------------------------------------- commands


def test_help_lists_every_command() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for command in COMMANDS:
        assert command in result.stdout


@pytest.mark.parametrize("command", [(), *((c,) for c in COMMANDS), ("outbox", "flush")])
def test_help_keeps_brackets_and_shows_flags_as_flags(command: tuple[str, ...]) -> None:
    """Rich markup ate "[http]"; every flag read as taking a `<bool>` value."""
    result = invoke(*command, "--help")
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.stdout
    assert "default  " not in result.stdout
    if command == ("serve",):
        assert "default [http] host" in " ".join(result.stdout.split())


def test_demo_prints_the_context_package_for_the_sample_question(tmp_path: Path) -> None:
    result = invoke("demo", "--data-dir", str(tmp_path / "demo"))
    assert result.exit_code == 0, result.output
    assert "Vendor X" in result.stdout
    assert "context block" in result.stdout
    assert "loaded" in result.stderr


def test_demo_json_is_a_context_package_and_reruns_from_scratch(tmp_path: Path) -> None:
    first = invoke("--json", "demo", "--data-dir", str(tmp_path / "d"), "--query", "firmware")
    again = invoke("--json", "demo", "--data-dir", str(tmp_path / "d"), "--query", "firmware")
    assert first.exit_code == again.exit_code == 0, again.output
    one = ContextPackage.model_validate_json(first.stdout)
    two = ContextPackage.model_validate_json(again.stdout)
    assert one.query == "firmware"
    assert len(one.items) == len(two.items) > 0  # wiped and reloaded, not loaded twice


def test_demo_refuses_to_wipe_a_directory_it_did_not_make(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    assert_fails(invoke("demo", "--data-dir", str(precious)), 2, "refusing to wipe")
    assert (precious / "notes.txt").read_text() == "keep me"


def test_search_shows_a_ranked_table(store: Path) -> None:
    result = run(store, "search", "Vendor X firmware", "--top-k", "3")
    assert result.exit_code == 0, result.output
    assert "Vendor X" in result.stdout
    assert "trace tr_" in result.stdout


def test_search_json_honours_filters(store: Path) -> None:
    document = as_json(
        store,
        "search",
        "firmware",
        "--entity",
        "Vendor X",
        "--type",
        "procedural",
        "--since",
        "2026-01-01",
        "--until",
        "2026-12-31T23:59:59",
    )
    result = SearchResult.model_validate(document)
    assert result.items
    assert {item.type for item in result.items} == {"procedural"}
    assert all("Vendor X" in item.linked_entities for item in result.items)


def test_dates_with_and_without_a_timezone_mix(store: Path) -> None:
    since, until = "2026-11-01", "2026-11-30T23:59:59+00:00"
    document = as_json(store, "search", "Vendor X", "--since", since, "--until", until)
    result = SearchResult.model_validate(document)
    assert result.items
    assert all(item.timestamp and item.timestamp.month == 11 for item in result.items)


def test_json_may_also_follow_the_command(store: Path) -> None:
    result = run(store, "search", "Vendor X", "--json", "--top-k", "2")
    assert result.exit_code == 0, result.output
    assert len(SearchResult.model_validate_json(result.stdout).items) <= 2


def test_context_respects_the_budget(store: Path) -> None:
    document = as_json(
        store,
        "context",
        "what went wrong with Vendor X?",
        "--task",
        "draft vendor update",
        "--max-items",
        "3",
        "--max-chars",
        "1200",
        "--no-expand",
        "--group-by",
        "time",
    )
    package = ContextPackage.model_validate(document)
    assert 0 < len(package.items) <= 3
    assert len(package.context_block) <= 1200
    human = run(store, "context", "what went wrong with Vendor X?", "--max-items", "3")
    assert human.exit_code == 0, human.output
    assert "context block" in human.stdout


def test_expand_from_a_seed_id(store: Path) -> None:
    seed = first_id(store)
    result = SearchResult.model_validate(as_json(store, "expand", "--seed", seed, "--hops", "2"))
    assert result.strategy == "expanded"
    assert seed not in {item.memory_id for item in result.items}
    human = run(store, "expand", "--entity", "Vendor X", "--limit", "3")
    assert human.exit_code == 0, human.output
    assert "expanded" in human.stdout


def test_write_reads_stdin_and_skips_a_repeat(store: Path) -> None:
    text = "Zed prefers short standups on Mondays."
    added = WriteReport.model_validate(
        as_json(store, "write", "-", "--entity", "Zed", "--tag", "team", stdin=text)
    )
    assert added.action is WriteAction.ADDED
    again = WriteReport.model_validate(as_json(store, "write", text, "--entity", "Zed"))
    assert again.action is WriteAction.SKIPPED
    assert again.duplicate_of == added.id
    human = run(store, "write", text)
    assert human.exit_code == 0, human.output
    assert "skipped" in human.stdout


def test_stored_escape_sequences_are_shown_not_sent_to_the_terminal(store: Path) -> None:
    hostile = "Zoltan's badge \x1b[2J\x1b]0;pwned\x07 expires \u202emonday\x9b31m"
    added = WriteReport.model_validate(as_json(store, "write", hostile, "--entity", "Zoltan"))
    assert added.action is WriteAction.ADDED
    for command in ("search", "context"):
        args = ["--data-dir", str(store), command, "Zoltan badge expires"]
        shown = CliRunner().invoke(app, args, env={"COLUMNS": "400"})  # no wrapping
        assert shown.exit_code == 0, shown.output
        out = shown.stdout
        assert "\x1b[2J" not in out  # no raw ESC, BEL, C1 CSI or bidi override reaches it
        assert "\x07" not in out
        assert "\u202e" not in out
        assert "\x9b" not in out
        assert "\\x1b[2J" in out  # shown as an escape instead
        assert "\\x07" in out


def test_write_dry_run_stores_nothing(store: Path) -> None:
    report = WriteReport.model_validate(
        as_json(store, "write", "Quokkas visited the office.", "--dry-run", "--type", "episodic")
    )
    assert report.id is None
    assert not SearchResult.model_validate(as_json(store, "search", "quokkas")).items


def test_explain_a_trace_and_a_fresh_query(store: Path) -> None:
    package = ContextPackage.model_validate(as_json(store, "context", "Infra team escalation"))
    explanation = Explanation.model_validate(as_json(store, "explain", package.trace_id))
    assert explanation.trace.result_ids == [item.memory_id for item in package.items]
    fresh = Explanation.model_validate(as_json(store, "explain", "--query", "radio firmware"))
    assert fresh.trace.trace_id != package.trace_id
    human = run(store, "--verbose", "explain", package.trace_id)
    assert human.exit_code == 0, human.output
    assert package.trace_id in human.stdout
    counted = len(fresh.trace.candidates)
    assert counted > 0
    fresh_human = run(store, "explain", "--query", "radio firmware")
    assert f"Candidates ({counted}):" in fresh_human.stdout


def test_replay_reruns_a_stored_request(store: Path) -> None:
    package = ContextPackage.model_validate(as_json(store, "context", "Vendor X SLA"))
    report = ReplayReport.model_validate(as_json(store, "replay", package.trace_id))
    assert report.identical
    assert report.new_trace_id != package.trace_id
    human = run(store, "replay", package.trace_id)
    assert human.exit_code == 0, human.output
    assert "identical" in human.stdout


def test_health_is_ok_with_exit_code_zero(store: Path) -> None:
    report = HealthReport.model_validate(as_json(store, "health"))
    assert report.status is Status.OK
    human = run(store, "health")
    assert human.exit_code == 0
    assert "ok" in human.stdout


class _DegradedBackend(FaultyBackend):
    async def health(self) -> list[HealthCheck]:
        return [HealthCheck(name="disk", status=Status.DEGRADED, detail="almost full")]


def _register(monkeypatch: pytest.MonkeyPatch, name: str, build: Any) -> None:
    # Through the registry's own table so the registration ends with the test.
    monkeypatch.setitem(registry._extra, name, build)


@pytest.mark.parametrize(
    ("backend", "code", "status"), [("degraded", 1, "degraded"), ("broken", 2, "error")]
)
def test_health_exit_code_follows_the_status(
    store: Path, monkeypatch: pytest.MonkeyPatch, backend: str, code: int, status: str
) -> None:
    def inner(settings: Settings) -> MemoryBackend:
        return registry.create("embedded", settings)

    _register(monkeypatch, "degraded", lambda s: _DegradedBackend(inner(s), {}))
    _register(monkeypatch, "broken", lambda s: FaultyBackend(inner(s), {"search": "error"}))
    result = run(store, "--backend", backend, "--json", "health")
    assert result.exit_code == code
    assert HealthReport.model_validate_json(result.stdout).status == status


def test_a_failing_store_is_one_line_and_exit_one(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _register(
        monkeypatch,
        "broken",
        lambda s: FaultyBackend(registry.create("embedded", s), {"search": "error"}),
    )
    result = run(store, "--backend", "broken", "write", "Something new about Vendor X.")
    assert_fails(result, 1, "memory store error", "injected search failure")


def test_backends_lists_the_registry() -> None:
    names = json.loads(invoke("--json", "backends").stdout)
    assert "embedded" in names["backends"]
    assert names["selected"] == "embedded"
    assert "* embedded" in invoke("backends").stdout


def test_serve_maps_the_transport_and_binds_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str | None, int | None, bool]] = []

    def fake_run(
        settings: Settings,
        transport: str,
        host: str | None,
        port: int | None,
        *,
        insecure_no_auth: bool,
        notes: list[HealthCheck],
    ) -> None:
        calls.append((transport, host, port, insecure_no_auth))

    monkeypatch.setattr("memory_orchestrator.faces.mcp.server.run", fake_run)
    assert invoke("serve", "--in-process").exit_code == 0
    assert invoke("serve", "--transport", "http", "--port", "9999").exit_code == 0
    assert invoke("serve", "--transport", "http", "--insecure-no-auth").exit_code == 0
    assert calls == [
        ("stdio", None, None, False),
        ("streamable-http", None, 9999, False),
        ("streamable-http", None, None, True),
    ]
    assert Settings().http.host == "127.0.0.1"  # unset flags fall back to [http]: loopback


def test_serve_over_http_without_tokens_refuses_to_start() -> None:
    assert_fails(
        invoke("serve", "--transport", "http", "--port", "1"),
        2,
        "refusing to serve HTTP without tokens",
    )


def test_serve_with_an_unknown_backend_fails_before_starting() -> None:
    assert_fails(invoke("--backend", "nope", "serve"), 2, "unknown backend 'nope'")


# ---------------------------------------------------------------- settings


def _settings_json(*args: str) -> dict[str, Any]:
    result = invoke(*args, "--json", "config", "show")
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_config_show_applies_flags_over_env_over_toml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "custom.toml"
    config.write_text('backend = "fromtoml"\n[retrieval]\ntop_k = 7\ncandidate_k = 33\n')
    assert _settings_json("--config", str(config))["backend"] == "fromtoml"
    monkeypatch.setenv("ORCHESTRATOR_BACKEND", "fromenv")
    monkeypatch.setenv("ORCHESTRATOR_RETRIEVAL__TOP_K", "5")
    from_env = _settings_json("--config", str(config))
    assert from_env["backend"] == "fromenv"
    assert from_env["retrieval"] == from_env["retrieval"] | {"top_k": 5, "candidate_k": 33}
    from_flag = _settings_json("--config", str(config), "--backend", "fromflag")
    assert from_flag["backend"] == "fromflag"
    data_dir = _settings_json("--data-dir", str(tmp_path / "elsewhere"))["data_dir"]
    assert data_dir == str(tmp_path / "elsewhere")


def test_config_show_finds_the_local_and_the_env_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "orchestrator.toml").write_text("[packaging]\nmax_items = 4\n")
    assert _settings_json()["packaging"]["max_items"] == 4
    other = tmp_path / "other.toml"
    other.write_text("[packaging]\nmax_items = 6\n")
    monkeypatch.setenv("ORCHESTRATOR_CONFIG", str(other))
    assert _settings_json()["packaging"]["max_items"] == 6


def _no_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_no_nulls(v) for v in value]
    return value


def test_config_show_writes_toml_that_reads_back_as_the_same_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tokens and fused stores made it print JSON objects and `null`; embedded.path showed
    "(unset)" instead of the file in use."""
    config = tmp_path / "orchestrator.toml"
    config.write_text(
        'backend = "fused"\n'
        "[fused]\n"
        'stores = [{backend = "embedded", weight = 2.0}, {backend = "mnemonic", label = "notes"}]\n'
        "[[http.tokens]]\n"
        'name = "agent"\n'
        f'hash = "{hash_token("s3cret-token-value-long-enough")}"\n'
        'tools = ["memory_search"]\n'
    )
    data = tmp_path / "data"
    shown = invoke("--config", str(config), "--data-dir", str(data), "config", "show")
    assert shown.exit_code == 0, shown.output
    parsed = tomllib.loads(shown.stdout)
    assert parsed["embedded"]["path"] == str(data / "memories.db")
    assert parsed["fused"]["stores"][1]["label"] == "notes"
    assert "label" not in parsed["fused"]["stores"][0]  # unset: left out, not null
    written = tmp_path / "shown.toml"
    written.write_text(shown.stdout)
    again = _settings_json("--config", str(written))
    before = _settings_json("--config", str(config), "--data-dir", str(data))
    before["embedded"]["path"] = str(data / "memories.db")  # the file in use, now explicit
    assert _no_nulls(again) == _no_nulls(before)  # (TOML has no null: unset = left out)
    assert tomllib.loads(invoke("--config", str(written), "config", "show").stdout) == parsed


def test_config_show_prints_toml_for_people(tmp_path: Path) -> None:
    result = invoke("--backend", "fromflag", "config", "show")
    assert result.exit_code == 0, result.output
    assert 'backend = "fromflag"' in result.stdout
    assert "[retrieval]" in result.stdout
    assert "[ranking.weights]" in result.stdout


# ---------------------------------------------------------------- errors


ERRORS: Sequence[Any] = [
    pytest.param(("search", ""), 2, ("query",), id="empty-query"),
    pytest.param(("search", "x" * 30_000), 2, ("query", "at most 20000"), id="long-query"),
    pytest.param(("search", "vendor", "--top-k", "0"), 2, ("top_k",), id="zero-top-k"),
    pytest.param(
        ("search", "vendor", "--since", "2026-05-01", "--until", "2026-01-01"),
        2,
        ("start must not be after",),
        id="reversed-range",
    ),
    pytest.param(("search", "v", "--as-of", "someday"), 2, ("as_of",), id="bad-date"),
    pytest.param(("context", "v", "--max-chars", "10"), 2, ("max_chars",), id="tiny-budget"),
    pytest.param(("expand",), 2, ("give seed_ids or entities",), id="expand-no-seeds"),
    pytest.param(("write", "   "), 2, ("content must not be blank",), id="blank-write"),
    pytest.param(("write", "x", "--importance", "3"), 2, ("importance",), id="importance"),
    pytest.param(("write", "x", "-e", "a,b"), 2, ("no commas",), id="comma-entity"),
    pytest.param(("explain",), 2, ("exactly one of trace_id or query",), id="explain-none"),
    pytest.param(("explain", "tr_0000"), 1, ("no trace with id",), id="explain-unknown"),
    pytest.param(("replay", "tr_0000"), 1, ("no trace with id",), id="replay-unknown"),
    pytest.param(("--backend", "nope", "health"), 2, ("unknown backend",), id="backend"),
    pytest.param(("--backend", "no pe!", "health"), 2, ("backend",), id="bad-backend-name"),
    pytest.param(("--config", "missing.toml", "health"), 2, ("config file not found",), id="cfg"),
]


@pytest.mark.parametrize(("args", "code", "phrases"), ERRORS)
def test_expected_errors_are_one_line_with_an_exit_code(
    tmp_path: Path, args: tuple[str, ...], code: int, phrases: tuple[str, ...]
) -> None:
    anyio.run(EmbeddedBackend(tmp_path / "data" / "memories.db").close)  # an empty store
    result = invoke("--data-dir", str(tmp_path / "data"), *args)
    assert_fails(result, code, *phrases)
    json_mode = invoke("--data-dir", str(tmp_path / "data"), "--json", *args)
    assert_fails(json_mode, code, *phrases)


BAD_CONFIG = [
    pytest.param("ORCHESTRATOR_MNEMON__STORE", "../x", "invalid store name", id="store-name"),
    pytest.param("ORCHESTRATOR_MNEMON_MCP__SCOPE", "a b", "invalid store name", id="scope"),
    pytest.param("ORCHESTRATOR_EMBEDDED__PATH", "{file}/m.db", "is not a directory", id="parent"),
    pytest.param("ORCHESTRATOR_MNEMON_MCP__PATH", "{dir}", "is a directory", id="file-is-dir"),
    pytest.param("ORCHESTRATOR_DATA_DIR", "{file}", "is not a directory", id="data-dir"),
    pytest.param("ORCHESTRATOR_MNEMON__BINARY", "{dir}", "not an executable", id="binary"),
]


READS = [
    ("search", "vendor"),
    ("context", "vendor"),
    ("expand", "--entity", "Vendor X"),
    ("explain", "--query", "vendor"),
    ("replay", "tr_0000"),
    ("health",),
]


@pytest.mark.parametrize("args", READS, ids=[r[0] for r in READS])
def test_a_read_on_a_data_dir_without_a_store_fails_naming_the_path(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    """A mistyped --data-dir used to answer "No relevant memories found", health ok."""
    typo = tmp_path / "demo-date"
    result = invoke("--data-dir", str(typo), *args)
    assert_fails(result, 2, "no memory store at", str(typo / "memories.db"))
    assert not typo.exists()


def test_a_write_creates_a_missing_store_and_says_so(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    result = invoke("--data-dir", str(fresh), "--json", "write", "Quokkas visited the office.")
    assert result.exit_code == 0, result.output
    assert WriteReport.model_validate_json(result.stdout).action is WriteAction.ADDED
    assert f"created an empty memory store at {fresh / 'memories.db'}" in " ".join(
        result.stderr.split()
    )
    again = invoke("--data-dir", str(fresh), "write", "Quokkas left again.")
    assert "created an empty" not in again.stderr
    assert run(fresh, "search", "quokkas").exit_code == 0


@pytest.mark.parametrize(("name", "value", "phrase"), BAD_CONFIG)
def test_bad_paths_and_store_names_in_config_stop_at_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str, phrase: str
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    monkeypatch.setenv(name, value.format(file=afile, dir=tmp_path))
    assert_fails(invoke("health"), 2, phrase)


def test_a_write_over_the_configured_limit_is_refused_and_nothing_written(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCHESTRATOR_LIMITS__MAX_WRITE_CHARS", "50")
    content = "zebracorn sightings are logged in the wiki " * 2
    assert_fails(
        run(store, "write", content),
        2,
        "the limit is 50 (limits.max_write_chars)",
        "nothing written",
    )
    monkeypatch.delenv("ORCHESTRATOR_LIMITS__MAX_WRITE_CHARS")
    assert as_json(store, "search", "zebracorn sightings", "--passthrough")["items"] == []


def test_bad_settings_from_the_environment_are_a_usage_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ORCHESTRATOR_RETRIEVAL__TOP_K", "lots")
    assert_fails(invoke("config", "show"), 2, "retrieval.top_k")


def test_an_unknown_option_is_a_usage_error() -> None:
    result = invoke("search", "v", "--frobnicate")
    assert result.exit_code == 2
    assert "Traceback" not in result.output


# ---------------------------------------------------------------- the installed script


def test_the_installed_script_runs_without_loading_the_mcp_stack(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "orchestrator"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    done = subprocess.run(
        [str(script), "--json", "backends"],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "embedded" in json.loads(done.stdout)["backends"]
    probe = "import sys, memory_orchestrator.faces.cli; print(sorted({'mcp', 'uvicorn'} & set(sys.modules)))"
    loaded = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
        check=True,
    )
    assert loaded.stdout.strip() == "[]"


# ---------------------------------------------------------------- stats and tokens


def test_stats_summarise_the_requests_in_the_trace_store(store: Path) -> None:
    for _ in range(3):
        assert run(store, "search", "Vendor X").exit_code == 0
    report = as_json(store, "stats", "--since", "1h")
    tools = {row["tool"]: row for row in report["tools"]}
    assert tools["search"]["count"] == 3
    assert tools["search"]["errors"] == 0
    assert tools["search"]["p50_ms"] <= tools["search"]["p99_ms"]
    assert report["total"]["count"] >= 3
    table = run(store, "stats", "--format", "table")
    assert table.exit_code == 0, table.output
    assert "search" in table.stdout
    assert "p95 ms" in table.stdout


def test_stats_reject_a_bad_since_and_a_missing_trace_store(store: Path, tmp_path: Path) -> None:
    assert_fails(run(store, "stats", "--since", "last tuesday"), 2, "invalid --since")
    assert_fails(run(tmp_path / "empty", "stats"), 1, "no trace store")


def test_token_new_prints_the_secret_once_and_keeps_only_its_hash() -> None:
    result = invoke("--json", "token", "new", "--name", "ci", "--read-only")
    assert result.exit_code == 0, result.output
    token = json.loads(result.stdout)
    assert token["hash"] == hash_token(token["secret"])
    assert token["secret"] not in token["toml"]
    assert 'name = "ci"' in token["toml"]
    assert "read_only = true" in token["toml"]
    human = invoke("token", "new", "--name", "ci")
    assert human.stdout.count("mo_") == 1
    assert "[[http.tokens]]" in human.stdout

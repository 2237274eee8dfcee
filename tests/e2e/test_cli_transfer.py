"""`orchestrator export`, `restore` and `backup` through Typer's runner over real embedded
stores (the built-in sample, loaded by `demo`)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.e2e.test_cli import assert_fails, run, store

__all__ = ["store"]  # the built-in sample, loaded by `demo` (a fixture of test_cli)


def records(text: str) -> list[str]:
    """The export's lines but its header (which says when it was made)."""
    lines = text.splitlines()
    assert json.loads(lines[0])["kind"] == "header"
    return lines[1:]


def test_export_then_restore_into_an_empty_store_gives_the_same_export(
    store: Path, tmp_path: Path
) -> None:
    exported = run(store, "export")
    assert exported.exit_code == 0, exported.output
    assert "exported 40 memories" in exported.stderr
    dump = tmp_path / "dump.jsonl"
    assert run(store, "export", "-o", str(dump)).exit_code == 0
    copy = tmp_path / "copy"
    restored = run(copy, "--json", "restore", str(dump))
    assert restored.exit_code == 0, restored.output
    report = json.loads(restored.stdout)
    assert report["verbatim"]
    assert report["memories"] == 40
    assert report["ids"] == {}
    assert records(run(copy, "export").stdout) == records(exported.stdout)


def test_restore_refuses_a_store_that_is_not_empty(store: Path, tmp_path: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    assert run(store, "export", "-o", str(dump)).exit_code == 0
    before = records(run(store, "export").stdout)
    assert_fails(run(store, "restore", str(dump)), 2, "not empty", "orchestrator import")
    assert records(run(store, "export").stdout) == before


def test_a_file_cut_short_restores_nothing(store: Path, tmp_path: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    assert run(store, "export", "-o", str(dump)).exit_code == 0
    dump.write_text("".join(dump.read_text().splitlines(keepends=True)[:-3]))
    copy = tmp_path / "copy"
    assert_fails(run(copy, "restore", str(dump)), 2, "cut short", "nothing restored")
    assert not copy.exists()  # the file is read before any store is made


def test_export_never_replaces_a_file_unless_told(store: Path, tmp_path: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    dump.write_text("keep me")
    assert_fails(run(store, "export", "-o", str(dump)), 2, "exists", "--force")
    assert dump.read_text() == "keep me"
    assert run(store, "export", "-o", str(dump), "--force").exit_code == 0
    assert records(dump.read_text())


def test_a_backup_copy_restores_as_the_store_was(store: Path, tmp_path: Path) -> None:
    copy = tmp_path / "backup.db"
    made = run(store, "--json", "backup", str(copy))
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["kind"] == "copy"
    assert_fails(run(store, "backup", str(copy)), 2, "exists")
    restored = tmp_path / "restored"
    assert run(restored, "restore", str(copy)).exit_code == 0
    assert records(run(restored, "export").stdout) == records(run(store, "export").stdout)


def test_a_sqlite_file_of_another_program_is_refused_and_left_alone(tmp_path: Path) -> None:
    other = tmp_path / "mnemon.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE insights (id TEXT, content TEXT)")
        db.execute("PRAGMA user_version = 1")
    before = other.read_bytes()
    result = run(tmp_path / "copy", "restore", str(other))
    assert_fails(result, 2, "not a backup of the embedded store", "another program")
    assert other.read_bytes() == before
    assert not (tmp_path / "copy").exists()


def test_import_prints_its_summary_and_twice_adds_nothing(tmp_path: Path) -> None:
    source = tmp_path / "m.jsonl"
    source.write_text(
        '{"content": "Dana moved the standup to 9:30."}\n'
        '{"content": "Dana moved the standup to 10:00."}\n'
        '{"content": ""}\n'
    )
    data = tmp_path / "data"
    first = run(data, "import", str(source))
    assert first.exit_code == 0, first.output
    assert "1 added, 1 updated, 0 skipped, 1 refused" in first.stderr
    assert "updated 1: corrects a stored memory (first: m.jsonl:2)" in first.stderr
    assert "refused 1: content: String should have at least 1 character" in first.stderr
    again = run(data, "--json", "import", str(source))
    assert again.exit_code == 0, again.output
    summary = json.loads(again.stdout)
    assert summary["counts"] == {"skipped": 2, "refused": 1}
    assert [i["action"] for i in summary["items"]] == ["skipped", "skipped", "refused"]


def test_import_of_nothing_readable_is_refused_before_any_store_is_made(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert_fails(run(data, "import", str(tmp_path / "missing.jsonl")), 2, "no such file")
    odd = tmp_path / "notes.txt"
    odd.write_text("hello")
    assert_fails(run(data, "import", str(odd)), 2, "--format")
    assert not data.exists()


def test_eval_on_the_store_reads_the_data_dir(store: Path, tmp_path: Path) -> None:
    missing = run(tmp_path / "nowhere", "eval", "--store", "--format", "json")
    assert_fails(missing, 2, "no memory store")
    asked = run(store, "eval", "--store", "--format", "json", "--systems", "raw")
    assert asked.exit_code == 0, asked.output
    report = json.loads(asked.stdout)
    assert report["questions"] > 0
    assert any(n.startswith("asked of the store as it was loaded") for n in report["notes"])

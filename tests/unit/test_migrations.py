"""Numbered migration files (`memory_orchestrator.migrations`) and the SQL script splitter of
the embedded store (`embedded_sql.statements`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_orchestrator.backends.embedded_sql import statements
from memory_orchestrator.migrations import numbered
from memory_orchestrator.postgres.database import migrations


def test_a_statement_ends_only_where_sqlite_says_it_is_complete() -> None:
    script = (
        "-- a comment; with a semicolon\n"
        "CREATE TABLE t (a TEXT DEFAULT 'x;y'); CREATE TABLE u (b TEXT);\n"
        "CREATE TRIGGER t_log AFTER INSERT ON t BEGIN\n"
        "    INSERT INTO u VALUES ('one;'); INSERT INTO u VALUES ('two');\n"
        "END;\n"
        "-- the end\n"
    )
    found = statements(script)
    assert len(found) == 3
    assert found[0].endswith("CREATE TABLE t (a TEXT DEFAULT 'x;y');")
    assert found[1] == "CREATE TABLE u (b TEXT);"
    assert found[2].startswith("CREATE TRIGGER")
    assert found[2].endswith("END;")


def test_a_script_that_ends_inside_a_statement_is_refused() -> None:
    with pytest.raises(ValueError, match="ends inside a statement"):
        statements("CREATE TABLE t (a TEXT); CREATE TABLE u (b TEXT)")


def _package(root: Path, name: str, files: list[str], monkeypatch: pytest.MonkeyPatch) -> str:
    folder = root / name
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for file in files:
        (folder / file).write_text("SELECT 1;\n")
    monkeypatch.syspath_prepend(str(root))
    return name


def test_migration_files_are_read_in_order_and_a_gap_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = _package(tmp_path, "good_steps", ["0002_b.sql", "0001_a.sql", "notes.txt"], monkeypatch)
    assert [(m.version, m.name) for m in numbered(good)] == [(1, "a"), (2, "b")]
    gap = _package(tmp_path, "gap_steps", ["0001_a.sql", "0003_c.sql"], monkeypatch)
    with pytest.raises(RuntimeError, match="not 1, 2"):
        numbered(gap)


def test_the_postgres_migrations_are_numbered_files_too() -> None:
    assert [m.version for m in migrations()][:4] == [1, 2, 3, 4]

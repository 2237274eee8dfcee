"""Numbered schema migrations, for the stores that keep a schema of their own (the embedded
SQLite file, PostgreSQL).

A migration is a file `NNNN_name.sql` in a package of its own (`backends/embedded_migrations`,
`postgres/migrations`): version 1, 2, ... with no gap, applied in order, each once. A store
records the versions it has (SQLite in `PRAGMA user_version`, PostgreSQL in a table) and
applies the files above them when it opens; one newer than the code knows is refused. A
released file is never edited: a change of schema is a new file.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import NamedTuple

__all__ = ["Migration", "numbered"]

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class Migration(NamedTuple):
    version: int
    name: str
    sql: str


def numbered(package: str) -> list[Migration]:
    """The migration files of `package`, in order. Raises RuntimeError when the versions are
    not 1, 2, ... without a gap or a repeat (a broken package, not a broken store)."""
    found = sorted(
        Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8"))
        for entry in resources.files(package).iterdir()
        if (match := _FILE.match(entry.name))
    )
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"{package}: migration versions {versions} are not 1, 2, ... in turn")
    return found

"""A contract double of the `mnemon` CLI (target v0.2.9), for tests. It is NOT Mnemon.

It reproduces the contract checklist of `../shared/reference/mnemon-cli.md` (section 8): the
same commands, flags and argument rules (flags anywhere, `--` ends flags, positionals joined
by spaces), the same JSON shapes, exit codes and error texts (exit 1, nothing on stdout,
`Error: <msg>` ... `<msg>` on stderr), and Mnemon's traps:

- a `skipped` remember returns a fresh `id` that was never stored; the kept memory is
  `replaced_id`;
- smart recall always mixes in the 20 newest memories as anchors (`via: "time"`, no keyword,
  entity or similarity signal, yet a graph signal and a score that can look "medium");
- no busy timeout: a write that meets another process's write lock fails at once with
  "database is locked"; and since Mnemon's migrations probe the store with a (rolled back)
  write on every open, any command without `--readonly`, a read too, can fail that way when
  it starts while another holds the lock;
- invalid store names, `--readonly` (reads leave no trace, writes refused), `--version`, and
  the embedding probe (`MNEMON_EMBED_ENDPOINT`, a TCP connect with a 2 s timeout).

Data lives in `<data-dir>/data/<store>/mnemon.db`, with Mnemon's own table layout (insights,
edges, oplog; `PRAGMA user_version` 1), so it persists between calls like the real binary.

Its ranking is deliberately simple token overlap, entity overlap and a small graph walk.
Never use it to report retrieval quality, and its timings are not Mnemon's.

Test knobs (environment): `MNEMON_DOUBLE_VERSION` (pretend to be another version: before
0.2.0 it behaves as the real June 2026 build in `../shared/mnemon` does: no `show`, no
`supersedes`, near-duplicates replaced by `remember` and `import` (`updated`, the older
memory soft-deleted; that build's diff rules), `--readonly` that writes and switches the store
out of WAL mode, and reads that do not meet a held write lock at open; before 0.1.10 no
`import`, before 0.1.9 recall has no `--verbose`/`--brief` and prints the full shape),
`MNEMON_DOUBLE_DIFF=legacy` (that replacing diff on any version), `MNEMON_DOUBLE_LOG=<file>`
(one JSON line per run: argv, pid, embed endpoint), `MNEMON_DOUBLE_SLEEP_S` (hang first),
`MNEMON_DOUBLE_HOLD_S` (keep the write transaction open that long),
`MNEMON_DOUBLE_IGNORE_TERM=1` (ignore SIGTERM: only SIGKILL stops it).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import socket
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

DEFAULT_VERSION = "0.2.9"
CATEGORIES = ("preference", "decision", "fact", "insight", "context", "general")
EDGE_TYPES = ("temporal", "semantic", "causal", "entity", "supersedes")
INTENTS = ("WHY", "WHEN", "ENTITY", "GENERAL")
STORE_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_-]*$")
MAX_CONTENT = 8000
STOPWORDS = frozenset(
    "a an and are as at be been but by did do does for from had has have he her his how i if "
    "in into is it its me my of on or our she so that the their them they this to was we "
    "were what when where which who whom why will with you your".split()
)
CAUSAL_CUES = ("because", "therefore", "due to", "caused by", "as a result", "decided to")
INTENT_WEIGHTS = {
    "WHY": {"causal": 0.70, "temporal": 0.20, "entity": 0.05, "semantic": 0.05},
    "WHEN": {"causal": 0.15, "temporal": 0.65, "entity": 0.10, "semantic": 0.10},
    "ENTITY": {"causal": 0.10, "temporal": 0.05, "entity": 0.55, "semantic": 0.30},
    "GENERAL": {"causal": 0.25, "temporal": 0.25, "entity": 0.25, "semantic": 0.25},
}
SCHEMA = """
CREATE TABLE IF NOT EXISTS insights (
    id TEXT PRIMARY KEY, content TEXT NOT NULL, category TEXT DEFAULT 'general',
    importance INTEGER DEFAULT 3, tags TEXT DEFAULT '[]', entities TEXT DEFAULT '[]',
    source TEXT DEFAULT 'user', access_count INTEGER DEFAULT 0, created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL, deleted_at TEXT, last_accessed_at TEXT, embedding BLOB,
    effective_importance REAL DEFAULT 0.5);
CREATE TABLE IF NOT EXISTS edges (
    source_id TEXT NOT NULL, target_id TEXT NOT NULL,
    edge_type TEXT NOT NULL CHECK(edge_type IN
        ('temporal','semantic','causal','entity','supersedes')),
    weight REAL DEFAULT 1.0, metadata TEXT DEFAULT '{}', created_at TEXT NOT NULL,
    PRIMARY KEY (source_id, target_id, edge_type),
    FOREIGN KEY (source_id) REFERENCES insights(id) ON DELETE CASCADE,
    FOREIGN KEY (target_id) REFERENCES insights(id) ON DELETE CASCADE);
CREATE INDEX IF NOT EXISTS idx_insights_created ON insights(created_at);
CREATE INDEX IF NOT EXISTS idx_edges_source ON edges(source_id);
CREATE INDEX IF NOT EXISTS idx_edges_target ON edges(target_id);
CREATE TABLE IF NOT EXISTS oplog (
    id INTEGER PRIMARY KEY AUTOINCREMENT, operation TEXT NOT NULL, insight_id TEXT,
    detail TEXT DEFAULT '', created_at TEXT NOT NULL);
PRAGMA user_version = 1;
"""
COLS = (
    "id, content, category, importance, tags, entities, source, access_count, "
    "created_at, updated_at, deleted_at"
)

Json = dict[str, Any]


class CliError(Exception):
    """A failed command: exit 1, the message on stderr (with the usage block when asked)."""

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


# ---------------------------------------------------------------- versions and features


def version() -> str:
    return os.environ.get("MNEMON_DOUBLE_VERSION") or DEFAULT_VERSION


def version_tuple() -> tuple[int, ...]:
    parts = re.findall(r"\d+", version())
    return tuple(int(p) for p in parts[:3]) if parts else (99,)


def has(feature: str) -> bool:
    minimum = {
        "show": (0, 2, 0),
        "supersedes": (0, 2, 0),
        "import": (0, 1, 10),
        "compact": (0, 1, 9),
        "entity-mode": (0, 1, 4),
        # v0.2.x: remember/import skip only byte-identical text; before, Mnemon's diff
        # replaced near-duplicates (`updated`), as the June 2026 build does
        "exact-diff": (0, 2, 0),
        # v0.2.x: --readonly opens an immutable snapshot; the June 2026 build's open drops
        # `mode=ro` (no `file:` prefix): writes land, reads switch the store out of WAL
        "readonly": (0, 2, 0),
        # v0.2.x runs an UPDATE on every open (it meets a held write lock); the June 2026
        # build's migration probe swallows the busy error, so its reads never meet it
        "open-lock": (0, 2, 0),
    }[feature]
    return version_tuple() >= minimum


def replaces_near_duplicates() -> bool:
    return os.environ.get("MNEMON_DOUBLE_DIFF") == "legacy" or not has("exact-diff")


# ---------------------------------------------------------------- argument parsing (cobra-like)

Spec = dict[str, tuple[str, Any]]  # flag name -> (kind, default)

GLOBAL_FLAGS: Spec = {
    "data-dir": ("str", ""),
    "store": ("str", ""),
    "readonly": ("bool", False),
    "embed-model": ("str", ""),
    "help": ("bool", False),
}


def _recall_flags() -> Spec:
    flags: Spec = {
        "cat": ("str", ""),
        "limit": ("int", 10),
        "source": ("str", ""),
        "basic": ("bool", False),
        "smart": ("bool", False),
        "intent": ("str", ""),
    }
    if has("compact"):
        flags.update(
            verbose=("bool", False), brief=("bool", False), **{"excerpt-chars": ("int", 240)}
        )
    return flags


COMMANDS: dict[str, tuple[str, Callable[[], Spec], tuple[str, int]]] = {
    # name -> (usage, flags, (arg rule, count))
    "remember": (
        "remember [content]",
        lambda: {
            "cat": ("str", "general"),
            "imp": ("int", 3),
            "tags": ("str", ""),
            "entities": ("str", ""),
            "source": ("str", "user"),
            "no-diff": ("bool", False),
            **({"entity-mode": ("str", "merge")} if has("entity-mode") else {}),
        },
        ("min", 1),
    ),
    "recall": ("recall [keyword]", _recall_flags, ("min", 1)),
    "search": (
        "search [query]",
        lambda: {"limit": ("int", 10), "brief": ("bool", False), "excerpt-chars": ("int", 240)},
        ("min", 1),
    ),
    "show": ("show [id]", dict, ("exact", 1)),
    "related": (
        "related [id]",
        lambda: {"edge": ("str", ""), "depth": ("int", 2)},
        ("exact", 1),
    ),
    "link": (
        "link [source_id] [target_id]",
        lambda: {"type": ("str", "semantic"), "weight": ("float", 0.5), "meta": ("str", "")},
        ("exact", 2),
    ),
    "forget": ("forget [id]", dict, ("exact", 1)),
    "status": ("status", dict, ("exact", 0)),
    "import": (
        "import [file]",
        lambda: {"dry-run": ("bool", False), "no-diff": ("bool", False)},
        ("exact", 1),
    ),
}


def available_commands() -> list[str]:
    return [c for c in COMMANDS if c not in ("show", "import") or has(c)]


def usage_text(command: str | None) -> str:
    if command is None:
        lines = ["Usage:", "  mnemon [command]", "", "Available Commands:"]
        lines += [f"  {name}" for name in available_commands()]
        lines += [
            "",
            "Flags:",
            "      --data-dir string",
            "      --readonly",
            "      --store string",
        ]
        lines += ["  -v, --version   version for mnemon", ""]
        return "\n".join(lines) + "\n"
    use, flags, _ = COMMANDS[command]
    lines = ["Usage:", f"  mnemon {use} [flags]", "", "Flags:"]
    for name, (kind, default) in sorted(flags().items()):
        shown = "" if kind == "bool" else f" {kind}"
        suffix = f" (default {default})" if default not in ("", False) else ""
        lines.append(f"      --{name}{shown}{suffix}")
    lines += ["", "Global Flags:", "      --data-dir string", "      --readonly", ""]
    return "\n".join(lines) + "\n"


def _convert(name: str, kind: str, raw: str) -> Any:
    try:
        if kind == "int":
            return int(raw, 10)
        if kind == "float":
            return float(raw)
    except ValueError:
        func = "ParseInt" if kind == "int" else "ParseFloat"
        raise CliError(
            f'invalid argument "{raw}" for "--{name}" flag: strconv.{func}: parsing '
            f'"{raw}": invalid syntax',
            usage=True,
        ) from None
    if kind == "bool":
        if raw.lower() in ("1", "t", "true"):
            return True
        if raw.lower() in ("0", "f", "false"):
            return False
        raise CliError(
            f'invalid argument "{raw}" for "--{name}" flag: strconv.ParseBool: parsing '
            f'"{raw}": invalid syntax',
            usage=True,
        )
    return raw


def find_command(argv: list[str]) -> tuple[str | None, list[str]]:
    """The subcommand (the first token that is not a flag or a flag's value) and the rest."""
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return None, argv
        if token.startswith("--"):
            name = token[2:].split("=", 1)[0]
            spec = GLOBAL_FLAGS.get(name)
            if spec is not None and spec[0] != "bool" and "=" not in token:
                i += 1
        elif not (token.startswith("-") and len(token) > 1):
            return token, argv[:i] + argv[i + 1 :]
        i += 1
    return None, argv


def parse(argv: list[str], spec: Spec) -> tuple[dict[str, Any], list[str]]:
    flags: dict[str, Any] = {name: default for name, (_, default) in spec.items()}
    positionals: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if token == "--":
            positionals.extend(argv[i:])
            break
        if token.startswith("--"):
            name, eq, value = token[2:].partition("=")
            if name not in spec:
                raise CliError(f"unknown flag: --{name}", usage=True)
            kind = spec[name][0]
            if not eq and kind != "bool":
                if i >= len(argv):
                    raise CliError(f"flag needs an argument: --{name}", usage=True)
                value, i = argv[i], i + 1
            flags[name] = True if (kind == "bool" and not eq) else _convert(name, kind, value)
        elif token.startswith("-") and len(token) > 1:
            letter = token[1]
            if letter == "h":
                flags["help"] = True
            elif letter == "v" and "version" in spec:
                flags["version"] = True
            else:
                raise CliError(f"unknown shorthand flag: '{letter}' in {token}", usage=True)
        else:
            positionals.append(token)
    return flags, positionals


def check_args(rule: tuple[str, int], args: list[str]) -> None:
    kind, count = rule
    if kind == "min" and len(args) < count:
        raise CliError(f"requires at least {count} arg(s), only received {len(args)}", usage=True)
    if kind == "exact" and len(args) != count:
        raise CliError(f"accepts {count} arg(s), received {len(args)}", usage=True)


# ---------------------------------------------------------------- small helpers


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def stamp(moment: datetime | None = None) -> str:
    return (moment or now()).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def new_id() -> str:
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def tokens(text: str) -> list[str]:
    return [t for t in re.findall(r"[^\W_]+", text.lower()) if t not in STOPWORDS]


def jaccard(a: str, b: str) -> float:
    sa, sb = set(tokens(a)), set(tokens(b))
    return len(sa & sb) / len(sa | sb) if sa | sb else 0.0


def split_list(raw: str, what: str, limit: int, max_bytes: int) -> list[str]:
    values = [v.strip() for v in raw.split(",")] if raw else []
    values = [v for v in values if v]
    plural = "tags" if what == "tag" else "entities"
    if len(values) > limit:
        raise CliError(f"too many {plural} ({len(values)}, max {limit})")
    for value in values:
        size = len(value.encode())
        if size > max_bytes:
            head = value.encode()[:50].decode(errors="ignore")
            raise CliError(f"{what} too long ({size} chars, max {max_bytes}): {head}")
    return values


def emit(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def emit_brief(document: Any) -> None:
    sys.stdout.write(json.dumps(document, separators=(",", ":"), ensure_ascii=False) + "\n")


def excerpt(text: str, chars: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[:chars] + "…"


def embed_probe() -> bool:
    """Mnemon GETs <endpoint>/api/tags with a 2 s timeout; the double only connects."""
    endpoint = os.environ.get("MNEMON_EMBED_ENDPOINT") or "http://localhost:11434"
    match = re.match(r"^[a-z]+://([^/:]+)(?::(\d+))?", endpoint)
    if not match:
        return False
    host, port = match.group(1), int(match.group(2) or 80)
    try:
        with socket.create_connection((host, port), timeout=2.0):
            return False  # something answers, but the double never embeds
    except OSError:
        return False


def go_duration(raw: str) -> timedelta:
    if raw.strip() in ("", "0"):
        return timedelta(0)
    total = 0.0
    units = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|d|h|m|s)", raw):
        total += float(number) * units[unit]
    return timedelta(seconds=total)


# ---------------------------------------------------------------- the store


class Store:
    """One opened `mnemon.db` (a single connection, no busy timeout, like Mnemon)."""

    def __init__(self, data_dir: str, name: str, *, readonly: bool) -> None:
        self.readonly = readonly and has("readonly")
        self.asked_readonly = readonly  # the June 2026 build: no access counts either way
        self.dir = os.path.join(data_dir, "data", name)
        self.path = os.path.join(self.dir, "mnemon.db")
        if readonly and not has("readonly"):  # the June 2026 build: not read-only at all
            if not os.path.exists(self.path):
                raise CliError(f"open database: database not found: {self.path}")
            self.conn = sqlite3.connect(self.path, timeout=0, isolation_level=None)
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("PRAGMA journal_mode = DELETE")
            self.conn.execute("PRAGMA foreign_keys = ON")
            return
        if readonly:
            if not os.path.exists(self.path):
                raise CliError(f"open database: database not found: {self.path}")
            uri = f"file:{self.path}?mode=ro&immutable=1"
            self.conn = sqlite3.connect(uri, uri=True, timeout=0, isolation_level=None)
        else:
            os.makedirs(self.dir, exist_ok=True)
            self.conn = sqlite3.connect(self.path, timeout=0, isolation_level=None)
        try:
            self.conn.execute("PRAGMA foreign_keys = ON")
            if not readonly:
                self.conn.execute("PRAGMA journal_mode = WAL")
                self.conn.execute("PRAGMA synchronous = NORMAL")
                known = self.conn.execute(
                    "SELECT count(*) FROM sqlite_master WHERE name IN ('insights','edges','oplog')"
                ).fetchone()[0]
                if known < 3:
                    self.conn.executescript(SCHEMA)
                # Mnemon's migrations probe the edges table with an INSERT (rolled back) on
                # every open, so every command, reads too, briefly takes the write lock
                # (the June 2026 build ignores the busy error of that probe).
                try:
                    self.conn.execute("BEGIN IMMEDIATE")
                    self.conn.execute("ROLLBACK")
                except sqlite3.Error:
                    if has("open-lock"):
                        raise
        except sqlite3.Error as exc:
            raise CliError(f"open database: migrate: {sql_message(exc)}") from None

    # reading -----------------------------------------------------------------

    def rows(self, where: str = "deleted_at IS NULL", args: Iterable[Any] = ()) -> list[Json]:
        sql = f"SELECT {COLS} FROM insights WHERE {where}"
        return [row_to_insight(r) for r in self.conn.execute(sql, tuple(args))]

    def get(self, insight_id: str) -> Json | None:
        found = self.rows("id = ? AND deleted_at IS NULL", (insight_id,))
        return found[0] if found else None

    def active(self) -> list[Json]:
        return self.rows("deleted_at IS NULL ORDER BY created_at, rowid")

    def known_entities(self) -> list[str]:
        sql = (
            "SELECT DISTINCT je.value FROM insights i, json_each(i.entities) je"
            " WHERE i.deleted_at IS NULL"
        )
        return [r[0] for r in self.conn.execute(sql) if r[0]]

    def edges_of(self, node: str) -> list[tuple[str, str, float]]:
        sql = (
            "SELECT target_id, edge_type, weight FROM edges WHERE source_id = ?1 UNION ALL"
            " SELECT source_id, edge_type, weight FROM edges WHERE target_id = ?1"
        )
        return [(r[0], r[1], float(r[2])) for r in self.conn.execute(sql, (node,))]

    def superseded(self) -> set[str]:
        sql = (
            "SELECT e.target_id FROM edges e JOIN insights s ON s.id = e.source_id"
            " WHERE e.edge_type = 'supersedes' AND s.deleted_at IS NULL"
        )
        return {r[0] for r in self.conn.execute(sql)}

    # writing -----------------------------------------------------------------

    def begin(self) -> None:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise CliError(f"begin tx: {sql_message(exc)}") from None

    def commit(self) -> None:
        hold = float(os.environ.get("MNEMON_DOUBLE_HOLD_S") or 0)
        if hold > 0:
            time.sleep(hold)
        self.conn.execute("COMMIT")

    def record_read(self, ids: Iterable[str], operation: str, detail: str) -> None:
        """Bump access counts and log the read (best effort; nothing under --readonly), as
        Mnemon's reads do. A locked store makes this silently do nothing."""
        if self.asked_readonly:
            return
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany(
                "UPDATE insights SET access_count = access_count + 1, last_accessed_at = ?"
                " WHERE id = ?",
                [(stamp(), i) for i in ids],
            )
            self.log(operation, "", detail)
            self.conn.execute("COMMIT")
        except sqlite3.Error:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")

    def log(self, operation: str, insight_id: str = "", detail: str = "") -> None:
        if self.readonly:
            return
        with contextlib.suppress(sqlite3.Error):
            self.conn.execute(
                "INSERT INTO oplog (operation, insight_id, detail, created_at) VALUES (?,?,?,?)",
                (operation, insight_id, detail, stamp()),
            )

    def upsert_edge(self, source: str, target: str, kind: str, weight: float, meta: Json) -> int:
        self.conn.execute(
            "INSERT INTO edges (source_id, target_id, edge_type, weight, metadata, created_at)"
            " VALUES (?,?,?,?,?,?) ON CONFLICT (source_id, target_id, edge_type)"
            " DO UPDATE SET weight = excluded.weight, metadata = excluded.metadata",
            (source, target, kind, weight, json.dumps(meta), stamp()),
        )
        return 1

    def add_edge_once(self, source: str, target: str, kind: str, weight: float, meta: Json) -> int:
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO edges"
            " (source_id, target_id, edge_type, weight, metadata, created_at)"
            " VALUES (?,?,?,?,?,?)",
            (source, target, kind, weight, json.dumps(meta), stamp()),
        )
        return cur.rowcount

    def insert(self, item: Json, *, created: datetime) -> None:
        when = stamp(created)
        edges = 0
        base = {1: 0.15, 2: 0.3, 3: 0.5, 4: 0.8, 5: 1.0}[item["importance"]]
        self.conn.execute(
            "INSERT INTO insights (id, content, category, importance, tags, entities, source,"
            " access_count, created_at, updated_at, effective_importance)"
            " VALUES (?,?,?,?,?,?,?,0,?,?,?)",
            (
                item["id"],
                item["content"],
                item["category"],
                item["importance"],
                json.dumps(item["tags"]),
                json.dumps(item["entities"]),
                item["source"],
                when,
                when,
                base * (1 + 0.1 * min(edges, 5)),
            ),
        )

    def soft_delete(self, insight_id: str) -> bool:
        when = stamp()
        cur = self.conn.execute(
            "UPDATE insights SET deleted_at = ?, updated_at = ? WHERE id = ? AND deleted_at IS NULL",
            (when, when, insight_id),
        )
        if cur.rowcount == 0:
            return False
        self.conn.execute("DELETE FROM edges WHERE source_id = ?1 OR target_id = ?1", (insight_id,))
        return True

    def auto_prune(self, keep: set[str]) -> list[str]:
        ceiling = int(os.environ.get("MNEMON_MAX_INSIGHTS") or 1000)
        if ceiling <= 0:
            return []
        total = self.conn.execute(
            "SELECT count(*) FROM insights WHERE deleted_at IS NULL"
        ).fetchone()[0]
        if total <= ceiling:
            return []
        grace = go_duration(os.environ.get("MNEMON_AUTO_PRUNE_MIN_AGE", "24h"))
        cutoff = stamp(now() - grace)
        rows = self.conn.execute(
            "SELECT id FROM insights WHERE deleted_at IS NULL AND importance < 4"
            " AND access_count < 3 AND created_at <= ? ORDER BY effective_importance, created_at",
            (cutoff,),
        ).fetchall()
        pruned = [r[0] for r in rows if r[0] not in keep][: min(total - ceiling, 10)]
        for insight_id in pruned:
            self.soft_delete(insight_id)
            self.log("prune", insight_id)
        return pruned


def sql_message(exc: sqlite3.Error) -> str:
    code = getattr(exc, "sqlite_errorcode", None)
    name = getattr(exc, "sqlite_errorname", "")
    if code is None:
        return str(exc)
    primary = code & 0xFF
    if name in ("SQLITE_BUSY", "SQLITE_LOCKED"):
        return f"{exc} ({primary}) ({name})"
    return f"{exc} ({primary})"


def row_to_insight(row: tuple[Any, ...]) -> Json:
    item: Json = {
        "id": row[0],
        "content": row[1],
        "category": row[2],
        "importance": row[3],
        "tags": json.loads(row[4] or "[]"),
        "entities": json.loads(row[5] or "[]"),
        "source": row[6],
        "access_count": row[7],
        "created_at": row[8],
        "updated_at": row[9],
    }
    if row[10]:
        item["deleted_at"] = row[10]
    return item


def resolve_store(flags: dict[str, Any]) -> Store:
    data_dir = flags["data-dir"] or os.environ.get("MNEMON_DATA_DIR") or ""
    if not data_dir:
        data_dir = os.path.join(os.environ.get("HOME") or "/tmp", ".mnemon")
    name = flags["store"] or os.environ.get("MNEMON_STORE") or ""
    if not name:
        try:
            with open(os.path.join(data_dir, "active"), encoding="utf-8") as handle:
                name = handle.read().strip()
        except OSError:
            name = ""
        if not STORE_RE.match(name):
            name = "default"
    if not STORE_RE.match(name):
        raise CliError(f'open database: invalid store name "{name}"')
    return Store(data_dir, name, readonly=bool(flags["readonly"]))


def refuse_readonly(store: Store, action: str) -> None:
    if store.readonly:
        raise CliError(f"{action} is unavailable with --readonly: database writes are disabled")


# ---------------------------------------------------------------- remember / import


def extract_entities(text: str, known: list[str]) -> list[str]:
    found = re.findall(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b", text)
    found += re.findall(r"\b[A-Z]{2,}[0-9]*\b", text)
    found += [k for k in known if re.search(rf"(?<!\w){re.escape(k)}(?!\w)", text)]
    return found


def merge_entities(provided: list[str], text: str, mode: str, store: Store) -> list[str]:
    auto = [] if mode == "provided" else extract_entities(text, store.known_entities())
    chosen = auto if mode == "auto" else [*provided, *auto]
    return list(dict.fromkeys(chosen))[:50]


def diff_candidates(store: Store, content: str) -> list[tuple[Json, float]]:
    query = set(tokens(content))
    scored = []
    for item in store.active():
        words = set(tokens(item["content"]))
        overlap = len(query & words) / max(len(query), len(words), 1)
        if overlap >= 0.10:
            scored.append((item, jaccard(content, item["content"])))
    scored.sort(key=lambda pair: -pair[1])
    return scored[:5]


CHANGE_WORDS = (
    "no longer",
    "don't",
    "doesn't",
    "never",
    "switched from",
    "instead of",
    "rather than",
    "replaced",
    "deprecated",
)


def replacing_diff(content: str, candidates: list[tuple[Json, float]]) -> tuple[str, str]:
    """The June 2026 build's diff (its `internal/search/diff.go`, as read): each candidate's
    token Jaccard; < 0.5 ADD; >= 0.7 with a change phrase in either text CONFLICT; > 0.9
    DUPLICATE; else UPDATE. DUPLICATE anywhere wins, else the closest candidate's label.
    Returns the suggestion and the memory it names ("" for ADD)."""
    labels = []
    for item, sim in candidates:
        both = (content + " " + item["content"]).lower()
        if sim < 0.5:
            label = "ADD"
        elif sim >= 0.7 and any(word in both for word in CHANGE_WORDS):
            label = "CONFLICT"
        else:
            label = "DUPLICATE" if sim > 0.9 else "UPDATE"
        labels.append((label, item["id"]))
    for label, item_id in labels:
        if label == "DUPLICATE":
            return label, item_id
    return labels[0] if labels and labels[0][0] != "ADD" else ("ADD", "")


def suggestion(content: str, best: tuple[Json, float] | None) -> str:
    if best is None or best[1] < 0.5:
        return "ADD"
    extension = len(content) > 1.25 * len(best[0]["content"])
    if best[1] > 0.9 and not extension:
        return "DUPLICATE"
    return "UPDATE"


def auto_edges(store: Store, item: Json, created: datetime) -> dict[str, int]:
    counts = {"temporal": 0, "entity": 0, "causal": 0, "semantic": 0}
    me = item["id"]
    latest = store.conn.execute(
        "SELECT id FROM insights WHERE deleted_at IS NULL AND source = ? AND id != ?"
        " ORDER BY created_at DESC, rowid DESC LIMIT 1",
        (item["source"], me),
    ).fetchone()
    if latest:
        meta = {"sub_type": "backbone"}
        counts["temporal"] += store.add_edge_once(latest[0], me, "temporal", 1.0, meta)
        counts["temporal"] += store.add_edge_once(me, latest[0], "temporal", 1.0, meta)
    since = stamp(created - timedelta(hours=24))
    recent = store.conn.execute(
        "SELECT id, created_at FROM insights WHERE deleted_at IS NULL AND id != ?"
        " AND created_at >= ? AND created_at <= ? ORDER BY created_at DESC LIMIT 10",
        (me, since, stamp(created)),
    ).fetchall()
    for other, when in recent:
        hours = abs((created - parse_stamp(when)).total_seconds()) / 3600
        weight = round(1 / (1 + hours), 4)
        meta = {"sub_type": "proximity"}
        counts["temporal"] += store.add_edge_once(other, me, "temporal", weight, meta)
        counts["temporal"] += store.add_edge_once(me, other, "temporal", weight, meta)
    for entity in item["entities"]:
        sharers = store.conn.execute(
            "SELECT DISTINCT i.id FROM insights i, json_each(i.entities) je"
            " WHERE i.deleted_at IS NULL AND i.id != ? AND je.value = ?"
            " ORDER BY i.created_at DESC LIMIT 5",
            (me, entity),
        ).fetchall()
        for (other,) in sharers:
            meta = {"entity": entity}
            counts["entity"] += store.add_edge_once(me, other, "entity", 1.0, meta)
            counts["entity"] += store.add_edge_once(other, me, "entity", 1.0, meta)
    text = item["content"].lower()
    cue = next((c for c in CAUSAL_CUES if c in text), None)
    if cue:
        mine = set(tokens(item["content"]))
        for other_id, other_text in store.conn.execute(
            "SELECT id, content FROM insights WHERE deleted_at IS NULL AND source = ?"
            " AND id != ? ORDER BY created_at DESC LIMIT 10",
            (item["source"], me),
        ).fetchall():
            theirs = set(tokens(other_text))
            overlap = len(mine & theirs) / max(len(mine), len(theirs), 1)
            if overlap >= 0.15:
                meta = {"overlap": f"{overlap:.2f}", "sub_type": "causes"}
                counts["causal"] += store.add_edge_once(
                    other_id, me, "causal", round(overlap, 4), meta
                )
                break
    return counts


def cmd_remember(store: Store, flags: dict[str, Any], args: list[str]) -> int:
    content = " ".join(args)
    category = flags["cat"]
    if category not in CATEGORIES:
        raise CliError(f'invalid category "{category}"; valid: {", ".join(CATEGORIES)}')
    importance = flags["imp"]
    if not 1 <= importance <= 5:
        raise CliError(f"importance must be 1-5, got {importance}")
    tags = split_list(flags["tags"], "tag", 20, 100)
    provided = split_list(flags["entities"], "entity", 50, 200)
    mode = flags.get("entity-mode", "merge")
    if mode not in ("merge", "provided", "auto"):
        raise CliError(f'invalid entity mode "{mode}"; valid: merge, provided, auto')
    size = len(content.encode())
    if size > MAX_CONTENT:
        raise CliError(
            f"content too long ({size} chars, max {MAX_CONTENT}); consider chunking into"
            " multiple remember calls"
        )
    refuse_readonly(store, "remember")
    embed_probe()
    candidates = [] if flags["no-diff"] else diff_candidates(store, content)
    best = candidates[0] if candidates else None
    advice = "ADD" if flags["no-diff"] else suggestion(content, best)
    legacy, named = replaces_near_duplicates(), ""
    if legacy and not flags["no-diff"]:
        advice, named = replacing_diff(content, candidates)
    if not flags["no-diff"]:
        same = store.conn.execute(
            "SELECT id FROM insights WHERE deleted_at IS NULL AND content = ? LIMIT 1",
            (content,),
        ).fetchone()
        kept = same[0] if same else None
        if legacy:
            kept = named if advice == "DUPLICATE" else None
        if kept is not None:
            store.log("remember:skip", kept)
            emit(
                {
                    "id": new_id(),
                    "content": content,
                    "action": "skipped",
                    "diff_suggestion": "DUPLICATE",
                    "replaced_id": kept,
                }
            )
            return 0
    created = now()
    item: Json = {
        "id": new_id(),
        "content": content,
        "category": category,
        "importance": importance,
        "tags": tags,
        "entities": merge_entities(provided, content, mode, store),
        "source": flags["source"],
    }
    store.begin()
    replaced = ""
    action = "added"
    if legacy and advice in ("UPDATE", "CONFLICT"):
        replaced, action = named, "updated"
        store.soft_delete(replaced)
    store.insert(item, created=created)
    counts = auto_edges(store, item, created)
    pruned = store.auto_prune({item["id"]})
    store.log("remember", item["id"], content[:80])
    store.commit()
    output: Json = {
        **item,
        "action": action,
        "diff_suggestion": advice,
        "created_at": stamp(created),
        "edges_created": counts,
        "semantic_candidates": [
            {
                "id": c["id"],
                "content": c["content"],
                "category": c["category"],
                "similarity": round(sim, 4),
                "auto_linked": False,
            }
            for c, sim in candidates
            if c["id"] != replaced
        ],
        "causal_candidates": [],
        "embedded": False,
        "effective_importance": round(
            {1: 0.15, 2: 0.3, 3: 0.5, 4: 0.8, 5: 1.0}[importance]
            * (1 + 0.1 * min(sum(counts.values()), 5)),
            4,
        ),
        "auto_pruned": len(pruned),
        "auto_pruned_ids": pruned,
    }
    del output["source"]
    if replaced:
        output["replaced_id"] = replaced
    emit(output)
    return 0


def _draft_error(where: str, message: str) -> CliError:
    return CliError(f"invalid draft: {where}: {message}" if where else f"invalid draft: {message}")


def _validate_insight(where: str, raw: Any, default_source: str) -> Json:
    if not isinstance(raw, dict):
        raise _draft_error(where, "must be an object")
    content = raw.get("content") or ""
    if not content.strip():
        raise _draft_error(where, "content is required")
    if len(content.encode()) > MAX_CONTENT:
        raise _draft_error(
            where, f"content too long ({len(content.encode())} bytes, max {MAX_CONTENT})"
        )
    category = raw.get("category") or "general"
    if category not in CATEGORIES:
        raise _draft_error(where, f'invalid category "{category}"')
    importance = raw.get("importance") or 3
    if not isinstance(importance, int) or not 1 <= importance <= 5:
        raise _draft_error(where, f"importance must be 1-5, got {importance}")
    tags, entities = raw.get("tags") or [], raw.get("entities") or []
    for values, what, limit, size in ((tags, "tag", 20, 100), (entities, "entity", 50, 200)):
        plural = "tags" if what == "tag" else "entities"
        if len(values) > limit:
            raise _draft_error(where, f"too many {plural} ({len(values)}, max {limit})")
        for value in values:
            if len(str(value).encode()) > size:
                raise _draft_error(where, f"{what} too long (max {size})")
    created = None
    if raw.get("created_at"):
        try:
            created = parse_stamp(str(raw["created_at"]))
        except ValueError:
            raise _draft_error(where, f'invalid created_at "{raw["created_at"]}"') from None
    return {
        "content": content,
        "category": category,
        "importance": importance,
        "tags": [str(t) for t in tags],
        "entities": [str(e) for e in entities],
        "source": raw.get("source") or default_source,
        "created": created,
    }


def _validate_edge(where: str, raw: Any, count: int) -> Json:
    if not isinstance(raw, dict):
        raise _draft_error(where, "must be an object")
    src, dst = raw.get("source_index"), raw.get("target_index")
    for value in (src, dst):
        if not isinstance(value, int) or not 0 <= value < count:
            raise _draft_error(where, f"index {value} out of range")
    if src == dst:
        raise _draft_error(where, "source_index and target_index must differ")
    kind = raw.get("edge_type")
    if kind not in EDGE_TYPES:
        raise _draft_error(where, f'invalid edge type "{kind}"')
    weight = raw.get("weight") or 0.5
    if not 0.0 <= float(weight) <= 1.0:
        raise _draft_error(where, f"weight must be between 0.0 and 1.0, got {weight}")
    return {**raw, "weight": float(weight)}


def validate_draft(draft: Any) -> tuple[list[Json], list[Json]]:
    if not isinstance(draft, dict):
        raise CliError("parse JSON: json: cannot unmarshal into Go value of type draft")
    version_field = draft.get("schema_version")
    if version_field != "1":
        shown = version_field if isinstance(version_field, str) else ""
        raise _draft_error("", f'unsupported schema_version "{shown}" (expected "1")')
    insights = draft.get("insights") or []
    if not insights:
        raise _draft_error("", "insights array is empty; nothing to import")
    source = str(draft.get("source") or "import")
    rows = [_validate_insight(f"insights[{i}]", raw, source) for i, raw in enumerate(insights)]
    edges = [
        _validate_edge(f"edges[{i}]", raw, len(rows))
        for i, raw in enumerate(draft.get("edges") or [])
    ]
    return rows, edges


def _import_rows(
    store: Store, rows: list[Json], *, no_diff: bool
) -> tuple[list[str], list[Json], dict[str, int]]:
    results: list[Json] = []
    ids: list[str] = []
    counts = {"imported": 0, "updated": 0, "skipped": 0, "errors": 0}
    legacy = replaces_near_duplicates()
    for index, row in enumerate(rows):
        same, replaced = None, ""
        if not no_diff and legacy:  # the June 2026 build: each row through the diff
            advice, named = replacing_diff(row["content"], diff_candidates(store, row["content"]))
            same = (named,) if advice == "DUPLICATE" else None
            replaced = named if advice in ("UPDATE", "CONFLICT") else ""
        elif not no_diff:
            same = store.conn.execute(
                "SELECT id FROM insights WHERE deleted_at IS NULL AND content = ? LIMIT 1",
                (row["content"],),
            ).fetchone()
        if same is not None:
            ids.append(same[0])
            counts["skipped"] += 1
            results.append(
                {"index": index, "id": same[0], "content": row["content"], "action": "skipped"}
            )
            continue
        item = {key: row[key] for key in ("content", "category", "importance", "tags", "source")}
        item["id"] = new_id()
        item["entities"] = list(dict.fromkeys(row["entities"]))
        created = row["created"] or now()
        if replaced:
            store.soft_delete(replaced)
        store.insert(item, created=created)
        for entity in item["entities"]:
            sharers = store.conn.execute(
                "SELECT DISTINCT i.id FROM insights i, json_each(i.entities) je"
                " WHERE i.deleted_at IS NULL AND i.id != ? AND je.value = ? LIMIT 5",
                (item["id"], entity),
            ).fetchall()
            for (other,) in sharers:
                store.add_edge_once(item["id"], other, "entity", 1.0, {"entity": entity})
                store.add_edge_once(other, item["id"], "entity", 1.0, {"entity": entity})
        ids.append(item["id"])
        action = "updated" if replaced else "added"
        counts["updated" if replaced else "imported"] += 1
        results.append(
            {"index": index, "id": item["id"], "content": row["content"], "action": action}
        )
    return ids, results, counts


def cmd_import(store: Store, flags: dict[str, Any], args: list[str]) -> int:
    path = args[0]
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        raise CliError(f"read file: open {path}: {reason}") from None
    try:
        draft = json.loads(text)
    except ValueError as exc:
        raise CliError(f"parse JSON: {exc}") from None
    rows, edges = validate_draft(draft)
    if flags["dry-run"]:
        sys.stdout.write(
            f"Dry run: {len(rows)} insights, {len(edges)} explicit edges — validation passed.\n"
        )
        return 0
    refuse_readonly(store, "import")
    embed_probe()
    store.begin()
    ids, results, counts = _import_rows(store, rows, no_diff=flags["no-diff"])
    inserted = 0
    for edge in edges:
        meta = {"reason": edge["reason"]} if edge.get("reason") else {}
        src, dst = ids[edge["source_index"]], ids[edge["target_index"]]
        inserted += store.upsert_edge(src, dst, edge["edge_type"], edge["weight"], meta)
    for source in {row["source"] for row in rows}:
        timeline = store.conn.execute(
            "SELECT id FROM insights WHERE deleted_at IS NULL AND source = ?"
            " ORDER BY created_at, rowid",
            (source,),
        ).fetchall()
        for (a,), (b,) in itertools.pairwise(timeline):
            meta = {"sub_type": "backbone"}
            store.add_edge_once(a, b, "temporal", 1.0, meta)
            store.add_edge_once(b, a, "temporal", 1.0, meta)
    pruned = store.auto_prune(set(ids))
    store.log("import", "", f"imported={counts['imported']}")
    store.commit()
    emit(
        {
            **counts,
            "edges_inserted": inserted,
            "auto_pruned": len(pruned),
            "auto_pruned_ids": pruned,
            "results": results,
        }
    )
    return 0


# ---------------------------------------------------------------- recall and search


def detect_intent(query: str) -> str:
    words = set(re.findall(r"[a-z]+", query.lower()))
    if words & {"why", "because", "reason"}:
        return "WHY"
    if words & {"when", "date", "time"}:
        return "WHEN"
    if words & {"who", "what", "which"}:
        return "ENTITY"
    return "GENERAL"


def keyword_score(query: set[str], item: Json) -> float:
    if not query:
        return 0.0
    words = set(tokens(" ".join([item["content"], *item["tags"], *item["entities"]])))
    return len(query & words) / len(query)


def rrf_rank(lists: list[list[str]]) -> dict[str, float]:
    scores: dict[str, float] = {}
    for ranking in lists:
        for rank, insight_id in enumerate(ranking, start=1):
            scores[insight_id] = scores.get(insight_id, 0.0) + 1.0 / (60 + rank)
    return scores


def smart_recall(
    store: Store, query: str, flags: dict[str, Any], intent: str
) -> tuple[list[Json], Json]:
    pool = [
        item
        for item in store.active()
        if (not flags["cat"] or item["category"] == flags["cat"])
        and (not flags["source"] or item["source"] == flags["source"])
    ]
    by_id = {item["id"]: item for item in pool}
    q_tokens = set(tokens(query))
    known = {e.casefold() for e in store.known_entities() if e.casefold() in query.casefold()}
    q_entities = known | {e.casefold() for e in extract_entities(query, [])}
    kw = {i: keyword_score(q_tokens, item) for i, item in by_id.items()}
    ent = {
        i: (len(q_entities & {e.casefold() for e in item["entities"]}) / len(q_entities))
        if q_entities
        else 0.0
        for i, item in by_id.items()
    }
    keyword_list = sorted((i for i in by_id if kw[i] > 0), key=lambda i: -kw[i])[:20]
    entity_list = sorted((i for i in by_id if ent[i] > 0), key=lambda i: -ent[i])[:20]
    newest = [item["id"] for item in reversed(pool)][:20]
    anchors = rrf_rank([keyword_list, entity_list, newest])
    walk = dict(anchors)
    via: dict[str, str] = {}
    weights = INTENT_WEIGHTS[intent]
    frontier = list(anchors)
    for _depth in range(2):
        reached: list[str] = []
        for node in frontier:
            for other, kind, weight in store.edges_of(node):
                if other not in by_id or other in anchors:
                    continue
                score = walk[node] + weight * weights.get(kind, 0.05) * 0.01
                if score > walk.get(other, -1.0):
                    if other not in walk:
                        reached.append(other)
                    walk[other], via[other] = score, kind
        frontier = reached
    low, high = min(walk.values(), default=0.0), max(walk.values(), default=0.0)
    superseded = store.superseded()
    results: list[Json] = []
    for insight_id, raw in walk.items():
        graph = (raw - low) / (high - low) if high > low else (1.0 if walk else 0.0)
        score = 0.45 * kw[insight_id] + 0.25 * ent[insight_id] + 0.30 * graph
        if insight_id in superseded:
            score *= 0.25
        if insight_id in anchors:
            how = "keyword" if kw[insight_id] > 0 else "entity" if ent[insight_id] else "time"
        else:
            how = via[insight_id]
        result: Json = {
            "insight": by_id[insight_id],
            "score": score,
            "intent": intent,
            "via": how,
            "signals": {
                "keyword": kw[insight_id],
                "entity": ent[insight_id],
                "similarity": 0.0,
                "graph": graph,
            },
        }
        if insight_id in superseded:
            result["superseded"] = True
        results.append(result)
    results.sort(
        key=lambda r: (
            -r["score"],
            -r["insight"]["importance"],
            r["insight"]["created_at"],
            r["insight"]["id"],
        )
    )
    results = results[: flags["limit"]]
    meta: Json = {
        "intent": intent,
        "intent_source": "override" if flags["intent"] else "auto",
        "anchor_count": len(anchors),
        "traversed": len(walk) - len(anchors),
    }
    if not results or len(results) < flags["limit"] // 2:
        meta["hint"] = "sparse_results"
    return results, meta


def confidence(score: float) -> str:
    return "low" if score < 0.25 else "medium" if score < 0.6 else "high"


def _recall_basic(store: Store, flags: dict[str, Any], query: str) -> None:
    sql = "deleted_at IS NULL AND content LIKE ?"
    params: list[Any] = [f"%{query}%"]
    for key, column in (("cat", "category"), ("source", "source")):
        if flags[key]:
            sql += f" AND {column} = ?"
            params.append(flags[key])
    sql += " ORDER BY importance DESC, created_at DESC LIMIT ?"
    found = store.rows(sql, [*params, flags["limit"]])
    store.record_read([i["id"] for i in found], "recall:basic", f"q={query}")
    if flags.get("brief"):
        rows = [
            {
                "id": i["id"],
                "excerpt": excerpt(i["content"], flags["excerpt-chars"]),
                "category": i["category"],
            }
            for i in found
        ]
        emit_brief(_brief(rows, None))
    else:
        emit(found)


def _compact(result: Json, brief_chars: int | None) -> Json:
    score = round(result["score"], 3)
    insight = result["insight"]
    row: Json = {"id": insight["id"]}
    if brief_chars is not None:
        row.update(excerpt=excerpt(insight["content"], brief_chars), category=insight["category"])
        row.update(score=score, confidence=confidence(score))
    else:
        row.update(content=insight["content"], category=insight["category"])
        row.update(importance=insight["importance"], intent=result["intent"])
        row.update(matched_via=result["via"], confidence=confidence(score), score=score)
    if result.get("superseded"):
        row["superseded"] = True
    return row


def cmd_recall(store: Store, flags: dict[str, Any], args: list[str]) -> int:
    query = " ".join(args)
    if flags["limit"] < 1:
        raise CliError(f"--limit must be at least 1, got {flags['limit']}")
    brief, verbose = flags.get("brief", False), flags.get("verbose", False)
    if brief and flags["excerpt-chars"] <= 0:
        raise CliError("--excerpt-chars must be greater than 0")
    if brief and verbose:
        raise CliError("--brief and --verbose cannot be used together")
    if flags["basic"]:
        _recall_basic(store, flags, query)
        return 0
    intent = detect_intent(query)
    if flags["intent"]:
        if flags["intent"].upper() not in INTENTS:
            raise CliError(f'unknown intent "{flags["intent"]}" (valid: {", ".join(INTENTS)})')
        intent = flags["intent"].upper()
    embed_probe()
    results, meta = smart_recall(store, query, flags, intent)
    store.record_read([r["insight"]["id"] for r in results], "recall", f"q={query}")
    if verbose or not has("compact"):
        emit({"results": results, "meta": meta})
    elif brief:
        rows = [_compact(r, flags["excerpt-chars"]) for r in results]
        emit_brief(_brief(rows, meta.get("hint")))
    else:
        document: Json = {"results": [_compact(r, None) for r in results]}
        if meta.get("hint"):
            document["hint"] = meta["hint"]
        emit(document)
    return 0


def _brief(rows: list[Json], hint: str | None) -> Json:
    document: Json = {"results": rows}
    if hint:
        document["hint"] = hint
    if rows:
        document["detail_command"] = "mnemon show <id>"
    return document


def cmd_search(store: Store, flags: dict[str, Any], args: list[str]) -> int:
    query = " ".join(args)
    if flags["limit"] < 1:
        raise CliError(f"--limit must be at least 1, got {flags['limit']}")
    if flags["brief"] and flags["excerpt-chars"] <= 0:
        raise CliError("--excerpt-chars must be greater than 0")
    q_tokens = set(tokens(query))
    scored = [(keyword_score(q_tokens, item), item) for item in store.active()]
    scored = [(s, i) for s, i in scored if s > 0]
    scored.sort(key=lambda p: (-p[0], -p[1]["importance"], p[1]["created_at"], p[1]["id"]))
    scored = scored[: flags["limit"]]
    store.record_read([i["id"] for _, i in scored], "search", f"q={query}")
    if flags["brief"]:
        rows = [
            {
                "id": i["id"],
                "excerpt": excerpt(i["content"], flags["excerpt-chars"]),
                "category": i["category"],
                "score": round(s, 3),
            }
            for s, i in scored
        ]
        emit_brief(_brief(rows, None))
        return 0
    emit(
        [
            {
                "id": i["id"],
                "content": i["content"],
                "category": i["category"],
                "importance": i["importance"],
                "tags": i["tags"],
                "score": s,
            }
            for s, i in scored
        ]
    )
    return 0


# ---------------------------------------------------------------- show, related, link, forget


def cmd_show(store: Store, flags: dict[str, Any], args: list[str]) -> int:
    item = store.get(args[0])
    if item is None:
        raise CliError("sql: no rows in result set")
    store.record_read([item["id"]], "show", item["id"])
    item["access_count"] += 0 if store.readonly else 1
    emit(item)
    return 0


def cmd_related(store: Store, flags: dict[str, Any], args: list[str]) -> int:
    kind, depth = flags["edge"], flags["depth"]
    if kind and kind not in EDGE_TYPES:
        raise CliError(f'invalid edge type "{kind}"; valid: temporal, semantic, causal, entity')
    if depth <= 0:
        raise CliError("depth must be greater than 0")
    start = store.get(args[0])
    if start is None:
        raise CliError("insight not found: sql: no rows in result set")
    seen = {start["id"]}
    frontier = [start["id"]]
    out: list[Json] = []
    for hop in range(1, depth + 1):
        reached: list[str] = []
        for node in frontier:
            for other, edge_type, _weight in store.edges_of(node):
                if other in seen or (kind and edge_type != kind):
                    continue
                item = store.get(other)
                seen.add(other)
                if item is None:
                    continue
                reached.append(other)
                out.append(
                    {
                        "id": item["id"],
                        "content": item["content"],
                        "category": item["category"],
                        "importance": item["importance"],
                        "depth": hop,
                        "via_edge_type": edge_type,
                    }
                )
        frontier = reached
    emit(out)
    return 0


def cmd_link(store: Store, flags: dict[str, Any], args: list[str]) -> int:
    source, target = args
    kind, weight = flags["type"], flags["weight"]
    valid = EDGE_TYPES if has("supersedes") else EDGE_TYPES[:4]
    if kind not in valid:
        raise CliError(f'invalid edge type "{kind}"; valid: {", ".join(valid)}')
    if not 0.0 <= weight <= 1.0:
        raise CliError(f"weight must be between 0.0 and 1.0, got {weight:.2f}")
    meta: Json = {}
    if flags["meta"]:
        try:
            parsed = json.loads(flags["meta"])
        except ValueError as exc:
            raise CliError(f"invalid metadata JSON: {exc}") from None
        if not isinstance(parsed, dict) or not all(isinstance(v, str) for v in parsed.values()):
            raise CliError(
                "invalid metadata JSON: json: cannot unmarshal into Go value of type"
                " map[string]string"
            )
        meta = parsed
    meta["created_by"] = "claude"
    if store.get(source) is None:
        raise CliError(f"source insight {source} not found")
    if store.get(target) is None:
        raise CliError(f"target insight {target} not found")
    try:
        store.begin()
        store.upsert_edge(source, target, kind, weight, meta)
        if kind != "supersedes":
            store.upsert_edge(target, source, kind, weight, meta)
        store.log("link", source, f"{kind} -> {target}")
        store.commit()
    except sqlite3.Error as exc:
        raise CliError(f"link: {sql_message(exc)}") from None
    emit(
        {
            "status": "linked",
            "source_id": source,
            "target_id": target,
            "edge_type": kind,
            "weight": weight,
            "metadata": meta,
        }
    )
    return 0


def cmd_forget(store: Store, flags: dict[str, Any], args: list[str]) -> int:
    refuse_readonly(store, "forget")
    store.begin()
    if not store.soft_delete(args[0]):
        store.conn.execute("ROLLBACK")
        raise CliError(f"forget: insight {args[0]} not found or already deleted")
    store.log("forget", args[0])
    store.commit()
    emit({"id": args[0], "status": "deleted", "message": "Insight soft-deleted successfully"})
    return 0


def cmd_status(store: Store, flags: dict[str, Any], args: list[str]) -> int:
    conn = store.conn
    active = conn.execute("SELECT count(*) FROM insights WHERE deleted_at IS NULL").fetchone()[0]
    deleted = conn.execute("SELECT count(*) FROM insights WHERE deleted_at IS NOT NULL").fetchone()[
        0
    ]
    by_category = dict(
        conn.execute(
            "SELECT category, count(*) FROM insights WHERE deleted_at IS NULL GROUP BY category"
        ).fetchall()
    )
    top = conn.execute(
        "SELECT je.value, count(*) AS n FROM insights i, json_each(i.entities) je"
        " WHERE i.deleted_at IS NULL GROUP BY je.value ORDER BY n DESC, je.value LIMIT 20"
    ).fetchall()
    emit(
        {
            "total_insights": active,
            "deleted_insights": deleted,
            "by_category": by_category,
            "edge_count": conn.execute("SELECT count(*) FROM edges").fetchone()[0],
            "top_entities": [{"entity": e, "count": n} for e, n in top],
            "oplog_count": conn.execute("SELECT count(*) FROM oplog").fetchone()[0],
            "db_path": store.path,
        }
    )
    return 0


HANDLERS: dict[str, Callable[[Store, dict[str, Any], list[str]], int]] = {
    "remember": cmd_remember,
    "recall": cmd_recall,
    "search": cmd_search,
    "show": cmd_show,
    "related": cmd_related,
    "link": cmd_link,
    "forget": cmd_forget,
    "status": cmd_status,
    "import": cmd_import,
}


# ---------------------------------------------------------------- entry point


def _fail(message: str, command: str | None, usage: bool) -> int:
    err = sys.stderr
    err.write(f"Error: {message}\n")
    if usage and command is not None:
        err.write(usage_text(command) + "\n")
    err.write(f"{message}\n")
    return 1


def _test_knobs() -> None:
    if os.environ.get("MNEMON_DOUBLE_IGNORE_TERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pause = float(os.environ.get("MNEMON_DOUBLE_SLEEP_S") or 0)
    if pause > 0:
        time.sleep(pause)


def main(argv: list[str]) -> int:
    log = os.environ.get("MNEMON_DOUBLE_LOG")
    if log:
        entry = {
            "argv": argv,
            "pid": os.getpid(),
            "embed_endpoint": os.environ.get("MNEMON_EMBED_ENDPOINT"),
        }
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")
    _test_knobs()
    command, rest = find_command(argv)
    if command is None:
        try:
            flags, args = parse(rest, {**GLOBAL_FLAGS, "version": ("bool", False)})
        except CliError as exc:
            return _fail(str(exc), None, False)
        if flags["version"]:
            sys.stdout.write(f"mnemon version {version()}\n")
            return 0
        if args:
            sys.stderr.write(
                f'Error: unknown command "{args[0]}" for "mnemon"\n'
                "Run 'mnemon --help' for usage.\n"
            )
            return 1
        sys.stdout.write(usage_text(None))
        return 0
    if command == "help":
        sys.stdout.write(usage_text(rest[0] if rest and rest[0] in COMMANDS else None))
        return 0
    if command not in available_commands():
        sys.stderr.write(
            f'Error: unknown command "{command}" for "mnemon"\nRun \'mnemon --help\' for usage.\n'
        )
        return 1
    _, spec, rule = COMMANDS[command]
    try:
        flags, args = parse(rest, {**GLOBAL_FLAGS, **spec()})
        if flags["help"]:
            sys.stdout.write(usage_text(command))
            return 0
        check_args(rule, args)
        store = resolve_store(flags)
        try:
            return HANDLERS[command](store, flags, args)
        except sqlite3.Error as exc:
            raise CliError(f"{command}: {sql_message(exc)}") from None
        finally:
            store.conn.close()
    except CliError as exc:
        return _fail(str(exc), command, exc.usage)

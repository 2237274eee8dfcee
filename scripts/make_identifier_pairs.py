r"""Build the shipped identifier set: `src/memory_orchestrator/eval/identifier_pairs.jsonl`.

Two true facts that differ only in an identifier that names what they are about (parking
spot 41 and 42, host db-stage-05 and db-stage-06, user bob77 and bob78, the key
/etc/ssl/private/web.key and api.key) are two facts: both written (`added`, the second a
look-alike of the first that supersedes nothing) and both shown when asked about (`kept-apart`
questions name both as relevant). Beside them, in each domain, restatements of one fact in
other words (order, voice), which the write path must skip (`restatement`), and corrections of
one value a fact states, which must supersede it (`correction`: the corrected memory is
`stale`).

One case per domain (`scripts/identifier_pairs.py`: rooms, tickets, builds, hosts, users,
paths, people, places, codes, transport, dates), written through `memory_write` in time order:
first every group's first fact, then every second one, so that each second write is read
against all the first ones. The sentences are written by hand; this script only numbers,
dates and orders them. Deterministic: the same file every run.

    .venv/bin/python scripts/make_identifier_pairs.py   # rewrites the .jsonl, prints counts
    .venv/bin/orchestrator eval --dataset identifier-pairs --backend embedded --k 1,5
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from identifier_pairs import DOMAINS, Domain

OUT = Path(__file__).resolve().parents[1] / "src" / "memory_orchestrator" / "eval"
OUT = OUT / "identifier_pairs.jsonl"
START = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
STEP = timedelta(hours=3)
HEADER = """\
# Identifier pairs: two facts that differ only in an identifier that names what they are about
# (a room, a ticket, a build, a host, a user, a path, a person, a place, a code, a date) are two
# facts, both written and both shown; beside them restatements (skipped) and corrections
# (superseding). Built by scripts/make_identifier_pairs.py from scripts/identifier_pairs.py;
# do not edit by hand.
"""


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def records(domain: Domain) -> Iterator[dict[str, Any]]:
    """One case: the first facts of every group, then the second ones, then the questions."""
    groups: list[tuple[str, str, str, str, dict[str, Any], dict[str, Any]]] = []
    for n, p in enumerate(domain.pairs):
        key = f"apart-{domain.name}-{n:02d}"
        groups.append((key, p.first, p.second, p.question, {"expect": "added"}, {}))
    for n, r in enumerate(domain.restated):
        key = f"restated-{domain.name}-{n:02d}"
        groups.append((key, r.fact, r.again, r.question, {"expect": "skipped"}, {}))
    for n, c in enumerate(domain.corrected):
        key = f"corrected-{domain.name}-{n:02d}"
        then = {"expect": "updated", "supersedes": f"{key}-0"}
        groups.append((key, c.fact, c.then, c.question, then, {}))
    at = START
    writes: list[dict[str, Any]] = []
    for key, first, *_ in groups:
        writes.append({"id": f"{key}-0", "content": first, "created_at": _stamp(at)})
        writes[-1]["expect"] = "added"
        at += STEP
    for key, _, second, _, expect, _ in groups:
        memory = {"id": f"{key}-1", "content": second, "created_at": _stamp(at), **expect}
        if key.startswith("apart-"):
            memory["lookalike_of"] = f"{key}-0"
        writes.append(memory)
        at += STEP
    yield {
        "case": f"ids-{domain.name}",
        "as_of": _stamp(at),
        "description": domain.description,
        "ingest": "write",
    }
    for memory in writes:
        yield {"memory": memory}
    for key, _, _, question, _, _ in groups:
        if key.startswith("apart-"):
            yield {
                "query": question,
                "relevant": [f"{key}-0", f"{key}-1"],
                "category": "kept-apart",
                "id": key,
            }
        elif key.startswith("restated-"):
            yield {
                "query": question,
                "relevant": [f"{key}-0"],
                "category": "restatement",
                "id": key,
            }
        else:
            yield {
                "query": question,
                "relevant": [f"{key}-1"],
                "stale": [f"{key}-0"],
                "category": "correction",
                "id": key,
            }


def main() -> None:
    lines = [json.dumps(r, ensure_ascii=False) for d in DOMAINS for r in records(d)]
    OUT.write_text(HEADER + "\n".join(lines) + "\n", encoding="utf-8")
    pairs = sum(len(d.pairs) for d in DOMAINS)
    restated = sum(len(d.restated) for d in DOMAINS)
    corrected = sum(len(d.corrected) for d in DOMAINS)
    print(
        f"{OUT.name}: {len(DOMAINS)} cases, {pairs} pairs, {restated} restatements,"
        f" {corrected} corrections"
    )


if __name__ == "__main__":
    main()

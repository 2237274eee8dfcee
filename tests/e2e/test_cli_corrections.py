"""The issue's three corrections, as an agent tried them: `orchestrator write` on a fresh
embedded store, then `orchestrator context`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_orchestrator.faces.cli import app

RATE = "The API rate limit for the billing service is {} requests per minute."


def cli(data: Path, *args: str) -> dict[str, object]:
    result = CliRunner().invoke(app, ["--data-dir", str(data), "--json", *args])
    assert result.exit_code == 0, result.output
    found: dict[str, object] = json.loads(result.stdout)
    return found


@pytest.mark.parametrize(
    ("first", "then", "changed", "query", "now"),
    [
        (
            RATE.format(100),
            RATE.format(500),
            "100 -> 500 requests per minute",
            "billing rate limit",
            "500",
        ),
        (
            "Dana moved the Atlas review to Friday.",
            "Dana moved the Atlas review to Monday.",
            "Friday -> Monday",
            "Atlas review",
            "Monday",
        ),
        (
            "Dana moved the Atlas review to Friday.",
            "Dana did not move the Atlas review to Friday.",
            "negated",
            "Atlas review",
            "did not move",
        ),
    ],
    ids=["number", "date", "negation"],
)
def test_a_correction_answers_updated_and_the_context_shows_the_new_value_first(
    tmp_path: Path, first: str, then: str, changed: str, query: str, now: str
) -> None:
    data = tmp_path / "fresh"
    old = cli(data, "write", first, "--created-at", "2026-11-01T10:00:00Z")
    new = cli(data, "write", then, "--created-at", "2026-11-03T10:00:00Z")
    assert (new["action"], new["supersedes"], new["changed"]) == ("updated", old["id"], changed)
    package = cli(data, "context", query)
    items = package["items"]
    assert isinstance(items, list)
    assert items[0]["memory_id"] == new["id"]
    block = str(package["context_block"])
    first_line = block.split("Key recalled memories")[1].splitlines()[1]
    assert now in first_line
    assert str(old["id"]) not in block

"""The evaluation harness on the postgres store: each case in a scratch schema of a real
PostgreSQL, dropped afterwards, and the same quality as the embedded store on the golden set."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from memory_orchestrator.eval import RunOptions, build_report, load_dataset, run_eval
from memory_orchestrator.settings import load_settings

pytestmark = pytest.mark.integration


async def report(backend: str, tmp_path: Path, **options: Any) -> dict[str, Any]:
    settings = load_settings(data_dir=tmp_path / backend, **options)
    run = await run_eval(load_dataset("golden"), settings, RunOptions(backend=backend))
    return build_report(run)


async def test_the_golden_set_on_postgres_matches_the_embedded_store(
    tmp_path: Path, pg_dsn: str
) -> None:
    embedded = await report("embedded", tmp_path)
    postgres = await report("postgres", tmp_path, postgres={"dsn": pg_dsn})
    assert postgres["write_checks"]["failed"] == 0, postgres["write_checks"]
    for system, block in embedded["systems"].items():
        theirs = postgres["systems"][system]
        for metric in ("recall@5", "recall@10", "mrr"):
            assert abs(theirs[metric] - block[metric]) <= 0.05, (system, metric, theirs, block)
    with psycopg.connect(pg_dsn) as conn:  # every case's scratch schema is gone
        left = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'scratch_%'")
        assert left.fetchone() == (0,)

"""The evaluation harness end to end: real embedded stores, LoCoMo and the golden set, the CLI.

Checks the report's shape (the protocol's output contract) and that the metrics are sane and
reproducible, not that they are high. The LoCoMo development split sits in `shared/` beside
the repository (as in CI); without it those tests are skipped.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from memory_orchestrator.backends import registry
from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.eval import Dataset, RunOptions, build_report, load_dataset, run_eval
from memory_orchestrator.eval.jsonl import parse_jsonl
from memory_orchestrator.eval.report import LATENCY_KEYS
from memory_orchestrator.faces.cli import app
from memory_orchestrator.models import NewMemory, SearchRequest, Trace
from memory_orchestrator.pipeline.deduper import similarity
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from tests.faults import FaultyBackend

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LOCOMO = REPO.parent / "shared" / "datasets" / "locomo" / "locomo-dev.json"
needs_locomo = pytest.mark.skipif(
    not LOCOMO.is_file(),
    reason=f"the LoCoMo development split is not at {LOCOMO} (shared/ beside the repository)",
)
HEADLINE_QUESTIONS = 30
ADVERSARIAL_QUESTIONS = 6


class Progress:
    def __init__(self) -> None:
        self.seen: dict[str, tuple[int, int]] = {}

    def update(self, phase: str, completed: int, total: int) -> None:
        self.seen[phase] = (completed, total)


async def evaluate(data: Dataset, settings: Settings, **options: Any) -> dict[str, Any]:
    run = await run_eval(data, settings, RunOptions(backend="embedded", **options))
    return build_report(run)


def without_latency(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_latency(v) for k, v in value.items() if k not in LATENCY_KEYS}
    if isinstance(value, list):
        return [without_latency(v) for v in value]
    return value


def assert_sane(block: dict[str, Any], ks: list[int]) -> None:
    for k in ks:
        for name in ("recall", "recall_all", "precision", "ndcg"):
            assert 0.0 <= block[f"{name}@{k}"] <= 1.0, (name, k, block)
        assert block[f"recall_all@{k}"] <= block[f"recall@{k}"]
    for small, large in itertools.pairwise(ks):
        assert block[f"recall@{small}"] <= block[f"recall@{large}"]
    assert 0.0 <= block["mrr"] <= 1.0
    assert 0.0 <= block["duplicate_rate"] <= 1.0
    assert block["context_chars"] > 0
    assert 0.0 < block["p50_ms"] <= block["p95_ms"]


@pytest.fixture(scope="module")
def conversation() -> Dataset:
    """One LoCoMo conversation: its first 30 headline questions and 6 adversarial ones."""
    if not LOCOMO.is_file():
        pytest.skip(f"the LoCoMo development split is not at {LOCOMO}")
    data = load_dataset(LOCOMO)
    case = data.cases[0]
    headline = [q for q in case.questions if q.category != "5"][:HEADLINE_QUESTIONS]
    adversarial = [q for q in case.questions if q.category == "5"][:ADVERSARIAL_QUESTIONS]
    return replace(data, cases=(replace(case, questions=(*headline, *adversarial)),))


@needs_locomo
async def test_a_locomo_conversation_gives_the_contract_with_sane_reproducible_metrics(
    conversation: Dataset, settings: Settings
) -> None:
    progress = Progress()
    run = await run_eval(conversation, settings, RunOptions(backend="embedded"), progress)
    first = build_report(run)
    second = await evaluate(conversation, settings)

    assert first["dataset"] == "locomo-dev.json"
    assert (first["backend"], first["k"]) == ("embedded", [5, 10])
    assert first["questions"] + first["skipped"] == HEADLINE_QUESTIONS
    assert first["cases"] == ["conv-26"]
    assert set(first["systems"]) == {"raw", "orchestrated", "expanded"}
    for block in first["systems"].values():
        assert_sane(block, [5, 10])
        assert list(block["by_category"]) == ["1", "2", "3", "4"]
        assert sum(c["questions"] for c in block["by_category"].values()) == first["questions"]
    assert first["adversarial"]["questions"] == ADVERSARIAL_QUESTIONS
    assert first["ingest"]["memories"] == len(conversation.cases[0].memories)
    assert progress.seen == {
        "ingest": (first["ingest"]["memories"],) * 2,
        "queries": (HEADLINE_QUESTIONS + ADVERSARIAL_QUESTIONS,) * 2,
    }
    for item in first["worst_missed"]:
        assert item["plan"]["canonical_query"]
        assert [e["turn"] for e in item["evidence_ranks"]] == item["evidence"]
    # Same inputs, same numbers: everything but the clock readings.
    assert without_latency(first) == without_latency(second)


async def test_the_golden_set_runs_and_its_write_checks_pass(settings: Settings) -> None:
    report = await evaluate(load_dataset("golden"), settings)
    assert {"direct", "multi_hop", "episodic"} <= set(report["systems"]["raw"]["by_category"])
    for block in report["systems"].values():
        assert_sane(block, [5, 10])
    checks = report["write_checks"]
    assert checks["failed"] == 0, checks
    assert checks["passed"] == 4
    # The golden set holds a near-duplicate pair ("... on-call SRE for billing-service in
    # March" / "... during March"): raw search returns both. The orchestrator merges only what
    # the write path would skip, and that reading counts "in" (a place's, a direction's) as
    # content: both are shown, as two facts.
    assert report["systems"]["raw"]["duplicate_rate"] > 0
    assert (
        report["systems"]["orchestrated"]["duplicate_rate"]
        <= report["systems"]["raw"]["duplicate_rate"]
    )


async def test_a_store_without_bulk_writes_or_timestamps_is_fed_one_by_one_with_dates_in_content(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    def limited(s: Settings) -> MemoryBackend:
        caps = EmbeddedBackend.capabilities.model_copy(
            update={"bulk_write": False, "timestamps": False}
        )
        return FaultyBackend(EmbeddedBackend(s.embedded_path()), {}, capabilities=caps)

    monkeypatch.setitem(registry._extra, "limited", limited)
    run = await run_eval(load_dataset("golden"), settings, RunOptions(backend="limited"))
    report = build_report(run)
    assert any("date is in its content" in note for note in report["notes"])
    assert report["ingest"]["stored"] == report["ingest"]["memories"]
    assert report["systems"]["raw"]["recall@10"] > 0  # memories still map back to their ids


# ---------------------------------------------------------------- the CLI


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


@needs_locomo
def test_the_cli_prints_one_json_report_and_writes_json_markdown_and_plots(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    result = invoke(
        "eval",
        "--dataset",
        str(LOCOMO),
        "--backend",
        "embedded",
        "--k",
        "10,5",
        "--conversations",
        "conv-30",
        "--limit-questions",
        "12",
        "--format",
        "json",
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)  # exactly one JSON document, or this raises
    assert report["k"] == [5, 10]
    assert report["cases"] == ["conv-30"]
    assert "recall_all@10" in report["systems"]["expanded"]
    assert "queries" in result.stderr  # the progress bars go to stderr
    assert json.loads((out / "report.json").read_text()) == report
    assert "| system | recall@5 | recall@10 |" in (out / "report.md").read_text()
    for name in ("recall_at_k.png", "recall_by_category.png", "latency.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def test_without_the_plots_extra_out_writes_the_tables_and_says_why_no_plots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It used to run everything, then exit 1 without printing the table."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    out = tmp_path / "out"
    result = invoke("eval", "--systems", "raw,orchestrated", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "golden on embedded" in result.stdout
    assert "no plots: PNG plots need matplotlib: install the 'plots' extra" in " ".join(
        result.stderr.split()
    )
    assert sorted(p.name for p in out.iterdir()) == ["report.json", "report.md"]


def test_the_cli_runs_the_golden_set_by_default_as_a_table() -> None:
    result = invoke("eval", "--systems", "raw,orchestrated")
    assert result.exit_code == 0, result.output
    assert "golden on embedded" in result.stdout
    assert "write checks: 4 passed, 0 failed" in result.stdout
    assert "expanded" not in result.stdout.split("recall@10 by category")[0]


def test_the_cli_markdown_report_goes_to_stdout() -> None:
    result = invoke("eval", "--format", "markdown", "--k", "3")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# Retrieval evaluation: golden on `embedded`")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--k", "five"), "--k"),
        (("--k", "0"), "every k"),
        (("--systems", "raw,magic"), "--systems"),
        (("--dataset", "missing.json"), "dataset not found"),
        (("--backend", "nope"), "unknown backend"),
        (("--conversations", "conv-99"), "unknown case"),
    ],
)
def test_the_cli_refuses_bad_options_in_one_line(args: tuple[str, ...], message: str) -> None:
    result = invoke("eval", *args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_every_store_file_of_a_case_lives_in_its_temporary_folder(tmp_path: Path) -> None:
    from memory_orchestrator.eval.systems import _case_settings

    base = Settings(
        data_dir=tmp_path / "real",
        passthrough=True,
        embedded={"path": tmp_path / "real" / "mine.db"},
        expansion={"enabled": True},
    )
    case = _case_settings(base, "embedded", tmp_path / "case")
    assert case.embedded_path() == tmp_path / "case" / "memories.db"
    assert case.trace_path() == tmp_path / "case" / "traces.db"
    assert (case.passthrough, case.expansion.enabled) == (False, False)
    for name in type(case).model_fields:
        section = getattr(case, name)
        if hasattr(section, "data_dir"):  # a store with a home of its own (e.g. Mnemon's)
            assert section.data_dir == tmp_path / "case" / name


async def test_a_candidate_cut_by_its_duplicate_penalty_is_traced_with_that_penalty(
    settings: Settings,
) -> None:
    """The diagnosis reads scores from traces: they must be the scores the items really had."""
    near = (  # a restatement less alike in words than the merge threshold
        "Omar patches the bastion hosts.",
        "The bastion hosts are patched by Omar.",
    )
    assert 0.6 < similarity(*near) < 0.85  # penalised, not merged

    async def main() -> Trace | None:
        orchestrator = Orchestrator.from_settings(settings)
        try:
            await orchestrator.ingest([NewMemory(content=c) for c in near])
            result = await orchestrator.search(SearchRequest(query="bastion hosts", top_k=1))
            return orchestrator.trace(result.trace_id)
        finally:
            await orchestrator.close()

    trace = await main()
    assert trace is not None
    (cut,) = [c for c in trace.candidates if c.final_rank is None]
    assert cut.breakdown is not None
    assert cut.breakdown.duplicate_penalty > 0


def test_make_eval_without_its_dataset_says_how_to_get_one(tmp_path: Path) -> None:
    """From a clone, the default dataset path (beside the project's own checkout) is absent."""
    if shutil.which("make") is None:
        pytest.skip("no make on PATH")
    missing = tmp_path / "locomo-dev.json"
    result = subprocess.run(
        ["make", "-s", "-o", "setup", "eval", f"EVAL_DATASET={missing}"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert f"no dataset at {missing}" in result.stderr
    assert "make eval EVAL_DATASET=golden" in result.stderr


MERGED_PAIR = [
    {"case": "merged", "as_of": "2026-03-20T17:00:00Z"},
    {
        "memories": [
            {"id": "m1", "content": "The weekly standup moves to 10:00 on Mondays."},
            {"id": "m2", "content": "The weekly standup moves to 10:00 on Monday."},
            {"id": "m3", "content": "Lunch is served at noon in the atrium."},
        ]
    },
    {"query": "when is the weekly standup?", "relevant": ["m1", "m2"], "id": "q1"},
]


async def test_a_memory_merged_into_another_item_is_not_counted_as_found(
    settings: Settings,
) -> None:
    """The agent reads the item, not the ids it absorbed (`merged_ids`): two restatements
    shown as one item are one of two evidence memories found."""
    text = "\n".join(json.dumps(record) for record in MERGED_PAIR)
    report = await evaluate(parse_jsonl(text, name="merged", where="test"), settings, k=(10,))
    assert report["systems"]["raw"]["recall@10"] == 1.0  # the store returns both
    assert report["systems"]["orchestrated"]["recall@10"] == 0.5


LONG = (
    "The quarterly planning offsite for the platform team will take place in the old "
    "harbour warehouse, with the agenda covering the storage migration, the on-call "
    "rotation, the hiring plan for the second half, and a long retrospective on the outage."
)
CUT_SET = [
    {"case": "cut", "as_of": "2026-03-20T17:00:00Z"},
    {
        "memories": [
            {"id": "m1", "content": LONG},
            {"id": "m2", "content": "Lunch is served at noon in the atrium."},
        ]
    },
    {"query": "where is the quarterly planning offsite?", "relevant": ["m1"], "id": "q1"},
]


@pytest.mark.parametrize(("max_chars", "expected"), [(3000, 1.0), (300, 0.0)])
async def test_block_recall_counts_an_item_only_when_the_block_shows_most_of_it(
    settings: Settings, max_chars: int, expected: float
) -> None:
    """Found in the ranking either way; shown in the block only when at least 80 % of its
    text fits the budget. Tokens per call: the text the MCP face sends, / 4."""
    text = "\n".join(json.dumps(record) for record in CUT_SET)
    tight = settings.model_copy(
        update={"packaging": settings.packaging.model_copy(update={"max_chars": max_chars})}
    )
    report = await evaluate(parse_jsonl(text, name="cut", where="test"), tight, k=(10,))
    orchestrated = report["systems"]["orchestrated"]
    assert orchestrated["recall@10"] == 1.0
    assert orchestrated["block_recall"] == expected
    assert 0 < orchestrated["tokens_per_call"] <= max_chars / 4 + 20  # the block and its trace id
    assert orchestrated["tokens_per_call"] * 4 > orchestrated["context_chars"]
    assert "block_recall" not in report["systems"]["raw"]

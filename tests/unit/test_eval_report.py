"""The report follows the protocol's output contract, from observations made by hand."""

from __future__ import annotations

from memory_orchestrator.eval.datasets import Dataset, EvalQuestion
from memory_orchestrator.eval.markdown import to_markdown
from memory_orchestrator.eval.report import build_report
from memory_orchestrator.eval.systems import (
    Answer,
    CaseResult,
    EvalRun,
    QuestionResult,
    RunOptions,
)


def answer(*items: str, ms: float = 1.0) -> Answer:
    ranking = tuple(frozenset({i}) for i in items)
    return Answer(
        ranking=ranking, ids=items, texts=items, latency_ms=ms, context_chars=10 * len(items)
    )


def question(qid: str, category: str, *evidence: str) -> EvalQuestion:
    return EvalQuestion(id=qid, text=f"question {qid}?", evidence=evidence, category=category)


def make_run() -> EvalRun:
    dataset = Dataset(
        name="tiny",
        cases=(),
        key_field="dia_id",
        tag_prefix="dia:",
        headline_categories=("1", "2", "3", "4"),
        apart_categories={"5": "adversarial"},
        category_names={"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"},
    )
    results = [
        QuestionResult(
            "c1",
            question("q1", "4", "D1"),
            {"raw": answer("D9", "D1", ms=1.0), "orchestrated": answer("D1", "D9", ms=4.0)},
        ),
        QuestionResult(
            "c1",
            question("q2", "1", "D2", "D3"),
            {"raw": answer("D2", "D8", ms=3.0), "orchestrated": answer("D3", "D2", ms=6.0)},
        ),
        QuestionResult(
            "c1",
            question("q3", "5", "D4"),
            {"raw": answer("D4", ms=2.0), "orchestrated": answer("D7", ms=5.0)},
        ),
    ]
    case = CaseResult(
        id="c1",
        memories=9,
        stored=9,
        ingest_s=0.1,
        questions=results,
        skipped=[EvalQuestion("q4", "no evidence?", (), "2", skip_reason="no evidence")],
    )
    options = RunOptions(backend="embedded", k=(1, 2), systems=("raw", "orchestrated"))
    return EvalRun(dataset=dataset, options=options, cases=[case], dedup_threshold=0.85)


def test_the_report_holds_every_key_of_the_output_contract() -> None:
    report = build_report(make_run())
    assert report["dataset"] == "tiny"
    assert report["backend"] == "embedded"
    assert report["k"] == [1, 2]
    assert (report["questions"], report["skipped"]) == (2, 1)  # q3 is adversarial: apart
    contract = {
        "recall@1",
        "recall@2",
        "recall_all@2",
        "precision@2",
        "ndcg@2",
        "mrr",
        "duplicate_rate",
        "context_chars",
        "p50_ms",
        "p95_ms",
        "by_category",
    }
    for system in ("raw", "orchestrated"):
        block = report["systems"][system]
        assert contract <= set(block)
        assert list(block["by_category"]) == ["1", "2", "3", "4"]
        assert contract - {"by_category"} <= set(block["by_category"]["1"])
        assert block["by_category"]["2"] == {"questions": 0}


def test_headline_numbers_are_means_over_questions() -> None:
    report = build_report(make_run())
    raw, orchestrated = report["systems"]["raw"], report["systems"]["orchestrated"]
    # raw: q1 finds D1 at rank 2 (recall@1 0, @2 1); q2 finds D2 of D2, D3 at rank 1 (0.5, 0.5).
    assert raw["recall@1"] == 0.25
    assert raw["recall@2"] == 0.75
    assert raw["recall_all@2"] == 0.5
    assert raw["mrr"] == 0.75  # (1/2 + 1) / 2
    assert raw["p50_ms"] == 2.0
    assert raw["context_chars"] == 20.0
    assert orchestrated["recall@2"] == 1.0
    assert orchestrated["by_category"]["1"]["recall_all@2"] == 1.0
    assert report["recall_curve"] == {"raw": [0.25, 0.75], "orchestrated": [0.75, 1.0]}


def test_adversarial_questions_are_reported_apart() -> None:
    report = build_report(make_run())
    adversarial = report["adversarial"]
    assert (adversarial["category"], adversarial["questions"]) == ("5", 1)
    assert adversarial["systems"]["raw"]["recall@1"] == 1.0
    assert adversarial["systems"]["orchestrated"]["recall@1"] == 0.0
    assert "by_category" not in adversarial["systems"]["raw"]


def test_worst_missed_lists_the_lowest_recall_first() -> None:
    report = build_report(make_run())
    assert [w["id"] for w in report["worst_missed"]] == []  # orchestrated found all evidence
    run = make_run()
    run.cases[0].questions[0].answers["orchestrated"] = answer("D9")
    worst = build_report(run)["worst_missed"]
    assert [w["id"] for w in worst] == ["q1"]
    assert worst[0]["recall@2"] == {"raw": 1.0, "orchestrated": 0.0}


def test_markdown_has_the_headline_and_the_category_tables() -> None:
    text = to_markdown(build_report(make_run()))
    assert "| system | recall@1 | recall@2 | recall_all@2 | nDCG@2 | MRR |" in text
    assert "| raw | 0.250 | 0.750 |" in text
    assert "| 1 multi-hop | 1 |" in text
    assert "## Adversarial (category 5, apart from the headline)" in text

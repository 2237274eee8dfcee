"""The adaptive controller: weights learned per question type over the score breakdown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_orchestrator.errors import ConfigError
from memory_orchestrator.eval.controller import Pool, cross_validate, fit, score_pools
from memory_orchestrator.settings import Weights
from memory_orchestrator.state.learned import DEFAULT, FEATURES, LearnedWeights, load_learned


def pool(case: str, qtype: str, answer_recent: bool) -> Pool:
    """Two candidates: a better term match that is old, and the answer. For "when"
    questions the answer is the recent one; for the others the better match."""
    old_match = (0.9, 0.1, 0.0, 0.5, 0.0, 0.0, 0.0)
    recent = (0.7, 1.0, 0.0, 0.5, 0.0, 0.0, 0.0)
    answer = "recent" if answer_recent else "old"
    return Pool(
        case=case,
        question_type=qtype,
        signals=(old_match, recent),
        keys=(frozenset({"old"}), frozenset({"recent"})),
        evidence=frozenset({answer}),
    )


def pools() -> list[Pool]:
    out = []
    for case in ("a", "b", "c"):
        out += [pool(case, "when", answer_recent=True) for _ in range(20)]
        out += [pool(case, "what", answer_recent=False) for _ in range(20)]
    return out


def test_weights_are_learned_per_question_type() -> None:
    learned = fit(pools(), Weights(), k=1)
    assert set(learned) == {DEFAULT, "when", "what"}
    assert learned["when"]["recency"] > learned["what"]["recency"]
    assert learned["when"]["relevance"] == Weights().relevance  # the scale stays put
    score = score_pools(pools(), learned, k=1)
    assert score["mrr"] == 1.0
    assert score_pools(pools(), {DEFAULT: learned[DEFAULT]}, k=1)["mrr"] < 1.0


def test_cross_validation_scores_each_case_with_weights_fitted_on_the_others() -> None:
    cv = cross_validate(pools(), Weights(), k=1)
    assert [f["held_out"] for f in cv["folds"]] == ["a", "b", "c"]
    assert cv["gain_mean"] > 0
    assert all(f["learned"]["mrr"] == 1.0 for f in cv["folds"])


def test_a_question_type_with_too_few_questions_gets_the_default() -> None:
    few = [pool("a", "who", answer_recent=True) for _ in range(3)] + pools()
    learned = fit(few, Weights(), k=1)
    assert "who" not in learned
    saved = LearnedWeights(weights=learned)
    assert saved.for_question("who")[0] == DEFAULT
    assert saved.for_question("when")[0] == "when"


def test_learned_weights_round_trip_through_their_file(tmp_path: Path) -> None:
    path = tmp_path / "weights.json"
    LearnedWeights(weights=fit(pools(), Weights(), k=1), dataset="toy").save(path)
    loaded = load_learned(path)
    assert loaded.dataset == "toy"
    assert set(loaded.weights[DEFAULT]) == set(FEATURES)


@pytest.mark.parametrize(
    "document",
    [
        "not json",
        json.dumps({"format": 2, "weights": {}}),
        json.dumps({"format": 1, "weights": {"when": dict.fromkeys(FEATURES, 0.1)}}),
        json.dumps({"format": 1, "weights": {"default": {"relevance": 0.5}}}),
    ],
)
def test_a_bad_learned_weights_file_is_a_config_error_naming_it(
    tmp_path: Path, document: str
) -> None:
    path = tmp_path / "weights.json"
    path.write_text(document)
    with pytest.raises(ConfigError, match=r"ranking\.learned_weights: cannot use"):
        load_learned(path)

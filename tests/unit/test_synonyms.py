"""The WordNet table: synonyms by how far down two words' senses they meet, irregular forms,
antonyms."""

from __future__ import annotations

import pytest

from memory_orchestrator.pipeline.synonyms import (
    antonyms,
    base_form,
    frequent_verbs,
    is_verb,
    sense_rank,
    synonyms,
    verb_link,
)


@pytest.mark.parametrize(
    ("a", "b", "rank"),
    [
        ("starts", "begins", 0),  # inflected forms found by their lemma
        ("bought", "purchased", 0),  # an irregular form
        ("happens", "takes place", 0),  # a verb phrase
        ("leaves", "departs", 7),  # a deep sense: a synonym only when the model agrees
        ("staging", "production", None),
        ("gh-pages", "main", None),
        ("starts", "starts", None),
    ],
)
def test_two_words_meet_at_the_rank_of_their_shared_sense(a: str, b: str, rank: int | None) -> None:
    assert sense_rank(a, b) == rank
    assert sense_rank(b, a) == rank


def test_synonyms_are_the_common_senses_only() -> None:
    assert synonyms("Starts", "begins")
    assert not synonyms("leaves", "departs")
    assert synonyms("leaves", "departs", depth=7)


@pytest.mark.parametrize(
    ("form", "base"), [("seen", "see"), ("led", "lead"), ("bought", "buy"), ("better", "better")]
)
def test_irregular_verbs_and_nouns_go_to_their_base_not_comparatives(form: str, base: str) -> None:
    assert base_form(form) == base


def test_wordnets_antonyms_in_both_orders_and_any_inflection() -> None:
    assert antonyms("accepted", "refused")
    assert antonyms("sold", "bought")
    assert not antonyms("starts", "begins")


@pytest.mark.parametrize(
    ("a", "b", "rank"),
    [
        ("capped", "limited", 1),  # to cap is to limit: its hypernym
        ("wired", "sent", 1),  # "wire: send cables, wires or telegrams": its definition
        ("sent", "wired", 1),  # either way round
        ("priced", "costs", 1),  # "cost: be priced at"
        ("scheduled", "planned", 1),
        ("leaves", "departs", 2),  # closer than their shared synset (7)
        ("maintains", "wrote", None),
        ("fixed", "reported", None),
        ("lost", "failed", None),  # "lose: fail to keep": a light verb is not read
    ],
)
def test_verbs_are_tied_by_what_a_sense_says_in_fewer_words(
    a: str, b: str, rank: int | None
) -> None:
    assert verb_link(a, b) == rank


def test_wordnet_knows_its_verbs_and_the_most_frequent_first() -> None:
    assert all(is_verb(w) for w in ("relies on", "picks up", "deploys"))
    assert not any(is_verb(w) for w in ("npm", "offices"))
    assert frequent_verbs(3) == ("take", "make", "run")

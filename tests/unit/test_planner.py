"""The planner reads a query into terms, entities, intent, a time window and subqueries."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from types import FrameType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_orchestrator.models import (
    EventKind,
    Intent,
    MemoryType,
    QueryPlan,
    QuestionType,
    Strategy,
    Value,
)
from memory_orchestrator.pipeline.planner import extract_entities, plan_query

NOW = datetime(2023, 6, 15, 12, 0, tzinfo=UTC)  # a Thursday


def kinds(p: QueryPlan) -> list[EventKind]:
    return [e.kind for e in p.events]


def said(p: QueryPlan, kind: EventKind) -> list[dict[str, Value]]:
    """The values of `p`'s events of `kind`, in order."""
    return [e.values for e in p.events if e.kind is kind]


def plan(
    query: str,
    known: Sequence[str] = (),
    *,
    task: str | None = None,
    hop_budget: int = 1,
    max_hops: int = 3,
    max_subqueries: int = 4,
    expand: bool | None = None,
) -> QueryPlan:
    return plan_query(
        query,
        task=task,
        now=NOW,
        known_entities=known,
        hop_budget=hop_budget,
        max_hops=max_hops,
        max_subqueries=max_subqueries,
        expand=expand,
    )


# ---------------------------------------------------------------- normalisation and terms


def test_the_canonical_query_drops_question_and_stop_words_and_keeps_casing() -> None:
    p = plan("  What did   Caroline's friend say?")
    assert p.raw_query == "  What did   Caroline's friend say?"
    assert p.canonical_query == "Caroline friend say"


def test_terms_are_stemmed_and_keywords_unstemmed_both_deduplicated_in_order() -> None:
    p = plan("Did Caroline's friends meet Caroline at the adoption agencies?")
    assert p.keywords == ("caroline", "friends", "meet", "adoption", "agencies")
    assert p.terms == ("carolin", "friend", "meet", "adopt", "agenc")


def test_a_stop_word_only_query_keeps_the_normalised_text_and_low_confidence() -> None:
    p = plan("What is  the?")
    assert p.canonical_query == "What is the?"
    assert p.terms == ()
    assert p.subqueries == ("What is the?",)
    assert p.confidence < 0.4
    assert kinds(p) == [EventKind.NO_CONTENT_TERMS]


def test_a_blank_query_plans_nothing_without_raising() -> None:
    p = plan("   ")
    assert p.subqueries == ()
    assert p.confidence < 0.4


def test_the_same_request_gives_the_same_plan() -> None:
    query = "Why did Caroline and Melanie visit Project Atlas last week?"
    assert plan(query, ["Melanie"]) == plan(query, ["Melanie"])


def test_a_naive_now_is_read_as_utc() -> None:
    naive = plan_query("What happened yesterday?", now=datetime(2023, 6, 15, 12))
    assert naive.time_window == plan("What happened yesterday?").time_window


# ---------------------------------------------------------------- entities


def test_capitalised_words_and_runs_mid_sentence_are_entities() -> None:
    p = plan("What did Caroline tell Vendor X about Project Atlas?")
    assert p.entities == ("Caroline", "Vendor X", "Project Atlas")


def test_a_lower_case_connector_joins_a_capitalised_name() -> None:
    assert plan("Why did we leave Bank of America?").entities == ("Bank of America",)


def test_hyphenated_and_underscored_identifiers_are_entities() -> None:
    p = plan("is mem_123 about v2-api, ISSUE-42 or atlas-core?")
    assert p.entities == ("mem_123", "v2-api", "ISSUE-42", "atlas-core")


def test_common_hyphenated_words_are_not_entities() -> None:
    assert plan("my long-term follow-up plan for self-care").entities == ()


def test_known_names_match_case_insensitively_as_whole_words_and_keep_store_casing() -> None:
    p = plan("what did CAROLINE say about project atlas and atlas?", ["Project Atlas", "caroline"])
    assert p.entities == ("caroline", "Project Atlas")
    assert {"entity": "Project Atlas"} in said(p, EventKind.ENTITY_KNOWN)


def test_a_known_name_is_not_found_inside_another_word() -> None:
    assert plan("tell me about the carousel", ["Carol"]).entities == ()


def test_possessives_name_the_owner() -> None:
    assert plan("What is Caroline's identity?").entities == ("Caroline",)
    assert plan("what is caroline's identity?", ["Caroline"]).entities == ("Caroline",)


def test_entities_are_deduplicated_case_insensitively() -> None:
    assert plan("Did Atlas beat ATLAS or Atlas?").entities == ("Atlas",)


@pytest.mark.parametrize(
    ("query", "entities"),
    [
        ("What did Caroline research?", ("Caroline",)),
        ("Where is the LGBTQ center?", ("LGBTQ",)),
        ("May I ask what Melanie painted?", ("Melanie",)),
        ("Tell me about Melanie.", ("Melanie",)),
        ("I think The Beatles played.", ("Beatles",)),
        ("Caroline went where?", ("Caroline",)),
    ],
)
def test_sentence_initial_question_and_common_words_are_not_entities(
    query: str, entities: tuple[str, ...]
) -> None:
    assert plan(query).entities == entities


def test_month_and_weekday_names_in_dates_are_not_entities_but_a_person_named_june_is() -> None:
    assert plan("What did June do in May?").entities == ("June",)
    assert plan("What did we eat on Friday?").entities == ()


def test_capitals_in_a_title_case_query_are_ignored_but_known_names_are_not() -> None:
    query = "What Did Caroline Say About The Adoption Agency"
    assert plan(query).entities == ()
    assert plan(query, ["Caroline"]).entities == ("Caroline",)
    assert EventKind.CAPITALISATION_IGNORED in kinds(plan(query))


# ---------------------------------------------------------------- question type


@pytest.mark.parametrize(
    ("query", "qtype"),
    [
        ("Why did Caroline leave?", QuestionType.WHY),
        ("How come she left?", QuestionType.WHY),
        ("When did Caroline go to the support group?", QuestionType.WHEN),
        ("What time is the standup?", QuestionType.WHEN),
        ("Which year did Caroline move?", QuestionType.WHEN),
        ("How long ago was Caroline's birthday?", QuestionType.WHEN),
        ("Since when has Caroline painted?", QuestionType.WHEN),
        ("Who is Melanie?", QuestionType.WHO),
        ("Whose idea was the trip?", QuestionType.WHO),
        ("To whom did Caroline write?", QuestionType.WHO),
        ("Where does Caroline live?", QuestionType.WHERE),
        ("How do I deploy the service?", QuestionType.HOW),
        ("How long did the trip take?", QuestionType.HOW),
        ("What is Project Atlas?", QuestionType.WHAT),
        ("Which book did Caroline read?", QuestionType.WHAT),
        ("Did Caroline go hiking?", QuestionType.OTHER),
        ("Caroline's favourite book", QuestionType.OTHER),
    ],
)
def test_the_leading_question_word_sets_the_question_type(query: str, qtype: QuestionType) -> None:
    assert plan(query).question_type is qtype


# ---------------------------------------------------------------- intent


@pytest.mark.parametrize(
    "query",
    [
        "What happened with the deploy?",
        "What has Caroline been painting recently?",
        "Show the timeline of the migration",
        "history of the billing service",
        "When was the last time Caroline went camping?",
        "What did Caroline do last week?",
    ],
)
def test_event_words_or_a_time_window_make_the_intent_episodic(query: str) -> None:
    assert plan(query).intent is Intent.EPISODIC


@pytest.mark.parametrize(
    "query",
    [
        "Did Caroline and Melanie go camping?",
        "Why did the build fail?",
        "How is the outage related to the deploy?",
        "Compare the two vendors",
        "Which service depends on the cache?",
        "Do both teams use the cache?",
        "What did Caroline paint and where did she exhibit it?",
        "Who owns billing; what does it cost?",
    ],
)
def test_several_entities_relations_or_several_parts_make_the_intent_multi_hop(
    query: str,
) -> None:
    assert plan(query).intent is Intent.MULTI_HOP


@pytest.mark.parametrize(
    "query",
    [
        "What is Caroline's favourite book?",
        "Did Caroline or her sister adopt a dog?",
        "Where does Melanie work, exactly?",
    ],
)
def test_a_plain_question_has_direct_intent(query: str) -> None:
    assert plan(query).intent is Intent.DIRECT


def test_episodic_wins_over_multi_hop() -> None:
    assert plan("Why did Caroline and Melanie argue last week?").intent is Intent.EPISODIC


# ---------------------------------------------------------------- strategy and hop budget


def test_a_direct_question_is_answered_directly_with_no_hops() -> None:
    p = plan("What is Caroline's favourite book?", hop_budget=2)
    assert (p.strategy, p.hop_budget) == (Strategy.DIRECT, 0)


def test_a_multi_hop_question_expands_within_the_budget_and_cap() -> None:
    query = "Why did the build fail?"
    assert (plan(query).strategy, plan(query).hop_budget) == (Strategy.EXPANDED, 1)
    assert plan(query, hop_budget=2).hop_budget == 2
    assert plan(query, hop_budget=5, max_hops=3).hop_budget == 3


def test_three_linked_entities_get_one_more_hop_still_capped() -> None:
    query = "How are Caroline, Melanie and Jon connected?"
    assert plan(query).hop_budget == 2
    assert plan(query, hop_budget=3, max_hops=3).hop_budget == 3


def test_expand_true_expands_a_direct_question() -> None:
    p = plan("What is Caroline's favourite book?", expand=True, hop_budget=2)
    assert (p.strategy, p.hop_budget) == (Strategy.EXPANDED, 2)


def test_expand_false_keeps_a_multi_hop_question_direct() -> None:
    p = plan("Why did the build fail?", expand=False)
    assert (p.strategy, p.hop_budget) == (Strategy.DIRECT, 0)


def test_an_episodic_question_stays_episodic_whatever_expand_says() -> None:
    query = "What did Caroline do last week?"
    assert (plan(query).strategy, plan(query).hop_budget) == (Strategy.EPISODIC, 1)
    assert plan(query, expand=True, hop_budget=2).hop_budget == 2
    forbidden = plan(query, expand=False)
    assert (forbidden.strategy, forbidden.hop_budget) == (Strategy.EPISODIC, 0)
    assert EventKind.NO_GRAPH_HOPS in kinds(forbidden)


# ---------------------------------------------------------------- preferred memory types


@pytest.mark.parametrize(
    ("query", "types"),
    [
        ("When did Caroline go to the support group?", (MemoryType.EPISODIC,)),
        ("What happened yesterday?", (MemoryType.EPISODIC,)),
        ("How do I deploy atlas-core?", (MemoryType.PROCEDURAL,)),
        ("how to reset the router", (MemoryType.PROCEDURAL,)),
        ("What is Project Atlas?", (MemoryType.SEMANTIC,)),
        ("Who is Melanie?", (MemoryType.SEMANTIC,)),
        ("definition of churn", (MemoryType.SEMANTIC,)),
        ("Did Caroline go hiking?", ()),
        ("How does Caroline feel about it?", ()),
    ],
)
def test_the_question_style_sets_the_preferred_memory_types(
    query: str, types: tuple[MemoryType, ...]
) -> None:
    assert plan(query).preferred_types == types


# ---------------------------------------------------------------- time window


@pytest.mark.parametrize(
    ("phrase", "start", "end"),
    [
        ("yesterday", datetime(2023, 6, 14), datetime(2023, 6, 14, 23, 59, 59, 999_999)),
        ("last week", datetime(2023, 6, 5), datetime(2023, 6, 11, 23, 59, 59, 999_999)),
        ("in March 2023", datetime(2023, 3, 1), datetime(2023, 3, 31, 23, 59, 59, 999_999)),
        ("2 weeks ago", datetime(2023, 5, 29), datetime(2023, 6, 4, 23, 59, 59, 999_999)),
        ("recently", datetime(2023, 5, 16), datetime(2023, 6, 15, 23, 59, 59, 999_999)),
    ],
)
def test_a_time_phrase_becomes_the_plans_window(
    phrase: str, start: datetime, end: datetime
) -> None:
    p = plan(f"What did Caroline do {phrase}?")
    assert p.time_phrase == phrase
    assert p.time_window is not None
    assert (p.time_window.start, p.time_window.end) == (
        start.replace(tzinfo=UTC),
        end.replace(tzinfo=UTC),
    )
    assert said(p, EventKind.TIME_WINDOW) == [{"phrase": phrase}]


def test_since_and_before_give_open_windows() -> None:
    since = plan("What changed since March 2023?").time_window
    before = plan("What did we ship before 2023?").time_window
    assert since is not None
    assert before is not None
    assert (since.start, since.end) == (datetime(2023, 3, 1, tzinfo=UTC), NOW)
    assert before.start is None
    assert before.end == datetime(2022, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)


def test_may_as_a_verb_is_not_the_month() -> None:
    for query in ("May I ask what Caroline said?", "Caroline may go to the park"):
        p = plan(query)
        assert (p.time_window, p.time_phrase) == (None, None)
        assert p.intent is Intent.DIRECT


def test_may_as_the_month_gives_a_window() -> None:
    p = plan("What did Caroline do in May?")
    assert p.time_phrase == "in May"
    assert p.time_window is not None
    assert p.time_window.start == datetime(2023, 5, 1, tzinfo=UTC)


# ---------------------------------------------------------------- decomposition


def test_a_multi_part_question_is_split_into_canonical_parts() -> None:
    p = plan("What did Caroline paint and where did she exhibit it?")
    assert p.subqueries == ("Caroline paint exhibit", "Caroline paint", "exhibit")


def test_parts_without_content_are_dropped() -> None:
    p = plan("When did Caroline move to Boston? Why?")
    assert all(q.lower() != "why" for q in p.subqueries)
    assert p.subqueries[0] == "Caroline move Boston"


def test_several_entities_get_one_subquery_each_with_the_other_keywords() -> None:
    p = plan("Did Caroline and Melanie visit the adoption agency?")
    assert p.subqueries == (
        "Caroline Melanie visit adoption agency",
        "Caroline visit adoption agency",
        "Melanie visit adoption agency",
    )


def test_a_time_phrase_is_removed_in_one_subquery() -> None:
    p = plan("What did Caroline paint last week?")
    assert p.subqueries == ("Caroline paint last week", "Caroline paint")


def test_max_subqueries_is_respected_and_the_canonical_query_comes_first() -> None:
    query = "Why did Caroline, Melanie and Jon argue about Atlas last week?"
    assert len(plan(query).subqueries) == 4
    assert plan(query, max_subqueries=2).subqueries == (
        "Caroline Melanie Jon argue Atlas last week",
        "Caroline argue",  # entity subqueries leave the time phrase to the window
    )
    assert len(plan(query, max_subqueries=1).subqueries) == 1
    assert len(plan(query, max_subqueries=0).subqueries) == 1


def test_subqueries_have_no_empty_strings_or_duplicates() -> None:
    p = plan("Caroline? caroline; CAROLINE, and what about Caroline?")
    lowered = [q.lower() for q in p.subqueries]
    assert all(q.strip() for q in p.subqueries)
    assert len(lowered) == len(set(lowered))


def test_the_task_is_a_last_subquery_only_when_there_is_room() -> None:
    task = "Prepare the quarterly report for Vendor X"
    p = plan("What is Caroline's favourite book?", task=task)
    assert p.canonical_query == "Caroline favourite book"
    assert p.terms == ("carolin", "favourit", "book")
    assert p.subqueries == ("Caroline favourite book", "Prepare quarterly report Vendor X")
    assert plan("What is Caroline's favourite book?", task=task, max_subqueries=1).subqueries == (
        "Caroline favourite book",
    )


# ---------------------------------------------------------------- confidence


def test_confidence_is_higher_for_a_clear_question_than_for_a_vague_one() -> None:
    clear = plan("When did Caroline go to the LGBTQ support group?", ["Caroline"])
    vague = plan("stuff")
    assert clear.confidence > vague.confidence >= 0.4
    assert 0.0 <= clear.confidence <= 1.0


# ---------------------------------------------------------------- robustness and speed


def test_unicode_text_is_normalised_and_names_with_accents_are_found() -> None:
    p = plan("Qu'est-ce que Zoë a dit à François sur Café Müller?")
    assert {"Zoë", "François", "Café Müller"} <= set(p.entities)
    full_width = "When did \uff23\uff41\uff52\uff4f\uff4c\uff49\uff4e\uff45 go?"
    assert plan(full_width).entities == ("Caroline",)
    assert plan("卡罗琳什么时候去的\uff1f").subqueries


def test_a_huge_query_is_planned_in_time_linear_in_its_length() -> None:
    query = ("Caroline met Melanie at Project Atlas last week, and what did Jon say? " * 80)[:5000]
    known = [f"entity {i}" for i in range(500)]
    p = plan(query, known)
    assert 1 <= len(p.subqueries) <= 4
    # counted calls, not a time: a tenth of the text, about a tenth of the work
    short, long = _work_to_plan(query[:500] + "?", known), _work_to_plan(query + "?", known)
    assert long <= 10 * short * 1.25, (short, long)


def _work_to_plan(query: str, known: Sequence[str]) -> int:
    """The bytecode instructions one planning of `query` runs: a count of the work, not a
    time (each loop's every turn counts; work inside C functions such as regex, not)."""
    ran = 0

    def trace(frame: FrameType, event: str, arg: object) -> Any:  # sys.TraceFunction
        nonlocal ran
        frame.f_trace_opcodes = True
        if event == "opcode":
            ran += 1
        return trace

    before = sys.gettrace()  # (a coverage tool's, say) put back after
    sys.settrace(trace)
    try:
        plan(query, known)
    finally:
        sys.settrace(before)
    return ran


def test_planning_grows_linearly_with_the_question() -> None:
    """Catches a rule gone quadratic (what a timed bound used to guard, which tests must not
    assert: `bench/stage_times.py` reports planning's milliseconds per call). Each length a
    question of its own, so no cache answers for the planner."""
    names = ("Caroline", "Melanie", "Jon", "Gina")
    words = "When did Caroline go to the LGBTQ support group with Melanie and why".split()

    def question(n: int) -> str:
        return " ".join(w if i % 7 else f"{w}{n}" for i, w in enumerate(words * n)) + "?"

    plan("warm up for Caroline", names)  # first-use work (compiled patterns) counted nowhere
    short, long = _work_to_plan(question(8), names), _work_to_plan(question(64), names)
    assert long <= 8 * short * 1.25, (short, long)  # 8x the words: about 8x the work


@given(
    query=st.text(max_size=500),
    known=st.lists(st.text(max_size=20), max_size=5),
    task=st.none() | st.text(max_size=100),
    limit=st.integers(min_value=1, max_value=6),
)
def test_any_text_plans_without_raising(
    query: str, known: list[str], task: str | None, limit: int
) -> None:
    p = plan(query, known, task=task, max_subqueries=limit)
    assert all(isinstance(q, str) and q.strip() for q in p.subqueries)
    assert len(p.subqueries) <= limit
    assert 0.0 <= p.confidence <= 1.0
    assert 0 <= p.hop_budget <= 3
    if p.time_window and p.time_window.start and p.time_window.end:
        assert p.time_window.start <= p.time_window.end


# ---------------------------------------------------------------- entities in memory text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "We decided to use Kafka instead of RabbitMQ for the Atlas event bus",
            ("Kafka", "RabbitMQ", "Atlas"),
        ),
        (
            "Vendor X firmware 2.2 drops the LTE link; ticket VX-1142 is a P1.",
            ("Vendor X", "LTE", "VX-1142", "P1"),
        ),
        ("Project Atlas slipped again.", ("Project Atlas",)),
        ("Melanie: Wow, love that painting! Yeah totally.", ("Melanie",)),
        (
            "Caroline: Thanks, Mel! I felt liberated. Painting helps me explore.",
            ("Caroline", "Mel"),
        ),
        ("Honestly the Redis cache is flaky.", ("Redis",)),
        ("Yeah John, that's true", ("John",)),
        ("the deploy of atlas-core failed twice", ("atlas-core",)),
    ],
)
def test_names_are_extracted_from_memory_text_without_the_capitals_of_chat(
    text: str, expected: tuple[str, ...]
) -> None:
    assert extract_entities(text) == expected


def test_a_name_that_opens_a_sentence_counts_when_the_store_knows_it_or_the_text_repeats_it() -> (
    None
):
    assert extract_entities("Kafka is our event bus now.") == ()
    assert extract_entities("Kafka is our event bus now.", known=["Kafka"]) == ("Kafka",)
    assert extract_entities("Dana moved it, so we asked Dana why.") == ("Dana",)


# ---------------------------------------------------------------- names as people write them

KNOWN = ["Muhammad", "Caroline", "Melanie", "Joanna", "Jon", "Tim"]


@pytest.mark.parametrize(
    ("question", "name"),
    [
        ("What did Muhhamed say about the trip?", "Muhammad"),
        ("When did Mohammed go hiking?", "Muhammad"),
        ("What does Karoline paint?", "Caroline"),
        ("Did Melany adopt a dog?", "Melanie"),
        ("What did Johanna write?", "Joanna"),
    ],
)
def test_a_misspelled_or_transliterated_name_is_read_as_the_stores_name(
    question: str, name: str
) -> None:
    plan = plan_query(question, now=NOW, known_entities=KNOWN)
    assert name in plan.entities
    assert name in plan.canonical_query
    assert name in [v["name"] for v in said(plan, EventKind.NAME_READ_AS)]


def test_a_name_the_store_knows_or_nothing_close_is_left_alone() -> None:
    for question in ("What did Caroline paint?", "Did Tom call?", "Where is Gina?"):
        plan = plan_query(question, now=NOW, known_entities=KNOWN)
        assert EventKind.NAME_READ_AS not in kinds(plan), question
    off = plan_query("What did Muhhamed say?", now=NOW, known_entities=KNOWN, fuzzy_names=False)
    assert "Muhammad" not in off.entities

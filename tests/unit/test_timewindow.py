"""Time phrases become inclusive UTC day windows relative to a fixed `now`."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_orchestrator.pipeline import timewindow
from memory_orchestrator.pipeline.timewindow import find_time_window

NOW = datetime(2023, 6, 15, 12, 0, tzinfo=UTC)  # a Thursday
Day = tuple[int, int, int]


def start(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


def end(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, 23, 59, 59, 999_999, tzinfo=UTC)


def window(text: str, now: datetime = NOW) -> tuple[datetime | None, datetime | None]:
    found = find_time_window(text, now)
    assert found is not None, text
    return found.window.start, found.window.end


@pytest.mark.parametrize(
    ("text", "first", "last"),
    [
        ("what happened today", (2023, 6, 15), (2023, 6, 15)),
        ("yesterday", (2023, 6, 14), (2023, 6, 14)),
        ("the day before yesterday", (2023, 6, 13), (2023, 6, 13)),
        ("last night", (2023, 6, 14), (2023, 6, 14)),
        ("this week", (2023, 6, 12), (2023, 6, 15)),
        ("this month", (2023, 6, 1), (2023, 6, 15)),
        ("this year", (2023, 1, 1), (2023, 6, 15)),
        ("earlier this year", (2023, 1, 1), (2023, 6, 15)),
        ("last week", (2023, 6, 5), (2023, 6, 11)),
        ("last month", (2023, 5, 1), (2023, 5, 31)),
        ("last year", (2022, 1, 1), (2022, 12, 31)),
        ("past 3 days", (2023, 6, 12), (2023, 6, 15)),
        ("in the last 2 weeks", (2023, 6, 1), (2023, 6, 15)),
        ("past six months", (2022, 12, 15), (2023, 6, 15)),
        ("last 2 years", (2021, 6, 15), (2023, 6, 15)),
        ("the past week", (2023, 6, 8), (2023, 6, 15)),
        ("3 days ago", (2023, 6, 12), (2023, 6, 12)),
        ("two weeks ago", (2023, 5, 29), (2023, 6, 4)),
        ("a month ago", (2023, 5, 1), (2023, 5, 31)),
        ("4 years ago", (2019, 1, 1), (2019, 12, 31)),
        ("a couple of days ago", (2023, 6, 13), (2023, 6, 13)),
        ("recently", (2023, 5, 16), (2023, 6, 15)),
        ("any recent issues", (2023, 5, 16), (2023, 6, 15)),
        ("lately", (2023, 5, 16), (2023, 6, 15)),
        ("in March 2023", (2023, 3, 1), (2023, 3, 31)),
        ("March 2023", (2023, 3, 1), (2023, 3, 31)),
        ("in 2023", (2023, 1, 1), (2023, 12, 31)),
        ("on 8 May 2023", (2023, 5, 8), (2023, 5, 8)),
        ("the 8th of May, 2023", (2023, 5, 8), (2023, 5, 8)),
        ("May 8, 2023", (2023, 5, 8), (2023, 5, 8)),
        ("Dec. 5, 2022", (2022, 12, 5), (2022, 12, 5)),
        ("2023-05-08", (2023, 5, 8), (2023, 5, 8)),
        ("in March", (2023, 3, 1), (2023, 3, 31)),
        ("in June", (2023, 6, 1), (2023, 6, 30)),
        ("in July", (2022, 7, 1), (2022, 7, 31)),
        ("last June", (2022, 6, 1), (2022, 6, 30)),
        ("on May 8", (2023, 5, 8), (2023, 5, 8)),
        ("on June 20", (2022, 6, 20), (2022, 6, 20)),
        ("last weekend", (2023, 6, 10), (2023, 6, 11)),
        ("last Friday", (2023, 6, 9), (2023, 6, 9)),
        ("on Monday", (2023, 6, 12), (2023, 6, 12)),
        ("on Thursday", (2023, 6, 15), (2023, 6, 15)),
        ("last Thursday", (2023, 6, 8), (2023, 6, 8)),
    ],
)
def test_a_time_phrase_gives_an_inclusive_day_window(text: str, first: Day, last: Day) -> None:
    assert window(text) == (start(*first), end(*last))


def test_the_matched_phrase_and_its_position_are_reported() -> None:
    found = find_time_window("What did Caroline do last week?", NOW)
    assert found is not None
    assert found.phrase == "last week"
    assert "What did Caroline do last week?"[found.start : found.end] == "last week"


def test_since_opens_the_end_at_now() -> None:
    assert window("since March 2023") == (start(2023, 3, 1), NOW)
    assert window("since yesterday") == (start(2023, 6, 14), NOW)


def test_since_a_future_date_has_no_end_rather_than_a_reversed_window() -> None:
    assert window("since 2030") == (start(2030, 1, 1), None)


def test_before_has_only_an_end() -> None:
    assert window("before 2023") == (None, end(2022, 12, 31))


def test_until_and_after_bound_one_side() -> None:
    assert window("until May 2023") == (None, end(2023, 5, 31))
    assert window("after March 2023") == (start(2023, 4, 1), NOW)


@pytest.mark.parametrize(
    "text",
    [
        "May I ask what Caroline said?",
        "she may go to the park",
        "it may be in the notes",
        "what did we decide in may",
        "since when has Caroline painted?",
        "the soldiers march on",
        "how long did the trip take?",
    ],
)
def test_words_that_only_look_like_dates_give_no_window(text: str) -> None:
    assert find_time_window(text, NOW) is None


def test_may_followed_by_a_year_is_the_month_even_in_lower_case() -> None:
    assert window("may 2023") == (start(2023, 5, 1), end(2023, 5, 31))
    assert window("in May") == (start(2023, 5, 1), end(2023, 5, 31))


def test_the_most_specific_phrase_wins() -> None:
    found = find_time_window("recently, on 2023-05-08, and last week", NOW)
    assert found is not None
    assert found.phrase == "on 2023-05-08"


def test_an_impossible_date_is_skipped_for_the_next_phrase() -> None:
    found = find_time_window("2023-02-30 or yesterday", NOW)
    assert found is not None
    assert found.phrase == "yesterday"
    assert find_time_window("past 9999 years", NOW) is None


def test_a_leap_day_without_a_year_is_the_latest_one() -> None:
    assert window("on February 29") == (start(2020, 2, 29), end(2020, 2, 29))


def test_a_naive_now_is_utc_and_an_aware_now_is_converted() -> None:
    assert window("today", datetime(2023, 6, 15, 12)) == (start(2023, 6, 15), end(2023, 6, 15))
    late_evening_west = datetime(2023, 6, 14, 22, tzinfo=timezone(timedelta(hours=-5)))
    assert window("today", late_evening_west) == (start(2023, 6, 15), end(2023, 6, 15))


def test_windows_are_utc_aware() -> None:
    first, last = window("last month")
    assert first is not None
    assert last is not None
    assert first.tzinfo is UTC
    assert last.tzinfo is UTC


_VOCAB = (
    "since before after until in on of last this past the ago a few couple 2023 2030 9999 "
    "99999 May may March Dec. 8th 31 29 Feb 2023-02-29 weekend Friday yesterday today "
    "recently days weeks months years and , ?"
).split()


@given(
    words=st.lists(st.sampled_from(_VOCAB), max_size=12),
    now=st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)),
)
def test_any_mix_of_time_words_at_any_date_never_raises(words: list[str], now: datetime) -> None:
    found = find_time_window(" ".join(words), now)
    if found is not None:
        first, last = found.window.start, found.window.end
        assert first is not None or last is not None
        assert first is None or last is None or first <= last


# every rule's words, some in other forms, and words that only start (or end) like one
_RULE_VOCAB = (
    "since before after until till by from between and to through - \u2013 in on of during the a "
    "last this past previous current earlier early mid late lately latest recent recently "
    "ago few couple several two 3 12 2023 1999 2026-03-04 11/10/2026 4.5.2024 8th 21st 1-15 "
    "January jan Feb. february March mar April may June jun July aug Sept sep October nov dec "
    "Monday Tuesday wed Thursday friday Saturday sun sunday weekend week weeks month months "
    "year years day days hour hours fortnight night tonight today yesterday morning evening "
    "afternoon Q1 Q4 first second quarter spring summer autumn fall winter over "
    "maybe money sunny Saturn married someday birthday midweek Dana export the vendor , ? 's"
).split()


@settings(max_examples=400, deadline=None)
@given(
    words=st.lists(st.sampled_from(_RULE_VOCAB), max_size=10),
    joiner=st.sampled_from([" ", ", ", "-", "/", " of "]),
)
def test_texts_without_a_time_word_skip_the_rules_and_lose_no_phrase(
    words: list[str], joiner: str
) -> None:
    """The quick look for a time word (`_ANCHOR`) never hides a phrase the rules would
    read: the same window with and without it."""
    text = joiner.join(words)
    quick, anchor = find_time_window(text, LATE), timewindow._ANCHOR
    timewindow._ANCHOR = re.compile("")  # every text searched rule by rule
    try:
        assert find_time_window(text, LATE) == quick
    finally:
        timewindow._ANCHOR = anchor


@pytest.mark.parametrize(
    "phrase",
    [
        "2026-03-04",
        "in early May",
        "Q3 2026",
        "the first quarter",
        "this quarter",
        "8 March 2025",
        "March 8, 2025",
        "March 2025",
        "Nov 10",
        "10 Nov",
        "11/10/2026",
        "the day before yesterday",
        "yesterday",
        "today",
        "tonight",
        "last night",
        "this morning",
        "this afternoon",
        "this evening",
        "last Friday",
        "on Monday",
        "last weekend",
        "over the weekend",
        "3 days ago",
        "a fortnight ago",
        "two hours ago",
        "the past 3 weeks",
        "past month",
        "last week",
        "this month",
        "previous year",
        "last summer",
        "in the fall",
        "winter 2025",
        "in 2024",
        "in the year 2024",
        "in June",
        "last Sept",
        "recently",
        "of late",
        "lately",
        "the latest",
        "between March and May",
        "from Oct 1 to Oct 15",
        "Oct 1-15",
        "the week of Nov 10",
    ],
)
def test_every_rule_s_phrase_holds_a_time_word(phrase: str) -> None:
    """Each rule's shortest phrases are still read with the quick look in front."""
    assert timewindow._ANCHOR.search(phrase) is not None
    assert find_time_window(phrase, LATE) is not None


def test_a_text_without_a_time_word_is_not_searched_rule_by_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def searched(*_: object) -> None:
        raise AssertionError("searched rule by rule")

    monkeypatch.setattr(timewindow, "_range", searched)
    assert find_time_window("What did Caroline paint for the vendor?", LATE) is None
    with pytest.raises(AssertionError, match="rule by rule"):
        find_time_window("What did Caroline paint on Friday?", LATE)


LATE = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)  # a Wednesday


@pytest.mark.parametrize(
    ("text", "first", "last"),
    [
        # ranges
        ("blockers between Oct 1 and Oct 15", (2026, 10, 1), (2026, 10, 15)),
        ("between October 1 and 15", (2026, 10, 1), (2026, 10, 15)),
        ("from Oct 1 to Oct 15", (2026, 10, 1), (2026, 10, 15)),
        ("Oct 1-15", (2026, 10, 1), (2026, 10, 15)),
        ("Oct 1 - Nov 3", (2026, 10, 1), (2026, 11, 3)),
        ("from March to May", (2026, 3, 1), (2026, 5, 31)),
        ("between 2021 and 2023", (2021, 1, 1), (2023, 12, 31)),
        ("from Dec 20 to Jan 5", (2025, 12, 20), (2026, 1, 5)),
        ("between 2026-10-01 and 2026-10-15", (2026, 10, 1), (2026, 10, 15)),
        # weeks
        ("the week of Nov 10", (2026, 11, 9), (2026, 11, 15)),
        ("during the week of 2026-11-10", (2026, 11, 9), (2026, 11, 15)),
        # quarters
        ("Q3 2026", (2026, 7, 1), (2026, 9, 30)),
        ("in Q1", (2026, 1, 1), (2026, 3, 31)),
        ("the third quarter of 2025", (2025, 7, 1), (2025, 9, 30)),
        ("this quarter", (2026, 10, 1), (2026, 11, 25)),
        ("last quarter", (2026, 7, 1), (2026, 9, 30)),
        # seasons
        ("last summer", (2026, 6, 1), (2026, 8, 31)),
        ("last winter", (2025, 12, 1), (2026, 2, 28)),
        ("this winter", (2026, 12, 1), (2027, 2, 28)),
        ("in the spring", (2026, 3, 1), (2026, 5, 31)),
        ("summer 2025", (2025, 6, 1), (2025, 8, 31)),
        # weekends, parts of months, numeric dates, fortnights
        ("over the weekend", (2026, 11, 21), (2026, 11, 22)),
        ("mid-November", (2026, 11, 11), (2026, 11, 20)),
        ("early December 2025", (2025, 12, 1), (2025, 12, 10)),
        ("late February", (2026, 2, 21), (2026, 2, 28)),
        ("on 11/10/2026", (2026, 11, 10), (2026, 11, 10)),
        ("on 25/10/2026", (2026, 10, 25), (2026, 10, 25)),  # only one order reads it
        ("a fortnight ago", (2026, 11, 9), (2026, 11, 15)),
        ("the past fortnight", (2026, 11, 11), (2026, 11, 25)),
    ],
)
def test_ranges_weeks_quarters_seasons_and_numeric_dates(text: str, first: Day, last: Day) -> None:
    assert window(text, LATE) == (start(*first), end(*last))


def test_numeric_dates_follow_the_day_month_order_setting() -> None:
    found = find_time_window("on 11/10/2026", LATE, day_first=True)
    assert found is not None
    assert (found.window.start, found.window.end) == (start(2026, 10, 11), end(2026, 10, 11))


def test_the_weekend_on_a_saturday_is_this_one() -> None:
    saturday = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)
    assert window("over the weekend", saturday) == (start(2026, 11, 28), end(2026, 11, 28))


@pytest.mark.parametrize(
    "text",
    ["fall back to the old server", "spring cleaning of the repo", "from the vendor to Dana"],
)
def test_season_and_range_words_alone_are_not_windows(text: str) -> None:
    assert find_time_window(text, LATE) is None

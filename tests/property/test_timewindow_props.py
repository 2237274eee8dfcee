"""Time-window inference over arbitrary text and reference times: no exception, and every
window found is ordered, in UTC, and names the phrase it came from."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from memory_orchestrator.pipeline.timewindow import find_time_window
from tests.property.support import MOMENTS, PROPS, TEXT

PREP = st.sampled_from(["", "in ", "on ", "since ", "before ", "after ", "until ", "by ", "from "])
NUMBER = st.one_of(
    st.integers(0, 40), st.integers(0, 10**30), st.sampled_from(["a", "few", "couple", "twelve"])
).map(str)
UNIT = st.sampled_from(["hour", "day", "days", "week", "weeks", "month", "months", "year", "years"])
MONTH = st.sampled_from(["January", "feb", "Sept.", "May", "may", "June", "dec"])
YEAR = st.one_of(st.integers(0, 99999), st.sampled_from([1, 9999, 10000])).map(str)
DAY = st.one_of(st.integers(0, 99), st.just(31), st.just(29)).map(str)
PHRASE = st.one_of(
    st.tuples(PREP, NUMBER, UNIT).map(lambda t: f"{t[0]}{t[1]} {t[2]} ago"),
    st.tuples(st.sampled_from(["past", "last", "the previous"]), NUMBER, UNIT).map(" ".join),
    st.tuples(PREP, MONTH, DAY, YEAR).map(lambda t: f"{t[0]}{t[1]} {t[2]}, {t[3]}"),
    st.tuples(PREP, DAY, MONTH, YEAR).map(lambda t: f"{t[0]}{t[1]} of {t[2]} {t[3]}"),
    st.tuples(PREP, YEAR, DAY, DAY).map(lambda t: f"{t[0]}{t[1]}-{t[2]}-{t[3]}"),
    st.tuples(PREP, MONTH, YEAR).map(lambda t: f"{t[0]}{t[1]} {t[2]}"),
    st.tuples(PREP, MONTH).map("".join),
    st.sampled_from(
        [
            "yesterday",
            "today",
            "last night",
            "last weekend",
            "this past Friday",
            "this year",
            "last month",
            "earlier this week",
            "recently",
            "in 2023",
            "the day before yesterday",
        ]
    ),
)


def _check(text: str, now: datetime) -> None:
    found = find_time_window(text, now)
    if found is None:
        return
    window = found.window
    assert window.start is not None or window.end is not None
    for moment in (window.start, window.end):
        assert moment is None or moment.tzinfo == UTC
    if window.start is not None and window.end is not None:
        assert window.start <= window.end
    assert 0 <= found.start <= found.end <= len(text)
    assert text[found.start : found.end] == found.phrase


@PROPS
@given(text=TEXT, now=MOMENTS)
def test_arbitrary_text_never_raises(text: str, now: datetime) -> None:
    _check(text, now)


@PROPS
@given(before=TEXT, phrase=PHRASE, after=TEXT, now=MOMENTS)
def test_time_phrases_with_odd_numbers_and_dates_give_ordered_windows(
    before: str, phrase: str, after: str, now: datetime
) -> None:
    _check(f"{before[:40]} {phrase} {after[:40]}", now)


@PROPS
@given(phrase=PHRASE, now=st.datetimes(datetime(1990, 1, 1), datetime(2040, 1, 1)))
def test_a_window_that_ends_at_now_never_ends_later(phrase: str, now: datetime) -> None:
    found = find_time_window(phrase, now)
    if found is not None and found.window.start is not None and phrase.startswith("since"):
        assert found.window.end is None or found.window.end <= now.replace(tzinfo=UTC)

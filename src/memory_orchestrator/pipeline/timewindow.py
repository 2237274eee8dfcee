"""Time-window inference for the planner.

`find_time_window` turns the first (most specific) time phrase of a query, such as
"last week", "3 days ago", "in March 2023" or "since May 8, 2023", into an inclusive
`TimeRange` in UTC at day granularity (start 00:00:00, end 23:59:59.999999), relative to a
reference time `now`. Open windows: "since X" ends at `now`, "before X" has no start.

"May" is read as the month only when the text makes it one: capitalised and next to a day
number or preceded by a preposition ("in May"), or followed by a year ("may 2023").
"May I ...", "she may go" and "in may" stay words. Patterns are compiled once; a phrase
that names an impossible date ("2023-02-30", "past 9999 years") is skipped, never raised.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from memory_orchestrator.models import TimeRange, to_utc

__all__ = ["TimeMatch", "find_time_window"]


@dataclass(frozen=True, slots=True)
class TimeMatch:
    """A time phrase found in the text: its window, its words and where it sits."""

    window: TimeRange
    phrase: str
    start: int
    end: int


_MONTHS: dict[str, int] = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBER_WORDS: dict[str, int] = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "couple": 2,
    "few": 3,
    "several": 3,
}

_FULL_MONTHS = "|".join(n for n in _MONTHS if len(n) > 4 or n in ("may", "june", "july"))
_SHORT_MONTHS = "sept|jan|feb|mar|apr|jun|jul|aug|sep|oct|nov|dec"
_MONTH = rf"(?P<month>(?:{_FULL_MONTHS})\b|(?:{_SHORT_MONTHS})\b\.?)"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?\b"
_YEAR = r"(?P<year>\d{4})\b(?![-/]\d)"
_PREPS = "in|on|during|since|before|after|until|till|by|from|throughout|of"
_OPT_PREP = rf"(?:\b(?P<prep>{_PREPS})\s+)?"
_NUM = (
    r"(?P<n>\d{1,4}|a\s+couple(?:\s+of)?|a\s+few|couple(?:\s+of)?|few|several"
    r"|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|an?)"
)
_UNIT = r"(?P<unit>hour|day|week|month|year)s?\b"
_FLAGS = re.IGNORECASE


def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, _FLAGS)


_ISO = _compile(_OPT_PREP + r"\b(?P<year>\d{4})[-/](?P<mon>\d{1,2})[-/](?P<day>\d{1,2})\b")
_DMY = _compile(_OPT_PREP + rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}")
_MDY = _compile(_OPT_PREP + rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}")
_MY = _compile(_OPT_PREP + rf"\b{_MONTH},?\s+{_YEAR}")
_MD = _compile(_OPT_PREP + rf"\b{_MONTH}\s+{_DAY}(?!,?\s*\d)")
_DM = _compile(_OPT_PREP + rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}")
_REL_DAY = _compile(
    _OPT_PREP + r"\b(?P<rel>the\s+day\s+before\s+yesterday|yesterday|today|tonight"
    r"|last\s+night|this\s+(?:morning|afternoon|evening))\b"
)
_WEEKDAY = _compile(
    _OPT_PREP + rf"\b(?:(?P<last>last|this\s+past|past)\s+)?(?P<wd>{'|'.join(_WEEKDAYS)})\b"
)
_WEEKEND = _compile(_OPT_PREP + r"\b(?:last|this\s+past|past)\s+weekend\b")
_AGO = _compile(_OPT_PREP + rf"\b{_NUM}\s+{_UNIT}\s+ago\b")
_PAST_N = _compile(_OPT_PREP + rf"\b(?:the\s+)?(?:past|last|previous)\s+{_NUM}\s+{_UNIT}")
_PAST_ONE = _compile(_OPT_PREP + rf"\b(?:the\s+)?past\s+{_UNIT}")
_CALENDAR = _compile(
    _OPT_PREP + r"\b(?:earlier\s+)?(?P<kw>last|this|previous|current)\s+(?P<unit>week|month|year)\b"
)
_YEAR_ONLY = _compile(
    rf"\b(?P<prep>{_PREPS})\s+(?:the\s+year\s+)?(?P<year>(?:19|20)\d{{2}})\b(?![-/]\d)"
)
_MONTH_ONLY = _compile(rf"\b(?P<prep>{_PREPS}|last|this)\s+{_MONTH}")
_RECENT = _compile(r"\b(?:recently|recent|lately|of\s+late|latest)\b")

_RECENT_DAYS = 30
_MAX_YEAR_LOOKBACK = 8


# ---------------------------------------------------------------- calendar arithmetic

Period = tuple[date, date]  # first and last day, inclusive


def _day_start(day: date) -> datetime:
    return datetime.combine(day, time.min, UTC)


def _day_end(day: date) -> datetime:
    return datetime.combine(day, time.max, UTC)


def _month_period(year: int, month: int) -> Period:
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def _year_period(year: int) -> Period:
    return date(year, 1, 1), date(year, 12, 31)


def _week_period(day: date) -> Period:
    monday = day - timedelta(days=day.weekday())
    return monday, monday + timedelta(days=6)


def _shift_months(day: date, months: int) -> date:
    """`day` moved by `months`, the day of month clamped (Mar 31 - 1 month = Feb 28)."""
    year, month0 = divmod(day.year * 12 + day.month - 1 + months, 12)
    return date(year, month0 + 1, min(day.day, calendar.monthrange(year, month0 + 1)[1]))


def _shift(day: date, now: datetime, unit: str, n: int) -> date:
    """`day` moved back by `n` units."""
    if unit == "hour":
        return (now - timedelta(hours=n)).date()
    if unit in ("day", "week"):
        return day - timedelta(days=n * (7 if unit == "week" else 1))
    return _shift_months(day, -n * (12 if unit == "year" else 1))


def _latest(month: int, day: int, today: date) -> date | None:
    """The most recent `month`/`day` not after `today` (looks back a few years for Feb 29)."""
    for year in range(today.year, today.year - _MAX_YEAR_LOOKBACK, -1):
        try:
            candidate = date(year, month, day)
        except ValueError:
            continue
        if candidate <= today:
            return candidate
    return None


def _count(text: str) -> int:
    word = next((w for w in text.lower().split() if w not in ("a", "of")), "a")
    return int(word) if word.isdigit() else _NUMBER_WORDS[word]


def _month_number(match: re.Match[str], *, strong: bool) -> int | None:
    """The month named in `match`, or None when the word is better read as a verb/name.

    `strong`: the context makes it a date (a year follows). Otherwise a capitalised month
    or a preceding preposition is needed, and "may" must be capitalised.
    """
    word = match.group("month")
    number = _MONTHS[word.rstrip(".").lower()]
    if strong:
        return number
    capitalised = word[0].isupper()
    if number == 5:
        return number if capitalised else None
    return number if capitalised or match.group("prep") else None


# ---------------------------------------------------------------- handlers

Handler = Callable[[re.Match[str], datetime], Period | None]


def _iso(m: re.Match[str], now: datetime) -> Period:
    day = date(int(m.group("year")), int(m.group("mon")), int(m.group("day")))
    return day, day


def _full_date(m: re.Match[str], now: datetime) -> Period | None:
    month = _month_number(m, strong=True)
    if month is None:
        return None
    day = date(int(m.group("year")), month, int(m.group("day")))
    return day, day


def _month_year(m: re.Match[str], now: datetime) -> Period | None:
    month = _month_number(m, strong=True)
    return None if month is None else _month_period(int(m.group("year")), month)


def _month_day(m: re.Match[str], now: datetime) -> Period | None:
    month = _month_number(m, strong=False)
    if month is None:
        return None
    day = _latest(month, int(m.group("day")), now.date())
    return None if day is None else (day, day)


def _relative_day(m: re.Match[str], now: datetime) -> Period:
    rel = m.group("rel").lower()
    back = 2 if rel.startswith("the") else int(rel in ("yesterday", "last night"))
    day = now.date() - timedelta(days=back)
    return day, day


def _weekday(m: re.Match[str], now: datetime) -> Period:
    today = now.date()
    back = (today.weekday() - _WEEKDAYS.index(m.group("wd").lower())) % 7
    if back == 0 and m.group("last"):
        back = 7
    day = today - timedelta(days=back)
    return day, day


def _weekend(m: re.Match[str], now: datetime) -> Period:
    monday = _week_period(now.date())[0]
    return monday - timedelta(days=2), monday - timedelta(days=1)


def _ago(m: re.Match[str], now: datetime) -> Period:
    unit = m.group("unit").lower()
    point = _shift(now.date(), now, unit, _count(m.group("n")))
    if unit in ("hour", "day"):
        return point, point
    if unit == "week":
        return _week_period(point)
    return _month_period(point.year, point.month) if unit == "month" else _year_period(point.year)


def _past(m: re.Match[str], now: datetime) -> Period:
    n = _count(m.group("n")) if "n" in m.re.groupindex else 1
    return _shift(now.date(), now, m.group("unit").lower(), n), now.date()


def _calendar(m: re.Match[str], now: datetime) -> Period:
    today = now.date()
    unit = m.group("unit").lower()
    last = m.group("kw").lower() in ("last", "previous")
    if unit == "week":
        first = _week_period(today)[0] - timedelta(days=7 if last else 0)
        return (first, first + timedelta(days=6)) if last else (first, today)
    if unit == "month":
        start = _shift_months(today.replace(day=1), -1 if last else 0)
        return _month_period(start.year, start.month) if last else (start, today)
    return _year_period(today.year - 1) if last else (date(today.year, 1, 1), today)


def _year_only(m: re.Match[str], now: datetime) -> Period:
    return _year_period(int(m.group("year")))


def _month_only(m: re.Match[str], now: datetime) -> Period | None:
    month = _month_number(m, strong=False)
    if month is None:
        return None
    today = now.date()
    kw = m.group("prep").lower()
    if kw == "this":
        return _month_period(today.year, month)
    # "last March": strictly before the current month; "in March": may be the current one.
    this_year = month < today.month or (month == today.month and kw != "last")
    return _month_period(today.year if this_year else today.year - 1, month)


def _recent(m: re.Match[str], now: datetime) -> Period:
    return now.date() - timedelta(days=_RECENT_DAYS), now.date()


# Most specific first: the first pattern with a valid match wins.
_RULES: tuple[tuple[re.Pattern[str], Handler], ...] = (
    (_ISO, _iso),
    (_DMY, _full_date),
    (_MDY, _full_date),
    (_MY, _month_year),
    (_MD, _month_day),
    (_DM, _month_day),
    (_REL_DAY, _relative_day),
    (_WEEKDAY, _weekday),
    (_WEEKEND, _weekend),
    (_AGO, _ago),
    (_PAST_N, _past),
    (_PAST_ONE, _past),
    (_CALENDAR, _calendar),
    (_YEAR_ONLY, _year_only),
    (_MONTH_ONLY, _month_only),
    (_RECENT, _recent),
)


def _window(prep: str | None, period: Period, now: datetime) -> TimeRange:
    """Apply the preposition: "since"/"from"/"after" open the end, "before"/"until" the start."""
    first, last = period
    kind = (prep or "").lower()
    if kind in ("since", "from", "after"):
        start = _day_start(first if kind != "after" else last + timedelta(days=1))
        return TimeRange(start=start, end=now if start <= now else None)
    if kind == "before":
        return TimeRange(end=_day_end(first - timedelta(days=1)))
    if kind in ("until", "till", "by"):
        return TimeRange(end=_day_end(last))
    return TimeRange(start=_day_start(first), end=_day_end(last))


def find_time_window(text: str, now: datetime) -> TimeMatch | None:
    """The first, most specific time phrase in `text` as a window relative to `now`."""
    try:
        now = to_utc(now)
    except ValueError:  # a `now` UTC cannot hold: no window rather than an error
        return None
    for pattern, handler in _RULES:
        for match in pattern.finditer(text):
            try:
                period = handler(match, now)
                if period is None:
                    continue
                prep = match.group("prep") if "prep" in pattern.groupindex else None
                if prep is not None and prep.lower() in ("last", "this"):
                    prep = None
                window = _window(prep, period, now)
            except (ValueError, OverflowError):
                continue
            return TimeMatch(window, match.group(0), match.start(), match.end())
    return None

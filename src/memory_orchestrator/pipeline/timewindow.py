"""Time-window inference for the planner.

`find_time_window` turns the first (most specific) time phrase of a query, such as
"last week", "3 days ago", "in March 2023" or "since May 8, 2023", into an inclusive
`TimeRange` in UTC at day granularity (start 00:00:00, end 23:59:59.999999), relative to a
reference time `now`. Open windows: "since X" ends at `now`, "before X" has no start.

Also: ranges ("between Oct 1 and Oct 15", "from March to May", "Oct 1-15"), weeks ("the week
of Nov 10", Monday to Sunday), quarters ("Q3 2026", "this quarter", "last quarter"), seasons
(northern meteorological: "last summer" is the last one that has ended, "this winter" the
one of the current year, Dec-Feb), parts of a month ("early/mid/late November": days 1-10,
11-20, 21-end), "(over) the weekend", "a fortnight ago", and numeric dates ("11/10/2026",
month first unless `day_first`; a date only one order can read is read that way).
No library: dateparser reads single dates, not ranges, quarters or seasons, and costs a large
dependency; these are a few dozen lines of calendar arithmetic.

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
from datetime import date, datetime, timedelta

from memory_orchestrator.models import TimeRange, to_utc
from memory_orchestrator.pipeline.timecalendar import (
    _MONTHS,
    _WEEKDAYS,
    Period,
    _count,
    _day_end,
    _day_start,
    _latest,
    _month_period,
    _shift,
    _shift_months,
    _week_period,
    _year_period,
)

__all__ = ["TimeMatch", "find_time_window"]


@dataclass(frozen=True, slots=True)
class TimeMatch:
    """A time phrase found in the text: its window, its words and where it sits."""

    window: TimeRange
    phrase: str
    start: int
    end: int


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
_UNIT = r"(?P<unit>hour|day|fortnight|week|month|year)s?\b"
_FLAGS = re.IGNORECASE


# Each rule that opens with the optional preposition, without it: where that is found
# nowhere in a text, the whole rule is not either; finding out costs half as much (the
# preposition's alternatives are tried at every position otherwise).
_CORES: dict[re.Pattern[str], re.Pattern[str]] = {}


def _compile(pattern: str) -> re.Pattern[str]:
    compiled = re.compile(pattern, _FLAGS)
    if pattern.startswith(_OPT_PREP):
        _CORES[compiled] = re.compile(pattern.removeprefix(_OPT_PREP), _FLAGS)
    return compiled


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
_NUMERIC = _compile(
    _OPT_PREP + r"\b(?P<a>\d{1,2})[/.](?P<b>\d{1,2})[/.](?P<year>\d{4})\b(?![/.]\d)"
)
_QUARTER = _compile(
    _OPT_PREP + r"\b(?:Q(?P<q>[1-4])|(?P<qword>first|second|third|fourth)\s+quarter)"
    r"(?:,?\s+(?:of\s+)?(?P<year>\d{4})\b)?"
)
_QUARTER_REL = _compile(_OPT_PREP + r"\b(?P<kw>this|last|previous|current)\s+quarter\b")
_SEASON = _compile(
    _OPT_PREP + r"\b(?:(?P<kw>last|this|past)\s+|the\s+)?(?P<season>spring|summer|autumn"
    r"|fall|winter)\b(?:\s+(?:of\s+)?(?P<year>\d{4})\b)?"
)
_PART = _compile(_OPT_PREP + rf"\b(?P<part>early|mid|late)[-\s]+{_MONTH}(?:,?\s+{_YEAR})?")
_THE_WEEKEND = _compile(r"\b(?:(?P<over>over|during|on|at)\s+)?(?P<kw>the|this)\s+weekend\b")
# A range: "between X and Y", "from X to Y", "X - Y" (X and Y any phrase the rules read; a
# bare day number as Y takes X's month: "Oct 1-15").
_RANGE_HEAD = _compile(r"\b(?P<kw>between|from)\s+")
_RANGE_JOIN = _compile(r"\s*(?:-|\u2013|and|to|until|till|through|thru)\s*")
_BARE_DAY = _compile(r"(?P<day>\d{1,2})(?:st|nd|rd|th)?\b(?![/.:]\d)")
_WEEK_OF = _compile(r"\b(?:the\s+)?week\s+of\s+")
_DASH = _compile("[-\u2013]")
_DASH_REACH = 30
_CAN_START = _compile(  # what a phrase a range or week can join starts with (a quick filter)
    r"\d|q[1-4]|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|early|mid|late|spring|summer"
    r"|autumn|fall|winter|first|second|third|fourth|last|this|past|previous|current|yesterday"
    r"|today|the|mon|tue|wed|thu|fri|sat|sun"
)
_WORD_START = _compile(r"\b(?=\w)")
_BARE_YEAR = _compile(r"(?P<year>(?:19|20)\d{2})\b(?![-/]\d)")
_BARE_MONTH = _compile(rf"(?P<prep>(?!))?{_MONTH}(?!\s*\d)")
_QUARTERS = {"first": 1, "second": 2, "third": 3, "fourth": 4}
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}  # first month
_PARTS = {"early": (1, 10), "mid": (11, 20), "late": (21, 31)}

_RECENT_DAYS = 30


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
    if unit in ("week", "fortnight"):
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


def _numeric(m: re.Match[str], now: datetime, *, day_first: bool) -> Period | None:
    a, b, year = int(m.group("a")), int(m.group("b")), int(m.group("year"))
    readings = [(b, a), (a, b)] if day_first else [(a, b), (b, a)]  # (month, day)
    for month, day in readings:
        if 1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]:
            return date(year, month, day), date(year, month, day)
    return None


def _quarter_period(year: int, quarter: int) -> Period:
    first = date(year, 3 * quarter - 2, 1)
    return first, _month_period(year, 3 * quarter)[1]


def _quarter(m: re.Match[str], now: datetime) -> Period:
    quarter = int(m.group("q")) if m.group("q") else _QUARTERS[m.group("qword").lower()]
    if m.group("year"):
        return _quarter_period(int(m.group("year")), quarter)
    today = now.date()  # "Q3": the latest third quarter that has begun
    begun = date(today.year, 3 * quarter - 2, 1) <= today
    return _quarter_period(today.year if begun else today.year - 1, quarter)


def _quarter_rel(m: re.Match[str], now: datetime) -> Period:
    today = now.date()
    current = (today.month - 1) // 3 + 1
    if m.group("kw").lower() in ("this", "current"):
        return _quarter_period(today.year, current)[0], today
    year, quarter = (today.year, current - 1) if current > 1 else (today.year - 1, 4)
    return _quarter_period(year, quarter)


def _season_period(year: int, first_month: int) -> Period:
    """The season starting in `first_month` of `year` (winter runs into the next year)."""
    first = date(year, first_month, 1)
    last = _shift_months(first, 2)
    return first, _month_period(last.year, last.month)[1]


def _season(m: re.Match[str], now: datetime) -> Period | None:
    first_month = _SEASONS[m.group("season").lower()]
    if m.group("year"):  # "winter 2025": the one that starts in December 2024
        year = int(m.group("year")) - (first_month == 12)
        return _season_period(year, first_month)
    kw, today = (m.group("kw") or "").lower(), now.date()
    if not kw and not m.group("prep"):
        return None  # a bare "spring" or "fall" is as likely a word as a season
    for year in range(today.year, today.year - 3, -1):
        first, last = _season_period(year, first_month)
        if kw == "this" and first.year <= today.year:
            return first, last
        if kw in ("last", "past") and last < today:
            return first, last
        if not kw and first <= today:
            return first, last
    return None


def _part(m: re.Match[str], now: datetime) -> Period | None:
    month = _month_number(m, strong=True)
    if month is None:
        return None
    today = now.date()
    if m.group("year"):
        year = int(m.group("year"))
    else:
        year = today.year if month <= today.month else today.year - 1
    first_day, last_day = _PARTS[m.group("part").lower()]
    month_end = calendar.monthrange(year, month)[1]
    return date(year, month, first_day), date(year, month, min(last_day, month_end))


def _the_weekend(m: re.Match[str], now: datetime) -> Period | None:
    today = now.date()
    if today.weekday() >= 5:  # on Saturday or Sunday: this one
        return _week_period(today)[0] + timedelta(days=5), today
    if m.group("kw").lower() == "this" or m.group("over"):
        return _weekend(m, now)
    return None


# Most specific first: the first pattern with a valid match wins.
_RULES: tuple[tuple[re.Pattern[str], Handler], ...] = (
    (_ISO, _iso),
    (_PART, _part),
    (_QUARTER, _quarter),
    (_QUARTER_REL, _quarter_rel),
    (_DMY, _full_date),
    (_MDY, _full_date),
    (_MY, _month_year),
    (_MD, _month_day),
    (_DM, _month_day),
    (_REL_DAY, _relative_day),
    (_WEEKDAY, _weekday),
    (_WEEKEND, _weekend),
    (_THE_WEEKEND, _the_weekend),
    (_AGO, _ago),
    (_PAST_N, _past),
    (_PAST_ONE, _past),
    (_CALENDAR, _calendar),
    (_SEASON, _season),
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


def _rules(day_first: bool) -> tuple[tuple[re.Pattern[str], Handler], ...]:
    numeric: Handler = lambda m, now: _numeric(m, now, day_first=day_first)  # noqa: E731
    return (_RULES[0], (_NUMERIC, numeric), *_RULES[1:])


_BY_ORDER = {False: _rules(False), True: _rules(True)}


def _read_at(
    text: str, pos: int, now: datetime, rules: tuple[tuple[re.Pattern[str], Handler], ...]
) -> tuple[Period, int] | None:
    """The period of the phrase starting exactly at `pos` (no preposition), and its end."""
    if not _CAN_START.match(text, pos):
        return None
    for pattern, handler in rules:
        match = pattern.match(text, pos)
        if match is None or ("prep" in pattern.groupindex and match.group("prep")):
            continue
        try:
            period = handler(match, now)
        except (ValueError, OverflowError):
            continue
        if period is not None:
            return period, match.end()
    return None


def _second_end(
    text: str,
    pos: int,
    first: Period,
    now: datetime,
    rules: tuple[tuple[re.Pattern[str], Handler], ...],
) -> tuple[date, int] | None:
    """The last day of the range's second phrase at `pos` (a bare day takes the first
    phrase's month), and where it ends."""
    found = _read_at(text, pos, now, rules)
    if found is not None:
        return found[0][1], found[1]
    bare = _BARE_DAY.match(text, pos)
    if bare is None:
        return None
    try:
        return first[0].replace(day=int(bare.group("day"))), bare.end()
    except ValueError:
        return None


def _bare_year(m: re.Match[str], now: datetime) -> Period:
    return _year_period(int(m.group("year")))


def _bare_month(m: re.Match[str], now: datetime) -> Period | None:
    """A month named alone in a range ("from March to May"): the latest one begun."""
    month = _month_number(m, strong=False)
    if month is None:
        return None
    today = now.date()
    return _month_period(today.year if month <= today.month else today.year - 1, month)


# What every rule's phrase holds, at the start of a word (or anywhere, a digit): a month or a
# weekday (any of their spellings starts with one of these), a unit, a keyword. A text holding none
# has no time phrase, and is not searched rule by rule (most questions name no time, and the rules'
# search is the planner's costliest part). Words are matched by their start: "recent" covers
# "recently", "late" "lately" and "latest", "day" "days"; a word that only starts like one ("maybe",
# "money") costs the rules' search, never a phrase.
_ANCHOR = re.compile(
    r"\d|\b(?:"
    + "|".join(sorted({name[:3] for name in _MONTHS} | {day[:3] for day in _WEEKDAYS}))
    + "|yesterday|today|tonight|night|morning|afternoon|evening|weekend|fortnight|hour|day"
    "|week|month|year|ago|recent|late|quarter|spring|summer|autumn|fall|winter)",
    _FLAGS,
)


_RANGE_ONLY: tuple[tuple[re.Pattern[str], Handler], ...] = (
    (_BARE_YEAR, _bare_year),
    (_BARE_MONTH, _bare_month),
)


def _range(
    text: str, now: datetime, rules: tuple[tuple[re.Pattern[str], Handler], ...]
) -> TimeMatch | None:
    """Ranges: "between X and Y", "from X to Y", "X - Y" (a day window from X's first day to Y's
    last); a second phrase that would end before the first begins is read a year on."""
    rules = (*rules, *_RANGE_ONLY)
    heads = [(m.start(), m.end()) for m in _RANGE_HEAD.finditer(text)]
    for dash in _DASH.finditer(text):  # "X - Y": X starts at most 30 characters before
        near = max(0, dash.start() - _DASH_REACH)
        heads += [(m.start(), m.start()) for m in _WORD_START.finditer(text, near, dash.start())]
    for begin, pos in heads:
        first = _read_at(text, pos, now, rules)
        if first is None:
            continue
        join = _RANGE_JOIN.match(text, first[1])
        if join is None or (begin == pos and join.group(0).strip() not in ("-", "\u2013")):
            continue  # without "between"/"from", only a dash joins two dates
        second = _second_end(text, join.end(), first[0], now, rules)
        if second is None:
            continue
        last, stop = second
        if last < first[0][0]:
            last = _shift_months(last, 12)
        if last < first[0][0]:
            continue
        window = TimeRange(start=_day_start(first[0][0]), end=_day_end(last))
        return TimeMatch(window, text[begin:stop], begin, stop)
    return None


def _week_of(
    text: str, now: datetime, rules: tuple[tuple[re.Pattern[str], Handler], ...]
) -> TimeMatch | None:
    """The week of a day ("the week of Nov 10"): Monday to Sunday around that day."""
    for head in _WEEK_OF.finditer(text):
        found = _read_at(text, head.end(), now, rules)
        if found is not None:
            first, last = _week_period(found[0][0])
            window = TimeRange(start=_day_start(first), end=_day_end(last))
            return TimeMatch(window, text[head.start() : found[1]], head.start(), found[1])
    return None


def find_time_window(text: str, now: datetime, *, day_first: bool = False) -> TimeMatch | None:
    """The first, most specific time phrase in `text` as a window relative to `now`: a range
    or a week first, then the rules in order. `day_first`: read "11/10/2026" as 11 October."""
    try:
        now = to_utc(now)
    except ValueError:  # a `now` UTC cannot hold: no window rather than an error
        return None
    if _ANCHOR.search(text) is None:
        return None
    rules = _BY_ORDER[day_first]
    for compound in (_range, _week_of):
        try:
            found = compound(text, now, rules)
        except (ValueError, OverflowError):
            found = None
        if found is not None:
            return found
    for pattern, handler in rules:
        core = _CORES.get(pattern)
        if core is not None and core.search(text) is None:
            continue
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

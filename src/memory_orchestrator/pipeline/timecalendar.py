"""Calendar words and day arithmetic for the time-window rules (`timewindow.py`)."""

from __future__ import annotations

import calendar
from datetime import UTC, date, datetime, time, timedelta

_MAX_YEAR_LOOKBACK = 8

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
    if unit in ("day", "week", "fortnight"):
        return day - timedelta(days=n * {"day": 1, "week": 7, "fortnight": 14}[unit])
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

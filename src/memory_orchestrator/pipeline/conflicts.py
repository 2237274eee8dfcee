"""Tell a restatement from an update: does a new memory assert something else than a close one?

Two memories that say nearly the same words may still disagree. What a memory asserts is read
from five kinds of value it carries: numbers and quantities, dates and times, named entities,
negation, and the key verb or adjective (against its antonym). `compare(old, new)` finds the
values that differ and whether the two are about the same thing at all:

- same values (whatever the wording): a restatement (`Change.kind == "same"`);
- only values differ: an update, described as "100 -> 500 requests per minute";
- other content words differ too (staging vs production, the search API vs the billing API),
  or a name changes together with another value (Dana's flight vs Marco's flight): a
  look-alike, another fact (`"other"`).

The check is lexical and cheap; it runs only on the closest memory the store returned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from memory_orchestrator.text import STOP_WORDS, normalize, stem

Kind = Literal["same", "update", "other"]

_TOKEN = re.compile(r"\d+(?:[.,:]\d+)*(?:am|pm|k|m|%|x|h|ms|s|gb|mb|tb)?|[^\W\d_]+(?:'[^\W\d_]+)*")
_NUMBER_WORDS = frozenset(
    """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen
    fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty
    ninety hundred thousand million billion half twice double triple dozen""".split()
)
_TIME_WORDS = frozenset(
    """monday tuesday wednesday thursday friday saturday sunday january february march april
    may june july august september october november december jan feb mar apr jun jul aug sep
    sept oct nov dec today tomorrow yesterday tonight noon midnight morning afternoon evening
    weekend weekday weekly daily monthly yearly quarterly hourly q1 q2 q3 q4 spring summer
    autumn fall winter eod eow""".split()
)
_NEGATIONS = frozenset("not no never none nobody nothing neither nor without cannot can't".split())
# The key verb or adjective against its opposite, by stem (both directions are added).
_OPPOSITES = (
    "enable disable, enabled disabled, allow deny, allow block, allow forbid, start stop, "
    "accept reject, approve reject, approved rejected, increase decrease, raise lower, "
    "include exclude, open close, opened closed, on off, add remove, added removed, "
    "lock unlock, pass fail, passed failed, win lose, hire fire, join leave, joined left, "
    "like dislike, love hate, prefer avoid, keep drop, up down, true false, yes no, "
    "public private, active inactive, available unavailable, online offline, "
    "required optional, mandatory optional, before after, above below, more less, "
    "grant revoke, granted revoked, confirm cancel, confirmed cancelled, confirmed canceled, "
    "supported unsupported, visible hidden, blocked unblocked, resolved unresolved, "
    "healthy unhealthy, safe unsafe, valid invalid, stable unstable, paid unpaid, "
    "succeeded failed, success failure, works broken, allowed forbidden, allowed blocked, "
    "increased decreased, raised lowered, started stopped, upgraded downgraded, "
    "upgrade downgrade, sync async, synchronous asynchronous, internal external, "
    "inside outside, remote onsite, remote office, in out, present absent, full empty, "
    "cheaper pricier, faster slower, higher lower, larger smaller, bigger smaller, "
    "first last, earlier later, ahead behind, signed unsigned, encrypted unencrypted, "
    "deprecated supported, merged reverted, shipped delayed, ready blocked"
)
_SMALL_WORDS = STOP_WORDS - _NEGATIONS - {"before", "after", "above", "below", "more", "on"}
_SMALL_WORDS = _SMALL_WORDS - {"off", "up", "down", "in", "out", "no", "not"}
_SMALL_WORDS = _SMALL_WORDS | {
    "now",
    "currently",
    "actually",
    "also",
    "still",
    "per",
    "a",
    "an",
    "longer",
    "anymore",
}


def _opposites() -> dict[str, frozenset[str]]:
    pairs: dict[str, set[str]] = {}
    for pair in _OPPOSITES.split(","):
        a, b = (stem(w) for w in pair.split())
        pairs.setdefault(a, set()).add(b)
        pairs.setdefault(b, set()).add(a)
    return {k: frozenset(v) for k, v in pairs.items()}


OPPOSITE = _opposites()


@dataclass(frozen=True)
class Token:
    text: str  # as written
    key: str  # how it is compared: a stem, or the number as written
    kind: Literal["number", "time", "name", "negation", "word", "small"]


@dataclass(frozen=True)
class Change:
    """How a new memory relates to a close old one (see the module docstring)."""

    kind: Kind
    what: tuple[str, ...] = ()  # the kinds of value that changed: number, time, name, ...
    detail: str = ""  # "100 -> 500 requests per minute; Friday -> Monday"


@lru_cache(maxsize=8192)
def tokens(text: str) -> tuple[Token, ...]:
    """The tokens of `text`, each with the kind of value it carries."""
    out: list[Token] = []
    clean = normalize(text)  # curly quotes already straight
    last = 0
    for match in _TOKEN.finditer(clean):
        raw = match.group(0)
        gap = clean[last : match.start()]
        out.append(_token(raw, raw.casefold(), not out or any(c in gap for c in ".!?:;")))
        last = match.end()
    return tuple(out)


def _token(raw: str, low: str, sentence_start: bool) -> Token:
    if raw[0].isdigit() or low in _NUMBER_WORDS:
        kind: Literal["number", "time"] = "time" if low.endswith(("am", "pm")) else "number"
        if ":" in low:
            kind = "time"
        return Token(raw, low.replace(",", ""), kind)
    if low in _TIME_WORDS:
        return Token(raw, low[:3] if len(low) > 3 else low, "time")
    if low in _NEGATIONS or low.endswith("n't"):
        return Token(raw, "not", "negation")
    if raw[0].isupper() and low not in STOP_WORDS and not (sentence_start and low in _COMMON):
        return Token(raw, low.removesuffix("'s"), "name")
    if low in _SMALL_WORDS:
        return Token(raw, low, "small")
    return Token(raw, stem(low), "word")


# Capitalised at the start of a sentence yet not a name.
_COMMON = frozenset(
    """we our the a an it this that they i you he she there here please note after before
    every all each no yes from since until today tomorrow yesterday""".split()
)


@lru_cache(maxsize=8192)  # a pure function of two texts: dedup, ordering and the note ask again
def compare(old: str, new: str) -> Change:
    """What `new` asserts against `old` (see the module docstring)."""
    a, b = tokens(old), tokens(new)
    gone = _missing(a, b)
    came = _missing(b, a)
    what: list[str] = []
    details: list[str] = []
    words_gone = {t.key for t in gone if t.kind == "word"}
    words_came = {t.key for t in came if t.kind == "word"}
    flipped = {(x, y) for x in words_gone for y in words_came if y in OPPOSITE.get(x, frozenset())}
    for x, y in flipped:
        words_gone.discard(x)
        words_came.discard(y)
    for kind in ("number", "time", "name"):
        was = [t for t in gone if t.kind == kind]
        now = [t for t in came if t.kind == kind]
        if was or now:
            what.append(kind)
            details.append(_describe(was, now, b))
    if _negated(a) != _negated(b):
        what.append("negation")
        details.append("negated" if _negated(b) else "no longer negated")
    if flipped:
        what.append("opposite")
        details.extend(f"{_written(a, x)} -> {_written(b, y)}" for x, y in sorted(flipped))
    if not what:
        return Change("same")
    if words_gone and words_came:  # another subject: a look-alike, not this fact changed
        return Change("other", tuple(what), "; ".join(details))
    names = sum(t.kind == "name" for t in gone), sum(t.kind == "name" for t in came)
    if "name" in what and (len(what) > 1 or max(names) > 1):
        # someone else's fact, with its own values (or several names swapped at once)
        return Change("other", tuple(what), "; ".join(details))
    return Change("update", tuple(what), "; ".join(details))


def _missing(a: tuple[Token, ...], b: tuple[Token, ...]) -> list[Token]:
    """Tokens of `a` (values and content words) that `b` does not carry (a capitalised
    word at the start of one sentence is the same word lower-case in the other)."""
    keys = {t.key for t in b} | {_loose(t) for t in b}
    return [
        t
        for t in a
        if t.kind not in ("small", "negation") and t.key not in keys and _loose(t) not in keys
    ]


def _loose(t: Token) -> str:
    return stem(t.key) if t.kind == "name" else t.key


def _negated(toks: tuple[Token, ...]) -> bool:
    return sum(t.kind == "negation" for t in toks) % 2 == 1


def _written(toks: tuple[Token, ...], key: str) -> str:
    return next((t.text for t in toks if t.key == key), key)


def _describe(was: list[Token], now: list[Token], new: tuple[Token, ...]) -> str:
    """ "100 -> 500 requests per minute": the old values, the new ones, and the words that
    follow the last new value (its unit), up to three."""
    old = " ".join(t.text for t in was) or "(none)"
    fresh = " ".join(t.text for t in now) or "(none)"
    unit = ""
    if now and now[-1].kind == "number":
        at = next(i for i, t in enumerate(new) if t is now[-1])
        follow = [t.text for t in new[at + 1 : at + 4] if t.kind in ("word", "small", "time")]
        unit = " " + " ".join(follow) if follow else ""
    return f"{old} -> {fresh}{unit}"

"""Tell a restatement from a correction: does a new memory assert something else than a close one?

Two memories that say nearly the same words may still disagree. `compare(old, new)` reads what
each asserts from its tokens: values (numbers and quantities, dates and times, named
entities), negation (and the verbs of stopping), and its content words, each at its place in
the sentence: before the verb, what the memory is about (its topic: "the *staging* cluster
runs ..."); from the verb on, what it says of it (its value: "... is hosted on the *staging*
cluster"). Function words, word order and voice ("is maintained by Kim") do not count.

- nothing differs: a restatement (`Change.kind == "same"`), the only case a write is skipped;
  a content word that differs counts as the same only when `same_meaning` (the semantic
  model, `pipeline.paraphrase`) reads both wordings as one meaning ("starts"/"begins");
- one thing it says changed (a number, a date, a name, a negation, an antonym, one word or
  phrase swapped, or details added): a correction (`"update"`), described as
  "100 -> 500 requests per minute";
- what it is about changed (a word, name or value before the verb, a possessive name), or a
  name changed together with another value, or several things at once, or words dropped, or
  names changed places: another fact, or one this reading cannot be sure of (`"other"`): the
  write adds it and links it, and supersedes nothing.

The check is lexical and cheap; it runs only on the closest memories the store returned.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from memory_orchestrator.pipeline.wording import (
    AUXILIARIES,
    DETERMINERS,
    NEGATIONS,
    NUMBER_WORDS,
    PRONOUNS,
    SENTENCE_OPENERS,
    SMALL_WORDS,
    STOPPING,
    TIME_WORDS,
    opposed,
)
from memory_orchestrator.text import STOP_WORDS, normalize, stem

__all__ = ["Change", "SameMeaning", "Token", "compare", "tokens"]

Kind = Literal["same", "update", "other"]
TokenKind = Literal["number", "time", "name", "negation", "word", "small"]
# (the old sentence, a phrase of it, the phrase the new one has in its place) -> whether the
# new wording keeps the meaning
SameMeaning = Callable[[str, str, str], bool]

_TOKEN = re.compile(
    r"\d+(?:[.,:]\d+)*(?:am|pm|k|m|%|x|h|ms|s|gb|mb|tb)?|[^\W\d_]+(?:[-'][^\W\d_]+)*"
)
_VALUES = ("number", "time", "name")


@dataclass(frozen=True)
class Token:
    text: str  # as written
    key: str  # how it is compared: a stem, or the number as written
    kind: TokenKind
    at: int = 0  # its place in the memory


@dataclass(frozen=True)
class Sentence:
    """A memory's tokens and the place of its first verb (None when none is recognised)."""

    tokens: tuple[Token, ...]
    verb: int | None


@dataclass(frozen=True)
class Change:
    """How a new memory relates to a close old one (see the module docstring)."""

    kind: Kind
    what: tuple[str, ...] = ()  # the kinds of change: number, time, name, negation, word, ...
    detail: str = ""  # "100 -> 500 requests per minute; Friday -> Monday"
    shared: float = 1.0  # share of the content (values and words) both hold
    same_meaning: tuple[str, ...] = ()  # wordings read as one meaning: "starts ~ begins"
    why: str = ""  # for "other": why this is not the same fact changed


# ---------------------------------------------------------------- reading a memory


def tokens(text: str) -> tuple[Token, ...]:
    """The tokens of `text`, each with the kind of value it carries."""
    return analyse(text).tokens


@lru_cache(maxsize=8192)
def analyse(text: str) -> Sentence:
    clean = normalize(text)  # curly quotes already straight
    raw: list[tuple[str, bool]] = []
    last = 0
    for match in _TOKEN.finditer(clean):
        gap = clean[last : match.start()]
        raw.append((match.group(0), not raw or any(c in gap for c in ".!?:;")))
        last = match.end()
    mid_caps = {w.casefold() for w, start in raw if not start and w[0].isupper()}
    toks = [_token(w, start, i, mid_caps) for i, (w, start) in enumerate(raw)]
    verb = _verb(toks)
    # A capitalised word that opens a sentence is a name only when it is its subject (the
    # verb follows) or is capitalised elsewhere too; else a word ("Support tickets ...").
    for i, (w, start) in enumerate(raw):
        t = toks[i]
        if start and t.kind == "name" and verb != i + 1 and w.casefold() not in mid_caps:
            toks[i] = Token(w, stem(w.casefold()), "word", i)
    return Sentence(tuple(toks), verb)


def _token(raw: str, start: bool, at: int, mid_caps: set[str]) -> Token:
    low = raw.casefold()
    if raw[0].isdigit() or low in NUMBER_WORDS:
        kind: TokenKind = "time" if low.endswith(("am", "pm")) or ":" in low else "number"
        return Token(raw, low.replace(",", ""), kind, at)
    if low in TIME_WORDS:
        key = low.rstrip("s") if low.endswith("days") else low
        return Token(raw, key[:3] if len(key) > 3 else key, "time", at)
    if low in NEGATIONS or low.endswith("n't") or stem(low) in STOPPING:
        return Token(raw, "not", "negation", at)
    opener = start and low in SENTENCE_OPENERS and low not in mid_caps
    if raw[0].isupper() and low not in STOP_WORDS and not opener:
        return Token(raw, low.removesuffix("'s"), "name", at)
    if low in SMALL_WORDS:
        return Token(raw, low, "small", at)
    return Token(raw, stem(low), "word", at)


def _verb(toks: Sequence[Token]) -> int | None:
    """The place of the first verb: an auxiliary or modal, the word after an opening
    pronoun, or a word in -s/-ed between a noun and its object ("the team approved the")."""
    for i in range(1, len(toks)):
        low = toks[i].text.casefold()
        before = toks[i - 1]
        if low in AUXILIARIES:
            return i
        if i == 1 and before.text.casefold() in PRONOUNS:
            return i
        if _verbal(toks[i]) and before.kind in ("word", "name") and _object_follows(toks, i):
            return i
    return None


def _verbal(t: Token) -> bool:
    low = t.text.casefold()
    return (
        t.kind == "word"
        and len(low) > 3
        and low.endswith(("s", "ed"))
        and not low.endswith(("ss", "us", "is"))
    )


def _object_follows(toks: Sequence[Token], i: int) -> bool:
    if i + 1 == len(toks):  # "the deploy failed."; not "... likes aisle seats."
        return toks[i].text.casefold().endswith("ed")
    after = toks[i + 1]
    return after.text.casefold() in DETERMINERS or after.kind in ("number", "time", "name")


def _topic(s: Sentence, i: int) -> bool:
    """Whether token `i` belongs to what the memory is about: before its verb, or, with no
    verb recognised, anywhere but its final phrase."""
    if s.verb is not None:
        return i < s.verb
    toks = s.tokens
    j = i + 1
    while (
        j < len(toks)
        and toks[j].kind in ("word", "name")
        and toks[j].text.casefold() not in (STOP_WORDS)
    ):
        j += 1  # the head of its noun phrase ("staging" -> "cluster")
    return any(t.kind in ("word", "name") and t.text.casefold() not in STOP_WORDS for t in toks[j:])


def _modifier(s: Sentence, t: Token) -> bool:
    """A name that qualifies a noun ("Dana's flight", "the Atlas launch"): it picks the
    thing the memory is about rather than being its value."""
    if t.text.endswith("'s"):
        return True
    nxt = s.tokens[t.at + 1] if t.at + 1 < len(s.tokens) else None
    return nxt is not None and nxt.kind == "word" and s.verb != t.at + 1


# ---------------------------------------------------------------- comparing two memories


@dataclass
class _Diff:
    a: Sentence
    b: Sentence
    gone: list[Token]  # in the old memory, not in the new (values and content words)
    came: list[Token]
    flipped: list[tuple[Token, Token]]
    alike: list[str]  # "starts ~ begins"


@lru_cache(maxsize=8192)  # a pure function: dedup, ordering and the note ask again
def compare(old: str, new: str, same_meaning: SameMeaning | None = None) -> Change:
    """What `new` asserts against `old` (see the module docstring)."""
    d = _diff(analyse(old), analyse(new), old, same_meaning)
    what, details = _changes(d)
    shared = _shared(d)
    if not what:
        if _swapped_names(d.a, d.b):
            return Change("other", ("order",), "the names change places", shared, why="roles")
        return Change("same", (), "", shared, tuple(d.alike))
    detail = "; ".join(details)
    why = _another_fact(d, what)
    kind: Kind = "other" if why else "update"
    return Change(kind, tuple(what), detail, shared, tuple(d.alike), why)


def _diff(a: Sentence, b: Sentence, old: str, same_meaning: SameMeaning | None) -> _Diff:
    gone, came = _missing(a, b), _missing(b, a)
    flipped = [
        (x, y)
        for x in gone
        for y in came
        if x.kind == y.kind == "word" and opposed(x.text.casefold(), y.text.casefold())
    ]
    gone = [t for t in gone if all(t is not x for x, _ in flipped)]
    came = [t for t in came if all(t is not y for _, y in flipped)]
    d = _Diff(a, b, gone, came, flipped, [])
    if same_meaning is not None:
        _read_by_meaning(d, old, same_meaning)
    return d


def _read_by_meaning(d: _Diff, old: str, same_meaning: SameMeaning) -> None:
    """One phrase of content words swapped for another: the same when the model reads the
    new wording as the old meaning. Names, numbers and the words that pick a thing ("the
    *staging* cluster") are values, never asked."""
    was, now = _spans(d.gone), _spans(d.came)
    if len(was) != 1 or len(now) != 1:
        return
    (x,), (y,) = was, now
    if any(t.kind != "word" for t in (*x, *y)) or _qualifies(d.a, x) or _qualifies(d.b, y):
        return
    old_words = " ".join(t.text for t in x)
    new_words = _written(d.b, y)
    if same_meaning(old, _written(d.a, x), new_words):
        d.alike.append(f"{old_words} ~ {new_words}")
        d.gone = [t for t in d.gone if t not in x]
        d.came = [t for t in d.came if t not in y]


def _qualifies(s: Sentence, span: Sequence[Token]) -> bool:
    """The span is followed by a content word: it picks which thing ("login bug")."""
    nxt = span[-1].at + 1
    return nxt < len(s.tokens) and s.tokens[nxt].kind in ("word", "name")


def _written(s: Sentence, span: Sequence[Token]) -> str:
    return " ".join(t.text for t in s.tokens[span[0].at : span[-1].at + 1])


def _spans(toks: Sequence[Token]) -> list[list[Token]]:
    out: list[list[Token]] = []
    for t in sorted(toks, key=lambda t: t.at):
        if out and out[-1][-1].at == t.at - 1:
            out[-1].append(t)
        else:
            out.append([t])
    return out


def _changes(d: _Diff) -> tuple[list[str], list[str]]:
    what: list[str] = []
    details: list[str] = []
    for kind in _VALUES:
        was = [t for t in d.gone if t.kind == kind]
        now = [t for t in d.came if t.kind == kind]
        if was or now:
            what.append(kind)
            details.append(_describe(was, now, d.b.tokens))
    if _negated(d.a) != _negated(d.b):
        what.append("negation")
        details.append("negated" if _negated(d.b) else "no longer negated")
    if d.flipped:
        what.append("opposite")
        details.extend(f"{x.text} -> {y.text}" for x, y in d.flipped)
    was = [t for t in d.gone if t.kind == "word"]
    now = [t for t in d.came if t.kind == "word"]
    if was or now:
        what.append("word")
        details.append(_describe(was, now, d.b.tokens))
    return what, details


def _another_fact(d: _Diff, what: list[str]) -> str:
    """Why the change is not one fact corrected ("" when it is)."""
    topic = [t for t in d.gone if _about(d.a, t)] + [t for t in d.came if _about(d.b, t)]
    topic += [y for x, y in d.flipped if _topic(d.a, x.at) or _topic(d.b, y.at)]
    if topic:
        return "about something else: " + ", ".join(dict.fromkeys(t.text for t in topic))
    names = [_spans([t for t in side if t.kind == "name"]) for side in (d.gone, d.came)]
    if max(len(n) for n in names) > 1:
        return "several names changed"
    if "name" in what and len(what) > 1:
        return "someone else's fact, with its own values"
    words = [_spans([t for t in side if t.kind == "word"]) for side in (d.gone, d.came)]
    if words[0] and words[1] and any(k in what for k in ("number", "time", "opposite")):
        return "other words and other values"
    if max(len(w) for w in words) > 1:
        return "several words changed"
    if words[0] and not words[1] and len(what) == 1:
        return "says less: " + " ".join(t.text for t in words[0][0])
    return ""


def _about(s: Sentence, t: Token) -> bool:
    """A token that picks what the memory is about; a name only as a qualifier ("Dana's",
    "the Atlas launch"), not as the subject that acts ("Kim maintains ...")."""
    if t.kind == "name":
        return t.text.endswith("'s") or (_topic(s, t.at) and _modifier(s, t))
    return _topic(s, t.at)


def _shared(d: _Diff) -> float:
    def content(s: Sentence) -> int:
        return sum(t.kind not in ("small", "negation") for t in s.tokens)

    total = max(content(d.a), content(d.b), 1)
    return round(max(0, total - max(len(d.gone), len(d.came))) / total, 4)


def _swapped_names(a: Sentence, b: Sentence) -> bool:
    """The same names in another order that voice does not explain ("Kim reports to Lee",
    "Lee reports to Kim"; not "the SDK is maintained by Kim", nor "the lead is Kim")."""
    first, second = _name_order(a), _name_order(b)
    return len(first) > 1 and sorted(first) == sorted(second) and first != second


def _name_order(s: Sentence) -> list[str]:
    """The capitalised words in order, the agent of a passive ("by Kim") and the name an
    inverted sentence ends on ("the lead is Kim.") put first, as the active voice has them."""
    toks = s.tokens
    order: list[str] = []
    first: str | None = None
    for i, t in enumerate(toks):
        if not t.text[0].isupper() or t.kind in ("time", "number", "small", "negation"):
            continue
        key = t.text.casefold().removesuffix("'s")
        before = toks[i - 1].text.casefold() if i else ""
        last = i == len(toks) - 1
        if first is None and (before == "by" or (last and before in _COPULAS)):
            first = key
        else:
            order.append(key)
    return [first, *order] if first is not None else order


_COPULAS = frozenset("is are was were".split())


def _missing(a: Sentence, b: Sentence) -> list[Token]:
    """Tokens of `a` (values and content words) that `b` does not carry (a capitalised
    word at the start of one sentence is the same word lower-case in the other)."""
    keys = {t.key for t in b.tokens} | {_loose(t) for t in b.tokens}
    return [
        t
        for t in a.tokens
        if t.kind not in ("small", "negation") and t.key not in keys and _loose(t) not in keys
    ]


def _loose(t: Token) -> str:
    return stem(t.key) if t.kind == "name" else t.key


def _negated(s: Sentence) -> bool:
    return sum(t.kind == "negation" for t in s.tokens) % 2 == 1


def _describe(was: list[Token], now: list[Token], new: tuple[Token, ...]) -> str:
    """ "100 -> 500 requests per minute": the old values, the new ones, and the words that
    follow the last new value (its unit), up to three."""
    old = " ".join(t.text for t in was) or "(none)"
    fresh = " ".join(t.text for t in now) or "(none)"
    unit = ""
    if now and now[-1].kind == "number":
        at = now[-1].at
        follow = [t.text for t in new[at + 1 : at + 4] if t.kind in ("word", "small", "time")]
        unit = " " + " ".join(follow) if follow else ""
    return f"{old} -> {fresh}{unit}"

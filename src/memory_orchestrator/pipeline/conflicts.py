"""Tell a restatement from a correction: does a new memory assert something else than a close one?

Two memories that say nearly the same words may still disagree. `compare(old, new)` reads what
each asserts (`pipeline.sentences`): its values (numbers and quantities, dates and times,
named entities), its negation (and the verbs of stopping), and its content words, each with
the part it plays, what the memory is about (topic) or what it says of it (value). Function
words, word order and voice ("is maintained by Kim") do not count.

- nothing differs: a restatement (`Change.kind == "same"`), the only case a write is skipped
  and the only one the read path merges (`same_fact`); a content word that differs counts as
  the same only when `same_meaning` (`pipeline.paraphrase`: WordNet's common senses, the
  semantic model where it runs) reads both wordings as one meaning ("starts"/"begins"), and
  never when either is an identifier (a code, a number, a host, a user or a path: "bob77",
  "db-stage-05", "alice_w", a word the dictionary does not know; `sentences.identifier`);
- one value it says changed (a number, a date, a name, a negation, an antonym, or a word of
  its value phrase: "from the *main* branch"), or details added to it: a correction
  (`"update"`), described as "100 -> 500 requests per minute";
- a change to what it is about (a word, name or value of its topic, "the *staging*
  cluster runs ..."), a name changed together with another value, several things at once,
  words dropped, names that change places, or a change this reading cannot place (a direct
  object: "Clara takes *aspirin*"): another fact, or one it cannot be sure is the same
  (`"other"`); the write adds it, links it, and supersedes nothing.

The check is lexical and cheap: linear in the length of both texts, read whole (opposites are
looked up, not compared word by word: `wording.opposite_pairs`). The write path runs it on the
closest memories the store returned, the read path on the pairs of items alike in words.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice
from typing import Literal

from memory_orchestrator.pipeline.paraphrase import SameMeaning
from memory_orchestrator.pipeline.sentences import (
    Sentence,
    Token,
    analyse,
    identifier,
    predicate,
    qualifies,
    role,
)
from memory_orchestrator.pipeline.synonyms import verb_lemmas
from memory_orchestrator.pipeline.wording import Opposites, opposite_pairs
from memory_orchestrator.text import stem

__all__ = ["Change", "SameMeaning", "Token", "compare", "same_fact", "tokens"]

Kind = Literal["same", "update", "other"]

_VALUES = ("number", "time", "name")
_BE = frozenset("is are was were be been being am".split())


@dataclass(frozen=True)
class Change:
    """How a new memory relates to a close old one (see the module docstring)."""

    kind: Kind
    what: tuple[str, ...] = ()  # the kinds of change: number, time, name, negation, word, ...
    detail: str = ""  # "100 -> 500 requests per minute; Friday -> Monday"
    shared: float = 1.0  # share of the content (values and words) both hold
    same_meaning: tuple[str, ...] = ()  # wordings read as one meaning: "starts ~ begins"
    why: str = ""  # for "other": why this is not the same fact changed


def tokens(text: str) -> tuple[Token, ...]:
    """The tokens of `text`, each with the kind of value it carries."""
    return analyse(text).tokens


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


def same_fact(old: str, new: str) -> bool:
    """Whether the write path skips `new` as a restatement of `old` whatever reading of
    meaning it runs with: the same values and content words, in any order or voice. (With
    the model a synonym counts too; without it, this never says "same" where it would not.)

    Cheap where it matters, on the read path: without a reading of meaning, a restatement
    leaves at most two content tokens of either memory unmatched (a verb turned round, a
    preposition dropped), so two memories that leave more are told apart from what each
    holds (worked out once per memory) before any comparison."""
    a, b = _holds(old), _holds(new)
    if _unmatched(a, b, _RESTATED) or _unmatched(b, a, _RESTATED):
        return False
    return compare(old, new).kind == "same"


_RESTATED = 2  # content tokens a restatement may leave unmatched (`_converse`)


@dataclass(frozen=True)
class _Held:
    """What `_missing` reads of a memory, worked out once per memory: the keys of its content
    tokens (with the loose keys of those that have another: names), every key any of its
    tokens offers, and its content words by key (lower case)."""

    keys: frozenset[str]
    loose: dict[str, frozenset[str]]
    offered: frozenset[str]
    words: dict[str, tuple[str, ...]]

    def unmatched(self, other: _Held) -> Iterator[str]:
        """The keys of its content tokens `other` does not carry, one by one."""
        offered = other.offered
        for k in self.keys - offered:
            if not any(loose in offered for loose in self.loose.get(k, ())):
                yield k

    def words_unmatched(self, other: _Held) -> set[str]:
        """The keys of its content words `other` does not carry (a word's key is its only
        one)."""
        return self.words.keys() - other.offered


@lru_cache(maxsize=4096)
def _holds(text: str) -> _Held:
    toks = analyse(text).tokens
    content = [t for t in toks if t.kind not in ("small", "negation")]
    loose: dict[str, set[str]] = {}
    words: dict[str, list[str]] = {}
    for t in content:
        if _loose(t) != t.key:
            loose.setdefault(t.key, set()).add(_loose(t))
        if t.kind == "word":
            words.setdefault(t.key, []).append(t.text.casefold())
    return _Held(
        keys=frozenset(t.key for t in content),
        loose={k: frozenset(v) for k, v in loose.items()},
        offered=frozenset(t.key for t in toks) | frozenset(_loose(t) for t in toks),
        words={k: tuple(v) for k, v in words.items()},
    )


@lru_cache(maxsize=64)  # the items of a read or two (a long memory's index is large)
def _opposites(text: str) -> Opposites:
    """The content words of a memory, indexed for looking their opposites up."""
    return Opposites(sorted({w for ws in _holds(text).words.values() for w in ws}))


def _unmatched(a: _Held, b: _Held, most: int) -> bool:
    """More than `most` content tokens of `a` that `b` does not carry (`_missing` counts
    each token; these are distinct keys, no more)."""
    return len(list(islice(a.unmatched(b), most + 1))) > most


def values_only(old: str, new: str) -> bool:
    """Whether the two memories may differ in values alone (numbers, times, names, a
    negation, opposites: what `currency.disagreement` asks of `compare`): False, without any
    comparison, when a content word one holds is neither in the other nor the opposite of a
    word the other holds. Cheap once each memory was read (`_holds`)."""
    a, b = _holds(old), _holds(new)
    gone_keys, came_keys = a.words_unmatched(b), b.words_unmatched(a)
    if not gone_keys or not came_keys:
        return not gone_keys and not came_keys
    # one word each way, looked up among all the other's words: most pairs end here
    first, then = a.words[next(iter(gone_keys))][0], b.words[next(iter(came_keys))][0]
    if not _opposites(new).of(first) or not _opposites(old).of(then):
        return False
    gone = sorted({w for k in gone_keys for w in a.words[k]})
    came = sorted({w for k in came_keys for w in b.words[k]})
    pairs = opposite_pairs(gone, came)
    return {i for i, _ in pairs} == set(range(len(gone))) and {j for _, j in pairs} == set(
        range(len(came))
    )


def _diff(a: Sentence, b: Sentence, old: str, same_meaning: SameMeaning | None) -> _Diff:
    gone, came = _missing(a, b), _missing(b, a)
    xs = [t for t in gone if t.kind == "word"]
    ys = [t for t in came if t.kind == "word"]
    pairs = opposite_pairs([t.text.casefold() for t in xs], [t.text.casefold() for t in ys])
    flipped = [(xs[i], ys[j]) for i, j in pairs]
    paired = {id(t) for pair in flipped for t in pair}
    gone = [t for t in gone if id(t) not in paired]
    came = [t for t in came if id(t) not in paired]
    d = _Diff(a, b, gone, came, flipped, [])
    if same_meaning is not None:
        _read_by_meaning(d, old, same_meaning)
    if not d.flipped and (turned := _converse(d) or _dropped_preposition(d)):
        d.alike.append(turned)
        d.gone, d.came = [], []
    return d


# Verbs that say a place or a party holds or takes something, and the prepositions that put
# something there: "Harbor *receives* the images" is "the images are pushed *to* Harbor"
# the other way round.
_HOLDING = frozenset("have hold host house contain receive get keep store take accept".split())
_PLACING = frozenset("in at on to into onto inside within".split())


def _converse(d: _Diff) -> str:
    """The same fact the other way round: in one memory a passive verb and a preposition of
    place before the last phrase ("the images are *pushed to* Harbor"), in the other a verb
    of holding or receiving whose subject is that phrase and whose object is the first
    memory's subject ("Harbor *receives* the images"). "pushed to ~ receives", or ""."""
    for a, b, gone, came in ((d.a, d.b, d.gone, d.came), (d.b, d.a, d.came, d.gone)):
        if len(came) != 1 or not 1 <= len(gone) <= 2 or any(t.kind != "word" for t in gone):
            continue
        holds = came[0]
        if not any(v in _HOLDING for v in verb_lemmas(holds.text.casefold())):
            continue
        verb, *rest = sorted(gone, key=lambda t: t.at)
        place = _placed(a, verb, rest)
        if place is None or not predicate(b, [holds]):
            continue
        before = [t.key for t in b.tokens[: holds.at] if _content(t)]
        after = [t.key for t in b.tokens[holds.at + 1 :] if _content(t)]
        subject = [t.key for t in a.tokens[: verb.at] if _content(t)]
        if before == place and after == subject:
            return f"{_written(a, [verb, *rest])} ~ {holds.text} (the other way round)"
    return ""


def _placed(s: Sentence, verb: Token, rest: list[Token]) -> list[str] | None:
    """What a passive verb puts somewhere ("are *pushed* to Harbor": ["harbor"]): the content
    of the phrase after the verb and its preposition of place, to the end; None when the verb
    is no passive so followed."""
    toks = s.tokens
    if verb.at == 0 or toks[verb.at - 1].text.casefold() not in _BE:
        return None
    at = verb.at + 1
    if rest and (rest[0].at != at or rest[0].text.casefold() not in _PLACING):
        return None
    if not rest and (at >= len(toks) or toks[at].text.casefold() not in _PLACING):
        return None
    place = [t.key for t in toks[at + 1 :] if _content(t)]
    return place or None


def _dropped_preposition(d: _Diff) -> str:
    """A preposition that opened the object of the active voice, dropped when that object
    becomes the subject of the passive ("Sofia signs off *on* the purchases" / "the purchases
    are signed off by Sofia"). "on (the passive)", or ""."""
    for a, b, gone, came in ((d.a, d.b, d.gone, d.came), (d.b, d.a, d.came, d.gone)):
        if came or len(gone) != 1 or gone[0].text.casefold() not in _PLACING | {"for", "about"}:
            continue
        p = gone[0]
        acting = [t for t in a.tokens[: p.at] if _content(t)]
        if not 2 <= len(acting) <= 3 or not acting[0].text[0].isupper():
            continue
        by = [i for i, t in enumerate(b.tokens[:-1]) if t.text.casefold() == "by"]
        agent = acting[0].text.casefold()
        if any(b.tokens[i + 1].text.casefold() == agent for i in by):
            return f"{p.text} (the passive)"
    return ""


def _content(t: Token) -> bool:
    return t.kind not in ("small", "negation")


def _read_by_meaning(d: _Diff, old: str, same_meaning: SameMeaning) -> None:
    """One phrase of content words swapped for another: the same when the model reads the
    new wording as the old meaning. Names, numbers, identifiers ("bob77", "db-stage-05",
    "rsa": `sentences.identifier`) and the words that pick a thing ("the *staging* cluster")
    are values, never asked; a verb before its object is no such word ("*uses* npm")."""
    was, now = _spans(d.gone), _spans(d.came)
    if len(was) != 1 or len(now) != 1:
        return
    (x,), (y,) = was, now
    if any(t.kind != "word" or identifier(t.text) for t in (*x, *y)):
        return  # a code, a user, a host or a path is itself: never another's synonym
    verb = predicate(d.a, x) and predicate(d.b, y)
    if not verb and (qualifies(d.a, x) or qualifies(d.b, y)):
        return
    old_words = " ".join(t.text for t in x)
    new_words = _written(d.b, y)
    if same_meaning(old, _written(d.a, x), new_words, verb):
        d.alike.append(f"{old_words} ~ {new_words}")
        read = {id(t) for t in (*x, *y)}
        d.gone = [t for t in d.gone if id(t) not in read]
        d.came = [t for t in d.came if id(t) not in read]


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
    # with the negation the verb may change too ("prefers" -> "no longer wants")
    verb = "negation" in what and _verb_swapped(d)
    roles = [] if verb else [(role(d.a, t), t) for t in d.gone]
    roles += [] if verb else [(role(d.b, t), t) for t in d.came]
    for x, y in d.flipped:  # an antonym is a value, unless it picks the thing: "inbound queue"
        if any(_picks(s, t) for s, t in ((d.a, x), (d.b, y))):
            roles.append(("topic", y))
    topic = [t for r, t in roles if r == "topic"]
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
    unsure = [t for r, t in roles if r == "open"]
    if unsure:
        return "not sure it is the same fact: " + ", ".join(dict.fromkeys(t.text for t in unsure))
    return ""


def _picks(s: Sentence, t: Token) -> bool:
    """An antonym that qualifies a noun of what the memory is about ("the *inbound* queue
    holds", "signs off on *software* purchases above"); not a verb before its object, which
    is where "Maria *prefers* morning meetings" puts it when no verb was recognised."""
    if t.at == s.verb or not qualifies(s, [t]) or role(s, t) != "topic":
        return False
    first = next((u.at for u in s.tokens if u.kind not in ("small", "negation")), None)
    return not (s.verb is None and s.chunks[t.at] == 0 and t.at != first)


def _verb_swapped(d: _Diff) -> bool:
    """One word of the old memory swapped for the word right after the negation in the new
    one, both after the same word ("Maria *prefers*" -> "Maria no longer *wants*"): the
    verb, which changes with the negation."""
    if len(d.gone) != 1 or len(d.came) != 1:
        return False
    x, y = d.gone[0], d.came[0]
    if x.kind != "word" or y.kind != "word" or not x.at or not y.at:
        return False
    back = y.at - 1
    while back > 0 and d.b.tokens[back].kind in ("negation", "small"):
        back -= 1
    negated = any(t.kind == "negation" for t in d.b.tokens[back + 1 : y.at])
    return negated and d.a.tokens[x.at - 1].key == d.b.tokens[back].key


def _shared(d: _Diff) -> float:
    def content(s: Sentence) -> int:
        return sum(t.kind not in ("small", "negation") for t in s.tokens)

    total = max(content(d.a), content(d.b), 1)
    return round(max(0, total - max(len(d.gone), len(d.came))) / total, 4)


def _swapped_names(a: Sentence, b: Sentence) -> bool:
    """Two names that exchange places in the same frame of words ("Kim reports to Lee",
    "Lee reports to Kim"); not a phrase moved ("at Southampton, our luggage ..."), nor voice
    ("the SDK is maintained by Kim": another frame), nor "the lead is Kim"."""
    frame = _frame(a)
    if frame != _frame(b):
        return False
    was, now = _slots(a), _slots(b)
    moved = [name for name in was if name in now and was[name] != now[name]]
    places = {(was[name], now[name]) for name in moved}  # (another name's is another pair)
    return any((now[name], was[name]) in places for name in moved)


def _frame(s: Sentence) -> list[str]:
    """The content words in order, names (capitalised) left out."""
    return [t.key for t in s.tokens if t.kind in ("word", "number", "time") and not _cap(t)]


def _slots(s: Sentence) -> dict[str, int]:
    """Each name (a run of capitalised words) and how many frame words come before it."""
    slots: dict[str, int] = {}
    frame = 0  # frame words before each place, counted as we go
    counted = 0
    for span in _spans([t for t in s.tokens if _cap(t)]):
        name = " ".join(t.text.casefold().removesuffix("'s") for t in span)
        for t in s.tokens[counted : span[0].at]:
            frame += t.kind in ("word", "number", "time") and not _cap(t)
        counted = span[0].at
        slots[name] = frame
    return slots


def _cap(t: Token) -> bool:
    return t.text[0].isupper() and t.kind in ("name", "word")


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

"""The closed word classes `pipeline.conflicts` reads a memory's assertion with.

Grammar, not the vocabulary of any one set: the words that carry a value without being one
(number and time words), that reverse what is asserted (negations, verbs of stopping), that
mark a verb (auxiliaries, modals, subject pronouns), and general English antonyms, checked by
stem in both directions (with WordNet's, `pipeline.synonyms`), together with the prefixes
that make one (lock/unlock, upload/download, login/logout).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from memory_orchestrator.pipeline.synonyms import antonyms, antonyms_of, forms
from memory_orchestrator.text import STOP_WORDS, stem

__all__ = [
    "AUXILIARIES",
    "DETERMINERS",
    "NEGATIONS",
    "NUMBER_WORDS",
    "PRONOUNS",
    "SENTENCE_OPENERS",
    "SMALL_WORDS",
    "STOPPING",
    "TIME_WORDS",
    "Opposites",
    "opposed",
    "opposite_pairs",
]

NUMBER_WORDS = frozenset(
    """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen
    fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty
    ninety hundred thousand million billion half twice double triple dozen""".split()
)
TIME_WORDS = frozenset(
    """monday tuesday wednesday thursday friday saturday sunday january february march april
    may june july august september october november december jan feb mar apr jun jul aug sep
    sept oct nov dec today tomorrow yesterday tonight noon midnight morning afternoon evening
    night weekend weekday weekly daily monthly yearly annually quarterly hourly nightly q1 q2
    q3 q4 spring summer autumn fall winter eod eow mondays tuesdays wednesdays thursdays
    fridays saturdays sundays mornings afternoons evenings nights weekends""".split()
)
NEGATIONS = frozenset("not no never none nobody nothing neither nor without cannot can't".split())
# Verbs that say an action or state has ended ("stopped drinking coffee", "quit the team"):
# they reverse the sentence as "no longer" does. By stem.
STOPPING = frozenset(stem(w) for w in "stop stopped quit ceased discontinued".split())
# Words that mark the verb of a clause: what comes before them is what the memory is about.
AUXILIARIES = frozenset(
    """is are was were am be been being has have had do does did will would shall should can
    could may might must isn't aren't wasn't weren't hasn't haven't hadn't doesn't don't
    didn't won't wouldn't shouldn't can't couldn't mustn't cannot""".split()
)
# "will" and "would" mark tense ("starts" / "will start"); these change what is asserted
MODALS = frozenset("should can could may might must".split())
PRONOUNS = frozenset("i we you he she they it".split())
DETERMINERS = frozenset("the a an this that these those our my your their its his her".split())
# Capitalised at the start of a sentence yet never a name.
SENTENCE_OPENERS = frozenset(
    """we our the a an it this that they i you he she there here please note after before
    every all each no yes from since until today tomorrow yesterday on in at by for with
    during when while if as starting""".split()
)
# Function words that do not change what a sentence asserts (word order and voice: "is ...
# by", "of"). Those that do stay content: negations, modals ("may" is not "will"), the
# quantifiers, and the prepositions of direction and comparison ("over 18", "under 18").
_MEANINGFUL = (
    NEGATIONS
    | MODALS
    | frozenset(
        """before after above below over under more less most few all only some any each
        every against on off in out up down no not""".split()
    )
)
SMALL_WORDS = (STOP_WORDS - _MEANINGFUL) | frozenset(
    "now currently actually also still per a an longer anymore".split()
)

# General antonyms, by stem (both directions). Not a list of any set's words: the usual
# opposites of English across kinds (state, direction, quantity, decision, time, access).
_OPPOSITES = """
enable disable, enabled disabled, allow deny, allow block, allow forbid, allow ban,
allow prohibit, permit forbid, permit deny, start stop, start end, start finish, begin end,
begin finish, open close, opened closed, on off, in out, up down, accept reject,
accept decline, accept refuse, approve reject, approve deny, approve decline,
approved rejected, agree disagree, include exclude, add remove, added removed, add delete,
create delete, create destroy, install uninstall, lock unlock, pass fail, passed failed,
succeed fail, succeeded failed, success failure, win lose, won lost, gain lose, hire fire,
join leave, joined left, enter exit, arrive depart, arrive leave, come go, like dislike,
love hate, prefer avoid, keep drop, keep discard, keep remove, true false, yes no,
right wrong, correct incorrect, public private, active inactive, available unavailable,
online offline, connected disconnected, required optional, mandatory optional,
before after, above below, over under, more less, most least, max min, maximum minimum,
grant revoke, granted revoked, confirm cancel, confirmed cancelled, confirmed canceled,
supported unsupported, visible hidden, show hide, blocked unblocked, resolved unresolved,
healthy unhealthy, safe unsafe, valid invalid, stable unstable, paid unpaid, works broken,
working broken, allowed forbidden, allowed blocked, increase decrease, increased decreased,
raise lower, raised lowered, rise fall, rose fell, grow shrink, expand shrink,
upgrade downgrade, upgraded downgraded, promote demote, sync async, synchronous asynchronous,
internal external, inside outside, indoor outdoor, remote onsite, remote office,
present absent, full empty, full partial, cheap expensive, cheaper pricier, fast slow,
faster slower, quick slow, high low, higher lower, large small, larger smaller, big small,
bigger smaller, long short, longer shorter, heavy light, hot cold, warm cool, wet dry,
light dark, easy hard, easy difficult, strong weak, new old, newer older, young old,
early late, earlier later, first last, ahead behind, front back, top bottom, left right,
north south, east west, inbound outbound, incoming outgoing, input output, import export,
upload download, push pull, send receive, sent received, give take, buy sell, bought sold,
lend borrow, lent borrowed, credit debit, income expense, profit loss, deposit withdraw,
debit refund, charge refund, asset liability, signed unsigned, encrypted unencrypted,
encrypt decrypt, deprecated supported, merged reverted, shipped delayed, ready blocked,
ready pending, done pending, complete incomplete, completed pending, finished unfinished,
attend skip, present missing, found lost, win loss, majority minority, maximum minimum,
always never, often rarely, all none, everyone nobody, everything nothing, some none,
many few, plus minus, positive negative, pro con, for against, with without, same different,
similar different, equal unequal, legal illegal, possible impossible, likely unlikely,
known unknown, sure unsure, certain uncertain, clean dirty, free paid, free busy,
busy idle, awake asleep, sick healthy, ill well, alive dead, married single, married divorced,
allowed disallowed, trusted untrusted, secure insecure, verified unverified, booked cancelled,
on-time delayed, direct indirect, automatic manual, automated manual, primary secondary,
primary replica, master replica,
leader follower, read write, readonly writable, mutable immutable, static dynamic,
local remote, local global, temporary permanent, interim permanent, part-time full-time
"""
_PREFIX_PAIRS = (
    ("up", "down"),
    ("in", "out"),
    ("im", "ex"),
    ("pre", "post"),
    ("over", "under"),
    ("inter", "intra"),
    ("super", "sub"),
    ("max", "min"),
    ("upper", "lower"),
    ("pro", "anti"),
    ("inc", "dec"),
)
_SUFFIX_PAIRS = (("in", "out"), ("on", "off"), ("up", "down"), ("ful", "less"))
_NEGATING_PREFIXES = ("un", "in", "im", "il", "ir", "dis", "non", "non-", "de", "mis")


def _pairs() -> dict[str, frozenset[str]]:
    pairs: dict[str, set[str]] = {}
    for pair in _OPPOSITES.split(","):
        a, b = (stem(w) for w in pair.split())
        pairs.setdefault(a, set()).add(b)
        pairs.setdefault(b, set()).add(a)
    return {k: frozenset(v) for k, v in pairs.items()}


_OPPOSITE = _pairs()


@lru_cache(maxsize=8192)
def opposed(a: str, b: str) -> bool:
    """Whether two words (lower case; stems or as written) are each other's opposites: a
    listed antonym pair or one of WordNet's, a negating prefix ("lock"/"unlock",
    "able"/"disable") or a pair of opposite prefixes or suffixes on one stem
    ("upload"/"download", "login"/"logout")."""
    if stem(b) in _OPPOSITE.get(stem(a), frozenset()) or antonyms(a, b):
        return True
    # every affix rule keeps a stem of 3+ letters at the start or the end of both words
    if a[:3] != b[:3] and a[-3:] != b[-3:]:
        return False
    return any(_affixed(x, y) for x, y in ((a, b), (b, a)))


def _affixed(x: str, y: str) -> bool:
    if len(x) > 2 and any(y in (p + x, p + "-" + x) for p in _NEGATING_PREFIXES):
        return True
    for p, q in (*_PREFIX_PAIRS, *((q, p) for p, q in _PREFIX_PAIRS)):
        rest = x[len(p) :].lstrip("-")
        if (
            x.startswith(p)
            and y.startswith(q)
            and len(rest) > 2
            and rest == y[len(q) :].lstrip("-")
        ):
            return True
    for p, q in (*_SUFFIX_PAIRS, *((q, p) for p, q in _SUFFIX_PAIRS)):
        rest = x[: -len(p)].rstrip("-")
        if x.endswith(p) and y.endswith(q) and len(rest) > 2 and rest == y[: -len(q)].rstrip("-"):
            return True
    return False


def opposite_pairs(xs: Sequence[str], ys: Sequence[str]) -> list[tuple[int, int]]:
    """Every `(i, j)` with `opposed(xs[i], ys[j])` (lower-case words), in the order of a loop
    over `xs` then `ys`, in time linear in the number of words: each word of `xs` looks its
    possible opposites up among `ys` (by stem, WordNet form, and the affixes that make one)
    instead of being compared with each of them. Two long memories differ in hundreds of
    words; comparing each with each is what made a long write cost seconds."""
    index = Opposites(ys)
    return [(i, j) for i, x in enumerate(xs) for j in index.of(x)]


_AFFIX_PAIRS = (*_PREFIX_PAIRS, *((q, p) for p, q in _PREFIX_PAIRS))
_AFFIX_ENDS = (*_SUFFIX_PAIRS, *((q, p) for p, q in _SUFFIX_PAIRS))


class Opposites:
    """Lower-case words (a memory's), indexed by every key an opposite could be found by:
    `of(x)` finds the opposites of `x` among them without comparing `x` with each. The keys
    of a word are worked out once per word (`_filed_under`, `_looked_up_by`): the same words
    come back memory after memory, and an import compares thousands."""

    def __init__(self, words: Sequence[str]) -> None:
        self.words = tuple(words)
        self._keys: dict[tuple[str, str], set[int]] = {}
        for j, y in enumerate(words):
            for key in _filed_under(y):
                self._keys.setdefault(key, set()).add(j)

    def of(self, x: str) -> list[int]:
        """The places of the words that are `x`'s opposites (`opposed`), in order."""
        return [j for j in sorted(self._candidates(x)) if opposed(x, self.words[j])]

    def _candidates(self, x: str) -> set[int]:
        """The places of the words that may be `x`'s opposites: every key an opposite of `x`
        could be filed under, looked up."""
        found: set[int] = set()
        keys = self._keys
        for key in _looked_up_by(x):
            if (places := keys.get(key)) is not None:
                found |= places
        return found


@lru_cache(maxsize=65_536)
def _filed_under(y: str) -> tuple[tuple[str, str], ...]:
    """The keys `Opposites` files the word `y` under: its stem, itself, its WordNet forms,
    and what is left of it without each affix that makes an opposite."""
    keys = [("stem", stem(y)), ("text", y), *(("form", form) for form in forms(y))]
    keys += [("pre" + q, y[len(q) :].lstrip("-")) for _, q in _AFFIX_PAIRS if y.startswith(q)]
    keys += [("suf" + q, y[: -len(q)].rstrip("-")) for _, q in _AFFIX_ENDS if y.endswith(q)]
    return tuple(dict.fromkeys(keys))


@lru_cache(maxsize=65_536)
def _looked_up_by(x: str) -> tuple[tuple[str, str], ...]:
    """Every key an opposite of the word `x` could be filed under (`_filed_under`)."""
    keys = [("stem", other) for other in _OPPOSITE.get(stem(x), frozenset())]
    keys += [("form", other) for other in antonyms_of(x)]
    for p in _NEGATING_PREFIXES:  # x negated, or x the negation of another
        keys += [("text", p + x), ("text", p + "-" + x)]
        for rest in (x[len(p) :], x[len(p) + 1 :] if x[len(p) : len(p) + 1] == "-" else ""):
            if x.startswith(p) and len(rest) > 2:
                keys.append(("text", rest))
    keys += [("pre" + q, x[len(p) :].lstrip("-")) for p, q in _AFFIX_PAIRS if x.startswith(p)]
    keys += [("suf" + q, x[: -len(p)].rstrip("-")) for p, q in _AFFIX_ENDS if x.endswith(p)]
    return tuple(dict.fromkeys(keys))

"""How a memory is read for what it asserts: its tokens, each with the kind of value it
carries, and the part each plays, what the memory is about (its *topic*) or what it says of
it (its *value*).

Only the closed classes of English are used (`pipeline.wording`): auxiliaries, pronouns,
determiners, prepositions, and a verb's inflection. A code is one token, compared as it is
written ("db-stage-05", "alice_w", "/etc/ssl/web.key", "dev@example.com", "C++"; `identifier`
says which tokens name one thing). A token's part:

- a number or a time is a value, unless it comes before the verb ("the *2pm* standup");
- a possessive name is topic ("*Dana's* flight"); a name that opens the memory as the
  subject of its verb is a value, and then all the rest is topic ("*Kim* maintains the
  payments SDK": the SDK is what it is about, Kim who maintains it);
- before the verb, and the verb itself, topic ("the *staging* cluster runs ...");
- after it, a phrase of `for`, `of`, `about`, `during` ... is topic ("*for the billing
  team*"); so is any phrase but the last ("we publish *the docs site* from the main
  branch"); the last, when a preposition of place, source,
  means or agent opens it ("from the *main* branch", "is hosted on the *production*
  cluster", "in *Lisbon*", "by the *data* team"), is a value: of a name always, of a word
  when the verb was recognised;
- the complement of "is" ("the cron job is *paused*", "the lead is *Kim*") is a value;
- anything else, a direct object that ends the memory above all ("we use
  *spreadsheets*"), is *open*: it may be either, and a change there is not taken as a
  correction.

The reading is deliberately cautious: a value misread as topic or open costs a correction
written beside the old memory (added and linked); a topic misread as a value would
supersede a fact that still holds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Literal

from memory_orchestrator.pipeline.synonyms import base_form, is_verb, known
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
)
from memory_orchestrator.text import STOP_WORDS, normalize, stem

__all__ = [
    "Role",
    "Sentence",
    "Token",
    "analyse",
    "identifier",
    "marked",
    "predicate",
    "qualifies",
    "role",
]

TokenKind = Literal["number", "time", "name", "negation", "word", "small"]
Role = Literal["topic", "value", "open"]

# Numbers (with units), then words and identifiers, whole: "gh-pages", "S3", "db-stage-05",
# "alice_w", "web.key", "dev@example.com", "s3://logs/raw", "C++" (a code is one token, so
# that two codes differ as wholes and none is read as words).
_TOKEN = re.compile(
    r"\d+(?:[.,:]\d+)*(?:am|pm|k|m|%|x|h|ms|s|gb|mb|tb)?"
    r"|[^\W\d_][^\W_]*(?:(?:[-'_.@]|:/*|/+)[^\W_]+)*[+#]*"
)
# The marks of a code inside a token: with a digit, they make it an identifier.
_MARKS = frozenset("-_/.@:+#")
_ADVERBS = frozenset("longer also still now currently actually already always".split())
_BE = frozenset("is are was were am be been being".split())
# Prepositions that say which thing the memory is about, and those that open its value.
_TOPIC_PREPOSITIONS = frozenset(
    "for of about during regarding per among between within concerning like".split()
)
_PREPOSITIONS = _TOPIC_PREPOSITIONS | frozenset(
    """in on at from to by with into onto through via against under over above below near
    inside outside across toward towards after before until since around behind beside
    beyond off out up down upon""".split()
)


@dataclass(frozen=True)
class Token:
    text: str  # as written
    key: str  # how it is compared: a stem, or the number as written
    kind: TokenKind
    at: int = 0  # its place in the memory


@dataclass(frozen=True)
class Sentence:
    """A memory's tokens; the place of its first verb (None when none is recognised) and of
    a name acting as its subject; the phrase each token belongs to (runs of content words
    between function words and the verb; None for those) and the preposition opening each
    phrase."""

    tokens: tuple[Token, ...]
    verb: int | None
    chunks: tuple[int | None, ...]
    heads: tuple[str | None, ...]
    agent: int | None

    @property
    def last_chunk(self) -> int | None:
        return len(self.heads) - 1 if self.heads else None

    @cached_property
    def object(self) -> int | None:
        """The phrase of a bare object that says what the memory says (`_object`), worked
        out once: `role` asks it of every token."""
        return _object(self)


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
            toks[i] = Token(w, _key(w.casefold()), "word", i)
    chunks, heads = _chunks(toks, verb)
    return Sentence(tuple(toks), verb, chunks, heads, _agent(toks, verb))


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
    capitalised = raw[0].isupper() or any(c.isupper() for c in raw[1:])  # "macOS"
    if capitalised and low not in STOP_WORDS and not opener:
        return Token(raw, low.removesuffix("'s"), "name", at)
    if low in SMALL_WORDS:
        return Token(raw, low, "small", at)
    return Token(raw, _key(low), "word", at)


def marked(word: str) -> bool:
    """A token that carries a digit or a mark of a code: "bob77", "db-stage-05", "alice_w",
    "web.key", "dev@example.com", "C++"."""
    return any(c.isdigit() or c in _MARKS for c in word)


@lru_cache(maxsize=16384)
def identifier(word: str) -> bool:
    """A token that names one thing: marked (`marked`), or a word the dictionary does not
    know ("mkumar", "rsa"; `synonyms.known`). No reading takes it for another token's
    meaning: two identifiers that differ are two things."""
    low = word.casefold()
    return marked(low) or (low not in STOP_WORDS and not known(low))


def _key(low: str) -> str:
    """How a word is compared: its stem ("seen" is "see", "led" is "lead"); a code as it is
    written, where a stem would join two ("api-hosts" and "api-host"): one with a digit or a
    mark other than the hyphen, or hyphenated with a part the dictionary does not know."""
    if marked(low) and not all(p.isalpha() and known(p) for p in low.split("-")):
        return low
    return stem(base_form(low))


def _verb(toks: Sequence[Token]) -> int | None:
    """The place of the first verb: an auxiliary or modal, the word after an opening
    pronoun, or a word in -s/-ed after a noun and before its object ("the team approved
    the", "the tour leaves from")."""
    starts = _phrase_starts(toks)
    for i in range(1, len(toks)):
        low = toks[i].text.casefold()
        before = toks[i - 1]
        if low in AUXILIARIES:
            return i
        if i == 1 and before.text.casefold() in PRONOUNS:
            return i
        after_noun = (
            before.kind in ("word", "name", "negation")
            or before.text in _ADVERBS
            or _label(toks, i - 1)
        )
        if _verbal(toks[i]) and after_noun and _object_follows(toks, i, starts):
            return i
        if _verbal(toks[i]) and _subject_before(toks, i, starts) and _bare_object(toks, i):
            return i
    return None


def _phrase_starts(toks: Sequence[Token]) -> list[int]:
    """For each place, the place of the last token before it that is not a content word
    (-1 for none): where the run of content words that ends just before it begins, minus
    one. Worked out once, so that a long memory is read in linear time."""
    out = [-1]
    for i in range(1, len(toks)):
        t = toks[i - 1]
        content = t.kind in ("word", "name") and not _function(t)
        out.append(out[-1] if content else i - 1)
    return out


def _label(toks: Sequence[Token], i: int) -> bool:
    """A number that names the thing before it ("bed *12* needs", "spot *41* belongs")."""
    return (
        toks[i].kind == "number"
        and i > 0
        and toks[i - 1].kind in ("word", "name")
        and not _function(toks[i - 1])
    )


def _subject_before(toks: Sequence[Token], i: int, starts: Sequence[int]) -> bool:
    """A subject ends at `i`: a name that opens the memory ("Clara takes"), or a noun phrase
    a determiner opens ("the frontend repository uses")."""
    return (i == 1 and toks[0].kind == "name") or _noun_phrase_before(toks, i, starts)


def _bare_object(toks: Sequence[Token], i: int) -> bool:
    """A verb form WordNet knows, followed by a word that is none, or is the -ing form of
    one ("takes *ibuprofen*", "uses *npm*", "accepts *existing* patients"; not the plural
    before a verb: "the payment terms *apply*")."""
    if i + 1 >= len(toks) or toks[i + 1].kind != "word" or _function(toks[i + 1]):
        return False
    after = toks[i + 1].text.casefold()
    return is_verb(toks[i].text.casefold()) and (after.endswith("ing") or not is_verb(after))


def _verbal(t: Token) -> bool:
    low = t.text.casefold()
    return (
        t.kind == "word"
        and len(low) > 3
        and low.endswith(("s", "ed"))
        and not low.endswith(("ss", "us", "is"))
        and not marked(low)  # "k8s-workers" is no verb
    )


def _object_follows(toks: Sequence[Token], i: int, starts: Sequence[int]) -> bool:
    if i + 1 == len(toks):  # "the deploy failed."; not "... likes aisle seats."
        return toks[i].text.casefold().endswith("ed")
    after = toks[i + 1].text.casefold()
    if after in DETERMINERS or toks[i + 1].kind in ("number", "time", "name"):
        return True
    # "the harbour tour leaves from"; not "Support tickets from", "prefers morning meetings
    # in" (a plural whose noun phrase no determiner opens)
    return after in _PREPOSITIONS and _noun_phrase_before(toks, i, starts)


def _noun_phrase_before(toks: Sequence[Token], i: int, starts: Sequence[int]) -> bool:
    """Content words end just before `i`, and a determiner opens them."""
    j = starts[i]
    return j >= 0 and j < i - 1 and toks[j].text.casefold() in DETERMINERS


def _function(t: Token) -> bool:
    return t.kind in ("small", "negation") or t.text.casefold() in STOP_WORDS


def _chunks(
    toks: Sequence[Token], verb: int | None
) -> tuple[tuple[int | None, ...], tuple[str | None, ...]]:
    chunks: list[int | None] = []
    heads: list[str | None] = []
    preposition: str | None = None
    open_ = False
    for i, t in enumerate(toks):
        if _function(t) or i == verb:
            low = t.text.casefold()
            preposition = low if low in _PREPOSITIONS else (None if i == verb else preposition)
            open_ = False
            chunks.append(None)
            continue
        if not open_:
            heads.append(preposition)
            preposition, open_ = None, True
        chunks.append(len(heads) - 1)
    return tuple(chunks), tuple(heads)


def _agent(toks: Sequence[Token], verb: int | None) -> int | None:
    """A name that opens the memory as the subject of its verb ("Kim maintains", "Priya
    is", "Dana no longer leads"): a person, or a system, that acts."""
    first = toks[0] if toks else None
    if verb is None or first is None or first.kind != "name" or not first.text.istitle():
        return None  # "The API is ...", "Dana's flight ...": no one acting
    between = toks[1:verb]
    return 0 if all(t.kind in ("small", "negation") for t in between) else None


def role(s: Sentence, t: Token) -> Role:
    """The part token `t` plays in `s` (see the module docstring)."""
    i = t.at
    if t.kind == "time" and t.text.isalpha() and qualifies(s, [t]):
        return "topic"  # a time word that picks the thing: "the *weekend* group"
    if t.kind in ("number", "time"):
        return "topic" if leading(s, i) else "value"
    if t.kind == "name" and t.text.endswith("'s"):
        return "topic"
    chunk = s.chunks[i]
    obj = s.object
    if obj is not None:  # "Clara takes *ibuprofen* for her migraines"
        return "value" if chunk == obj else "topic"
    if i == s.agent:
        return "topic" if _counted(s) else "value"
    if (s.verb is not None and i <= s.verb) or s.agent is not None:
        return "topic"
    if chunk is None:
        return "topic"
    head = s.heads[chunk]
    if head in _TOPIC_PREPOSITIONS or chunk != s.last_chunk:
        return "topic"
    if head is not None:
        return "value" if t.kind == "name" or s.verb is not None else "open"
    if _complement(s, i, chunk):
        return "value"
    if s.verb is None and chunk == 0:
        return "topic"
    return "open"


def _object(s: Sentence) -> int | None:
    """The phrase right after the verb when it is a bare object (no preposition opens it)
    and what follows says which thing the memory is about: a phrase of for/of/about...
    ("Clara takes *ibuprofen* for her migraines", "Felix rents *a van* for the ski
    holiday"), or words only where the object holds a name or a number ("Ms Harper teaches
    *Spanish* to the beginner group", "Atlas runs *3* replicas in the production
    cluster"). That object is what the memory says of the thing. None otherwise ("Kim
    maintains the SDK": the SDK is what it is about; "Dana moved the review to *Friday*")."""
    if s.verb is None or s.tokens[s.verb].text.casefold() in AUXILIARIES:
        return None  # "Marco is the on-call engineer for billing": Marco is the value
    after = [c for c in s.chunks[s.verb + 1 :] if c is not None]
    if not after or s.heads[after[0]] is not None or after[0] + 1 >= len(s.heads):
        return None
    first = after[0]
    later = [t for t in s.tokens if (s.chunks[t.at] or -1) > first]
    if any(t.kind != "word" for t in later):
        return None
    if s.heads[first + 1] in _TOPIC_PREPOSITIONS:
        return first
    held = [t for t in s.tokens if s.chunks[t.at] == first]
    return first if any(t.kind in ("name", "number") for t in held) else None


def _counted(s: Sentence) -> bool:
    """A number follows the verb: what the memory says ("Atlas runs *3* replicas", "Lucas
    walks *3* kilometres a day"), so the name acting is what it is about."""
    assert s.verb is not None
    return any(t.kind == "number" for t in s.tokens[s.verb + 1 :])


def leading(s: Sentence, i: int) -> bool:
    """Before the verb, or with none recognised, in the first of several phrases."""
    if s.verb is not None:
        return i < s.verb
    return s.chunks[i] == 0 and (s.last_chunk or 0) > 0


def _complement(s: Sentence, i: int, chunk: int) -> bool:
    """What "is" says the subject is, ending the memory ("the job is *paused*", "the lead is
    *Kim*"); not the verb of a passive ("is *written* in Go")."""
    if s.verb is None or s.tokens[s.verb].text.casefold() not in _BE or chunk != s.last_chunk:
        return False
    return all(_function(t) for t in s.tokens[s.verb + 1 : i])


def predicate(s: Sentence, span: Sequence[Token]) -> bool:
    """The span is the memory's verb, the relation it states: where the reading found the
    verb; the participle after it when it is an auxiliary ("is *hosted* on", not the
    complement that ends the memory: "is *paused*"); or, where none was found, an inflected
    word after its subject and before what follows ("the worker *deploys* to", "we *stay*
    at", "Emma *picks up* her")."""
    i, end = span[0].at, span[-1].at + 1
    toks = s.tokens
    if i == s.verb:
        return True
    if end >= len(toks) or i == 0:
        return False
    if s.verb is not None and s.verb < i and toks[s.verb].text.casefold() in AUXILIARIES:
        return all(t.kind in ("small", "negation") for t in toks[s.verb + 1 : i])
    before, low = toks[i - 1], span[0].text.casefold()
    if before.text.casefold() in PRONOUNS:
        return True
    inflected = low.endswith(("s", "ed")) or base_form(low) != low
    subject = before.kind in ("word", "name", "number") and not _function(before)
    return s.verb is None and inflected and subject


def qualifies(s: Sentence, span: Sequence[Token]) -> bool:
    """The span is followed by a content word: it picks which thing ("*login* bug")."""
    nxt = span[-1].at + 1
    return (
        nxt < len(s.tokens)
        and not _function(s.tokens[nxt])
        and s.tokens[nxt].kind
        in (
            "word",
            "name",
        )
    )

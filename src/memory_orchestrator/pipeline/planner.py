"""The query planner: reads a request and decides what to ask the store, and how broadly.

`plan_query` is pure and deterministic: the same query, `now` and known entities give the
same plan. It normalises the query, extracts terms and entities, classifies the question
and intent, infers a time window (see `timewindow`), picks a retrieval strategy and hop
budget, and decomposes the query into a few subqueries. Every pattern is compiled at import.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from itertools import pairwise

from memory_orchestrator.models import (
    EventKind,
    Intent,
    MemoryType,
    QueryPlan,
    QuestionType,
    Stage,
    Strategy,
    TraceEvent,
    event,
)
from memory_orchestrator.pipeline.names import read_names
from memory_orchestrator.pipeline.timewindow import TimeMatch, find_time_window
from memory_orchestrator.text import QUESTION_WORDS, STOP_WORDS, content_words, normalize, stem

__all__ = ["plan_query"]

# An identifier ("mem_123", "v2-api", "ISSUE-42") or a word (apostrophes kept inside).
_TOKEN = re.compile(r"[^\W_]+(?:[-_]+[^\W_]+)+|[^\W_]+(?:'[^\W_]+)*")
# The analyzer's word split (text.words), with positions: used to match known entity names.
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")

_SKIP = STOP_WORDS | QUESTION_WORDS
_SENTENCE_END = frozenset(".!?;:")
_CLAUSE_BREAK = frozenset("?;")
# Capitalised words that open a request but name nothing.
_STARTERS = frozenset(
    """may might must can could would should will shall please tell show list find give get
    remind recall remember summarize summarise describe explain compare search look check name
    help let yes ok okay hi hello hey thanks thank now well maybe perhaps anything anyone
    everything everyone something someone nothing every many much last next today yesterday
    tonight recently lately earlier since based given according regarding apart besides
    another note quick question""".split()
)
_WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday".split())
_MONTHS = frozenset(
    """january february march april may june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec""".split()
)
_TIME_PREPS = frozenset("in on during since before after until till by from of last this".split())
# Lower-case hyphenated compounds with one of these parts are words ("long-term", "e-mail").
_COMMON_PARTS = frozenset(
    """self well long short full part half non re co pre post ex anti multi semi e x high low
    top old new real open first last next one two three time term known based like free made
    year day week end side mid sub inter cross single double good best follow check sign log
    set back hand home law mother father sister brother""".split()
)
# Words that open a sentence of chat but name nothing (extraction from memory text only).
_CHAT_OPENERS = frozenset(
    """wow yeah yep yup nope yes no oh ah aw aww um hmm haha lol omg btw sure nice cool great
    good glad sorry awesome amazing congrats congratulations definitely absolutely exactly
    totally really honestly seriously agreed true right gonna wanna gotta love thanks thx
    also just so anyway actually plus ugh yay whoa woah woohoo hooray cheers bye hey hi hello
    ok okay btw""".split()
)
_GRAMMAR_ENDINGS = ("ing", "ly", "ed")
_NAME_CONNECTORS = frozenset("of the de del la le van von der da du".split())
_CLAUSE_STARTERS = QUESTION_WORDS | frozenset(
    "did does do is are was were has have had can could should would will".split()
)
_WHEN_NOUNS = frozenset("time year month day date week decade period season".split())
_EPISODIC_CUES = frozenset(
    "recently lately recent happened happen happens happening timeline history events".split()
)
_EPISODIC_PAIRS = frozenset({("last", "time")})
_RELATIONAL_CUES = frozenset(
    """why because connection connections connected both compare compared comparing
    comparison relationship relationships versus vs""".split()
)
_CUE_PAIRS = frozenset(
    {("related", "to"), ("and", "also"), ("depends", "on"), ("depend", "on"), ("led", "to")}
)
_PROCEDURAL_PAIRS = frozenset({("how", "to"), ("steps", "to"), ("way", "to")})
_HOW_AUX = frozenset("do can could should would does".split())
_HOW_SUBJECTS = frozenset("i we you one".split())
_SEMANTIC_WORDS = frozenset("define definition meaning what's who's".split())
_DEFINE_PAIRS = frozenset((q, v) for q in ("what", "who") for v in ("is", "are", "was", "were"))
_TITLE_CASE_SHARE = 0.8
_MAX_TASK_WORDS = 16
_LONG_QUERY_TERMS = 40


@dataclass(frozen=True, slots=True)
class _Tok:
    text: str
    lower: str
    start: int
    end: int
    sentence_start: bool  # first token of the text or after . ! ? ; :
    gap: str  # the characters between the previous token and this one

    @property
    def base(self) -> str:
        """The token without a possessive "'s"."""
        return self.text[:-2] if self.lower.endswith("'s") else self.text

    @property
    def ident(self) -> bool:
        return "-" in self.text or "_" in self.text

    @property
    def content(self) -> bool:
        return self.lower not in _SKIP and self.base.lower() not in _SKIP


def _tokenize(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    prev = 0
    for m in _TOKEN.finditer(text):
        gap = text[prev : m.start()]
        first = not toks or any(c in _SENTENCE_END for c in gap)
        toks.append(_Tok(m.group(), m.group().lower(), m.start(), m.end(), first, gap))
        prev = m.end()
    return toks


def _dedupe(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = item.lower()
        if item and key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _canonical(toks: Iterable[_Tok]) -> str:
    return " ".join(t.base for t in toks if t.content)


# ---------------------------------------------------------------- entities


@lru_cache(maxsize=16_384)
def _name_key(name: str) -> tuple[str, ...]:
    words = (w.lower() for w in _WORD.findall(normalize(name)))
    return tuple(w[:-2] if w.endswith("'s") else w for w in words)


@lru_cache(maxsize=8)
def _known_keys(
    known: tuple[str, ...],
) -> tuple[tuple[tuple[str, tuple[str, ...]], ...], frozenset[int]]:
    """Each known name with its words' key, and the keys' lengths: worked out once per list
    of names (the store's names change much less often than the questions)."""
    keys = tuple((name, _name_key(name)) for name in known)
    return keys, frozenset(len(key) for _, key in keys if key)


def _known_matches(text: str, known: Sequence[str]) -> list[tuple[int, int, str]]:
    """(start, end, name) of each known name found as whole words, store casing kept."""
    keys, lengths = _known_keys(tuple(known))
    if not lengths:
        return []
    words = [(m.start(), m.end(), m.group().lower()) for m in _WORD.finditer(text)]
    lowered = [w[:-2] if w.endswith("'s") else w for _, _, w in words]
    grams: dict[tuple[str, ...], tuple[int, int]] = {}
    for n in lengths:
        for i in range(len(words) - n + 1):
            grams.setdefault(tuple(lowered[i : i + n]), (words[i][0], words[i + n - 1][1]))
    found = ((grams.get(key), name) for name, key in keys if key)
    return [(span[0], span[1], name) for span, name in found if span is not None]


def _is_identifier(tok: _Tok) -> bool:
    if not tok.ident or not any(c.isalpha() for c in tok.text):
        return False
    if "_" in tok.text or any(c.isdigit() or c.isupper() for c in tok.text):
        return True
    return not any(p in _SKIP or p in _COMMON_PARTS for p in tok.lower.split("-"))


def _nameable(toks: list[_Tok], i: int) -> bool:
    """Whether token `i` may be part of a capitalised name."""
    tok = toks[i]
    if tok.ident or not tok.text[0].isupper() or tok.lower in _SKIP or tok.lower in _WEEKDAYS:
        return False
    if tok.base.lower() in _SKIP or (tok.sentence_start and tok.lower in _STARTERS):
        return False
    if tok.lower in _MONTHS:  # "in March", "May 8" are dates; "June said" is a name
        before = toks[i - 1].lower if i > 0 else ""
        after = toks[i + 1].text if i + 1 < len(toks) else ""
        return before not in _TIME_PREPS and not after[:1].isdigit()
    return True


def _title_case(toks: list[_Tok]) -> bool:
    """Headline or shouting: capitals carry no signal ("What Did Caroline Say About It")."""
    words = [t for t in toks if not t.ident and t.text[0].isalpha()]
    caps = [t for t in words if t.text[0].isupper()]
    stop_caps = any(t.lower in _SKIP and not t.sentence_start for t in caps)
    return len(words) >= 4 and len(caps) >= _TITLE_CASE_SHARE * len(words) and stop_caps


def _capitalised(toks: list[_Tok], *, names: bool) -> list[tuple[int, int, str]]:
    """Identifiers and (when `names`) runs of capitalised words ("Vendor X", "Bank of America")."""
    found: list[tuple[int, int, str]] = []
    run: list[_Tok] = []
    pending: list[_Tok] = []

    def flush() -> None:
        if run:
            name = " ".join([t.text for t in run[:-1]] + [run[-1].base])
            found.append((run[0].start, run[-1].end, name))
        run.clear()
        pending.clear()

    for i, tok in enumerate(toks):
        if tok.gap.strip():
            flush()
        if _is_identifier(tok):
            flush()
            found.append((tok.start, tok.end, tok.text))
        elif names and _nameable(toks, i):
            run.extend(pending)
            pending.clear()
            run.append(tok)
            if tok.base != tok.text:  # a possessive ends the name
                flush()
        elif run and tok.lower in _NAME_CONNECTORS:
            pending.append(tok)
        else:
            flush()
    flush()
    return found


def _entities(
    text: str,
    toks: list[_Tok],
    known: Sequence[str],
    time: TimeMatch | None,
    notes: list[TraceEvent],
) -> tuple[str, ...]:
    known_found = _known_matches(text, known)
    taken = [(s, e) for s, e, _ in known_found]
    if time is not None:
        taken.append((time.start, time.end))
    found = list(known_found)
    names_by_case = not _title_case(toks)
    if not names_by_case:
        notes.append(_said(EventKind.CAPITALISATION_IGNORED))
    extracted = _capitalised(toks, names=names_by_case)
    found += [c for c in extracted if not any(c[0] < e and s < c[1] for s, e in taken)]
    names = _dedupe(name for _, _, name in sorted(found, key=lambda c: c[0]))
    known_keys = {name.lower() for _, _, name in known_found}
    notes.extend(_said(EventKind.ENTITY_KNOWN, entity=n) for n in names if n.lower() in known_keys)
    return tuple(names)


# ---------------------------------------------------------------- classification


def _question_type(lowers: list[str]) -> QuestionType:
    for i, word in enumerate(lowers):
        word = word.removesuffix("'s")
        if word not in QUESTION_WORDS:
            continue
        nxt = lowers[i + 1] if i + 1 < len(lowers) else ""
        if word == "how":
            if nxt == "come":
                return QuestionType.WHY
            ago = nxt == "long" and lowers[i + 2 : i + 3] == ["ago"]
            return QuestionType.WHEN if ago else QuestionType.HOW
        if word in ("what", "which"):
            return QuestionType.WHEN if nxt in _WHEN_NOUNS else QuestionType.WHAT
        return QuestionType.WHO if word in ("whom", "whose") else QuestionType(word)
    return QuestionType.OTHER


def _cue(lowers: list[str], words: frozenset[str], pairs: frozenset[tuple[str, str]]) -> str:
    for i, word in enumerate(lowers):
        if word in words:
            return word
        if i + 1 < len(lowers) and (word, lowers[i + 1]) in pairs:
            return f"{word} {lowers[i + 1]}"
    return ""


def _parts(toks: list[_Tok]) -> list[list[_Tok]]:
    """Clauses: split at "?" and ";", and at "and"/"or"/"," before a question word or verb."""
    parts: list[list[_Tok]] = [[]]
    for i, tok in enumerate(toks):
        nxt = toks[i + 1].lower if i + 1 < len(toks) else ""
        conj = tok.lower in ("and", "or") and nxt in _CLAUSE_STARTERS
        comma = "," in tok.gap and tok.lower in _CLAUSE_STARTERS
        if parts[-1] and (conj or comma or any(c in _CLAUSE_BREAK for c in tok.gap)):
            parts.append([])
        if not conj:
            parts[-1].append(tok)
    return [p for p in parts if any(t.content for t in p)]


def _intent(
    lowers: list[str], entities: tuple[str, ...], n_parts: int, time: TimeMatch | None
) -> tuple[Intent, TraceEvent | None]:
    """The intent, and the event that says what it was read from (None: direct)."""
    if time is not None:
        return Intent.EPISODIC, _said(EventKind.TIME_WINDOW, phrase=time.phrase)
    cue = _cue(lowers, _EPISODIC_CUES, _EPISODIC_PAIRS)
    if cue:
        return Intent.EPISODIC, _said(EventKind.EPISODIC_CUE, cue=cue)
    if len(entities) >= 2:
        return Intent.MULTI_HOP, _said(EventKind.MULTI_HOP_ENTITIES, count=len(entities))
    cue = _cue(lowers, _RELATIONAL_CUES, _CUE_PAIRS)
    if cue:
        return Intent.MULTI_HOP, _said(EventKind.MULTI_HOP_CUE, cue=cue)
    if n_parts >= 2:
        return Intent.MULTI_HOP, _said(EventKind.MULTI_HOP_PARTS, count=n_parts)
    return Intent.DIRECT, None


def _said(kind: EventKind, **values: str | int) -> TraceEvent:
    return event(Stage.PLANNER, kind, **values)


def _strategy(
    intent: Intent, expand: bool | None, n_entities: int, hop_budget: int, max_hops: int
) -> tuple[Strategy, int]:
    if intent is Intent.EPISODIC:
        strategy = Strategy.EPISODIC
    elif expand or (expand is None and intent is Intent.MULTI_HOP):
        strategy = Strategy.EXPANDED
    else:
        strategy = Strategy.DIRECT
    if strategy is Strategy.DIRECT or expand is False:
        return strategy, 0
    cap = max(0, max_hops)
    hops = min(max(0, hop_budget), cap)
    if intent is Intent.MULTI_HOP and n_entities >= 3:
        hops = min(hops + 1, cap)
    return strategy, hops


def _procedural(lowers: list[str]) -> bool:
    """Asks for a procedure: "how to ...", "how do/can I ...", "steps to ..."."""
    for i, word in enumerate(lowers[:-1]):
        pair = (word, lowers[i + 1])
        if pair in _PROCEDURAL_PAIRS:
            return True
        subject = lowers[i + 2] if i + 2 < len(lowers) else ""
        if word == "how" and pair[1] in _HOW_AUX and subject in _HOW_SUBJECTS:
            return True
    return False


def _semantic(lowers: list[str]) -> bool:
    """Asks for a fact or definition: "what is ...", "who was ...", "definition of ..."."""
    if any(w in _SEMANTIC_WORDS for w in lowers):
        return True
    return any(p in _DEFINE_PAIRS for p in pairwise(lowers))


def _preferred_types(
    lowers: list[str], intent: Intent, qtype: QuestionType
) -> tuple[MemoryType, ...]:
    types: list[MemoryType] = []
    if intent is Intent.EPISODIC or qtype is QuestionType.WHEN:
        types.append(MemoryType.EPISODIC)
    if _procedural(lowers):
        types.append(MemoryType.PROCEDURAL)
    if _semantic(lowers):
        types.append(MemoryType.SEMANTIC)
    return tuple(types)


# ---------------------------------------------------------------- decomposition


def _entity_subqueries(
    entities: tuple[str, ...], keywords: Sequence[str], time: TimeMatch | None
) -> list[str]:
    """One subquery per entity plus the words that are neither entity nor time phrase."""
    skip = {w for e in entities for w in _name_key(e)}
    if time is not None:
        skip.update(_name_key(time.phrase))
    rest = " ".join(k for k in keywords if k not in skip)
    return [f"{e} {rest}".strip() for e in entities]


def _task_subquery(task: str | None) -> str:
    if not task:
        return ""
    words = _dedupe(t.base for t in _tokenize(normalize(task)) if t.content)
    return " ".join(words[:_MAX_TASK_WORDS])


def _subqueries(candidates: Iterable[str], task_query: str, limit: int) -> tuple[str, ...]:
    out = _dedupe(q.strip() for q in candidates)[: max(1, limit)]
    if task_query and len(out) < limit and task_query.lower() not in {q.lower() for q in out}:
        out.append(task_query)
    return tuple(out)


def _confidence(
    n_terms: int,
    n_entities: int,
    qtype: QuestionType,
    reason: TraceEvent | None,
    time: TimeMatch | None,
) -> float:
    if n_terms == 0:
        return 0.15
    score = 0.45
    score += 0.15 if n_entities else 0.0
    score += 0.1 if qtype is not QuestionType.OTHER else 0.0
    score += 0.1 if reason is not None else 0.0
    score += 0.05 if time is not None else 0.0
    score += 0.1 if n_terms >= 2 else 0.0
    score -= 0.2 if n_terms > _LONG_QUERY_TERMS else 0.0
    return round(min(max(score, 0.0), 0.95), 3)


# ---------------------------------------------------------------- the planner

# Hops a planned expansion walks (one more when the question links three or more names):
# one hop reaches what is linked to the best candidates themselves; a second is for
# questions that chain names, and further ones mostly bring memories about something else.
HOP_BUDGET = 1
# Searches a question is split into, at most: the whole question, then its parts or names.
# Each is a store call and a list in the fusion; past a few, the later parts repeat the
# earlier ones' words.
MAX_SUBQUERIES = 4


def plan_query(
    query: str,
    *,
    task: str | None = None,
    now: datetime,
    known_entities: Sequence[str] = (),
    hop_budget: int = HOP_BUDGET,
    max_hops: int = 3,
    max_subqueries: int = MAX_SUBQUERIES,
    expand: bool | None = None,
    fuzzy_names: bool = True,
    day_first: bool = False,
) -> QueryPlan:
    """Plan one request. `now` is the reference time (`as_of` or the clock; naive = UTC).
    With `fuzzy_names`, a name the store does not know but spells another way is read as the
    store's name (`pipeline/names.py`)."""
    notes: list[TraceEvent] = []
    text = normalize(query)
    if fuzzy_names and known_entities:
        text, read = read_names(text, known_entities, _SKIP | _STARTERS)
        notes.extend(read)
    toks = _tokenize(text)
    lowers = [t.lower for t in toks]
    time = find_time_window(text, now, day_first=day_first)
    keywords = _dedupe(w.removesuffix("'s") for w in content_words(text) if w not in QUESTION_WORDS)
    terms = tuple(_dedupe(s for s in (stem(k) for k in keywords) if s))
    canonical = _canonical(toks)
    if not canonical:
        notes.append(_said(EventKind.NO_CONTENT_TERMS))
        canonical = text
    entities = _entities(text, toks, known_entities, time, notes)
    qtype = _question_type(lowers)
    parts = _parts(toks)
    intent, reason = _intent(lowers, entities, len(parts), time)
    if reason is not None:
        notes.append(reason)
    strategy, hops = _strategy(intent, expand, len(entities), hop_budget, max_hops)
    if expand is False and strategy is Strategy.EPISODIC:
        notes.append(_said(EventKind.NO_GRAPH_HOPS))

    subqueries = _planned_subqueries(
        canonical, toks, parts, entities, keywords, time, task, max_subqueries, notes
    )
    return QueryPlan(
        raw_query=query,
        canonical_query=canonical,
        terms=terms,
        keywords=tuple(keywords),
        entities=entities,
        intent=intent,
        question_type=qtype,
        time_window=time.window if time else None,
        time_phrase=time.phrase if time else None,
        subqueries=subqueries,
        strategy=strategy,
        hop_budget=hops,
        preferred_types=_preferred_types(lowers, intent, qtype),
        confidence=_confidence(len(terms), len(entities), qtype, reason, time),
        events=tuple(notes),
    )


def _planned_subqueries(
    canonical: str,
    toks: Sequence[_Tok],
    parts: Sequence[Sequence[_Tok]],
    entities: tuple[str, ...],
    keywords: Sequence[str],
    time: TimeMatch | None,
    task: str | None,
    most: int,
    notes: list[TraceEvent],
) -> tuple[str, ...]:
    """The canonical query, then each clause, each entity's own question, the query without
    its time phrase, and the task (lowest priority), at most `most` of them."""
    candidates = [canonical]
    if len(parts) >= 2:
        candidates += [_canonical(p) for p in parts]
    if len(entities) >= 2:
        candidates += _entity_subqueries(entities, keywords, time)
    if time is not None:
        candidates.append(_canonical(t for t in toks if t.end <= time.start or t.start >= time.end))
    task_query = _task_subquery(task)
    subqueries = _subqueries(candidates, task_query, most)
    if task_query and task_query in subqueries:
        notes.append(_said(EventKind.TASK_SUBQUERY))
    return subqueries


def _chatty(word: str) -> bool:
    return word in _CHAT_OPENERS or word.endswith(_GRAMMAR_ENDINGS)


def extract_entities(text: str, known: Sequence[str] = (), *, most: int = 50) -> tuple[str, ...]:
    """The entity names in a memory's text, by the planner's own rules (names the store
    already knows, runs of capitalised words, identifiers such as `atlas-core` or `VX-1142`),
    in the order they appear, at most `most`. What a write without entities is given, so
    that linking, `memory_expand` by entity and the cross-reference boost work for the
    content-only memories agents write.

    A memory is prose, where every sentence opens with a capital, so a capitalised word that
    opens a sentence is weak evidence: alone it counts only when the store knows it, when the
    text capitalises it elsewhere too, when it labels a speaker ("Dana: ..."), or when it
    has capitals or digits inside ("RabbitMQ"); a run it opens loses it when it reads as
    chat or grammar ("Yeah John" is John, "Honestly the Redis" is Redis)."""
    normalized = normalize(text)
    toks = _tokenize(normalized)
    known_found = _known_matches(normalized, known)
    taken = [(s, e) for s, e, _ in known_found]
    mid = {t.lower for t in toks if not t.sentence_start and t.text[:1].isupper()}
    found = list(known_found)
    for start, end, name in _capitalised(toks, names=not _title_case(toks)):
        if any(start < e and s < end for s, e in taken):
            continue
        span = [t for t in toks if start <= t.start and t.end <= end]
        first = span[0] if span else None
        if first is None or not first.sentence_start or first.ident or first.lower in mid:
            found.append((start, end, name))
        elif len(span) == 1:
            inner = any(c.isupper() or c.isdigit() for c in first.text[1:])
            if inner or normalized[end : end + 1] == ":":
                found.append((start, end, name))
        elif _chatty(first.lower):
            rest = [t for t in span[1:]]
            while rest and rest[0].lower in _NAME_CONNECTORS:
                rest.pop(0)
            if rest:
                found.append((rest[0].start, end, name[rest[0].start - start :]))
        else:
            found.append((start, end, name))
    names = _dedupe(name for _, _, name in sorted(found, key=lambda c: c[0]))
    return tuple(names[:most])

"""The derived local index: BM25 with a context window over memories in time order."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memory_orchestrator.derived.local_index import LocalIndex
from memory_orchestrator.models import Memory, MemoryType
from memory_orchestrator.text import terms
from tests.factories import NOW


def turn(mem_id: str, content: str, minute: int) -> Memory:
    return Memory(
        id=mem_id,
        content=content,
        type=MemoryType.EPISODIC,
        created_at=NOW + timedelta(minutes=minute),
    )


CHAT = [
    turn("t1", "Mel: we love painting together on weekends", 1),
    turn("t2", "Mel: here is our latest work, a sunset over the lake", 2),
    turn("t3", "Car: the support group met on Tuesday", 3),
    turn("t4", "Car: my grandma gave me this necklace", 4),
    turn("t5", "Mel: the kids went to the dinosaur exhibit", 5),
]


def ids(index: LocalIndex, query: str, k: int = 5) -> list[str]:
    return [i for i, _ in index.search(query, k)]


def test_a_turn_is_found_through_the_words_of_the_turn_next_to_it() -> None:
    alone = LocalIndex(context_weight=0.0)
    alone.add(CHAT)
    assert "t2" not in ids(alone, "painting")  # t2 itself never says "painting"
    index = LocalIndex(context_weight=0.5)
    index.add(list(reversed(CHAT)))  # insertion order does not matter: time order does
    found = ids(index, "painting")
    assert found[0] == "t1"  # its own words still count most
    assert "t2" in found  # the next turn, through its neighbour
    assert "t4" not in found


def test_time_order_not_insertion_order_defines_the_neighbours() -> None:
    index = LocalIndex(context_weight=1.0)
    index.add([CHAT[0], CHAT[4], CHAT[1]])  # t5 was written before t2 but happened after it
    assert ids(index, "exhibit") == ["t5", "t2"]  # t2 is t5's neighbour in time, t1 is not


def test_changes_replace_and_settings_rebuild() -> None:
    index = LocalIndex(context_weight=0.0)
    index.add(CHAT)
    assert index.add(CHAT) == 0
    assert index.add([turn("t3", "Car: the choir met on Friday", 3)]) == 1
    assert ids(index, "support group") == []
    assert ids(index, "choir") == ["t3"]
    index.configure(context_weight=1.0, k1=1.2, b=0.75)
    assert "t2" in ids(index, "choir")
    assert len(index) == 5


def test_bounds_and_empty_queries() -> None:
    index = LocalIndex(max_memories=2)
    index.add(CHAT)
    assert len(index) == 2
    assert index.search("the of and", 5) == []  # stop words only
    assert index.search("painting", 0) == []
    assert LocalIndex().search("painting", 5) == []


def test_around_gives_the_neighbours_in_time_of_known_memories() -> None:
    index = LocalIndex()
    index.add(list(reversed(CHAT)))
    around = index.around(["t1", "t3", "nope"])
    assert [m.id for m in around["t1"]] == ["t2"]
    assert [m.id for m in around["t3"]] == ["t2", "t4"]
    assert "nope" not in around


def test_around_follows_the_index_when_a_text_changes_or_a_memory_comes_in_between() -> None:
    index = LocalIndex()
    index.add(CHAT)
    assert [m.content for m in index.around(["t3"])["t3"]] == [CHAT[1].content, CHAT[3].content]
    edited = turn("t2", "Mel: the sunset painting is finished", 2)
    index.add([edited, turn("t3b", "Car: it met at noon", 3)])  # t3b: after t3, before t4
    around = index.around(["t3", "t1"])
    assert [m.content for m in around["t3"]] == [edited.content, "Car: it met at noon"]
    assert [m.content for m in around["t1"]] == [edited.content]


def test_a_wider_radius_reaches_the_second_neighbour_at_a_lower_weight() -> None:
    near = LocalIndex(context_weight=1.0, radius=1)
    near.add(CHAT)
    assert "t3" not in ids(near, "painting")  # two turns after the one that says it
    wide = LocalIndex(context_weight=1.0, radius=2)
    wide.add(CHAT)
    scores = dict(wide.search("painting", 5))
    assert "t3" in scores
    assert scores["t1"] > scores["t2"] > scores["t3"]


def test_date_terms_let_a_question_that_names_the_date_find_what_was_said_then() -> None:
    from datetime import UTC, datetime

    from memory_orchestrator.derived.local_index import date_words

    assert date_words(datetime(2023, 5, 8, 13, 56, tzinfo=UTC)) == "8 May 2023"
    may = Memory(
        id="may", content="Mel: we went camping", created_at=datetime(2023, 5, 8, tzinfo=UTC)
    )
    july = Memory(
        id="jul", content="Mel: we went camping", created_at=datetime(2023, 7, 2, tzinfo=UTC)
    )
    plain = LocalIndex(context_weight=0.0)
    plain.add([may, july])
    scores = dict(plain.search("camping in July 2023", 2))
    assert scores["may"] == scores["jul"]  # without dates, the two are the same words
    dated = LocalIndex(context_weight=0.0, date_terms=True)
    dated.add([may, july])
    assert ids(dated, "camping in July 2023")[0] == "jul"
    assert ids(dated, "what happened on 8 May?")[0] == "may"


def test_neighbours_lend_their_words_only_within_a_session() -> None:
    """Turns minutes apart share context; facts written a day apart do not."""
    from memory_orchestrator.derived.local_index import sessions

    facts = [
        turn("f1", "We decided to use Kafka for the event bus", 0),
        turn("f2", "Priya is the tech lead for Atlas", 60 * 24),
        turn("f3", "The billing rate limit is 100 requests a minute", 60 * 48),
    ]
    assert sessions(facts, 1800) == [0, 1, 2]
    assert sessions(facts, None) == sessions(facts, 0) == [0, 0, 0]
    assert sessions(CHAT, 1800) == [0, 0, 0, 0, 0]
    apart = LocalIndex(context_weight=1.0, radius=2, context_gap_s=1800)
    apart.add(facts)
    assert ids(apart, "kafka") == ["f1"]  # f2 does not borrow f1's words
    assert apart.around(["f2"]) == {"f2": []}
    together = LocalIndex(context_weight=1.0, radius=2)  # no sessions: every neighbour lends
    together.add(facts)
    assert ids(together, "kafka")[:2] == ["f1", "f2"]
    chat = LocalIndex(context_weight=0.5, context_gap_s=1800)
    chat.add(CHAT)
    assert "t2" in ids(chat, "painting")  # a conversation still lends within its session
    assert [m.id for m in chat.around(["t2"])["t2"]] == ["t1", "t3"]


# ---------------------------------------------------------------- the same scores as a loop


def _per_posting_search(
    memories: list[Memory], query: str, k: int, *, w: float, radius: int, k1: float, b: float
) -> list[tuple[str, float]]:
    """BM25 with a context window as a plain loop over dicts of postings: the definition the
    numpy index must match to the last bit (it is what the index computed before numpy)."""
    import math
    from collections import Counter

    from memory_orchestrator.derived.local_index import sessions

    seq = {m.id: n for n, m in enumerate(memories)}
    order = sorted(memories, key=lambda m: (m.created_at, seq[m.id]))
    counts = {m.id: Counter(terms(f"{m.content} {' '.join(m.entities)}")) for m in order}
    session = sessions(order, 1800)
    postings: dict[str, list[tuple[str, float]]] = {}
    length: dict[str, float] = {}
    for i, memory in enumerate(order):
        tf: dict[str, float] = {}
        for distance in range(1, radius + 1) if w > 0 else ():
            for j in (i - distance, i + distance):
                if 0 <= j < len(order) and session[j] == session[i]:
                    for term, count in counts[order[j].id].items():
                        tf[term] = tf.get(term, 0.0) + w / distance * count
        for term, count in counts[memory.id].items():
            tf[term] = tf.get(term, 0.0) + count
        length[memory.id] = sum(tf.values())
        for term, weight in tf.items():
            postings.setdefault(term, []).append((memory.id, weight))
    average, n = sum(length.values()) / len(length), len(length)
    scores: dict[str, float] = {}
    for term in dict.fromkeys(terms(query)):
        posting = postings.get(term, [])
        idf = math.log(1.0 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
        for memory_id, tf_ in posting:
            norm = k1 * (1 - b + b * length[memory_id] / average)
            scores[memory_id] = scores.get(memory_id, 0.0) + idf * tf_ * (k1 + 1) / (tf_ + norm)
    best = sorted(scores.items(), key=lambda item: (-item[1], seq[item[0]]))[:k]
    return [(i, s) for i, s in best]


def test_scores_and_ties_equal_a_per_posting_loop_to_the_last_bit() -> None:
    """Context weights whose products are not binary fractions (0.3 / 3) and sessions too:
    the numpy index adds the same numbers in the same order, ties in listing order."""
    import random

    rng = random.Random(5)
    words = "paint lake sunset kids dinosaur necklace grandma choir group tuesday".split()
    memories = [
        turn(
            f"m{n}", " ".join(rng.choices(words, k=rng.randint(1, 9))), rng.choice(range(0, 400, 7))
        )
        for n in range(300)
    ]  # many share a minute: ties in time, and in score
    queries = ["paint the lake", "kids kids dinosaur", "choir on tuesday", "grandma", "nothing"]
    for w, radius, k1, b in [(0.75, 3, 0.9, 0.75), (0.3, 5, 1.5, 0.3), (0.0, 1, 1.2, 1.0)]:
        index = LocalIndex(context_weight=w, radius=radius, k1=k1, b=b, context_gap_s=1800)
        index.add(memories)
        for query in queries:
            for k in (1, 10, 300):
                expected = _per_posting_search(memories, query, k, w=w, radius=radius, k1=k1, b=b)
                found = index.search(query, k)
                assert found == [(i, round(s, 6)) for i, s in expected]
            # unrounded: every memory's score, bit for bit
            exact = dict(_per_posting_search(memories, query, 300, w=w, radius=radius, k1=k1, b=b))
            positions, scores = index._bm25(list(dict.fromkeys(terms(query))))
            found_scores = {index.id_at(p): s for p, s in zip(positions, scores, strict=True)}
            assert found_scores == exact


def test_memories_added_after_the_others_give_what_a_whole_build_gives() -> None:
    """New memories (later in time) are appended: the last `radius` memories and the new
    ones are worked out apart; scores, ties and neighbours as if built at once, bit for bit."""
    import random

    rng = random.Random(8)
    words = "paint lake sunset kids dinosaur necklace grandma choir group tuesday".split()
    memories = [
        turn(f"m{n}", " ".join(rng.choices(words, k=rng.randint(1, 9))), n // 3 + (n // 40) * 60)
        for n in range(400)
    ]  # three turns a minute, a new session every 40 turns
    for w, radius in [(0.75, 3), (0.3, 5), (0.0, 1)]:
        grown = LocalIndex(context_weight=w, radius=radius, k1=0.9, context_gap_s=1800)
        grown.add(memories[:100])
        grown.prepare()
        for start in range(100, 400, 37):  # a few at a time, as the store's feed adds them
            grown.add(memories[start : start + 37])
            whole = LocalIndex(context_weight=w, radius=radius, k1=0.9, context_gap_s=1800)
            whole.add(memories[: start + 37])
            for query in ["paint the lake", "kids dinosaur", "choir tuesday group", "grandma"]:
                wanted = list(dict.fromkeys(terms(query)))
                assert grown.search(query, 50) == whole.search(query, 50)
                got, want = grown._bm25(wanted), whole._bm25(wanted)
                assert got[0].tolist() == want[0].tolist()
                assert got[1].tolist() == want[1].tolist()
            ids = [m.id for m in memories[start - 5 : start + 37]]
            assert grown.around(ids) == whole.around(ids)
        assert grown._tail is not None  # (appended, not built again)
    earlier = turn("early", "paint the lake", -5)  # dated before the others: built again
    grown.add([earlier])
    grown.prepare()
    assert grown._tail is None
    assert ids_of(grown, "paint lake") == ids_of(_whole([*memories, earlier]), "paint lake")


def ids_of(index: LocalIndex, query: str) -> list[str]:
    return [i for i, _ in index.search(query, 20)]


def _whole(memories: list[Memory]) -> LocalIndex:
    index = LocalIndex(context_weight=0.0, radius=1, k1=0.9, context_gap_s=1800)
    index.add(memories)
    return index


def test_postings_built_in_small_chunks_are_the_same_to_the_last_bit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The postings are worked out a chunk of memories at a time (so that the work arrays
    stay small at any size): chunks of seven give what one pass gives, and what a loop
    gives, bit for bit, appended tail included."""
    import random

    from memory_orchestrator.derived import postings

    rng = random.Random(11)
    words = "paint lake sunset kids dinosaur necklace grandma choir group tuesday".split()
    memories = [
        turn(f"m{n}", " ".join(rng.choices(words, k=rng.randint(1, 9))), n // 2 + (n // 30) * 60)
        for n in range(200)
    ]
    query = "paint the lake with the kids on tuesday"
    wanted = list(dict.fromkeys(terms(query)))

    def built(chunk: int) -> LocalIndex:
        monkeypatch.setattr(postings, "_CHUNK", chunk)
        index = LocalIndex(context_weight=0.3, radius=3, k1=0.9, context_gap_s=1800)
        index.add(memories[:150])
        index.prepare()
        index.add(memories[150:])  # after the others: a tail, worked out apart
        index.prepare()
        return index

    whole, chunked = built(1 << 30), built(7)
    assert chunked._tail is not None
    for a, b in ((whole._main, chunked._main), (whole._tail, chunked._tail)):
        assert a is not None
        assert b is not None
        for name in ("start", "position", "tf", "length"):
            assert getattr(a, name).tolist() == getattr(b, name).tolist(), name
    assert [a.tolist() for a in whole._bm25(wanted)] == [b.tolist() for b in chunked._bm25(wanted)]
    expected = _per_posting_search(memories, query, 50, w=0.3, radius=3, k1=0.9, b=0.75)
    assert chunked.search(query, 50) == [(i, round(s, 6)) for i, s in expected]

"""`cut_at_word`, the one way a long query is shortened."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memory_orchestrator.text import cut_at_word
from tests.property.support import PROPS, TEXT


@PROPS
@given(text=TEXT, limit=st.integers(1, 300))
def test_a_cut_is_a_prefix_within_the_limit_ending_at_a_word_boundary(
    text: str, limit: int
) -> None:
    cut = cut_at_word(text, limit)
    assert len(cut) <= limit
    assert text.startswith(cut)
    if len(text) <= limit:
        assert cut == text
        return
    assert cut
    head = text[:limit]
    if any(c.isspace() for c in head.strip()):  # a boundary exists: no word is split
        rest = text[len(cut) :]
        assert rest[:1].isspace()
        assert not cut[-1:].isspace()


def test_examples() -> None:
    assert cut_at_word("alpha beta gamma", 12) == "alpha beta"
    assert cut_at_word("alpha beta gamma", 11) == "alpha beta"
    assert cut_at_word("alpha beta gamma", 10) == "alpha beta"
    assert cut_at_word("alphabetagamma", 5) == "alpha"  # one long word: cut inside
    assert cut_at_word("short", 100) == "short"

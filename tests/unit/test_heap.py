"""The heap settled for a long-lived server (`service.heap`)."""

from __future__ import annotations

import gc

from memory_orchestrator.service.heap import YOUNG, settle_heap


def test_settling_freezes_what_is_alive_and_spaces_out_young_collections() -> None:
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    settle_heap()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (YOUNG, 10, 10)


def test_settling_never_brings_collections_closer_nor_turns_them_on() -> None:
    gc.set_threshold(50_000, 5, 5)
    settle_heap()
    assert gc.get_threshold() == (50_000, 5, 5)
    gc.set_threshold(0, 10, 10)  # (a threshold of 0: the process turned collections off)
    settle_heap()
    assert gc.get_threshold() == (0, 10, 10)

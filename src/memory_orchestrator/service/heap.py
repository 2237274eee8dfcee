"""Python's cyclic garbage collector, set for a server that lives long and answers often.

With the interpreter's default thresholds a `memory_context` call over a warmed-up store runs
several young collections and, now and then, a full one, which walks everything the server holds
(the store's listing, the derived indexes, the caches) in that request's time
(`bench/bench_heap.py` counts them). Once the server has warmed up, what is alive then, kept for
the life of the process, is collected once and frozen out of later collections (a full
collection then has almost nothing to walk), and young collections come every `YOUNG` new
objects instead of 700. Objects are still freed by their reference counts at once; only cycles
wait longer.
"""

from __future__ import annotations

import gc

YOUNG = 10_000  # new objects between young collections (Python's default: 700)


def settle_heap() -> None:
    """Collect, freeze what is alive, and space out young collections (never closer than
    they were). For a long-lived process after its warm-up (the servers call it once)."""
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    if 0 < young < YOUNG:
        gc.set_threshold(YOUNG, middle, old)

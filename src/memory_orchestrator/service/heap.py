"""Python's cyclic garbage collector, set for a server that lives long and answers often.

A `memory_context` call makes ~20,000 short-lived objects (rows, dicts, the pipeline's
models); with the interpreter's default threshold (a young collection every 700 new
objects) that is ~30 young collections a call, and every tenth of those walks the older
generation too. Once the server has warmed up, what is alive (the store's listing, the
derived indexes, the caches: kept for the life of the process) is collected once and
frozen out of later collections, and young collections come every `YOUNG` new objects:
measured in one process, calls alternating (`docs/explanation/performance.md`), 5,000 and
20,000 cut the same ~0.25 ms off a call's median at 10k memories and ~0.5 ms off its mean.
Objects are still freed by their reference counts at once; only cycles wait longer.
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

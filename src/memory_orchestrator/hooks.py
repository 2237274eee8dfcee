"""A moment a worker thread tells its caller about, as it happens.

The caller sets a callback for a block (`Hook.when`); code running on a worker thread in that
block calls `Hook.now()` at the moment (a store's search statement going to its database, a
model starting to compute) and the callback runs there, on the worker's thread: it must be
thread-safe. The callback is found through a context variable, so the worker must run in a
copy of the caller's context (anyio's worker threads do), or set the block itself.

`Tell` is the same with a message: a callee says something its caller asked to hear (a part of
the store that could not be searched), from any task or thread started in the block.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["Hook", "Tell"]


class Hook:
    def __init__(self, name: str) -> None:
        self._callback: ContextVar[Callable[[], None] | None] = ContextVar(name, default=None)

    def now(self) -> None:
        """The moment is now: tell whoever asked in this context, if anyone did."""
        callback = self._callback.get()
        if callback is not None:
            callback()

    @contextmanager
    def when(self, callback: Callable[[], None]) -> Iterator[None]:
        """Within the block, `now()` calls `callback`."""
        token = self._callback.set(callback)
        try:
            yield
        finally:
            self._callback.reset(token)


class Tell:
    def __init__(self, name: str) -> None:
        self._callback: ContextVar[Callable[[str], None] | None] = ContextVar(name, default=None)

    def now(self, message: str) -> None:
        """Tell whoever asked in this context, if anyone did."""
        callback = self._callback.get()
        if callback is not None:
            callback(message)

    @contextmanager
    def when(self, callback: Callable[[str], None]) -> Iterator[None]:
        """Within the block, `now(message)` calls `callback(message)`."""
        token = self._callback.set(callback)
        try:
            yield
        finally:
            self._callback.reset(token)

"""`orchestrator ui` as a real process: started, its URL read from the line it prints, and
stopped. Used by the browser tests, the packaging tests and `bench/bench_ui.py`.

The URL is waited for as an event (a reader thread hands each stdout line over a queue),
within a bound; a process that ends first fails with its stderr.
"""

from __future__ import annotations

import contextlib
import queue
import re
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

__all__ = ["URL_LINE", "inspector"]

URL_LINE = re.compile(r"memory inspector: (http://\S+/)")


@contextlib.contextmanager
def inspector(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    start_timeout_s: float = 120.0,
) -> Iterator[str]:
    """Run `argv` (an `orchestrator ... ui --port 0 ...` command) and yield the URL it
    prints; terminate it afterwards."""
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    errors: list[str] = []

    def read(stream: object, sink: queue.Queue[str | None] | list[str]) -> None:
        for line in iter(stream.readline, ""):  # type: ignore[attr-defined]
            if isinstance(sink, list):
                sink.append(line)
            else:
                sink.put(line)
        if not isinstance(sink, list):
            sink.put(None)

    readers = [
        threading.Thread(target=read, args=(process.stdout, lines), daemon=True),
        threading.Thread(target=read, args=(process.stderr, errors), daemon=True),
    ]
    for reader in readers:
        reader.start()

    def stderr() -> str:
        process.wait(timeout=30)
        readers[1].join(timeout=10)
        return "".join(errors)

    try:
        url = _url(lines, start_timeout_s, process, stderr)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
        for reader in readers:
            reader.join(timeout=10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def _url(
    lines: queue.Queue[str | None],
    timeout_s: float,
    process: subprocess.Popen[str],
    stderr: Callable[[], str],
) -> str:
    while True:
        try:
            line = lines.get(timeout=timeout_s)
        except queue.Empty:
            raise TimeoutError(f"`orchestrator ui` printed no URL within {timeout_s:g} s") from None
        if line is None:
            said = stderr()
            raise RuntimeError(f"`orchestrator ui` ended (exit {process.returncode}): {said}")
        found = URL_LINE.search(line)
        if found:
            return found.group(1)

"""`orchestrator ui` as a real process: started, its URL read from the line it prints, and
stopped. Used by the browser tests, the packaging tests and `bench/bench_ui.py`.

The URL is waited for as an event (a reader thread hands each stdout line over a queue),
within a bound; a process that ends first fails with its stderr. By default the line the
inspector prints once it has listed the store, read the traces and checked health
(`memory inspector ready: ...`) is waited for too: until then a page may answer from a part
of the store, which a test that checks what a page shows must not meet.
"""

from __future__ import annotations

import contextlib
import queue
import re
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

__all__ = ["READY_LINE", "URL_LINE", "inspector"]

URL_LINE = re.compile(r"memory inspector: (http://\S+/)")
READY_LINE = re.compile(r"memory inspector ready: ")


@contextlib.contextmanager
def inspector(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    start_timeout_s: float = 120.0,
    ready: bool = True,
) -> Iterator[str]:
    """Run `argv` (an `orchestrator ... ui --port 0 ...` command) and yield the URL it
    prints (`ready`: once it also says it is ready); terminate it afterwards."""
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
        url = _line(lines, URL_LINE, start_timeout_s, process, stderr).group(1)
        if ready:
            _line(lines, READY_LINE, start_timeout_s, process, stderr)
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


def _line(
    lines: queue.Queue[str | None],
    wanted: re.Pattern[str],
    timeout_s: float,
    process: subprocess.Popen[str],
    stderr: Callable[[], str],
) -> re.Match[str]:
    """The first line of stdout that `wanted` finds, waited for as an event."""
    while True:
        try:
            line = lines.get(timeout=timeout_s)
        except queue.Empty:
            raise TimeoutError(
                f"`orchestrator ui` printed no line like {wanted.pattern!r} within {timeout_s:g} s"
            ) from None
        if line is None:
            said = stderr()
            raise RuntimeError(f"`orchestrator ui` ended (exit {process.returncode}): {said}")
        found = wanted.search(line)
        if found:
            return found

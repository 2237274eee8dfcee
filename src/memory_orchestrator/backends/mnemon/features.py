"""What the installed `mnemon` can do, learned from how it answers, never from its version.

A build from source prints `mnemon version dev` (only release builds carry a number), so the
version string says nothing about what a binary can do. Every call is made as on a current
build; when the binary answers that it lacks the command, flag or edge type used
(`unknown command "show"`, `unknown flag: --verbose`, `invalid edge type "supersedes"`),
`Features.missing` remembers that, notes the fallback once (for traces and health), and the
caller retries with the fallback. `--version` is asked only for health.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from memory_orchestrator.backends.mnemon.process import Cached, MnemonRunner, error_message
from memory_orchestrator.errors import BackendError

T = TypeVar("T")

# How a binary without the feature answers (Cobra's and Mnemon's own texts).
REFUSALS = {
    "show": 'unknown command "show"',
    "import": 'unknown command "import"',
    "verbose": "unknown flag: --verbose",
    "no-diff": "unknown flag: --no-diff",
    "supersedes": 'invalid edge type "supersedes"',
}


@dataclass(frozen=True)
class MnemonVersion:
    """What `mnemon --version` said; `parts` is None for builds without a release number
    (`dev`, a build from source)."""

    text: str
    parts: tuple[int, int, int] | None

    @classmethod
    def parse(cls, output: str) -> MnemonVersion:
        match = re.search(r"version\s+v?(\S+)", output)
        text = match.group(1) if match else output.strip()[:40]
        numbers = re.match(r"(\d+)\.(\d+)\.(\d+)", text)
        if numbers is None:
            return cls(text or "unknown", None)
        major, minor, patch = (int(n) for n in numbers.groups())
        return cls(text, (major, minor, patch))


class Features:
    """What the binary `runner` starts has shown it lacks; `note` receives each fallback
    taken. The version (`--version`, for health) is asked once per `ttl_s`."""

    def __init__(self, runner: MnemonRunner, ttl_s: float, note: Callable[[str], None]) -> None:
        self._runner = runner
        self._note = note
        self._missing: set[str] = set()
        self._seen: set[str] = set()
        self._version = Cached(self._fetch, ttl_s)

    async def version(self) -> MnemonVersion:
        """`mnemon --version`, cached (one process for concurrent first calls)."""
        return await self._version.get()

    async def _fetch(self) -> MnemonVersion:
        argv = [str(self._runner.binary()), "--version"]
        timeout = self._runner.settings.timeout_s
        code, out, err = await self._runner.spawn(argv, "--version", timeout)
        if code != 0:
            raise BackendError(f"mnemon --version failed (exit {code}): {error_message(err)}")
        return MnemonVersion.parse(out.decode(errors="replace"))

    def has(self, feature: str) -> bool:
        """False once the binary has answered that it lacks `feature`."""
        return feature not in self._missing

    def seen(self, feature: str) -> bool:
        """Whether a call using `feature` has succeeded (it is there, not only not refused)."""
        return feature in self._seen

    def saw(self, feature: str) -> None:
        self._seen.add(feature)

    def missing(self, feature: str, error: BackendError, fallback: str) -> bool:
        """Whether `error` is the binary saying it lacks `feature`; if so that is remembered
        and `fallback` (what is done instead) is noted."""
        if REFUSALS[feature] not in str(error):
            return False
        self._missing.add(feature)
        self._note(f"this mnemon has no `{feature}` ({REFUSALS[feature]}); {fallback}")
        return True

    async def or_else(
        self,
        feature: str,
        fallback: str,
        first: Callable[[], Awaitable[T]],
        instead: Callable[[], Awaitable[T]],
    ) -> T:
        """`first()`, which uses `feature`; `instead()` when the binary has answered (now or
        before) that it lacks it (`missing` notes `fallback` once)."""
        if self.has(feature):
            try:
                return await first()
            except BackendError as exc:
                if not self.missing(feature, exc, fallback):
                    raise
        return await instead()

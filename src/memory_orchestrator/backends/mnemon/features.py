"""What the installed `mnemon` can do, from `mnemon --version`.

Commands and flags came in over Mnemon's releases (`FEATURES`); 0.2.x has them all. A build
without a release number (`mnemon version dev`, a build from source) is taken to be current.
When a feature is missing, the adapter uses a fallback and `Features.has` notes it once, for
traces and health.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from memory_orchestrator.backends.mnemon.process import Cached, MnemonRunner, error_message
from memory_orchestrator.errors import BackendError

# Commands (and flags) by the first version known to have them; 0.2.x has all of these.
FEATURES = {
    "show": (0, 2, 0),
    "supersedes": (0, 2, 0),
    "import": (0, 1, 10),
    "verbose": (0, 1, 9),
    "entity-mode": (0, 1, 4),
}


@dataclass(frozen=True)
class MnemonVersion:
    """What `mnemon --version` said; `parts` is None for builds without a release number."""

    text: str
    parts: tuple[int, int, int] | None

    def has(self, feature: str) -> bool:
        return self.parts is None or self.parts >= FEATURES[feature]

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
    """The version of the binary `runner` starts (asked once per `ttl_s`), and whether it has
    a feature; `note` receives each fallback taken."""

    def __init__(self, runner: MnemonRunner, ttl_s: float, note: Callable[[str], None]) -> None:
        self._runner = runner
        self._note = note
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
        found = MnemonVersion.parse(out.decode(errors="replace"))
        if found.parts is None:
            self._note(f"mnemon version {found.text!r} has no release number; assuming v0.2.9")
        return found

    async def has(self, feature: str, fallback: str) -> bool:
        """Whether the binary has `feature`; when not, `fallback` (what is done instead) is
        noted."""
        found = await self.version()
        if found.has(feature):
            return True
        self._note(f"mnemon {found.text} has no `{feature}`; {fallback}")
        return False

"""The browser tests' world (module-scoped: Playwright's sync API keeps an event loop in the
main thread while it runs, which the later tests' `anyio.run` must not meet): Debian's
chromium driven by Playwright, and one real `orchestrator ui` process over a copy of the demo store (plus hostile text, a correction and
a memory to forget) and a real `eval --out` folder.

Without chromium these tests skip, saying how to get it (`make browser`: apt-get, as root);
under CI (`CI` set) a missing browser fails them instead, so they always run there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from playwright.sync_api import Browser, ConsoleMessage, Dialog, Page, Playwright, sync_playwright

from memory_orchestrator.demo import load_demo
from memory_orchestrator.models import MemoryType, NewMemory, SearchRequest, WriteRequest
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import load_settings
from tests.inspector_process import inspector

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "tests" / "browser" / "screenshots"  # git-ignored
ORCHESTRATOR = Path(sys.executable).parent / "orchestrator"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

HOSTILE = (
    "<script>alert('xss')</script> hostile notes about the Atlas firmware",
    "<img src=x onerror=alert(1)> hostile firmware image",
    "[docs](javascript:alert(document.cookie)) hostile link javascript:alert(2)",
)
FORGETTABLE = "Temporary note to forget: the parking garage code is 4421."
OLD_LIMIT = "The Atlas API rate limit is 100 requests per minute."
NEW_LIMIT = "The Atlas API rate limit is 500 requests per minute."


def chromium_path() -> str:
    """Debian's chromium, or a skip (outside CI) / a failure (under CI) that says how."""
    found = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if Path(found).is_file():
        return found
    message = (
        f"no chromium at {found}: the browser tests need Debian's chromium; "
        "run `make browser` as root (apt-get install chromium)"
    )
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("ORCHESTRATOR_")}
    env["HOME"] = str(home)
    env["XDG_DATA_HOME"] = str(home / "xdg-data")
    env["ORCHESTRATOR_SEMANTIC__ENABLED"] = "false"  # the same ranking on every machine
    return env


async def _fill(data: Path) -> None:
    """The demo, then what the tests look for, and a few requests to leave traces."""
    orchestrator = Orchestrator.from_settings(load_settings(data_dir=data))
    try:
        await load_demo(orchestrator)
        await orchestrator.ingest(
            [
                NewMemory(
                    content=text,
                    type=MemoryType.EPISODIC,
                    entities=["<b>Evil</b>", "Project Atlas"],
                    source="javascript:alert(4)",
                )
                for text in HOSTILE
            ]
        )
        await orchestrator.ingest(
            [
                NewMemory(content=FORGETTABLE, entities=["Parking"]),
                NewMemory(content=OLD_LIMIT, entities=["Atlas API"]),
            ]
        )
        await orchestrator.write(
            WriteRequest(memory=NewMemory(content=NEW_LIMIT, entities=["Atlas API"]))
        )
        for query in ("recent issues with Vendor X", "how do I deploy atlas-core?"):
            await orchestrator.search(SearchRequest(query=query))
    finally:
        await orchestrator.close()


@dataclass
class World:
    url: str
    data: Path


@pytest.fixture(scope="module")
def chromium() -> str:
    """The browser's path, found first: without one nothing else is set up."""
    return chromium_path()


@pytest.fixture(scope="module")
def world(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    home = tmp_path_factory.mktemp("inspector-user")
    data = home / "demo-data"
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("ORCHESTRATOR_")}
    os.environ["ORCHESTRATOR_SEMANTIC__ENABLED"] = "false"
    try:
        anyio.run(_fill, data)
    finally:
        os.environ.pop("ORCHESTRATOR_SEMANTIC__ENABLED", None)
        os.environ.update(saved)
    evaluated = home / "eval-out"
    done = subprocess.run(
        [str(ORCHESTRATOR), "--data-dir", str(home / "eval-data"), "eval", "--dataset",
         "golden", "--format", "json", "--out", str(evaluated)],
        cwd=home, env=_env(home), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    argv = [
        str(ORCHESTRATOR), "ui", "--data-dir", str(data), "--port", "0",
        "--eval-dir", str(evaluated),
    ]  # fmt: skip
    with inspector(argv, cwd=home, env=_env(home)) as url:
        yield World(url, data)


@pytest.fixture(scope="module")
def playwright(world: World) -> Iterator[Playwright]:
    # after `world`: Playwright's sync API runs an event loop in this thread, and filling
    # the store needs one of its own
    del world
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright, chromium: str) -> Iterator[Browser]:
    # launch() gives every run a fresh temporary profile (user data dir)
    launched = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
    try:
        yield launched
    finally:
        launched.close()


@dataclass
class Watched:
    """A page, and what went wrong in it that a person would not see."""

    page: Page
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def shot(self, name: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


@pytest.fixture
def watched(browser: Browser, world: World) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=world.url)
    page = context.new_page()
    page.set_default_timeout(30_000)
    seen = Watched(page)

    def console(message: ConsoleMessage) -> None:
        if message.type == "error":
            seen.errors.append(message.text)

    def dialog(opened: Dialog) -> None:
        seen.dialogs.append(opened.message)
        opened.dismiss()

    page.on("console", console)
    page.on("pageerror", lambda exc: seen.errors.append(str(exc)))
    page.on("dialog", dialog)
    try:
        yield seen
    finally:
        context.close()
    assert seen.dialogs == [], "a script ran and opened a dialog"
    assert seen.errors == [], "console errors"

"""The inspector in a real browser (Debian's chromium through Playwright), over a real
`orchestrator ui` process and the demo store: a person clicks through every page, searches,
uses the keyboard alone, forgets a memory, and sees hostile memory text as text. Every page
is checked for console errors and script dialogs (`conftest.watched`), and each step saves a
screenshot into `tests/browser/screenshots/` (git-ignored).
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import FORGETTABLE, NEW_LIMIT, OLD_LIMIT, Watched

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.timeout(300)]


def _box_width(page: Page, selector: str) -> float:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, selector
    return float(box["width"])


def test_every_page_is_reached_by_clicking_from_the_memories_page(watched: Watched) -> None:
    page = watched.page
    page.goto("/")
    expect(page.get_by_role("heading", name="Memories", exact=True)).to_be_visible()
    expect(page.locator(".pager").first).to_contain_text(re.compile(r"1\u2013\d+ of \d+"))
    assert page.locator("table.list tbody tr").count() >= 40
    watched.shot("01-memories")

    page.get_by_role("link", name=re.compile("^Vendor X hotfix 2.4.1")).click()
    expect(page).to_have_url(re.compile(r"/memories/mem_\w+$"))
    expect(page.get_by_role("heading", name=re.compile(r"^Edges \(\d+\)"))).to_be_visible()
    expect(page.locator("pre.content")).to_contain_text("Vendor X hotfix 2.4.1 fixes")
    watched.shot("02-memory")

    page.get_by_role("link", name="Graph around this memory").click()
    graph = page.locator("svg#graph")
    expect(graph).to_be_visible()
    assert page.locator("svg#graph a.node").count() >= 3
    assert page.locator("svg#graph line.edge").count() >= 2
    expect(page.locator("ul.legend")).to_contain_text("entity")
    watched.shot("03-graph")
    page.locator("svg#graph a.node").nth(1).click()
    expect(page).to_have_url(re.compile(r"/memories/mem_\w+$"))

    page.get_by_role("navigation", name="Pages").get_by_role("link", name="Requests").click()
    expect(page.get_by_role("heading", name="Requests")).to_be_visible()
    rows = page.locator("table.list tbody tr")
    expect(rows.first).to_contain_text("search")
    watched.shot("04-requests")
    page.get_by_role("row", name=re.compile("how do I deploy atlas-core")).get_by_role(
        "link"
    ).click()
    expect(page.get_by_role("heading", name=re.compile(r"^Candidates \(\d+\)"))).to_be_visible()
    expect(page.get_by_role("heading", name="Plan")).to_be_visible()
    expect(page.get_by_role("heading", name="Time per stage")).to_be_visible()
    assert _box_width(page, "table.candidates rect.part-relevance") > 5
    watched.shot("05-trace")

    page.get_by_role("button", name="Replay against today's store").click()
    expect(page.get_by_role("heading", name=re.compile("^Replay of"))).to_be_visible()
    expect(page.get_by_role("status")).to_contain_text("Identical")
    watched.shot("06-replay")

    page.get_by_role("navigation", name="Pages").get_by_role("link", name="Health").click()
    expect(page.locator("h1 .status")).to_have_text("ok")
    expect(page.get_by_role("heading", name="Requests per tool (kept traces)")).to_be_visible()
    expect(page.get_by_role("row", name=re.compile(r"^search \d+ 0 "))).to_be_visible()
    expect(page.get_by_text("No write waits")).to_be_visible()
    watched.shot("07-health")

    page.get_by_role("navigation", name="Pages").get_by_role("link", name="Eval").click()
    expect(page.get_by_role("heading", name="Systems")).to_be_visible()
    expect(page.get_by_role("row", name=re.compile("^orchestrated "))).to_be_visible()
    plot = page.get_by_role("img", name="recall_at_k.png")
    expect(plot).to_be_visible()
    assert plot.evaluate("img => img.complete && img.naturalWidth > 0")
    watched.shot("08-eval")


def _search(page: Page, query: str) -> None:
    """A search as a person runs it: the box, then Enter (a POST of the page's form)."""
    page.goto("/")
    page.get_by_role("searchbox", name="Search").fill(query)
    page.get_by_role("searchbox", name="Search").press("Enter")


def test_a_search_draws_each_result_s_score_as_a_bar(watched: Watched) -> None:
    page = watched.page
    page.goto("/")
    page.get_by_role("searchbox", name="Search").fill("how do I deploy atlas-core?")
    page.get_by_role("searchbox", name="Search").press("Enter")
    results = page.locator("li.result")
    expect(results.first).to_contain_text("How to deploy atlas-core")
    bar = results.first.locator("svg.bar")
    expect(bar).to_be_visible()
    assert re.match(r"^score \d+\.\d{3}: relevance ", bar.get_attribute("aria-label") or "")
    for part in ("relevance", "recency", "cross_reference"):
        assert _box_width(page, f"li.result svg.bar rect.part-{part}") > 0, part
    expect(results.first.locator(".parts")).to_contain_text("relevance")
    expect(page.get_by_role("link", name=re.compile(r"^why these\? \(trace tr_"))).to_be_visible()
    watched.shot("09-search")


def test_the_inspector_is_usable_from_the_keyboard(watched: Watched) -> None:
    page = watched.page
    page.goto("/")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"

    def tab_to(test: str, most: int = 40) -> None:
        for _ in range(most):
            page.keyboard.press("Tab")
            if page.evaluate(test):
                return
        pytest.fail(f"never reached by Tab: {test}")

    tab_to("document.activeElement.id === 'q'")
    page.keyboard.type("Vendor X firmware")
    page.keyboard.press("Enter")
    expect(page.locator("li.result").first).to_be_visible()
    tab_to("document.activeElement.classList.contains('memory-link')")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none", "the focused link shows no focus ring"
    watched.shot("10-keyboard-focus")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/memories/mem_\w+$"))


def test_hostile_memory_text_is_shown_as_text_in_the_browser(watched: Watched) -> None:
    page = watched.page
    _search(page, "hostile firmware notes")
    expect(page.get_by_text("<script>alert('xss')</script> hostile notes")).to_be_visible()
    expect(page.get_by_text("<img src=x onerror=alert(1)> hostile firmware image")).to_be_visible()
    watched.shot("11-hostile-search")
    page.get_by_role("link", name=re.compile(r"^\[docs\]\(javascript:")).click()
    expect(page.locator("pre.content")).to_have_text(
        "[docs](javascript:alert(document.cookie)) hostile link javascript:alert(2)"
    )
    expect(page.get_by_role("link", name="<b>Evil</b>").first).to_be_visible()
    assert page.evaluate("document.querySelectorAll('script, img[onerror]').length") == 0
    assert page.evaluate("document.querySelectorAll('a[href^=\"javascript:\"]').length") == 0
    watched.shot("12-hostile-memory")
    page.get_by_role("link", name="graph around <b>Evil</b>").click()
    expect(page.locator("svg#graph")).to_be_visible()
    expect(page.locator("svg#graph title").first).to_have_text("The neighbourhood of <b>Evil</b>")


def test_forgetting_a_memory_takes_a_confirmation_and_removes_it(watched: Watched) -> None:
    page = watched.page
    _search(page, "parking garage code")
    page.get_by_role("link", name=FORGETTABLE).click()
    memory_url = page.url
    page.get_by_role("link", name="Forget this memory…").click()
    expect(
        page.get_by_role("heading", name=re.compile(r"^Forget memory mem_\w+\?$"))
    ).to_be_visible()
    watched.shot("13-forget-confirm")
    page.get_by_label("Why").fill("a code that must not be recalled")
    page.get_by_role("button", name="Forget it").click()
    expect(page.get_by_role("heading", name="Forgotten")).to_be_visible()
    expect(page.get_by_role("status")).to_contain_text("1 forgotten: left out of every read")
    watched.shot("14-forgotten")
    answer = page.goto(memory_url)
    assert answer is not None
    assert answer.status == 410
    expect(page.get_by_role("note")).to_contain_text("a code that must not be recalled")
    page.get_by_role("button", name="Undo: bring it back").click()
    expect(page.get_by_role("heading", name="Back")).to_be_visible()
    answer = page.goto(memory_url)
    assert answer is not None
    assert answer.status == 200
    # chromium logs the 410 asked for here as a console error; nothing else may be there
    expected = "Failed to load resource: the server responded with a status of 410 (Gone)"
    assert watched.errors == [expected]
    watched.errors.clear()


def test_a_corrected_memory_says_what_changed_and_is_listed_only_when_asked(
    watched: Watched,
) -> None:
    page = watched.page
    page.goto("/?entity=Atlas+API")
    expect(page.get_by_role("link", name=NEW_LIMIT)).to_be_visible()
    expect(page.get_by_role("link", name=OLD_LIMIT)).to_have_count(0)
    page.get_by_label("show corrected memories").check()
    page.get_by_role("button", name="Apply").click()
    expect(page.get_by_role("link", name=OLD_LIMIT)).to_be_visible()
    expect(page.locator("tr.corrected .badge")).to_have_text("corrected")
    page.get_by_role("link", name=NEW_LIMIT).click()
    expect(page.get_by_role("note")).to_contain_text(
        f"was '{OLD_LIMIT}' (100 -> 500 requests per minute)"
    )
    watched.shot("15-corrected")

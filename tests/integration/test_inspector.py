"""The inspector (`faces/ui`), driven in process over a real embedded store loaded with the
demo: what each page holds, the escaping of untrusted memory text, forget, and the guard
(loopback Host check, tokens, read-only tokens, origin and CSRF checks). What a person sees
in a real browser is tested in `tests/browser`.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from memory_orchestrator import service
from memory_orchestrator.demo import load_demo
from memory_orchestrator.errors import ConfigError
from memory_orchestrator.faces.ui.app import build_app
from memory_orchestrator.models import MemoryType, NewMemory, SearchRequest, WriteRequest
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings, load_settings
from memory_orchestrator.state import shared as shared_state
from memory_orchestrator.state.tokens import TokenSpec, hash_token, new_secret
from memory_orchestrator.state.traces import TraceStore

pytestmark = pytest.mark.integration

LOCAL = "http://127.0.0.1:8766"

HOSTILE = (
    "<script>alert('xss')</script> hostile notes about the Atlas firmware",
    "<img src=x onerror=alert(1)> hostile firmware image",
    "[docs](javascript:alert(document.cookie)) hostile link javascript:alert(2)",
)


@dataclass
class Site:
    client: httpx2.AsyncClient
    orchestrator: Orchestrator
    base: str
    app: Any

    async def get(self, path: str, **headers: str) -> httpx2.Response:
        return await self.client.get(path, headers=headers)

    async def post(
        self, path: str, data: dict[str, str], *, origin: str | None = "", **headers: str
    ) -> httpx2.Response:
        sent = dict(headers)
        if origin is not None:
            sent["Origin"] = origin or self.base
        return await self.client.post(path, data=data, headers=sent)

    async def search(self, query: str, filters: str = "") -> httpx2.Response:
        """A search as the page's form sends it (POST, with the page's CSRF token)."""
        form = await self.get("/" + (f"?{filters}" if filters else ""))
        return await self.post(
            f"/search?{filters}" if filters else "/search", {"csrf": _csrf(form.text), "q": query}
        )

    async def ids(self) -> list[str]:
        page = await self.get("/?limit=100")
        return re.findall(r'href="/memories/([^"/]+)"', page.text)


@asynccontextmanager
async def _site(
    settings: Settings,
    *,
    base: str = LOCAL,
    host: str = "127.0.0.1",
    token_required: bool = False,
    eval_dir: Path | None = None,
    hostile: bool = False,
) -> AsyncIterator[Site]:
    orchestrator = Orchestrator.from_settings(settings)
    try:
        await load_demo(orchestrator)
        if hostile:
            await orchestrator.ingest(
                [
                    NewMemory(
                        content=text,
                        type=MemoryType.EPISODIC,
                        entities=["<b>Evil</b>", "Project Atlas"],
                        tags=['"><svg onload=alert(3)>'],
                        source="javascript:alert(4)",
                    )
                    for text in HOSTILE
                ]
            )
        app = build_app(
            orchestrator,
            settings,
            host=host,
            token_required=token_required,
            eval_dir=eval_dir,
            warm=False,
        )
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url=base) as client:
            yield Site(client, orchestrator, base, app)
    finally:
        await orchestrator.close()


async def _run(settings: Settings, body: Callable[[Site], Awaitable[None]], **options: Any) -> None:
    async with _site(settings, **options) as site:
        await body(site)


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found, "no CSRF field in the page"
    return found.group(1)


def _token(name: str, **rules: Any) -> tuple[str, TokenSpec]:
    secret = new_secret()
    return secret, TokenSpec(name=name, hash=hash_token(secret), **rules)


def _with_tokens(settings: Settings, *specs: TokenSpec) -> Settings:
    return settings.model_copy(
        update={"http": settings.http.model_copy(update={"tokens": list(specs)})}
    )


# ---------------------------------------------------------------- what the pages hold


async def test_the_memories_page_lists_newest_first_with_filters_and_paging(
    settings: Settings,
) -> None:
    async def body(site: Site) -> None:
        first = await site.get("/?limit=20")
        assert first.status_code == 200
        assert "1\u201320 of 40" in first.text
        assert "Priya: Vendor Y sample modules arrived" in first.text  # the newest
        assert 'href="/?limit=20&amp;offset=20"' in first.text
        second = await site.get("/?limit=20&offset=20")
        assert "21\u201340 of 40" in second.text
        assert set(re.findall(r"/memories/(mem_\w+)", first.text)).isdisjoint(
            re.findall(r"/memories/(mem_\w+)", second.text)
        )
        procedural = await site.get("/?type=procedural")
        assert "of 5" in procedural.text
        assert "procedural" in procedural.text
        assert "episodic</td>" not in procedural.text
        vendor = await site.get("/?entity=vendor+x")  # entity names match case folded
        assert "of 24" in vendor.text
        window = await site.get("/?since=2026-11-10&until=2026-11-12")
        assert "1\u20132 of 2" in window.text
        assert "2026-11-10 10:00 UTC" in window.text
        assert "2026-11-12 10:00 UTC" in window.text
        bad = await site.get("/?since=yesterday")
        assert bad.status_code == 400
        assert "since must be a date like 2026-11-20" in bad.text

    await _run(settings, body)


async def test_a_search_shows_each_result_with_its_score_breakdown_as_a_bar(
    settings: Settings,
) -> None:
    async def body(site: Site) -> None:
        found = await site.search("how do I deploy atlas-core")
        assert found.status_code == 200
        assert "How to deploy atlas-core" in found.text
        bars = re.findall(
            r'<svg class="bar" role="img"[^>]*aria-label="score ([0-9.]+): ', found.text
        )
        assert bars, "no score bar"
        widths = re.findall(
            r'class="part part-relevance" x="0\.0" y="0" width="([0-9.]+)"', found.text
        )
        assert widths
        assert float(widths[0]) > 0
        trace_id = re.search(r'href="/traces/(tr_[0-9a-f]+)"', found.text)
        assert trace_id, "a search links its trace"
        typed = await site.search("deploy", "type=resource")
        assert "Runbook: atlas-core deployment" in typed.text
        assert "How to deploy atlas-core" not in typed.text

    await _run(settings, body)


async def test_a_memory_page_shows_its_edges_the_requests_that_returned_it_and_forget(
    settings: Settings,
) -> None:
    async def body(site: Site) -> None:
        result = await site.orchestrator.search(SearchRequest(query="deploy atlas-core"))
        top = result.items[0].memory_id
        page = await site.get(f"/memories/{top}")
        assert page.status_code == 200
        assert "How to deploy atlas-core" in page.text
        assert "Edges (" in page.text
        assert "temporal" in page.text
        assert f"/traces/{result.trace_id}" in page.text  # the request that returned it
        assert "Forget this memory" in page.text
        missing = await site.get("/memories/mem_nothere")
        assert missing.status_code == 404
        assert "no memory with id" in missing.text

    await _run(settings, body)


async def test_a_corrected_memory_says_what_changed_and_is_hidden_unless_asked(
    settings: Settings,
) -> None:
    async def body(site: Site) -> None:
        old = (
            await site.orchestrator.ingest(
                [
                    NewMemory(
                        content="The Atlas API rate limit is 100 requests per minute.",
                        entities=["Atlas API"],
                    )
                ]
            )
        )[0].id
        report = await site.orchestrator.write(
            WriteRequest(
                memory=NewMemory(
                    content="The Atlas API rate limit is 500 requests per minute.",
                    entities=["Atlas API"],
                )
            )
        )
        assert report.supersedes == old
        assert report.id is not None
        new_page = await site.get(f"/memories/{report.id}")
        assert "changed on" in new_page.text
        assert "was &#39;The Atlas API rate limit is 100 requests per minute.&#39;" in new_page.text
        assert "100 -&gt; 500" in new_page.text
        old_page = await site.get(f"/memories/{old}")
        assert "Corrected" in old_page.text
        assert "now &#39;The Atlas API rate limit is 500" in old_page.text
        hidden = await site.get("/?entity=Atlas+API")
        assert report.id in hidden.text
        assert old not in hidden.text
        shown = await site.get("/?entity=Atlas+API&corrected=1")
        assert report.id in shown.text
        assert old in shown.text

    await _run(settings, body)


async def test_traces_pages_draw_the_plan_candidates_drops_and_stages_and_replay(
    settings: Settings,
) -> None:
    async def body(site: Site) -> None:
        result = await site.orchestrator.search(SearchRequest(query="Vendor X firmware last month"))
        listing = await site.get("/traces")
        assert result.trace_id in listing.text
        assert "Vendor X firmware last month" in listing.text
        page = await site.get(f"/traces/{result.trace_id}")
        assert page.status_code == 200
        for part in (
            "Plan",
            "Subqueries",
            "Time window",
            "Time per stage",
            "Candidates (",
            "Dropped (",
        ):
            assert part in page.text, part
        assert 'class="part part-relevance"' in page.text
        assert "(local index)" in page.text  # a candidate's source list
        replay = await site.post(f"/traces/{result.trace_id}/replay", {"csrf": _csrf(page.text)})
        assert replay.status_code == 200
        assert "Identical: the same memories in the same order." in replay.text
        assert (await site.get("/traces/tr_0000000000000000")).status_code == 404

    await _run(settings, body)


async def test_only_a_posted_form_of_this_inspector_records_a_search_or_a_replay(
    settings: Settings,
) -> None:
    """A search and a replay are kept as requests (traces), and the store keeps the newest
    5,000: a link, an image or a form on any other page must not push real history out."""

    async def kept(site: Site) -> int:
        await site.orchestrator.health()  # waits for the traces saved so far to be stored
        return len(TraceStore(settings.trace_path()).recent(100_000))

    async def body(site: Site) -> None:
        result = await site.orchestrator.search(SearchRequest(query="Vendor X firmware"))
        before = await kept(site)
        linked = await site.get("/?q=Vendor+X+firmware")  # a link fills the box, runs nothing
        assert linked.status_code == 200
        assert "Press Search to run it" in linked.text
        assert 'value="Vendor X firmware"' in linked.text
        csrf = _csrf(linked.text)
        replay = f"/traces/{result.trace_id}/replay"
        refused = [
            await site.get(replay),
            await site.post("/search", {"csrf": csrf, "q": "x"}, origin="http://evil.example"),
            await site.post("/search", {"q": "x"}),
            await site.post(replay, {"csrf": csrf}, origin="http://evil.example"),
            await site.post(replay, {"confirm": "yes"}),  # no CSRF token
        ]
        assert [r.status_code for r in refused] == [405, 403, 403, 403, 403]
        assert await kept(site) == before  # nothing recorded
        assert (await site.post("/search", {"csrf": csrf, "q": "firmware"})).status_code == 200
        assert (await site.post(replay, {"csrf": csrf})).status_code == 200
        assert await kept(site) == before + 2

    await _run(settings, body)


async def test_the_graph_page_draws_the_neighbourhood_as_svg_with_links(settings: Settings) -> None:
    async def body(site: Site) -> None:
        page = await site.get("/graph?entity=Vendor+X&hops=1")
        assert page.status_code == 200
        assert '<svg id="graph"' in page.text
        nodes = re.findall(r'<a href="(/memories/mem_\w+)" class="node node-(\w+)"', page.text)
        assert len(nodes) > 5
        assert re.search(r'<line class="edge edge-\d" [^>]*data-type="mentions"', page.text)
        assert "within 1 hop(s) of Vendor X" in page.text
        deep = await site.get("/graph?entity=Vendor+X&hops=4")
        assert "hops cut to 3 (max_hops 3)" in deep.text
        one = nodes[0][0].removeprefix("/memories/")
        around = await site.get(f"/graph?memory={one}")
        assert f'data-id="{one}"' in around.text
        empty = await site.get("/graph")
        assert "Pick an entity" in empty.text

    await _run(settings, body)


async def test_the_health_page_shows_checks_tool_percentiles_and_the_outbox(
    settings: Settings,
) -> None:
    async def body(site: Site) -> None:
        await site.orchestrator.search(SearchRequest(query="atlas"))
        page = await site.get("/health")
        assert page.status_code == 200
        assert 'Health: <span class="status status-ok">ok</span>' in page.text
        assert "retrieval" in page.text
        assert re.search(
            r"<td>search</td><td class=\"num\">1</td><td class=\"num\">0</td>", page.text
        )
        assert "No write waits" in page.text

    await _run(settings, body)


async def test_the_health_page_shows_the_latest_check_with_its_age_and_checks_again_when_asked(
    settings: Settings,
) -> None:
    async def counted(site: Site, path: str) -> str:
        page = await site.get(path)
        found = re.search(r"<td>counts</td><td>.*?</td><td>(\d+) memories", page.text)
        assert found, page.text
        assert re.search(r"Checked \d+ s ago \(the check took \d+ ms\)", page.text)
        return found.group(1)

    async def body(site: Site) -> None:
        assert await counted(site, "/health") == "40"
        await site.orchestrator.ingest([NewMemory(content="One more memory about Atlas.")])
        assert await counted(site, "/health") == "40"  # the kept report
        assert await counted(site, "/health?fresh=1") == "41"  # "Check now"
        await site.orchestrator.ingest([NewMemory(content="Another memory about Atlas.")])
        site.app.state.ui.health.max_age_s = 0.0  # every report is old: checked after the page
        assert await counted(site, "/health") == "41"
        site.app.state.ui.health.max_age_s = 3600.0
        assert await counted(site, "/health") == "42"

    await _run(settings, body)


async def test_checking_health_from_the_page_reads_the_outbox_and_replays_nothing(
    settings: Settings,
) -> None:
    """`/health?fresh=1` is a GET (a link any page can make a browser follow): the check it
    runs shows the queued write and leaves it queued; `memory_health` still replays it."""
    content = "A write queued while the store was down, about the Atlas antenna."

    async def body(site: Site) -> None:
        outbox = shared_state.outbox(settings)  # what an earlier process left queued
        try:
            outbox.put(WriteRequest(memory=NewMemory(content=content)), "store was down")
        finally:
            outbox.close()
        page = await site.get("/health?fresh=1")
        assert page.status_code == 200
        assert "1 write(s) wait for the store" in page.text
        assert "1 write(s) queued" in page.text  # the outbox check, read, not replayed
        assert service.queued_writes(settings).depth == 1
        report = await site.orchestrator.health()  # the tool replays
        (outbox_check,) = [c for c in report.checks if c.name == "outbox"]
        assert "1 replayed now" in outbox_check.detail
        assert service.queued_writes(settings).depth == 0
        found = await site.orchestrator.search(SearchRequest(query="Atlas antenna queued"))
        assert any(i.summary == content for i in found.items)

    await _run(settings, body)


async def test_while_a_server_warms_up_the_pages_answer_at_once_and_say_what_is_still_coming(
    settings: Settings,
) -> None:
    """A server lists the store, reads the traces and checks health beside the requests; a
    page asked meanwhile does not wait for them. Here nothing spawned runs until the test
    runs it, so every page meets the state just after start."""

    async def body(site: Site) -> None:
        await site.orchestrator.search(SearchRequest(query="atlas"))
        spawned: list[Callable[[], Awaitable[None]]] = []
        inspection = site.orchestrator.inspection()
        inspection.serve(spawned.append)
        site.app.state.ui.health.spawn = spawned.append
        listed = await site.get("/")
        assert "Indexing the store: 0 memories listed so far." in listed.text
        assert "No memory matches." in listed.text
        requests = await site.get("/traces")
        assert "Reading the kept requests: 0 so far." in requests.text
        health = await site.get("/health")
        assert "The first health check is under way" in health.text
        assert "Reading the kept requests" in health.text
        for job in list(spawned):  # the listing, the traces, the health check
            await job()
        listed = await site.get("/")
        assert "Indexing the store" not in listed.text
        assert "1\u201340 of 40" in listed.text
        requests = await site.get("/traces")
        assert "Reading the kept requests" not in requests.text
        assert "atlas" in requests.text
        health = await site.get("/health")
        assert 'Health: <span class="status status-ok">ok</span>' in health.text
        inspection.serve(None)

    await _run(settings, body)


def _eval_folder(folder: Path) -> Path:
    folder.mkdir()
    report = {
        "dataset": "golden",
        "backend": "embedded",
        "k": [5, 10],
        "questions": 16,
        "systems": {
            "raw": {
                "recall@10": 0.9062,
                "mrr": 0.8438,
                "p50_ms": 0.75,
                "by_category": {"direct": {"recall@10": 1.0}},
            },
            "orchestrated": {
                "recall@10": 0.9688,
                "mrr": 0.9,
                "p50_ms": 9.1,
                "by_category": {"direct": {"recall@10": 1.0}},
            },
        },
        "notes": ["a note"],
    }
    (folder / "report.json").write_text(json.dumps(report))
    (folder / "recall_at_k.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    return folder


async def test_the_eval_page_shows_the_tables_and_serves_only_the_folders_plots(
    settings: Settings, tmp_path: Path
) -> None:
    folder = _eval_folder(tmp_path / "eval-out")
    (tmp_path / "secret.png").write_bytes(b"secret")

    async def body(site: Site) -> None:
        page = await site.get("/eval")
        assert "orchestrated" in page.text
        assert "0.9688" in page.text
        assert "recall@10 by category" in page.text
        assert '<img src="/eval/plots/recall_at_k.png"' in page.text
        plot = await site.get("/eval/plots/recall_at_k.png")
        assert plot.status_code == 200
        assert plot.headers["content-type"] == "image/png"
        for sneaky in (
            "/eval/plots/..%2Fsecret.png",
            "/eval/plots/report.json",
            "/eval/plots/nothere.png",
        ):
            assert (await site.get(sneaky)).status_code == 404, sneaky

    await _run(settings, body, eval_dir=folder)

    async def without(site: Site) -> None:
        assert "No eval folder was given" in (await site.get("/eval")).text

    await _run(load_settings(data_dir=tmp_path / "other"), without)


# ---------------------------------------------------------------- untrusted text is text


async def test_hostile_memory_text_is_shown_as_text_on_every_page(settings: Settings) -> None:
    async def body(site: Site) -> None:
        ids = await site.ids()
        search = await site.search("hostile firmware notes")
        assert "hostile" in search.text
        trace_id = re.search(r'href="/traces/(tr_[0-9a-f]+)"', search.text)
        assert trace_id
        pages = [
            await site.get("/"),
            search,
            await site.get("/?entity=%3Cb%3EEvil%3C%2Fb%3E"),
            await site.get("/graph?entity=%3Cb%3EEvil%3C%2Fb%3E"),
            await site.get("/traces"),
            await site.get(f"/traces/{trace_id.group(1)}"),
            *[await site.get(f"/memories/{i}") for i in ids[:3]],
        ]
        shown = "\n".join(p.text for p in pages)
        assert all(p.status_code == 200 for p in pages)
        assert "&lt;script&gt;alert(&#39;xss&#39;)&lt;/script&gt;" in shown
        assert "&lt;img src=x onerror=alert(1)&gt;" in shown
        assert "&lt;b&gt;Evil&lt;/b&gt;" in shown
        assert not re.search(r"<script", shown, re.IGNORECASE)
        assert not re.search(r"<img[^>]*onerror", shown, re.IGNORECASE)
        assert not re.search(r"<svg onload", shown, re.IGNORECASE)
        assert not re.search(r"<b>Evil", shown)
        assert not re.search(r"""(href|src)\s*=\s*["']?\s*javascript:""", shown, re.IGNORECASE)
        hrefs = re.findall(r'href="([^"]*)"', shown)
        assert all(h.startswith(("/", "#")) for h in hrefs), [
            h for h in hrefs if not h.startswith(("/", "#"))
        ]

    await _run(settings, body, hostile=True)


async def test_every_answer_carries_the_security_headers_and_its_server_time(
    settings: Settings,
) -> None:
    async def body(site: Site) -> None:
        for path in ("/", "/health", "/nothere", "/static/inspector.css"):
            answer = await site.get(path)
            policy = answer.headers["content-security-policy"]
            assert "default-src 'none'" in policy
            assert "script-src" not in policy
            assert answer.headers["x-content-type-options"] == "nosniff"
            assert answer.headers["x-frame-options"] == "DENY"
            assert answer.headers["cache-control"] == "no-store"
            assert re.fullmatch(r"app;dur=\d+\.\d", answer.headers["server-timing"])
        assert (await site.get("/nothere")).status_code == 404

    await _run(settings, body)


# ---------------------------------------------------------------- forget


async def test_forget_needs_a_confirmed_same_origin_form_with_its_csrf_token(
    settings: Settings,
) -> None:
    async def body(site: Site) -> None:
        victim = (await site.ids())[0]
        confirm = await site.get(f"/memories/{victim}/forget")
        assert "Forget it" in confirm.text
        csrf = _csrf(confirm.text)
        form = {"csrf": csrf, "confirm": "yes"}
        path = f"/memories/{victim}/forget"
        refusals = [
            await site.post(path, form, origin="http://evil.example"),
            await site.post(path, form, origin=None),  # no Origin and no Referer
            await site.post(path, {"csrf": "0" * 64, "confirm": "yes"}),
            await site.post(path, {"confirm": "yes"}),
        ]
        assert [r.status_code for r in refusals] == [403, 403, 403, 403]
        assert "not sent from a page of this inspector" in refusals[0].text
        assert "CSRF token" in refusals[2].text
        assert (await site.get(f"/memories/{victim}")).status_code == 200  # still there
        by_referer = await site.post(
            path, {**form, "reason": "a test"}, origin=None, Referer=f"{LOCAL}/memories/{victim}"
        )
        assert by_referer.status_code == 200
        assert "1 forgotten: left out of every read" in by_referer.text
        assert "Undo" in by_referer.text
        assert victim not in (await site.get("/")).text
        assert "of 39" in (await site.get("/")).text
        traces = await site.get("/traces?tool=forget")
        assert victim in traces.text

    await _run(settings, body)


@pytest.mark.parametrize("backend", ["embedded", "mnemonic"])
async def test_a_forgotten_memory_s_page_says_why_and_undo_brings_it_back(
    tmp_path: Path, backend: str
) -> None:
    """The inspector's forget is the orchestrator's (the same as `memory_forget`): on every
    store, a store without a delete of its own (mnemonic) too."""
    settings = load_settings(data_dir=tmp_path, backend=backend)

    async def body(site: Site) -> None:
        victim = (await site.ids())[0]
        page = await site.get(f"/memories/{victim}")
        assert "Forget this memory" in page.text
        path = f"/memories/{victim}/forget"
        csrf = _csrf((await site.get(path)).text)
        done = await site.post(path, {"csrf": csrf, "confirm": "yes", "reason": "stale <b>"})
        assert done.status_code == 200
        gone = await site.get(f"/memories/{victim}")
        assert gone.status_code == 410
        assert "stale &lt;b&gt;" in gone.text
        assert "Undo: bring it back" in gone.text
        assert victim not in (await site.get("/")).text
        assert (await site.get("/memories/no-such-memory")).status_code == 404
        back = await site.post(path, {"csrf": _csrf(gone.text), "confirm": "yes", "undo": "1"})
        assert back.status_code == 200
        assert "1 back: every read returns them again" in back.text
        assert (await site.get(f"/memories/{victim}")).status_code == 200
        assert victim in (await site.get("/")).text
        stones = await site.orchestrator.forgotten()
        assert stones == []

    await _run(settings, body)


# ---------------------------------------------------------------- the guard


async def test_on_loopback_only_a_local_host_name_is_served(settings: Settings) -> None:
    async def body(site: Site) -> None:
        assert (await site.get("/", Host="127.0.0.1:8766")).status_code == 200
        assert (await site.get("/", Host="localhost:8766")).status_code == 200
        rebound = await site.get("/", Host="evil.example:8766")
        assert rebound.status_code == 421
        assert "only to localhost" in rebound.text

    await _run(settings, body)


async def test_off_loopback_without_tokens_the_inspector_refuses_to_start(
    settings: Settings,
) -> None:
    orchestrator = Orchestrator.from_settings(settings)
    try:
        with pytest.raises(ConfigError, match="asks for a bearer token off loopback"):
            build_app(orchestrator, settings, host="0.0.0.0", warm=False)
    finally:
        await orchestrator.close()


async def test_off_loopback_a_token_is_needed_and_a_read_only_one_cannot_forget(
    settings: Settings,
) -> None:
    writer, writer_spec = _token("writer")
    reader, reader_spec = _token("reader", read_only=True)
    narrow, narrow_spec = _token("narrow", tools=["memory_search"])
    configured = _with_tokens(settings, writer_spec, reader_spec, narrow_spec)
    base = "http://10.1.2.3:8766"

    async def body(site: Site) -> None:
        anonymous = await site.get("/memories/x?y=1")
        assert anonymous.status_code == 303
        assert anonymous.headers["location"] == "/login?next=%2Fmemories%2Fx%3Fy%3D1"
        assert (await site.get("/", Authorization="Bearer mo_wrong")).status_code == 401
        assert (await site.get("/login")).status_code == 200  # the login page is open
        wrong = await site.post("/login", {"token": "mo_wrong", "next": "/"})
        assert wrong.status_code == 401
        assert "unknown token" in wrong.text
        far = await site.post("/login", {"token": reader, "next": "//evil.example/"})
        assert far.status_code == 303
        assert far.headers["location"] == "/"
        cookie = far.headers["set-cookie"]
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie
        victim = (await site.ids())[0]
        page = await site.get(f"/memories/{victim}")
        assert "read-only" in page.text
        assert "Forget this memory" not in page.text
        csrf = _csrf(page.text)  # the logout form carries it
        refused = await site.post(f"/memories/{victim}/forget", {"csrf": csrf, "confirm": "yes"})
        assert refused.status_code == 403
        assert "token &#39;reader&#39; is read-only and may not call memory_forget" in refused.text
        assert (await site.get(f"/memories/{victim}")).status_code == 200
        site.client.cookies.clear()
        as_writer = await site.get(f"/memories/{victim}", Authorization=f"Bearer {writer}")
        assert "Forget this memory" in as_writer.text
        narrow_traces = await site.get("/traces", Authorization=f"Bearer {narrow}")
        assert narrow_traces.status_code == 403
        assert "may not call memory_explain" in narrow_traces.text

    await _run(configured, body, base=base, host="0.0.0.0")


async def test_a_token_for_another_store_is_refused(settings: Settings) -> None:
    secret, spec = _token("elsewhere", stores=["mnemon"])

    async def body(site: Site) -> None:
        refused = await site.get("/", Authorization=f"Bearer {secret}")
        assert refused.status_code == 403
        assert "may not use store 'embedded'" in refused.text
        login = await site.post("/login", {"token": secret, "next": "/"})
        assert login.status_code == 403

    await _run(_with_tokens(settings, spec), body, token_required=True)

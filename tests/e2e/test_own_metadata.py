"""The orchestrator's own metadata keys (`orchestrator:*`, and the bare `supersedes` and
`superseded` it read as its own before) are refused from clients on every face (MCP over
stdio and HTTP, `orchestrator import`), and what a store held before is read by the store's
own marks: a client's key hides nothing from the person at the inspector. Real processes over
a real embedded store file: the MCP server on stdio and over HTTP, the CLI, and
`orchestrator ui`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import NewMemory
from memory_orchestrator.settings import Settings
from tests.http_load import http_server, make_token, mcp_session, text_of
from tests.inspector_process import inspector

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ORCHESTRATOR = Path(sys.executable).parent / "orchestrator"
TOKEN = make_token("agent")
KEPT = "The Atlas launch review is on Friday at ten."
UNRELATED = "Parking permits are renewed at the front desk."
REFUSED = (
    {"supersedes": "ID"},
    {"Supersedes ": "ID"},
    {"superseded": True},
    {"orchestrator:supersedes": "ID"},
    {"orchestrator:anything": 1},
)


@asynccontextmanager
async def stdio_session(data_dir: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memory_orchestrator.faces.mcp.server"],
        env={"ORCHESTRATOR_DATA_DIR": str(data_dir), "PATH": os.environ.get("PATH", "")},
        cwd=data_dir,
    )
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def with_id(metadata: dict[str, Any], memory_id: str) -> dict[str, Any]:
    return {k: memory_id if v == "ID" else v for k, v in metadata.items()}


async def refused_everywhere(session: ClientSession, kept_id: str) -> None:
    for metadata in REFUSED:
        answer: CallToolResult = await session.call_tool(
            "memory_write", {"content": UNRELATED, "metadata": with_id(metadata, kept_id)}
        )
        assert answer.is_error, (metadata, text_of(answer))
        assert "reserved for the orchestrator's own record" in text_of(answer), text_of(answer)


def listed_ids(url: str) -> list[str]:
    with urllib.request.urlopen(url + "?limit=100", timeout=60) as answer:
        html = answer.read().decode()
    return re.findall(r'href="/memories/([^"/]+)"', html)


def page(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as answer:
        return str(answer.read().decode())


def stored_contents(data_dir: Path) -> list[str]:
    import sqlite3

    with sqlite3.connect(data_dir / "memories.db") as db:
        return [str(r[0]) for r in db.execute("SELECT content FROM memories")]


async def test_client_metadata_naming_a_memory_is_refused_on_every_face_and_hides_nothing(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    async with stdio_session(data) as session:
        wrote = await session.call_tool("memory_write", {"content": KEPT})
        assert not wrote.is_error, text_of(wrote)
        kept_id = str((wrote.structured_content or {})["id"])
        await refused_everywhere(session, kept_id)
    with http_server(data, [TOKEN.spec]) as server:
        async with mcp_session(server.mcp_url, TOKEN.secret) as session:
            await refused_everywhere(session, kept_id)
    assert stored_contents(data) == [KEPT]  # nothing refused was written
    argv = [str(ORCHESTRATOR), "ui", "--data-dir", str(data), "--port", "0"]
    with inspector(argv, cwd=tmp_path) as url:
        assert listed_ids(url) == [kept_id]


async def test_records_stored_before_are_read_by_the_stores_marks_not_by_a_clients_key(
    tmp_path: Path,
) -> None:
    """A store written before the prefix: a correction the orchestrator wrote (the bare
    `supersedes` key and the store's mark on the corrected memory) reads as before; a
    client's bare `supersedes`, with no mark, corrects nothing and hides nothing."""
    settings = Settings(data_dir=tmp_path / "data")
    store = EmbeddedBackend(settings.embedded_path())

    def old(content: str, metadata: dict[str, Any]) -> NewMemory:
        # as a write before the change was stored: client metadata was not checked then
        return NewMemory(content=content).model_copy(update={"metadata": metadata})

    try:
        friday = (await store.write(NewMemory(content=KEPT))).id
        monday = "The Atlas launch review is on Monday at ten."
        corrected = (await store.write(old(monday, {"supersedes": friday}))).id
        await store.supersede(friday, corrected)  # the orchestrator's mark, as it made it
        victim = (await store.write(NewMemory(content="The badge printer is on floor 3."))).id
        client = (await store.write(old(UNRELATED, {"supersedes": victim}))).id
    finally:
        await store.close()
    argv = [str(ORCHESTRATOR), "ui", "--data-dir", str(settings.data_dir), "--port", "0"]
    with inspector(argv, cwd=tmp_path) as url:
        shown = listed_ids(url)
        assert victim in shown
        assert client in shown
        assert corrected in shown
        assert friday not in shown  # corrected, by the store's own mark
        with urllib.request.urlopen(url + "?corrected=1&limit=100", timeout=60) as answer:
            assert friday in answer.read().decode()
        assert "was &#39;The Atlas launch review is on Friday" in page(
            url + f"memories/{corrected}"
        )
        client_page = page(url + f"memories/{client}")
        assert "changed on" not in client_page
        assert "the memory it corrected" not in client_page
        assert "changed on" not in page(url + f"memories/{victim}")


def test_orchestrator_import_refuses_a_record_with_a_reserved_key_and_goes_on(
    tmp_path: Path,
) -> None:
    source = tmp_path / "m.jsonl"
    records = [{"content": KEPT}, {"content": UNRELATED, "metadata": {"supersedes": "mem_x"}}]
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    data = tmp_path / "data"
    done = subprocess.run(
        [str(ORCHESTRATOR), "--data-dir", str(data), "import", str(source), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["counts"] == {"added": 1, "refused": 1}
    refused = next(i for i in report["items"] if i["action"] == "refused")
    assert "reserved for the orchestrator's own record" in refused["reason"]
    assert stored_contents(data) == [KEPT]

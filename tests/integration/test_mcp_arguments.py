"""What models send that a strict schema would refuse or let through, through a real MCP
client session (in-process transport, `create_server` over the embedded store): optional
arguments sent as `null` are taken as not given, by every tool; a wrong JSON type gets an error
naming the type expected and the type sent; content with nothing visible is refused."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client
from mcp.types import CallToolResult, TextContent

from memory_orchestrator.faces.mcp.server import create_server
from memory_orchestrator.faces.mcp.tools import TOOLS
from memory_orchestrator.settings import Settings

pytestmark = pytest.mark.integration

REQUIRED: dict[str, dict[str, Any]] = {
    "memory_context": {"query": "what is Vendor X late with?"},
    "memory_search": {"query": "Vendor X firmware"},
    "memory_expand": {"entities": ["Vendor X"]},
    "memory_write": {"content": "Vendor X promised firmware 2.4 for April."},
    "memory_explain": {"query": "why did the milestone slip?"},
    "memory_health": {},
}


@pytest.fixture
def client(settings: Settings) -> Iterator[tuple[BlockingPortal, Client]]:
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(create_server(settings))) as session,
    ):
        yield portal, session


def call(client: tuple[BlockingPortal, Client], tool: str, args: dict[str, Any]) -> CallToolResult:
    portal, session = client
    result: CallToolResult = portal.call(session.call_tool, tool, args)
    return result


def text(result: CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, TextContent))


def optional_params(tool: str) -> list[str]:
    (fn,) = [fn for fn, _ in TOOLS if fn.__name__ == tool]
    params = inspect.signature(fn).parameters.values()
    return [p.name for p in params if p.default is not p.empty and p.name != "ctx"]


@pytest.mark.parametrize("tool", sorted(REQUIRED))
def test_every_optional_argument_sent_as_null_is_accepted(
    client: tuple[BlockingPortal, Client], tool: str
) -> None:
    nulls = dict.fromkeys(optional_params(tool))
    args = {**nulls, **REQUIRED[tool]}
    result = call(client, tool, args)
    assert not result.is_error, text(result)


def test_a_required_argument_sent_as_null_is_still_an_error(
    client: tuple[BlockingPortal, Client],
) -> None:
    result = call(client, "memory_search", {"query": None})
    assert result.is_error
    assert "query" in text(result)


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("memory_write", {"content": "Vendor X shipped.", "entities": "Vendor X"}, "an array"),
        ("memory_expand", {"seed_ids": "mem_1"}, "an array"),
        ("memory_search", {"query": "x", "filters": "Vendor X"}, "an object"),
        ("memory_search", {"query": ["a", "b"]}, "a string"),
    ],
)
def test_a_wrong_json_type_names_the_type_expected_and_the_type_sent(
    client: tuple[BlockingPortal, Client], tool: str, args: dict[str, Any], expected: str
) -> None:
    result = call(client, tool, args)
    assert result.is_error
    message = text(result)
    assert f"expected {expected}" in message, message
    sent = "an array" if isinstance(next(iter(args.values())), list) else "a string"
    assert f"got {sent}" in message, message
    assert "valid tuple" not in message


@pytest.mark.parametrize(
    "content",
    [
        "\x00\x00\x00",
        "\x1b\x07\x00 \t",
        "\u200b\u200e",
        "\x1b[2J\x1b[H",  # clear the screen, cursor home: escape sequences only
        "\x1b]0;title\x07\x1b[31m",  # a window title (OSC) and a colour
        "\u3164\u3164\u3164",  # Hangul filler
        "\u115f\u1160\uffa0",  # Hangul choseong, jungseong and halfwidth fillers
        "\u2800\u2800",  # the blank Braille pattern
        "\u034f\ufe0f\u0301",  # marks with nothing to sit on
    ],
)
def test_content_with_nothing_visible_is_refused(
    client: tuple[BlockingPortal, Client], content: str
) -> None:
    result = call(client, "memory_write", {"content": content})
    assert result.is_error
    assert "visible" in text(result)

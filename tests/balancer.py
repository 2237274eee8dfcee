"""A plain round-robin HTTP load balancer, in a process of its own, for the replica tests and
benchmark: each request goes to the next backend in turn, with no session affinity, as a
cloud load balancer or an nginx `upstream` does by default. A backend that refuses the
connection (so nothing was sent to it) is skipped for that request, as nginx's default
`proxy_next_upstream error` does; one that fails once the request was sent gives the client
502, since the request may have been acted on. Like nginx without `keepalive` in its
upstream, it opens a new connection to a backend for each request.

    python -m tests.balancer --port 8080 http://127.0.0.1:8001 http://127.0.0.1:8002

It prints one line, `listening PORT`, once it accepts connections (`--port 0`: a free port);
`GET /__balancer` answers how many requests each backend answered (JSON).
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import cycle
from pathlib import Path
from typing import Any

import httpx2
import uvicorn
from starlette.requests import Request
from starlette.responses import Response

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "host"}
TIMEOUT_S = 120.0


class RoundRobin:
    """The balancer as an ASGI app over `backends` (base URLs)."""

    def __init__(self, backends: Sequence[str]) -> None:
        self.backends = list(backends)
        self._next = cycle(self.backends)
        self.answered: Counter[str] = Counter()
        # a new connection per request, as nginx makes to an upstream by default (no
        # `keepalive`): a dead backend then always refuses, and is skipped
        limits = httpx2.Limits(max_keepalive_connections=0)
        self._client = httpx2.AsyncClient(timeout=TIMEOUT_S, limits=limits)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        request = Request(scope, receive)
        if request.url.path == "/__balancer":
            body = json.dumps(dict(self.answered)).encode()
            await Response(body, media_type="application/json")(scope, receive, send)
            return
        response = await self._forward(request, await request.body())
        await response(scope, receive, send)

    async def _forward(self, request: Request, body: bytes) -> Response:
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP]
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        first = self.backends.index(next(self._next))  # this request's turn; then the others
        for n in range(len(self.backends)):
            backend = self.backends[(first + n) % len(self.backends)]
            try:
                answer = await self._client.request(
                    request.method, backend + path, headers=headers, content=body
                )
            except httpx2.ConnectError:
                continue  # refused: nothing was sent, the next backend takes it
            except httpx2.HTTPError as exc:
                print(f"502 {request.method} via {backend}: {exc!r}", file=sys.stderr)
                return Response(f"bad gateway: {exc}", status_code=502)
            self.answered[backend] += 1
            if answer.status_code >= 400:
                print(f"{answer.status_code} {request.method} from {backend}", file=sys.stderr)
            kept = {
                k: v
                for k, v in answer.headers.items()
                if k.lower() not in HOP_BY_HOP | {"content-length", "content-encoding"}
            }
            return Response(answer.content, status_code=answer.status_code, headers=kept)
        return Response("bad gateway: no backend accepts connections", status_code=502)


class _Server(uvicorn.Server):
    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        port = self.servers[0].sockets[0].getsockname()[1]
        print(f"listening {port}", flush=True)  # bound: connections are accepted from now


@contextmanager
def balancer(backends: Sequence[str], log: Path) -> Iterator[str]:
    """The balancer in its own process on a free loopback port until the block ends; its
    URL."""
    repo = Path(__file__).resolve().parents[1]
    with open(log, "wb") as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.balancer", "--port", "0", *backends],
            cwd=repo,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
    try:
        assert process.stdout is not None
        ready = process.stdout.readline().split()  # the one line it prints once it accepts
        if len(ready) != 2 or ready[0] != b"listening":
            raise RuntimeError(f"the balancer did not start: {log.read_text(errors='replace')}")
        yield f"http://127.0.0.1:{int(ready[1])}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:  # a client still holds a connection open
            process.kill()
            process.wait(timeout=15)
        if process.stdout is not None:
            process.stdout.close()


def answered(url: str) -> dict[str, int]:
    """Requests each backend answered, as the balancer at `url` counts them."""
    counts: dict[str, int] = httpx2.get(url + "/__balancer", timeout=30).json()
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("backends", nargs="+")
    args = parser.parse_args()
    config = uvicorn.Config(
        RoundRobin(args.backends),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=5,
    )
    _Server(config).run()


if __name__ == "__main__":
    main()

"""The listening socket of the HTTP faces (`serve --transport http`, `ui`), bound before the
server starts: a port in use is then an `OSError` the command line turns into one line, not
uvicorn's own report and exit code."""

from __future__ import annotations

import socket

__all__ = ["listening"]

BACKLOG = 2048  # connections wait here until uvicorn takes them


def listening(host: str, port: int) -> socket.socket:
    """A socket bound to `host:port` (0: a free port) and listening. Raises OSError (port in
    use, address not available, permission denied)."""
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((bare, port))
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock

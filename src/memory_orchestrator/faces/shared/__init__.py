"""One orchestrator process per memory, shared by every session, hook and CLI call.

    address.py   where it listens and who may connect (standard library only)
    client.py    connect, call the service within a time budget, start it in the
                 background (standard library only: the hooks' client)
    relay.py     `orchestrator serve` over stdio, carried to it (standard library only)
    identity.py  which process serves which settings (a hash of the effective settings)
    server.py    the shared process itself (`python -m memory_orchestrator.faces.shared.server`)

See docs/explanation/shared-process.md.
"""

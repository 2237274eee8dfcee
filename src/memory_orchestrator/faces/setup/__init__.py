"""`orchestrator setup`: an agent's client connected to the project's memory in one step.

    clients.py  which files of Claude Code, Codex and Cursor hold what, at project and user
                scope, and how their entries start the orchestrator
    parts.py    what setup adds to them (the server entry, the hooks, the guideline) and how
                it knows its own part again
    files.py    merging into a file, its one backup, and taking our part out again

See docs/how-to/connect-an-agent.md.
"""

"""One wheel per session, and one fresh environment per extra (see `installs.py`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.packaging.installs import Built, Install, build_wheel, install, lock_constraints

Installer = Callable[[str | None], Install]


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """This checkout's wheel, and uv.lock's versions as constraints."""
    dist = tmp_path_factory.mktemp("dist")
    return Built(build_wheel(dist), lock_constraints(dist))


@pytest.fixture(scope="session")
def installer(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Installer:
    """`installer(extra)`: the environment holding the wheel with `extra` (None: no extra),
    made once per session."""
    made: dict[str | None, Install] = {}

    def get(extra: str | None) -> Install:
        if extra not in made:
            root: Path = tmp_path_factory.mktemp(f"venv-{extra or 'core'}") / "venv"
            made[extra] = install(built, root, extra)
        return made[extra]

    return get

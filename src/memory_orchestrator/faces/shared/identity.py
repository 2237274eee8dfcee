"""Which shared process serves a set of settings: a hash of the effective settings.

Two processes attach to one shared process only when this hash is the same: the same package
version and install (`address.origin`), every setting as it came out of the defaults, the
config file, the environment and the command line (paths resolved), and the environment the
stores read beyond the settings (`address.environment`). The CLI, which builds settings
anyway, finds the shared process by it; the relay, which does not, by the link the shared
process makes for the inputs it was started with (`address.Inputs.key`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping

from memory_orchestrator.faces.shared import address
from memory_orchestrator.settings import Settings

__all__ = ["settings_key", "socket_path"]


def settings_key(settings: Settings, env: Mapping[str, str] | None = None) -> str:
    material = [
        address.package_version(),
        *address.origin(),
        settings.model_dump(mode="json"),
        address.environment(os.environ if env is None else env),
    ]
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def socket_path(settings: Settings) -> str:
    """The shared process's socket for these settings. Raises `address.Unusable` when the
    socket directory cannot be used."""
    name = address.server_name(settings_key(settings))
    return os.path.join(address.socket_dir(), f"{name}.sock")

"""Where the shared process listens, who may talk to it, and how a connection opens.

Standard library only (a test reads `python -X importtime` to keep it so): the stdio relay
and the hook client import it at every start.

- **The socket directory**: `$XDG_RUNTIME_DIR/memory-orchestrator`, else
  `$TMPDIR/memory-orchestrator-<uid>` (`/tmp` without TMPDIR). It must be a real directory
  (not a link) owned by this user with mode 0700: one that is not is refused, never repaired,
  and the caller serves in its own process instead (`Unusable` says why).
- **The names in it** carry the package version, so two versions never meet: the shared
  process listens on `<version>-s<settings>.sock`, named by a hash of its effective settings
  (`identity.settings_key`); a caller that cannot build settings (the relay: that would load
  pydantic) finds it by `<version>-k<inputs>.sock`, a link named by a hash of what the
  settings are made from (`Inputs.key`: the root options, the working directory, the
  environment, the config file's bytes), which the shared process makes when it is started
  with those inputs.
- **Who is on the other end**: each side reads the peer's uid from the kernel
  (SO_PEERCRED) and refuses another user's.
- **The opening**: the caller sends one JSON line (`hello`: version, key, mode), the shared
  process answers one (`welcome`: its pid, version, settings hash; or `refused` and a reason).
  Then, in mode "mcp", the connection carries one MCP session, JSON-RPC lines as on stdio; in
  mode "call", requests to the service (`client.Connection.call`).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import struct
import sys

import memory_orchestrator

TYPE_CHECKING = False  # (`typing` is not imported at run time: mypy reads this as true)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import BinaryIO

    UidOf = Callable[[socket.socket], int]

__all__ = [
    "MAX_HELLO_BYTES",
    "Inputs",
    "NotRunning",
    "Unusable",
    "alias_name",
    "check_peer",
    "hello",
    "open_connection",
    "package_version",
    "peer_uid",
    "server_name",
    "shared_options",
    "socket_dir",
]

DISTRIBUTION = "mnemon_memory_orchestrator"  # the dist-info folder's name
MAX_HELLO_BYTES = 64 * 1024
MAX_CONFIG_BYTES = 4 * 1024 * 1024
_SUN_PATH = 107  # the longest socket path the kernel takes (sockaddr_un, NUL included: 108)
_TRUE = {"1", "true", "yes", "on", "t", "y"}
_FALSE = {"0", "false", "no", "off", "f", "n"}
# what the settings read besides ORCHESTRATOR_*: the default data dir, the stores' own
# variables, the model's cache and the programs found on PATH
ENV_NAMES = ("HOME", "XDG_DATA_HOME", "PATH", "FASTEMBED_CACHE_PATH")
ENV_PREFIXES = ("ORCHESTRATOR_", "MNEMON_")


class Unusable(Exception):
    """The shared process cannot be used here; the message says why, in one line."""


class NotRunning(Unusable):
    """Nothing listens on the socket (yet), or the process there is going away."""


_found: dict[str, str] = {}


def package_version() -> str:
    """This package's version, read from its dist-info folder on `sys.path` (the first, as
    `importlib.metadata` finds it, without importing that: it costs tens of milliseconds);
    "0.0.0" when the package is not installed."""
    if "version" not in _found:
        _found["version"] = "0.0.0"
        prefix = f"{DISTRIBUTION}-"
        for entry in sys.path:
            try:
                names = os.listdir(entry or ".")
            except OSError:
                continue
            found = sorted(n for n in names if n.startswith(prefix) and n.endswith(".dist-info"))
            if found:
                _found["version"] = found[0][len(prefix) : -len(".dist-info")]
                break
    return _found["version"]


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)[:40]


def server_name(settings_key: str) -> str:
    """The shared process's socket (without `.sock`) for settings with this hash."""
    return f"{_safe(package_version())}-s{settings_key[:24]}"


def alias_name(inputs_key: str) -> str:
    """The link to it for callers that know the settings' inputs only."""
    return f"{_safe(package_version())}-k{inputs_key[:24]}"


def origin() -> list[str]:
    """What makes two installs different though their versions are the same: the
    interpreter and the package's folder (two checkouts of one version, two virtualenvs)."""
    return [sys.executable, os.path.dirname(os.path.abspath(memory_orchestrator.__file__))]


def environment(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """The variables settings are made from (sorted)."""
    return sorted(
        (name, value)
        for name, value in env.items()
        if name in ENV_NAMES or name.startswith(ENV_PREFIXES)
    )


class Inputs:
    """What a process's settings are made from besides the environment and the working
    directory: the root options of the command line (`--config`, `--backend`,
    `--data-dir`)."""

    __slots__ = ("backend", "config", "data_dir")

    def __init__(
        self, config: str | None = None, backend: str | None = None, data_dir: str | None = None
    ) -> None:
        self.config, self.backend, self.data_dir = config, backend, data_dir

    def options(self) -> list[str]:
        """The root options again, for the command line of a process started with them."""
        out: list[str] = []
        for flag, value in (
            ("--config", self.config),
            ("--backend", self.backend),
            ("--data-dir", self.data_dir),
        ):
            if value is not None:
                out += [flag, value]
        return out

    def config_file(self, env: Mapping[str, str], cwd: str) -> str | None:
        """The TOML file the settings read, found as `settings.find_config` finds it."""
        named = self.config if self.config is not None else env.get("ORCHESTRATOR_CONFIG")
        if named:
            return os.path.join(cwd, named)
        local = os.path.join(cwd, "orchestrator.toml")
        return local if os.path.isfile(local) else None

    def key(self, env: Mapping[str, str], cwd: str) -> str:
        """A hash of everything the settings are made from (the same inputs give the same
        settings; other inputs may too, and the shared process they start then links them to
        the one already running: `server`)."""
        config = self.config_file(env, cwd)
        digest = "none"
        if config is not None:
            try:
                with open(config, "rb") as file:
                    digest = hashlib.sha256(file.read(MAX_CONFIG_BYTES + 1)).hexdigest()
            except OSError as exc:
                digest = f"unreadable: {exc.strerror}"
        material = [
            package_version(),
            *origin(),
            cwd,
            [self.config, self.backend, self.data_dir],
            environment(env),
            [config, digest],
        ]
        return hashlib.sha256(json.dumps(material).encode()).hexdigest()


def shared_options(inputs: Inputs, env: Mapping[str, str], cwd: str) -> tuple[bool, float]:
    """`[shared_process] enabled` and `start_timeout_s`, read as the settings would read them
    (the environment first, then the config file) without building them: the relay decides
    with these before anything heavy is loaded. The shared process checks them again with
    the real settings (a value only they can read is honoured there)."""
    found: dict[str, object] = {}
    config = inputs.config_file(env, cwd)
    if config is not None and os.path.isfile(config):
        import tomllib

        try:
            with open(config, "rb") as file:
                section = tomllib.load(file).get("shared_process")
        except (OSError, ValueError):
            section = None  # the settings say what is wrong with it, in the shared process
        if isinstance(section, dict):
            found.update(section)
    prefix = "ORCHESTRATOR_SHARED_PROCESS__"
    found.update({k[len(prefix) :].lower(): v for k, v in env.items() if k.startswith(prefix)})
    enabled = _flag(found.get("enabled"), default=True)
    try:
        start = float(str(found.get("start_timeout_s", 30.0)))
    except ValueError:
        start = 30.0
    return enabled, max(1.0, start)


def _flag(value: object, *, default: bool) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if value is not None else ""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return default


def socket_dir(env: Mapping[str, str] | None = None) -> str:
    """The socket directory (made with mode 0700 when missing), checked: a real directory,
    owned by this user, mode 0700. Raises `Unusable` otherwise, and on a system that cannot
    tell a socket's peer (`peer_uid`: Linux can)."""
    env = os.environ if env is None else env
    if not hasattr(socket, "SO_PEERCRED"):  # (before anything is made or started)
        raise Unusable("this system cannot tell who is at the other end of a socket")
    uid = os.getuid()
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime) and os.path.isdir(runtime):
        path = os.path.join(runtime, "memory-orchestrator")
    else:
        path = os.path.join(env.get("TMPDIR") or "/tmp", f"memory-orchestrator-{uid}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise Unusable(f"cannot make the socket directory {path}: {exc.strerror}") from exc
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise Unusable(f"cannot read the socket directory {path}: {exc.strerror}") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise Unusable(f"the socket directory {path} is not a directory (a link or a file)")
    if info.st_uid != uid:
        raise Unusable(f"the socket directory {path} belongs to uid {info.st_uid}, not {uid}")
    mode = stat.S_IMODE(info.st_mode)
    if mode != 0o700:
        raise Unusable(
            f"the socket directory {path} has mode {mode:04o}; it must be 0700 (only its"
            " owner may enter it): it is left as it is"
        )
    if len(os.path.join(path, alias_name("0" * 24) + ".sock").encode()) > _SUN_PATH:
        raise Unusable(f"the socket directory {path} is too long a path for a socket")
    return path


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket, from the kernel."""
    if not hasattr(socket, "SO_PEERCRED"):
        raise Unusable("this system cannot tell who is at the other end of a socket")
    size = struct.calcsize("3i")
    credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, size)
    _pid, uid, _gid = struct.unpack("3i", credentials)
    return int(uid)


def check_peer(sock: socket.socket, uid_of: UidOf = peer_uid) -> None:
    """Raise `Unusable` unless the peer runs as this user (`uid_of` reads its uid)."""
    uid = uid_of(sock)
    if uid != os.getuid():
        raise Unusable(f"the peer runs as uid {uid}, not {os.getuid()}: refused")


def hello(mode: str, key: str) -> bytes:
    """The caller's opening line."""
    message = {"hello": "memory-orchestrator", "version": package_version(), "key": key}
    return json.dumps({**message, "mode": mode, "pid": os.getpid()}).encode() + b"\n"


def read_line(reader: BinaryIO, limit: int = MAX_HELLO_BYTES) -> dict[str, object]:
    """One JSON object line from a binary reader; `Unusable` when the other end closed or
    sent something else."""
    line = reader.readline(limit + 1)
    if not line:
        raise NotRunning("the shared process closed the connection")
    if not line.endswith(b"\n"):
        raise Unusable("the shared process sent an over-long or cut line")
    try:
        found = json.loads(line)
    except ValueError as exc:
        raise Unusable("the shared process sent a line that is not JSON") from exc
    if not isinstance(found, dict):
        raise Unusable("the shared process sent a line that is not a JSON object")
    return found


def open_connection(
    path: str, key: str, mode: str, timeout_s: float, uid_of: UidOf = peer_uid
) -> tuple[socket.socket, BinaryIO, dict[str, object]]:
    """Connect to the shared process at `path`, check who it is and open `mode` ("mcp" or
    "call"): the socket (blocking, no timeout), a binary reader on it and the welcome.
    Raises `Unusable` when nothing listens there, it is another user's, or it refuses."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    reader: BinaryIO | None = None
    try:
        sock.settimeout(timeout_s)
        try:
            sock.connect(path)
        except OSError as exc:
            raise NotRunning(f"no shared process at {path} ({exc.strerror or exc})") from exc
        check_peer(sock, uid_of)
        reader = sock.makefile("rb")
        try:
            sock.sendall(hello(mode, key))
            welcome = read_line(reader)
        except ConnectionError as exc:  # a process ending: its socket still took connections
            raise NotRunning(f"the shared process at {path} went away: {exc}") from exc
        except OSError as exc:  # (a timeout too)
            raise Unusable(f"the shared process at {path} did not answer: {exc}") from exc
        if "refused" in welcome:
            raise Unusable(f"the shared process refused: {welcome['refused']}")
        if welcome.get("version") != package_version():
            raise Unusable(
                f"the shared process at {path} runs version {welcome.get('version')},"
                f" not {package_version()}"
            )
        sock.settimeout(None)
    except BaseException:
        if reader is not None:  # (the socket closes only once its reader is closed too)
            reader.close()
        sock.close()
        raise
    return sock, reader, welcome

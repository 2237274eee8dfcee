"""No shell anywhere in the source: checked on the syntax tree, so nothing is imported or run.

Forbidden: `shell=` set to anything but False, `os.system`, `os.popen`, `subprocess.getoutput`
/ `getstatusoutput`, `asyncio.create_subprocess_shell` and `loop.subprocess_shell`, whether
called through the module, an alias or a `from` import. Every process start (`subprocess.run`,
`Popen`, `anyio.open_process`, ...) takes its command as a list. The Mnemon adapter puts free
text after `--`, checked on its argument builder.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import memory_orchestrator
from memory_orchestrator.backends.mnemon import MnemonBackend
from memory_orchestrator.settings import MnemonSettings

ROOT = Path(memory_orchestrator.__file__).resolve().parent

# module -> names that run a command line through a shell
SHELL_CALLS = {
    "os": {"system", "popen"},
    "subprocess": {"getoutput", "getstatusoutput"},
    "asyncio": {"create_subprocess_shell"},
}
SHELL_METHODS = {"subprocess_shell"}  # asyncio event-loop method
# module -> names that start a process and must get the command as a list
PROCESS_CALLS = {
    "subprocess": {"run", "Popen", "call", "check_call", "check_output"},
    "anyio": {"open_process", "run_process"},
    "os": {"execv", "execve", "execvp", "execvpe", "spawnv", "spawnve", "spawnvp", "spawnvpe"},
}
LIST_ANNOTATIONS = ("list[", "Sequence[", "tuple[")


@dataclass(frozen=True)
class Finding:
    line: int
    what: str


def _aliases(tree: ast.AST) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """`import x as y` -> {y: x}; `from x import n as m` -> {m: (x, n)}."""
    modules: dict[str, str] = {}
    names: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    modules[alias.asname] = alias.name
                else:  # `import anyio.lowlevel` binds `anyio`
                    top = alias.name.split(".")[0]
                    modules[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = (node.module, alias.name)
    return modules, names


def _target(
    call: ast.Call, modules: dict[str, str], names: dict[str, tuple[str, str]]
) -> tuple[str, str] | None:
    """(module, name) a call reaches, when it is a module function."""
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        module = modules.get(func.value.id)
        return (module, func.attr) if module else None
    if isinstance(func, ast.Name):
        return names.get(func.id)
    return None


def _list_valued(arg: ast.expr, function: ast.AST | None) -> bool:
    """A list/tuple literal, or a name that the enclosing function declares or builds as one."""
    if isinstance(arg, ast.List | ast.Tuple | ast.ListComp):
        return True
    if not isinstance(arg, ast.Name) or function is None:
        return False
    assert isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
    for param in [*function.args.args, *function.args.kwonlyargs]:
        if param.arg == arg.id and param.annotation is not None:
            return ast.unparse(param.annotation).startswith(LIST_ANNOTATIONS)
    built = [
        node.value
        for node in ast.walk(function)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == arg.id for t in node.targets)
    ]
    return bool(built) and all(
        isinstance(v, ast.List | ast.Tuple | ast.ListComp)
        or (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "argv")
        for v in built
    )


def _shell_imports(tree: ast.AST) -> list[Finding]:
    return [
        Finding(node.lineno, f"imports {node.module}.{alias.name}")
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in SHELL_CALLS
        for alias in node.names
        if alias.name in SHELL_CALLS[node.module]
    ]


def shell_findings(source: str) -> list[Finding]:
    tree = ast.parse(source)
    modules, names = _aliases(tree)
    found = _shell_imports(tree)

    def visit(node: ast.AST, function: ast.AST | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
            if isinstance(child, ast.Call):
                check(child, function)
            visit(child, inner)

    def check(call: ast.Call, function: ast.AST | None) -> None:
        for kw in call.keywords:
            if kw.arg == "shell" and not (
                isinstance(kw.value, ast.Constant) and kw.value.value is False
            ):
                found.append(Finding(call.lineno, "shell= not False"))
        if isinstance(call.func, ast.Attribute) and call.func.attr in SHELL_METHODS:
            found.append(Finding(call.lineno, f"calls .{call.func.attr}"))
        target = _target(call, modules, names)
        if target is None:
            return
        module, name = target
        if name in SHELL_CALLS.get(module, set()):
            found.append(Finding(call.lineno, f"calls {module}.{name}"))
        if name in PROCESS_CALLS.get(module, set()):
            first = call.args[0] if call.args else None
            if first is None or not _list_valued(first, function):
                found.append(Finding(call.lineno, f"{module}.{name} without a list command"))

    visit(tree, None)
    return found


def process_starts(source: str) -> list[str]:
    tree = ast.parse(source)
    modules, names = _aliases(tree)
    starts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            target = _target(node, modules, names)
            if target and target[1] in PROCESS_CALLS.get(target[0], set()):
                starts.append(".".join(target))
    return starts


def _sources() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def test_no_module_of_the_package_runs_a_shell() -> None:
    violations = [
        f"{path.relative_to(ROOT)}:{f.line} {f.what}"
        for path in _sources()
        for f in shell_findings(path.read_text(encoding="utf-8"))
    ]
    assert violations == []


def test_the_scan_sees_the_process_starts_that_exist() -> None:
    """Guards the checker itself: it must find the adapters' real process starts."""
    starts = {
        path.relative_to(ROOT).as_posix(): process_starts(path.read_text(encoding="utf-8"))
        for path in _sources()
    }
    assert "anyio.open_process" in starts["backends/mnemon/process.py"]
    assert "subprocess.run" in starts["backends/mnemonic.py"]


BAD = {
    "shell_true": "import subprocess\nsubprocess.run(['ls'], shell=True)\n",
    "shell_variable": "import subprocess\nflag = True\nsubprocess.run(['ls'], shell=flag)\n",
    "os_system": "import os\nos.system('ls')\n",
    "os_popen_alias": "import os as o\no.popen('ls')\n",
    "from_import": "from os import system\nsystem('ls')\n",
    "getoutput": "import subprocess as sp\nsp.getoutput('ls')\n",
    "getstatusoutput": "from subprocess import getstatusoutput as g\ng('ls')\n",
    "create_subprocess_shell": "import asyncio\nasyncio.create_subprocess_shell('ls')\n",
    "loop_shell": "def f(loop):\n    loop.subprocess_shell(None, 'ls')\n",
    "string_command": "import subprocess\nsubprocess.run('ls -l')\n",
    "fstring_command": "import subprocess\ndef f(x):\n    subprocess.run(f'git {x}')\n",
    "string_variable": "import anyio\ndef f(x):\n    cmd = 'ls ' + x\n    anyio.open_process(cmd)\n",
    "str_param": "import subprocess\ndef f(cmd: str):\n    subprocess.Popen(cmd)\n",
}


def test_the_checker_flags_every_form_of_shell_use() -> None:
    missed = [name for name, source in BAD.items() if not shell_findings(source)]
    assert missed == []


def test_the_checker_accepts_list_commands() -> None:
    good = (
        "import subprocess, anyio\n"
        "subprocess.run(['git', 'status'], shell=False, check=False)\n"
        "def f(argv: list[str]):\n    anyio.open_process(argv)\n"
        "def g(x):\n    argv = ['git', '-C', x]\n    argv += ['add']\n    subprocess.run(argv)\n"
    )
    assert shell_findings(good) == []


# ---------------------------------------------------------------- the Mnemon argument builder

TEXT = st.text(st.characters(codec="utf-8"), max_size=80)


@settings(max_examples=60, deadline=None)
@given(
    command=st.sampled_from(["recall", "remember", "show", "related", "link", "forget"]),
    texts=st.lists(
        TEXT | st.sampled_from(["--", "--help", "-rf", "--store=x", "; rm -rf /"]),
        min_size=1,
        max_size=3,
    ),
)
def test_free_text_always_follows_the_double_dash(command: str, texts: list[str]) -> None:
    settings_ = MnemonSettings(data_dir=Path("/nonexistent-data"), store="s1", readonly=True)
    backend = MnemonBackend(settings_)
    flags = ["--limit", "5"]
    argv = backend.argv(command, flags, texts, binary="/usr/bin/mnemon")
    assert all(isinstance(a, str) for a in argv)
    end = argv.index("--")
    assert argv[end + 1 :] == texts
    assert argv[:end] == [
        "/usr/bin/mnemon",
        "--data-dir",
        "/nonexistent-data",
        "--store",
        "s1",
        "--readonly",
        command,
        *flags,
    ]

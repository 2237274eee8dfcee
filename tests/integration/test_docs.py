"""The documentation site builds with `mkdocs build --strict` (no page left out of the nav, no
link to a missing page or anchor), and its generated reference pages hold every MCP tool and
argument, every command and option, and every setting of the code as it is now; the README
stays short and its links lead somewhere."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.core import TyperGroup

from memory_orchestrator.faces.cli import app as cli_app
from memory_orchestrator.faces.mcp.server import create_server
from memory_orchestrator.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
README_MAX_LINES = 150
SPEED_MAX_LINES = 12  # the README's Speed section: a few lines and one table
PERFORMANCE_MAX_WORDS = 3000  # docs/explanation/performance.md: how fast, why, how to measure


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as `make docs` builds it, strict, into a temporary folder."""
    out = tmp_path_factory.mktemp("site")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    env["NO_MKDOCS_2_WARNING"] = "1"  # Material's end-of-life banner, not a warning of ours
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)]
    done = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr[-6000:]
    return out


def _page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text(encoding="utf-8")


def _section(html: str, anchor: str) -> str:
    """The HTML from the heading with this id to the next heading of the same level."""
    found = re.search(rf'<h(\d) id="{re.escape(anchor)}"', html)
    assert found, f"no heading #{anchor}"
    level = found.group(1)
    end = html.find(f"<h{level} ", found.end())
    return html[found.start() : end if end >= 0 else len(html)]


def test_the_site_builds_strict_with_every_page(site: Path) -> None:
    for page in ("", "tutorial/first-memories", "reference/tools", "explanation/pipeline"):
        assert (site / page / "index.html").is_file(), page


def test_the_reference_pages_are_generated_not_the_stubs_in_the_checkout(site: Path) -> None:
    for name in ("tools", "cli", "settings"):
        stub = (REPO / "docs" / "reference" / f"{name}.md").read_text(encoding="utf-8")
        assert "This page is generated" in stub
        built = _page(site, f"reference/{name}")
        assert "This page is generated" not in built
        assert "Generated from the code by scripts/docs_reference.py" in built


# ---------------------------------------------------------------- settings


def _schema_paths(schema: dict[str, Any], defs: dict[str, Any], path: str) -> Iterator[str]:
    """Every leaf key of a settings JSON schema (tables and lists of tables walked into)."""
    for name, prop in schema.get("properties", {}).items():
        key = f"{path}.{name}" if path else name
        target = prop.get("items", prop)
        ref = target.get("$ref") or next(
            (b["$ref"] for b in target.get("anyOf", []) if "$ref" in b), None
        )
        model = defs.get(ref.rsplit("/", 1)[-1]) if ref else None
        if model is not None and "properties" in model:
            yield from _schema_paths(model, defs, key)
        else:
            yield key


def test_every_setting_is_on_the_settings_page_with_its_variable(site: Path) -> None:
    html = _page(site, "reference/settings")
    schema = Settings.model_json_schema()
    keys = list(_schema_paths(schema, schema.get("$defs", {}), ""))
    assert len(keys) > 100
    for key in keys:
        assert f'id="{key}"' in html, key
    for key in ("retrieval.top_k", "ranking.weights.cross_reference", "semantic.enabled"):
        assert "ORCHESTRATOR_" + key.upper().replace(".", "__") in html, key
    assert "<code>orchestrator.example.toml</code>" in html


# ---------------------------------------------------------------- MCP tools


def test_every_tool_and_each_of_its_arguments_and_fields_is_on_the_tools_page(site: Path) -> None:
    html = _page(site, "reference/tools")
    tools = asyncio.run(create_server(Settings.model_construct()).list_tools())
    assert len(tools) == 7
    for tool in tools:
        section = _section(html, tool.name)
        for kind, schema in (("input", tool.input_schema), ("output", tool.output_schema)):
            part = _section(section, f"{tool.name}-{kind}")
            for name in (schema or {}).get("properties", {}):
                assert f"<code>{name}</code>" in part, (tool.name, kind, name)
            for name in (schema or {}).get("$defs", {}):
                assert f'id="type-{name}"' in html, name


# ---------------------------------------------------------------- CLI


def _commands(group: TyperGroup, context: typer.Context, prefix: str) -> Iterator[tuple[str, Any]]:
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None
        path = f"{prefix} {name}"
        yield path, command
        if isinstance(command, TyperGroup):
            yield from _commands(command, context, path)


def test_every_command_and_option_is_on_the_cli_page(site: Path) -> None:
    html = _page(site, "reference/cli")
    root = typer.main.get_command(cli_app)
    assert isinstance(root, TyperGroup)
    context = typer.Context(root)
    commands = list(_commands(root, context, "orchestrator"))
    assert len(commands) > 15
    for path, command in commands:
        anchor = re.search(rf"<h\d id=\"([^\"]+)\">(?:<code>)?{re.escape(path)}(?:</code>)?", html)
        assert anchor, path
        section = _section(html, anchor.group(1))
        for parameter in command.params:
            for flag in parameter.opts:
                if flag.startswith("--"):
                    assert flag in section, (path, flag)


# ---------------------------------------------------------------- make targets


def test_every_make_target_with_a_help_line_is_on_the_develop_page() -> None:
    """`make help` lists the targets with a `##` line; the develop page names each one."""
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    targets = re.findall(r"^([a-zA-Z_-]+):.*## ", makefile, flags=re.M)
    assert {"setup", "test", "ui", "bench-ui", "browser"} <= set(targets)
    page = (REPO / "docs" / "how-to" / "develop.md").read_text(encoding="utf-8")
    missing = [t for t in targets if not re.search(rf"`make {re.escape(t)}`", page)]
    assert missing == []


# ---------------------------------------------------------------- README


def test_the_readme_is_short_and_keeps_the_quickstart() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    assert "```bash\nmake demo\nmake test\n```" in text


def test_every_page_the_readme_links_to_exists() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    # Images are left to the site's strict build, which checks the pages that show them.
    links = re.findall(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)", text)
    local = [link.split("#", 1)[0] for link in links if "://" not in link]
    assert len(local) > 15
    for target in local:
        assert (REPO / target).exists(), target


def _readme_section(text: str, title: str) -> list[str]:
    """The lines of the README's `## title` section, up to the next `## ` heading, without the
    blank lines that end it."""
    lines = text.splitlines()
    start = lines.index(f"## {title}")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    section = lines[start:end]
    while section and not section[-1].strip():
        section.pop()
    return section


def test_the_readme_speed_section_is_a_few_lines_and_one_table() -> None:
    section = _readme_section((REPO / "README.md").read_text(encoding="utf-8"), "Speed")
    assert len(section) <= SPEED_MAX_LINES, "\n".join(section)
    separators = [line for line in section if re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", line)]
    assert len(separators) == 1, "the Speed section holds exactly one table"


def test_the_performance_page_explains_and_leaves_the_record_to_bench_results() -> None:
    text = (REPO / "docs" / "explanation" / "performance.md").read_text(encoding="utf-8")
    assert len(text.split()) <= PERFORMANCE_MAX_WORDS
    results = REPO / "bench" / "results"
    dated = [p.name for p in results.glob("*.md") if p.name != "README.md"]
    assert dated
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d-[a-z0-9-]+\.md", name) for name in dated), dated
    for name in re.findall(r"bench/results/(\d[\w.-]+\.md)", text):
        assert (results / name).is_file(), name


def _slug(heading: str) -> str:
    """A heading's anchor as the site's table of contents makes it (Python-Markdown's
    default slugify, over the heading's text without its inline markup)."""
    text = re.sub(r"[`*_]", "", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def test_every_anchor_the_readme_links_to_is_a_heading_of_its_page() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"(?<!!)\[[^\]]*\]\(([^)\s#]+\.md)#([^)\s]+)\)", text)
    assert links, "the README links to sections of the docs"
    for page, anchor in links:
        lines = (REPO / page).read_text(encoding="utf-8").splitlines()
        headings = {_slug(line.lstrip("#")) for line in lines if re.match(r"#{1,6} ", line)}
        assert anchor in headings, f"{page}#{anchor}"

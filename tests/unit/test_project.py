"""Which project a session works in, and where its memory lives (`faces.shared.project`)."""

from __future__ import annotations

from pathlib import Path

from memory_orchestrator.faces.shared.project import data_dir_of, project_root


def test_the_nearest_git_upward_is_the_root(tmp_path: Path) -> None:
    (tmp_path / "shop" / ".git").mkdir(parents=True)
    deep = tmp_path / "shop" / "src" / "billing"
    deep.mkdir(parents=True)
    assert project_root("auto", {}, str(deep)) == str(tmp_path / "shop")


def test_the_clients_variable_comes_first(tmp_path: Path) -> None:
    (tmp_path / "shop" / ".git").mkdir(parents=True)
    other = tmp_path / "other"
    other.mkdir()
    env = {"CLAUDE_PROJECT_DIR": str(other)}
    assert project_root("auto", env, str(tmp_path / "shop")) == str(other)
    env = {"CURSOR_PROJECT_DIR": str(other), "CLAUDE_PROJECT_DIR": "relative/no"}
    assert project_root("auto", env, str(tmp_path / "shop")) == str(other)


def test_without_git_the_working_directory_is_the_root(tmp_path: Path) -> None:
    assert project_root("auto", {}, str(tmp_path)) == str(tmp_path)


def test_a_path_is_taken_as_given_and_an_unfilled_variable_as_auto(tmp_path: Path) -> None:
    assert project_root("sub/../x", {}, str(tmp_path)) == str(tmp_path / "x")
    (tmp_path / ".git").mkdir()
    assert project_root("${workspaceFolder}", {}, str(tmp_path)) == str(tmp_path)


def test_two_folders_of_one_name_get_two_memories(tmp_path: Path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}
    first = data_dir_of(str(tmp_path / "a" / "shop"), env)
    second = data_dir_of(str(tmp_path / "b" / "shop"), env)
    assert first != second
    for found in (first, second):
        assert Path(found).parent == tmp_path / "data" / "memory-orchestrator" / "projects"
        assert Path(found).name.startswith("shop-")
    assert data_dir_of("/home/me/shop", {"HOME": "/home/me"}).startswith(
        "/home/me/.local/share/memory-orchestrator/projects/shop-"
    )

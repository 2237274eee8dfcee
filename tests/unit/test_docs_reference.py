"""The settings reference is generated from the model, so a renamed or new setting changes the
page, and the hand-written example file is checked against the same model
(`scripts/docs_reference.py`; the site's strict build: `tests/integration/test_docs.py`)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import BaseModel, Field

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture(scope="module")
def reference() -> ModuleType:
    sys.path.insert(0, str(SCRIPTS))
    try:
        return importlib.import_module("docs_reference")
    finally:
        sys.path.remove(str(SCRIPTS))


class Tuning(BaseModel):
    """How hard to try."""

    alpha: int = Field(default=3, ge=1, le=9, description="how many tries")


class Renamed(BaseModel):
    """How hard to try."""

    beta: int = Field(default=3, ge=1, le=9, description="how many tries")


class Store(BaseModel):
    backend: str = Field(description="a backend name")
    weight: float = 1.0


class Root(BaseModel):
    name: str = Field(default="x", description="what it is called")
    tuning: Tuning = Field(default_factory=Tuning)
    stores: list[Store] = Field(default_factory=list, description="the members")


class RootRenamed(Root):
    tuning: Renamed = Field(default_factory=Renamed)  # type: ignore[assignment]


def test_every_key_of_the_model_is_a_row_with_its_variable_default_range_and_meaning(
    reference: ModuleType,
) -> None:
    page = reference.settings_page(Root)
    assert '<span id="tuning.alpha"></span>`alpha` | `3` | integer (≥ 1, ≤ 9) |' in page
    assert "`ORCHESTRATOR_TUNING__ALPHA` | how many tries |" in page
    assert "## `[tuning]` { #tuning }" in page
    assert "How hard to try." in page
    # a list of tables: its keys, no variable of their own, the required key said so
    assert "## `[[stores]]` { #stores }" in page
    assert '<span id="stores.backend"></span>`backend` | required | string | — |' in page


def test_a_renamed_field_changes_the_page(reference: ModuleType) -> None:
    before, after = reference.settings_page(Root), reference.settings_page(RootRenamed)
    assert 'id="tuning.alpha"' in before
    assert 'id="tuning.alpha"' not in after
    assert 'id="tuning.beta"' in after
    assert "ORCHESTRATOR_TUNING__BETA" in after


def test_the_example_file_names_every_setting_of_the_model(reference: ModuleType) -> None:
    assert reference.unnamed_in_example() == []


def test_a_setting_missing_from_the_example_is_named(reference: ModuleType) -> None:
    example = reference.EXAMPLE_TOML.read_text(encoding="utf-8")
    without = "\n".join(
        line for line in example.splitlines() if not line.startswith("when_time_boost")
    )
    assert reference.unnamed_in_example(without) == ["ranking.when_time_boost"]


def test_the_example_comments_are_read_by_key(reference: ModuleType) -> None:
    text = (
        "top = 1  # at the top\n"
        "[retrieval]\n"
        "top_k = 10                      # items returned\n"
        "                                # by default\n"
        '# path = "/x"                   # commented out, still named\n'
        "# [[http.tokens]]\n"
        '# name = "a"\n'
    )
    assert reference.example_comments(text) == {
        "top": "at the top",
        "retrieval.top_k": "items returned by default",
        "retrieval.path": "commented out, still named",
        "http.tokens.name": "",
    }


def test_text_in_a_table_cell_keeps_its_pipes_and_angle_brackets(reference: ModuleType) -> None:
    assert reference._cell("a | b <data_dir> `x<y>`") == "a \\| b &lt;data_dir&gt; `x<y>`"

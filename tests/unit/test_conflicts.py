"""Restatement, update or look-alike: `pipeline.conflicts.compare` per kind of change."""

from __future__ import annotations

import pytest

from memory_orchestrator.pipeline.conflicts import compare

RATE = "The API rate limit for the billing service is 100 requests per minute."
REVIEW = "Dana moved the Atlas review to Friday."


@pytest.mark.parametrize(
    ("old", "new", "what", "detail"),
    [
        (RATE, RATE.replace("100", "500"), ("number",), "100 -> 500 requests per minute"),
        (REVIEW, REVIEW.replace("Friday", "Monday"), ("time",), "Friday -> Monday"),
        (
            "Priya is the tech lead for Atlas.",
            "Marco is the tech lead for Atlas.",
            ("name",),
            "Priya -> Marco",
        ),
        (REVIEW, "Dana did not move the Atlas review to Friday.", ("negation",), "negated"),
        (
            "The team no longer deploys on Fridays.",
            "The team deploys on Fridays.",
            ("negation",),
            "no longer negated",
        ),
        (
            "The new-checkout flag is enabled in production.",
            "The new-checkout flag is disabled in production.",
            ("opposite",),
            "enabled -> disabled",
        ),
        (
            "The nightly backup runs at 2am.",
            "The nightly backup runs at 4am.",
            ("time",),
            "2am -> 4am",
        ),
        (
            "The Atlas pilot starts on 1 December.",
            "The Atlas pilot starts on 3 December.",
            ("number",),
            "1 -> 3 December",
        ),
    ],
)
def test_a_changed_value_is_an_update_that_says_what_changed(
    old: str, new: str, what: tuple[str, ...], detail: str
) -> None:
    change = compare(old, new)
    assert (change.kind, change.what, change.detail) == ("update", what, detail)


@pytest.mark.parametrize(
    "new",
    [
        "The Atlas review was moved to Friday by Dana.",
        "Dana has moved the Atlas review to Friday.",
        "dana moved the atlas review to friday",
    ],
)
def test_a_restatement_asserts_the_same_values(new: str) -> None:
    assert compare(REVIEW, new).kind == "same"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # another subject with its own value
            "The staging database password rotates every 30 days.",
            "The production database password rotates every 90 days.",
        ),
        (  # someone else's fact
            "Dana's flight to Berlin leaves on Friday.",
            "Marco's flight to Berlin leaves on Monday.",
        ),
        (
            "The search API rate limit is 100 requests per minute.",
            "The billing API rate limit is 500 requests per minute.",
        ),
    ],
)
def test_a_look_alike_about_something_else_is_not_an_update(old: str, new: str) -> None:
    assert compare(old, new).kind == "other"

"""Restatement, update or look-alike: `pipeline.conflicts.compare` per kind of change."""

from __future__ import annotations

import pytest

from memory_orchestrator.pipeline.conflicts import compare
from memory_orchestrator.pipeline.paraphrase import Meaning
from memory_orchestrator.pipeline.sentences import analyse, role
from memory_orchestrator.pipeline.wording import opposed

RATE = "The API rate limit for the billing service is 100 requests per minute."
REVIEW = "Dana moved the Atlas review to Friday."
LEXICAL = Meaning()  # WordNet's common senses, no model


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


# ---------------------------------------------------------------- the failing kinds


@pytest.mark.parametrize(
    ("old", "new", "detail"),
    [
        (
            "We publish the docs site from the gh-pages branch.",
            "We publish the docs site from the main branch.",
            "gh-pages -> main",
        ),
        (
            "The API is hosted on the staging cluster.",
            "The API is hosted on the production cluster.",
            "staging -> production",
        ),
        (
            "Nightly tests run against the old schema.",
            "Nightly tests run against the new schema.",
            "old -> new",
        ),
        (
            "The offsite will take place in Lisbon.",
            "The offsite will take place in Porto.",
            "Lisbon -> Porto",
        ),
        (
            "Our team tracks bugs in Jira.",
            "Our team tracks bugs in Linear.",
            "Jira -> Linear",
        ),
        (
            "Kim maintains the payments SDK.",
            "Lee maintains the payments SDK.",
            "Kim -> Lee",
        ),
        (
            "The mobile app is built with Flutter.",
            "The mobile app is built with React Native.",
            "Flutter -> React Native",
        ),
    ],
    ids=["branch", "cluster", "schema", "city", "tool", "owner", "two-word-name"],
)
def test_a_one_word_swap_of_what_a_memory_says_is_a_correction(
    old: str, new: str, detail: str
) -> None:
    change = compare(old, new, LEXICAL)
    assert (change.kind, change.detail) == ("update", detail)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (
            "Maria prefers meetings in the morning.",
            "Maria no longer wants meetings in the morning.",
        ),
        ("Tom drinks coffee at work.", "Tom stopped drinking coffee at work."),
        (
            "The Atlas integration supports webhooks.",
            "The Atlas integration never supports webhooks.",
        ),
    ],
    ids=["no-longer-another-verb", "stopped", "never"],
)
def test_a_negation_is_a_correction_even_with_another_verb(old: str, new: str) -> None:
    change = compare(old, new, LEXICAL)
    assert change.kind == "update"
    assert "negation" in change.what


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (
            "The design review starts at 10:00 on Mondays.",
            "On Mondays the design review begins at 10:00.",
        ),
        ("Kim maintains the payments SDK.", "The payments SDK is maintained by Kim."),
        (REVIEW, "The Atlas review was moved to Friday by Dana."),
        (REVIEW, "Dana has moved the Atlas review to Friday."),
        (REVIEW, "dana moved the atlas review to friday"),
        ("Priya is the product manager for Atlas.", "The product manager for Atlas is Priya."),
        ("Tom bought a new laptop last week.", "Last week Tom purchased a new laptop."),
        ("Ben sees Dr Weiss on Fridays.", "Ben has seen Dr Weiss on Fridays."),
    ],
    ids=[
        "reorder-synonym",
        "passive",
        "passive-by",
        "perfect",
        "case",
        "inverted",
        "bought",
        "seen",
    ],
)
def test_a_restatement_in_other_words_asserts_the_same(old: str, new: str) -> None:
    assert compare(old, new, LEXICAL).kind == "same"


def test_the_synonym_that_made_it_a_restatement_is_named() -> None:
    change = compare(
        "The design review starts at 10:00.", "The design review begins at 10:00.", LEXICAL
    )
    assert change.same_meaning == ("starts ~ begins",)


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
        # another subject, the same value
        ("The staging cluster runs Postgres 15.", "The production cluster runs Postgres 15."),
        (
            "Backups of the staging database are kept for 30 days.",
            "Backups of the production database are kept for 30 days.",
        ),
        ("Dana's flight to Berlin leaves on Friday.", "Marco's flight to Berlin leaves on Friday."),
        (
            "The Atlas launch is scheduled for March 14.",
            "The Vega launch is scheduled for March 14.",
        ),
        (
            "We publish the docs site from the main branch.",
            "We publish the blog from the main branch.",
        ),
        ("Kim maintains the payments SDK.", "Kim maintains the billing SDK."),
        ("Clara takes ibuprofen for her migraines.", "Clara takes ibuprofen for her back pain."),
        ("The inbound queue holds 100 messages.", "The outbound queue holds 100 messages."),
        (  # an antonym that picks the purchases, not the fact's value
            "Sofia no longer signs off on software purchases above 500 euros.",
            "Sofia signs off on hardware purchases above 500 euros.",
        ),
        ("The 2pm standup is in room 4.", "The 4pm standup is in room 4."),
        # the same names in other places
        ("Kim reports to Lee.", "Lee reports to Kim."),
        # another relation between the same things
        ("Kim maintains the payments SDK.", "Kim wrote the payments SDK."),
    ],
)
def test_a_look_alike_about_something_else_is_not_an_update(old: str, new: str) -> None:
    assert compare(old, new, LEXICAL).kind == "other"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Kim maintains the payments SDK and the docs.", "Kim maintains the payments SDK."),
        ("Clara takes aspirin every morning.", "Clara takes ibuprofen every morning."),
        ("Staff can work remotely on Fridays.", "Staff must work remotely on Fridays."),
        ("Users over 18 can sign up.", "Users under 18 can sign up."),
        ("The design review starts at 10:00.", "The design review is delayed at 10:00."),
    ],
    ids=["says-less", "direct-object", "modal", "over-under", "another-verb"],
)
def test_a_change_that_is_not_surely_the_same_fact_is_never_a_restatement(
    old: str, new: str
) -> None:
    assert compare(old, new, LEXICAL).kind != "same"


def test_details_added_to_what_a_memory_says_are_a_correction() -> None:
    change = compare(
        "We publish the docs site from the main branch.",
        "We publish the docs site from the protected main branch.",
    )
    assert (change.kind, change.detail) == ("update", "(none) -> protected")


# ---------------------------------------------------------------- how a memory is read


@pytest.mark.parametrize(
    ("text", "word", "part"),
    [
        ("The API is hosted on the staging cluster.", "staging", "value"),
        ("The staging cluster runs Postgres 15.", "staging", "topic"),
        ("We publish the docs site from the main branch.", "docs", "topic"),
        ("We publish the docs site from the main branch.", "main", "value"),
        ("Kim maintains the payments SDK.", "Kim", "value"),
        ("Kim maintains the payments SDK.", "payments", "topic"),
        ("Dana's flight to Berlin leaves on Friday.", "Dana's", "topic"),
        ("Invoices for hosting are paid from the reserve account.", "hosting", "topic"),
        ("Invoices for hosting are paid from the reserve account.", "reserve", "value"),
        ("The nightly-report cron job is paused.", "paused", "value"),
        ("Clara takes aspirin every morning.", "aspirin", "topic"),
        ("We use spreadsheets.", "spreadsheets", "open"),
    ],
)
def test_each_token_is_read_as_what_the_memory_is_about_or_what_it_says(
    text: str, word: str, part: str
) -> None:
    sentence = analyse(text)
    (token,) = [t for t in sentence.tokens if t.text == word]
    assert role(sentence, token) == part


@pytest.mark.parametrize(
    ("a", "b", "opposite"),
    [
        ("enabled", "disabled", True),
        ("lock", "unlock", True),
        ("upload", "download", True),
        ("login", "logout", True),
        ("buys", "sells", True),
        ("starts", "begins", False),
        ("staging", "production", False),
    ],
)
def test_antonyms_by_list_and_by_prefix(a: str, b: str, opposite: bool) -> None:
    assert opposed(a, b) is opposite
    assert opposed(b, a) is opposite


# ---------------------------------------------------------------- verbs, converses, objects


@pytest.mark.parametrize(
    ("old", "new", "alike"),
    [
        (  # to cap is to limit (WordNet's hypernym)
            "The events budget is capped at 4000 euros a month.",
            "The events budget is limited to 4000 euros a month.",
            "capped ~ limited",
        ),
        (  # to wire is to send (the verb its definition opens with)
            "Salaries for the research team are wired from Barclays.",
            "Salaries for the research team are sent from Barclays.",
            "wired ~ sent",
        ),
        (  # a deeper shared sense of two verbs
            "The canal tour leaves from the north gate.",
            "The canal tour departs from the north gate.",
            "leaves ~ departs",
        ),
        (
            "Mileage for the audit trips is reimbursed at 30 cents per kilometre.",
            "Mileage for the audit trips is repaid at 30 cents per kilometre.",
            "reimbursed ~ repaid",
        ),
    ],
    ids=["hypernym", "definition", "deeper-sense", "repaid"],
)
def test_a_verb_wordnet_ties_to_the_old_one_restates_it_without_a_model(
    old: str, new: str, alike: str
) -> None:
    change = compare(old, new, LEXICAL)
    assert (change.kind, change.same_meaning) == ("same", (alike,))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Kim maintains the payments SDK.", "Kim wrote the payments SDK."),
        ("Priya fixed the login bug.", "Priya reported the login bug."),
        (
            "The search API is hosted on the staging cluster.",
            "The search API is tested on the staging cluster.",
        ),
        ("Omar approves expenses for the sales team.", "Omar submits expenses for the sales team."),
        ("The museum displays Roman coins.", "The museum sells Roman coins."),
    ],
    ids=["wrote", "reported", "tested", "submits", "sells"],
)
def test_another_verb_is_another_fact_never_a_restatement(old: str, new: str) -> None:
    change = compare(old, new, LEXICAL)
    assert change.kind == "other"


@pytest.mark.parametrize(
    ("old", "new", "alike"),
    [
        (
            "Container images for the storefront stack are pushed to Harbor.",
            "Harbor receives the container images for the storefront stack.",
            "pushed ~ receives (the other way round)",
        ),
        (
            "The onboarding standup is held in the Maple room.",
            "The Maple room hosts the onboarding standup.",
            "held in ~ hosts (the other way round)",
        ),
        (
            "Samples from the pilot study are stored in freezer 2.",
            "Freezer 2 holds the samples from the pilot study.",
            "stored in ~ holds (the other way round)",
        ),
        (
            "Sofia signs off on hardware purchases above 500 euros.",
            "Hardware purchases above 500 euros are signed off by Sofia.",
            "on (the passive)",
        ),
    ],
    ids=["pushed-receives", "held-hosts", "stored-holds", "signs-off-on"],
)
def test_the_same_fact_the_other_way_round_is_a_restatement(old: str, new: str, alike: str) -> None:
    for a, b in ((old, new), (new, old)):
        change = compare(a, b, LEXICAL)
        assert (change.kind, change.same_meaning) == ("same", (alike,))


@pytest.mark.parametrize(
    "new",
    [
        "Quay receives the container images for the storefront stack.",  # another place
        "Harbor receives the container images for the checkout stack.",  # another thing
        "Harbor deletes the container images for the storefront stack.",  # no holding
    ],
)
def test_the_other_way_round_holds_only_with_the_same_parties(new: str) -> None:
    old = "Container images for the storefront stack are pushed to Harbor."
    assert compare(old, new, LEXICAL).kind != "same"


def test_a_dropped_preposition_with_another_agent_is_not_the_passive() -> None:
    old = "Sofia signs off on hardware purchases above 500 euros."
    assert compare(old, "Hardware purchases above 500 euros are signed off by Helen.").kind != (
        "same"
    )


@pytest.mark.parametrize(
    ("old", "new", "detail"),
    [
        (
            "Clara takes ibuprofen for her migraines.",
            "Clara takes paracetamol for her migraines.",
            "ibuprofen -> paracetamol",
        ),
        (
            "Felix rents a van for the ski holiday.",
            "Felix rents a bike for the ski holiday.",
            "van -> bike",
        ),
        (
            "The frontend repository uses npm for dependencies.",
            "The frontend repository uses pnpm for dependencies.",
            "npm -> pnpm",
        ),
        (
            "Ben sees Dr Weiss for his knee checkups.",
            "Ben sees Dr Novak for his knee checkups.",
            "Weiss -> Novak",
        ),
    ],
    ids=["medicine", "van", "tool", "doctor"],
)
def test_a_swapped_object_before_what_the_memory_is_about_is_a_correction(
    old: str, new: str, detail: str
) -> None:
    change = compare(old, new, LEXICAL)
    assert (change.kind, change.detail) == ("update", detail)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Clara takes ibuprofen for her migraines.", "Clara takes ibuprofen for her allergies."),
        ("Clara takes ibuprofen for her migraines.", "Maria takes ibuprofen for her migraines."),
        ("Felix rents a van for the ski holiday.", "Felix rents a van for the camping holiday."),
        (
            "Atlas runs 3 replicas in the production cluster.",
            "Vega runs 3 replicas in the production cluster.",
        ),
        (
            "Lucas walks 3 kilometres a day for his heart.",
            "Emma walks 3 kilometres a day for his heart.",
        ),
    ],
    ids=["what-for", "who-takes", "which-holiday", "which-system", "who-walks"],
)
def test_the_one_it_is_about_changed_is_another_fact(old: str, new: str) -> None:
    assert compare(old, new, LEXICAL).kind == "other"


def test_a_system_acting_with_a_number_keeps_the_number_as_what_it_says() -> None:
    old = "Atlas runs 3 replicas in the production cluster."
    change = compare(old, old.replace("3", "5"), LEXICAL)
    assert (change.kind, change.detail) == ("update", "3 -> 5 replicas in the")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (
            "Ms Harper teaches Spanish to the beginner group.",
            "Mr Brandt teaches Spanish to the beginner group.",
        ),
        (
            "Ms Harper teaches Spanish to the beginner group.",
            "Ms Harper teaches Spanish to the advanced group.",
        ),
        (
            "Ms Harper teaches Spanish to the weekend group.",
            "Ms Harper teaches Spanish to the evening group.",
        ),
    ],
    ids=["who-teaches", "which-group", "which-time-group"],
)
def test_the_phrase_after_a_named_object_picks_the_thing_it_is_not_the_value(
    old: str, new: str
) -> None:
    # Read as the value, the last phrase made each of these look-alikes supersede the one
    # before it, in a chain (held-out C: "another group", "another teacher").
    assert compare(old, new, LEXICAL).kind == "other"


def test_a_named_object_swapped_before_the_phrase_that_picks_the_thing_is_a_correction() -> None:
    old = "Ms Harper teaches Spanish to the beginner group."
    change = compare(old, old.replace("Spanish", "French"), LEXICAL)
    assert (change.kind, change.detail) == ("update", "Spanish -> French")

"""Held-out facts, second batch: written after every rule and threshold of the write path was
fixed (the first batch, `knowledge_update_heldout.py`, was looked at once its figures were in,
and two general faults it showed were mended), and run once. `make_knowledge_updates.py`
writes them to `knowledge_updates_heldout_b.jsonl`. Same format as the development facts.
"""

from __future__ import annotations

from knowledge_update_facts import Domain, Fact

SOFTWARE = Domain(
    "software",
    "a release engineer's agent: mirrors, linters, databases, release captains",
    (
        Fact(
            "The {s} mirror syncs from the {v} bucket.",
            ("artifact", "wheel", "docker", "apt", "maven", "gem", "crate", "conda", "helm", "npm"),
            ("primary", "backup", "archive"),
            "branch",
            "Which bucket does the {s} mirror sync from?",
            {
                "reordered": "From the {v} bucket, the {s} mirror syncs.",
                "synonym": "The {s} mirror copies from the {v} bucket.",
                "negated": "The {s} mirror no longer syncs from the {v} bucket.",
            },
        ),
        Fact(
            "Lint checks for the {s} package are run with {v}.",
            (
                "parser",
                "router",
                "scheduler",
                "uploader",
                "ledger",
                "mailer",
                "resolver",
                "tracker",
                "notifier",
                "exporter",
            ),
            ("Ruff", "Flake8", "Pylint"),
            "tool",
            "What runs the lint checks for the {s} package?",
            {
                "passive": "{v} runs the lint checks for the {s} package.",
                "negated": "Lint checks for the {s} package are not run with {v}.",
            },
        ),
        Fact(
            "{v} is the release captain for the {s} train.",
            (
                "spring",
                "desktop",
                "android",
                "ios",
                "web",
                "api",
                "enterprise",
                "beta",
                "nightly",
                "lts",
            ),
            ("Hannah", "Oscar", "Ines"),
            "owner",
            "Who is the release captain for the {s} train?",
            {
                "reordered": "The release captain for the {s} train is {v}.",
                "negated": "{v} is no longer the release captain for the {s} train.",
            },
        ),
    ),
)

TEAM = Domain(
    "team",
    "a program manager's assistant: demos, channels, interviews",
    (
        Fact(
            "The {s} demo happens in the {v} channel.",
            (
                "roadmap",
                "sprint",
                "pricing",
                "search",
                "billing",
                "mobile",
                "design",
                "analytics",
                "support",
                "security",
            ),
            ("general", "engineering", "announcements"),
            "place",
            "Which channel is the {s} demo in?",
            {
                "reordered": "In the {v} channel the {s} demo happens.",
                "synonym": "The {s} demo takes place in the {v} channel.",
                "negated": "The {s} demo no longer happens in the {v} channel.",
            },
        ),
        Fact(
            "Interviews for the {s} role are handled by {v}.",
            (
                "backend",
                "designer",
                "recruiter",
                "analyst",
                "manager",
                "tester",
                "writer",
                "architect",
                "marketer",
                "intern",
            ),
            ("Yusuf", "Petra", "Carlos"),
            "owner",
            "Who handles interviews for the {s} role?",
            {
                "passive": "{v} handles interviews for the {s} role.",
                "synonym": "Interviews for the {s} role are managed by {v}.",
                "negated": "Interviews for the {s} role are not handled by {v}.",
            },
        ),
    ),
)

TRAVEL = Domain(
    "travel",
    "a booking agent: trains, check-in, lounges, luggage",
    (
        Fact(
            "The {s} train departs from platform {v}.",
            (
                "Geneva",
                "Munich",
                "Verona",
                "Antwerp",
                "Lille",
                "Dresden",
                "Bremen",
                "Split",
                "Innsbruck",
                "Nantes",
            ),
            ("4", "7", "9"),
            "number",
            "Which platform does the {s} train depart from?",
            {
                "reordered": "From platform {v}, the {s} train departs.",
                "synonym": "The {s} train leaves from platform {v}.",
            },
        ),
        Fact(
            "Our luggage for the {s} cruise is checked in at {v}.",
            (
                "Baltic",
                "Adriatic",
                "Aegean",
                "Caribbean",
                "Arctic",
                "Danube",
                "Rhine",
                "Nile",
                "Alaska",
                "Norway",
            ),
            ("Southampton", "Hamburg", "Genoa"),
            "city",
            "Where is our luggage for the {s} cruise checked in?",
            {
                "reordered": "At {v}, our luggage for the {s} cruise is checked in.",
                "negated": "Our luggage for the {s} cruise is no longer checked in at {v}.",
            },
        ),
        Fact(
            "The {s} lounge is {v} for our group.",
            (
                "business",
                "premium",
                "family",
                "quiet",
                "rooftop",
                "garden",
                "airside",
                "harbour",
                "gallery",
                "terrace",
            ),
            ("available", "unavailable", "available"),
            "state",
            "Can our group use the {s} lounge?",
            {},
        ),
    ),
)

HEALTH = Domain(
    "health",
    "a patient's assistant: scans, dentists, exercise plans",
    (
        Fact(
            "The {s} scan is booked at the {v} hospital.",
            (
                "MRI",
                "CT",
                "ultrasound",
                "bone density",
                "PET",
                "dental x-ray",
                "mammogram",
                "eye",
                "heart",
                "thyroid",
            ),
            ("General", "Royal", "Children's"),
            "place",
            "Where is the {s} scan booked?",
            {
                "passive": "The {v} hospital has the {s} scan booked.",
                "reordered": "At the {v} hospital, the {s} scan is booked.",
                "negated": "The {s} scan is not booked at the {v} hospital.",
            },
        ),
        Fact(
            "Lucas walks {v} kilometres a day for his {s}.",
            (
                "heart",
                "knees",
                "weight",
                "sleep",
                "mood",
                "blood sugar",
                "back",
                "lungs",
                "stamina",
                "balance",
            ),
            ("3", "5", "8"),
            "number",
            "How far does Lucas walk each day for his {s}?",
            {
                "reordered": "For his {s}, Lucas walks {v} kilometres a day.",
                "negated": "Lucas no longer walks {v} kilometres a day for his {s}.",
            },
        ),
    ),
)

MONEY = Domain(
    "money",
    "a treasury agent: banks, reimbursements, price tiers",
    (
        Fact(
            "Salaries for the {s} team are wired from {v}.",
            (
                "design",
                "sales",
                "support",
                "research",
                "ops",
                "legal",
                "finance",
                "content",
                "data",
                "hr",
            ),
            ("Barclays", "Santander", "Revolut"),
            "owner",
            "Which bank wires salaries for the {s} team?",
            {
                "passive": "{v} wires the salaries for the {s} team.",
                "synonym": "Salaries for the {s} team are sent from {v}.",
                "negated": "Salaries for the {s} team are no longer wired from {v}.",
            },
        ),
        Fact(
            "Mileage for the {s} trips is reimbursed at {v} cents per kilometre.",
            (
                "client",
                "site",
                "audit",
                "sales",
                "training",
                "delivery",
                "inspection",
                "recruiting",
                "partner",
                "field",
            ),
            ("30", "35", "42"),
            "number",
            "At what rate is mileage for {s} trips reimbursed?",
            {
                "reordered": "At {v} cents per kilometre, mileage for the {s} trips is reimbursed.",
                "synonym": "Mileage for the {s} trips is repaid at {v} cents per kilometre.",
            },
        ),
        Fact(
            "The {s} plan is priced at {v} dollars a seat.",
            (
                "starter",
                "team",
                "business",
                "growth",
                "scale",
                "pro",
                "plus",
                "basic",
                "premium",
                "education",
            ),
            ("12", "15", "20"),
            "number",
            "How much does the {s} plan cost per seat?",
            {
                "reordered": "At {v} dollars a seat, the {s} plan is priced.",
                "synonym": "The {s} plan costs {v} dollars a seat.",
            },
        ),
    ),
)

DOMAINS = (SOFTWARE, TEAM, TRAVEL, HEALTH, MONEY)

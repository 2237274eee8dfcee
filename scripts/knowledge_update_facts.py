"""Hand-written facts for the hard cases of the knowledge-update set (see
`make_knowledge_updates.py`): the *development* templates, the ones the write path's rules
were built and checked on. `knowledge_update_heldout.py` holds others, written apart and not
tuned on.

A fact is a sentence with a subject slot `{s}` (what it is about: each sequence takes its own)
and a value slot `{v}`; `values[0]` is the first value, `values[1]` its correction, `values[2]`
a look-alike's own value. `forms` are the same fact written otherwise: restatements
(`reordered`, `passive`, `synonym`: must be skipped) and corrections of its truth
(`negated`: "no longer", "not", "never", "stopped"; `reversed`: an antonym).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Fact:
    text: str
    subjects: tuple[str, ...]
    values: tuple[str, str, str]
    swap: str  # what a one-word correction changes: branch, city, owner, tool, ...
    question: str
    forms: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Domain:
    name: str
    description: str
    facts: tuple[Fact, ...]


SOFTWARE = Domain(
    "software",
    "a coding agent on a product team: branches, clusters, languages, runners, flags",
    (
        Fact(
            "We publish the {s} from the {v} branch.",
            (
                "docs site",
                "changelog",
                "API reference",
                "design system",
                "status page",
                "blog",
                "release notes",
                "style guide",
                "handbook",
                "landing page",
            ),
            ("gh-pages", "main", "release"),
            "branch",
            "Which branch is the {s} published from?",
            {
                "reordered": "From the {v} branch we publish the {s}.",
                "passive": "The {s} is published from the {v} branch.",
                "negated": "We no longer publish the {s} from the {v} branch.",
            },
        ),
        Fact(
            "The {s} API is hosted on the {v} cluster.",
            (
                "search",
                "billing",
                "ingest",
                "export",
                "identity",
                "upload",
                "pricing",
                "catalog",
                "audit",
                "webhook",
            ),
            ("staging", "production", "edge"),
            "cluster",
            "Which cluster hosts the {s} API?",
            {
                "reordered": "On the {v} cluster, the {s} API is hosted.",
                "synonym": "The {s} API is housed on the {v} cluster.",
                "negated": "The {s} API is not hosted on the {v} cluster.",
            },
        ),
        Fact(
            "Nightly tests for the {s} module run against the {v} schema.",
            (
                "accounts",
                "orders",
                "invoices",
                "sessions",
                "profiles",
                "carts",
                "refunds",
                "shipments",
                "coupons",
                "reviews",
            ),
            ("old", "new", "legacy"),
            "schema",
            "Which schema do the {s} module's nightly tests use?",
            {
                "reordered": "Against the {v} schema, nightly tests for the {s} module run.",
                "negated": "Nightly tests for the {s} module never run against the {v} schema.",
            },
        ),
        Fact(
            "The {s} service is written in {v}.",
            (
                "gateway",
                "scheduler",
                "mailer",
                "indexer",
                "notifier",
                "renderer",
                "crawler",
                "tokenizer",
                "resolver",
                "uploader",
            ),
            ("Go", "Rust", "Python"),
            "language",
            "What language is the {s} service written in?",
            {
                "reordered": "In {v}, the {s} service is written.",
                "synonym": "The {s} service is coded in {v}.",
            },
        ),
        Fact(
            "The {s} feature flag is {v} in production.",
            (
                "dark-mode",
                "bulk-export",
                "smart-search",
                "quick-pay",
                "auto-save",
                "live-preview",
                "team-invites",
                "guest-checkout",
                "two-step-login",
                "beta-editor",
            ),
            ("enabled", "disabled", "enabled"),
            "state",
            "Is the {s} feature flag on in production?",
            {
                "reordered": "In production, the {s} feature flag is {v}.",
            },
        ),
        Fact(
            "{v} maintains the {s} library.",
            (
                "parser",
                "logging",
                "retry",
                "metrics",
                "config",
                "cache",
                "routing",
                "serialization",
                "testing",
                "i18n",
            ),
            ("Marco", "Lena", "Priya"),
            "owner",
            "Who maintains the {s} library?",
            {
                "passive": "The {s} library is maintained by {v}.",
                "synonym": "{v} looks after the {s} library.",
                "negated": "{v} no longer maintains the {s} library.",
            },
        ),
        Fact(
            "Builds of the {s} app run on {v} runners.",
            (
                "desktop",
                "mobile",
                "admin",
                "kiosk",
                "partner",
                "field",
                "driver",
                "tablet",
                "watch",
                "tv",
            ),
            ("Linux", "macOS", "Windows"),
            "tool",
            "What runners do {s} app builds use?",
            {
                "reordered": "On {v} runners, builds of the {s} app run.",
                "negated": "Builds of the {s} app stopped running on {v} runners.",
            },
        ),
    ),
)

TEAM = Domain(
    "team",
    "a team lead's assistant: owners, meetings, tools, offsites, reporting lines",
    (
        Fact(
            "The {s} service is owned by the {v} team.",
            (
                "billing",
                "search",
                "ingest",
                "notifications",
                "payments",
                "reporting",
                "auth",
                "exports",
                "webhooks",
                "scheduler",
            ),
            ("platform", "data", "growth"),
            "owner",
            "Which team owns the {s} service?",
            {
                "passive": "The {v} team owns the {s} service.",
                "reordered": "It is the {v} team that owns the {s} service.",
                "negated": "The {s} service is no longer owned by the {v} team.",
            },
        ),
        Fact(
            "The {s} offsite will take place in {v}.",
            (
                "engineering",
                "sales",
                "design",
                "leadership",
                "product",
                "support",
                "finance",
                "marketing",
                "security",
                "research",
            ),
            ("Lisbon", "Porto", "Krakow"),
            "city",
            "Where will the {s} offsite take place?",
            {
                "reordered": "In {v}, the {s} offsite will take place.",
                "negated": "The {s} offsite will not take place in {v}.",
            },
        ),
        Fact(
            "The {s} sync starts at {v} every Monday.",
            (
                "roadmap",
                "hiring",
                "incident",
                "pricing",
                "partner",
                "design",
                "budget",
                "security",
                "onboarding",
                "quality",
            ),
            ("9:30", "10:00", "11:00"),
            "time",
            "When does the {s} sync start?",
            {
                "reordered": "Every Monday the {s} sync starts at {v}.",
                "synonym": "The {s} sync begins at {v} every Monday.",
            },
        ),
        Fact(
            "The {s} team tracks its work in {v}.",
            (
                "mobile",
                "web",
                "infra",
                "analytics",
                "payments",
                "support",
                "content",
                "legal",
                "growth",
                "qa",
            ),
            ("Jira", "Linear", "Trello"),
            "tool",
            "Where does the {s} team track its work?",
            {
                "reordered": "In {v}, the {s} team tracks its work.",
                "passive": "The work of the {s} team is tracked in {v}.",
                "negated": "The {s} team stopped tracking its work in {v}.",
            },
        ),
        Fact(
            "{v} leads the {s} guild.",
            (
                "frontend",
                "backend",
                "testing",
                "security",
                "accessibility",
                "data",
                "performance",
                "design",
                "devops",
                "writing",
            ),
            ("Dana", "Tomas", "Aiko"),
            "owner",
            "Who leads the {s} guild?",
            {
                "passive": "The {s} guild is led by {v}.",
                "synonym": "{v} heads the {s} guild.",
                "negated": "{v} no longer leads the {s} guild.",
            },
        ),
        Fact(
            "Maria prefers {s} meetings in the {v}.",
            (
                "planning",
                "review",
                "one-on-one",
                "retro",
                "budget",
                "status",
                "hiring",
                "design",
                "vendor",
                "strategy",
            ),
            ("morning", "afternoon", "evening"),
            "time",
            "When does Maria want {s} meetings?",
            {
                "reordered": "In the {v}, Maria prefers {s} meetings.",
                "negated": "Maria no longer wants {s} meetings in the {v}.",
                "reversed": "Maria avoids {s} meetings in the {v}.",
            },
        ),
    ),
)

TRAVEL = Domain(
    "travel",
    "a travel assistant: trips, hotels, seats, transport, bookings",
    (
        Fact(
            "The team travels to the {s} conference by {v}.",
            (
                "Berlin",
                "Vienna",
                "Prague",
                "Milan",
                "Lyon",
                "Ghent",
                "Bern",
                "Graz",
                "Turin",
                "Basel",
            ),
            ("train", "plane", "bus"),
            "transport",
            "How does the team get to the {s} conference?",
            {
                "reordered": "By {v}, the team travels to the {s} conference.",
                "negated": "The team no longer travels to the {s} conference by {v}.",
            },
        ),
        Fact(
            "Anna booked a {v} seat on the {s} flight.",
            (
                "Lisbon",
                "Oslo",
                "Athens",
                "Dublin",
                "Madrid",
                "Riga",
                "Sofia",
                "Tallinn",
                "Zagreb",
                "Vilnius",
            ),
            ("window", "aisle", "middle"),
            "seat",
            "Which seat does Anna have on the {s} flight?",
            {
                "passive": "A {v} seat on the {s} flight was booked by Anna.",
                "synonym": "Anna reserved a {v} seat on the {s} flight.",
                "negated": "Anna did not book a {v} seat on the {s} flight.",
            },
        ),
        Fact(
            "The hotel for the {s} summit is in {v}.",
            (
                "climate",
                "health",
                "fintech",
                "mobility",
                "energy",
                "privacy",
                "robotics",
                "retail",
                "water",
                "space",
            ),
            ("Amsterdam", "Rotterdam", "Utrecht"),
            "city",
            "Where is the hotel for the {s} summit?",
            {
                "reordered": "In {v} is the hotel for the {s} summit.",
            },
        ),
        Fact(
            "The {s} booking is {v}.",
            (
                "hostel",
                "ferry",
                "rental car",
                "museum",
                "airport taxi",
                "night train",
                "boat tour",
                "ski pass",
                "theatre",
                "spa",
            ),
            ("confirmed", "cancelled", "confirmed"),
            "state",
            "Is the {s} booking still on?",
            {},
        ),
        Fact(
            "The {s} tour leaves from the {v} gate.",
            (
                "harbour",
                "castle",
                "wine",
                "canal",
                "glacier",
                "desert",
                "jungle",
                "island",
                "volcano",
                "cave",
            ),
            ("north", "south", "east"),
            "place",
            "Which gate does the {s} tour leave from?",
            {
                "reordered": "From the {v} gate, the {s} tour leaves.",
                "synonym": "The {s} tour departs from the {v} gate.",
                "negated": "The {s} tour no longer leaves from the {v} gate.",
            },
        ),
    ),
)

HEALTH = Domain(
    "health",
    "a personal health assistant: clinics, doctors, medication, appointments",
    (
        Fact(
            "The {s} clinic opens at {v} on weekdays.",
            (
                "dental",
                "eye",
                "skin",
                "sports",
                "travel",
                "family",
                "walk-in",
                "physio",
                "hearing",
                "allergy",
            ),
            ("8am", "9am", "7am"),
            "time",
            "When does the {s} clinic open on weekdays?",
            {
                "reordered": "On weekdays the {s} clinic opens at {v}.",
                "negated": "The {s} clinic does not open at {v} on weekdays.",
            },
        ),
        Fact(
            "Ben sees Dr {v} for his {s} checkups.",
            ("heart", "knee", "back", "eye", "skin", "dental", "hearing", "lung", "liver", "blood"),
            ("Weiss", "Novak", "Okafor"),
            "owner",
            "Which doctor does Ben see for his {s} checkups?",
            {
                "reordered": "For his {s} checkups, Ben sees Dr {v}.",
                "negated": "Ben no longer sees Dr {v} for his {s} checkups.",
            },
        ),
        Fact(
            "Clara takes {v} for her {s}.",
            (
                "migraines",
                "back pain",
                "allergies",
                "insomnia",
                "heartburn",
                "joint pain",
                "sinus pain",
                "toothache",
                "cramps",
                "fever",
            ),
            ("ibuprofen", "paracetamol", "aspirin"),
            "medicine",
            "What does Clara take for her {s}?",
            {
                "reordered": "For her {s}, Clara takes {v}.",
                "negated": "Clara stopped taking {v} for her {s}.",
            },
        ),
        Fact(
            "The {s} appointment was moved to {v}.",
            (
                "dentist",
                "physio",
                "blood test",
                "eye exam",
                "vaccination",
                "x-ray",
                "dermatology",
                "cardiology",
                "allergy test",
                "hearing test",
            ),
            ("Tuesday", "Thursday", "Friday"),
            "day",
            "When is the {s} appointment?",
            {
                "reordered": "To {v}, the {s} appointment was moved.",
                "negated": "The {s} appointment was not moved to {v}.",
            },
        ),
        Fact(
            "The {s} clinic accepts {v} patients.",
            (
                "downtown",
                "riverside",
                "hillside",
                "harbour",
                "airport",
                "campus",
                "village",
                "lakeside",
                "market",
                "station",
            ),
            ("new", "existing", "private"),
            "kind",
            "Which patients does the {s} clinic accept?",
            {
                "negated": "The {s} clinic no longer accepts {v} patients.",
            },
        ),
    ),
)

MONEY = Domain(
    "money",
    "a finance assistant: budgets, accounts, approvals, payment methods",
    (
        Fact(
            "Invoices for {s} are paid from the {v} account.",
            (
                "hosting",
                "travel",
                "legal",
                "hardware",
                "catering",
                "licences",
                "training",
                "marketing",
                "recruiting",
                "insurance",
            ),
            ("operating", "reserve", "payroll"),
            "account",
            "Which account pays the {s} invoices?",
            {
                "reordered": "From the {v} account, invoices for {s} are paid.",
                "passive": "The {v} account pays the invoices for {s}.",
                "synonym": "Bills for {s} are paid from the {v} account.",
                "negated": "Invoices for {s} are no longer paid from the {v} account.",
            },
        ),
        Fact(
            "The {s} budget is capped at {v} euros a month.",
            (
                "cloud",
                "travel",
                "events",
                "tooling",
                "ads",
                "training",
                "snacks",
                "books",
                "hardware",
                "gifts",
            ),
            ("4000", "6500", "9000"),
            "number",
            "How much is the {s} budget each month?",
            {
                "reordered": "At {v} euros a month, the {s} budget is capped.",
                "synonym": "The {s} budget is limited to {v} euros a month.",
            },
        ),
        Fact(
            "{v} approves expenses for the {s} team.",
            (
                "sales",
                "field",
                "events",
                "research",
                "office",
                "legal",
                "recruiting",
                "support",
                "audit",
                "procurement",
            ),
            ("Omar", "Sofia", "Helen"),
            "owner",
            "Who approves the {s} team's expenses?",
            {
                "passive": "Expenses for the {s} team are approved by {v}.",
                "negated": "{v} no longer approves expenses for the {s} team.",
            },
        ),
        Fact(
            "The {s} vendor is paid by {v}.",
            (
                "cleaning",
                "coffee",
                "security",
                "printing",
                "courier",
                "catering",
                "plant",
                "furniture",
                "laundry",
                "parking",
            ),
            ("card", "transfer", "cheque"),
            "method",
            "How is the {s} vendor paid?",
            {
                "reordered": "By {v}, the {s} vendor is paid.",
                "negated": "The {s} vendor is not paid by {v}.",
            },
        ),
        Fact(
            "The {s} refund was {v}.",
            (
                "laptop",
                "flight",
                "hotel",
                "training",
                "conference",
                "software",
                "chair",
                "monitor",
                "phone",
                "headset",
            ),
            ("approved", "rejected", "approved"),
            "state",
            "Was the {s} refund approved?",
            {},
        ),
    ),
)

DOMAINS = (SOFTWARE, TEAM, TRAVEL, HEALTH, MONEY)

"""The hand-written sentences of the identifier set (`scripts/make_identifier_pairs.py`).

Per domain: pairs of facts that differ in one identifier that names what they are about (a
room, a ticket, a build, a host, a user, a path, a person, a place, a code, a date), each
asked about with a question both answer; restatements of one fact in other words (order,
voice), which the write path must skip; and corrections of one value the fact states, which
must supersede it. Every group is about a subject of its own, so that no group is a
restatement or a correction of another.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Pair:
    first: str
    second: str
    question: str


@dataclass(frozen=True)
class Restated:
    fact: str
    again: str
    question: str


@dataclass(frozen=True)
class Corrected:
    fact: str
    then: str
    question: str


@dataclass(frozen=True)
class Domain:
    name: str
    description: str
    pairs: tuple[Pair, ...]
    restated: tuple[Restated, ...] = field(default_factory=tuple)
    corrected: tuple[Corrected, ...] = field(default_factory=tuple)


DOMAINS = (
    Domain(
        "rooms",
        "an office assistant: rooms, desks, lockers, parking",
        (
            Pair(
                "Parking spot 41 belongs to the design team.",
                "Parking spot 42 belongs to the design team.",
                "which parking spots belong to the design team",
            ),
            Pair(
                "Meeting room 4.12 has a broken projector.",
                "Meeting room 4.15 has a broken projector.",
                "which meeting rooms have a broken projector",
            ),
            Pair(
                "Room B-204 is booked for the onboarding workshop.",
                "Room B-206 is booked for the onboarding workshop.",
                "which rooms are booked for the onboarding workshop",
            ),
            Pair(
                "Locker 17 holds the spare laptops.",
                "Locker 71 holds the spare laptops.",
                "which lockers hold the spare laptops",
            ),
            Pair(
                "Desk 3-W-08 needs a new monitor arm.",
                "Desk 3-W-09 needs a new monitor arm.",
                "which desks need a new monitor arm",
            ),
            Pair(
                "The Everest room has no working speakerphone.",
                "The Kilimanjaro room has no working speakerphone.",
                "which rooms have no working speakerphone",
            ),
            Pair(
                "Phone booth PB2 is reserved for interviews on Thursdays.",
                "Phone booth PB5 is reserved for interviews on Thursdays.",
                "which phone booths are reserved for interviews",
            ),
            Pair(
                "Storage room S-1 keeps the event banners.",
                "Storage room S-3 keeps the event banners.",
                "where are the event banners kept",
            ),
        ),
        (
            Restated(
                "The quiet room on the third floor closes at 8pm.",
                "At 8pm the quiet room on the third floor closes.",
                "when does the quiet room close",
            ),
            Restated(
                "Facilities cleans the kitchen fridge on Fridays.",
                "The kitchen fridge is cleaned by Facilities on Fridays.",
                "when is the kitchen fridge cleaned",
            ),
        ),
        (
            Corrected(
                "The all-hands meeting takes place in room 5.01.",
                "The all-hands meeting takes place in room 5.03.",
                "where does the all-hands meeting take place",
            ),
            Corrected(
                "The visitor badges are kept in drawer 6.",
                "The visitor badges are kept in drawer 9.",
                "where are the visitor badges kept",
            ),
        ),
    ),
    Domain(
        "tickets",
        "a support and project agent: tickets, issues, incidents, pull requests",
        (
            Pair(
                "Pull request 907 breaks the nightly build.",
                "Pull request 915 breaks the nightly build.",
                "which pull requests break the nightly build",
            ),
            Pair(
                "Ticket JIRA-4521 is blocked by the vendor.",
                "Ticket JIRA-4528 is blocked by the vendor.",
                "which tickets are blocked by the vendor",
            ),
            Pair(
                "Issue #318 was reported by the mobile team.",
                "Issue #381 was reported by the mobile team.",
                "which issues did the mobile team report",
            ),
            Pair(
                "Incident INC0042 affected the checkout service.",
                "Incident INC0047 affected the checkout service.",
                "which incidents affected the checkout service",
            ),
            Pair(
                "Support case SC-77120 waits for a refund approval.",
                "Support case SC-77121 waits for a refund approval.",
                "which support cases wait for a refund approval",
            ),
            Pair(
                "Bug OPS-1193 only happens in Safari.",
                "Bug OPS-1139 only happens in Safari.",
                "which bugs only happen in Safari",
            ),
            Pair(
                "Change request CR-2026-014 needs sign-off from security.",
                "Change request CR-2026-041 needs sign-off from security.",
                "which change requests need sign-off from security",
            ),
            Pair(
                "Merge request !562 touches the billing schema.",
                "Merge request !566 touches the billing schema.",
                "which merge requests touch the billing schema",
            ),
        ),
        (
            Restated(
                "The on-call engineer triages new tickets every morning.",
                "Every morning the on-call engineer triages new tickets.",
                "who triages new tickets",
            ),
            Restated(
                "Ravi reviews the security incidents.",
                "The security incidents are reviewed by Ravi.",
                "who reviews the security incidents",
            ),
        ),
        (
            Corrected(
                "The login timeout bug is tracked in ticket WEB-310.",
                "The login timeout bug is tracked in ticket WEB-318.",
                "which ticket tracks the login timeout bug",
            ),
            Corrected(
                "The support queue closes at 6pm.",
                "The support queue closes at 7pm.",
                "when does the support queue close",
            ),
        ),
    ),
    Domain(
        "builds",
        "a CI agent: builds, releases, commits, pipelines, branches",
        (
            Pair(
                "Build 2231 failed on the arm64 runner.",
                "Build 2237 failed on the arm64 runner.",
                "which builds failed on the arm64 runner",
            ),
            Pair(
                "Release v2.4.1 contains the payment fix.",
                "Release v2.4.3 contains the payment fix.",
                "which releases contain the payment fix",
            ),
            Pair(
                "Commit a3f9c2e introduced the memory leak.",
                "Commit a3f9c2f introduced the memory leak.",
                "which commits introduced the memory leak",
            ),
            Pair(
                "Pipeline deploy-web-17 is stuck in review.",
                "Pipeline deploy-web-19 is stuck in review.",
                "which pipelines are stuck in review",
            ),
            Pair(
                "Branch hotfix-31 fixes the login timeout.",
                "Branch hotfix-32 fixes the login timeout.",
                "which branches fix the login timeout",
            ),
            Pair(
                "Job lint_py311 is flaky on Mondays.",
                "Job lint_py312 is flaky on Mondays.",
                "which jobs are flaky on Mondays",
            ),
            Pair(
                "Image api:1.8.2 ships with the vulnerable OpenSSL.",
                "Image api:1.8.4 ships with the vulnerable OpenSSL.",
                "which images ship with the vulnerable OpenSSL",
            ),
            Pair(
                "Nightly run 2026-11-03 skipped the integration tests.",
                "Nightly run 2026-11-05 skipped the integration tests.",
                "which nightly runs skipped the integration tests",
            ),
        ),
        (
            Restated(
                "The release train leaves every second Tuesday.",
                "Every second Tuesday the release train leaves.",
                "when does the release train leave",
            ),
            Restated(
                "Lena approves the production deploys.",
                "The production deploys are approved by Lena.",
                "who approves the production deploys",
            ),
        ),
        (
            Corrected(
                "The build cache keeps artifacts for 14 days.",
                "The build cache keeps artifacts for 30 days.",
                "how long does the build cache keep artifacts",
            ),
            Corrected(
                "The mobile app is built with Xcode 15.",
                "The mobile app is built with Xcode 16.",
                "which Xcode builds the mobile app",
            ),
        ),
    ),
    Domain(
        "hosts",
        "an operations agent: hosts, servers, nodes, addresses, ports",
        (
            Pair(
                "Host db-stage-05 runs out of disk every night.",
                "Host db-stage-06 runs out of disk every night.",
                "which hosts run out of disk every night",
            ),
            Pair(
                "Host web-03.prod.example.com serves the old certificate.",
                "Host web-07.prod.example.com serves the old certificate.",
                "which hosts serve the old certificate",
            ),
            Pair(
                "Server db01 needs a kernel update.",
                "Server db02 needs a kernel update.",
                "which servers need a kernel update",
            ),
            Pair(
                "Host api-eu-1 has high memory usage.",
                "Host api-us-1 has high memory usage.",
                "which hosts have high memory usage",
            ),
            Pair(
                "The node k8s-worker-12 was cordoned for maintenance.",
                "The node k8s-worker-21 was cordoned for maintenance.",
                "which nodes were cordoned for maintenance",
            ),
            Pair(
                "Address 10.0.3.14 is on the firewall blocklist.",
                "Address 10.0.3.41 is on the firewall blocklist.",
                "which addresses are on the firewall blocklist",
            ),
            Pair(
                "Machine lab-gpu-a needs new drivers.",
                "Machine lab-gpu-b needs new drivers.",
                "which machines need new drivers",
            ),
            Pair(
                "Port 8080 is open on the gateway.",
                "Port 8443 is open on the gateway.",
                "which ports are open on the gateway",
            ),
            Pair(
                "Host cache-fra-2 drops packets under load.",
                "Host cache-ams-2 drops packets under load.",
                "which hosts drop packets under load",
            ),
        ),
        (
            Restated(
                "The monitoring server pages the on-call engineer after 5 failed checks.",
                "After 5 failed checks the monitoring server pages the on-call engineer.",
                "when does the monitoring server page the on-call engineer",
            ),
            Restated(
                "Omar patches the bastion hosts.",
                "The bastion hosts are patched by Omar.",
                "who patches the bastion hosts",
            ),
        ),
        (
            Corrected(
                "The primary database runs on host pg-main-01.",
                "The primary database runs on host pg-main-02.",
                "which host runs the primary database",
            ),
            Corrected(
                "The log shipper keeps 3 days of buffers.",
                "The log shipper keeps 5 days of buffers.",
                "how many days of buffers does the log shipper keep",
            ),
        ),
    ),
    Domain(
        "users",
        "an admin agent: user names, accounts, logins, groups",
        (
            Pair(
                "User bob77 has admin rights on the wiki.",
                "User bob78 has admin rights on the wiki.",
                "who has admin rights on the wiki",
            ),
            Pair(
                "User carol12 has a locked account.",
                "User carol13 has a locked account.",
                "whose accounts are locked",
            ),
            Pair(
                "User alice_w can approve invoices.",
                "User alice_v can approve invoices.",
                "who can approve invoices",
            ),
            Pair(
                "User mkumar has write access to the billing repo.",
                "User mkumaar has write access to the billing repo.",
                "who has write access to the billing repo",
            ),
            Pair(
                "Login ops-bot-2 runs the nightly export.",
                "Login ops-bot-5 runs the nightly export.",
                "which logins run the nightly export",
            ),
            Pair(
                "User tina.r owns the staging database.",
                "User tina.s owns the staging database.",
                "who owns the staging database",
            ),
            Pair(
                "The account dev.ops@example.com receives the pager alerts.",
                "The account sec.ops@example.com receives the pager alerts.",
                "which accounts receive the pager alerts",
            ),
            Pair(
                "User jsmith is a member of the finance group.",
                "User jsmyth is a member of the finance group.",
                "who is a member of the finance group",
            ),
            Pair(
                "Service account svc-backup-01 has no password expiry.",
                "Service account svc-backup-02 has no password expiry.",
                "which service accounts have no password expiry",
            ),
        ),
        (
            Restated(
                "The helpdesk disables inactive accounts every Monday.",
                "Every Monday the helpdesk disables inactive accounts.",
                "when are inactive accounts disabled",
            ),
            Restated(
                "Amara resets the passwords of contractors.",
                "The passwords of contractors are reset by Amara.",
                "who resets the passwords of contractors",
            ),
        ),
        (
            Corrected(
                "The shared inbox is owned by user pwilson.",
                "The shared inbox is owned by user pwatson.",
                "who owns the shared inbox",
            ),
            Corrected(
                "Guest accounts expire after 30 days.",
                "Guest accounts expire after 7 days.",
                "when do guest accounts expire",
            ),
        ),
    ),
    Domain(
        "paths",
        "a developer's agent: key paths, files, config keys, buckets, secrets",
        (
            Pair(
                "The key /etc/ssl/private/web.key expires in March.",
                "The key /etc/ssl/private/api.key expires in March.",
                "which keys expire in March",
            ),
            Pair(
                "File ~/.ssh/id_rsa is shared with the build agent.",
                "File ~/.ssh/id_dsa is shared with the build agent.",
                "which files are shared with the build agent",
            ),
            Pair(
                "Config key auth.session.timeout is overridden in production.",
                "Config key auth.session.ttl is overridden in production.",
                "which config keys are overridden in production",
            ),
            Pair(
                "The file /var/log/nginx/access.log fills the disk.",
                "The file /var/log/nginx/error.log fills the disk.",
                "which files fill the disk",
            ),
            Pair(
                "Secret vault/data/payments/stripe is rotated monthly.",
                "Secret vault/data/payments/adyen is rotated monthly.",
                "which secrets are rotated monthly",
            ),
            Pair(
                "Bucket s3://logs-eu/raw is publicly readable.",
                "Bucket s3://logs-us/raw is publicly readable.",
                "which buckets are publicly readable",
            ),
            Pair(
                "Table orders_2025 has no index on customer_id.",
                "Table orders_2026 has no index on customer_id.",
                "which tables have no index on customer_id",
            ),
            Pair(
                "Queue billing.retry grows during the night.",
                "Queue billing.dead grows during the night.",
                "which queues grow during the night",
            ),
            Pair(
                "Setting spring.datasource.url is missing in the chart.",
                "Setting spring.datasource.username is missing in the chart.",
                "which settings are missing in the chart",
            ),
        ),
        (
            Restated(
                "The deploy script reads its settings from the repository root.",
                "From the repository root the deploy script reads its settings.",
                "where does the deploy script read its settings from",
            ),
            Restated(
                "Jonas owns the terraform modules.",
                "The terraform modules are owned by Jonas.",
                "who owns the terraform modules",
            ),
        ),
        (
            Corrected(
                "The TLS certificate for the gateway lives at /etc/certs/gw-2025.pem.",
                "The TLS certificate for the gateway lives at /etc/certs/gw-2026.pem.",
                "where is the TLS certificate for the gateway",
            ),
            Corrected(
                "The upload limit for the media service is 50 MB.",
                "The upload limit for the media service is 200 MB.",
                "what is the upload limit for the media service",
            ),
        ),
    ),
    Domain(
        "people",
        "a team assistant: what belongs to, or is planned for, which person",
        (
            Pair(
                "Priya's laptop needs a new battery.",
                "Marco's laptop needs a new battery.",
                "whose laptop needs a new battery",
            ),
            Pair(
                "The visa application for Keiko is still pending.",
                "The visa application for Omar is still pending.",
                "whose visa applications are still pending",
            ),
            Pair(
                "Dr. Okafor is on call this weekend.",
                "Dr. Lindqvist is on call this weekend.",
                "which doctors are on call this weekend",
            ),
            Pair(
                "The farewell card for Jonas is in the kitchen drawer.",
                "The farewell card for Amara is in the kitchen drawer.",
                "whose farewell cards are in the kitchen drawer",
            ),
            Pair(
                "Luis's expense report is missing two receipts.",
                "Mei's expense report is missing two receipts.",
                "whose expense reports are missing receipts",
            ),
            Pair(
                "The badge of contractor Ivanova expires on Friday.",
                "The badge of contractor Petrova expires on Friday.",
                "whose badges expire on Friday",
            ),
            Pair(
                "Dana's flight to Lisbon was delayed.",
                "Ravi's flight to Lisbon was delayed.",
                "whose flights to Lisbon were delayed",
            ),
        ),
        (
            Restated(
                "Sofia's team meets every Wednesday at 10:00.",
                "Every Wednesday at 10:00 Sofia's team meets.",
                "when does Sofia's team meet",
            ),
            Restated(
                "Kim mentors the new graduates.",
                "The new graduates are mentored by Kim.",
                "who mentors the new graduates",
            ),
        ),
        (
            Corrected(
                "Lena's parental leave starts on 3 March.",
                "Lena's parental leave starts on 10 March.",
                "when does Lena's parental leave start",
            ),
            Corrected(
                "Tomas's desk is in room 2.14.",
                "Tomas's desk is in room 2.18.",
                "where is Tomas's desk",
            ),
        ),
    ),
    Domain(
        "places",
        "a travel and logistics agent: offices, warehouses, stores, gates, stops",
        (
            Pair(
                "The Berlin office closes early on Fridays.",
                "The Lisbon office closes early on Fridays.",
                "which offices close early on Fridays",
            ),
            Pair(
                "The warehouse in Rotterdam is short of pallets.",
                "The warehouse in Antwerp is short of pallets.",
                "which warehouses are short of pallets",
            ),
            Pair(
                "Store 112 on Main Street needs more cashiers.",
                "Store 121 on Main Street needs more cashiers.",
                "which stores need more cashiers",
            ),
            Pair(
                "Gate A7 is closed for renovation.",
                "Gate A9 is closed for renovation.",
                "which gates are closed for renovation",
            ),
            Pair(
                "Apartment 3B has a leaking tap.",
                "Apartment 3D has a leaking tap.",
                "which apartments have a leaking tap",
            ),
            Pair(
                "Platform 9 at the central station has no lift.",
                "Platform 11 at the central station has no lift.",
                "which platforms at the central station have no lift",
            ),
            Pair(
                "The Oslo branch uses the old payroll system.",
                "The Bergen branch uses the old payroll system.",
                "which branches use the old payroll system",
            ),
            Pair(
                "Campsite 23 near the lake floods after heavy rain.",
                "Campsite 32 near the lake floods after heavy rain.",
                "which campsites flood after heavy rain",
            ),
        ),
        (
            Restated(
                "The shuttle to the airport leaves from the north entrance.",
                "From the north entrance the shuttle to the airport leaves.",
                "where does the airport shuttle leave from",
            ),
            Restated(
                "Luis books the venue for the offsite.",
                "The venue for the offsite is booked by Luis.",
                "who books the venue for the offsite",
            ),
        ),
        (
            Corrected(
                "The team offsite will be held in Porto.",
                "The team offsite will be held in Valencia.",
                "where will the team offsite be held",
            ),
            Corrected(
                "The returns depot is at 14 Harbour Road.",
                "The returns depot is at 41 Harbour Road.",
                "where is the returns depot",
            ),
        ),
    ),
    Domain(
        "codes",
        "a shop and factory agent: error codes, part numbers, promo codes, orders",
        (
            Pair(
                "Error code E1042 appears after the firmware update.",
                "Error code E1047 appears after the firmware update.",
                "which error codes appear after the firmware update",
            ),
            Pair(
                "Part number XJ-220 is out of stock.",
                "Part number XJ-202 is out of stock.",
                "which part numbers are out of stock",
            ),
            Pair(
                "Promo code SPRING25 is still active.",
                "Promo code SPRING20 is still active.",
                "which promo codes are still active",
            ),
            Pair(
                "Order 88412 was shipped to the wrong address.",
                "Order 88421 was shipped to the wrong address.",
                "which orders were shipped to the wrong address",
            ),
            Pair(
                "Invoice INV-2026-0113 is overdue.",
                "Invoice INV-2026-0131 is overdue.",
                "which invoices are overdue",
            ),
            Pair(
                "Printer P-12 on the second floor is out of toner.",
                "Printer P-19 on the second floor is out of toner.",
                "which printers are out of toner",
            ),
            Pair(
                "Batch L2026-118 of the vaccine was recalled.",
                "Batch L2026-181 of the vaccine was recalled.",
                "which vaccine batches were recalled",
            ),
            Pair(
                "Course CS101 is full this term.",
                "Course CS110 is full this term.",
                "which courses are full this term",
            ),
            Pair(
                "Team A uses C++ for the engine.",
                "Team A uses C# for the engine.",
                "what does team A use for the engine",
            ),
        ),
        (
            Restated(
                "The warehouse scans every returned parcel.",
                "Every returned parcel is scanned by the warehouse.",
                "what does the warehouse scan",
            ),
            Restated(
                "Refunds over 500 euros need a manager's approval.",
                "A manager's approval is needed for refunds over 500 euros.",
                "which refunds need a manager's approval",
            ),
        ),
        (
            Corrected(
                "The discount for students is 10 percent.",
                "The discount for students is 15 percent.",
                "what is the discount for students",
            ),
            Corrected(
                "The replacement filter for the coffee machine is CF-300.",
                "The replacement filter for the coffee machine is CF-330.",
                "which part is the replacement filter for the coffee machine",
            ),
        ),
    ),
    Domain(
        "transport",
        "a commuter's agent: train lines, buses, flights, trams",
        (
            Pair(
                "Train line S3 is delayed this morning.",
                "Train line S8 is delayed this morning.",
                "which train lines are delayed this morning",
            ),
            Pair(
                "Bus 42 stops at the hospital.",
                "Bus 24 stops at the hospital.",
                "which buses stop at the hospital",
            ),
            Pair(
                "Flight LH1234 is delayed by two hours.",
                "Flight LH1243 is delayed by two hours.",
                "which flights are delayed by two hours",
            ),
            Pair(
                "Tram 7 skips the museum stop on Sundays.",
                "Tram 17 skips the museum stop on Sundays.",
                "which trams skip the museum stop on Sundays",
            ),
            Pair(
                "Ferry route F2 is cancelled because of the storm.",
                "Ferry route F4 is cancelled because of the storm.",
                "which ferry routes are cancelled",
            ),
            Pair(
                "Night bus N15 runs every 30 minutes.",
                "Night bus N51 runs every 30 minutes.",
                "which night buses run every 30 minutes",
            ),
            Pair(
                "Coach 12 of the Paris train has the bike racks.",
                "Coach 14 of the Paris train has the bike racks.",
                "which coaches of the Paris train have bike racks",
            ),
        ),
        (
            Restated(
                "The airport express departs every 15 minutes.",
                "Every 15 minutes the airport express departs.",
                "how often does the airport express depart",
            ),
            Restated(
                "Mei drives the school run on Tuesdays.",
                "The school run is driven by Mei on Tuesdays.",
                "who drives the school run on Tuesdays",
            ),
        ),
        (
            Corrected(
                "My commuter pass is valid until 31 January.",
                "My commuter pass is valid until 28 February.",
                "until when is my commuter pass valid",
            ),
            Corrected(
                "The last train home leaves at 23:40.",
                "The last train home leaves at 23:10.",
                "when does the last train home leave",
            ),
        ),
    ),
    Domain(
        "dates",
        "a planning agent: sprints, standups, quarters, versions",
        (
            Pair(
                "The standup on 12 May was cancelled.",
                "The standup on 19 May was cancelled.",
                "which standups were cancelled",
            ),
            Pair(
                "Sprint 14 ended with three open bugs.",
                "Sprint 15 ended with three open bugs.",
                "which sprints ended with open bugs",
            ),
            Pair(
                "The Q3 report is missing the churn figures.",
                "The Q4 report is missing the churn figures.",
                "which reports are missing the churn figures",
            ),
            Pair(
                "The 2024 budget was approved by the board.",
                "The 2025 budget was approved by the board.",
                "which budgets did the board approve",
            ),
            Pair(
                "Week 32 is blocked for the data center move.",
                "Week 33 is blocked for the data center move.",
                "which weeks are blocked for the data center move",
            ),
            Pair(
                "The 9:00 class on Monday has no teacher yet.",
                "The 11:00 class on Monday has no teacher yet.",
                "which Monday classes have no teacher yet",
            ),
        ),
        (
            Restated(
                "The quarterly planning starts on the first Monday of the quarter.",
                "On the first Monday of the quarter the quarterly planning starts.",
                "when does the quarterly planning start",
            ),
            Restated(
                "Marta writes the sprint notes.",
                "The sprint notes are written by Marta.",
                "who writes the sprint notes",
            ),
        ),
        (
            Corrected(
                "The code freeze begins on 1 December.",
                "The code freeze begins on 8 December.",
                "when does the code freeze begin",
            ),
            Corrected(
                "The board meets on Thursday afternoons.",
                "The board meets on Tuesday afternoons.",
                "when does the board meet",
            ),
        ),
    ),
)

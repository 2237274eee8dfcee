"""Names as people write them, measured: the LoCoMo development questions with every
speaker's name respelled the way people misspell or transliterate names, asked with and
without `retrieval.fuzzy_names`.

    .venv/bin/python bench/names_study.py ../shared/datasets/locomo/locomo-dev.json /tmp/names.json
    ORCHESTRATOR_RETRIEVAL__FUZZY_NAMES=false .venv/bin/orchestrator eval \\
        --dataset /tmp/names.json --systems raw,orchestrated --format json
    .venv/bin/orchestrator eval --dataset /tmp/names.json --systems raw,orchestrated --format json

Writes the respelled dataset (only question texts change; the turns keep the names as
spoken) and prints how many questions name a speaker. The spellings are fixed, one per
speaker of the split, each a typo or transliteration seen in real chats (a doubled or dropped
letter, c/k, y/ie, an extra h).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

RESPELLED = {
    "Caroline": "Karoline",
    "Melanie": "Melany",
    "Jon": "Jonn",
    "Gina": "Geena",
    "John": "Jhon",
    "Maria": "Marya",
    "Joanna": "Johanna",
    "Nate": "Nayte",
    "Tim": "Timm",
}


def main() -> int:
    source, target = Path(sys.argv[1]), Path(sys.argv[2])
    data = json.loads(source.read_text())
    pattern = re.compile(r"\b(" + "|".join(RESPELLED) + r")\b")
    named = 0
    for conversation in data:
        for qa in conversation["qa"]:
            new = pattern.sub(lambda m: RESPELLED[m.group(1)], qa["question"])
            named += new != qa["question"]
            qa["question"] = new
    target.write_text(json.dumps(data))
    print(f"{named} questions name a speaker; written to {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

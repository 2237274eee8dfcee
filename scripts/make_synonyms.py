r"""Build the synonym table the write path reads restatements with, from WordNet 3.0.

`src/memory_orchestrator/pipeline/synonyms.txt.gz`: one line per WordNet synset that holds at
least two words or verb phrases of up to three words ("take_place"), each with the rank of
that sense among the word's senses (WordNet lists them most frequent first; 0 is omitted):
"begin commence start:1", "buy purchase";
then the irregular forms of verbs and nouns ("~ bought buy", "~ seen see"), and WordNet's
antonym pairs of single words ("! accept reject"). How far down a
word's senses a shared synset may lie is for `pipeline.paraphrase` to say: a sense far down
the list ("staging" as the production of a play) is a synonym only when the semantic model
agrees.

WordNet is the Debian package `wordnet-base` (`apt-get install wordnet-base`; its files in
/usr/share/wordnet). Its licence asks for its notice on every copy: the table starts with it.
Deterministic: the same file from the same WordNet.

    .venv/bin/python scripts/make_synonyms.py [--wordnet /usr/share/wordnet]
"""

from __future__ import annotations

import argparse
import gzip
import re
from collections import defaultdict
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "memory_orchestrator" / "pipeline"
OUT = OUT / "synonyms.txt.gz"
PARTS = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
WORD = re.compile(r"[a-z]+(?:[-_][a-z]+){0,2}")  # "start", "gh-pages", "take_place"
NOTICE = """\
# Synonym table for memory_orchestrator.pipeline.synonyms, derived from WordNet 3.0 by
# scripts/make_synonyms.py: synsets of two or more single words, each word with the rank of
# that sense among its own (":n", 0 omitted), then irregular forms ("~ form lemma") and
# antonyms ("! word word").
#
# WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved.
# THIS SOFTWARE AND DATABASE IS PROVIDED "AS IS" AND PRINCETON UNIVERSITY MAKES NO
# REPRESENTATIONS OR WARRANTIES, EXPRESS OR IMPLIED. BY WAY OF EXAMPLE, BUT NOT LIMITATION,
# PRINCETON UNIVERSITY MAKES NO REPRESENTATIONS OR WARRANTIES OF MERCHANT- ABILITY OR FITNESS
# FOR ANY PARTICULAR PURPOSE OR THAT THE USE OF THE LICENSED SOFTWARE, DATABASE OR
# DOCUMENTATION WILL NOT INFRINGE ANY THIRD PARTY PATENTS, COPYRIGHTS, TRADEMARKS OR OTHER
# RIGHTS. The name of Princeton University or Princeton may not be used in advertising or
# publicity pertaining to distribution of the software and/or database. Title to copyright
# in this software, database and any associated documentation shall at all times remain with
# Princeton University and LICENSEE agrees to preserve same.
# (Permission to use, copy, modify and distribute: https://wordnet.princeton.edu/license-and-commercial-use)
"""


def groups(folder: Path) -> dict[tuple[str, str], dict[str, int]]:
    """Synset -> the single words it is a sense of, with the rank of that sense."""
    found: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for part, name in PARTS.items():
        for line in (folder / f"index.{name}").read_text(encoding="utf-8").splitlines():
            if line.startswith(" "):
                continue
            fields = line.split()
            lemma, pointers = fields[0], int(fields[3])
            if not WORD.fullmatch(lemma) or ("_" in lemma and part != "v"):
                continue  # phrases only of verbs ("take_place", "look_after")
            for rank, offset in enumerate(fields[4 + pointers + 2 :]):
                found[(part, offset)].setdefault(lemma, rank)
    return {k: v for k, v in found.items() if len(v) > 1}


def antonyms(folder: Path) -> list[tuple[str, str]]:
    """WordNet's antonym pairs of single words ("open"/"close", "accept"/"reject"), each
    pair in one order."""
    words: dict[tuple[str, str], list[str]] = {}
    pointers: list[tuple[tuple[str, str], int, tuple[str, str], int]] = []
    for part, name in PARTS.items():
        for line in (folder / f"data.{name}").read_text(encoding="utf-8").splitlines():
            if line.startswith(" "):
                continue
            fields = line.split(" | ")[0].split()
            here, count = (part, fields[0]), int(fields[3], 16)
            words[here] = [fields[4 + 2 * i].split("(")[0].lower() for i in range(count)]
            at = 4 + 2 * count
            for i in range(int(fields[at])):
                symbol, offset, pos, link = fields[at + 1 + 4 * i : at + 5 + 4 * i]
                if symbol == "!":
                    there = ("a" if pos == "s" else pos, offset)
                    pointers.append((here, int(link[:2], 16) - 1, there, int(link[2:], 16) - 1))
    out: set[tuple[str, str]] = set()
    for here, source, there, goal in pointers:
        a, b = words[here][source], words[there][goal]
        if WORD.fullmatch(a) and WORD.fullmatch(b) and "_" not in a + b and a != b:
            out.add((min(a, b), max(a, b)))
    return sorted(out)


def irregular(folder: Path, words: set[str]) -> list[tuple[str, str]]:
    """Irregular forms of verbs and nouns ("bought", "children"); not of adjectives, whose
    comparatives say something else ("better" is not "good")."""
    out: set[tuple[str, str]] = set()
    for name in ("verb", "noun"):
        for line in (folder / f"{name}.exc").read_text(encoding="utf-8").splitlines():
            form, *lemmas = line.split()
            out.update((form, lemma) for lemma in lemmas if lemma in words and form != lemma)
    return sorted(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"))
    folder = parser.parse_args().wordnet
    if not (folder / "index.verb").is_file():
        raise SystemExit(f"no WordNet in {folder}: apt-get install wordnet-base, or --wordnet")
    synsets = groups(folder)
    lines = sorted(
        " ".join(w if r == 0 else f"{w}:{r}" for w, r in sorted(words.items()))
        for words in synsets.values()
    )
    words = {w for group in synsets.values() for w in group}
    forms = irregular(folder, words)
    opposite = antonyms(folder)
    text = (
        NOTICE
        + "\n".join(lines)
        + "\n"
        + "".join(f"~ {f} {lemma}\n" for f, lemma in forms)
        + "".join(f"! {a} {b}\n" for a, b in opposite)
    )
    OUT.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
    print(
        f"{OUT.name}: {len(lines)} synsets, {len(words)} words, {len(forms)} irregular forms,"
        f" {len(opposite)} antonym pairs"
    )


if __name__ == "__main__":
    main()

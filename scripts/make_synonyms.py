r"""Build the synonym table the write path reads restatements with, from WordNet 3.0.

`src/memory_orchestrator/pipeline/synonyms.txt.gz`: one line per WordNet synset that holds at
least two words or verb phrases of up to three words ("take_place"), each with the rank of
that sense among the word's senses (WordNet lists them most frequent first; 0 is omitted):
"begin commence start:1", "buy purchase";
then the irregular forms of verbs and nouns ("~ bought buy", "~ seen see"), WordNet's
antonym pairs of single words ("! accept reject"), its verbs, the most frequent first ("% take
run make ..."), and what each of the first four senses of a verb says in fewer words
("> cap:1 limit:1 restrict:0"): the words of its hypernym ("to cap is to limit"), of its
verb group, and the verb its definition opens with ("wire: send cables, wires or telegrams":
"> wire:1 send"). How far down a word's senses a shared synset may lie is for
`pipeline.paraphrase` to say: a sense far down the list ("staging" as the production of a
play) is a synonym only when the semantic model agrees.

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


def verbs(folder: Path) -> list[str]:
    """WordNet's verbs (single words and phrases of up to three), the most frequent first
    (by the count of their senses tagged in WordNet's corpus), then alphabetical."""
    counted = []
    for line in (folder / "index.verb").read_text(encoding="utf-8").splitlines():
        if line.startswith(" "):
            continue
        fields = line.split()
        lemma, pointers = fields[0], int(fields[3])
        if WORD.fullmatch(lemma):
            counted.append((-int(fields[4 + pointers + 1]), lemma))
    return [lemma for _, lemma in sorted(counted)]


# Definitions open with these so often that they say nothing of the verb ("cause to die",
# "make ready", "grow worse"); "be" + a participle says it ("be priced at": priced).
_GENERIC = frozenset(
    "be have make cause get give take do become go come put set let bring grow turn seem feel"
    " appear remain".split()
)
_OPENERS = frozenset("a an the to or and of something someone oneself".split())
# A head followed by one of these is a light verb whose complement carries the meaning
# ("fail to keep", "act as a barrier", "bring to an end"): not read.
_LIGHT = frozenset("to as into in on of for with from at by about".split())


Synsets = dict[str, tuple[list[str], list[str], str]]  # offset -> words, linked, definition


def implications(folder: Path, known: set[str]) -> list[str]:
    """ "> verb:rank word:rank ...": for each of the first four senses of each verb, the words
    of its hypernyms and its verb group (each with the rank of that sense among its own) and
    the verb its definition opens with (each clause of it; rank 0: its sense is not given)."""
    senses: dict[str, list[str]] = {}
    for line in (folder / "index.verb").read_text(encoding="utf-8").splitlines():
        if not line.startswith(" "):
            fields = line.split()
            senses[fields[0]] = fields[4 + int(fields[3]) + 2 :]
    synsets = _verb_synsets(folder)
    lines = []
    for lemma, offsets in sorted(senses.items()):
        if not WORD.fullmatch(lemma):
            continue
        for rank, offset in enumerate(offsets[:4]):
            said = _said(lemma, synsets[offset], synsets, senses, known)
            if said:
                entries = " ".join(w if r == 0 else f"{w}:{r}" for w, r in sorted(said.items()))
                lines.append(f"> {lemma}:{rank} {entries}" if rank else f"> {lemma} {entries}")
    return lines


def _verb_synsets(folder: Path) -> Synsets:
    synsets: Synsets = {}
    for line in (folder / "data.verb").read_text(encoding="utf-8").splitlines():
        if line.startswith(" "):
            continue
        head, _, gloss = line.partition(" | ")
        fields = head.split()
        count = int(fields[3], 16)
        words = [fields[4 + 2 * i].lower() for i in range(count)]
        at = 4 + 2 * count
        linked = [
            fields[at + 2 + 4 * i]
            for i in range(int(fields[at]))
            if fields[at + 1 + 4 * i] in ("@", "$") and fields[at + 3 + 4 * i] == "v"
        ]
        synsets[fields[0]] = (words, linked, gloss)
    return synsets


def _said(
    lemma: str,
    synset: tuple[list[str], list[str], str],
    synsets: Synsets,
    senses: dict[str, list[str]],
    known: set[str],
) -> dict[str, int]:
    """What one sense of `lemma` says in fewer words: word -> the rank of that sense."""
    _, linked, gloss = synset
    said: dict[str, int] = {}
    for other in linked:
        for word in synsets[other][0]:
            if WORD.fullmatch(word) and word != lemma and other in senses.get(word, []):
                said.setdefault(word, senses[word].index(other))
    for word in _heads(gloss, known):
        if word != lemma:
            said.setdefault(word, 0)
    return said


def _heads(gloss: str, known: set[str]) -> list[str]:
    """The verb each clause of a definition opens with ("be a lodger; stay temporarily":
    lodger is no verb, stay is; "be priced at": price), taken to its lemma; not a light verb
    ("fail to keep", "act as a barrier")."""
    out = []
    for clause in re.split(r"[;(]", gloss.split('"', maxsplit=1)[0]):
        words = re.findall(r"[a-z][a-z-]*", clause.lower())
        while words and words[0] in _OPENERS:
            words = words[1:]
        if words and words[0] == "be" and len(words) > 1 and words[1].endswith("ed"):
            words = words[1:]
        if not words or words[0] in _GENERIC or (len(words) > 1 and words[1] in _LIGHT):
            continue
        if lemma := _verb_lemma(words[0], known):
            out.append(lemma)
    return out


def _verb_lemma(word: str, known: set[str]) -> str | None:
    if word in known:
        return word
    endings = (("ies", "y"), ("es", "e"), ("es", ""), ("s", ""), ("ed", "e"), ("ed", ""))
    for suffix, ending in endings:
        if word.endswith(suffix) and (base := word[: -len(suffix)] + ending) in known:
            return base
    return None


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
    verb_list = verbs(folder)
    forms = irregular(folder, words | set(verb_list))
    opposite = antonyms(folder)
    said = implications(folder, set(verb_list))
    text = (
        NOTICE
        + "\n".join(lines)
        + "\n"
        + "".join(f"~ {f} {lemma}\n" for f, lemma in forms)
        + "".join(f"! {a} {b}\n" for a, b in opposite)
        + "".join(f"% {' '.join(verb_list[i : i + 20])}\n" for i in range(0, len(verb_list), 20))
        + "".join(f"{line}\n" for line in said)
    )
    OUT.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
    print(
        f"{OUT.name}: {len(lines)} synsets, {len(words)} words, {len(forms)} irregular forms,"
        f" {len(opposite)} antonym pairs, {len(verb_list)} verbs, {len(said)} verb senses said"
        " in fewer words"
    )


if __name__ == "__main__":
    main()

"""Chat transcripts: turns with speakers and dates, one episodic memory per turn.

LoCoMo's JSON (a list of conversations, `../shared/reference/eval-protocol.md`): each turn
with text becomes what the evaluation ingests (`eval.datasets` builds its memories here, so
an imported store answers `eval --store` as an evaluated one does): content
`"{speaker}: {text}"` (plus `" [shared a photo: {caption}]"`), the speaker as entity, the
session's date plus one second per earlier turn of the session, the turn id as tag `dia:<id>`
and metadata `dia_id`; the import adds the conversation's id as metadata `conversation`.
Its key: the conversation and the turn id.

Any other transcript: a JSON list of turns (or an object holding one under `turns` or
`messages`), or JSON Lines of turns. A turn names its speaker (`speaker`, `role`, `author`,
`name` or `from`), its text (`text`, `content` or `message`) and, optionally, its time
(`date`, `time`, `timestamp` or `created_at`, ISO 8601) and an `id`. Its key: the id, else a
digest of speaker, text and time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_orchestrator.models import MemoryType, NewMemory
from memory_orchestrator.transfer.sources.common import (
    Incoming,
    digest,
    json_lines,
    made,
)

DIA_FIELD = "dia_id"
DIA_TAG = "dia:"
SESSION = re.compile(r"^session_(\d+)$")
_EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.IGNORECASE)
_TIME_FORMATS = (
    "%I:%M %p on %d %B, %Y",
    "%I:%M %p on %d %B %Y",
    "%I:%M %p on %d %b, %Y",
    "%I:%M %p on %d %b %Y",
)
_SPEAKER = ("speaker", "role", "author", "name", "from")
_TEXT = ("text", "content", "message")
_TIME = ("date", "time", "timestamp", "created_at")


# ---------------------------------------------------------------- LoCoMo


def session_time(value: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" as a UTC datetime; ValueError when unreadable."""
    text = " ".join(value.split())
    for fmt in _TIME_FORMATS:
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(f"unreadable session date {value!r}")


def turn_ids(raw: Sequence[object]) -> list[str]:
    """Turn ids in canonical form ("D3:14"), in order, without repeats. Entries may hold
    several ids ("D8:6; D9:17") and stray characters ("D:11:26", "D30:05"); an entry holding
    no readable id ("D") gives nothing."""
    found: list[str] = []
    for entry in raw:
        for session, turn in _EVIDENCE.findall(str(entry)):
            found.append(f"D{int(session)}:{int(turn)}")
    return list(dict.fromkeys(found))


def locomo_turn(turn: object, when: datetime) -> tuple[str, NewMemory] | None:
    """One LoCoMo turn as its turn id and memory (the evaluation protocol's); None for a turn
    without text, speaker or id."""
    if not isinstance(turn, dict):
        return None
    speaker = str(turn.get("speaker") or "").strip()
    text = str(turn.get("text") or "").strip()
    dia_id = turn_ids([turn.get("dia_id", "")])
    if not text or not speaker or not dia_id:
        return None
    content = f"{speaker}: {text}"
    caption = str(turn.get("blip_caption") or "").strip()
    if caption:
        content += f" [shared a photo: {caption}]"
    key = dia_id[0]
    memory = NewMemory(
        content=content,
        type=MemoryType.EPISODIC,
        entities=[speaker.replace(",", " ")],
        tags=[f"{DIA_TAG}{key}"],
        created_at=when,
        source="locomo",
        metadata={DIA_FIELD: key},
    )
    return key, memory


def sessions_of(sessions: dict[str, Any]) -> list[int]:
    """The numbers of the sessions that hold turns, in order."""
    return sorted(
        int(match.group(1))
        for key, value in sessions.items()
        if (match := SESSION.match(key)) and isinstance(value, list) and value
    )


def _locomo(data: list[Any], name: str) -> list[Incoming]:
    out: list[Incoming] = []
    for index, conv in enumerate(data, start=1):
        case = str(conv.get("sample_id") or f"conversation-{index}")
        sessions = conv.get("conversation")
        if not isinstance(sessions, dict):
            out.append(Incoming(f"locomo:{case}", case, None, "no 'conversation' object"))
            continue
        for number in sessions_of(sessions):
            turns = sessions[f"session_{number}"]
            stamp = sessions.get(f"session_{number}_date_time")
            try:
                start = session_time(stamp) if isinstance(stamp, str) else None
            except ValueError as exc:
                start, why = None, str(exc)
            else:
                why = "no date"
            for offset, turn in enumerate(turns):
                raw = turn.get("dia_id") if isinstance(turn, dict) else None
                where = f"{case} {raw or f'session {number} turn {offset + 1}'}"
                key = f"locomo:{case}:{raw or f'{number}.{offset}'}"
                if start is None:
                    out.append(Incoming(key, where, None, f"session {number}: {why}"))
                    continue
                made_turn = locomo_turn(turn, start + timedelta(seconds=offset))
                if made_turn is None:
                    why_not = "a turn without text, speaker or turn id"
                    out.append(Incoming(key, where, None, why_not))
                    continue
                dia, memory = made_turn
                metadata = {**memory.metadata, "conversation": case}
                memory = memory.model_copy(update={"metadata": metadata})
                out.append(Incoming(f"locomo:{case}:{dia}", f"{case} {dia}", memory))
    return out


def _is_locomo(data: object) -> bool:
    return (
        isinstance(data, list)
        and bool(data)
        and all(isinstance(c, dict) and isinstance(c.get("conversation"), dict) for c in data)
    )


# ---------------------------------------------------------------- plain turns


def is_turn(value: dict[str, Any]) -> bool:
    """Whether a JSON object reads as a turn (a speaker and a text)."""
    return any(isinstance(value.get(k), str) for k in _SPEAKER) and any(
        isinstance(value.get(k), str) for k in _TEXT
    )


def _turn(value: object, where: str) -> Incoming:
    if not isinstance(value, dict) or not is_turn(value):
        why = "not a turn: expected an object with a speaker (speaker, role, author, name or"
        return Incoming(f"turn:{digest(where)}", where, None, f"{why} from) and a text")
    speaker = next(str(value[k]).strip() for k in _SPEAKER if isinstance(value.get(k), str))
    text = next(str(value[k]).strip() for k in _TEXT if isinstance(value.get(k), str))
    when = next((value[k] for k in _TIME if value.get(k) is not None), None)
    given = value.get("id")
    key = f"turn:{given}" if isinstance(given, str | int) and str(given) else None
    fields = {
        "content": f"{speaker}: {text}" if text else "",
        "type": MemoryType.EPISODIC,
        "entities": [speaker.replace(",", " ")] if speaker else [],
        "created_at": when,
        "source": "transcript",
    }
    return made(key or f"turn:{digest(speaker, text, when)}", where, fields)


def read_transcript(path: Path) -> list[Incoming]:
    if path.suffix.lower() == ".jsonl":
        return [
            _turn(value, f"{path.name}:{number}")
            if problem is None
            else Incoming(
                f"turn:{digest(path.name, number)}", f"{path.name}:{number}", None, problem
            )
            for number, value, problem in json_lines(path)
        ]
    data = json.loads(path.read_text(encoding="utf-8"))
    if _is_locomo(data):
        return _locomo(data, path.name)
    if isinstance(data, dict):
        data = next((data[k] for k in ("turns", "messages") if isinstance(data.get(k), list)), None)
    if not isinstance(data, list):
        return [
            Incoming(
                f"file:{path.name}",
                path.name,
                None,
                "expected LoCoMo's list of conversations, or a list of turns (or an object"
                " holding one under 'turns' or 'messages')",
            )
        ]
    return [_turn(value, f"{path.name} turn {n}") for n, value in enumerate(data, start=1)]

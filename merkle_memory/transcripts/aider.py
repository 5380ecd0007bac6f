"""Importer for Aider chat histories (``.aider.chat.history.md``).

Aider appends every session to one Markdown file. Mapping (DESIGN section 3, the common
importer rules):

- ``# aider chat started at <time>`` starts a session: a conversation of its own (a new root).
- ``#### `` lines are what the user typed: consecutive ones are one ``user`` turn (the prefix
  and the two spaces Aider appends to each line are removed; ``####`` alone is an empty line).
- The text after a user turn, up to the next user line or session, is the ``assistant``
  turn, as written (SEARCH/REPLACE edit blocks stay text). Text before the first user turn of a
  session is an assistant turn too.
- ``> `` lines are Aider's own output (tool output, token counts and costs, commits): not
  hashed, counted in ``skipped`` (reason ``"tool output"``) and kept in the ``notes`` metadata
  of the node before them (before any node of a session: its first node).
- Inside a fenced code block of an assistant turn (a line starting with three or more
  backticks or tildes opens it, the same fence closes it), ``#### `` and ``> `` lines are the
  assistant's text, unless they end with the two spaces Aider writes after its own lines
  (then the fence was left open and the line is Aider's).

Each session is one chain. Metadata (not hashed): ``source`` (``"aider"``), the 1-based
``line`` where the turn starts, ``started_at`` (the session header's time) on a session's
first node, ``notes``; the bucket's model is the one the session's ``> Model:`` (or ``> Main
model:``) line names. ``messages`` counts the turns.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from .._progress import ProgressCallback
from ..dag import Bucket, ContentBlock
from ..errors import TranscriptFormatError
from ._common import ImportResult, RawMessage, build_result, open_regular
from ._importer import Importer
from ._located import in_file, not_format

__all__ = ["FORMAT", "IMPORTER", "read_file", "sniff"]

FORMAT: Final = "aider"
"""The format name (``--format aider``)."""

SESSION_HEADER: Final = "# aider chat started at"
_USER: Final = "####"
_TOOL: Final = ">"
_MODEL: Final = re.compile(r"(?:Main )?[Mm]odel: (\S+)")
_FENCE: Final = re.compile(r"\s*(`{3,}|~{3,})")
_OWN_SUFFIX: Final = "  "


def _user_text(line: str) -> str | None:
    """The typed text of a user line (``#### X``), or ``None`` for another line."""
    if line == _USER or line.startswith(_USER + " "):
        text = line[len(_USER) + 1 :]
        return text[: -len(_OWN_SUFFIX)] if text.endswith(_OWN_SUFFIX) else text
    return None


def _tool_text(line: str) -> str | None:
    """The text of an Aider output line (``> X``), or ``None`` for another line."""
    if line == _TOOL or line.startswith(_TOOL + " "):
        return line[len(_TOOL) + 1 :].rstrip()
    return None


@dataclass(slots=True)
class _Turn:
    role: str
    line: int
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Session:
    line: int
    started_at: str | None
    turns: list[_Turn] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # before the first turn
    model: str | None = None


def _sessions(lines: Iterator[tuple[int, str]]) -> Iterator[_Session]:
    """Split the history into sessions of turns (module docstring)."""
    session = _Session(0, None)
    fence: str | None = None  # the open fence of the assistant turn, if any
    typing = False  # the last line was a user line: another one joins its turn
    for lineno, raw in lines:
        line = raw.rstrip("\r\n")
        if line.startswith(SESSION_HEADER):
            if session.line or session.turns or session.notes:
                yield session
            session = _Session(lineno, line[len(SESSION_HEADER) :].strip() or None)
            fence, typing = None, False
            continue
        turn = session.turns[-1] if session.turns else None
        user = _user_text(line)
        tool = None if user is not None else _tool_text(line)
        if fence is not None and turn is not None:
            if not (line.endswith(_OWN_SUFFIX) and (user is not None or tool is not None)):
                turn.lines.append(line)  # the assistant's own text, inside its fence
                match = _FENCE.fullmatch(line.rstrip())
                if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                    fence = None
                continue
            fence = None  # Aider's own line: the assistant left its fence open
        if user is not None:
            if typing and turn is not None:
                turn.lines.append(user)
            else:
                session.turns.append(_Turn("user", lineno, [user]))
            typing = True
            continue
        typing = False
        if tool is not None:
            model = _MODEL.match(tool)
            if model is not None and session.model is None:
                session.model = model.group(1)
            (turn.notes if turn is not None else session.notes).append(tool)
            continue
        if turn is None or turn.role != "assistant":
            if not line.strip():
                continue  # blank lines before the reply
            turn = _Turn("assistant", lineno)
            session.turns.append(turn)
        turn.lines.append(line)
        match = _FENCE.match(line)
        if match:
            fence = match.group(1)
    if session.line or session.turns or session.notes:
        yield session


def _records(sessions: Iterator[_Session]) -> Iterator[RawMessage]:
    count = 0
    for session in sessions:
        parent: str | None = None
        for index, turn in enumerate(session.turns):
            text = "\n".join(turn.lines).strip("\n")
            metadata: dict[str, Any] = {"source": FORMAT, "line": turn.line}
            if index == 0:
                if session.started_at is not None:
                    metadata["started_at"] = session.started_at
                notes = session.notes + turn.notes
            else:
                notes = turn.notes
            if notes:
                metadata["notes"] = notes
            model = session.model if turn.role == "assistant" else None
            blocks = (ContentBlock("text", text=text),) if text else ()
            bucket = Bucket("message", turn.role, blocks, model=model, agent_name="aider")
            key = str(count)
            count += 1
            yield RawMessage(key, parent, bucket, metadata)
            parent = key


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with open_regular(path) as handle:
        for lineno, raw in enumerate(handle, 1):
            try:
                yield lineno, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                error = TranscriptFormatError(f"not UTF-8 text ({exc.reason})")
                raise in_file(path, error, lineno) from exc


def _read_path(path: Path, progress: ProgressCallback | None = None) -> ImportResult:
    """Import an Aider chat history (module docstring).

    Read in one step (no progress within the file: ``progress`` is accepted and unused).

    Raises:
        TranscriptFormatError: a line that is not UTF-8 (``FILE:LINE: ...``), or a file with
            text but neither a session header nor a user line (``FILE is not an aider chat
            history (...)``).
        OSError: the file cannot be read.
    """
    sessions = list(_sessions(_lines(path)))
    turns = sum(len(s.turns) for s in sessions)
    notes = sum(len(s.notes) + sum(len(t.notes) for t in s.turns) for s in sessions)
    has_user = any(t.role == "user" for s in sessions for t in s.turns)
    if (turns or notes) and not (has_user or any(s.line for s in sessions)):
        raise not_format(
            "an aider chat history", "no '# aider chat started at' header and no '#### ' line", path
        )
    result = build_result(FORMAT, _records(iter(sessions)), turns, notes, path=str(path))
    reasons = {"tool output": notes} if notes else {}
    return dataclasses.replace(result, skip_reasons=reasons)


def sniff(head: bytes) -> bool:
    """Whether a file's first bytes look like an Aider chat history: one of its first lines
    starts with ``# aider chat started at``."""
    header = SESSION_HEADER.encode()
    return any(raw.startswith(header) for raw in head.split(b"\n")[:20])


IMPORTER: Final = Importer(FORMAT, _read_path, sniff)
"""The registry entry of this format."""

read_file: Final = IMPORTER.read_file
"""Import an Aider chat history (module docstring; :meth:`Importer.read_file`): returns an
``ImportResult`` of format :data:`FORMAT`; raises ``TranscriptFormatError`` naming the file
(and line) for text it cannot read, ``OSError`` for an unreadable file."""

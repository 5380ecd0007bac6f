"""Claude Code session transcripts (``~/.claude/projects/<project>/<session>.jsonl``) to nodes.

One JSON object per line. Lines of ``type`` ``"user"`` or ``"assistant"`` with a ``message``
object are messages; every other line (``system``, ``attachment``, ``summary``, ``progress``,
``file-history-snapshot``, ...) is counted as skipped, but when it has a ``uuid`` it still
links: a message whose ``parentUuid`` names it attaches to that line's nearest message
ancestor. Rules (issue 2 item 4, DESIGN section 3):

- Consecutive assistant lines sharing one ``message.id`` (each linked to the one before by
  ``parentUuid``) are one API message, so one node, blocks in line order.
- Tool results are user nodes holding ``tool_result`` blocks. Result lines (lines whose
  projected blocks are all tool results) answering one assistant turn (each linked to the
  one before, each result id among that turn's ``tool_use`` ids, none repeated) form one
  node, even when other lines sit between them in the file (Claude Code interleaves inline
  sidechains).
- String content is one text block. Parents follow ``parentUuid``; ``parentUuid: null``
  (first line, inline sidechain root, compact boundary) starts a root, so a subagent
  conversation is its own root, as the API saw it.
- A uuid used by more than one line (e.g. the placeholder ``"[trimmed for fixture]"``) never
  merges lines and never serves as a parent: see
  :func:`~merkle_memory.transcripts._common.build_nodes`.
- A message whose projected content is empty is not a node.

Content blocks are mapped by :func:`~merkle_memory.transcripts._blocks.anthropic_block`
(shared with the Anthropic request importer, so a session and the request bodies of its turns
give the same node ids).

Lone UTF-16 surrogates (a ``\\udXXX`` escape cut in half) are replaced with U+FFFD. A line that
is not JSON is an error, except a torn last line without a newline (a session still being
written), which is skipped. A file of JSON lines none of which has a ``parentUuid`` key (or
is a ``summary`` with a ``leafUuid``) is not a session and is refused, even with ``--format
claude-code``. Errors name the file and the 1-based line.

Lines are parsed with the stdlib ``json`` (about twice as fast as the strict
``canonical.loads``; a transcript is third-party input, not canonical JSON): a key repeated in
one object keeps its last value, as in JavaScript; ``NaN`` and ``Infinity`` literals parse,
but are refused (``TranscriptFormatError``) if they reach a hashed field (``tool_input``,
``content``), and an integer beyond +-(2**53 - 1) there is hashed as the nearest double
(DESIGN section 3). Fields that are not kept are never checked.

Memory: the file is read line by line and only what the nodes keep is held (blocks, a few
metadata fields, the grouping links); repeated metadata strings (session id, model) are
shared, and each line's working state is released as its node is built.

Metadata kept on each node (not hashed): ``source`` (``"claude-code"``), ``uuids`` and
``lines`` (1-based line numbers) of the lines merged into it, and when present ``timestamp``
(of the first line), ``session_id``, ``message_id``, ``model``, ``is_sidechain``,
``parent_tool_use_id``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from .._progress import EVERY, ProgressCallback
from ..dag import Bucket, ContentBlock
from ..errors import MerkleMemoryError, TranscriptFormatError
from ..projection import normalize_whitespace, strip_tags
from ._blocks import anthropic_block, clean_surrogates
from ._common import (
    TORN_LAST_LINE,
    ImportResult,
    RawMessage,
    build_result,
    not_json,
    open_regular,
)
from ._importer import Importer
from ._located import in_file, not_format

__all__ = ["FORMAT", "IMPORTER", "read_file", "sniff"]

FORMAT: Final = "claude-code"
"""The format name (``--format claude-code``)."""

_META_KEYS: Final = (
    ("timestamp", "timestamp"),
    ("sessionId", "session_id"),
    ("isSidechain", "is_sidechain"),
    ("parent_tool_use_id", "parent_tool_use_id"),
    ("parentToolUseID", "parent_tool_use_id"),
)
_LINE_KEYS: Final = ("uuid", "parentUuid", "type", *(key for key, _ in _META_KEYS))
"""The keys of a message line that :class:`_Line` reads (besides ``message``)."""
_SHARED_META: Final = frozenset({"session_id", "parent_tool_use_id"})

LinkOnly = tuple[str, str | None]
"""A line that is not a message but has a ``uuid``: ``(uuid, parentUuid)``."""


def _only_results(blocks: list[ContentBlock]) -> bool:
    """Whether the blocks are tool results, once harness noise (e.g. a reminder block that
    Claude Code adds beside the results) is projected away.

    The same as ``project_content(blocks)`` being non-empty and all ``tool_result``, without
    projecting: the projection drops exactly the blocks whose non-empty text projects to
    empty, and never changes a type.
    """
    kept = False
    for block in blocks:
        if block.text and not normalize_whitespace(strip_tags(block.text)):
            continue  # dropped by the projection
        if block.type != "tool_result":
            return False
        kept = True
    return kept


class _Line:
    """One message line of the file, and the group (node-to-be) it joined."""

    __slots__ = (
        "blocks",
        "group",
        "kind",
        "lineno",
        "message_id",
        "meta",
        "parent_uuid",
        "role",
        "uuid",
    )

    def __init__(self, lineno: int, record: Mapping[str, Any], message: Mapping[str, Any]):
        self.lineno = lineno
        uuid = record.get("uuid")
        parent = record.get("parentUuid")
        self.uuid: str | None = uuid if isinstance(uuid, str) else None
        self.parent_uuid: str | None = parent if isinstance(parent, str) else None
        role = message.get("role")
        role = role if isinstance(role, str) and role else str(record["type"])
        self.role: str = sys.intern(role) if type(role) is str else role
        message_id = message.get("id")
        self.message_id: str | None = message_id if isinstance(message_id, str) else None
        content = message.get("content")
        if content is None:
            items: list[Any] = []
        elif isinstance(content, str):
            items = [content]
        elif isinstance(content, list):
            items = content
        else:
            raise TranscriptFormatError("message content must be a string or a list")
        self.blocks = [anthropic_block(item, owned=True) for item in items]
        if self.role == "assistant":
            self.kind = "assistant"
        elif _only_results(self.blocks):
            self.kind = "results"
        else:
            self.kind = "other"
        meta: dict[str, Any] = {}
        for source_key, meta_key in _META_KEYS:
            value = record.get(source_key)
            if isinstance(value, str | bool):
                if meta_key in _SHARED_META and type(value) is str:
                    value = sys.intern(value)  # one copy per session, not per line
                meta[meta_key] = value
        if self.message_id is not None:
            meta["message_id"] = self.message_id
        model = message.get("model")
        if isinstance(model, str):
            meta["model"] = sys.intern(model) if type(model) is str else model
        self.meta = meta
        self.group: _Group | None = None


class _Group:
    """Lines that form one node. ``result_ids`` is kept for result groups only."""

    __slots__ = ("answers", "lines", "result_ids")

    def __init__(self, line: _Line, answers: frozenset[str] | None) -> None:
        self.lines = [line]
        self.answers = answers
        self.result_ids: set[str] | None = None
        if line.kind == "results":
            self.result_ids = {b.tool_result_id for b in line.blocks if b.tool_result_id}
        line.group = self

    def add(self, line: _Line) -> None:
        self.lines.append(line)
        if self.result_ids is not None:
            self.result_ids.update(b.tool_result_id for b in line.blocks if b.tool_result_id)
        line.group = self

    def tool_use_ids(self) -> frozenset[str]:
        return frozenset(b.tool_use_id for x in self.lines for b in x.blocks if b.tool_use_id)


def _parse_lines(
    path: Path, progress: ProgressCallback | None = None
) -> tuple[list[_Line | LinkOnly | None], int, list[tuple[int, str]]]:
    """Stream the file: message lines, link-only ``(uuid, parentUuid)`` pairs, the message
    count and ``(line, why)`` of each skipped line."""
    entries: list[_Line | LinkOnly | None] = []
    messages = 0
    skips: list[tuple[int, str]] = []
    why: dict[object, str] = {}  # one text per record type, shared by its lines
    objects = 0  # complete JSON object lines
    signed = False  # some line has the session signature (see ``_signed``)
    total = os.path.getsize(path) if progress is not None else 0
    done = 0
    with open_regular(path) as handle:
        for lineno, raw in enumerate(handle, 1):
            if progress is not None:
                done += len(raw)
                if lineno % EVERY == 0:
                    progress("reading", done, total)
            if not raw or raw.isspace():  # ``not raw.strip()``, without copying the line
                continue
            try:
                text = raw.decode("utf-8")
                record = json.loads(text)
            except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                if not raw.endswith(b"\n"):  # a torn last line: the session is being written
                    skips.append((lineno, TORN_LAST_LINE))
                    continue
                error = TranscriptFormatError(not_json(exc, "not a JSON line"))
                raise in_file(path, error, lineno) from exc
            if not isinstance(record, dict):
                raise in_file(path, TranscriptFormatError("not a JSON object"), lineno)
            objects += 1
            signed = signed or _signed(record)
            message = record.get("message")
            if record.get("type") in ("user", "assistant") and isinstance(message, dict):
                if "\\ud" in text or "\\uD" in text:  # else no string holds a surrogate
                    message = clean_surrogates(message)
                    record = clean_surrogates({k: record[k] for k in _LINE_KEYS if k in record})
                try:
                    entries.append(_Line(lineno, record, message))
                except MerkleMemoryError as exc:
                    raise in_file(path, exc, lineno) from exc
                messages += 1
                continue
            kind = record.get("type")
            reason = why.get(kind) if isinstance(kind, str) else None
            if reason is None:
                reason = _skip_reason(kind, message)
                if isinstance(kind, str):
                    why[kind] = reason
            skips.append((lineno, reason))
            uuid = record.get("uuid")
            if isinstance(uuid, str):
                parent = record.get("parentUuid")
                entries.append((uuid, parent if isinstance(parent, str) else None))
    if objects and not signed:
        raise not_format(
            "a claude-code session",
            "no line has a 'parentUuid' key or is a 'summary' with a 'leafUuid'",
            path,
        )
    if progress is not None:
        progress("reading", total, total)
    return entries, messages, skips


def _skip_reason(kind: object, message: object) -> str:
    """Why a line that is no message is skipped (``dag import --show-skipped``)."""
    if kind in ("user", "assistant"):
        return f"a {kind} line without a message object"
    if isinstance(kind, str):
        return f"type {kind[:60]!r} is not a message"
    return "a line without a type is not a message"


_SIGNATURE: Final = re.compile(rb'"parentUuid"\s*:|"leafUuid"\s*:')
"""The signature keys of :func:`_signed`, as bytes of a line too deep to parse."""


def _signed(record: dict[str, Any]) -> bool:
    """Whether a parsed line carries the Claude Code signature (the one :func:`sniff` looks
    for): a ``parentUuid`` key, or a ``summary`` line with a ``leafUuid``."""
    return "parentUuid" in record or (record.get("type") == "summary" and "leafUuid" in record)


def _group_lines(entries: list[_Line | LinkOnly | None], unique: dict[str, _Line]) -> None:
    """Merge assistant lines of one API message, and results answering one turn."""
    for entry in entries:
        if not isinstance(entry, _Line):
            continue
        parent = unique.get(entry.parent_uuid or "")
        tail = parent is not None and parent.group is not None and parent.group.lines[-1] is parent
        group = parent.group if parent is not None and tail else None
        if group is not None and entry.uuid in unique:
            first = group.lines[0]
            if (
                entry.kind == "assistant"
                and first.kind == "assistant"
                and entry.message_id is not None
                and entry.message_id == first.message_id
            ):
                group.add(entry)
                continue
            ids = {b.tool_result_id for b in entry.blocks if b.type == "tool_result"}
            if (
                entry.kind == "results"
                and first.kind == "results"
                and group.answers is not None
                and group.result_ids is not None
                and ids <= group.answers
                and not ids & group.result_ids
            ):
                group.add(entry)
                continue
        answers = None
        if entry.kind == "results" and group is not None and group.lines[0].kind == "assistant":
            answers = group.tool_use_ids()
        _Group(entry, answers)


def _key(line: _Line) -> str:
    return line.uuid if line.uuid is not None else f"#line{line.lineno}"


def _records(entries: list[_Line | LinkOnly | None]) -> Iterator[RawMessage]:
    """Group the lines and yield one record per node-to-be (and per link-only line), in file
    order, releasing each line as its record is made (``entries`` is emptied)."""
    counts: dict[str, int] = {}
    for entry in entries:
        if entry is None:
            continue
        uuid = entry.uuid if isinstance(entry, _Line) else entry[0]
        if uuid is not None:
            counts[uuid] = counts.get(uuid, 0) + 1
    unique = {e.uuid: e for e in entries if isinstance(e, _Line) and e.uuid and counts[e.uuid] == 1}
    del counts
    _group_lines(entries, unique)
    # A line merged into a group is named, as a parent, by the group's first line.
    redirect: dict[str, str] = {}
    for uuid, line in unique.items():
        assert line.group is not None
        head = line.group.lines[0]
        if head is not line:
            redirect[uuid] = _key(head)
    del unique

    for index, entry in enumerate(entries):
        entries[index] = None  # released as it goes
        if entry is None:
            continue
        if not isinstance(entry, _Line):
            uuid, parent = entry
            yield RawMessage(uuid, None if parent is None else redirect.get(parent, parent), None)
            continue
        group = entry.group
        entry.group = None  # break the line <-> group cycle
        if group is None or not group.lines or group.lines[0] is not entry:
            continue  # merged into an earlier line's node
        lines = group.lines
        group.lines = []
        metadata: dict[str, Any] = {"source": FORMAT}
        if len(lines) == 1:
            metadata.update(entry.meta)
            blocks: tuple[ContentBlock, ...] = tuple(entry.blocks)
        else:
            for line in lines:
                for name, value in line.meta.items():
                    metadata.setdefault(name, value)
            blocks = tuple(b for line in lines for b in line.blocks)
        metadata["uuids"] = [line.uuid for line in lines if line.uuid is not None]
        metadata["lines"] = [line.lineno for line in lines]
        model = metadata.get("model")
        bucket = Bucket(
            "message",
            entry.role,
            blocks,
            model=model if isinstance(model, str) else None,
            agent_name="claude-code",
        )
        parent = entry.parent_uuid
        parent_key = None if parent is None else redirect.get(parent, parent)
        yield RawMessage(_key(entry), parent_key, bucket, metadata)
    entries.clear()


def _read_lines(path: Path, progress: ProgressCallback | None = None) -> ImportResult:
    """Import one Claude Code session file (module docstring for the rules).

    Args:
        path: a ``.jsonl`` session file.
        progress: optional ``progress(phase, done, total)`` callback
            (``merkle_memory._progress``): phase ``"reading"``, in bytes of the file.

    Returns:
        An :class:`~merkle_memory.transcripts._common.ImportResult` with format
        ``"claude-code"``.

    Raises:
        TranscriptFormatError: a line that is not a JSON object (other than a torn last
            line) or a message whose content cannot be read (text ``FILE:LINE: ...``,
            ``path`` and ``line`` set), or a file of JSON lines none of which has the session
            signature of :func:`sniff` (``FILE is not a claude-code session (...)``; a file
            with no complete line is an empty session).
        OSError: the file cannot be read.
    """
    entries, messages, skips = _parse_lines(path, progress)
    return build_result(
        FORMAT, _records(entries), messages, len(skips), path=str(path), skipped_lines=skips
    )


def sniff(head: bytes) -> bool:
    """Whether the first bytes of a file look like a Claude Code session: some complete line is
    a JSON object with a ``parentUuid`` key, or a ``summary`` line with a ``leafUuid``."""
    for raw in head.split(b"\n")[:200]:
        try:
            record = json.loads(raw)
        except RecursionError:
            # Too deep for the parser (the import refuses it with the depth limit's error):
            # judge the object by its bytes, so the file is still named for what it is.
            if raw.lstrip().startswith(b"{") and _SIGNATURE.search(raw):
                return True
            continue
        except ValueError:
            continue
        if isinstance(record, dict) and _signed(record):
            return True
    return False


IMPORTER: Final = Importer(FORMAT, _read_lines, sniff)
"""The registry entry of this format."""

read_file: Final = IMPORTER.read_file
"""Import a Claude Code session file, ``.jsonl`` (module docstring for the rules;
:meth:`Importer.read_file`): returns an ``ImportResult`` of format :data:`FORMAT`
(``skipped`` counts the lines that are not messages); raises ``TranscriptFormatError`` (text
``FILE:LINE: ...``, ``path`` and ``line`` set) for a line that is not a JSON object (other
than a torn last line) or a message it cannot read, or ``FILE is not a claude-code session
(...)`` for JSON lines none of which has the signature of :func:`sniff`; ``OSError`` for an
unreadable file."""

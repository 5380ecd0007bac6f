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
import json.scanner
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
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
"""The line fields kept as metadata (source key, metadata key), in metadata order; a string
or a bool is kept, the second ``parent_tool_use_id`` source wins (:class:`_Line`)."""
_LINE_KEYS: Final = ("uuid", "parentUuid", "type", *(key for key, _ in _META_KEYS))
"""The keys of a message line that :class:`_Line` reads (besides ``message``)."""

_META_FIELDS: Final = (
    "timestamp",
    "session_id",
    "is_sidechain",
    "parent_tool_use_id",
    "message_id",
    "model",
)
"""The metadata fields of a message line, in metadata order: each is a :class:`_Line` slot
of the same name (``None`` when absent)."""

LinkOnly = tuple[str, str | None]
"""A line that is not a message but has a ``uuid``: ``(uuid, parentUuid)``."""


def _only_results(blocks: Sequence[ContentBlock]) -> bool:
    """Whether the blocks are tool results, once harness noise (e.g. a reminder block that
    Claude Code adds beside the results) is projected away.

    The same as ``project_content(blocks)`` being non-empty and all ``tool_result``, without
    projecting: the projection drops exactly the blocks whose non-empty text projects to
    empty, and never changes a type.
    """
    if not any(block.type == "tool_result" for block in blocks):
        return False  # a prompt: nothing to project
    kept = False
    for block in blocks:
        if block.text and not normalize_whitespace(strip_tags(block.text)):
            continue  # dropped by the projection
        if block.type != "tool_result":
            return False
        kept = True
    return kept


class _Line:
    """One message line of the file; the first line of a group (node-to-be) also holds the
    group: its last line, and for result groups the tool ids.

    ``group`` is ``None`` until the line is grouped, then the group's first line (the line
    itself for a first line); ``next`` is the group's next line (``None`` for the last).
    Everything is in slots, one object per message line alive until its node is built:
    ``blocks`` is the line's one block itself when it has exactly one (as Claude Code writes
    them), else a tuple; the metadata fields are ``None`` when absent; the tool ids are
    tuples of strings. Fewer objects per line is less work for the cyclic garbage collector,
    which otherwise visits them again and again while a session loads (a group's lines are
    linked, not listed, and a tuple of strings leaves the collector's care at its first
    pass, where a set or list stays).
    """

    __slots__ = (
        "answers",
        "blocks",
        "group",
        "is_sidechain",
        "kind",
        "lineno",
        "message_id",
        "model",
        "next",
        "parent_tool_use_id",
        "parent_uuid",
        "result_ids",
        "role",
        "session_id",
        "tail",
        "timestamp",
        "uuid",
    )

    def __init__(self, lineno: int, record: Mapping[str, Any], message: Mapping[str, Any]):
        self.lineno = lineno
        get = record.get
        uuid = get("uuid")
        parent = get("parentUuid")
        self.uuid: str | None = uuid if isinstance(uuid, str) else None
        self.parent_uuid: str | None = parent if isinstance(parent, str) else None
        role = message.get("role")
        role = role if isinstance(role, str) and role else str(record["type"])
        self.role: str = sys.intern(role) if type(role) is str else role
        message_id = message.get("id")
        self.message_id: str | None = message_id if isinstance(message_id, str) else None
        content = message.get("content")
        blocks: ContentBlock | tuple[ContentBlock, ...]
        if type(content) is list and len(content) == 1:  # as Claude Code writes them
            blocks = anthropic_block(content[0], owned=True)
        elif content is None:
            blocks = ()
        elif isinstance(content, str):
            blocks = anthropic_block(content, owned=True)
        elif isinstance(content, list):
            made = [anthropic_block(item, owned=True) for item in content]
            blocks = made[0] if len(made) == 1 else tuple(made)
        else:
            raise TranscriptFormatError("message content must be a string or a list")
        self.blocks = blocks
        if self.role == "assistant":
            self.kind = "assistant"
        elif not isinstance(blocks, tuple) and blocks.type != "tool_result":
            self.kind = "other"  # one block, not a result: a prompt
        elif _only_results(blocks if isinstance(blocks, tuple) else (blocks,)):
            self.kind = "results"
        else:
            self.kind = "other"
        # The fields of _META_KEYS, unrolled (a parsed record holds exact types): a string or
        # a bool is kept. Repeated strings are interned: one copy per session, not per line.
        value = get("timestamp")
        self.timestamp: str | bool | None = (
            value if type(value) is str or type(value) is bool else None
        )
        value = get("sessionId")
        self.session_id: str | bool | None = (
            sys.intern(value) if type(value) is str else value if type(value) is bool else None
        )
        value = get("isSidechain")
        self.is_sidechain: str | bool | None = (
            value if type(value) is bool or type(value) is str else None
        )
        value = get("parentToolUseID")  # wins over parent_tool_use_id when both are given
        if type(value) is not str and type(value) is not bool:
            value = get("parent_tool_use_id")
        self.parent_tool_use_id: str | bool | None = (
            sys.intern(value) if type(value) is str else value if type(value) is bool else None
        )
        model = message.get("model")
        self.model: str | None = (
            (sys.intern(model) if type(model) is str else model) if isinstance(model, str) else None
        )
        self.group: _Line | None = None
        self.tail: _Line | None = None
        self.next: _Line | None = None
        self.answers: tuple[str, ...] | None = None
        self.result_ids: tuple[str, ...] | None = None

    def block_tuple(self) -> tuple[ContentBlock, ...]:
        """The line's blocks, in order."""
        blocks = self.blocks
        return blocks if type(blocks) is tuple else (blocks,)  # type: ignore[return-value]

    def metadata(self, more: list[_Line] | None = None) -> dict[str, Any]:
        """The metadata of a node of this line and the lines ``more`` after it in its group
        (``source``; each field from the first line that has it, in line order, then field
        order; the lines' ``uuids`` and ``lines``), unrolled: most nodes are one line."""
        metadata: dict[str, Any] = {"source": FORMAT}
        if self.timestamp is not None:
            metadata["timestamp"] = self.timestamp
        if self.session_id is not None:
            metadata["session_id"] = self.session_id
        if self.is_sidechain is not None:
            metadata["is_sidechain"] = self.is_sidechain
        if self.parent_tool_use_id is not None:
            metadata["parent_tool_use_id"] = self.parent_tool_use_id
        if self.message_id is not None:
            metadata["message_id"] = self.message_id
        if self.model is not None:
            metadata["model"] = self.model
        if more is None:
            metadata["uuids"] = [] if self.uuid is None else [self.uuid]
            metadata["lines"] = [self.lineno]
            return metadata
        if len(metadata) < 7:  # a field this line lacks: the first later line with it gives it
            missing = [name for name in _META_FIELDS if name not in metadata]
            for line in more:
                for name in missing:
                    value = getattr(line, name)
                    if value is not None and name not in metadata:
                        metadata[name] = value
        uuids = [] if self.uuid is None else [self.uuid]
        uuids += [line.uuid for line in more if line.uuid is not None]
        metadata["uuids"] = uuids
        metadata["lines"] = [self.lineno, *[line.lineno for line in more]]
        return metadata

    def start_group(self, answers: tuple[str, ...] | None) -> None:
        """Make this line the first of a new group; ``answers``: for a result group that
        follows an assistant group, that group's tool-use ids (else ``None``)."""
        self.group = self.tail = self
        self.answers = answers
        if self.kind == "results":
            self.result_ids = tuple(
                b.tool_result_id for b in self.block_tuple() if b.tool_result_id
            )

    def join(self, line: _Line) -> None:
        """Add ``line`` to the end of this (first) line's group."""
        assert self.tail is not None  # a first line
        self.tail.next = line
        self.tail = line
        line.group = self
        if self.result_ids is not None:
            self.result_ids += tuple(
                b.tool_result_id for b in line.block_tuple() if b.tool_result_id
            )

    def lines(self) -> list[_Line]:
        """The lines of this (first) line's group, in order."""
        lines = [self]
        line = self.next
        while line is not None:
            lines.append(line)
            line = line.next
        return lines

    def tool_use_ids(self) -> tuple[str, ...]:
        """The tool-use ids of this (first) line's group (a tuple: it may repeat one)."""
        return tuple(b.tool_use_id for x in self.lines() for b in x.block_tuple() if b.tool_use_id)


_SCAN: Final[Callable[[str, int], tuple[Any, int]]] = json.scanner.make_scanner(
    json.JSONDecoder()  # type: ignore[arg-type]  # typeshed types the context oddly
)
"""The stdlib's (C) scanner, as ``json.loads`` uses it: ``(value, end offset)`` of the JSON
value at an offset of a text; raises ``StopIteration`` or ``JSONDecodeError``."""

_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89abcdefABCDEF]")
"""A ``\\uD800``-``\\uDFFF`` escape: the only way a JSON line can hold a lone surrogate (an
escaped backslash before ``ud800`` is a false alarm, which only cleans a clean line)."""


def _parse_lines(
    path: Path, progress: ProgressCallback | None = None
) -> tuple[list[_Line | LinkOnly | None], dict[str, _Line], int, list[tuple[int, str]]]:
    """Stream the file: message lines, link-only ``(uuid, parentUuid)`` pairs, the message
    lines whose uuid no other line (message or not) uses, the message count and ``(line,
    why)`` of each skipped line."""
    entries: list[_Line | LinkOnly | None] = []
    first: dict[str, _Line | LinkOnly] = {}  # uuid -> its first line
    repeated: set[str] = set()  # uuids of more than one line
    messages = 0
    skips: list[tuple[int, str]] = []
    why: dict[object, str] = {}  # one text per record type, shared by its lines
    objects = 0  # complete JSON object lines
    signed = False  # some line has the session signature (see ``_signed``)
    total = os.path.getsize(path) if progress is not None else 0
    done = 0
    scan = _SCAN
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
                # json.loads(text) without its two Python layers: the C scanner from offset
                # 0, then only the newline may follow. Anything else (leading space, trailing
                # data, any error) goes to json.loads, which gives the value or the error.
                try:
                    record, end = scan(text, 0)
                except Exception:
                    end = -1
                if end != len(text) and (end != len(text) - 1 or text[end] != "\n"):
                    record = json.loads(text)
            except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                if not raw.endswith(b"\n"):  # a torn last line: the session is being written
                    skips.append((lineno, TORN_LAST_LINE))
                    continue
                error = TranscriptFormatError(not_json(exc, "not a JSON line"))
                raise in_file(path, error, lineno) from exc
            if type(record) is not dict:
                raise in_file(path, TranscriptFormatError("not a JSON object"), lineno)
            objects += 1
            if not signed:
                signed = _signed(record)
            message = record.get("message")
            entry: _Line | LinkOnly
            if type(message) is dict and record.get("type") in ("user", "assistant"):
                if _SURROGATE_ESCAPE.search(raw) is not None:  # else no string holds one
                    message = clean_surrogates(message)
                    record = clean_surrogates({k: record[k] for k in _LINE_KEYS if k in record})
                try:
                    entry = _Line(lineno, record, message)
                except MerkleMemoryError as exc:
                    raise in_file(path, exc, lineno) from exc
                messages += 1
                uuid = entry.uuid
            else:
                kind = record.get("type")
                reason = why.get(kind) if isinstance(kind, str) else None
                if reason is None:
                    reason = _skip_reason(kind, message)
                    if isinstance(kind, str):
                        why[kind] = reason
                skips.append((lineno, reason))
                uuid = record.get("uuid")
                if type(uuid) is not str:
                    continue
                parent = record.get("parentUuid")
                entry = (uuid, parent if type(parent) is str else None)
            entries.append(entry)
            if uuid is not None:
                if uuid in first:
                    repeated.add(uuid)
                else:
                    first[uuid] = entry
    if objects and not signed:
        raise not_format(
            "a claude-code session",
            "no line has a 'parentUuid' key or is a 'summary' with a 'leafUuid'",
            path,
        )
    if progress is not None:
        progress("reading", total, total)
    unique = {
        uuid: entry
        for uuid, entry in first.items()
        if uuid and uuid not in repeated and type(entry) is _Line
    }
    return entries, unique, messages, skips


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
        if type(entry) is not _Line:
            continue
        parent = unique.get(entry.parent_uuid or "")
        head = None if parent is None else parent.group
        if head is not None and head.tail is not parent:
            head = None  # the parent is not the last line of its group: no merge
        if head is not None and entry.uuid in unique:
            if (
                entry.kind == "assistant"
                and head.kind == "assistant"
                and entry.message_id is not None
                and entry.message_id == head.message_id
            ):
                head.join(entry)
                continue
            if entry.kind == "results" and head.kind == "results":
                ids = {b.tool_result_id for b in entry.block_tuple() if b.type == "tool_result"}
                if (
                    head.answers is not None
                    and head.result_ids is not None
                    and ids.issubset(head.answers)
                    and ids.isdisjoint(head.result_ids)
                ):
                    head.join(entry)
                    continue
        answers = None
        if entry.kind == "results" and head is not None and head.kind == "assistant":
            answers = head.tool_use_ids()
        entry.start_group(answers)


def _key(line: _Line) -> str:
    return line.uuid if line.uuid is not None else f"#line{line.lineno}"


def _records(
    entries: list[_Line | LinkOnly | None], unique: dict[str, _Line]
) -> Iterator[RawMessage]:
    """Group the lines and yield one record per node-to-be (and per link-only line), in file
    order, releasing each line as its record is made (``entries`` and ``unique`` are
    emptied)."""
    _group_lines(entries, unique)
    # A line merged into a group is named, as a parent, by the group's first line.
    redirect: dict[str, str] = {}
    for uuid, line in unique.items():
        head = line.group
        assert head is not None
        if head is not line:
            redirect[uuid] = _key(head)
    unique.clear()

    for index, entry in enumerate(entries):
        entries[index] = None  # released as it goes
        if entry is None:
            continue
        if not isinstance(entry, _Line):
            uuid, parent = entry
            yield RawMessage(uuid, None if parent is None else redirect.get(parent, parent), None)
            continue
        if entry.group is not entry:
            continue  # merged into an earlier line's node (its group link is already cut)
        entry.group = entry.tail = None  # cut the links: nothing but the node stays
        metadata: dict[str, Any]
        if entry.next is None:  # most nodes are one line
            metadata = entry.metadata()
            blocks = entry.blocks if isinstance(entry.blocks, tuple) else (entry.blocks,)
            model: Any = entry.model
        else:
            more = entry.lines()
            del more[0]
            entry.next = None
            metadata = entry.metadata(more)
            collected = list(entry.block_tuple())
            for line in more:
                line.group = line.next = None
                line_blocks = line.blocks
                if isinstance(line_blocks, tuple):
                    collected += line_blocks
                else:
                    collected.append(line_blocks)
            blocks = tuple(collected)
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
        key = entry.uuid if entry.uuid is not None else f"#line{entry.lineno}"  # _key(entry)
        yield RawMessage(key, parent_key, bucket, metadata)
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
    entries, unique, messages, skips = _parse_lines(path, progress)
    records = _records(entries, unique)  # fresh metadata per record, given up: owned
    return build_result(
        FORMAT, records, messages, len(skips), path=str(path), skipped_lines=skips, owned=True
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

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

Block mapping (keys of Anthropic Messages content blocks -> ``ContentBlock`` fields):
``text`` -> ``text``; ``image`` with a ``base64`` source -> ``image_base64`` and
``media_type``, with a ``url`` source -> ``image_url`` (other sources kept in ``content``);
``tool_use`` / ``server_tool_use`` / ``mcp_tool_use``: ``id`` -> ``tool_use_id``, ``name`` ->
``tool_name``, ``input`` -> ``tool_input``; ``tool_result``: ``tool_use_id`` ->
``tool_result_id``, string ``content`` -> ``tool_output``, a list -> text parts joined with
``"\\n"`` in ``tool_output`` and other parts in ``content``, ``is_error`` kept; other
``*_tool_result`` types: ``tool_use_id`` -> ``tool_result_id``, ``content`` -> ``content``;
``thinking``: ``thinking``, ``signature`` -> ``thinking_signature``. Request decorations
(``cache_control``, ``citations``, ``caller``) are not kept. A block of any other type keeps its
``type``, a string ``text`` as ``text``, and every other key in ``content`` (an object), so
nothing of it is lost from the hash.

Lone UTF-16 surrogates (a ``\\udXXX`` escape cut in half) are replaced with U+FFFD. A line that
is not JSON is an error, except a torn last line without a newline (a session still being
written), which is skipped.

Metadata kept on each node (not hashed): ``source`` (``"claude-code"``), ``uuids`` and
``lines`` (1-based line numbers) of the lines merged into it, and when present ``timestamp``
(of the first line), ``session_id``, ``message_id``, ``model``, ``is_sidechain``,
``parent_tool_use_id``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from ..dag import Bucket, ContentBlock
from ..errors import MerkleMemoryError, TranscriptFormatError
from ..projection import project_content
from ._common import (
    Importer,
    ImportResult,
    RawMessage,
    build_nodes,
    replace_lone_surrogates,
    tool_arguments,
    tool_result_block,
)

__all__ = ["FORMAT", "IMPORTER", "read_file", "sniff"]

FORMAT: Final = "claude-code"
"""The format name (``--format claude-code``)."""

_DROPPED_KEYS: Final = frozenset({"type", "cache_control", "citations", "caller"})
_TOOL_USE_TYPES: Final = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


def _clean(value: Any) -> Any:
    """Replace lone surrogates in every string of a parsed JSON value."""
    if isinstance(value, str):
        return replace_lone_surrogates(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {replace_lone_surrogates(k): _clean(v) for k, v in value.items()}
    return value


def _str(item: Mapping[str, Any], key: str) -> str:
    value = item.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TranscriptFormatError(f"block field {key!r} must be a string")
    return value


def _rest(item: Mapping[str, Any], *used: str) -> dict[str, Any] | None:
    rest = {k: v for k, v in item.items() if k not in _DROPPED_KEYS and k not in used}
    return rest or None


def _block(item: Any) -> ContentBlock:
    """Map one Anthropic content block to a ContentBlock (module docstring)."""
    if isinstance(item, str):
        return ContentBlock("text", text=item)
    if not isinstance(item, Mapping):
        raise TranscriptFormatError(f"a content block must be an object: {item!r:.80}")
    kind = item.get("type")
    if not isinstance(kind, str) or not kind:
        raise TranscriptFormatError("a content block needs a string 'type'")
    if kind == "text":
        return ContentBlock("text", text=_str(item, "text"))
    if kind == "image":
        source = item.get("source")
        if isinstance(source, Mapping) and source.get("type") == "base64":
            return ContentBlock(
                "image", image_base64=_str(source, "data"), media_type=_str(source, "media_type")
            )
        if isinstance(source, Mapping) and source.get("type") == "url":
            return ContentBlock("image", image_url=_str(source, "url"))
        return ContentBlock("image", content=_rest(item))
    if kind in _TOOL_USE_TYPES:
        return ContentBlock(
            kind,
            tool_use_id=_str(item, "id"),
            tool_name=_str(item, "name"),
            tool_input=tool_arguments(item.get("input")),
        )
    if kind == "tool_result":
        is_error = item.get("is_error")
        return tool_result_block(
            _str(item, "tool_use_id"), item.get("content"), is_error=is_error is True
        )
    if kind.endswith("_tool_result"):
        return ContentBlock(
            kind, tool_result_id=_str(item, "tool_use_id"), content=item.get("content")
        )
    if kind == "thinking":
        return ContentBlock(
            "thinking",
            thinking=_str(item, "thinking"),
            thinking_signature=_str(item, "signature"),
        )
    text = item.get("text")
    if isinstance(text, str):
        return ContentBlock(kind, text=text, content=_rest(item, "text"))
    return ContentBlock(kind, content=_rest(item))


def _only_results(blocks: list[ContentBlock]) -> bool:
    """Whether the blocks are tool results, once harness noise (e.g. a reminder block that
    Claude Code adds beside the results) is projected away."""
    projected = project_content(blocks)
    return bool(projected) and all(b.type == "tool_result" for b in projected)


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
        self.role: str = role if isinstance(role, str) and role else str(record["type"])
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
        self.blocks = [_block(item) for item in items]
        if self.role == "assistant":
            self.kind = "assistant"
        elif _only_results(self.blocks):
            self.kind = "results"
        else:
            self.kind = "other"
        meta: dict[str, Any] = {}
        for source_key, meta_key in (
            ("timestamp", "timestamp"),
            ("sessionId", "session_id"),
            ("isSidechain", "is_sidechain"),
            ("parent_tool_use_id", "parent_tool_use_id"),
            ("parentToolUseID", "parent_tool_use_id"),
        ):
            value = record.get(source_key)
            if isinstance(value, str | bool):
                meta[meta_key] = value
        if self.message_id is not None:
            meta["message_id"] = self.message_id
        model = message.get("model")
        if isinstance(model, str):
            meta["model"] = model
        self.meta = meta
        self.group: _Group | None = None


class _Group:
    """Lines that form one node."""

    __slots__ = ("answers", "lines", "result_ids", "tool_use_ids")

    def __init__(self, line: _Line, answers: frozenset[str] | None) -> None:
        self.lines = [line]
        self.answers = answers
        self.tool_use_ids = {b.tool_use_id for b in line.blocks if b.tool_use_id}
        self.result_ids = {b.tool_result_id for b in line.blocks if b.tool_result_id}
        line.group = self

    def add(self, line: _Line) -> None:
        self.lines.append(line)
        self.tool_use_ids.update(b.tool_use_id for b in line.blocks if b.tool_use_id)
        self.result_ids.update(b.tool_result_id for b in line.blocks if b.tool_result_id)
        line.group = self


def _parse_lines(path: Path) -> tuple[list[_Line | tuple[str, str | None]], int, int]:
    """Stream the file: message lines, link-only ``(uuid, parentUuid)`` pairs, counts."""
    entries: list[_Line | tuple[str, str | None]] = []
    messages = skipped = 0
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
                record = json.loads(text)
            except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                if not raw.endswith(b"\n"):  # a torn last line: the session is being written
                    skipped += 1
                    continue
                raise TranscriptFormatError(f"{path}:{lineno}: not a JSON line ({exc})") from None
            if not isinstance(record, dict):
                raise TranscriptFormatError(f"{path}:{lineno}: not a JSON object")
            message = record.get("message")
            if record.get("type") in ("user", "assistant") and isinstance(message, dict):
                if "\\ud" in text or "\\uD" in text:
                    record, message = _clean(record), _clean(message)
                try:
                    entries.append(_Line(lineno, record, message))
                except MerkleMemoryError as exc:
                    raise TranscriptFormatError(f"{path}:{lineno}: {exc}") from None
                messages += 1
                continue
            skipped += 1
            uuid = record.get("uuid")
            if isinstance(uuid, str):
                parent = record.get("parentUuid")
                entries.append((uuid, parent if isinstance(parent, str) else None))
    return entries, messages, skipped


def _group_lines(entries: list[_Line | tuple[str, str | None]], unique: dict[str, _Line]) -> None:
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
                and ids <= group.answers
                and not ids & group.result_ids
            ):
                group.add(entry)
                continue
        answers = None
        if entry.kind == "results" and group is not None and group.lines[0].kind == "assistant":
            answers = frozenset(group.tool_use_ids)
        _Group(entry, answers)


def _key(line: _Line) -> str:
    return line.uuid if line.uuid is not None else f"#line{line.lineno}"


def read_file(path: Path | str) -> ImportResult:
    """Import one Claude Code session file (module docstring for the rules).

    Args:
        path: a ``.jsonl`` session file.

    Returns:
        An :class:`~merkle_memory.transcripts._common.ImportResult` with format
        ``"claude-code"``.

    Raises:
        TranscriptFormatError: a line that is not a JSON object (other than a torn last
            line), or a message whose content cannot be read.
        OSError: the file cannot be read.
    """
    path = Path(path)
    entries, messages, skipped = _parse_lines(path)
    counts: dict[str, int] = {}
    for entry in entries:
        uuid = entry.uuid if isinstance(entry, _Line) else entry[0]
        if uuid is not None:
            counts[uuid] = counts.get(uuid, 0) + 1
    unique = {e.uuid: e for e in entries if isinstance(e, _Line) and e.uuid and counts[e.uuid] == 1}
    _group_lines(entries, unique)

    def parent_key(uuid: str | None) -> str | None:
        line = unique.get(uuid or "")
        if line is not None and line.group is not None:
            return _key(line.group.lines[0])
        return uuid

    raw: list[RawMessage] = []
    for entry in entries:
        if not isinstance(entry, _Line):
            raw.append(RawMessage(entry[0], parent_key(entry[1]), None))
            continue
        group = entry.group
        if group is None or group.lines[0] is not entry:
            continue
        first = group.lines[0]
        blocks = tuple(b for line in group.lines for b in line.blocks)
        metadata: dict[str, Any] = {"source": FORMAT}
        for line in group.lines:
            for name, value in line.meta.items():
                metadata.setdefault(name, value)
        metadata["uuids"] = [line.uuid for line in group.lines if line.uuid is not None]
        metadata["lines"] = [line.lineno for line in group.lines]
        model = metadata.get("model")
        bucket = Bucket(
            "message",
            first.role,
            blocks,
            model=model if isinstance(model, str) else None,
            agent_name="claude-code",
        )
        raw.append(RawMessage(_key(first), parent_key(first.parent_uuid), bucket, metadata))
    built = build_nodes(raw)
    return ImportResult(
        FORMAT,
        built.nodes,
        messages,
        skipped,
        dropped=built.dropped,
        duplicates=built.duplicates,
        detached=built.detached,
        path=str(path),
    )


def sniff(head: bytes) -> bool:
    """Whether the first bytes of a file look like a Claude Code session: some complete line is
    a JSON object with a ``parentUuid`` key, or a ``summary`` line with a ``leafUuid``."""
    for raw in head.split(b"\n")[:200]:
        try:
            record = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict) and (
            "parentUuid" in record or (record.get("type") == "summary" and "leafUuid" in record)
        ):
            return True
    return False


IMPORTER: Final = Importer(FORMAT, read_file, sniff)
"""The registry entry of this format."""

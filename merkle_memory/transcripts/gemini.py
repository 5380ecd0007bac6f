"""Importer for Gemini CLI sessions (``~/.gemini/tmp/<project>/chats/session-*.json[l]``).

Two forms of one session are read, with one mapping, so they give the same node ids:

- **JSON**: one object ``{"sessionId", "projectHash", "startTime", "lastUpdated",
  "messages": [...]}`` (the form Gemini CLI rewrites after every message);
- **JSONL**: one record a line. A record with a ``sessionId`` and no ``type`` is the session
  metadata, ``{"$set": {...}}`` patches it, and every other record is a message; a message id
  written again (the message grew while it streamed, or its tool calls finished) keeps the
  **last** copy, at the place of the first.

A message is ``{"id", "timestamp", "type", "content", ...}``. Mapping (DESIGN section 3, the
common importer rules):

- ``type: "user"``: a ``user`` node. ``content`` is a string (one ``text`` block) or a list of
  parts: ``{text}`` -> ``text``, ``{inlineData: {mimeType, data}}`` -> ``image`` (base64 and
  media type; another MIME type keeps the part in ``content`` of an ``inline_data`` block),
  ``{fileData: {mimeType, fileUri}}`` -> ``image`` by URL (or a ``file_data`` block),
  ``{functionResponse}`` -> ``tool_result`` (these form a node of their own, as in the other
  formats).
- ``type: "gemini"``: an ``assistant`` node (the bucket's model is the message's ``model``).
  Its blocks, in order: one ``thinking`` block per ``thoughts[]`` entry (``**subject**`` and
  the description on the next line), then the content parts (``{text, thought: true}`` ->
  ``thinking``, ``{text}`` -> ``text``, ``{functionCall: {id, name, args}}`` -> ``tool_use``),
  then a ``tool_use`` for each ``toolCalls[]`` entry whose id no ``functionCall`` part already
  gave (``id`` -> ``tool_use_id``, ``name`` -> ``tool_name``, ``args`` -> ``tool_input``).
- The results of those tool calls live inside the calls: each ``toolCalls[]`` entry's
  ``result[]`` gives one ``tool_result`` block (``tool_result_id`` the
  ``functionResponse.id``, else the call's id; ``tool_output`` the response's ``output`` or
  ``error`` text and any text parts, joined with ``"\\n"``; other parts and other response keys
  kept in ``content``; ``is_error`` when the call's status is ``"error"`` or the response has
  an ``error``). The results of one message form one ``user`` node after it. A call with no
  result (still running, or lost) gives no block.
- ``type: "info"`` / ``"error"`` / ``"warning"`` messages are the CLI's own notices, not
  turns: each is counted in ``skipped`` (reason ``"<type> message"``) and kept in the
  ``notes`` metadata of the next node.

The conversation is one chain in message order (there are no parent links). Metadata of each
node (not hashed): ``source`` (``"gemini"``), ``id`` and ``timestamp`` of its message, the
1-based ``line`` of the message's first copy (JSONL) or its ``index`` in ``messages`` (JSON),
``tokens`` of a ``gemini`` message, and on the first node ``session`` (the session metadata
without ``lastUpdated``).

Counts: ``messages`` counts the ``user`` and ``gemini`` messages kept; ``skipped`` every other
record (``skip_reasons`` says why: notices, session metadata, ``$set`` patches, copies
superseded by a later one, a torn last line, records of another type).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from .._progress import ProgressCallback
from ..dag import ContentBlock
from ..errors import MerkleMemoryError, TranscriptFormatError
from ._chain import TOOL_RESULTS, Turn, chain, need
from ._common import (
    ImportResult,
    build_result,
    load_json_file,
    not_json,
    open_regular,
    tool_arguments,
    tool_result_block,
)
from ._importer import Importer
from ._located import in_file, located, not_format
from ._sniff import head_text, head_value

__all__ = [
    "FORMAT",
    "IMPORTER",
    "is_line_form",
    "looks_like",
    "parse_session",
    "read_file",
    "read_object",
    "sniff",
]

FORMAT: Final = "gemini"
"""The format name (``--format gemini``)."""

TURN_TYPES: Final = frozenset({"user", "gemini"})
NOTE_TYPES: Final = frozenset({"info", "error", "warning"})
_SESSION_KEYS: Final = ("sessionId", "projectHash")


def _str(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if value is None:
        return ""
    need(isinstance(value, str), f"{where}: {key!r} must be a string")
    return str(value)


def _media_block(kind: str, part: Mapping[str, Any], where: str) -> ContentBlock:
    """An ``inlineData`` / ``fileData`` part: an image block, or the part kept as it is."""
    data = part.get(kind)
    if not isinstance(data, Mapping):
        raise TranscriptFormatError(f"{where}: {kind!r} must be an object")
    mime = data.get("mimeType")
    if isinstance(mime, str) and mime.startswith("image/"):
        if kind == "inlineData" and isinstance(data.get("data"), str):
            return ContentBlock("image", image_base64=data["data"], media_type=mime)
        if kind == "fileData" and isinstance(data.get("fileUri"), str):
            return ContentBlock("image", image_url=data["fileUri"], media_type=mime)
    name = "inline_data" if kind == "inlineData" else "file_data"
    return ContentBlock(name, content=dict(data))


def _response_parts(response: Any) -> tuple[list[str], list[Any], bool]:
    """The texts, other values and error flag of a ``functionResponse.response``."""
    if not isinstance(response, Mapping):
        return [], ([] if response is None else [response]), False
    texts: list[str] = []
    rest = dict(response)
    error = False
    for key in ("output", "error"):
        value = rest.get(key)
        if isinstance(value, str):
            texts.append(value)
            del rest[key]
            error = error or key == "error"
        elif key == "error" and value is not None:
            error = True
    return texts, ([rest] if rest else []), error


def _result_block(
    parts: list[Any], fallback_id: str, status_error: bool, where: str
) -> ContentBlock:
    """One ``tool_result`` block from the result parts of a call (module docstring)."""
    texts: list[str] = []
    others: list[Any] = []
    result_id = ""
    is_error = status_error
    for part in parts:
        need(isinstance(part, Mapping), f"{where}: a result part must be an object")
        response = part.get("functionResponse")
        if isinstance(response, Mapping):
            if not result_id:
                result_id = _str(response, "id", where)
            got, rest, error = _response_parts(response.get("response"))
            texts.extend(got)
            others.extend(rest)
            is_error = is_error or error
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            others.append(dict(part))
    output: list[Any] = [{"type": "text", "text": t} for t in texts if t]
    return tool_result_block(result_id or fallback_id, output + others, is_error=is_error)


def _part_blocks(content: Any, where: str) -> list[ContentBlock]:
    """The blocks of a message's ``content``: a string, or a list of Gemini API parts."""
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [ContentBlock("text", text=content)]
    need(isinstance(content, list), f"{where}: content must be a string or a list of parts")
    blocks: list[ContentBlock] = []
    for part in content:
        if isinstance(part, str):
            if part:
                blocks.append(ContentBlock("text", text=part))
            continue
        need(isinstance(part, Mapping), f"{where}: a content part must be an object")
        text = part.get("text")
        if isinstance(text, str):
            if text:
                if part.get("thought") is True:
                    blocks.append(ContentBlock("thinking", thinking=text))
                else:
                    blocks.append(ContentBlock("text", text=text))
        elif "functionCall" in part:
            call = part["functionCall"]
            need(isinstance(call, Mapping), f"{where}: 'functionCall' must be an object")
            blocks.append(
                ContentBlock(
                    "tool_use",
                    tool_use_id=_str(call, "id", where),
                    tool_name=_str(call, "name", where),
                    tool_input=tool_arguments(call.get("args")),
                )
            )
        elif "functionResponse" in part:
            response = part["functionResponse"]
            need(isinstance(response, Mapping), f"{where}: 'functionResponse' must be an object")
            blocks.append(_result_block([part], "", False, where))
        elif "inlineData" in part or "fileData" in part:
            kind = "inlineData" if "inlineData" in part else "fileData"
            blocks.append(_media_block(kind, part, where))
        elif part:
            kind = next(iter(part))
            blocks.append(ContentBlock(str(kind), content=dict(part)))
    return blocks


def _thought_blocks(thoughts: Any, where: str) -> list[ContentBlock]:
    if thoughts is None:
        return []
    need(isinstance(thoughts, list), f"{where}: 'thoughts' must be a list")
    blocks = []
    for thought in thoughts:
        need(isinstance(thought, Mapping), f"{where}: a thought must be an object")
        subject = _str(thought, "subject", where)
        description = _str(thought, "description", where)
        text = f"**{subject}**\n{description}" if subject else description
        if text:
            blocks.append(ContentBlock("thinking", thinking=text))
    return blocks


def _message_turns(
    message: Mapping[str, Any], metadata: dict[str, Any], where: str
) -> Iterator[Turn]:
    """The turns of one ``user`` / ``gemini`` message (module docstring)."""
    kind = message.get("type")
    for key in ("id", "timestamp"):
        if isinstance(message.get(key), str):
            metadata[key] = message[key]
    blocks = _part_blocks(message.get("content"), where)
    if kind == "user":
        run: list[ContentBlock] = []
        for block in blocks:  # runs of tool results / everything else, one node each
            if run and (block.type == "tool_result") != (run[0].type == "tool_result"):
                merge = TOOL_RESULTS if run[0].type == "tool_result" else None
                yield Turn("user", run, dict(metadata), merge=merge)
                run = []
            run.append(block)
        merge = TOOL_RESULTS if run and run[0].type == "tool_result" else None
        yield Turn("user", run, metadata, merge=merge)
        return
    if isinstance(message.get("tokens"), Mapping):
        metadata["tokens"] = message["tokens"]
    model = message.get("model")
    calls = message.get("toolCalls")
    if calls is None:
        calls = []
    need(isinstance(calls, list), f"{where}: 'toolCalls' must be a list")
    given = {b.tool_use_id for b in blocks if b.type == "tool_use" and b.tool_use_id}
    uses: list[ContentBlock] = []
    results: list[ContentBlock] = []
    for call in calls:
        need(isinstance(call, Mapping), f"{where}: a tool call must be an object")
        call_id = _str(call, "id", where)
        if not call_id or call_id not in given:
            uses.append(
                ContentBlock(
                    "tool_use",
                    tool_use_id=call_id,
                    tool_name=_str(call, "name", where),
                    tool_input=tool_arguments(call.get("args")),
                )
            )
        result = call.get("result")
        if result is None:
            continue
        parts = result if isinstance(result, list) else [result]
        results.append(_result_block(parts, call_id, call.get("status") == "error", where))
    blocks = [*_thought_blocks(message.get("thoughts"), where), *blocks, *uses]
    yield Turn(
        "assistant", blocks, metadata, model=model if isinstance(model, str) and model else None
    )
    if results:
        yield Turn("user", results, {k: v for k, v in metadata.items() if k != "tokens"})


def _session_meta(session: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in session.items() if k not in ("messages", "lastUpdated")}


class _Reader:
    """The messages of one session, in order, with the notes waiting for the next node."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.notes: list[dict[str, Any]] = []
        self.messages = 0
        self.reasons: dict[str, int] = {}

    def skip(self, reason: str) -> None:
        self.reasons[reason] = self.reasons.get(reason, 0) + 1

    def message(self, message: Mapping[str, Any], position: tuple[str, int], where: str) -> None:
        kind = message.get("type")
        if kind in NOTE_TYPES:
            self.skip(f"{kind} message")
            note = {"type": kind}
            for key in ("content", "timestamp"):
                if isinstance(message.get(key), str):
                    note[key] = message[key]
            self.notes.append(note)
            return
        if kind not in TURN_TYPES:
            self.skip(f"a message of type {kind!r}" if isinstance(kind, str) else "no type")
            return
        self.messages += 1
        metadata: dict[str, Any] = {"source": FORMAT, position[0]: position[1]}
        if self.notes:
            metadata["notes"] = self.notes
            self.notes = []
        with located(where):
            self.turns.extend(_message_turns(message, metadata, where))

    def result(
        self, session: Mapping[str, Any] | None, path: str | None, skipped: int = 0
    ) -> ImportResult:
        meta = _session_meta(session) if session else {}
        first = {"session": meta} if meta else None
        raw = chain(self.turns, provider="google", agent_name="gemini-cli", first_metadata=first)
        skipped += sum(self.reasons.values())
        result = build_result(FORMAT, raw, self.messages, skipped, path=path)
        return _with_reasons(result, self.reasons)


def _with_reasons(result: ImportResult, reasons: Mapping[str, int]) -> ImportResult:
    return dataclasses.replace(result, skip_reasons=dict(reasons))


def shape_problem(value: Any) -> str | None:
    """Why a parsed value is not a Gemini CLI session object (``None`` if it is one): an
    object with a ``messages`` list and a ``sessionId`` or ``projectHash``, whose messages are
    objects with a ``type``. Never raises."""
    if not isinstance(value, Mapping):
        return "not a JSON object"
    if not isinstance(value.get("messages"), list):
        return "no 'messages' list"
    if not any(key in value for key in _SESSION_KEYS):
        return "no 'sessionId' or 'projectHash'"
    for index, message in enumerate(value["messages"]):
        if not isinstance(message, Mapping) or not isinstance(message.get("type"), str):
            return f"messages[{index}] is not an object with a 'type'"
    return None


def looks_like(value: Any) -> bool:
    """Whether a parsed JSON value is a Gemini CLI session object. Never raises."""
    return shape_problem(value) is None


def parse_session(session: Any, path: str | None = None) -> ImportResult:
    """Import a parsed Gemini CLI session object (the JSON form).

    Raises:
        TranscriptFormatError: ``session`` is not a session object (``not a gemini session
            (...)``), or a message cannot be read (``gemini: messages[N]: ...``).
    """
    problem = shape_problem(session)
    if problem is not None:
        raise not_format("a gemini session", problem, None if path is None else Path(path))
    reader = _Reader()
    for index, message in enumerate(session["messages"]):
        reader.message(message, ("index", index), f"gemini: messages[{index}]")
    return reader.result(session, path)


def _read_lines(path: Path, handle: Any) -> ImportResult:
    """The JSONL form (module docstring); ``handle`` is the file opened at its start."""
    session: dict[str, Any] | None = None
    found: dict[str, tuple[int, Mapping[str, Any]]] = {}  # id -> (first line, last copy)
    order: list[str] = []
    skipped: dict[str, int] = {}

    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1

    objects = signed = 0
    for lineno, raw in enumerate(handle, 1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            if not raw.endswith(b"\n"):  # a torn last line: the session is being written
                skip("torn last line")
                continue
            error = TranscriptFormatError(not_json(exc, "not a JSON line"))
            raise in_file(path, error, lineno) from exc
        if not isinstance(record, dict):
            raise in_file(path, TranscriptFormatError("not a JSON object"), lineno)
        objects += 1
        if "$set" in record and len(record) == 1:
            signed += 1
            patch = record["$set"]
            if isinstance(patch, dict) and session is not None:  # patches the metadata read
                session = {**session, **patch}
            skip("$set patch")
        elif "type" not in record and any(key in record for key in _SESSION_KEYS):
            signed += 1
            session = {**(session or {}), **record}
            skip("session metadata")
        elif isinstance(record.get("id"), str) and isinstance(record.get("type"), str):
            signed += 1
            key = record["id"]
            if key in found:
                skip("superseded by a later copy")
                found[key] = (found[key][0], record)
            else:
                found[key] = (lineno, record)
                order.append(key)
        else:
            kind = record.get("type")
            skip(f"a record of type {kind!r}" if isinstance(kind, str) else "not a message")
    if objects and not signed:
        raise not_format(
            "a gemini session",
            "no line is session metadata, a $set patch or a message with an id and a type",
            path,
        )
    reader = _Reader()
    reader.reasons = skipped
    for key in order:
        line, message = found[key]
        try:
            reader.message(message, ("line", line), "gemini")
        except MerkleMemoryError as exc:
            raise in_file(path, exc, line) from exc
    return reader.result(session, str(path))


def is_line_form(first_line: bytes) -> bool:
    """Whether a session whose first non-blank line is ``first_line`` has the JSONL form: that
    line is a whole JSON object without a ``messages`` list (the JSON form is one object with
    one, on one line or, pretty-printed, over many). Never raises."""
    try:
        record = json.loads(first_line)
    except (ValueError, RecursionError):
        return False
    return isinstance(record, dict) and not isinstance(record.get("messages"), list)


def _first_line(handle: Any) -> bytes:
    """The first non-blank line of an open file (``b""`` for none); the caller seeks back."""
    for raw in handle:
        if raw.strip():
            return bytes(raw)
    return b""


def _read_path(path: Path, progress: ProgressCallback | None = None) -> ImportResult:
    """Import a Gemini CLI session file, either form (module docstring).

    Read in one step (no progress within the file: ``progress`` is accepted and unused).

    Raises:
        TranscriptFormatError: not a session of either form (``FILE is not a gemini session
            (...)``), a line that is not a JSON object (other than a torn last line), or a
            message that cannot be read; the error names the file (and the line for JSONL).
        OSError: the file cannot be read.
    """
    with open_regular(path) as handle:
        first = _first_line(handle)
        handle.seek(0)
        if is_line_form(first.lstrip(b"\xef\xbb\xbf")):
            return _read_lines(path, handle)
    return parse_session(load_json_file(path), str(path))


def _parse_object(value: Any) -> ImportResult:
    return parse_session(value)


def sniff(head: bytes) -> bool:
    """Whether a file's first bytes look like a Gemini CLI session: a whole session object
    (:func:`looks_like`), the cut head of an object with ``"messages"`` and ``"projectHash"``,
    or a complete line that is session metadata (``sessionId`` and ``projectHash``), a
    ``$set`` patch, or a ``gemini`` message. Never raises."""
    value = head_value(head)
    if value is not None:
        return looks_like(value)
    text = head_text(head)
    stripped = text.lstrip("\ufeff \t\r\n")
    if stripped.startswith("{") and '"messages"' in text and '"projectHash"' in text:
        return True
    for raw in head.split(b"\n")[:50]:
        try:
            record = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if not isinstance(record, dict):
            continue
        if all(key in record for key in _SESSION_KEYS) and "type" not in record:
            return True
        if len(record) == 1 and isinstance(record.get("$set"), dict):
            return True
        if record.get("type") == "gemini" and isinstance(record.get("id"), str):
            return True
    return False


IMPORTER: Final = Importer(
    FORMAT,
    _read_path,
    sniff,
    parse=_parse_object,
    shape_problem=shape_problem,
    label="a gemini session",
    sniff_object=looks_like,
)
"""The registry entry of this format: files of either form, and parsed session objects."""

read_file: Final = IMPORTER.read_file
"""Import a Gemini CLI session file, JSON or JSONL (module docstring; :meth:`Importer.read_file`):
returns an ``ImportResult`` of format :data:`FORMAT`; raises ``TranscriptFormatError`` naming
the file (and line) for content it cannot read, ``OSError`` for an unreadable file."""

read_object: Final = IMPORTER.read_object
"""Import a parsed Gemini CLI session object (:meth:`Importer.read_object`)."""

"""Importer for Codex CLI / Codex Desktop rollout files (``~/.codex/sessions/**/rollout-*.jsonl``).

One JSON object per line, ``{"timestamp", "type", "payload"}``. Lines of type
``response_item`` carry the conversation, as the Responses API items the model saw; every
other line (``session_meta``, ``turn_context``, ``event_msg``, ``compacted``) is not a message
and is counted as skipped (``turn_context`` still gives the model of the turns after it).
Rollouts of the first Codex versions, whose lines are the bare items, are read too.

The conversation is one chain (DESIGN section 3, common importer rules; item mapping after
tapes' Responses API parser):

- ``message`` items of role ``user`` are user nodes: ``input_text`` parts become ``text``
  blocks (the ``<environment_context>`` Codex adds is removed by the projection, so turns that
  differ only in date or shell hash the same), ``input_image`` parts ``image`` blocks.
  ``developer`` and ``system`` messages are request metadata, not nodes (their text is kept in
  the ``instructions`` metadata of the next node, with ``session_meta.base_instructions``).
- Consecutive assistant-side items are the output of one model response and form one
  ``assistant`` node, in order: ``reasoning`` -> a ``thinking`` block (summary texts joined
  with ``"\\n"``; ``encrypted_content`` as the never-hashed signature), assistant ``message``
  -> ``text`` blocks (``output_text``; a ``refusal`` part -> a ``refusal`` block),
  ``function_call`` -> ``tool_use`` (``call_id`` -> ``tool_use_id``, ``arguments`` parsed; not
  an object -> ``{"arguments": "<raw text>"}``), ``custom_tool_call`` -> ``tool_use`` with
  ``{"input": "<raw input>"}``, ``local_shell_call`` -> ``tool_use`` named ``local_shell`` with
  its ``action``; other item types keep their type with the item in ``content``.
- ``function_call_output`` / ``custom_tool_call_output`` items answer a call by ``call_id``
  (-> ``tool_result_id``); consecutive outputs are one ``user`` node of ``tool_result`` blocks.
  An output whose ``call_id`` matches no earlier call is kept, and counted in the metadata
  (``unpaired_call_id``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from .._json import json_copy
from .._progress import EVERY, ProgressCallback
from ..dag import ContentBlock
from ..errors import MerkleMemoryError, TranscriptFormatError
from ._chain import TOOL_RESULTS, Turn, chain, need, other_part, part_blocks
from ._common import (
    TORN_LAST_LINE,
    ImportResult,
    build_result,
    not_json,
    open_regular,
    tool_arguments,
    tool_result_block,
)
from ._importer import Importer
from ._located import in_file, not_format
from .openai import image_block

__all__ = ["FORMAT", "IMPORTER", "read_file", "sniff"]

FORMAT: Final = "codex"
_ENVELOPE_TYPES: Final = frozenset(
    {"session_meta", "response_item", "turn_context", "event_msg", "compacted"}
)
_ITEM_TYPES: Final = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "web_search_call",
    }
)
_ASSISTANT: Final = "assistant_output"


def _part_block(kind: str, part: Mapping[str, Any], where: str) -> ContentBlock | None:
    if kind == "input_image":
        url = part.get("image_url")
        return image_block(url, where) if isinstance(url, str) else other_part("image", part)
    if kind == "refusal":
        refusal = part.get("refusal")
        return (
            ContentBlock("refusal", text=refusal) if isinstance(refusal, str) and refusal else None
        )
    return other_part(kind, part)


def _parts(content: Any, where: str) -> list[ContentBlock]:
    return part_blocks(
        content,
        where,
        _part_block,
        text_types=("input_text", "output_text", "text", "summary_text"),
        not_a_list="message content must be a list of parts",
    )


def _str(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if value is None:
        return ""
    need(isinstance(value, str), f"{where}: {key!r} must be a string")
    return str(value)


def _reasoning(item: Mapping[str, Any], where: str) -> ContentBlock:
    summary = item.get("summary") or []
    need(isinstance(summary, list), f"{where}: reasoning summary must be a list")
    texts = [
        p["text"] for p in summary if isinstance(p, Mapping) and isinstance(p.get("text"), str)
    ]
    return ContentBlock(
        "thinking",
        thinking="\n".join(t for t in texts if t),
        thinking_signature=_str(item, "encrypted_content", where),
    )


class _Reader:
    """Turns the items of one rollout into turns, tracking model, instructions and calls."""

    def __init__(self) -> None:
        self.model: str | None = None
        self.instructions: list[str] = []
        self.calls: set[str] = set()
        self.meta: dict[str, Any] = {}

    def _metadata(self, lineno: int, timestamp: Any) -> dict[str, Any]:
        metadata: dict[str, Any] = {"source": FORMAT, "line": lineno}
        if isinstance(timestamp, str):
            metadata["timestamp"] = timestamp
        if self.instructions:
            metadata["instructions"] = "\n".join(self.instructions)
            self.instructions = []
        if self.meta:
            metadata["session"] = self.meta
            self.meta = {}
        json_copy(metadata, "metadata", TranscriptFormatError)  # fails on this line, not at the end
        return metadata

    def envelope(self, kind: str, payload: Any) -> None:
        if not isinstance(payload, Mapping):
            return
        if kind == "turn_context" and isinstance(payload.get("model"), str):
            self.model = payload["model"]
        elif kind == "session_meta":
            for key in ("id", "cwd", "cli_version", "originator", "model_provider"):
                if isinstance(payload.get(key), str):
                    self.meta[key] = payload[key]
            base = payload.get("base_instructions")
            text = base.get("text") if isinstance(base, Mapping) else base
            if isinstance(text, str) and text:
                self.instructions.append(text)

    def item(self, item: Mapping[str, Any], lineno: int, timestamp: Any) -> Turn | None:
        where = "codex"  # the caller adds FILE:LINE
        kind = item.get("type") or ("message" if "role" in item else None)
        need(isinstance(kind, str), f"{where}: a response item needs a string type")
        if kind == "message":
            role = item.get("role")
            blocks = _parts(item.get("content"), where)
            if role in ("developer", "system"):
                self.instructions.extend(b.text for b in blocks if b.text)
                return None
            need(role in ("user", "assistant"), f"{where}: unknown message role {role!r}")
            metadata = self._metadata(lineno, timestamp)
            if role == "user":
                return Turn("user", blocks, metadata)
            if isinstance(item.get("phase"), str):
                metadata["phase"] = item["phase"]
            return Turn("assistant", blocks, metadata, merge=_ASSISTANT, model=self.model)
        if kind in ("function_call_output", "custom_tool_call_output"):
            call_id = _str(item, "call_id", where)
            metadata = self._metadata(lineno, timestamp)
            if call_id not in self.calls:
                metadata["unpaired_call_id"] = call_id
            block = tool_result_block(call_id, item.get("output"))
            return Turn("user", [block], metadata, merge=TOOL_RESULTS)
        if kind == "reasoning":
            block = _reasoning(item, where)
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            call_id = _str(item, "call_id", where) or _str(item, "id", where)
            self.calls.add(call_id)
            if kind == "function_call":
                tool_input = tool_arguments(item.get("arguments"))
                name = _str(item, "name", where)
            elif kind == "custom_tool_call":
                raw = _str(item, "input", where)
                tool_input = {"input": raw} if raw else None
                name = _str(item, "name", where)
            else:
                action = item.get("action")
                tool_input = tool_arguments(action) if action is not None else None
                name = "local_shell"
            block = ContentBlock(
                "tool_use", tool_use_id=call_id, tool_name=name, tool_input=tool_input
            )
        else:
            block = ContentBlock(str(kind), content={k: v for k, v in item.items() if k != "type"})
        metadata = self._metadata(lineno, timestamp)
        return Turn("assistant", [block], metadata, merge=_ASSISTANT, model=self.model)


def _records(path: Path, progress: ProgressCallback | None) -> Iterator[tuple[int, Any]]:
    total = os.path.getsize(path) if progress is not None else 0
    done = 0
    with open_regular(path) as handle:
        for lineno, raw in enumerate(handle, 1):
            if progress is not None:
                done += len(raw)
                if lineno % EVERY == 0:
                    progress("reading", done, total)
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                if not raw.endswith(b"\n"):  # a torn last line: the rollout is being written
                    yield lineno, None
                    continue
                error = TranscriptFormatError(not_json(exc, "not a JSON line"))
                raise in_file(path, error, lineno) from exc
            yield lineno, record
    if progress is not None:
        progress("reading", total, total)


def _read_lines(path: Path, progress: ProgressCallback | None = None) -> ImportResult:
    """Import one Codex rollout file (module docstring for the rules).

    Returns:
        An :class:`~merkle_memory.transcripts._common.ImportResult` of format ``"codex"``;
        ``messages`` counts the response items read, ``skipped`` every other line.

    Raises:
        TranscriptFormatError: a line that is not a JSON object (other than a torn last line)
            or an item that cannot be read (text ``FILE:LINE: ...``, ``path`` and ``line``
            set), or a file of JSON lines none of which is a rollout envelope
            (``{"type", "payload"}``) or a bare response item (``FILE is not a codex rollout
            (...)``).
        OSError: the file cannot be read.
    """
    reader = _Reader()
    turns: list[Turn] = []
    messages = objects = envelopes = 0
    skips: list[tuple[int, str]] = []
    for lineno, record in _records(path, progress):
        if record is None:
            skips.append((lineno, TORN_LAST_LINE))
            continue
        if not isinstance(record, Mapping):
            raise in_file(path, TranscriptFormatError("not a JSON object"), lineno)
        objects += 1
        kind = record.get("type")
        try:
            if "payload" in record and kind in _ENVELOPE_TYPES:
                envelopes += 1
                payload = record["payload"]
                if kind != "response_item" or not isinstance(payload, Mapping):
                    reader.envelope(str(kind), payload)
                    skips.append((lineno, _skip_reason("envelope", kind)))
                    continue
                item: Mapping[str, Any] = payload
            elif kind in _ITEM_TYPES or (kind is None and "role" in record):
                item = record  # first rollout versions: bare items
            else:
                skips.append((lineno, _skip_reason("type", kind)))
                continue
            messages += 1
            turn = reader.item(item, lineno, record.get("timestamp"))
        except MerkleMemoryError as exc:
            raise in_file(path, exc, lineno) from exc
        if turn is not None:
            turns.append(turn)
    if objects and not (envelopes or messages):
        raise not_format(
            "a codex rollout", "no line is a rollout envelope or a response item", path
        )
    raw = chain(turns, provider="openai", agent_name="codex")
    return build_result(FORMAT, raw, messages, len(skips), path=str(path), skipped_lines=skips)


def _skip_reason(what: str, kind: object) -> str:
    """Why a line is skipped (``dag import --show-skipped``): an envelope that holds no
    response item, or a line of another type."""
    if what == "envelope":
        return f"envelope {str(kind)[:60]!r} holds no response item"
    if isinstance(kind, str):
        return f"type {kind[:60]!r} is not a response item"
    return "a line without a type is not a response item"


def sniff(head: bytes) -> bool:
    """Whether a file's first bytes look like a Codex rollout: some complete line of the head is
    an object ``{"type": <session_meta|response_item|...>, "payload": {...}}``."""
    for raw in head.split(b"\n")[:50]:
        try:
            record = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if (
            isinstance(record, dict)
            and record.get("type") in _ENVELOPE_TYPES
            and isinstance(record.get("payload"), dict)
        ):
            return True
    return False


IMPORTER: Final = Importer(FORMAT, _read_lines, sniff)
"""The registry entry of this format."""

read_file: Final = IMPORTER.read_file
"""Import a Codex rollout file (module docstring for the rules; :meth:`Importer.read_file`):
returns an ``ImportResult`` of format :data:`FORMAT` (``messages`` counts the response items
read, ``skipped`` every other line); raises ``TranscriptFormatError`` (text ``FILE:LINE:
...``, ``path`` and ``line`` set) for a line that is not a JSON object (other than a torn
last line) or an item it cannot read, or ``FILE is not a codex rollout (...)`` for JSON lines
none of which is a rollout envelope or a bare response item; ``OSError`` for an unreadable
file."""

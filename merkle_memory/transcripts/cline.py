"""Importer for Cline task folders (the VS Code extension's ``tasks/<id>/``).

A task folder holds ``api_conversation_history.json`` (the conversation as the model saw it:
a list of Anthropic-style messages ``{"role", "content": [blocks], "ts"?}``),
``ui_messages.json`` (what the extension showed: ``{"ts" (ms), "type", "say"/"ask", "text",
"modelInfo", "conversationHistoryIndex"}``) and ``task_metadata.json``. The importer reads the
folder or the API file itself (then the ``ui_messages.json`` beside it, if any). Mapping
(DESIGN section 3, the common importer rules):

- Messages are read in order, one chain. Content blocks are mapped as the Anthropic importer
  maps them (``thinking`` with its never-hashed ``signature``, ``text``, ``tool_use``,
  ``image``), so a Cline history and the Messages API requests of the same conversation give
  the same node ids.
- Tool results arrive as user ``text`` blocks: a header ``[<tool> for '<what>'] Result:`` (or
  ``[<tool>] Result:``) and the output, in the same block or in the blocks after it. Each
  becomes a ``tool_result`` block answering the preceding assistant message's ``tool_use``
  (the first unanswered one with that tool name, else the first unanswered one):
  ``tool_result_id`` its id, ``tool_output`` the output without the header, ``is_error`` when
  the output starts ``The tool execution failed``. A header with no ``tool_use`` to answer (a
  Cline version that wrote its tool calls as XML text) stays text. The results of one message
  form one ``user`` node, as in the other formats; the message's other blocks form the next.
- Harness text is not hashed: every ``<environment_details>...</environment_details>`` section
  (the editor state Cline appends to each user message) is cut out before hashing, and a block
  that is only one of Cline's task-progress reminders (``# task_progress RECOMMENDED``,
  ``# TODO LIST UPDATE REQUIRED``) is kept in the ``notes`` metadata of its node instead. The
  ``<task>`` wrapper of the first prompt is removed (the prompt itself is kept).
- Metadata (not hashed): ``source`` (``"cline"``), ``index`` (the message's place in the API
  file), ``ts`` of the message, ``timestamp`` (ISO 8601, from the first ``ui_messages.json``
  entry whose ``conversationHistoryIndex`` is ``index - 1``, the entries shown while that
  message was made), ``metrics``; the bucket's model is the message's ``modelInfo.modelId`` (or
  the UI entry's). The first node also gets ``task`` (``model_usage`` and
  ``environment_history`` of ``task_metadata.json``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from .._progress import ProgressCallback
from ..dag import ContentBlock
from ..errors import MerkleMemoryError, TranscriptFormatError
from ._blocks import anthropic_block
from ._chain import TOOL_RESULTS, Turn, chain, need
from ._common import (
    ImportResult,
    RawMessage,
    build_result,
    load_json_file,
    read_regular,
    tool_result_block,
)
from ._importer import Importer
from ._located import in_file, located, not_format
from ._sniff import head_text, head_value

__all__ = [
    "API_FILE",
    "FORMAT",
    "IMPORTER",
    "is_task_folder",
    "looks_like",
    "parse_history",
    "read_file",
    "read_object",
    "sniff",
    "strip_environment_details",
]

FORMAT: Final = "cline"
"""The format name (``--format cline``)."""

API_FILE: Final = "api_conversation_history.json"
UI_FILE: Final = "ui_messages.json"
META_FILE: Final = "task_metadata.json"
TASK_FILES: Final = (API_FILE, UI_FILE, META_FILE)
"""The files of a Cline task folder."""

_RESULT_HEADER: Final = re.compile(r"\[([A-Za-z0-9_.:-]+)(?: for .*?)?\] Result:", re.DOTALL)
_ENV_OPEN: Final = "<environment_details>"
_ENV_CLOSE: Final = "</environment_details>"
_REMINDERS: Final = ("# task_progress RECOMMENDED", "# TODO LIST UPDATE REQUIRED")
_FAILED: Final = "The tool execution failed"
_SIGNS: Final = ("<environment_details>", "] Result:", "<task>")


def strip_environment_details(text: str) -> str:
    """``text`` with every ``<environment_details>...</environment_details>`` section cut out
    (an unclosed one runs to the end), as the importer does before hashing."""
    while True:
        start = text.find(_ENV_OPEN)
        if start < 0:
            return text
        end = text.find(_ENV_CLOSE, start)
        text = text[:start] + ("" if end < 0 else text[end + len(_ENV_CLOSE) :])


def _unwrap_task(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("<task>") and stripped.endswith("</task>"):
        return stripped[len("<task>") : -len("</task>")].strip("\n")
    return text


@dataclass(slots=True)
class _Pending:
    """The ``tool_use`` blocks of the last assistant message not answered yet."""

    uses: list[ContentBlock] = field(default_factory=list)

    def answer(self, name: str) -> ContentBlock | None:
        for index, use in enumerate(self.uses):
            if use.tool_name == name:
                return self.uses.pop(index)
        return self.uses.pop(0) if self.uses else None


def _result(use: ContentBlock, parts: list[Any]) -> ContentBlock:
    texts = [p["text"] for p in parts if p.get("type") == "text"]
    output = "\n".join(texts)
    others = [p for p in parts if p.get("type") != "text"]
    is_error = output.lstrip().startswith(_FAILED)
    items: list[Any] = [{"type": "text", "text": output}] if output else []
    return tool_result_block(use.tool_use_id, items + others, is_error=is_error)


def _user_turns(
    items: list[Any], pending: _Pending, metadata: dict[str, Any], where: str
) -> Iterator[Turn]:
    """A user message: its tool results (one node), then its other blocks (the next)."""
    results: list[ContentBlock] = []
    others: list[ContentBlock] = []
    notes: list[str] = []
    open_use: ContentBlock | None = None  # the call whose output the next blocks carry
    open_parts: list[Any] = []

    def close() -> None:
        nonlocal open_use, open_parts
        if open_use is not None:
            results.append(_result(open_use, open_parts))
        open_use, open_parts = None, []

    for item in items:
        if isinstance(item, str):
            item = {"type": "text", "text": item}
        need(isinstance(item, Mapping), f"{where}: a content block must be an object")
        if item.get("type") == "text" and isinstance(item.get("text"), str):
            text = strip_environment_details(item["text"])
            if not text.strip():
                if _ENV_OPEN in item["text"]:
                    close()  # the environment details end a result's output
                continue
            if text.strip().startswith(_REMINDERS):
                close()
                notes.append(text.strip())
                continue
            header = _RESULT_HEADER.match(text.lstrip())
            if header is not None:
                close()
                use = pending.answer(header.group(1))
                if use is not None:
                    rest = text.lstrip()[header.end() :].removeprefix("\n")
                    if rest:  # the output is in the header's block
                        results.append(_result(use, [{"type": "text", "text": rest}]))
                    else:  # the output is in the blocks that follow
                        open_use = use
                    continue
            elif open_use is not None:
                open_parts.append({"type": "text", "text": text})
                continue
            others.append(anthropic_block({"type": "text", "text": _unwrap_task(text)}))
            continue
        if open_use is not None and item.get("type") == "image":
            open_parts.append(dict(item))
            continue
        close()
        others.append(anthropic_block(item))
    close()
    if notes:
        metadata["notes"] = notes
    if results:
        yield Turn("user", results, dict(metadata), merge=TOOL_RESULTS)
        metadata = {k: v for k, v in metadata.items() if k != "notes"}
    if others or not results:
        yield Turn("user", others, metadata)


def _iso(ms: Any) -> str | None:
    if isinstance(ms, str) and ms.isdigit():
        ms = int(ms)
    if not isinstance(ms, int) or isinstance(ms, bool) or not 0 <= ms < 10**14:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def _ui_index(ui: Any) -> dict[int, Mapping[str, Any]]:
    """The first ``ui_messages.json`` entry of each ``conversationHistoryIndex``."""
    first: dict[int, Mapping[str, Any]] = {}
    if not isinstance(ui, list):
        return first
    for entry in ui:
        if isinstance(entry, Mapping):
            index = entry.get("conversationHistoryIndex")
            if isinstance(index, int) and not isinstance(index, bool):
                first.setdefault(index, entry)
    return first


def _model(value: Any) -> str | None:
    if isinstance(value, Mapping) and isinstance(value.get("modelId"), str):
        return str(value["modelId"]) or None
    return None


def shape_problem(history: Any) -> str | None:
    """Why a parsed value is not a Cline API history (``None`` if it is one): a list of
    objects with the role ``user`` or ``assistant``. Never raises."""
    if not isinstance(history, list):
        return "not a JSON list of messages"
    for index, message in enumerate(history):
        if not isinstance(message, Mapping):
            return f"[{index}] is not an object"
        if message.get("role") not in ("user", "assistant"):
            return f"[{index}] has no role 'user' or 'assistant'"
    return None


def looks_like(value: Any) -> bool:
    """Whether a parsed value is a Cline API history: :func:`shape_problem` finds nothing, it
    is not empty, and some user text block holds Cline's marks (``<task>``,
    ``<environment_details>`` or a ``] Result:`` header). Never raises."""
    if not value or shape_problem(value) is not None:
        return False
    for message in value:
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for block in content:
            text = block.get("text") if isinstance(block, Mapping) else None
            if isinstance(text, str) and any(sign in text for sign in _SIGNS):
                return True
    return False


def parse_history(
    history: Any, ui_messages: Any = None, task_metadata: Any = None
) -> list[RawMessage]:
    """Read a parsed Cline API history (and, when given, the parsed ``ui_messages.json`` and
    ``task_metadata.json`` of its folder) into a chain of RawMessages.

    Raises:
        TranscriptFormatError: ``history`` is not a list of user/assistant messages (``not a
            cline api history (...)``), or a message cannot be read (``cline: [N]: ...``).
    """
    problem = shape_problem(history)
    if problem is not None:
        raise not_format("a cline api history", problem)
    ui = _ui_index(ui_messages)
    pending = _Pending()
    turns: list[Turn] = []
    for index, message in enumerate(history):
        where = f"cline: [{index}]"
        with located(where):
            metadata: dict[str, Any] = {"source": FORMAT, "index": index}
            for key in ("ts", "metrics"):
                if message.get(key) is not None:
                    metadata[key] = message[key]
            shown = ui.get(index - 1)
            if shown is not None:
                when = _iso(shown.get("ts"))
                if when is not None:
                    metadata["timestamp"] = when
            content = message.get("content")
            if content is None or content == "":
                items: list[Any] = []
            elif isinstance(content, str):
                items = [content]
            else:
                need(isinstance(content, list), f"{where}: content must be a string or a list")
                items = content
            if message["role"] == "assistant":
                blocks = [anthropic_block(item) for item in items]
                pending.uses = [b for b in blocks if b.type == "tool_use"]
                model = _model(message.get("modelInfo")) or (
                    None if shown is None else _model(shown.get("modelInfo"))
                )
                turns.append(Turn("assistant", blocks, metadata, model=model))
            else:
                turns.extend(_user_turns(items, pending, metadata, where))
    first: dict[str, Any] = {}
    if isinstance(task_metadata, Mapping):
        keys = ("model_usage", "environment_history")
        task = {k: task_metadata[k] for k in keys if k in task_metadata}
        if task:
            first["task"] = task
    return list(chain(turns, provider="anthropic", agent_name="cline", first_metadata=first))


def is_task_folder(path: str | Path) -> bool:
    """Whether ``path`` is a folder holding a Cline ``api_conversation_history.json``."""
    folder = Path(path)
    return folder.is_dir() and (folder / API_FILE).is_file()


def _optional_json(path: Path) -> Any:
    """A sidecar file of the task folder, parsed; ``None`` when absent or unreadable (the
    conversation does not depend on it)."""
    try:
        return json.loads(read_regular(path).decode("utf-8"))
    except (OSError, TranscriptFormatError, UnicodeDecodeError, ValueError, RecursionError):
        return None


def _read_path(path: Path, progress: ProgressCallback | None = None) -> ImportResult:
    """Import a Cline task folder or its ``api_conversation_history.json``.

    Read in one step (no progress within the file: ``progress`` is accepted and unused).

    Raises:
        TranscriptFormatError: the file is not a Cline API history (``FILE is not a cline api
            history (...)``), not JSON, or holds a message that cannot be read; the error names
            the API file.
        OSError: the file cannot be read (a folder without ``api_conversation_history.json``).
    """
    api = path / API_FILE if path.is_dir() else path
    history = load_json_file(api)
    problem = shape_problem(history)
    if problem is not None:
        raise not_format("a cline api history", problem, api)
    folder = api.parent
    ui = _optional_json(folder / UI_FILE)
    meta = _optional_json(folder / META_FILE)
    try:
        raw = parse_history(history, ui, meta)
        return build_result(FORMAT, raw, messages=len(history), path=str(path))
    except MerkleMemoryError as exc:
        raise in_file(api, exc) from exc


def _parse_object(history: Any) -> ImportResult:
    return build_result(FORMAT, parse_history(history), messages=len(history))


def sniff(head: bytes) -> bool:
    """Whether a file's first bytes look like a Cline API history: a whole history
    :func:`looks_like` accepts, or the cut head of a JSON list whose text has ``"role"`` and one
    of Cline's marks (``<task>``, ``<environment_details>``, ``] Result:``)."""
    value = head_value(head)
    if value is not None:
        return looks_like(value)
    text = head_text(head)
    if not text.lstrip("\ufeff \t\r\n").startswith("["):
        return False
    return '"role"' in text and any(sign in text for sign in _SIGNS)


IMPORTER: Final = Importer(
    FORMAT,
    _read_path,
    sniff,
    parse=_parse_object,
    shape_problem=shape_problem,
    label="a cline api history",
    sniff_object=looks_like,
)
"""The registry entry of this format: task folders, API files, parsed API histories."""

read_file: Final = IMPORTER.read_file
"""Import a Cline task folder or its ``api_conversation_history.json`` (module docstring;
:meth:`Importer.read_file`): returns an ``ImportResult`` of format :data:`FORMAT`
(``messages`` counts the API messages); raises ``TranscriptFormatError`` naming the API file
for content it cannot read, ``OSError`` for an unreadable file."""

read_object: Final = IMPORTER.read_object
"""Import a parsed ``api_conversation_history.json`` list (:meth:`Importer.read_object`)."""

"""Private: turning a linear list of messages (a request body, a rollout) into RawMessages.

The request-body and rollout importers all see a conversation as one ordered list. They map
each source message to a :class:`Turn` and :func:`chain` links the turns into a chain of
:class:`~merkle_memory.transcripts._common.RawMessage` records, merging the turns that the
common rules (DESIGN section 3) make one node: consecutive tool results answering one
assistant turn (an OpenAI run of ``tool`` messages, Codex ``function_call_output`` items), and,
where a format splits one model response into several items (Codex), its consecutive output
items.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..dag import Bucket, ContentBlock
from ..errors import TranscriptFormatError
from ._common import RawMessage

__all__ = ["TOOL_RESULTS", "Turn", "chain", "need", "other_part", "part_blocks"]

TOOL_RESULTS: Final = "tool_results"
"""Merge key of turns that carry only tool results (one node per consecutive run)."""


@dataclass(slots=True)
class Turn:
    """One message of a linear source, before merging and hashing.

    Attributes:
        role: the hashed role (``"user"`` or ``"assistant"``).
        blocks: content blocks, in order.
        metadata: JSON object kept on the node (not hashed); on a merge the first turn's
            metadata wins and ``merged`` counts the source messages.
        merge: turns next to each other with the same non-``None`` key (and role) form one
            node.
        model: model name for the bucket (not hashed), or ``None``.
    """

    role: str
    blocks: list[ContentBlock]
    metadata: dict[str, Any] = field(default_factory=dict)
    merge: str | None = None
    model: str | None = None


def chain(
    turns: Iterable[Turn],
    *,
    provider: str | None = None,
    agent_name: str | None = None,
    first_metadata: Mapping[str, Any] | None = None,
) -> Iterator[RawMessage]:
    """Link ``turns`` into a chain of RawMessages (keys ``"0"``, ``"1"``, ...), merging.

    Args:
        turns: the source messages in order.
        provider: bucket provider for every node (not hashed).
        agent_name: bucket agent name for every node (not hashed).
        first_metadata: extra metadata for the first record only (request-level data such
            as the system prompt and tool names, which are not nodes).

    Yields:
        RawMessage records; record ``i`` names record ``i - 1`` as its parent. Empty turns
        are passed on (``build_nodes`` drops them and attaches their children upward).
    """
    pending: Turn | None = None
    count = 0
    extra = dict(first_metadata or {})

    def emit(turn: Turn) -> RawMessage:
        nonlocal count
        metadata = dict(turn.metadata)
        if count == 0:
            metadata.update(extra)
        bucket = Bucket(
            "message",
            turn.role,
            tuple(turn.blocks),
            model=turn.model,
            provider=provider,
            agent_name=agent_name,
        )
        record = RawMessage(str(count), str(count - 1) if count else None, bucket, metadata)
        count += 1
        return record

    for turn in turns:
        if (
            pending is not None
            and turn.merge is not None
            and turn.merge == pending.merge
            and turn.role == pending.role
        ):
            pending.blocks.extend(turn.blocks)
            pending.metadata["merged"] = int(pending.metadata.get("merged", 1)) + 1
            if pending.model is None:
                pending.model = turn.model
            continue
        if pending is not None:
            yield emit(pending)
        pending = Turn(turn.role, list(turn.blocks), dict(turn.metadata), turn.merge, turn.model)
    if pending is not None:
        yield emit(pending)


def need(condition: bool, message: str) -> None:
    """Raise :class:`TranscriptFormatError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise TranscriptFormatError(message)


def other_part(kind: str, part: Mapping[str, Any]) -> ContentBlock:
    """A block for a content part no rule maps: its type, and every other key in ``content``."""
    return ContentBlock(kind, content={k: v for k, v in part.items() if k != "type"})


def part_blocks(
    content: Any,
    where: str,
    part_block: Callable[[str, Mapping[str, Any], str], ContentBlock | None],
    *,
    text_types: Collection[str] = ("text",),
    not_a_list: str = "content must be a string or a list of parts",
    no_type: str = "a content part needs a type",
) -> list[ContentBlock]:
    """The blocks of a message content in the OpenAI shape (Chat Completions, Responses API
    items, Letta messages): a string or a list of typed parts.

    ``None`` or ``""`` gives no block and a string one ``text`` block. In a list, each part
    must be an object with a non-empty string ``type``; a part whose type is in
    ``text_types`` gives a ``text`` block (none for an empty text), any other part
    ``part_block(type, part, where)`` (``None``: no block).

    Raises:
        TranscriptFormatError: ``content`` of another shape (``"<where>: <not_a_list>"``), a
            part that is not an object or has no type (``"<where>: <no_type>"``), a text part
            without a string ``text``, or as ``part_block``.
    """
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [ContentBlock("text", text=content)]
    need(isinstance(content, list), f"{where}: {not_a_list}")
    blocks: list[ContentBlock] = []
    for part in content:
        need(isinstance(part, Mapping), f"{where}: a content part must be an object")
        kind = part.get("type")
        need(isinstance(kind, str) and bool(kind), f"{where}: {no_type}")
        if kind in text_types:
            text = part.get("text")
            need(isinstance(text, str), f"{where}: a text part needs a string text")
            block = ContentBlock("text", text=text) if text else None
        else:
            block = part_block(kind, part, where)
        if block is not None:
            blocks.append(block)
    return blocks

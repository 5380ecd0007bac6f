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

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..dag import Bucket, ContentBlock
from ..errors import TranscriptFormatError
from ._common import ImportResult, RawMessage, build_nodes
from ._located import not_format

__all__ = ["TOOL_RESULTS", "Turn", "build_result", "chain", "need", "text_blocks"]

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


def text_blocks(content: Any, where: str) -> list[ContentBlock]:
    """Blocks of a message content that is a string (one text block) or ``None`` (none).

    Raises:
        TranscriptFormatError: ``content`` is neither.
    """
    if content is None:
        return []
    need(isinstance(content, str), f"{where}: content must be a string or a list of parts")
    return [ContentBlock("text", text=content)] if content else []


def build_result(
    format_name: str,
    raw: Iterable[RawMessage],
    messages: int,
    skipped: int = 0,
    path: str | None = None,
) -> ImportResult:
    """Run :func:`~merkle_memory.transcripts._common.build_nodes` and wrap its result.

    Args:
        format_name: the format name for :attr:`ImportResult.format`.
        raw: the records.
        messages: source message records read.
        skipped: source records that are not messages.
        path: the file read, or ``None``.
    """
    built = build_nodes(raw)
    return ImportResult(
        format_name,
        built.nodes,
        messages,
        skipped,
        dropped=built.dropped,
        duplicates=built.duplicates,
        detached=built.detached,
        path=path,
    )


def read_request_body(
    format_name: str,
    label: str,
    shape_problem: Callable[[Any], str | None],
    parse_request: Callable[[Any], Iterable[RawMessage]],
    body: Any,
    path: Path | None,
) -> ImportResult:
    """Check a parsed request body's shape, parse it and build its nodes (the shared step of
    the Anthropic and OpenAI importers, whose bodies both hold ``messages[]``).

    Args:
        format_name: the format name for :attr:`ImportResult.format`.
        label: what the body should be, for the error (``"an openai request body"``).
        shape_problem: the format's shape check (``None`` when the body fits).
        parse_request: the format's parser, body -> records.
        body: the parsed JSON value.
        path: the file it came from, or ``None``.

    Raises:
        TranscriptFormatError: the shape check fails (naming ``path``), or as the parser.
    """
    problem = shape_problem(body)
    if problem is not None:
        raise not_format(label, problem, path)
    raw = parse_request(body)
    return build_result(
        format_name, raw, messages=len(body["messages"]), path=None if path is None else str(path)
    )

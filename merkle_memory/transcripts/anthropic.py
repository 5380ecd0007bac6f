"""Importer for Anthropic Messages API request bodies (``POST /v1/messages``).

A request body re-sends the whole conversation, so its ``messages[]`` is read as one chain
(DESIGN section 3, common importer rules):

- Each ``user`` / ``assistant`` message is a node; string content is one ``text`` block;
  content blocks are mapped exactly as the Claude Code importer maps them (Claude Code
  transcripts hold the same blocks), so a session and the request bodies of its turns give the
  same node ids: ``tool_use`` -> ``tool_use_id``/``tool_name``/``tool_input``, ``tool_result``
  -> ``tool_result_id``/``tool_output`` (a list of parts: text joined with ``"\\n"``, other
  parts in ``content``)/``is_error``, ``thinking`` -> ``thinking`` (its signature is never
  hashed). ``cache_control`` and ``citations`` are ignored.
- Tool results are nodes of their own: the ``tool_result`` blocks of a user message form one
  ``user`` node (the results of the parallel calls of one assistant turn), and any other
  blocks of that message (text the harness appended, a user interjection) form the next node.
  Claude Code writes those as separate lines; the API receives them merged. Tool results in
  consecutive user messages join one node too.
- Top-level ``system`` and ``tools`` are request metadata, not nodes: the system text and the
  tool names are kept in the metadata of the first node (``request``), with the ``model``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from ..dag import ContentBlock
from ..errors import MerkleMemoryError, TranscriptFormatError
from ._blocks import anthropic_block
from ._chain import TOOL_RESULTS, Turn, chain, need
from ._common import RawMessage
from ._importer import Importer
from ._sniff import ANTHROPIC_BLOCK_TYPES, body_problem, head_value, request_signs

__all__ = [
    "FORMAT",
    "IMPORTER",
    "anthropic_block",
    "looks_like",
    "parse_request",
    "read_file",
    "read_object",
    "shape_problem",
    "sniff",
]

FORMAT: Final = "anthropic"


def _message_turns(index: int, message: Any) -> Iterator[Turn]:
    where = f"anthropic: messages[{index}]"
    need(isinstance(message, Mapping), f"{where} is not an object")
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise TranscriptFormatError(f"{where}: unknown role {role!r}")
    content = message.get("content")
    if content is None:
        items: list[Any] = []
    elif isinstance(content, str):
        items = [content] if content else []
    elif isinstance(content, list):
        items = content
    else:
        raise TranscriptFormatError(f"{where}: content must be a string or a list of blocks")
    try:
        blocks = [anthropic_block(item) for item in items]
    except MerkleMemoryError as exc:
        raise TranscriptFormatError(f"{where}: {exc}") from exc
    metadata: dict[str, Any] = {"index": index}
    if role == "assistant":
        yield Turn("assistant", blocks, metadata)
        return
    run: list[ContentBlock] = []
    for block in blocks:  # split into runs: tool results / everything else
        if run and (block.type == "tool_result") != (run[0].type == "tool_result"):
            merge = TOOL_RESULTS if run[0].type == "tool_result" else None
            yield Turn("user", run, dict(metadata), merge=merge)
            run = []
        run.append(block)
    merge = TOOL_RESULTS if run and run[0].type == "tool_result" else None
    yield Turn("user", run, metadata, merge=merge)


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        parts = [
            b["text"]
            for b in system
            if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
        return "\n".join(p for p in parts if p)
    return ""


def parse_request(body: Any) -> list[RawMessage]:
    """Read a Messages API request body into a chain of RawMessages.

    Args:
        body: the parsed JSON body, an object with a ``messages`` array.

    Returns:
        One record per node-to-be (keys ``"0"``, ``"1"``, ...), for
        :func:`~merkle_memory.transcripts._common.build_nodes`.

    Raises:
        TranscriptFormatError: the body is not an object with a ``messages`` list, a message
            has a role other than user/assistant, or a block cannot be read.
    """
    need(isinstance(body, Mapping), "anthropic: a request body must be a JSON object")
    messages = body.get("messages")
    need(isinstance(messages, list), "anthropic: a request body needs a 'messages' list")
    turns = [turn for i, message in enumerate(messages) for turn in _message_turns(i, message)]
    request: dict[str, Any] = {"format": FORMAT}
    if isinstance(body.get("model"), str):
        request["model"] = body["model"]
        for turn in turns:
            if turn.role == "assistant":
                turn.model = None  # the request's model answers next, not necessarily before
    system = _system_text(body.get("system"))
    if system:
        request["system"] = system
    tools = body.get("tools")
    if isinstance(tools, list):
        names = [
            t["name"] for t in tools if isinstance(t, Mapping) and isinstance(t.get("name"), str)
        ]
        if names:
            request["tools"] = names
    return list(chain(turns, provider="anthropic", first_metadata={"request": request}))


def shape_problem(body: Any) -> str | None:
    """Why a parsed value is not a Messages API request body, or ``None`` if it may be.

    The check an explicit ``--format anthropic`` makes before reading (a body
    :func:`looks_like` accepts always passes): an object with a ``messages`` list, no Letta
    agent key, no message with an OpenAI-only role (``system``, ``developer``, ``tool``,
    ``function``) or key (``tool_calls``, ``tool_call_id``). Other malformed messages pass,
    for the reader to name. Never raises.
    """
    problem = body_problem(body)
    if problem is not None:
        return problem
    messages = body["messages"]
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if role in ("system", "developer", "tool", "function"):
            return f"messages[{index}] has the role {role!r}, an OpenAI role"
        for openai_key in ("tool_calls", "tool_call_id"):
            if openai_key in message:
                return f"messages[{index}] has {openai_key!r}, an OpenAI message key"
    return None


def looks_like(body: Any) -> bool:
    """Whether a parsed JSON value looks like a Messages API request body.

    True for an object with a ``messages`` list of objects whose roles are all ``user`` or
    ``assistant`` and either a top-level ``system`` / ``max_tokens``, or some content block of
    an Anthropic-only type (``tool_use``, ``tool_result``, ``thinking``, ...). Never raises.
    """
    if not isinstance(body, Mapping) or not isinstance(body.get("messages"), list):
        return False
    messages = body["messages"]
    if not messages or not all(isinstance(m, Mapping) for m in messages):
        return False
    if not all(m.get("role") in ("user", "assistant") for m in messages):
        return False
    if any(k in m for m in messages for k in ("tool_calls", "tool_call_id")):
        return False
    if "system" in body or "max_tokens" in body or "anthropic_version" in body:
        return True
    return any(
        isinstance(b, Mapping) and b.get("type") in ANTHROPIC_BLOCK_TYPES
        for m in messages
        if isinstance(m.get("content"), list)
        for b in m["content"]
    )


def sniff(head: bytes) -> bool:
    """Whether a file's first bytes look like a Messages API request body: a whole document
    :func:`looks_like` accepts, or the cut head of a JSON object with ``"messages"`` in which
    Anthropic-only text outnumbers OpenAI-only text."""
    value = head_value(head)
    if value is not None:
        return looks_like(value)
    signs = request_signs(head)
    return signs is not None and signs[1] > signs[0]


IMPORTER: Final = Importer.for_document(
    FORMAT, "an anthropic request body", parse_request, shape_problem, sniff, looks_like
)
"""The registry entry of this format."""

read_file: Final = IMPORTER.read_file
"""Import a request body stored as a JSON file (:meth:`Importer.read_file`)."""

read_object: Final = IMPORTER.read_object
"""Import a parsed request body (:meth:`Importer.read_object`)."""

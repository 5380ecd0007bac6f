"""Importer for OpenAI Chat Completions request bodies (``POST /v1/chat/completions``).

A request body re-sends the whole conversation, so its ``messages[]`` is read as one chain
(DESIGN section 3, common importer rules):

- ``user`` and ``assistant`` messages are nodes. Content is a string (one ``text`` block) or a
  list of parts: ``text`` parts become ``text`` blocks, ``image_url`` parts become ``image``
  blocks (a ``data:<type>;base64,<data>`` URL is split into ``media_type`` and
  ``image_base64``, as an Anthropic base64 image is), other parts keep their type with the
  rest of the part in ``content``.
- An assistant's ``tool_calls`` become ``tool_use`` blocks after its text:
  ``tool_use_id`` = the call id, ``tool_name`` = ``function.name``, ``tool_input`` = the
  ``function.arguments`` JSON text parsed (a non-object is kept as
  ``{"arguments": "<raw text>"}``). The legacy ``function_call`` is read the same way, with no
  id. A ``refusal`` becomes a ``refusal`` block holding the text.
- ``tool`` messages (and legacy ``function`` messages) become ``tool_result`` blocks
  (``tool_result_id`` = ``tool_call_id``); a run of consecutive tool messages is one ``user``
  node, the results of the parallel calls of one assistant turn.
- ``system`` and ``developer`` messages are request metadata, not nodes: their text is kept
  in the metadata of the first node (``system``), with the request's ``model`` and the names
  of its ``tools``.

Because tool results arrive as strings and carry no error flag, an Anthropic request of the
same conversation gives the same node ids when its tool results are strings (or lists of text
parts) and not marked ``is_error``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from ..dag import ContentBlock
from ..errors import TranscriptFormatError
from ._chain import TOOL_RESULTS, Turn, chain, need, other_part, part_blocks
from ._common import RawMessage, tool_arguments, tool_result_block
from ._importer import Importer
from ._located import located
from ._sniff import ANTHROPIC_BLOCK_TYPES, body_problem, head_value, request_signs

__all__ = [
    "FORMAT",
    "IMPORTER",
    "image_block",
    "looks_like",
    "parse_request",
    "read_file",
    "read_object",
    "request_turns",
    "shape_problem",
    "sniff",
]

FORMAT: Final = "openai"
_DATA_URL: Final = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)
_NODE_ROLES: Final = ("user", "assistant", "tool", "function")
_META_ROLES: Final = ("system", "developer")
_OPENAI_PART_TYPES: Final = ("image_url", "input_audio", "refusal", "file")


def image_block(url: Any, where: str) -> ContentBlock:
    """An ``image`` block for an image URL (a base64 ``data:`` URL is split into its parts)."""
    need(isinstance(url, str), f"{where}: image_url.url must be a string")
    match = _DATA_URL.fullmatch(url)
    if match:
        return ContentBlock("image", media_type=match.group(1), image_base64=match.group(2))
    return ContentBlock("image", image_url=url)


def _part_block(kind: str, part: Mapping[str, Any], where: str) -> ContentBlock | None:
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, Mapping) else image
        return image_block(url, where)
    if kind == "refusal":
        refusal = part.get("refusal")
        need(isinstance(refusal, str), f"{where}: a refusal part needs a string refusal")
        return ContentBlock("refusal", text=refusal) if refusal else None
    return other_part(kind, part)


def _content_blocks(content: Any, where: str) -> list[ContentBlock]:
    return part_blocks(
        content,
        where,
        _part_block,
        text_types=("text", "input_text", "output_text"),
        no_type="a content part needs a string type",
    )


def _call_block(call: Any, where: str, legacy: bool = False) -> ContentBlock:
    need(isinstance(call, Mapping), f"{where}: a tool call must be an object")
    function = call if legacy else call.get("function")
    need(isinstance(function, Mapping), f"{where}: a tool call needs a function object")
    name = function.get("name") or ""
    call_id = "" if legacy else (call.get("id") or "")
    need(isinstance(name, str), f"{where}: function.name must be a string")
    need(isinstance(call_id, str), f"{where}: a tool call id must be a string")
    return ContentBlock(
        "tool_use",
        tool_use_id=call_id,
        tool_name=name,
        tool_input=tool_arguments(function.get("arguments")),
    )


def _system_text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.text for b in _content_blocks(content, where) if b.text)
    need(content is None, f"{where}: content must be a string or a list of parts")
    return ""


def _message_turn(index: int, message: Any, system: list[str]) -> Turn | None:
    """The turn of ``messages[index]``, or ``None`` for a system/developer message (whose text
    goes to ``system``)."""
    where = f"openai: messages[{index}]"
    need(isinstance(message, Mapping), f"{where} is not an object")
    role = message.get("role")
    if role in _META_ROLES:
        system.append(_system_text(message.get("content"), where))
        return None
    if role not in _NODE_ROLES:
        raise TranscriptFormatError(f"{where}: unknown role {role!r}")
    metadata: dict[str, Any] = {"index": index}
    if isinstance(message.get("name"), str):
        metadata["name"] = message["name"]
    if role in ("tool", "function"):
        call_id = message.get("tool_call_id") if role == "tool" else message.get("name")
        need(isinstance(call_id, str), f"{where}: a tool message needs a tool_call_id")
        block = tool_result_block(call_id, message.get("content"))
        return Turn("user", [block], metadata, merge=TOOL_RESULTS)
    blocks = _content_blocks(message.get("content"), where)
    if role == "assistant":
        reasoning = message.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            blocks.insert(0, ContentBlock("thinking", thinking=reasoning))
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal:
            blocks.append(ContentBlock("refusal", text=refusal))
        calls = message.get("tool_calls") or []
        need(isinstance(calls, list), f"{where}: tool_calls must be a list")
        blocks.extend(_call_block(call, where) for call in calls)
        if message.get("function_call") is not None:
            blocks.append(_call_block(message["function_call"], where, legacy=True))
    return Turn(str(role), blocks, metadata)


def request_turns(messages: Any, system: list[str]) -> Iterator[Turn]:
    """The turns of a Chat Completions ``messages`` array (module docstring rules).

    Args:
        messages: the parsed ``messages`` array.
        system: a list that receives the text of each system/developer message, in order.

    Raises:
        TranscriptFormatError: ``messages`` is not a list of objects with a known role, or a
            message has content of the wrong shape or a value with no JSON meaning (the text
            starts ``openai: messages[INDEX]: ``).
    """
    need(isinstance(messages, list), "openai: 'messages' must be a list")
    for index, message in enumerate(messages):
        with located(f"openai: messages[{index}]"):
            turn = _message_turn(index, message, system)
        if turn is not None:
            yield turn


def _tool_names(tools: Any) -> list[str]:
    names: list[str] = []
    if isinstance(tools, list):
        for tool in tools:
            if not isinstance(tool, Mapping):
                continue
            function = tool.get("function")
            name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
            if isinstance(name, str):
                names.append(name)
    return names


def parse_request(body: Any) -> list[RawMessage]:
    """Read a Chat Completions request body into a chain of RawMessages.

    Args:
        body: the parsed JSON body, an object with a ``messages`` array.

    Returns:
        One record per node-to-be, keys ``"0"``, ``"1"``, ...; pass them to
        :func:`~merkle_memory.transcripts._common.build_nodes`.

    Raises:
        TranscriptFormatError: the body is not an object with a ``messages`` list, or any
            message cannot be read (module docstring).
    """
    need(isinstance(body, Mapping), "openai: a request body must be a JSON object")
    need("messages" in body, "openai: a request body needs 'messages'")
    system: list[str] = []
    turns = list(request_turns(body["messages"], system))
    model = body.get("model") if isinstance(body.get("model"), str) else None
    request: dict[str, Any] = {"format": FORMAT}
    if model:
        request["model"] = model
    if any(system):
        request["system"] = "\n".join(s for s in system if s)
    names = _tool_names(body.get("tools"))
    if names:
        request["tools"] = names
    return list(chain(turns, provider="openai", first_metadata={"request": request}))


def _openai_feature(message: Mapping[str, Any]) -> bool:
    """Whether a message has a feature only Chat Completions has (a ``system``/``developer``/
    ``tool``/``function`` role, ``tool_calls``, ``tool_call_id``, ``function_call``, or an
    ``image_url``/``input_audio``/``refusal``/``file`` part)."""
    if message.get("role") in ("system", "developer", "tool", "function"):
        return True
    if any(k in message for k in ("tool_calls", "tool_call_id", "function_call")):
        return True
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(part, Mapping) and part.get("type") in _OPENAI_PART_TYPES for part in content
    )


def looks_like(body: Any) -> bool:
    """Whether a parsed JSON document looks like a Chat Completions request body.

    True for an object with a ``messages`` list in which some message has an OpenAI-only
    feature (a ``system``/``developer``/``tool`` role, ``tool_calls``, ``tool_call_id``, an
    ``image_url`` part) or, with none of those, no Anthropic-only feature (a top-level
    ``system``, content blocks of types ``tool_use``/``tool_result``/``thinking``).
    """
    if not isinstance(body, Mapping) or not isinstance(body.get("messages"), list):
        return False
    messages = [m for m in body["messages"] if isinstance(m, Mapping)]
    if not messages or len(messages) != len(body["messages"]):
        return False
    if any(_openai_feature(message) for message in messages):
        return True
    if "system" in body:
        return False
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                if isinstance(part, Mapping) and part.get("type") not in ("text", None):
                    return False
    return all(m.get("role") in ("user", "assistant") for m in messages)


def shape_problem(body: Any) -> str | None:
    """Why a parsed value is not a Chat Completions request body, or ``None`` if it may be.

    The check an explicit ``--format openai`` makes before reading (a body
    :func:`looks_like` accepts always passes): an object with a ``messages`` list, no Letta
    agent key, and, unless some message has an OpenAI-only feature, no Anthropic-only feature
    (a top-level ``system`` or ``anthropic_version``, a block of an Anthropic-only type).
    Malformed messages pass, for the reader to name. Never raises.
    """
    problem = body_problem(body)
    if problem is not None:
        return problem
    messages = body["messages"]
    objects = [(i, m) for i, m in enumerate(messages) if isinstance(m, Mapping)]
    if any(_openai_feature(message) for _, message in objects):
        return None
    for top in ("system", "anthropic_version"):
        if top in body:
            return f"it has a top-level {top!r}, an Anthropic request key"
    for index, message in objects:
        content = message.get("content")
        for part in content if isinstance(content, list) else ():
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind in ANTHROPIC_BLOCK_TYPES:
                return f"messages[{index}] has a {kind!r} block, an Anthropic content type"
    return None


def sniff(head: bytes) -> bool:
    """Whether a file's first bytes look like a Chat Completions request body: a whole
    document :func:`looks_like` accepts, or the cut head of a JSON object with ``"messages"``
    holding some OpenAI-only text, at least as often as Anthropic-only text. A cut head with
    neither says nothing yet: detection reads on (``transcripts.SNIFF_LIMIT``), and names
    this format only if nothing else recognises the object by then."""
    value = head_value(head)
    if value is not None:
        return looks_like(value)
    signs = request_signs(head)
    return signs is not None and signs[0] > 0 and signs[0] >= signs[1]


IMPORTER: Final = Importer.for_document(
    FORMAT, "an openai request body", parse_request, shape_problem, sniff, looks_like
)
"""The registry entry of this format."""

read_file: Final = IMPORTER.read_file
"""Import a request body stored as a JSON file (:meth:`Importer.read_file`)."""

read_object: Final = IMPORTER.read_object
"""Import a parsed request body (:meth:`Importer.read_object`)."""

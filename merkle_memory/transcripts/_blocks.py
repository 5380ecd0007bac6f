"""Private: Anthropic Messages content blocks to :class:`~merkle_memory.dag.ContentBlock`.

Shared by the Claude Code importer (whose lines hold the API's ``message`` objects) and the
Anthropic request importer, so a session and the request bodies of its turns give the same
blocks, hence the same node ids (issue 6 item 2). Mapping (keys of a content block ->
``ContentBlock`` fields):

- ``text`` -> ``text``;
- ``image`` with a ``base64`` source -> ``image_base64`` and ``media_type``, with a ``url``
  source -> ``image_url`` (other sources kept in ``content``);
- ``tool_use`` / ``server_tool_use`` / ``mcp_tool_use``: ``id`` -> ``tool_use_id``, ``name``
  -> ``tool_name``, ``input`` -> ``tool_input`` (see ``_common.tool_arguments``);
- ``tool_result``: ``tool_use_id`` -> ``tool_result_id``, string ``content`` ->
  ``tool_output``, a list -> text parts joined with ``"\\n"`` in ``tool_output`` and other
  parts in ``content``, ``is_error`` kept;
- other ``*_tool_result`` types: ``tool_use_id`` -> ``tool_result_id``, ``content`` ->
  ``content``;
- ``thinking``: ``thinking``, ``signature`` -> ``thinking_signature``;
- request decorations (``cache_control``, ``citations``, ``caller``) are not kept;
- a block of any other type keeps its ``type``, a string ``text`` as ``text``, and every
  other key in ``content`` (an object), so nothing of it is lost from the hash.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any, Final

from ..dag import ContentBlock
from ..errors import TranscriptFormatError
from ._common import replace_lone_surrogates, tool_arguments, tool_result_block

__all__ = ["anthropic_block", "clean_surrogates"]

_DROPPED_KEYS: Final = frozenset({"type", "cache_control", "citations", "caller"})
_TOOL_USE_TYPES: Final = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


def clean_surrogates(value: Any) -> Any:
    """A copy of a parsed JSON value with every lone surrogate in its strings (keys included)
    replaced by U+FFFD; other values are returned as they are. Walked with an explicit stack,
    so no depth raises ``RecursionError`` (``value`` is a parsed document: it has no cycle)."""
    if isinstance(value, str):
        return replace_lone_surrogates(value)
    if not isinstance(value, list | dict):
        return value
    root: Any = [] if isinstance(value, list) else {}
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, out = stack.pop()
        items = enumerate(source) if type(out) is list else source.items()
        for key, item in items:
            if isinstance(item, str):
                item = replace_lone_surrogates(item)
            elif isinstance(item, list | dict):
                copy: Any = [] if isinstance(item, list) else {}
                stack.append((item, copy))
                item = copy
            if type(out) is list:
                out.append(item)
            else:
                out[replace_lone_surrogates(str(key))] = item
    return root


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


_parsed: Final = partial(ContentBlock.from_parsed, surrogate_free=True)


def anthropic_block(item: Any, *, owned: bool = False) -> ContentBlock:
    """Map one Anthropic Messages content block (or a bare string) to a ContentBlock.

    Args:
        item: a parsed content block object, or a string (one text block).
        owned: ``True`` when ``item`` is the caller's own fresh ``json.loads`` value holding
            no lone surrogate (see :meth:`ContentBlock.from_parsed`), given up to the block:
            its values are then checked but not copied. The blocks are equal either way.

    Returns:
        The block, mapped as the module docstring says.

    Raises:
        TranscriptFormatError: not an object or a string, no string ``type``, a field of the
            wrong type, or a value with no JSON meaning.
    """
    block = _parsed if owned else ContentBlock
    if type(item) is not dict:  # else a parsed object: the common case
        if isinstance(item, str):
            return block("text", text=item)
        if not isinstance(item, Mapping):
            raise TranscriptFormatError(f"a content block must be an object: {item!r:.80}")
    kind = item.get("type")
    if not isinstance(kind, str) or not kind:
        raise TranscriptFormatError("a content block needs a string 'type'")
    if kind == "text":
        return block("text", text=_str(item, "text"))
    if kind in _TOOL_USE_TYPES:
        return block(
            kind,
            tool_use_id=_str(item, "id"),
            tool_name=_str(item, "name"),
            # An object goes straight to ContentBlock, which copies and checks it once.
            tool_input=raw
            if type(raw := item.get("input")) is dict or isinstance(raw, Mapping)
            else tool_arguments(raw),
        )
    if kind == "tool_result":
        is_error = item.get("is_error")
        return tool_result_block(
            _str(item, "tool_use_id"), item.get("content"), is_error=is_error is True, owned=owned
        )
    if kind == "thinking":
        return block(
            "thinking",
            thinking=_str(item, "thinking"),
            thinking_signature=_str(item, "signature"),
        )
    if kind == "image":
        source = item.get("source")
        if isinstance(source, Mapping) and source.get("type") == "base64":
            return block(
                "image", image_base64=_str(source, "data"), media_type=_str(source, "media_type")
            )
        if isinstance(source, Mapping) and source.get("type") == "url":
            return block("image", image_url=_str(source, "url"))
        return block("image", content=_rest(item))
    if kind.endswith("_tool_result"):
        return block(kind, tool_result_id=_str(item, "tool_use_id"), content=item.get("content"))
    text = item.get("text")
    if isinstance(text, str):
        return block(kind, text=text, content=_rest(item, "text"))
    return block(kind, content=_rest(item))

"""Content projection: the part of a turn that a node hash covers (DESIGN section 3).

Agent harnesses inject noise into conversation turns: ``<system-reminder>`` blocks, slash-command
wrappers, date banners, ``replace_all: false`` defaults, thinking signatures. The projection
removes that noise before hashing, so one conversation keeps its node ids however the harness
dressed it up. The rules follow tapes ``pkg/merkle/projection.go`` (``ProjectContent``); see
``research/tapes.md`` section 2 of the shared design notes.

Per block, in this order:

1. ``text`` (when non-empty): :func:`strip_tags`, then :func:`normalize_whitespace`; if the
   result is empty the whole block is dropped, whatever its type.
2. ``tool_input``: :func:`prune_tool_input` (false, ``""``, 0, ``None`` and ``[]`` removed
   recursively through nested objects, never inside lists; an emptied nested object removed).
3. ``thinking_signature`` removed (the ``thinking`` text itself is left as it is).
4. ``tool_output``: tags stripped and whitespace normalized; the block is always kept.

:func:`project_content` never mutates its input.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ._json import MAX_VALUE_DEPTH, depth_text
from .blocks import ContentBlock
from .errors import ContentBlockError

__all__ = [
    "GO_SPACE",
    "HARNESS_TAGS",
    "normalize_whitespace",
    "project_content",
    "project_text",
    "prune_tool_input",
    "strip_tags",
]

HARNESS_TAGS: Final[tuple[str, ...]] = (
    "system-reminder",
    "command-name",
    "command-message",
    "command-args",
    "local-command-stdout",
    "local-command-stderr",
    "local-command-caveat",
    "session",
    "conversation",
    "new-diagnostics",
    "task-notification",
    "status",
    "summary",
    "transcript",
    "event",
    "tool-use-id",
    "output-file",
    "task-id",
    "environment_context",
)
"""Harness tags stripped from text, in the order they are processed (DESIGN section 3, MUST;
tapes ``HarnessTags`` as of v0.28, which added ``environment_context``)."""

GO_SPACE: Final = (
    "\t\n\v\f\r \u0085\u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
"""The characters Go's ``unicode.IsSpace`` accepts, used by :func:`normalize_whitespace` to trim
both ends. Unlike Python's ``str.strip()`` it does not contain U+001C..U+001F."""


def strip_tags(text: str, tags: Sequence[str] = HARNESS_TAGS) -> str:
    """Remove harness-tag sections from ``text`` (tapes ``stripHarnessTags``).

    For each tag, in the order given: find the literal, case-sensitive ``<tag>``, cut from it
    through the first ``</tag>`` after it, and search again from the start of the rewritten
    text. An open tag with no close removes the rest of the text. ``<tag attr="x">`` is not a
    match, and a stray ``</tag>`` with no open tag before it stays. Same-name nesting
    ``<a><a>x</a>y</a>`` leaves ``y</a>``.

    Args:
        text: any string.
        tags: tag names without angle brackets; default :data:`HARNESS_TAGS`.

    Returns:
        The text with every complete or unclosed tag section removed (whitespace untouched).

    Raises:
        ContentBlockError: ``text`` is not a ``str``, or ``tags`` is a string, not
            iterable, or holds something other than a non-empty ``str``.
    """
    if type(text) is not str and not isinstance(text, str):
        raise ContentBlockError(f"strip_tags takes a str, not {type(text).__name__}")
    if tags is not HARNESS_TAGS and type(tags) is not tuple:
        # a bare str would be one tag per letter; a generator would be used up by the check
        if isinstance(tags, str | bytes) or not isinstance(tags, Iterable):
            raise ContentBlockError(f"tags must be a sequence of str, not {tags!r:.60}")
        tags = tuple(tags)
    if tags is not HARNESS_TAGS and not all(type(tag) is str and tag for tag in tags):
        raise ContentBlockError(f"tags must be non-empty str, not {tags!r:.60}")
    if "<" not in text:
        return text  # no tag can match, and cutting never adds characters
    for tag in tags:
        opener = f"<{tag}>"
        closer = f"</{tag}>"
        start = 0
        while True:
            i = text.find(opener, start)
            if i < 0:
                break
            j = text.find(closer, i + len(opener))
            if j < 0:
                text = text[:i]
                break
            text = text[:i] + text[j + len(closer) :]
            # Nothing before i matched, so a new match can only start where the cut joined two
            # pieces: resuming a little before i is the same as searching from the start.
            start = max(0, i - len(opener) + 1)
    return text


def normalize_whitespace(text: str) -> str:
    """Normalize whitespace as tapes does before hashing.

    CRLF becomes LF (a lone CR stays), spaces and tabs before a newline are removed, runs of
    newlines become one, and both ends are trimmed of the :data:`GO_SPACE` characters (Go
    ``strings.TrimSpace``; U+001C..U+001F are kept, unlike ``str.strip()``).

    Args:
        text: any string.

    Returns:
        The normalized string (possibly empty).

    Raises:
        ContentBlockError: ``text`` is not a ``str``.
    """
    if type(text) is not str and not isinstance(text, str):
        raise ContentBlockError(f"normalize_whitespace takes a str, not {type(text).__name__}")
    if "\n" in text:  # every step but the trim needs a newline
        if "\r" in text:
            text = text.replace("\r\n", "\n")
        # One split does the other two steps: each line but the last loses its trailing
        # spaces and tabs, and a run of newlines is a run of lines left empty between two
        # others (the first line and the last stay, even empty: "\n\nx" -> "\nx").
        lines = text.split("\n")
        last = lines.pop()
        kept = [lines[0].rstrip(" \t")]
        for line in lines[1:]:
            line = line.rstrip(" \t")
            if line:
                kept.append(line)
        kept.append(last)
        text = "\n".join(kept)
    return text.strip(GO_SPACE)


def project_text(text: str) -> str:
    """What the projection makes of a ``text`` or ``tool_output``: ``normalize_whitespace(
    strip_tags(text))`` with the default :data:`HARNESS_TAGS`, the tags stripped only from a
    text with a ``<`` (the same result).

    Raises:
        ContentBlockError: ``text`` is not a ``str``.
    """
    if type(text) is not str:
        return normalize_whitespace(strip_tags(text))  # the checks, and a subclass's methods
    if "<" in text:
        text = strip_tags(text)
    return normalize_whitespace(text)


def _is_zero(value: Any) -> bool:
    if value is None or value is False:
        return True
    if isinstance(value, str):
        return value == ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value == 0
    return isinstance(value, list | tuple) and len(value) == 0


def prune_tool_input(tool_input: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of ``tool_input`` without zero values (tapes ``pruneZeroValues``).

    Removed: ``None``, ``False``, ``""``, numeric zero and empty lists; nested objects are
    pruned recursively and removed when empty afterwards (also when they were empty already).
    Lists are kept as they are: nothing inside a list is pruned. The nested objects are
    walked with an explicit stack, not recursion, so no depth raises ``RecursionError``.

    Args:
        tool_input: a JSON object (``str`` keys), nested at most ``MAX_VALUE_DEPTH`` (508)
            levels, the limit of every value a ``ContentBlock`` holds.

    Returns:
        A new dict; the input is not modified. Values that are lists are shared, not copied.

    Raises:
        ContentBlockError: objects nested deeper than ``MAX_VALUE_DEPTH`` (a cyclic value
            included).
    """
    out: dict[str, Any] = {}
    stack: list[tuple[Mapping[str, Any], dict[str, Any], int]] = []
    nested: list[tuple[dict[str, Any], str, dict[str, Any]]] = []  # (parent, key, copy)
    source, copy, depth = tool_input, out, 1
    while True:
        for key, value in source.items():
            t = type(value)
            if t is str:
                if value:
                    copy[key] = value
            elif t is dict or (t is not list and isinstance(value, Mapping)):
                if depth >= MAX_VALUE_DEPTH:
                    raise ContentBlockError(depth_text("tool_input"))
                child: dict[str, Any] = {}
                copy[key] = child  # in its place; removed below if it ends up empty
                nested.append((copy, key, child))
                stack.append((value, child, depth + 1))
            elif not _is_zero(value):
                copy[key] = value
        if not stack:
            break
        source, copy, depth = stack.pop()
    # A nested object is made after its parent, so in reverse order every object is final
    # (its own emptied children already removed) when its emptiness is decided.
    for parent, key, child in reversed(nested):
        if not child:
            del parent[key]
    return out


def project_content(
    blocks: Sequence[ContentBlock], tags: Sequence[str] = HARNESS_TAGS
) -> list[ContentBlock]:
    """Project content blocks to their hashed form (DESIGN section 3, tapes ``ProjectContent``).

    Args:
        blocks: :class:`~merkle_memory.dag.ContentBlock` values, in order.
        tags: harness tags to strip from ``text`` and ``tool_output``; default
            :data:`HARNESS_TAGS`.

    Returns:
        A new list of new blocks in the same order, minus every block whose non-empty text
        projects to empty. The input blocks are never modified (they are frozen; unchanged
        blocks may be returned as they are).

    Raises:
        ContentBlockError: ``blocks`` is a ``str``/``bytes`` or not iterable, or holds
            something other than a ``ContentBlock``.
    """
    if (type(blocks) is not tuple and type(blocks) is not list) and (
        isinstance(blocks, str | bytes | bytearray) or not isinstance(blocks, Iterable)
    ):
        raise ContentBlockError(
            f"blocks must be a sequence of ContentBlock, not {type(blocks).__name__}"
        )
    out: list[ContentBlock] = []
    for block in blocks:
        if type(block) is not ContentBlock and not isinstance(block, ContentBlock):
            raise ContentBlockError(
                f"blocks must hold ContentBlock values, not {type(block).__name__}"
            )
        changes: dict[str, Any] = {}
        if block.text:
            text = (
                project_text(block.text)
                if tags is HARNESS_TAGS
                else normalize_whitespace(strip_tags(block.text, tags))
            )
            if not text:
                continue
            if text != block.text:
                changes["text"] = text
        if block.tool_input:
            pruned = prune_tool_input(block.tool_input)
            if pruned != block.tool_input:
                changes["tool_input"] = pruned or None
        if block.thinking_signature:
            changes["thinking_signature"] = ""
        if block.tool_output:
            output = (
                project_text(block.tool_output)
                if tags is HARNESS_TAGS
                else normalize_whitespace(strip_tags(block.tool_output, tags))
            )
            if output != block.tool_output:
                changes["tool_output"] = output
        out.append(block.projected(changes) if changes else block)
    return out

"""Reading the lines of a ledger through its storage: the end, backwards, forwards, by id (private).

Written once against :class:`~merkle_memory.ledger.storage.LedgerFile` (byte offsets and
``read``), so every backend shares one definition of a line, a blank line and a torn fragment
(DESIGN section 4, "Torn tail"): lines end with ``\\n``; the bytes after the last newline are
the unterminated last line, kept when it is a complete JSON object, else a torn fragment.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from .. import canonical
from ..errors import CanonicalizationError, LedgerFormatError
from ._entry import parse_line, shaped_escaped_memory_id, shaped_memory_id
from .storage import LedgerFile

__all__ = [
    "is_complete_object",
    "iter_line_blocks",
    "iter_lines_backwards",
    "iter_objects_naming",
    "read_tail",
    "split_fragment",
]

_FIRST_BLOCK: Final = 4096  # one or a few entry lines: all an append usually needs
_BLOCK: Final = 65536
_FORWARD_BLOCK: Final = 1 << 20
WHITESPACE: Final = b" \t\r\n\x0b\x0c"


def split_fragment(file: LedgerFile, size: int) -> tuple[int, bytes]:
    """Find the unterminated last line of the ledger.

    Args:
        file: the ledger's bytes.
        size: its size in bytes.

    Returns:
        ``(offset, fragment)``: the byte offset just after the last newline (0 if none) and the
        bytes from there to ``size`` (empty when the ledger ends with a newline or is empty).
    """
    pos = size
    step = _FIRST_BLOCK
    while pos > 0:
        start = max(0, pos - step)
        block = file.read(start, pos - start)
        cut = block.rfind(b"\n")
        if cut >= 0:
            offset = start + cut + 1
            if pos == size:
                return offset, block[cut + 1 :]
            return offset, file.read(offset, size - offset)
        pos = start
        step = _BLOCK
    return 0, file.read(0, size)


def read_tail(file: LedgerFile, size: int) -> tuple[int, bytes, bytes | None]:
    """:func:`split_fragment` and the last complete line before it, from one read of the end.

    Args:
        file: the ledger's bytes.
        size: its size in bytes.

    Returns:
        ``(offset, fragment, last)``: ``offset`` and ``fragment`` as :func:`split_fragment`
        gives them; ``last`` the last non-blank line ending before ``offset`` (stripped, no
        newline), ``b""`` when there is none, or ``None`` when the first 4 KiB read does not
        hold it whole (then read backwards with :func:`iter_lines_backwards`).
    """
    start = max(0, size - _FIRST_BLOCK)
    block = file.read(start, size - start)
    cut = block.rfind(b"\n")
    if cut < 0:
        offset, fragment = split_fragment(file, size)
        return offset, fragment, (b"" if offset == 0 else None)
    pos = cut
    while True:
        newline = block.rfind(b"\n", 0, pos)
        if newline < 0 and start > 0:
            return start + cut + 1, block[cut + 1 :], None
        line = block[newline + 1 : pos].strip(WHITESPACE)
        if line or newline < 0:
            return start + cut + 1, block[cut + 1 :], line
        pos = newline


def iter_lines_backwards(file: LedgerFile, end: int) -> Iterator[bytes]:
    """Yield the lines of ``[0, end)`` from last to first, without newlines or blank lines.

    Args:
        file: the ledger's bytes.
        end: byte offset where the region ends (normally just after a newline).
    """
    pos = end
    carry = b""
    step = _FIRST_BLOCK
    while pos > 0:
        start = max(0, pos - step)
        step = _BLOCK
        chunk = file.read(start, pos - start) + carry
        parts = chunk.split(b"\n")
        carry = parts[0] if start > 0 else b""
        body = parts[1:] if start > 0 else parts
        for line in reversed(body):
            stripped = line.strip(WHITESPACE)
            if stripped:
                yield stripped
        pos = start


def iter_objects_naming(
    file: LedgerFile, end: int, memory_id: str, block: int = _FORWARD_BLOCK
) -> Iterator[dict[str, Any]]:
    """Yield the parsed lines of ``[0, end)`` whose ``memory_id`` is ``memory_id``, last first.

    Every valid JSON form of a line counts: this library's (RFC 8785), the anchor's
    (mnemo-cortex's spaces), and any other a foreign writer made (other spacing, escapes such
    as ``\\u00e9`` in strings, other key order, a CRLF end). A line is yielded when it parses
    (``parse_line``: strict, UTF-8, one value per key) to an object whose ``"memory_id"``
    value equals ``memory_id``; whether it is a well-formed entry, and whether its hash
    matches, is the caller's to check (``Entry.from_dict``). Lines that do not parse are
    skipped. The bytes after the last newline before ``end`` count as a line.

    Cost: a line can name the id only if it holds a backslash (an escape) or the id's JSON
    string ``canonical.dumps(memory_id)`` (an unescaped JSON string of the id is exactly those
    bytes), so a block of lines with neither is skipped after two byte searches. In a block
    that has one, a line with neither is skipped by the same test; a line in one of the two
    fixed shapes whose id bytes are not the id's (``_entry.shaped_memory_id``), or whose
    escaped id decodes to another (``_entry.shaped_escaped_memory_id``), is skipped with one
    or two regular expression matches; every other line is parsed. The reads start with
    4 KiB at the end and grow sixteenfold up to ``block``, so a recent entry costs one small
    read, and one far back about one read of the bytes after it, plus one parse per line
    that may name the id.

    Args:
        file: the ledger's bytes.
        end: byte offset where the region ends (normally ``file.size()``).
        memory_id: the id, a ``str`` (a subclass is read as its ``str`` value; anything
            else names no line).
        block: the most bytes read at a time.

    Yields:
        Each such line's parsed JSON object (a ``dict``), from the last line to the first.

    Raises:
        OSError: the ledger cannot be read.
    """
    if not isinstance(memory_id, str):
        return
    memory_id = str.__str__(memory_id)  # a subclass: its value, as a parsed line holds it
    try:
        quoted: bytes | None = canonical.dumps(memory_id)
    except CanonicalizationError:  # a lone surrogate: only an escaped form can hold it
        quoted = None
    bare = None if quoted is None else quoted[1:-1]
    pos = end
    carry = b""
    step = min(_FIRST_BLOCK, block)
    while pos > 0:
        start = max(0, pos - step)
        step = min(step * 16, block)
        chunk = file.read(start, pos - start) + carry
        pos = start
        whole = chunk.find(b"\n") + 1 if start > 0 else 0  # where the whole lines begin
        if start > 0 and whole == 0:  # no newline yet: all of it is part of one line
            carry = chunk
            continue
        carry = chunk[:whole]
        if chunk.find(b"\\", whole) < 0 and (quoted is None or chunk.find(quoted, whole) < 0):
            continue
        for line in reversed(chunk[whole:].split(b"\n")):
            escaped = b"\\" in line
            if not escaped and (quoted is None or quoted not in line):
                continue
            stripped = line.strip(WHITESPACE)
            shaped = shaped_memory_id(stripped)
            if shaped is not None:
                if shaped != bare:
                    continue
            elif escaped:
                value = shaped_escaped_memory_id(stripped)
                if value is not None and value != memory_id:
                    continue
            try:
                obj = parse_line(stripped)
            except LedgerFormatError:
                continue
            if obj.get("memory_id") == memory_id:
                yield obj


def iter_line_blocks(
    file: LedgerFile, start: int, end: int, block: int = _FORWARD_BLOCK
) -> Iterator[list[bytes]]:
    """Yield the lines of ``[start, end)`` in order, in batches of about ``block`` bytes.

    Lines come without their newline (blank ones included). ``start`` is the offset of a line;
    when ``end`` is not just after a newline, the last line yielded is the unterminated rest.

    Args:
        file: the ledger's bytes.
        start: byte offset of the first line.
        end: byte offset where the region ends.
        block: how many bytes to read at a time.
    """
    rest = b""
    pos = start
    while pos < end:
        data = file.read(pos, min(block, end - pos))
        if not data:
            break
        pos += len(data)
        lines = (rest + data).split(b"\n")
        rest = lines.pop()
        yield lines
    if rest:
        yield [rest]


def is_complete_object(fragment: bytes) -> bool:
    """Whether an unterminated final line is a complete JSON object (kept, not quarantined)."""
    stripped = fragment.strip(WHITESPACE)
    if not stripped:
        return False
    try:
        parse_line(stripped)
    except LedgerFormatError:
        return False
    return True

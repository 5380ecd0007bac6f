"""Reading the lines of a ledger through its storage: the end, backwards, and forwards (private).

Written once against :class:`~merkle_memory.ledger.storage.LedgerFile` (byte offsets and
``read``), so every backend shares one definition of a line, a blank line and a torn fragment
(DESIGN section 4, "Torn tail"): lines end with ``\\n``; the bytes after the last newline are
the unterminated last line, kept when it is a complete JSON object, else a torn fragment.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from ..errors import LedgerFormatError
from ._entry import parse_line
from .storage import LedgerFile

__all__ = [
    "is_complete_object",
    "iter_line_blocks",
    "iter_lines_backwards",
    "iter_lines_containing",
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


def iter_lines_containing(
    file: LedgerFile, end: int, needle: bytes, block: int = _FORWARD_BLOCK
) -> Iterator[bytes]:
    """Yield the lines of ``[0, end)`` that contain ``needle``, last first, stripped.

    A byte search per block (no split into lines), so finding a line far back costs about
    one read of the bytes after it. The bytes after the last newline count as a line.

    Args:
        file: the ledger's bytes.
        end: byte offset where the region ends.
        needle: the bytes to find (no newline in it).
        block: how many bytes to read at a time.
    """
    pos = end
    carry = b""
    while pos > 0:
        start = max(0, pos - block)
        chunk = file.read(start, pos - start) + carry
        pos = start
        whole = chunk.find(b"\n") + 1 if start > 0 else 0  # where the whole lines begin
        if start > 0 and whole == 0:  # no newline yet: all of it is part of one line
            carry = chunk
            continue
        stop = len(chunk)
        while (hit := chunk.rfind(needle, whole, stop)) >= 0:
            line_start = chunk.rfind(b"\n", 0, hit) + 1
            line_end = chunk.find(b"\n", hit)
            yield chunk[line_start : len(chunk) if line_end < 0 else line_end].strip(WHITESPACE)
            stop = line_start
        carry = chunk[:whole]


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

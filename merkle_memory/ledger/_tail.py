"""The end of a ledger file: ``ledger.head``, backward line reading, torn-tail quarantine.

Private helpers of :mod:`merkle_memory.ledger` (DESIGN section 4, "Append order" and "Torn
tail"). Everything here works on an open file descriptor held under the ledger lock, except
``read_head``, which verify also uses without the lock (the head is replaced atomically).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from .. import canonical
from .._fsio import atomic_write, fsync_dir
from ..errors import CanonicalizationError, LedgerFormatError
from ._entry import Entry, as_path, parse_line, schema_problem

__all__ = [
    "Head",
    "iter_lines_backwards",
    "quarantine",
    "read_head",
    "split_fragment",
    "write_head",
]

log = logging.getLogger("merkle_memory.ledger")

_FIRST_BLOCK: Final = 4096  # one or a few entry lines: all an append usually needs
_BLOCK: Final = 65536
_WHITESPACE: Final = b" \t\r\n\x0b\x0c"


@dataclass(frozen=True, slots=True)
class Head:
    """What ``ledger.head`` records: the last entry acknowledged by an append.

    Attributes:
        seq: 1-based seq of that entry.
        hash: its hash, 64-char lowercase hex.
    """

    seq: int
    hash: str


def read_head(path: str | os.PathLike[str]) -> Head | None:
    """Read ``ledger.head`` (``{"hash": ..., "seq": ...}`` in RFC 8785 form plus a newline).

    Returns:
        The head, or ``None`` when the file does not exist (a ledger written by the anchor, or
        never appended to by this library).

    Raises:
        LedgerFormatError: the file exists but is not a valid head.
        LedgerError: ``path`` is not a path.
        OSError: it cannot be read.
    """
    try:
        data = as_path(path, "a head path").read_bytes()
    except FileNotFoundError:
        return None
    try:
        obj = canonical.loads(data.rstrip(b"\n"))
    except CanonicalizationError as exc:
        raise LedgerFormatError(f"ledger.head is unreadable: {exc}") from None
    if type(obj) is not dict or obj.keys() != {"seq", "hash"}:
        raise LedgerFormatError("ledger.head is unreadable: not a {seq, hash} object")
    probe = {
        "seq": obj["seq"],
        "ts": 0,
        "op": "save",
        "memory_id": "x",
        "content_sha256": obj["hash"],
        "prev": obj["hash"],
        "hash": obj["hash"],
    }
    problem = schema_problem(probe)
    if problem is not None:
        raise LedgerFormatError("ledger.head is unreadable: " + problem.split(": ", 1)[1])
    return Head(obj["seq"], obj["hash"])


def write_head(path: Path, entry: Entry) -> None:
    """Replace ``ledger.head`` atomically: temp file, fsync, rename, fsync the folder."""
    atomic_write(path, canonical.dumps({"seq": entry.seq, "hash": entry.hash}) + b"\n")


def split_fragment(fd: int, size: int) -> tuple[int, bytes]:
    """Find the unterminated last line of the file.

    Args:
        fd: open descriptor of the ledger.
        size: its size in bytes.

    Returns:
        ``(offset, fragment)``: the byte offset just after the last newline (0 if none) and the
        bytes from there to the end (empty when the file ends with a newline or is empty).
    """
    pos = size
    step = _FIRST_BLOCK
    while pos > 0:
        start = max(0, pos - step)
        block = os.pread(fd, pos - start, start)
        cut = block.rfind(b"\n")
        if cut >= 0:
            offset = start + cut + 1
            if pos == size:
                return offset, block[cut + 1 :]
            return offset, os.pread(fd, size - offset, offset)
        pos = start
        step = _BLOCK
    return 0, os.pread(fd, size, 0)


def iter_lines_backwards(fd: int, end: int) -> Iterator[bytes]:
    """Yield the lines of ``[0, end)`` from last to first, without newlines or blank lines.

    Args:
        fd: open descriptor of the ledger.
        end: byte offset where the region ends (normally just after a newline).
    """
    pos = end
    carry = b""
    step = _FIRST_BLOCK
    while pos > 0:
        start = max(0, pos - step)
        step = _BLOCK
        chunk = os.pread(fd, pos - start, start) + carry
        parts = chunk.split(b"\n")
        carry = parts[0] if start > 0 else b""
        body = parts[1:] if start > 0 else parts
        for line in reversed(body):
            stripped = line.strip(_WHITESPACE)
            if stripped:
                yield stripped
        pos = start


def quarantine(fd: int, ledger: Path, torn: Path, offset: int, fragment: bytes) -> None:
    """Move a torn fragment to ``ledger.torn`` and truncate the ledger to ``offset``.

    Order: the fragment (after a header line ``# quarantined <epoch seconds> from offset
    <byte offset>``) is appended to ``ledger.torn`` and fsynced (and its folder fsynced when
    the file is new) before the ledger is truncated and fsynced, so no byte is ever lost. A
    WARNING is logged on ``merkle_memory.ledger``.
    """
    log.warning(
        "Ledger %s: quarantining a torn tail (%d bytes at offset %d) to %s",
        ledger,
        len(fragment),
        offset,
        torn,
    )
    created = not torn.exists()
    header = f"# quarantined {time.time():.3f} from offset {offset}\n".encode()
    tfd = os.open(torn, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        data = header + fragment + b"\n"
        view = memoryview(data)
        while view:
            view = view[os.write(tfd, view) :]
        os.fsync(tfd)
    finally:
        os.close(tfd)
    if created:
        fsync_dir(torn.parent)
    os.ftruncate(fd, offset)
    os.fsync(fd)


def is_complete_object(fragment: bytes) -> bool:
    """Whether an unterminated final line is a complete JSON object (kept, not quarantined)."""
    stripped = fragment.strip(_WHITESPACE)
    if not stripped:
        return False
    try:
        parse_line(stripped)
    except LedgerFormatError:
        return False
    return True

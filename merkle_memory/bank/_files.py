"""File-system helpers of the memory bank (private): safe reads, folder checks, file checks.

Nothing read from a record chooses a path: file names are built from a slug type and a 64-hex
id (see :mod:`merkle_memory.bank.memory`), folders and files inside the bank are never followed
through symlinks (``O_NOFOLLOW``, ``lstat``), and non-regular files (FIFOs, devices) are never
opened for reading in a way that could block.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

from .. import canonical
from .._json import HEX64
from ..errors import BankError, CanonicalizationError, MemoryFormatError
from .memory import MAX_MEMORY_FILE_BYTES, Memory

__all__ = [
    "CONTENT_MISMATCH",
    "LEGACY",
    "MAX_FILE_BYTES",
    "NAME_MISMATCH",
    "NOT_A_MEMORY",
    "UNEXPECTED_FILE",
    "UNPARSEABLE",
    "Inspection",
    "NotRegularError",
    "id_from_name",
    "inspect_file",
    "is_temp_name",
    "read_regular",
    "real_dir",
    "refuse_symlink",
    "special_file",
]

MAX_FILE_BYTES: Final = MAX_MEMORY_FILE_BYTES
"""Largest memory file read (16 MiB); a larger file is reported unparseable, never loaded."""

_FILE_NAME: Final = re.compile(rf"\d{{8}}_\d{{6}}_[a-z0-9_-]+_({HEX64.pattern})\.json")

# Problem kinds, the ``kind`` of a ``BankProblem`` (the reason text adds details).
UNPARSEABLE: Final = "unparseable"
NOT_A_MEMORY: Final = "not_a_memory"
CONTENT_MISMATCH: Final = "content_mismatch"
NAME_MISMATCH: Final = "name_mismatch"
UNEXPECTED_FILE: Final = "unexpected_file"
LEGACY: Final = "legacy"
REAPPEARED: Final = "reappeared"


def refuse_symlink(path: Path, what: str) -> None:
    """Raise ``BankError`` when ``path`` is a symlink (inside the bank, never followed)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise BankError(f"refusing to follow the symlink {what}: {path.name}")


def special_file(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` must not be opened: ``None`` for a regular file or no file, else the reason
    (a symlink is never followed; a FIFO, socket, device or folder is never opened, since
    reading a FIFO blocks). Never opens ``path``."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode):
        return "symlink (never followed)"
    if not stat.S_ISREG(mode):
        return "not a regular file (never opened)"
    return None


def real_dir(path: Path, what: str) -> bool:
    """True when ``path`` is a real folder, False when it does not exist.

    Raises:
        BankError: ``path`` is a symlink or not a folder.
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(mode):
        raise BankError(f"refusing to follow the symlink {what}")
    if not stat.S_ISDIR(mode):
        raise BankError(f"{what} is not a folder")
    return True


def is_temp_name(name: str) -> bool:
    """True for the name of a temp file ``atomic_write`` makes (``.<name>.<random>.tmp``)."""
    return name.startswith(".") and name.endswith(".tmp")


def id_from_name(name: str) -> str | None:
    """The 64-hex id at the end of a memory file name, or ``None`` if the name is not one."""
    match = _FILE_NAME.fullmatch(name)
    return match.group(1) if match else None


class NotRegularError(BankError):
    """A path inside the bank is a symlink or a special file (never followed or read)."""


def read_regular(path: str | os.PathLike[str], limit: int = MAX_FILE_BYTES) -> bytes:
    """Read a regular file without following a symlink or blocking on a FIFO.

    Raises:
        NotRegularError: the path is a symlink or not a regular file.
        BankError: the file is larger than ``limit`` bytes.
        OSError: any other file-system failure.
    """
    name = os.path.basename(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if os.path.islink(path):
            raise NotRegularError(f"symlink (never followed): {name}") from exc
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularError(f"not a regular file: {name}")
        if info.st_size > limit:
            raise BankError(f"{name} is larger than {limit} bytes")
        chunks = []
        size = 0
        while chunk := os.read(fd, max(info.st_size + 1 - size, 65536)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise BankError(f"{name} is larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class Inspection:
    """What one file of ``memories/`` or ``memories/archive/`` holds.

    Attributes:
        memory: the memory, when the file verifies (else ``None``).
        kind: ``None`` when it verifies, else one of ``unparseable``, ``not_a_memory``,
            ``content_mismatch``, ``name_mismatch``, ``unexpected_file``.
        reason: human text for ``kind`` (``None`` when it verifies).
        data: the bytes read (``b""`` when not read).
    """

    memory: Memory | None
    kind: str | None = None
    reason: str | None = None
    data: bytes = b""


def inspect_file(path: str | os.PathLike[str]) -> Inspection:
    """Check one file of the bank: parse, recompute the id, compare with stored id and name.

    Never raises for a bad file: a symlink (never followed), a special file (never read) or
    a name not ending in ``.json`` is an ``unexpected_file``.
    """
    name = os.path.basename(path)
    if not name.endswith(".json"):
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return Inspection(None, UNEXPECTED_FILE, "vanished while being read")
        if stat.S_ISLNK(mode):
            return Inspection(None, UNEXPECTED_FILE, "symlink (never followed)")
        if stat.S_ISDIR(mode):
            return Inspection(None, UNEXPECTED_FILE, "a folder")
        return Inspection(None, UNEXPECTED_FILE, "not a memory file name (*.json)")
    try:
        data = read_regular(path)
    except FileNotFoundError:
        return Inspection(None, UNEXPECTED_FILE, "vanished while being read")
    except NotRegularError as exc:
        return Inspection(None, UNEXPECTED_FILE, str(exc))
    except (BankError, OSError) as exc:
        return Inspection(None, UNPARSEABLE, f"unparseable: {exc}")
    try:
        obj = canonical.loads(data)
    except CanonicalizationError as exc:
        return Inspection(None, UNPARSEABLE, f"unparseable: {exc}", data)
    try:
        memory = Memory.from_dict(cast("Any", obj), check_id=False)  # it checks obj's type
    except MemoryFormatError as exc:
        return Inspection(None, NOT_A_MEMORY, f"not a memory: {exc}", data)
    assert isinstance(obj, dict)  # from_dict accepts nothing else
    stored = obj.get("id")
    if not isinstance(stored, str) or stored != memory.id:
        return Inspection(
            None,
            CONTENT_MISMATCH,
            f"content does not match id (stored {str(stored)[:80]!r}, content hashes to "
            f"{memory.id})",
            data,
        )
    if name != memory.file_name:
        return Inspection(
            None,
            NAME_MISMATCH,
            f"file name does not match id (expected {memory.file_name})",
            data,
        )
    return Inspection(memory, data=data)

"""The POSIX folder as a ledger store: ``ledger.jsonl`` and the files beside it (private).

Files, all in the ledger's folder (DESIGN section 4, ``docs/FORMAT.md``): ``ledger.jsonl`` (the
lines), ``ledger.head`` (two fixed-size slots written in place, see below), ``ledger.torn``
(quarantined fragments, each after a header line), ``ledger.tree`` (the Merkle sidecar, see
``treelog``), ``ledger.tree.state`` (its sync state) and ``ledger.ids`` (the id index of
``_idindex``). The lock is an ``fcntl.flock`` on ``ledger.jsonl`` itself.

``ledger.head`` (format ``ledger.head/2``, ``docs/FORMAT.md`` section 4.3) is 8,192 bytes: two
slots of 4,096 bytes, each the RFC 8785 line of ``{"check", "counter", "end", "fingerprint",
"format", "hash", "seq"}``, a newline and zero bytes. ``check`` is the SHA-256 of the line
without it; ``counter`` grows by one per write. A write goes in place into the slot that does
not hold the newest valid head, followed by one ``fdatasync``: no temp file, no rename, no
folder fsync. A slot torn by a crash fails its check and the other slot, untouched, is the
head. The first write of a head (or of one in the older JSON form, ``ledger.head/1``, which is
still read) replaces the file atomically (temp file, fsync, rename, folder fsync).

Descriptors: a writer's ``ledger.jsonl`` and ``ledger.head`` stay open between ``locked``
blocks (one set per concurrent holder, so two holders never share an ``flock``), re-checked
on each lock by one ``lstat`` per file (the path must still name the open file: a file replaced,
removed or turned into a symlink is opened anew) and never used by a forked child (their
process id is checked; the child opens its own). ``close`` releases them.

Every one of these files is opened by ``_fsio.open_regular``: a symlink (dangling or not), a
FIFO, a device or a folder in its place raises ``StoreFileError`` and is never followed, read,
written, truncated or created through; new files are created by ``O_CREAT`` with
``O_NOFOLLOW``, or as exclusive temp files in the folder renamed over the name. A temp file
a killed writer left (``.<name>.<random>.tmp``) of ``ledger.head``, ``ledger.tree``,
``ledger.tree.state`` or ``ledger.ids`` is removed by ``remove_leftovers`` under the lock,
at the rare points that call it (seal, a sidecar re-check or rebuild, an accepted rollback).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import stat
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .. import _pg, canonical
from .._fork import renew_in_child
from .._fsio import (
    atomic_write,
    fsync_dir,
    makedirs_durable,
    open_regular,
    read_regular_file,
    write_all,
)
from .._json import HEX64
from ..errors import CanonicalizationError, LedgerError, LedgerFormatError, StoreFileError
from ._entry import as_path, schema_problem
from ._postgres import PostgresLedgerStore
from .storage import SIDE_FILE_NAME as _SIDE_FILE
from .storage import Head, IndexFile, LedgerFile, LedgerStore, check_side_file_name
from .treelog import SIDECAR_NAME, TreeLog, node_count

__all__ = [
    "HEAD_FORMAT",
    "HEAD_SIZE",
    "HEAD_SLOT_SIZE",
    "IDS_NAME",
    "STATE_NAME",
    "FolderLedgerStore",
    "HeadState",
    "as_store",
    "datasync",
    "decode_head",
    "encode_head_slot",
    "head_slot_page",
    "read_head",
]

_MAX_INT: Final = 2**53 - 1
_FINGERPRINT: Final = re.compile(r"[!-~]{1,128}")
_HEAD_KEYS: Final = frozenset({"end", "fingerprint", "hash", "seq"})

HEAD_FORMAT: Final = "ledger.head/2"
"""The ``format`` of each slot of a ``ledger.head`` written in place (``docs/FORMAT.md`` 4.3)."""

HEAD_SLOT_SIZE: Final = 4096
"""Bytes of one slot of ``ledger.head`` (a page of its own, so writing one never rewrites the
other's page)."""

HEAD_SIZE: Final = 2 * HEAD_SLOT_SIZE
"""Bytes of a ``ledger.head/2`` file: two slots."""

_SLOT_KEYS: Final = frozenset({"check", "counter", "end", "fingerprint", "format", "hash", "seq"})
_SLOT_REQUIRED: Final = frozenset({"check", "counter", "format", "hash", "seq"})
_IDLE_HANDLES: Final = 2

STATE_NAME: Final = "ledger.tree.state"
"""File name of the sidecar's sync state inside a tenant directory."""

IDS_NAME: Final = "ledger.ids"
"""File name of the id index (memory id -> latest entry) inside a tenant directory."""

_DERIVED: Final = "|".join(map(re.escape, ("ledger.head", SIDECAR_NAME, STATE_NAME, IDS_NAME)))
_LEFTOVER: Final = re.compile(rf"\.(?:{_DERIVED})\.[a-z0-9_]{{8}}\.tmp")
"""The temp file of an atomic replacement of ``ledger.head``, ``ledger.tree``,
``ledger.tree.state`` or ``ledger.ids`` (``_fsio.atomic_write`` and ``TreeLog.rebuild``:
``tempfile.mkstemp``, ``.<name>.<8 characters of [a-z0-9_]>.tmp``). Every writer of these
four files holds the ledger's lock; the other files of the folder are written by some that
do not (``FolderLedgerStore.remove_leftovers``)."""

log = logging.getLogger("merkle_memory.ledger")


_DATASYNC: Final = "fdatasync" if hasattr(os, "fdatasync") else "fsync"


def datasync(fd: int) -> None:
    """``os.fdatasync`` (``os.fsync`` where the platform has none): the file's bytes, and the
    size needed to read them, are durable when it returns."""
    getattr(os, _DATASYNC)(fd)


# --- ledger.head: the two-slot form and the JSON form it replaces ------------------------------


@dataclass(frozen=True, slots=True)
class HeadState:
    """What a ``ledger.head`` file holds.

    Attributes:
        head: the newest valid head.
        version: 2 for the two-slot form, 1 for the older JSON form (rewritten as 2 by the
            next write).
        slot: 0 or 1, the slot holding ``head`` (``-1`` in the JSON form).
        counter: that slot's counter (0 in the JSON form).
    """

    head: Head
    version: int
    slot: int = -1
    counter: int = 0


# ``Head(...)`` and ``HeadState(...)`` of the append fast path without the frozen dataclasses'
# ``__init__`` (the same fields, set through the slots' descriptors; one Python call less each).
_new = object.__new__
_HEAD_FIELDS: Final = tuple(
    Head.__dict__[name].__set__ for name in ("seq", "hash", "end", "fingerprint")
)
_STATE_FIELDS: Final = tuple(
    HeadState.__dict__[name].__set__ for name in ("head", "version", "slot", "counter")
)


def _slot_body(head: Head, counter: int) -> bytes:
    """The slot's RFC 8785 object without ``check`` (keys sorted; ``end`` and
    ``fingerprint`` left out when unknown)."""
    parts = [b'{"counter":%d' % counter]
    if head.end is not None:
        parts.append(b',"end":%d' % head.end)
    if head.fingerprint is not None:
        # Printable ASCII: json.dumps escapes exactly what RFC 8785 escapes (" and \).
        text = head.fingerprint
        quoted = json.dumps(text) if '"' in text or "\\" in text else f'"{text}"'
        parts.append(b',"fingerprint":' + quoted.encode("ascii"))
    parts.append(b',"format":"%s","hash":"%s","seq":%d}' % (
        HEAD_FORMAT.encode(), head.hash.encode("ascii"), head.seq
    ))  # fmt: skip
    return b"".join(parts)


def _slot_line(head: Head, counter: int) -> bytes:
    body = _slot_body(head, counter)
    return b'{"check":"%s",%s' % (hashlib.sha256(body).hexdigest().encode(), body[1:])


def encode_head_slot(head: Head, counter: int) -> bytes:
    """One slot of ``ledger.head/2``: ``HEAD_SLOT_SIZE`` bytes (the line, ``\\n``, zeros).

    Args:
        head: the head to record (``seq`` 1-based, ``hash`` 64-char lowercase hex, ``end`` a
            positive byte offset or ``None``, ``fingerprint`` 1-128 printable ASCII or
            ``None``).
        counter: the slot's counter, a positive integer larger than the other slot's.

    Raises:
        LedgerFormatError: a field outside those shapes.
    """
    problem = _head_problem(head.seq, head.hash, head.end, head.fingerprint)
    if problem is None and not (type(counter) is int and 0 < counter <= _MAX_INT):
        problem = "counter is not a positive integer"
    if problem is not None:
        raise LedgerFormatError(f"cannot write ledger.head: {problem}")
    line = _slot_line(head, counter)
    return line + b"\n" + bytes(HEAD_SLOT_SIZE - len(line) - 1)


_SLOT_TEMPLATE: Final = (
    b'{"counter":%d,"end":%d,"fingerprint":"%s","format":"' + HEAD_FORMAT.encode()
    + b'","hash":"%s","seq":%d}'
)  # fmt: skip
_ZEROS: Final = bytes(HEAD_SLOT_SIZE)


def head_slot_page(seq: int, digest: str, end: int, fingerprint: str, counter: int) -> bytes:
    """``encode_head_slot(Head(seq, digest, end, fingerprint), counter)`` from one byte
    template, for the values an append computes itself (no check made here).

    Args:
        seq: 1-based seq, at most 2**53 - 1.
        digest: 64-char lowercase hex.
        end: a positive byte offset, at most 2**53 - 1.
        fingerprint: 1-128 printable ASCII characters other than ``"`` and ``\\`` (a
            ``LedgerFile.fingerprint``: digits and colons).
        counter: a positive integer, at most 2**53 - 1.

    Returns:
        The ``HEAD_SLOT_SIZE`` bytes of the slot, byte for byte ``encode_head_slot``'s.
    """
    body = _SLOT_TEMPLATE % (counter, end, fingerprint.encode(), digest.encode(), seq)
    line = b'{"check":"%s",%s\n' % (hashlib.sha256(body).hexdigest().encode(), body[1:])
    return line + _ZEROS[len(line) :]


def _head_problem(seq: Any, digest: Any, end: Any, fingerprint: Any) -> str | None:
    """What makes these head fields unusable, or ``None``."""
    if type(seq) is not int or not 0 < seq <= _MAX_INT:
        return "seq is not a positive integer"
    if type(digest) is not str or HEX64.fullmatch(digest) is None:
        return "hash is not 64-char lowercase hex"
    if end is not None and (type(end) is not int or not 0 < end <= _MAX_INT):
        return "end is not a positive byte offset"
    if fingerprint is not None and (
        type(fingerprint) is not str or not _FINGERPRINT.fullmatch(fingerprint)
    ):
        return "fingerprint is not 1-128 printable ASCII characters"
    return None


def _decode_slot(page: bytes) -> tuple[int, Head] | None:
    """``(counter, head)`` of one slot, or ``None`` when it is not a whole valid slot (torn,
    never written, or altered): the line must be exactly what ``encode_head_slot`` writes
    for the values it holds, its ``check`` included, and every byte after it zero."""
    cut = page.find(b"\n")
    if cut < 0 or page[cut + 1 :].strip(b"\0"):
        return None
    line = page[:cut]
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if type(obj) is not dict or not _SLOT_REQUIRED <= obj.keys() <= _SLOT_KEYS:
        return None
    counter, end, fingerprint = obj["counter"], obj.get("end"), obj.get("fingerprint")
    if obj["format"] != HEAD_FORMAT or type(counter) is not int or not 0 < counter <= _MAX_INT:
        return None
    if _head_problem(obj["seq"], obj["hash"], end, fingerprint) is not None:
        return None
    head = Head(obj["seq"], obj["hash"], end, fingerprint)
    return (counter, head) if _slot_line(head, counter) == line else None


def decode_head(data: bytes) -> HeadState:
    """Read the bytes of a ``ledger.head`` file in either form.

    ``ledger.head/2`` (exactly ``HEAD_SIZE`` bytes): the valid slot with the larger counter;
    one torn or never-written slot is fine. ``ledger.head/1`` (anything else): the RFC 8785
    object ``{"end", "fingerprint", "hash", "seq"}`` and a newline (``end`` and
    ``fingerprint`` missing in heads written before they were recorded).

    Raises:
        LedgerFormatError: neither slot is valid, two valid slots share a counter but differ,
            or the JSON form is not a valid head.
    """
    if len(data) == HEAD_SIZE:
        found = [
            (slot, decoded)
            for slot in (0, 1)
            if (decoded := _decode_slot(data[slot * HEAD_SLOT_SIZE : (slot + 1) * HEAD_SLOT_SIZE]))
        ]
        if not found:
            raise LedgerFormatError("ledger.head is unreadable: neither of its two slots is valid")
        if len(found) == 2 and found[0][1][0] == found[1][1][0] and found[0][1] != found[1][1]:
            raise LedgerFormatError(
                "ledger.head is unreadable: its two slots differ under one counter"
            )
        slot, (counter, head) = max(found, key=lambda item: item[1][0])
        return HeadState(head, 2, slot, counter)
    return HeadState(_decode_json_head(data), 1)


def _decode_json_head(data: bytes) -> Head:
    """The JSON form (``ledger.head/1``)."""
    try:
        obj = canonical.loads(data.rstrip(b"\n"))
    except CanonicalizationError as exc:
        raise LedgerFormatError(f"ledger.head is unreadable: {exc}") from None
    if type(obj) is not dict or not {"seq", "hash"} <= obj.keys() <= _HEAD_KEYS:
        raise LedgerFormatError(
            "ledger.head is unreadable: not a {end, fingerprint, hash, seq} object"
        )
    end = obj.get("end")
    if end is not None and (type(end) is not int or not 0 < end <= _MAX_INT):
        raise LedgerFormatError("ledger.head is unreadable: end is not a positive byte offset")
    fingerprint = obj.get("fingerprint")
    if fingerprint is not None and (
        type(fingerprint) is not str or not _FINGERPRINT.fullmatch(fingerprint)
    ):
        raise LedgerFormatError(
            "ledger.head is unreadable: fingerprint is not 1-128 printable ASCII characters"
        )
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
    seq, head_hash = obj["seq"], obj["hash"]
    assert type(seq) is int and type(head_hash) is str  # schema_problem checked both
    return Head(seq, head_hash, end, fingerprint)


def read_head(path: str | os.PathLike[str]) -> Head | None:
    """Read a ``ledger.head`` file, in the two-slot form or the older JSON form
    (:func:`decode_head`; ``docs/FORMAT.md`` section 4.3).

    Returns:
        The head, or ``None`` when the file does not exist (a ledger written by the anchor, or
        never appended to by this library).

    Raises:
        LedgerFormatError: the file exists but is not a valid head.
        StoreFileError: it is a symlink or not a regular file (never followed or read).
        LedgerError: ``path`` is not a path.
        OSError: it cannot be read.
    """
    data = read_regular_file(as_path(path, "a head path"), StoreFileError)
    if data is None:
        return None
    return decode_head(data).head


class _HeadFile:
    """``ledger.head`` kept open: its descriptor, identity, and the bytes last seen."""

    __slots__ = ("data", "fd", "fresh", "ident", "state", "writable")

    def __init__(self) -> None:
        self.fd: int | None = None
        self.ident: tuple[int, int] | None = None
        self.writable = False
        self.data: bytes | None = None
        self.state: HeadState | None = None
        self.fresh = False  # read (or written) under the lock held now: no need to reread

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)
        self.ident, self.data, self.state, self.fresh = None, None, None, False

    def current(self, path: Path, writable: bool) -> HeadState | None:
        """The head as stored now (``None``: no file), reading through the open descriptor
        when ``path`` still names it; decoded only when its bytes changed."""
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            self.close()
            return None
        if self.fd is None or (st.st_dev, st.st_ino) != self.ident or not stat.S_ISREG(st.st_mode):
            self.close()
            try:
                self._open(path, writable)
            except FileNotFoundError:
                return None
        assert self.fd is not None
        data = os.pread(self.fd, HEAD_SIZE + 1, 0)
        if data != self.data:
            self.state, self.fresh = None, False
            self.state = decode_head(data)
            self.data = data
        self.fresh = True
        return self.state

    def _open(self, path: Path, writable: bool) -> None:
        fd = None
        if writable:
            with contextlib.suppress(PermissionError):
                fd = open_regular(path, os.O_RDWR, StoreFileError)
        self.writable = fd is not None
        if fd is None:
            fd = open_regular(path, os.O_RDONLY, StoreFileError)
        st = os.fstat(fd)
        self.fd, self.ident = fd, (st.st_dev, st.st_ino)

    def write(self, path: Path, head: Head) -> None:
        """Record ``head`` durably: in place into the older slot (one ``fdatasync``), or, when
        the file is missing, unreadable, in the JSON form or not writable in place, as a new
        two-slot file replacing it atomically."""
        state = self.state if self.fresh and self.fd is not None else None
        if state is None:
            try:
                state = self.current(path, True)
            except LedgerFormatError:
                state = None
        if state is None or state.version != 2 or not self.writable:
            page = encode_head_slot(head, 1)
            atomic_write(path, page + bytes(HEAD_SLOT_SIZE))
            self.close()  # the path names a new file: reopened by the next read
            return
        self._write_slot(head, state, encode_head_slot(head, state.counter + 1))

    def _write_slot(self, head: Head, state: HeadState, page: bytes) -> None:
        """Write ``page`` (``head`` under ``state``'s counter plus one) in place into the
        slot ``state`` does not name, then ``fdatasync``."""
        old = self.data
        assert self.fd is not None and old is not None
        slot, counter = 1 - state.slot, state.counter + 1
        at = slot * HEAD_SLOT_SIZE
        self.data, self.state = None, None  # unknown until the write is durable
        _pwrite_all(self.fd, page, at)
        datasync(self.fd)
        self.data = old[:at] + page + old[at + HEAD_SLOT_SIZE :]
        self.state = HeadState(head, 2, slot, counter)


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    written = os.pwrite(fd, data, offset)
    if written == len(data):  # the usual case: one call
        return
    view = memoryview(data)[written:]
    offset += written
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


# --- the bytes of the ledger -------------------------------------------------------------------


class _File(LedgerFile):
    """``ledger.jsonl`` open as ``fd`` (closed by the store, not here); ``ident``: its
    ``(st_dev, st_ino)``, which the path must still name for a write (``None``: read-only)."""

    __slots__ = ("_fd", "_ident", "_store", "_writable")

    def __init__(
        self,
        store: FolderLedgerStore,
        fd: int,
        writable: bool,
        ident: tuple[int, int] | None = None,
    ) -> None:
        self._store, self._fd, self._writable, self._ident = store, fd, writable, ident

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def read(self, offset: int, length: int) -> bytes:
        return os.pread(self._fd, length, offset)

    def fingerprint(self) -> str:
        """``st_dev:st_ino:st_size:st_mtime_ns:st_ctime_ns`` of the open ``ledger.jsonl``.

        Any write changes the size or the ctime (which, unlike the mtime, no system call sets
        back); a replaced file has another inode. See :meth:`LedgerFile.fingerprint` for the
        coarse-clock limit.
        """
        st = os.fstat(self._fd)
        return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"

    def _check_writable(self) -> None:
        """Refuse a write unless this block is writable and ``ledger.jsonl`` still names the
        locked file (one ``lstat``): a file another program replaced, removed or turned into
        a symlink while the lock was held (ignoring it) is never written through.

        Raises:
            LedgerError: a read-only block.
            StoreFileError: the name no longer names the locked regular file (nothing
                written).
        """
        if not self._writable:
            raise LedgerError(f"{self._store.path}: cannot write under a read-only lock")
        if self._ident is not None and self._store._named(self._ident) is None:
            raise StoreFileError(
                str(self._store.path),
                "replaced or removed while this process held its lock; nothing written",
            )

    def append(self, offset: int, data: bytes) -> None:
        """See :meth:`LedgerFile.append`: ``pwrite`` at ``offset``, then ``fdatasync``, once
        the path is checked to still name the locked file (else ``StoreFileError``)."""
        self._check_writable()
        _pwrite_all(self._fd, data, offset)
        datasync(self._fd)

    def quarantine(self, offset: int, fragment: bytes) -> None:
        self._check_writable()
        torn = self._store.torn_path
        log.warning(
            "Ledger %s: quarantining a torn tail (%d bytes at offset %d) to %s",
            self._store.path,
            len(fragment),
            offset,
            torn,
        )
        created = not os.path.lexists(torn)
        header = f"# quarantined {time.time():.3f} from offset {offset}\n".encode()
        tfd = open_regular(torn, os.O_WRONLY | os.O_APPEND | os.O_CREAT, StoreFileError)
        try:
            write_all(tfd, header + fragment + b"\n")
            os.fsync(tfd)
        finally:
            os.close(tfd)
        if created:
            fsync_dir(torn.parent)
        os.ftruncate(self._fd, offset)
        os.fsync(self._fd)

    def stamp(self, *, settled: bool) -> str | None:
        """:meth:`fingerprint` of ``ledger.jsonl`` (see :meth:`LedgerFile.stamp`); settled:
        ``None`` unless its change time is strictly older than ``ledger.tree.state``'s (a
        change in the clock tick of the state's write could not be told apart)."""
        if settled:
            try:
                state = os.lstat(self._store.state_path)
            except FileNotFoundError:
                return None
            changed = os.fstat(self._fd).st_ctime_ns
            if not stat.S_ISREG(state.st_mode) or changed >= state.st_ctime_ns:
                return None
        return self.fingerprint()

    @contextlib.contextmanager
    def shared_lock(self) -> Iterator[None]:
        fcntl.flock(self._fd, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)


class _Ids(IndexFile):
    """``ledger.ids`` open as ``fd`` (``None``: it does not exist, size 0)."""

    __slots__ = ("_fd", "_label", "_writable")

    def __init__(self, fd: int | None, writable: bool, label: str) -> None:
        self._fd, self._writable, self._label = fd, writable, label

    def size(self) -> int:
        return 0 if self._fd is None else os.fstat(self._fd).st_size

    def read(self, offset: int, length: int) -> bytes:
        return b"" if self._fd is None else os.pread(self._fd, length, offset)

    def write(self, offset: int, data: bytes) -> None:
        if self._fd is None or not self._writable:
            raise LedgerError(f"{self._label}: the id index is not open for writing")
        _pwrite_all(self._fd, data, offset)

    def flush(self) -> None:
        if self._fd is not None and self._writable:
            os.fsync(self._fd)


class _Handle:
    """One holder's open files: ``ledger.jsonl`` (its ``flock`` is the lock) and the head."""

    __slots__ = ("fd", "head", "ident", "pid", "writable")

    def __init__(self, fd: int, writable: bool) -> None:
        st = os.fstat(fd)
        self.fd, self.writable, self.pid = fd, writable, os.getpid()
        self.ident = (st.st_dev, st.st_ino)
        self.head = _HeadFile()

    def close(self) -> None:
        """Close both files (the lock, if held, goes with the last descriptor of the file)."""
        self.head.close()
        os.close(self.fd)


def _close_all(handles: list[_Handle]) -> None:
    pid = os.getpid()
    while handles:
        handle = handles.pop()
        if handle.pid == pid:
            with contextlib.suppress(OSError):
                handle.close()


class _Locked(AbstractContextManager[LedgerFile]):
    """``FolderLedgerStore.locked``'s block (a plain class: no generator on the save path)."""

    __slots__ = ("_handle", "_outer", "_store", "_write")

    def __init__(self, store: FolderLedgerStore, write: bool) -> None:
        self._store, self._write = store, write
        self._handle: _Handle | None = None
        self._outer: tuple[_Handle | None, bool] = (None, False)

    def __enter__(self) -> LedgerFile:
        store, write = self._store, self._write
        handle = store._lock(write)
        local = store._local
        self._outer = getattr(local, "handle", None), getattr(local, "write", False)
        local.handle, local.write = handle, write
        self._handle = handle
        return _File(store, handle.fd, write, handle.ident)

    def __exit__(self, *exc: object) -> None:
        store, handle = self._store, self._handle
        assert handle is not None
        self._handle = None
        store._local.handle, store._local.write = self._outer
        store._unlock(handle)


class FolderLedgerStore(LedgerStore):
    """A ledger kept as files in one folder of a POSIX file system (today's format).

    Args:
        path: the ``ledger.jsonl`` file; ``ledger.head``, ``ledger.torn``, ``ledger.tree``,
            ``ledger.tree.state`` and ``ledger.ids`` live beside it. Its folder is created
            (durably) by the first ``locked(write=True)``.

    Raises:
        LedgerError: ``path`` is not a non-empty ``str`` or path-like.

    The lock is an ``fcntl.flock`` on ``ledger.jsonl`` (created if missing by a writer, with
    its folder fsynced); a reader without write permission locks it through a read-only
    descriptor. ``write_head`` writes one slot of ``ledger.head`` in place and ``fdatasync``s
    it. A writer's descriptors stay open between locks (:meth:`close` releases them; they are
    also closed when the store is garbage collected).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = as_path(path, "a ledger path")
        self.head_path = self.path.with_name("ledger.head")
        self.torn_path = self.path.with_name("ledger.torn")
        self.sidecar_path = self.path.with_name(SIDECAR_NAME)
        self.state_path = self.path.with_name(STATE_NAME)
        self.ids_path = self.path.with_name(IDS_NAME)
        # As text for the calls of every lock and append (no ``pathlib`` conversion there).
        self._path_text = str(self.path)
        self._head_text = str(self.head_path)
        self._idle: list[_Handle] = []
        self._pool = threading.Lock()
        self._local = threading.local()
        weakref.finalize(self, _close_all, self._idle)
        renew_in_child(self)

    def __repr__(self) -> str:
        return f"FolderLedgerStore({str(self.path)!r})"

    def _after_fork_in_child(self) -> None:
        """In a forked child (``_fork.renew_in_child``): a new ``_pool`` lock. It guards short
        sections that run no user code, so only a parent thread that does not exist in the
        child can have held it; the child's sections use the new one."""
        self._pool = threading.Lock()

    @property
    def label(self) -> str:
        """The ``ledger.jsonl`` path as text."""
        return str(self.path)

    def exists(self) -> bool:
        """Whether ``ledger.jsonl`` exists (a symlink or FIFO in its place counts: opening it
        then raises ``StoreFileError``)."""
        return os.path.lexists(self.path)

    def close(self) -> None:
        """Close the descriptors kept open between locks (the store stays usable)."""
        with self._pool:
            _close_all(self._idle)

    def locked(self, *, write: bool) -> AbstractContextManager[LedgerFile]:
        """See :meth:`LedgerStore.locked`: an ``fcntl.flock`` on ``ledger.jsonl``, through a
        descriptor kept open between blocks (re-checked by one ``lstat``: the path must
        still name it; a read-only block may use a writer's, a writer never a read-only
        one)."""
        return _Locked(self, write)

    @contextlib.contextmanager
    def reader(self) -> Iterator[LedgerFile | None]:
        """See :meth:`LedgerStore.reader`: ``ledger.jsonl`` opened read-only."""
        try:
            fd = open_regular(self.path, os.O_RDONLY, StoreFileError)
        except FileNotFoundError:
            yield None
            return
        try:
            yield _File(self, fd, False)
        finally:
            os.close(fd)

    def _lock(self, write: bool) -> _Handle:
        """A handle holding the lock on the file ``path`` names now."""
        pid = os.getpid()
        while True:
            handle = self._checkout(pid, write)
            if handle is None:
                handle = _Handle(self._open(write), write)
            if self._lock_named(handle) is not None:
                return handle
            # Replaced, removed or made a symlink since it was opened: lock the new one.

    def _lock_named(self, handle: _Handle) -> os.stat_result | None:
        """Lock ``handle`` exclusively and check that ``path`` still names its file.

        Returns:
            The ``lstat`` of ``path`` taken under the lock (the same inode as the open file,
            so its size and times are the file's); ``None`` when the path names something
            else now (replaced, removed, a symlink): the lock is released and the handle
            closed.
        """
        try:
            fcntl.flock(handle.fd, fcntl.LOCK_EX)
        except BaseException:
            handle.close()
            raise
        handle.head.fresh = False  # another holder may have written it meanwhile
        st = self._named(handle.ident)
        if st is not None:
            return st
        fcntl.flock(handle.fd, fcntl.LOCK_UN)
        handle.close()
        return None

    def _named(self, ident: tuple[int, int]) -> os.stat_result | None:
        """The ``lstat`` of ``path`` when it names the regular file ``ident``
        (``(st_dev, st_ino)``), else ``None`` (replaced, removed, a symlink)."""
        try:
            st = os.lstat(self._path_text)
        except OSError:
            return None
        if (st.st_dev, st.st_ino) == ident and stat.S_ISREG(st.st_mode):
            return st
        return None

    def append_unchanged(
        self,
        pid: int,
        held: bool,
        last: Head,
        line: bytes,
        seq: int,
        digest: str,
    ) -> Head | None:
        """The fast path of ``Ledger.append`` (one entry): write ``line`` and the head after
        it, only when the ledger and ``ledger.head`` are exactly as the append that wrote
        ``last`` left them; else ``None``, nothing written (the caller takes the general
        path, which reads, checks and decides).

        "Exactly as left": this process (``pid``, from ``os.getpid``) holds an idle writable
        handle (or, with ``held``, the calling thread's ``locked(write=True)`` block holds
        one), ``ledger.jsonl`` and ``ledger.head`` still name its two files (one ``lstat``
        each), the ledger's size is ``last.end`` and its fingerprint ``last.fingerprint``
        (from the ``lstat`` taken under the lock, or, inside a held block, one ``lstat`` now),
        and the head's 8 KiB, read now, are the bytes written when ``last`` was recorded
        through that handle. The general path finds then the same tail (the
        entry of ``last``), no rollback, no torn fragment and an unchanged chain; this path
        writes what it would write, in the same order: the line (``pwrite``,
        ``fdatasync``), then one head slot in place (``pwrite``, ``fdatasync``).

        Args:
            pid: the calling process's id.
            held: the calling thread holds the exclusive lock through ``locked`` (its
                handle is used; else the lock is taken and released here).
            last: the head this caller last wrote (the very object).
            line: the entry's line and its newline (``entry.line() + b"\\n"``).
            seq: the entry's seq (``last.seq + 1``).
            digest: the entry's hash.

        Returns:
            The new head (acknowledged: durable), or ``None``.

        Raises:
            OSError: from the file system (the line may be written but not acknowledged:
                the next append finds another fingerprint and checks everything).
        """
        if held:
            handle: _Handle | None = getattr(self._local, "handle", None)
            if handle is None or handle.pid != pid or not self._local.write:
                return None
            named = self._named(handle.ident)  # replaced while held: the general path refuses
            if named is None:
                return None
            return self._append_unchanged(handle, named, last, line, seq, digest)
        # ``_lock(write=True)`` when its usual case holds: the newest idle handle is this
        # process's and writable (else ``None``: the general path locks as it does).
        pool, idle = self._pool, self._idle
        pool.acquire()
        try:
            if not idle:
                return None
            handle = idle[-1]
            if handle.pid != pid or not handle.writable:
                return None
            idle.pop()
        finally:
            pool.release()
        st = self._lock_named(handle)  # the ``lstat`` of the path, taken under the lock
        if st is None:  # replaced or removed: the general path opens it anew
            return None
        try:
            return self._append_unchanged(handle, st, last, line, seq, digest)
        finally:
            fcntl.flock(handle.fd, fcntl.LOCK_UN)
            pool.acquire()
            try:
                if len(idle) < _IDLE_HANDLES:
                    idle.append(handle)
                    handle = None
            finally:
                pool.release()
            if handle is not None:
                handle.close()

    def _append_unchanged(
        self, handle: _Handle, st: os.stat_result, last: Head, line: bytes, seq: int, digest: str
    ) -> Head | None:
        """Under the lock: ``st``, the ledger's status taken under it (``lstat`` of the path
        naming the open file), decides whether it is as ``last`` left it;
        then ``ledger.head`` is checked and both are written. One function, no helpers: a
        call costs, and Python after a flush runs on cold caches."""
        fd = handle.fd
        end = st.st_size
        if (
            end != last.end
            or f"{st.st_dev}:{st.st_ino}:{end}:{st.st_mtime_ns}:{st.st_ctime_ns}"
            != last.fingerprint
        ):
            return None
        # ``ledger.head``: the path still names the open, writable two-slot file (the same
        # inode as the one opened through ``open_regular``: still a regular file), and its
        # bytes, read now through the descriptor, are exactly the ones written when ``last``
        # was recorded through it (this very object): no other writer touched it since.
        # Nothing is decoded.
        head_file = handle.head
        state, data, head_fd = head_file.state, head_file.data, head_file.fd
        if state is None or state.head is not last or head_fd is None or not head_file.writable:
            return None
        try:
            head_st = os.lstat(self._head_text)
        except OSError:
            return None
        ident = head_file.ident
        assert ident is not None and data is not None
        if (
            head_st.st_ino != ident[1]
            or head_st.st_dev != ident[0]
            or os.pread(head_fd, HEAD_SIZE + 1, 0) != data
        ):
            return None
        head_file.fresh = True
        written = os.pwrite(fd, line, end)
        if written != len(line):  # never seen: a regular file takes the whole line
            _pwrite_all(fd, line[written:], end + written)
        # The write set the size and both times; the flush changes none of them. So the
        # fingerprint, the head and the head's page (from the byte template; the checking
        # encoder past 2**53 - 1, never in practice) are made now, and nothing but the
        # head's write runs between the two flushes.
        st = os.fstat(fd)
        size = st.st_size
        fingerprint = f"{st.st_dev}:{st.st_ino}:{size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
        head = _new(Head)
        set_seq, set_hash, set_end, set_fingerprint = _HEAD_FIELDS
        set_seq(head, seq)
        set_hash(head, digest)
        set_end(head, size)
        set_fingerprint(head, fingerprint)
        slot, counter = 1 - state.slot, state.counter + 1
        if counter > _MAX_INT:
            page = encode_head_slot(head, counter)
        else:
            page = head_slot_page(seq, digest, size, fingerprint, counter)
        at = slot * HEAD_SLOT_SIZE
        after = data[:at] + page + data[at + HEAD_SLOT_SIZE :]
        after_state = _new(HeadState)
        set_head, set_version, set_slot, set_counter = _STATE_FIELDS
        set_head(after_state, head)
        set_version(after_state, 2)
        set_slot(after_state, slot)
        set_counter(after_state, counter)
        sync = getattr(os, _DATASYNC)
        sync(fd)
        head_file.data, head_file.state = None, None  # unknown until the write is durable
        written = os.pwrite(head_fd, page, at)
        if written != HEAD_SLOT_SIZE:  # never seen, as above
            _pwrite_all(head_fd, page[written:], at + written)
        sync(head_fd)
        head_file.data, head_file.state = after, after_state
        return head

    def _open(self, write: bool) -> int:
        if not write:
            return open_regular(self.path, os.O_RDONLY, StoreFileError)
        makedirs_durable(self.path.parent)
        existed = os.path.lexists(self.path)
        fd = open_regular(self.path, os.O_RDWR | os.O_CREAT, StoreFileError)
        if not existed:
            try:
                fsync_dir(self.path.parent)
            except BaseException:
                os.close(fd)
                raise
        return fd

    def _checkout(self, pid: int, write: bool) -> _Handle | None:
        """An idle handle of this process (a writable one for ``write``)."""
        with self._pool:
            for handle in [h for h in self._idle if h.pid != pid]:
                # Inherited through fork: its lock would be the parent's. Closing our copy
                # leaves the parent's descriptor (and any lock it holds) as it is.
                self._idle.remove(handle)
                with contextlib.suppress(OSError):
                    os.close(handle.fd)
                with contextlib.suppress(OSError):
                    if handle.head.fd is not None:
                        os.close(handle.head.fd)
            for n in range(len(self._idle) - 1, -1, -1):
                if self._idle[n].writable or not write:
                    return self._idle.pop(n)
        return None

    def _unlock(self, handle: _Handle) -> None:
        if handle.pid != os.getpid():  # a forked child leaving a block its parent entered
            with contextlib.suppress(OSError):
                os.close(handle.fd)
            return
        fcntl.flock(handle.fd, fcntl.LOCK_UN)
        with self._pool:
            if len(self._idle) < _IDLE_HANDLES:
                self._idle.append(handle)
                return
        handle.close()

    def _active(self) -> _Handle | None:
        """The handle of this thread's ``locked`` block, if any (and not a parent's)."""
        handle: _Handle | None = getattr(self._local, "handle", None)
        if handle is not None and handle.pid == os.getpid():
            return handle
        return None

    def read_head(self) -> Head | None:
        """See :meth:`LedgerStore.read_head`: ``ledger.head`` in either form
        (:func:`decode_head`); inside a lock through the descriptor kept open, decoded only
        when its bytes changed since this store last read or wrote them."""
        handle = self._active()
        if handle is None:
            return read_head(self.head_path)
        state = handle.head.current(self.head_path, handle.writable)
        return None if state is None else state.head

    def write_head(self, head: Head) -> None:
        """See :meth:`LedgerStore.write_head`: one slot of ``ledger.head`` written in place
        and ``fdatasync``ed; a missing head, one in the JSON form (migrated) or one that
        cannot be read is replaced atomically by a new two-slot file (temp file, fsync,
        rename, folder fsync)."""
        handle = self._active()
        if handle is not None:
            if not getattr(self._local, "write", False):
                raise LedgerError(f"{self.path}: cannot write under a read-only lock")
            handle.head.write(self.head_path, head)
            return
        file = _HeadFile()
        try:
            file.write(self.head_path, head)
        finally:
            file.close()

    def remove_head(self) -> None:
        """See :meth:`LedgerStore.remove_head`: ``ledger.head`` unlinked (if present), then
        the folder fsynced."""
        try:
            os.unlink(self.head_path)
        except FileNotFoundError:
            return
        fsync_dir(self.head_path.parent)

    def remove_leftovers(self) -> tuple[str, ...]:
        """See :meth:`LedgerStore.remove_leftovers`: unlink each temp file a killed atomic
        replacement of ``ledger.head``, ``ledger.tree``, ``ledger.tree.state`` or
        ``ledger.ids`` left in the folder, then fsync the folder (only when one was removed).

        Safe because every writer of those four files holds the ledger's exclusive lock
        while its temp file exists (``Ledger.append`` and ``recover`` for the head; the
        proofs' sync and rebuild and ``accept_rollback`` for the other three, through
        ``locked``, whose ``flock`` is exclusive even with ``write=False``; the one
        ``write_head`` outside a block, ``ledger export``'s, writes into a private folder
        renamed into place once complete; a ``TreeLog`` or store used directly on a ledger's
        files must hold the lock as these do), and this runs
        only inside the calling thread's ``locked`` block, once ``ledger.jsonl`` is checked
        to still name the locked file (else nothing is removed: a writer of the file the
        path names now would not wait for this lock). Only names :data:`_LEFTOVER` matches
        exactly are removed, and only a regular file or a symlink (the link itself: ``unlink``
        never follows it); a folder, FIFO or other file of such a name is left. The other
        temp files of the folder are never touched: ``ledger.cosigned`` and
        ``ledger.witnesses`` are written by ``witness_ledger`` without the lock (and the
        recovery records through the same ``write_side_file``, whose contract asks none),
        ``testimony.json`` by a bank under its own lock, and ``memory/`` by
        ``records.write_record`` and other programs without it, so one of those may be in
        flight. A folder that cannot be listed, or a name that cannot be removed (a
        read-only folder), is left as it is: the files are harmless.

        Returns:
            The names removed, sorted.

        Raises:
            LedgerError: the calling thread holds no ``locked`` block of this store (nothing
                is listed or removed).
            OSError: the folder cannot be fsynced after a removal.
        """
        handle = self._active()
        if handle is None:
            raise LedgerError(f"{self.label}: leftovers are removed only under the ledger lock")
        if self._named(handle.ident) is None:
            return ()  # replaced while held: the lock no longer excludes its writers
        folder = self.path.parent
        removed: list[str] = []
        try:
            with os.scandir(folder) as listing:
                found = sorted(
                    (entry.name, entry.path)
                    for entry in listing
                    if _LEFTOVER.fullmatch(entry.name)
                    and (entry.is_symlink() or entry.is_file(follow_symlinks=False))
                )
        except OSError as exc:  # harmless files: never a reason to fail the caller
            log.debug("%s: temp files not looked for (%s)", self.label, exc)
            return ()
        for name, path in found:
            try:
                os.unlink(path)  # the name itself: a symlink is removed, never its target
            except OSError as exc:
                log.debug("%s: temp file %s left (%s)", self.label, name, exc)
                continue
            removed.append(name)
        if removed:
            fsync_dir(folder)
            log.info("%s: removed %d temp file(s) of interrupted writes", self.label, len(removed))
        return tuple(removed)

    # --- files beside the ledger -------------------------------------------------------------

    def side_files(self) -> list[str]:
        """See :meth:`LedgerStore.side_files`: the names in the ledger's folder that match
        :data:`~merkle_memory.ledger.storage.SIDE_FILE_NAME` (none when the folder does not
        exist)."""
        try:
            names = os.listdir(self.path.parent)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(n for n in names if _SIDE_FILE.fullmatch(n))

    def read_side_file(self, name: str) -> bytes | None:
        """See :meth:`LedgerStore.read_side_file`: the file beside ``ledger.jsonl``."""
        return read_regular_file(
            self.path.with_name(check_side_file_name(name, self.label)), StoreFileError
        )

    def write_side_file(self, name: str, data: bytes) -> None:
        """See :meth:`LedgerStore.write_side_file`: an atomic write beside ``ledger.jsonl``
        (temp file, fsync, rename, folder fsync); a recovery record is made read-only
        (mode 0444), the other files get the umask's mode."""
        check_side_file_name(name, self.label)
        mode = 0o444 if name.startswith("ledger.recovery-") else None
        atomic_write(self.path.with_name(name), bytes(data), mode=mode)

    @contextlib.contextmanager
    def id_index(self, *, write: bool) -> Iterator[IndexFile | None]:
        """See :meth:`LedgerStore.id_index`: ``ledger.ids`` (size 0 when it does not exist)."""
        try:
            fd: int | None = open_regular(
                self.ids_path, os.O_RDWR if write else os.O_RDONLY, StoreFileError
            )
        except FileNotFoundError:
            fd = None
        try:
            yield _Ids(fd, write, str(self.ids_path))
        finally:
            if fd is not None:
                os.close(fd)

    def replace_id_index(self, data: bytes | bytearray) -> None:
        """See :meth:`LedgerStore.replace_id_index` (atomic write of ``ledger.ids``)."""
        atomic_write(self.ids_path, data)

    def sidecar(self) -> TreeLog:
        """See :meth:`LedgerStore.sidecar`: a ``TreeLog`` of ``ledger.tree``."""
        return TreeLog(self.sidecar_path)

    def append_sidecar(self, leaf_hashes: Sequence[bytes]) -> None:
        """See :meth:`LedgerStore.append_sidecar` (``TreeLog.append``)."""
        TreeLog(self.sidecar_path).append(leaf_hashes)

    def truncate_sidecar(self, leaves: int) -> None:
        """See :meth:`LedgerStore.truncate_sidecar`: truncate ``ledger.tree``, fsync."""
        fd = open_regular(self.sidecar_path, os.O_RDWR, StoreFileError)
        try:
            os.ftruncate(fd, node_count(leaves) * 32)
            os.fsync(fd)
        finally:
            os.close(fd)

    def clear_sidecar(self) -> None:
        """See :meth:`LedgerStore.clear_sidecar` (``TreeLog.rebuild`` with no leaves)."""
        TreeLog.rebuild(self.sidecar_path, [])

    def read_sidecar_state(self) -> bytes | None:
        """See :meth:`LedgerStore.read_sidecar_state`: ``ledger.tree.state``."""
        return read_regular_file(self.state_path, StoreFileError)

    def write_sidecar_state(self, data: bytes) -> None:
        """See :meth:`LedgerStore.write_sidecar_state` (atomic write)."""
        atomic_write(self.state_path, data)


def as_store(value: Any, what: str = "a ledger path") -> LedgerStore:
    """``value`` itself when it is a :class:`LedgerStore`; the PostgreSQL store of a
    ``postgresql://...#tenant`` URL; else the folder store of a path.

    Raises:
        LedgerError: ``value`` is neither a store nor a non-empty ``str`` or path-like, or a
            URL names no valid tenant.
    """
    if isinstance(value, LedgerStore):
        return value
    if _pg.is_url(value):
        return PostgresLedgerStore(value)
    return FolderLedgerStore(as_path(value, what))

"""The POSIX folder as a ledger store: ``ledger.jsonl`` and the files beside it (private).

Files, all in the ledger's folder (DESIGN section 4, ``docs/FORMAT.md``): ``ledger.jsonl`` (the
lines), ``ledger.head`` (``{"end", "fingerprint", "hash", "seq"}`` in RFC 8785 form plus a
newline, replaced atomically), ``ledger.torn`` (quarantined fragments, each after a header line),
``ledger.tree`` (the Merkle sidecar, see ``treelog``) and ``ledger.tree.state`` (its sync
state). The lock is an ``fcntl.flock`` on ``ledger.jsonl`` itself.

Every one of these files is opened by ``_fsio.open_regular``: a symlink (dangling or not), a
FIFO, a device or a folder in its place raises ``StoreFileError`` and is never followed, read,
written, truncated or created through; new files are created by ``O_CREAT`` with
``O_NOFOLLOW``, or as exclusive temp files in the folder renamed over the name.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import stat
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from .. import _pg, canonical
from .._fsio import (
    atomic_write,
    exclusive_lock,
    fsync_dir,
    makedirs_durable,
    open_regular,
    read_regular_file,
)
from ..errors import CanonicalizationError, LedgerError, LedgerFormatError, StoreFileError
from ._entry import as_path, schema_problem
from ._postgres import PostgresLedgerStore
from .storage import Head, LedgerFile, LedgerStore
from .treelog import SIDECAR_NAME, TreeLog, node_count

__all__ = ["STATE_NAME", "FolderLedgerStore", "as_store", "read_head"]

_MAX_END: Final = 2**53 - 1
_FINGERPRINT: Final = re.compile(r"[!-~]{1,128}")
_HEAD_KEYS: Final = frozenset({"end", "fingerprint", "hash", "seq"})

STATE_NAME: Final = "ledger.tree.state"
"""File name of the sidecar's sync state inside a tenant directory."""

log = logging.getLogger("merkle_memory.ledger")


def read_head(path: str | os.PathLike[str]) -> Head | None:
    """Read a ``ledger.head`` file: ``{"end": ..., "fingerprint": ..., "hash": ..., "seq": ...}``
    in RFC 8785 form plus a newline (``end`` and ``fingerprint`` missing in heads written
    before they were recorded).

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
    try:
        obj = canonical.loads(data.rstrip(b"\n"))
    except CanonicalizationError as exc:
        raise LedgerFormatError(f"ledger.head is unreadable: {exc}") from None
    if type(obj) is not dict or not {"seq", "hash"} <= obj.keys() <= _HEAD_KEYS:
        raise LedgerFormatError(
            "ledger.head is unreadable: not a {end, fingerprint, hash, seq} object"
        )
    end = obj.get("end")
    if end is not None and (type(end) is not int or not 0 < end <= _MAX_END):
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


class _File(LedgerFile):
    """``ledger.jsonl`` open as ``fd`` (closed by the store's ``with`` block, not here)."""

    __slots__ = ("_fd", "_store", "_writable")

    def __init__(self, store: FolderLedgerStore, fd: int, writable: bool) -> None:
        self._store, self._fd, self._writable = store, fd, writable

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

    def _refuse_read_only(self) -> None:
        if not self._writable:
            raise LedgerError(f"{self._store.path}: cannot write under a read-only lock")

    def append(self, offset: int, data: bytes) -> None:
        self._refuse_read_only()
        view = memoryview(data)
        while view:
            written = os.pwrite(self._fd, view, offset)
            view = view[written:]
            offset += written
        os.fsync(self._fd)

    def quarantine(self, offset: int, fragment: bytes) -> None:
        self._refuse_read_only()
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
            view = memoryview(header + fragment + b"\n")
            while view:
                view = view[os.write(tfd, view) :]
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


class FolderLedgerStore(LedgerStore):
    """A ledger kept as files in one folder of a POSIX file system (today's format).

    Args:
        path: the ``ledger.jsonl`` file; ``ledger.head``, ``ledger.torn``, ``ledger.tree``
            and ``ledger.tree.state`` live beside it. Its folder is created (durably) by the
            first ``locked(write=True)``.

    Raises:
        LedgerError: ``path`` is not a non-empty ``str`` or path-like.

    The lock is an ``fcntl.flock`` on ``ledger.jsonl`` (created if missing by a writer, with
    its folder fsynced); a reader without write permission locks it through a read-only
    descriptor. ``write_head`` is one temp file, fsync, rename and folder fsync.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = as_path(path, "a ledger path")
        self.head_path = self.path.with_name("ledger.head")
        self.torn_path = self.path.with_name("ledger.torn")
        self.sidecar_path = self.path.with_name(SIDECAR_NAME)
        self.state_path = self.path.with_name(STATE_NAME)

    def __repr__(self) -> str:
        return f"FolderLedgerStore({str(self.path)!r})"

    @property
    def label(self) -> str:
        """The ``ledger.jsonl`` path as text."""
        return str(self.path)

    def exists(self) -> bool:
        """Whether ``ledger.jsonl`` exists (a symlink or FIFO in its place counts: opening it
        then raises ``StoreFileError``)."""
        return os.path.lexists(self.path)

    @contextlib.contextmanager
    def locked(self, *, write: bool) -> Iterator[LedgerFile]:
        """See :meth:`LedgerStore.locked`: an ``fcntl.flock`` on ``ledger.jsonl``."""
        if write:
            makedirs_durable(self.path.parent)
            lock = exclusive_lock(self.path, StoreFileError)
        else:
            lock = _read_only_lock(self.path)
        with lock as fd:
            yield _File(self, fd, write)

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

    def read_head(self) -> Head | None:
        """See :meth:`LedgerStore.read_head`: :func:`read_head` of ``ledger.head``."""
        return read_head(self.head_path)

    def write_head(self, head: Head) -> None:
        """See :meth:`LedgerStore.write_head`: temp file, fsync, rename, fsync the folder."""
        fields: dict[str, int | str] = {"seq": head.seq, "hash": head.hash}
        if head.end is not None:
            fields["end"] = head.end
        if head.fingerprint is not None:
            fields["fingerprint"] = head.fingerprint
        atomic_write(self.head_path, canonical.dumps(fields) + b"\n")

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


@contextlib.contextmanager
def _read_only_lock(path: Path) -> Iterator[int]:
    """Hold an exclusive ``flock`` on ``path`` through a read-only descriptor."""
    fd = open_regular(path, os.O_RDONLY, StoreFileError)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)

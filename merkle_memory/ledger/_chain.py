"""The ledger: an append-only JSONL hash chain sealing memory records (DESIGN section 4).

Quick start::

    from merkle_memory.ledger import Ledger, verify_ledger
    led = Ledger("tenant/ledger.jsonl")
    entry = led.append("m1", "<64-hex testimony digest>")        # fsynced, head updated
    report = verify_ledger("tenant/ledger.jsonl", {"m1": "<64-hex testimony digest>"})
    report.to_dict()["chain"]                                    # 'intact'

Storage: every byte is reached through a :class:`~merkle_memory.ledger.storage.LedgerStore`
(lock, bytes, head, torn-tail quarantine); the algorithm here (find the tail, refuse a rollback,
quarantine a torn fragment, append, write the head) is the same for every store. A path means
the folder store: ``ledger.jsonl`` (one RFC 8785 entry per line), ``ledger.head`` (seq, hash,
end and fingerprint of the last acknowledged entry, in two checksummed slots written in place
alternately, ``docs/FORMAT.md`` section 4.3) and ``ledger.torn`` (quarantined fragments of
crashed appends), all in one folder.

Locking: every append takes the store's exclusive lock (the folder store: an ``fcntl.flock``
on ``ledger.jsonl`` itself, the file created if missing), checks the tail against
``ledger.head`` and against what this object last wrote, quarantines a torn tail, appends and
flushes, then writes the head. Readers (``entries``, ``verify_ledger`` given a mapping) take no
lock: they see a prefix of whole lines plus at most one fragment, which verify reports as a
break; ``verify_ledger`` given a callable takes a brief shared lock to note a consistent size
(see there). Threads sharing one object share flushes (group commit, ``append_many``).

Cost of one append on the folder store (DESIGN section 4 fixes the order; group commit shares
all of it among the entries of one ``append_many`` and the calls of threads sharing the object):

- the usual case, one entry after this object's own last append (``_append_fast``): the
  lock, one ``lstat`` per file (the names still hold the open files; the ledger's, taken
  under the lock, also gives its size and fingerprint, which must be the ones that append
  left), the head's 8 KiB read and compared byte for byte with what it wrote (not decoded),
  then the two flushes below, the line and the head slot from byte templates, and one
  ``fstat`` for the new fingerprint. Everything else takes the general path described next,
  which reads, checks and decides.
- descriptors: ``ledger.jsonl`` and ``ledger.head`` stay open between appends (one ``lstat``
  each per lock checks that the names still hold them), so an append opens no file.
- reads: two ``fstat`` (size, fingerprint) and ``ledger.head`` (8 KiB, decoded only when its
  bytes changed since this object last saw them). When the ledger still has the fingerprint
  and size this object's last append left, its tail is that append's entry and nothing of the
  file is read; otherwise the last 4 KiB twice (to find an unterminated fragment, then the last
  complete line; 64 KiB blocks only when a line is longer), the tail line parsed and its hash
  checked, plus the backwards scan for the seq recorded in ``ledger.head`` when the file's tail
  is past it (a crash between the two steps), and the whole chain, once, when the fingerprint
  is not the one ``ledger.head`` records (a write this library did not acknowledge: see
  ``_refuse_broken``).
- flush 1, ``fdatasync`` of the ledger after the line is written: the entry is durable before
  anything says it exists. Without it a crash could keep the head (step 2) but lose the line,
  which reads as a rollback, and an acknowledged entry would be lost.
- flush 2, ``fdatasync`` of ``ledger.head`` after one slot is written in place: the new head is
  durable when the append returns, so the acknowledged entry is covered by rollback detection.
  A crash inside the write tears only that slot (its checksum fails; the other slot, one entry
  behind the file, is the head: harmless). The first head of a ledger, and one found in the
  older JSON form, is instead made whole by a temp file, fsync, rename and folder fsync.

The ledger file's own folder is fsynced only when a file is created in it (first append).
"""

from __future__ import annotations

import copy
import hmac
import os
import shlex
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .._fork import renew_in_child
from ..errors import LedgerBrokenError, LedgerError, LedgerFormatError, LedgerRollbackError
from ._entry import GENESIS, OPS, Entry, build_entries, build_one, parse_line
from ._folder import FolderLedgerStore, as_store
from ._tail import (
    WHITESPACE,
    is_complete_object,
    iter_line_blocks,
    iter_lines_backwards,
    read_tail,
    split_fragment,
)
from ._verify import Testimony, VerifyReport, _Walk, verify_ledger
from .storage import Head, LedgerFile, LedgerStore

__all__ = ["AppendHook", "Ledger"]

AppendHook = Callable[[Sequence[Entry]], None]
"""Called with the entries just appended, under the ledger lock, after ``ledger.head``."""

_SCAN_BACK_LINES: Final = 100_000


@dataclass(frozen=True, slots=True)
class _Tip:
    """The ledger as this object's last append left it: its fingerprint and size right after
    the append, and the entry that ends it."""

    fingerprint: str
    end: int
    entry: Entry


# ``_Tip(...)`` of the append fast path without the frozen dataclass's ``__init__``.
_TIP_FIELDS: Final = tuple(_Tip.__dict__[name].__set__ for name in ("fingerprint", "end", "entry"))


class _Request:
    """One ``append_many`` call waiting for a group commit (see ``Ledger._group_commit``)."""

    __slots__ = ("done", "entries", "error", "lead", "op", "pairs", "stamp")

    def __init__(self, pairs: list[tuple[str, str]], op: str, stamp: float) -> None:
        self.pairs, self.op, self.stamp = pairs, op, stamp
        self.entries: list[Entry] = []
        self.error: BaseException | None = None
        self.done = False
        self.lead = False

    def result(self) -> list[Entry]:
        if self.error is not None:
            raise self.error
        return self.entries


class _LedgerLock(AbstractContextManager[LedgerFile]):
    """``Ledger.locked``'s block (a plain class: no generator on the save path)."""

    __slots__ = ("_inner", "_ledger", "_outer", "_write")

    def __init__(self, ledger: Ledger, write: bool) -> None:
        self._ledger, self._write = ledger, write
        self._inner: AbstractContextManager[LedgerFile] | None = None
        self._outer: tuple[LedgerFile | None, bool, tuple[int, int] | None] = (None, False, None)

    def __enter__(self) -> LedgerFile:
        ledger, write = self._ledger, self._write
        ledger._mutex.acquire()
        try:
            held = ledger._held
            if held is not None and ledger.holds_lock:
                if write and not ledger._held_writable:
                    raise LedgerError(f"{ledger.store.label}: cannot write under a read-only lock")
                return held
            # A parent's, after a fork, is put back at the end.
            self._outer = held, ledger._held_writable, ledger._owner
            inner = ledger.store.locked(write=write)
            file = inner.__enter__()
            self._inner = inner
            ledger._held, ledger._held_writable = file, write
            ledger._owner = (os.getpid(), threading.get_ident())
            return file
        except BaseException:
            ledger._mutex.release()
            raise

    def __exit__(self, *exc: Any) -> None:
        ledger, inner = self._ledger, self._inner
        try:
            if inner is not None:
                self._inner = None
                ledger._held, ledger._held_writable, ledger._owner = self._outer
                inner.__exit__(*exc)
        finally:
            ledger._mutex.release()


class Ledger:
    """One ledger, safe to append to from many threads and processes.

    Args:
        path: the ``ledger.jsonl`` file (``ledger.head`` and ``ledger.torn`` live beside it;
            its folder is created, durably, on the first append), or any
            :class:`~merkle_memory.ledger.storage.LedgerStore`.
        on_append: optional hook ``hook(entries)`` run after every successful append, still
            under the ledger lock and after ``ledger.head`` is durable (so the entries are
            acknowledged even if the hook raises; its exception propagates to the caller).
            Use it to maintain derived files, e.g. a sidecar of RFC 6962 leaf hashes of
            ``entry.line()``. May also be set later as the ``on_append`` attribute.

    Attributes:
        store: the :class:`~merkle_memory.ledger.storage.LedgerStore` every byte goes through
            (a :class:`~merkle_memory.ledger.FolderLedgerStore` when given a path).
        on_append: the hook above, or ``None``.

    Raises:
        LedgerError: ``path`` is neither a store nor a non-empty ``str`` or path-like.

    Two ``Ledger`` objects on one ledger (in one or many processes) never fork the chain: the
    lock serializes them and each checks the tail in storage. Threads sharing one object
    share flushes (group commit, see ``append_many``). The object keeps the files of the
    folder store open between appends: ``close()`` (or ``with Ledger(path) as ledger:``)
    releases them, as does garbage collection; a forked child opens its own, and waits for
    the lock while the parent (any of its threads) holds it. In a forked child the object's
    thread locks are as if no thread but the forking one existed: a lock held at the fork by
    another thread of the parent is free in the child, a ``locked()`` block the forking
    thread was inside still holds its lock there (until that block ends), and calls other
    threads had queued for a group commit are dropped (they belong to the parent).
    """

    def __init__(
        self, path: LedgerStore | str | os.PathLike[str], *, on_append: AppendHook | None = None
    ):
        self.store = as_store(path)
        self.on_append = on_append
        self._last: Head | None = None
        self._tip: _Tip | None = None
        self._mutex = threading.RLock()
        # Group commit: calls from threads that do not hold the lock queue here; one of them
        # (the leader) commits every queued call under one lock, one write and one head.
        self._queue: list[_Request] = []
        self._leading = False
        self._leader = 0  # thread id of the leader while ``_leading``
        self._queue_cond = threading.Condition(threading.Lock())
        self._pid = os.getpid()
        # Who holds the lock through this object: the owning thread's id, so that
        # ``holds_lock`` is true only in that thread (others wait on ``_mutex``).
        self._held: LedgerFile | None = None
        self._held_writable = False
        self._owner: tuple[int, int] | None = None  # (process id, thread id) of the holder
        renew_in_child(self)

    def __repr__(self) -> str:
        return f"Ledger({self.store.label!r})"

    def _after_fork_in_child(self) -> None:
        """In a forked child (``_fork.renew_in_child``; only the forking thread runs): drop what
        the parent's other threads held. ``_mutex`` is kept when it is free or the forking
        thread holds it (its ``locked()`` block ends normally in the child); held by a thread
        that does not exist here, it is replaced, and that thread's block forgotten. The
        group-commit queue and its condition are always new: no user code runs under the
        condition's lock, so the forking thread is never inside it, and the calls queued
        belong to the parent's threads; a commit the forking thread was leading finishes
        under the new condition (``_group_commit`` reads it anew)."""
        if self._mutex.acquire(blocking=False):
            self._mutex.release()
        else:
            self._mutex = threading.RLock()
            self._held, self._held_writable, self._owner = None, False, None
        leading = self._leading and self._leader == threading.get_ident()
        self._queue_cond = threading.Condition(threading.Lock())
        self._pid, self._queue, self._leading = os.getpid(), [], leading

    def close(self) -> None:
        """Release the descriptors kept open between appends (``LedgerStore.close``); the
        object stays usable. Also done when the object is garbage collected, or by ``with
        Ledger(path) as ledger:`` at the end of the block."""
        self.store.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def path(self) -> Path:
        """The ``ledger.jsonl`` file of a folder ledger.

        Raises:
            LedgerError: the ledger is not kept in a folder (another ``LedgerStore``).
        """
        return self._folder().path

    @property
    def head_path(self) -> Path:
        """``ledger.head`` beside ``path`` (folder ledgers only, as ``path``)."""
        return self._folder().head_path

    @property
    def torn_path(self) -> Path:
        """``ledger.torn`` beside ``path`` (folder ledgers only, as ``path``)."""
        return self._folder().torn_path

    def _folder(self) -> FolderLedgerStore:
        if not isinstance(self.store, FolderLedgerStore):
            raise LedgerError(f"{self.store.label} is not kept in a folder")
        return self.store

    @property
    def holds_lock(self) -> bool:
        """Whether the calling thread holds the ledger lock through this object (inside its
        ``locked()`` block). Another thread's block does not count: that thread waits; nor
        does a block a forked child inherited from its parent (the child locks anew)."""
        return self._owner == (os.getpid(), threading.get_ident())

    def locked(self, *, write: bool = True) -> AbstractContextManager[LedgerFile]:
        """Hold the ledger lock (exclusive; a ``fcntl.flock`` on ``ledger.jsonl``) for a block.

        Re-entrant within one thread on this object: ``append`` and ``append_many`` called
        inside the block reuse the lock, so a caller can append and do more work (e.g. update
        a sidecar file) atomically with respect to every other writer.

        Args:
            write: ``True`` (appending): the folder and the file are created if missing and
                the bytes lent are writable. ``False`` (reading under the lock, e.g. to serve
                proofs): the file is opened read-only (``flock`` needs no write access, so a
                reader without write permission can hold it) and nothing is created.

        Yields:
            The ledger's bytes (:class:`~merkle_memory.ledger.storage.LedgerFile`), valid
            for the block.

        Raises:
            LedgerError: ``write`` inside a block holding the read-only lock (nothing is
                written).
            OSError: the folder cannot be created or the file cannot be opened (with
                ``write=False``: ``FileNotFoundError`` when there is no ledger file).
        """
        return _LedgerLock(self, write)

    def append(
        self, memory_id: str, content_sha256: str, *, op: str = "save", ts: float | None = None
    ) -> Entry:
        """Seal one record: append its entry, flush, then write ``ledger.head`` and flush.

        Args:
            memory_id: the record's id (non-empty, no NUL, at most 1024 characters).
            content_sha256: its testimony digest, 64-char lowercase hex.
            op: ``"save"``, ``"adopt"`` or ``"forget"`` (a tombstone, ``Tenant.forget``).
            ts: epoch seconds (default: now), rounded to microseconds.

        Returns:
            The entry, acknowledged (durable in the file and in ``ledger.head``).

        Raises:
            LedgerFormatError: a bad argument, or an unreadable ``ledger.head``.
            LedgerRollbackError: the file went backwards versus ``ledger.head`` or versus what
                this object last wrote (nothing is written).
            LedgerBrokenError: the last complete line is not a valid entry, or the chain
                is broken where verify would say so (checked when the ledger is not as
                this library's last append left it; see ``_refuse_broken``); nothing is
                written.
            StoreFileError: a file of the store is a symbolic link, a FIFO, a device or a
                folder; or, inside a held ``locked()`` block, ``ledger.jsonl`` was replaced
                or removed since the lock was taken (nothing written).
            DatabaseError: a database store refused or cannot be reached.
            OSError: from the file system.
            KeyboardInterrupt: passes through, also while waiting for a lock. On a database
                store an entry that already reached the server is then committed by it as
                soon as the lock is free, as after a writer killed at that moment (it is not
                acknowledged here; verify shows it).
        """
        stamp = time.time() if ts is None else ts
        tip = self._tip
        if tip is not None and self.on_append is None:
            entry = self._append_fast(tip, memory_id, content_sha256, op, stamp)
            if entry is not None:
                return entry
        pairs = [(memory_id, content_sha256)]
        if type(op) is not str or op not in OPS:
            return self.append_many(pairs, op=op, ts=stamp)[0]  # it raises
        return self._append_pairs(pairs, op, stamp)[0]

    def _append_fast(
        self, tip: _Tip, memory_id: str, content_sha256: str, op: str, ts: float
    ) -> Entry | None:
        """``append`` when nothing changed since this object's last append (the usual case
        of a folder ledger written by one object), with no more work than the checks that
        prove it: ``FolderLedgerStore.append_unchanged``. ``None`` (nothing written) when
        that does not hold, another thread of this object is appending (group commit), a
        hook is set, or the arguments are not the usual ones: the caller then takes the
        general path, which decides and raises as documented.
        """
        store = self.store
        last = self._last
        if type(store) is not FolderLedgerStore or last is None:
            return None
        built = build_one(memory_id, content_sha256, op, ts, tip.entry.seq, tip.entry.hash)
        if built is None:
            return None
        mutex = self._mutex
        if not mutex.acquire(blocking=False):
            return None  # another thread holds it: queue for its group commit
        try:
            pid = os.getpid()
            if pid != self._pid or self._leading or self._queue or self._tip is not tip:
                return None
            held = self._held is not None
            if held and not (self._held_writable and self._owner == (pid, threading.get_ident())):
                return None
            entry, line = built
            self._tip = None  # unknown until the head is written
            head = store.append_unchanged(pid, held, last, line, entry.seq, entry.hash)
            if head is None:
                self._tip = tip
                return None
            self._last = head
            assert head.fingerprint is not None and head.end is not None
            after = object.__new__(_Tip)
            set_fingerprint, set_end, set_entry = _TIP_FIELDS
            set_fingerprint(after, head.fingerprint)
            set_end(after, head.end)
            set_entry(after, entry)
            self._tip = after
            return entry
        finally:
            mutex.release()

    def append_many(
        self, items: Iterable[tuple[str, str]], *, op: str = "save", ts: float | None = None
    ) -> list[Entry]:
        """Seal many records with one write and one flush of each file (group commit).

        Calls made at the same time from several threads sharing this object (that do not
        hold its lock) are committed together: one of them takes the lock and writes every
        waiting call's entries with one write of the lines and one head, each call's
        entries contiguous and in the order the calls were taken; every call returns when
        its own entries are acknowledged. A store that sequences appends itself (PostgreSQL:
        a group commit of every process's queued calls in the database,
        ``LedgerStore.append_queued``) takes calls made outside a ``locked()`` block when no
        ``on_append`` hook is set; each call's entries are still contiguous.

        Args:
            items: ``(memory_id, content_sha256)`` pairs, appended in this order.
            op: ``"save"`` or ``"adopt"`` for all of them.
            ts: epoch seconds for all of them (default: now), rounded to microseconds.

        Returns:
            The entries, acknowledged; ``[]`` for no items (nothing is touched).

        Raises:
            The same errors as :meth:`append`; on any error no entry of this call is
            acknowledged. A refusal (a bad argument, a rollback, a broken chain) writes none
            of them; a storage error in the write or its flush, like a crash, can leave a
            prefix of them in the file (whole entries chaining onto the last one, then at
            most a torn fragment, which the next append quarantines; docs/THREAT_MODEL.md,
            "Durability promises"). A storage error or a refusal (rollback, broken chain)
            met by a group commit is raised in every call of the group; an ``on_append``
            hook's error too (their entries are acknowledged). Inside a held ``locked()``
            block, ``StoreFileError`` when ``ledger.jsonl`` was replaced or removed meanwhile
            (nothing written).
        """
        pairs = _pairs(items)
        if not pairs:
            return []
        if type(op) is not str or op not in OPS:
            raise LedgerFormatError(f"op must be 'save', 'adopt' or 'forget', not {op!r}")
        return self._append_pairs(pairs, op, time.time() if ts is None else ts)

    def _append_pairs(self, pairs: list[tuple[str, str]], op: str, stamp: float) -> list[Entry]:
        """``append_many`` once its arguments are checked (``pairs`` not empty, ``op`` one of
        ``OPS``): through the store's queue, else the lock path (group commit)."""
        queued = self.append_queued(pairs, op, stamp)
        if queued is not None:
            return queued
        request = _Request(pairs, op, stamp)
        if self.holds_lock:
            with self.locked() as file:
                self._commit(file, [request])
            return request.result()
        return self._group_commit(request)

    def append_queued(
        self,
        pairs: list[tuple[str, str]],
        op: str,
        ts: float,
        record: tuple[str, bytes] | None = None,
    ) -> list[Entry] | None:
        """Append through the store's own sequencing (``LedgerStore.append_queued``: on
        PostgreSQL a group commit in the database), or say it cannot.

        ``append_many`` tries this first; a database tenant's save calls it with its record.

        Args:
            pairs: ``(memory_id, content_sha256)`` pairs, appended in this order.
            op: ``"save"``, ``"adopt"`` or ``"forget"``.
            ts: epoch seconds for all of them.
            record: ``(name, bytes)`` of a record row the store commits with the entries
                (a database tenant's save), or ``None``.

        Returns:
            The entries, acknowledged; ``None`` when the caller must take the lock path (the
            store keeps no queue, this thread holds the lock, an ``on_append`` hook is set,
            or the store declined: a ledger not as an append left it, a rollback).

        Raises:
            LedgerFormatError: a bad pair or ``op`` (nothing is written).
            DatabaseError: from a database store.
        """
        if self.on_append is not None or self.holds_lock:
            return None
        queued = self.store.append_queued(pairs, op, ts, self._last, record)
        if queued is None:
            return None
        entries, end = queued
        last, known = entries[-1], self._last
        if known is None or last.seq > known.seq:
            self._last = Head(last.seq, last.hash, end, None)
        self._tip = None  # other writers may have appended since
        return entries

    def _group_commit(self, request: _Request) -> list[Entry]:
        """Queue ``request``; lead a commit of the queue unless another thread is leading,
        in which case wait until it commits ``request`` or hands the lead over."""
        cond = self._queue_cond
        with cond:
            if self._pid != os.getpid():  # a forked child: the parent's threads are gone
                self._pid, self._queue, self._leading = os.getpid(), [], False
            self._queue.append(request)
            if self._leading:
                try:
                    while not (request.done or request.lead):
                        cond.wait()
                except BaseException:  # interrupted while waiting: withdraw, pass any lead on
                    if request in self._queue:
                        self._queue.remove(request)
                    if request.lead:
                        if self._queue:
                            self._queue[0].lead = True
                        else:
                            self._leading = False
                        cond.notify_all()
                    raise
                if request.done:
                    return request.result()
            self._leader, self._leading = threading.get_ident(), True
        # From here on ``self._queue_cond``, read anew: a fork inside the commit (from an
        # ``on_append`` hook, or a store's code) gives the child a new one.
        batch: list[_Request] = []
        try:
            with self.locked() as file:
                with self._queue_cond:
                    batch, self._queue = self._queue, []
                self._commit(file, batch)
        except BaseException as exc:  # taking or releasing the lock failed
            with self._queue_cond:
                if not batch:
                    batch, self._queue = self._queue, []
            for waiting in batch:
                if waiting is not request and waiting.error is None and not waiting.entries:
                    waiting.error = _copy(exc)
            raise
        finally:
            cond = self._queue_cond
            with cond:
                for waiting in batch:
                    waiting.done = True
                self._leader = 0  # until the next leader, if any, says so
                if self._queue:
                    self._queue[0].lead = True  # hand over: it commits what queued meanwhile
                else:
                    self._leading = False
                cond.notify_all()
        return request.result()

    def _commit(self, file: LedgerFile, batch: list[_Request]) -> None:
        """Under the lock: append the entries of every request of ``batch`` with one write and
        one head. Never raises: each request records its entries or its error."""

        def fail(requests: list[_Request], exc: BaseException) -> None:
            for n, request in enumerate(requests):
                request.entries, request.error = [], exc if n == 0 else _copy(exc)

        try:
            tail, end, newline, _head = self._prepare(file)
        except BaseException as exc:
            fail(batch, exc)
            return
        seq, prev = (tail.seq, tail.hash) if tail is not None else (0, GENESIS)
        done: list[_Request] = []
        entries: list[Entry] = []
        parts: list[bytes] = [b"\n"] if newline else []
        for request in batch:
            try:
                made, lines = build_entries(request.pairs, request.op, request.stamp, seq, prev)
            except LedgerFormatError as exc:
                request.error = exc
                continue
            request.entries = made
            done.append(request)
            entries.extend(made)
            parts.append(lines)
            seq, prev = made[-1].seq, made[-1].hash
        if not entries:
            return
        try:
            data = b"".join(parts)
            self._tip = None  # unknown until the head is written
            file.append(end, data)
            fingerprint = file.fingerprint()
            last = Head(entries[-1].seq, entries[-1].hash, end + len(data), fingerprint)
            self.store.write_head(last)
            self._last = last
            self._tip = _Tip(fingerprint, end + len(data), entries[-1])
        except BaseException as exc:
            fail(done, exc)
            return
        if self.on_append is not None:
            try:
                self.on_append(entries)
            except BaseException as exc:  # the entries stay acknowledged
                for n, request in enumerate(done):
                    request.error = exc if n == 0 else _copy(exc)

    def recover(self) -> Entry | None:
        """Under the lock: refuse a rollback and quarantine a torn tail, appending nothing.

        What ``append`` does before it writes; ``Tenant.seal`` calls it before verifying, so
        that one crash never blocks adoption. Writes ``ledger.head`` when the file holds
        entries but no head exists yet (a ledger written by the anchor), after walking the
        whole chain.

        Returns:
            The last entry, or ``None`` for an empty ledger.

        Raises:
            LedgerRollbackError, LedgerBrokenError, LedgerFormatError: as for ``append``.
            OSError: from the file system.
        """
        with self.locked() as file:
            tail, end, _newline, head = self._prepare(file)
            if tail is not None and head is None:
                self.store.write_head(Head(tail.seq, tail.hash, end, file.fingerprint()))
            return tail

    def _prepare(self, file: LedgerFile) -> tuple[Entry | None, int, bool, Head | None]:
        """Under the lock: find the tail, refuse a rollback, quarantine a torn fragment.

        The tail is not read at all when the ledger still has the fingerprint and size this
        object's last append left (its entry is the tail).

        Returns:
            ``(tail entry or None, byte offset to write at, whether a newline must come
            first, the stored head or None)``.
        """
        size = file.size()
        fingerprint = file.fingerprint()
        tip = self._tip
        tail: Entry | None
        if tip is not None and tip.end == size and tip.fingerprint == fingerprint:
            tail, end, offset, fragment, torn = tip.entry, size, size, b"", False
        else:
            offset, fragment, last = read_tail(file, size)
            torn = bool(fragment) and not is_complete_object(fragment)
            end = offset if torn else size
            if fragment.strip(WHITESPACE) and not torn:
                last = fragment.strip(WHITESPACE)  # a whole last line without its newline
            tail = self._tail(file, end) if last is None else self._entry_of(last)
        head = self.store.read_head()
        for known, label in ((head, "ledger.head"), (self._last, "this Ledger's last append")):
            if known is not None:
                self._refuse_rollback(file, end, tail, known, label)
        self._refuse_broken(file, end, head, tail, fingerprint, size)
        if torn:
            self._tip = None
            file.quarantine(offset, fragment)
        return tail, end, bool(fragment) and not torn, head

    def _refuse_broken(
        self,
        file: LedgerFile,
        end: int,
        head: Head | None,
        tail: Entry | None,
        fingerprint: str,
        size: int,
    ) -> None:
        """Refuse to append onto a chain that verify would call broken in ``[0, end)``.

        Fast path (every append after one of this library's, O(1), nothing read): the
        ledger's fingerprint (:meth:`LedgerFile.fingerprint`) is the one ``ledger.head``
        recorded right after the last append, the file ends at the head's ``end`` and its
        last entry is the head's. The bytes are then the ones that append left, whose chain
        was checked then. Otherwise (another fingerprint: a write this library did not
        acknowledge, be it another program's edit in place, a restore, a crash before the
        head, or a head from before fingerprints) the whole chain is walked once as verify
        walks it, and the head this append writes records the new fingerprint. Known limit:
        an edit keeping the size within the same tick of the kernel's coarse clock as the
        last append leaves the folder store's fingerprint unchanged (docs/THREAT_MODEL.md);
        verify and ``seal`` still report it.

        Raises:
            LedgerBrokenError: the walk finds a break (nothing is written).
        """
        if _unchanged(end, head, tail, fingerprint, size):
            return
        walk = _Walk(head)
        for batch in iter_line_blocks(file, 0, end):
            walk.feed(batch)
        walk.finish(None)
        if walk.broken_at is not None:
            raise LedgerBrokenError(
                f"{self.store.label}: ledger chain broken at seq {walk.broken_at}: {walk.reason};"
                " refusing to append onto it (run verify)"
            )

    def _tail(self, file: LedgerFile, end: int) -> Entry | None:
        for line in iter_lines_backwards(file, end):
            return self._entry_of(line)
        return None

    def _entry_of(self, line: bytes) -> Entry | None:
        """The entry of the last line (``b""``: no line at all, ``None``)."""
        if not line:
            return None
        try:
            return Entry.from_dict(parse_line(line))
        except LedgerFormatError as exc:
            raise LedgerBrokenError(
                f"{self.store.label}: the last line is not a valid entry ({exc}); refusing"
                " to append onto it (run verify)"
            ) from None

    def _refuse_rollback(
        self, file: LedgerFile, end: int, tail: Entry | None, known: Head, label: str
    ) -> None:
        found = tail.seq if tail is not None else 0
        if found < known.seq:
            raise LedgerRollbackError(
                f"{self.store.label} went backwards: {label} records seq {known.seq} but the"
                f" file ends at seq {found}; refusing to append{self._way_out()}",
                known.seq,
                found,
            )
        held = tail.hash if tail is not None and found == known.seq else None
        if held is None:
            for n, line in enumerate(iter_lines_backwards(file, end)):
                if n >= _SCAN_BACK_LINES:
                    break
                try:
                    obj = parse_line(line)
                except LedgerFormatError:
                    continue
                if obj.get("seq") == known.seq and type(obj.get("hash")) is str:
                    held = obj["hash"]
                    break
        if held is not None and not (held.isascii() and hmac.compare_digest(held, known.hash)):
            raise LedgerRollbackError(
                f"{self.store.label} was replaced: it holds a different entry at seq"
                f" {known.seq} than {label} records; refusing to append{self._way_out()}",
                known.seq,
                found,
            )

    def _way_out(self) -> str:
        """How to accept a rollback on the record (``ledger.recovery``), for the refusal."""
        if not isinstance(self.store, FolderLedgerStore):
            return ""
        folder = shlex.quote(str(self.store.path.parent))
        return (
            f" (if the loss is known and accepted: merkle-memory ledger recover {folder}"
            " --accept-rollback keeps the evidence and continues from what is on disk)"
        )

    def last(self) -> Entry | None:
        """The last entry in the file (read without the lock), or ``None`` if there is none.

        Raises:
            LedgerBrokenError: the last line is not a valid entry.
            OSError: the file exists but cannot be read.
        """
        with self.store.reader() as file:
            if file is None:
                return None
            size = file.size()
            offset, fragment = split_fragment(file, size)
            complete = bool(fragment) and is_complete_object(fragment)
            return self._tail(file, size if complete else offset)

    def entries(self, *, check_hash: bool = False) -> Iterator[Entry]:
        """Stream the entries of the file in order (no lock; blank lines skipped).

        An unterminated last line that does not parse (a torn fragment) is ignored.

        Args:
            check_hash: also require every entry's hash to match (either form).

        Raises:
            LedgerFormatError: a line that is not a well-formed entry (its 1-based line
                number is in the message).
            OSError: the file exists but cannot be read.
        """
        with self.store.reader() as file:
            if file is None:
                return
            end, fragment = split_fragment(file, file.size())
            number = 0
            for batch in iter_line_blocks(file, 0, end):
                for raw in batch:
                    number += 1
                    if raw.strip():
                        yield self._entry(raw, number, check_hash)
            if is_complete_object(fragment):  # else a torn fragment: not an entry
                yield self._entry(fragment, number + 1, check_hash)

    def _entry(self, raw: bytes, number: int, check_hash: bool) -> Entry:
        try:
            return Entry.from_dict(parse_line(raw.strip()), check_hash=check_hash)
        except LedgerFormatError as exc:
            raise LedgerFormatError(f"{self.store.label} line {number}: {exc}") from None

    def verify(self, testimony: Testimony) -> VerifyReport:
        """``verify_ledger(self.store, testimony)``; see there."""
        return verify_ledger(self.store, testimony)


def _unchanged(
    end: int, head: Head | None, tail: Entry | None, fingerprint: str, size: int
) -> bool:
    """Whether the ledger is exactly as the append ``head`` names left it: the same
    ``fingerprint`` and ``size`` (the file's, taken by the caller), size ``head.end`` (so no
    torn fragment) and the head's entry as its tail."""
    if head is None or head.fingerprint is None or head.end is None or tail is None:
        return False
    if not (head.end == end == size and tail.seq == head.seq):
        return False
    if not hmac.compare_digest(tail.hash.encode(), head.hash.encode()):
        return False
    return hmac.compare_digest(fingerprint.encode(), head.fingerprint.encode())


def _copy(exc: BaseException) -> BaseException:
    """A copy of ``exc`` to raise in another thread (the same object when it cannot be
    copied), so that two threads never extend one traceback."""
    try:
        return copy.copy(exc)
    except Exception:  # pragma: no cover - an exception type that refuses copying
        return exc


def _pairs(items: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """``items`` as a list of 2-tuples, or ``LedgerFormatError`` (before anything is written)."""
    try:
        pairs = list(items)
    except TypeError:
        raise LedgerFormatError("items must be an iterable of (memory_id, digest) pairs") from None
    copy = False
    for pair in pairs:
        if type(pair) is not tuple or len(pair) != 2:
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                raise LedgerFormatError(f"not a (memory_id, digest) pair: {pair!r:.80}")
            copy = True  # a list (mutable) or a tuple subclass: made a plain tuple
    return [(pair[0], pair[1]) for pair in pairs] if copy else pairs

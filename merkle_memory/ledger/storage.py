"""Where a ledger's bytes live: the one storage interface of the ledger (DESIGN sections 1, 4).

:class:`Ledger`, ``verify_ledger``, the proofs and the adopt/seal algorithm reach the bytes of a
ledger only through a :class:`LedgerStore`, as the conversation DAG reaches its nodes only
through a :class:`~merkle_memory.dag.store.NodeStore`. Two objects make up the interface:

* :class:`LedgerStore`, one ledger: its lock, its head, its Merkle sidecar and the small
  files kept beside it (:data:`SIDE_FILE_NAME`: a witness's cosigned checkpoint, the
  recovery records of accepted rollbacks);
* :class:`LedgerFile`, the ledger's bytes, lent by :meth:`LedgerStore.locked` (under the
  exclusive lock) or :meth:`LedgerStore.reader` (no lock) for the length of a ``with`` block.

The ledger itself is a byte string: the entry lines, each ``canonical.dumps(entry)`` plus
``\\n`` (DESIGN section 4). Offsets are 0-based byte offsets into it. Everything above the
interface (finding the tail, telling a torn fragment from a whole line, refusing a rollback,
verifying, sealing, proving) is written once against it. A store that keeps one row per line
serves the concatenation of its rows, each row knowing the offset it starts at; one whose
appends are transactional never shows a torn fragment, so ``quarantine`` is never called.

:class:`~merkle_memory.ledger.FolderLedgerStore` is the POSIX folder (``ledger.jsonl``,
``ledger.head``, ``ledger.torn``, ``ledger.tree``, ``ledger.tree.state``); a database backend
implements the same methods with the same durability promises. ``tests/ledger/test_storage.py``
runs the ledger, verify, seal and proofs on the folder store and on an in-memory one.
"""

from __future__ import annotations

import contextlib
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from ..errors import LedgerError
from .treelog import TreeLogCheck

if TYPE_CHECKING:
    from ._entry import Entry

__all__ = [
    "SIDE_FILE_NAME",
    "Head",
    "IndexFile",
    "LedgerFile",
    "LedgerStore",
    "Sidecar",
    "check_side_file_name",
]

SIDE_FILE_NAME: Final = re.compile(r"ledger\.(?:cosigned|witnesses|recovery-[1-9][0-9]{0,8}\.json)")
"""The names a store keeps beside the ledger for the layers above it (``docs/FORMAT.md``
sections 4.6 and 11): ``ledger.cosigned``, ``ledger.witnesses`` and
``ledger.recovery-<n>.json``; :meth:`LedgerStore.write_side_file` refuses any other."""


def check_side_file_name(name: object, label: str) -> str:
    """``name`` when it is one of :data:`SIDE_FILE_NAME`.

    Raises:
        LedgerError: any other value (a path, another file of the store, not a ``str``).
    """
    if not isinstance(name, str) or not SIDE_FILE_NAME.fullmatch(name):
        raise LedgerError(f"{label}: not a file kept beside the ledger: {name!r:.80}")
    return name


@dataclass(frozen=True, slots=True)
class Head:
    """What ``ledger.head`` records: the last entry acknowledged by an append.

    Attributes:
        seq: 1-based seq of that entry.
        hash: its hash, 64-char lowercase hex.
        end: byte offset just past that entry's line (its newline included), i.e. the
            ledger's size when the entry was acknowledged; ``None`` for a head written
            before heads recorded it.
        fingerprint: :meth:`LedgerFile.fingerprint` of the ledger right after that entry
            was written (at most 128 printable ASCII characters), or ``None`` for a head
            written before heads recorded it. An append that finds the ledger still at
            this fingerprint and size ``end`` trusts the chain up to ``end`` without reading
            it; otherwise it walks the whole chain once and refuses a break
            (``docs/DECISIONS.md``, "A save refuses what seal refuses").
    """

    seq: int
    hash: str
    end: int | None = None
    fingerprint: str | None = None


class Sidecar(Protocol):
    """The Merkle sidecar of a ledger as proofs read it (``treelog.TreeLog`` is one).

    ``len(sidecar)`` is the number of complete leaves, ``sidecar[i]`` the 32-byte RFC 6962
    hash of leaf ``i`` (0-based; the entry of seq ``i + 1``).
    """

    def __len__(self) -> int: ...

    def __getitem__(self, index: int, /) -> bytes: ...

    def root(self, size: int | None = None) -> bytes:
        """The RFC 6962 root (32 bytes) of the first ``size`` leaves (all by default)."""
        ...

    def check(self, leaf_data: Iterable[bytes]) -> TreeLogCheck:
        """Compare the stored hashes with the ones recomputed from ``leaf_data``."""
        ...


class IndexFile(ABC):
    """The bytes of a ledger's id index (derived data), open for one ``with`` block of
    :meth:`LedgerStore.id_index`. Offsets are byte offsets; an index that does not exist
    yet has size 0."""

    @abstractmethod
    def size(self) -> int:
        """Its length in bytes."""

    @abstractmethod
    def read(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``offset`` (fewer only at the end)."""

    @abstractmethod
    def write(self, offset: int, data: bytes) -> None:
        """Overwrite ``len(data)`` bytes at ``offset`` in place (not yet durable).

        Raises:
            LedgerError: the index was opened for reading.
            OSError: from the storage.
        """

    @abstractmethod
    def flush(self) -> None:
        """Make every ``write`` so far durable (the folder store: fsync)."""


class LedgerFile(ABC):
    """The bytes of one ledger, open for one ``with`` block of its :class:`LedgerStore`.

    Lent by :meth:`LedgerStore.locked` (``append`` and ``quarantine`` allowed when the lock
    was taken with ``write=True``) or by :meth:`LedgerStore.reader` (reading only). Not for
    use after its block ends.
    """

    @abstractmethod
    def size(self) -> int:
        """The ledger's length in bytes, as it is now."""

    @abstractmethod
    def read(self, offset: int, length: int) -> bytes:
        """Read up to ``length`` bytes at byte ``offset`` (fewer only at the end).

        Raises:
            OSError: the bytes cannot be read.
        """

    @abstractmethod
    def append(self, offset: int, data: bytes) -> None:
        """Write ``data`` at byte ``offset`` (the end of the whole lines) and make it durable.

        Durability: every byte of ``data`` survives a crash once this returns (the folder
        store flushes the file with ``fdatasync``), so the line is durable before the head
        that names it (DESIGN section 4, append order step 1). A store that commits the
        lines and the head in one atomic transaction (a database) may instead make both
        durable together in the :meth:`LedgerStore.write_head` that follows, before that
        call returns.

        Raises:
            LedgerError: the file was lent read-only.
            OSError: from the storage (nothing acknowledged; a partial write is a torn tail).
        """

    @abstractmethod
    def quarantine(self, offset: int, fragment: bytes) -> None:
        """Keep a torn ``fragment`` aside, then cut the ledger back to byte ``offset``.

        Durability: the fragment is durable in the quarantine (``ledger.torn``, after a
        header line naming the time and ``offset``) before the ledger is cut, and the cut is
        durable when this returns, so no byte is ever lost. Logs a WARNING on
        ``merkle_memory.ledger``. DESIGN section 4, "Torn tail".

        Raises:
            LedgerError: the file was lent read-only.
            OSError: from the storage.
        """

    def stamp(self, *, settled: bool) -> str | None:
        """A short text that changes whenever the ledger's bytes may have changed.

        Proofs record it in the sidecar's state when they check the ledger, and re-check the
        whole ledger when, at the same size, it differs (an edit in place). The folder store
        gives its :meth:`fingerprint` (device, inode, size, modification and change time; the
        change time is set by the kernel on every write and not settable by a user process).

        Args:
            settled: ``True`` when the stamp is compared with one recorded earlier: then
                ``None`` unless a later change is sure to change it (the folder store: the
                file changed strictly before the state was last written). ``False`` when it
                is recorded in the state written next.

        Returns:
            The stamp, or ``None`` when the store cannot tell (then every proof on an
            unchanged size re-reads the whole ledger, O(n)); this default returns ``None``.
        """
        return None

    @abstractmethod
    def fingerprint(self) -> str:
        """A short token of the ledger's state: equal tokens mean the bytes did not change
        between the two calls (by any writer, in place or not, even keeping every offset).

        :class:`Ledger` records it in the head right after each append; the next append that
        finds the same token (and the size the head records) trusts the chain up to the
        head without reading it, O(1). Another token means a write this library did not
        acknowledge (another program, a restore, a crash, a head from before tokens): that
        append walks the whole chain once and refuses a break, as seal does.

        The folder store gives ``st_dev:st_ino:st_size:st_mtime_ns:st_ctime_ns`` of the open
        file. Limit: the kernel stamps ``st_ctime`` from its coarse clock (a tick of a few
        milliseconds), so an edit that keeps the size and lands in the same tick as this
        library's last append can go unseen by appends (verify and seal still see it;
        docs/THREAT_MODEL.md). A store whose bytes only this library can change (a database
        that is trusted, where a foreign edit is outside the threat model) may return a
        constant: every append then trusts the chain up to the head.

        Returns:
            At most 128 printable ASCII characters (no space).

        Raises:
            OSError: from the storage.
        """

    @abstractmethod
    def shared_lock(self) -> AbstractContextManager[None]:
        """Hold a shared lock for a block: no append is half-written while it is held.

        Appends (which hold the exclusive lock from their line to their head) wait for it.
        ``verify_ledger`` takes it briefly to note a consistent size and head.
        """


class LedgerStore(ABC):
    """Interface of a ledger's storage (DESIGN sections 1 and 4). Subclasses provide it all.

    One object per ledger, shared by every thread of a process; the lock serializes writers
    across threads and processes.
    """

    @property
    @abstractmethod
    def label(self) -> str:
        """How messages name this ledger (the folder store: the ``ledger.jsonl`` path)."""

    @abstractmethod
    def exists(self) -> bool:
        """Whether the ledger exists at all (an empty one counts; the folder store: the file)."""

    @abstractmethod
    def locked(self, *, write: bool) -> AbstractContextManager[LedgerFile]:
        """Hold the exclusive lock of the ledger for a block; yield its bytes.

        Blocks until the lock is free. Not re-entrant (:class:`Ledger` adds re-entry).

        Args:
            write: ``True``: the ledger is created (durably) if missing and the file lent
                may ``append`` and ``quarantine``. ``False``: nothing is created and the file
                lent is read-only (a reader without write permission can hold the lock).

        Raises:
            OSError: the ledger cannot be created or opened (with ``write=False``:
                ``FileNotFoundError`` when it does not exist).
        """

    @abstractmethod
    def reader(self) -> AbstractContextManager[LedgerFile | None]:
        """Lend the ledger's bytes for reading, without a lock; ``None`` when it does not exist.

        A reader without the lock sees a prefix of whole lines plus at most one torn fragment.

        Raises:
            OSError: the ledger exists but cannot be opened.
        """

    @abstractmethod
    def read_head(self) -> Head | None:
        """The head (the last acknowledged entry), or ``None`` when none was ever written.

        Raises:
            LedgerFormatError: a head is stored but unreadable.
            OSError: it cannot be read.
        """

    @abstractmethod
    def write_head(self, head: Head) -> None:
        """Replace the head atomically and durably (append order step 2, DESIGN section 4).

        Durability: when this returns the new head survives a crash, and a crash at any point
        leaves either the old head or the new one, never a partial one (the folder store:
        one of two checksummed slots written in place and ``fdatasync``ed, the other slot
        holding the previous head; ``docs/FORMAT.md`` section 4.3). Called under the
        exclusive lock, as every write of the store's derived files, but for a folder no
        other program sees yet (``ledger export``'s, renamed into place once complete):
        ``remove_leftovers`` relies on it.

        Raises:
            OSError: from the storage (the old head is left as it was).
        """

    def append_queued(
        self,
        pairs: Sequence[tuple[str, str]],
        op: str,
        ts: float,
        known: Head | None,
        record: tuple[str, bytes] | None = None,
    ) -> tuple[list[Entry], int] | None:
        """Append entries without the caller taking the lock: a store that sequences
        appends itself (PostgreSQL: a group commit in the database) builds, writes and
        durably commits them, every append path's checks included, before returning.

        ``Ledger.append_many`` tries this first, outside any ``locked()`` block and when no
        ``on_append`` hook is set; ``None`` sends it down the lock path (``locked()``, the
        tail, ``LedgerFile.append``, ``write_head``). This default returns ``None``.

        Args:
            pairs: ``(memory_id, content_sha256)`` pairs, appended in this order.
            op: the entries' ``op``.
            ts: epoch seconds for all of them.
            known: the head the caller last acknowledged, or ``None``.
            record: ``(name, bytes)`` of a record to store with the entries, or ``None``.

        Returns:
            ``(entries, end)``: the acknowledged entries and the byte offset after the last
            one, or ``None``.
        """
        return None

    def close(self) -> None:
        """Release what the store keeps open between calls (the folder store: the
        descriptors of ``ledger.jsonl`` and ``ledger.head`` kept by writers); the store stays
        usable and reopens them when needed. This default does nothing."""
        return

    # --- small files beside the ledger (docs/FORMAT.md sections 4.6 and 11) ------------------

    def side_files(self) -> list[str]:
        """The names (:data:`SIDE_FILE_NAME`) of the files kept beside the ledger, sorted
        (code point order); this default keeps none.

        Raises:
            OSError: from the storage.
        """
        return []

    def read_side_file(self, name: str) -> bytes | None:
        """The bytes of the file ``name`` kept beside the ledger, or ``None`` when there is
        none (this default: never any).

        Raises:
            LedgerError: ``name`` is not one of :data:`SIDE_FILE_NAME`.
            StoreFileError: the folder store's file is a symlink or not a regular file.
            OSError: it exists but cannot be read.
        """
        check_side_file_name(name, self.label)
        return None

    def write_side_file(self, name: str, data: bytes) -> None:
        """Replace the file ``name`` beside the ledger with ``data``, atomically and durably.

        Durability: when this returns the new bytes survive a crash, and a crash at any point
        leaves the old bytes or the new ones (the folder store: temp file, fsync, rename,
        fsync the folder; a recovery record gets mode 0444). Inside a ``locked(write=True)``
        block of a store whose writes are one transaction (PostgreSQL), the file is part of
        that transaction: it commits with the block's next head (or at its end) and is
        rolled back with it.

        Raises:
            LedgerError: ``name`` is not one of :data:`SIDE_FILE_NAME`, or this store keeps
                no files beside the ledger (this default).
            OSError: from the storage (the old bytes are left as they were).
        """
        check_side_file_name(name, self.label)
        raise LedgerError(f"{self.label}: this store keeps no files beside the ledger")

    def remove_head(self) -> None:
        """Remove the head, so that the ledger reads as never acknowledged (an accepted
        rollback to an empty ledger, ``merkle_memory.ledger.recovery``); called under the
        exclusive lock, durably (inside a transactional store's block: with its commit).

        Raises:
            LedgerError: this store cannot (this default).
            OSError: from the storage.
        """
        raise LedgerError(f"{self.label}: this store cannot remove its head")

    def remove_leftovers(self) -> tuple[str, ...]:
        """Remove what crashes left of this store's own atomic replacements (the folder
        store: the temp files of ``ledger.head``, ``ledger.tree``, ``ledger.tree.state`` and
        ``ledger.ids`` whose writer was killed before its rename).

        Called under the exclusive lock (every writer of those files holds it, so none is in
        flight), at rare points that already cost a pass over the store: ``seal_unsealed``,
        a proof that re-checks or rebuilds the sidecar, an accepted rollback; never on the
        append path. This default removes nothing (a store whose writes leave no temp
        files).

        Returns:
            The names removed, sorted (code point order).

        Raises:
            LedgerError: the calling thread does not hold the lock (nothing removed).
            OSError: from the storage (the folder store: the folder cannot be fsynced after
                a removal; what cannot be listed or removed is left, harmless).
        """
        return ()

    # --- the id index (derived data, rebuilt from the ledger at will) ------------------------

    @contextlib.contextmanager
    def id_index(self, *, write: bool) -> Iterator[IndexFile | None]:
        """Lend the id index's bytes for a block (``merkle_memory.ledger.proofs`` keeps it
        beside the sidecar: memory id -> the line of its latest entry, ``docs/FORMAT.md``
        section 7.1), or ``None`` when this store keeps no id index: then proofs find an id's
        latest entry by reading the ledger. This default keeps none.

        Args:
            write: ``True`` to update it in place (called under the ledger lock).

        Raises:
            OSError: it exists but cannot be opened.
        """
        yield None

    def replace_id_index(self, data: bytes | bytearray) -> None:
        """Replace the id index with ``data`` atomically and durably (only called on a store
        whose :meth:`id_index` lends one), under the exclusive lock.

        Raises:
            LedgerError: this store keeps no id index (this default; never called by the
                library, which asks :meth:`id_index` first).
            OSError: from the storage (the old index is left as it was).
        """
        raise LedgerError(f"{self.label}: this store keeps no id index")

    # --- the Merkle sidecar (derived data, rebuilt from the ledger at will) ----------------

    @abstractmethod
    def sidecar(self) -> Sidecar:
        """The Merkle sidecar as it is stored (0 leaves when there is none)."""

    @abstractmethod
    def append_sidecar(self, leaf_hashes: Sequence[bytes]) -> None:
        """Append 32-byte leaf hashes to the sidecar, durably (a torn tail is cut first).

        Raises:
            OSError: from the storage.
        """

    @abstractmethod
    def truncate_sidecar(self, leaves: int) -> None:
        """Cut the sidecar back to its first ``leaves`` leaves, durably.

        Raises:
            OSError: from the storage.
        """

    @abstractmethod
    def clear_sidecar(self) -> None:
        """Replace the sidecar with an empty one, atomically and durably (under the
        exclusive lock).

        Raises:
            OSError: from the storage (the old sidecar is left as it was).
        """

    @abstractmethod
    def read_sidecar_state(self) -> bytes | None:
        """The stored sync state of the sidecar (``ledger.tree.state``), or ``None``.

        Raises:
            OSError: it exists but cannot be read.
        """

    @abstractmethod
    def write_sidecar_state(self, data: bytes) -> None:
        """Replace the sidecar's sync state atomically and durably (under the exclusive
        lock).

        Raises:
            OSError: from the storage (the old state is left as it was).
        """

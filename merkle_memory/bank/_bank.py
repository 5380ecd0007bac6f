"""The memory bank: content-addressed memory files, active and archived (DESIGN section 5).

Layout of a bank folder ``BANK``::

    BANK/memories/<YYYYmmdd_HHMMSS>_<type>_<id>.json   active memories (L1)
    BANK/memories/archive/<same name>                   archived memories (L0)
    BANK/ledger.jsonl, BANK/ledger.head                 the hash chain sealing every save
    BANK/bank.lock                                      cross-process lock of writers

A memory's status is the folder its file is in, never a field. Files are written atomically
(temp file in the same folder, fsync, ``os.replace``, fsync of the folder) and read-only
(0o444), and never rewritten: archiving is an ``os.replace`` into ``archive/``. Every save is
sealed in the ledger with ``memory_id = content_sha256 = id`` after its file is durable; a
memory left unsealed by a crash is sealed by the next save of it or by :meth:`MemoryBank.seal`.

Quick start::

    bank = MemoryBank("agent-bank")
    mid = bank.save(Memory("fact", "project", "Project uses FastAPI"))
    bank.get(mid).content            # 'Project uses FastAPI'
    bank.verify().ok                 # True
    bank.seal().sealed_ids           # () (adopts memory files with no ledger entry)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path

from .._fsio import atomic_write, fsync_dir
from ..errors import BankError, MemoryFormatError, MemoryNotFoundError, TamperedMemoryError
from ..ledger import Ledger
from . import _files as _bankfs
from ._files import refuse_symlink
from ._layout import BankLayout
from ._migrate_report import MigratedFile, MigrationIssue, MigrationReport
from ._report import BankProblem, BankReport, BankSealReport, StoredMemory
from ._seal import seal_bank, seal_if_unsealed
from ._verify import scan, verify_bank
from .memory import MAX_MEMORY_FILE_BYTES, Memory, is_memory_id

__all__ = [
    "BankProblem",
    "BankReport",
    "BankSealReport",
    "MemoryBank",
    "MigratedFile",
    "MigrationIssue",
    "MigrationReport",
    "StoredMemory",
]


def _check_file_size(data: bytes) -> bytes:
    """Return ``data`` (a memory file) when the bank can read it back, else MemoryFormatError."""
    if len(data) > MAX_MEMORY_FILE_BYTES:
        raise MemoryFormatError(
            f"memory file would be {len(data)} bytes, over the limit of "
            f"{MAX_MEMORY_FILE_BYTES} bytes (MAX_MEMORY_FILE_BYTES, 16 MiB)"
        )
    return data


def _check_id(memory_id: object) -> str:
    if not is_memory_id(memory_id):
        raise BankError(f"not a memory id (64 lowercase hex): {str(memory_id)[:80]!r}")
    assert isinstance(memory_id, str)
    return memory_id


class MemoryBank(BankLayout):
    """A folder of content-addressed memory files (DESIGN section 5, EP-0106).

    A folder is a bank when it holds ``memories/`` or ``ledger.jsonl``. Creating the object
    touches nothing. Only :meth:`save` creates a bank: the bank folder itself (never its
    missing parents), ``memories/`` and ``memories/archive/``. Every other operation on a
    folder that is not a bank raises ``BankError("no memory bank at ROOT")`` and creates
    nothing; reads never write. Writers (save, archive, consolidate, migrate, seal) hold an
    exclusive ``flock`` on ``BANK/bank.lock`` (created by the first writer); readers hold a
    shared one when the lock file exists (verify only while it scans the files, after its
    ledger snapshot).

    Args:
        root: the bank folder, a ``str`` or ``os.PathLike`` (it may itself be a symlink;
            nothing inside it is followed).

    Raises:
        BankError: ``root`` is neither a ``str`` nor an ``os.PathLike`` (e.g. ``None``).

    Attributes:
        root, active_dir, archive_dir, ledger_path: the bank folder, ``memories/``,
            ``memories/archive/`` and ``ledger.jsonl`` (see :class:`BankLayout`).
    """

    def __repr__(self) -> str:
        return f"MemoryBank({str(self.root)!r})"

    # --- reading -------------------------------------------------------------------------

    def locate(self, memory_id: str) -> StoredMemory:
        """Find and verify the memory ``memory_id``, active or archived.

        Args:
            memory_id: 64-char lowercase hex.

        Raises:
            BankError: ``memory_id`` is not 64-char lowercase hex, the folder is not a bank,
                or the bank's layout is unsafe (a symlinked folder).
            MemoryNotFoundError: no file carries that id.
            TamperedMemoryError: the file does not verify (content, id and name disagree).
        """
        memory_id = _check_id(memory_id)
        self._require_root()
        with self._read_lock():
            found = self._find(memory_id)
            if found is None:
                raise MemoryNotFoundError(f"no memory {memory_id} in {self.root}", memory_id)
            path, archived = found
            return StoredMemory(self._load(path), archived, self._rel(path))

    def get(self, memory_id: str) -> Memory:
        """The memory ``memory_id`` (active or archived), verified. Raises as :meth:`locate`."""
        return self.locate(memory_id).memory

    def __contains__(self, memory_id: object) -> bool:
        """True when a file named for ``memory_id`` exists (active or archived); not verified."""
        return is_memory_id(memory_id) and self._find(str(memory_id)) is not None

    def memories(
        self, *, archived: bool | None = False, problems: list[BankProblem] | None = None
    ) -> list[StoredMemory]:
        """List the memories that verify, sorted by (timestamp, id).

        Args:
            archived: ``False`` for active memories, ``True`` for archived ones, ``None`` for
                both.
            problems: when given, every file of either folder that does not verify is
                appended to it (:meth:`verify` gives the full report, including the ledger).

        Raises:
            BankError: the folder is not a bank (``no memory bank at ROOT``), or a folder
                inside it is a symlink.
        """
        self._require_root()
        with self._read_lock():
            items = [
                item for item in self._scan(problems) if archived is None or item[1] == archived
            ]
        stored = [StoredMemory(memory, arch, rel) for memory, arch, rel in items]
        return sorted(stored, key=lambda s: (s.memory.timestamp, s.memory.id))

    def _scan(self, problems: list[BankProblem] | None) -> Iterator[tuple[Memory, bool, str]]:
        """Yield (memory, archived, relative path) for each file that verifies."""
        return scan(self, problems)

    def verify(self) -> BankReport:
        """Check every file of ``memories/`` and ``memories/archive/``, and the ledger.

        Each file is parsed strictly, its id recomputed and compared with the stored ``id``
        and the file name (DESIGN section 5). The ledger is verified against the testimony
        ``{id: id}`` of every file that verifies, active or archived, so archiving never makes
        a memory missing. The ledger is snapshotted before the files are scanned, so a save by
        another process racing this verify reads ``unsealed`` at worst, never ``missing``.
        Never changes a file.

        Returns:
            A :class:`BankReport`; ``ok`` is false when any file is tampered, or the ledger is
            broken or names an altered or missing memory.

        Raises:
            BankError: the folder is not a bank (``no memory bank at ROOT``: no
                ``memories/`` and no ``ledger.jsonl``), or ``ledger.jsonl`` is a symlink.
        """
        self._require_root()
        return verify_bank(self)

    # --- sealing -------------------------------------------------------------------------

    def _seal(self, memory_id: str) -> None:
        refuse_symlink(self.ledger_path, "ledger.jsonl")
        Ledger(self.ledger_path).append(memory_id, memory_id, op="save")

    def seal(self) -> BankSealReport:
        """Adopt every memory file (active or archived) that verifies and has no ledger entry.

        Closes the gap a crash between writing a memory and sealing it leaves: under the bank
        lock and the ledger lock (so two processes never seal one id twice), a torn ledger
        tail is quarantined, the ledger verified as ``verify`` would, and the ``unsealed`` ids
        of files that verify appended with ``op: "adopt"``, sorted, in one group commit
        (``Ledger.append_many``). A tampered file is never sealed (DESIGN section 5).

        Returns:
            A :class:`BankSealReport` (``sealed_ids`` empty when nothing was unsealed).

        Raises:
            BankError: the folder is not a bank (nothing is created) or cannot be locked,
                or a folder or ledger file inside it is a symlink.
            LedgerBrokenError: the chain is broken, so nothing is adopted; ``.report`` holds
                the ``VerifyReport``.
            LedgerRollbackError, LedgerFormatError: the ledger went backwards or
                ``ledger.head`` is unreadable (nothing is adopted).
        """
        self._require_root()
        with self._write_lock():
            return seal_bank(self)

    # --- writing -------------------------------------------------------------------------

    def save(self, memory: Memory) -> str:
        """Write ``memory`` into ``memories/`` (read-only, atomic, durable) and seal it.

        Creates the bank when missing: the bank folder itself (its parent must exist),
        ``memories/`` and ``memories/archive/``. Saving a memory that is already in the bank
        (active or archived) with identical bytes writes nothing and returns the same id; it
        does not un-archive it, and it seals the memory only if the ledger has no entry for
        it (a crash after the write, before the seal). A changed memory has a new id, so it
        is a new file and the old file is left untouched.

        Returns:
            The id, 64-char lowercase hex.

        Raises:
            BankError: not a ``Memory``; the bank's parent folder does not exist (it is never
                created); the folder is read-only, full or otherwise unwritable (no temp file
                is left); a folder or ledger file inside the bank is a symlink.
            MemoryFormatError: the memory's file (``memory.to_bytes()``) would be larger than
                :data:`~merkle_memory.memory.MAX_MEMORY_FILE_BYTES` (16 MiB), the most the
                bank reads back; refused before anything is created or written.
            TamperedMemoryError: a file with this id exists but its bytes differ (left as is).
            LedgerError: the ledger refused the seal (the memory file is already durable).
        """
        if not isinstance(memory, Memory):
            raise BankError(f"save takes a Memory, not {type(memory).__name__}")
        data = _check_file_size(memory.to_bytes())
        with self._write_lock(create=True):
            self._save_unlocked(memory, data)
        return memory.id

    def _save_unlocked(self, memory: Memory, data: bytes | None = None) -> bool:
        """Write and seal unless already present (then seal if unsealed); True when written."""
        data = _check_file_size(memory.to_bytes() if data is None else data)
        found = self._find(memory.id)
        if found is not None:
            path, _archived = found
            if path.name != memory.file_name or _bankfs.read_regular(path) != data:
                raise TamperedMemoryError(
                    f"{self._rel(path)} carries id {memory.id} but differs from it; "
                    "run `bank verify`",
                    self._rel(path),
                )
            seal_if_unsealed(self, memory.id)
            return False
        target = self.active_dir / memory.file_name
        try:
            atomic_write(target, data, mode=0o444)
        except OSError as exc:
            raise BankError(f"cannot write {self._rel(target)}: {_why(exc)}") from exc
        self._seal(memory.id)
        return True

    def archive(self, memory_id: str) -> str:
        """Move the memory ``memory_id`` into ``memories/archive/`` (never rewritten).

        ``os.replace`` into the archive, then both folders fsynced. Archiving an archived
        memory is a no-op.

        Returns:
            The archived file's path relative to the bank (``memories/archive/...``).

        Raises:
            BankError: not a memory id, the folder is not a bank (nothing is created), or
                the move failed (the file stays active).
            MemoryNotFoundError: no file carries that id (nothing is created).
        """
        memory_id = _check_id(memory_id)
        self._require_root()
        if self._find(memory_id) is None:  # fail before the lock creates bank.lock
            raise MemoryNotFoundError(f"no memory {memory_id} in {self.root}", memory_id)
        with self._write_lock():
            return self._rel(self._archive_unlocked(memory_id))

    def _archive_unlocked(self, memory_id: str) -> Path:
        found = self._find(memory_id)
        if found is None:
            raise MemoryNotFoundError(f"no memory {memory_id} in {self.root}", memory_id)
        source, archived = found
        target = self.archive_dir / source.name
        if archived:
            return source
        try:
            self._ensure_dir(self.archive_dir)
            if os.path.lexists(target):
                # A copy is already archived: drop the active one only if it is identical.
                if _bankfs.read_regular(target) != _bankfs.read_regular(source):
                    raise TamperedMemoryError(
                        f"{self._rel(target)} exists and differs from {self._rel(source)}",
                        self._rel(target),
                    )
                fsync_dir(self.archive_dir)
                os.unlink(source)
            else:
                os.replace(source, target)
                fsync_dir(self.archive_dir)
            fsync_dir(self.active_dir)
        except OSError as exc:
            raise BankError(f"cannot archive {self._rel(source)}: {_why(exc)}") from exc
        return target

    def consolidate(
        self,
        ids: Sequence[str],
        content: str,
        *,
        type: str | None = None,
        scope: str | None = None,
        tags: Iterable[str] = (),
        source_session: str | None = None,
        timestamp: datetime | None = None,
    ) -> str:
        """Write one memory summarizing ``ids``, linked to each, then archive the originals.

        The new memory's links are ``mm://memory/<id>`` of each original. Step 1 writes and
        seals it; step 2 archives the originals. A crash between steps leaves a bank that
        verifies; a rerun with the same arguments finds the memory already written (same type,
        scope, content and links, active or archived; the earliest if several) instead of
        writing a second one with a new timestamp, seals it if a crash came between its write
        and its seal, and only finishes the archiving.

        Args:
            ids: ids of the originals (64-char lowercase hex), at least one; duplicates ignored.
            content: the consolidated text (byte-exact).
            type: the new memory's type; default: the originals' type when they share one.
            scope: the new memory's scope; default: the originals' scope when they share one.
            tags: tags of the new memory.
            source_session: source session of the new memory.
            timestamp: timezone-aware; default now.

        Returns:
            The new (or found) memory's id.

        Raises:
            BankError: no ids, a malformed id, the folder is not a bank (nothing is
                created), originals of different types or scopes with no ``type``/``scope``
                given, or a failed write.
            MemoryNotFoundError: an original is not in the bank (nothing is written).
            TamperedMemoryError: an original does not verify (nothing is written).
            MemoryFormatError: the new memory is invalid (e.g. a non-slug type).
        """
        from ._consolidate import consolidate

        return consolidate(
            self,
            ids,
            content,
            type=type,
            scope=scope,
            tags=tags,
            source_session=source_session,
            timestamp=timestamp,
        )

    def migrate(self) -> MigrationReport:
        """Rewrite legacy memory files (random ids, a ``status``) as content-addressed files.

        See ``merkle_memory._migrate`` for the rules (DESIGN section 5): same folder, status
        and legacy id dropped, naive timestamps read as UTC, links converted and rewritten in
        dependency order, new files durable and sealed before legacy files are removed,
        idempotent.

        Returns:
            A ``MigrationReport`` (``migrated`` is 0 on a rerun).

        Raises:
            BankError: the bank folder does not exist, cannot be locked, or holds a symlinked
                folder. Per-file failures are reported, never raised.
            LedgerError: the ledger refused a seal (no legacy file is removed then).
        """
        from ._migrate import migrate_bank

        return migrate_bank(self)


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)

"""A tenant: a folder of memory records sealed by one ledger (DESIGN section 4).

Layout (compatible with mnemo-cortex): ``TENANT/memory/*.json`` (records),
``TENANT/ledger.jsonl``, ``TENANT/ledger.head``, ``TENANT/ledger.torn``. A multi-tenant root
holds ``ROOT/agents/<name>/`` with names matching ``[A-Za-z0-9][A-Za-z0-9_-]{0,63}``.

Quick start::

    from merkle_memory.ledger.tenant import Tenant
    t = Tenant("agents/cc")
    t.save({"id": "m1", "summary": "we chose sqlite"})   # record file, then its ledger line
    t.seal().sealed_ids                                  # adopt records with no entry
    t.verify().to_dict()["ok"]                           # True
    t.forget("m1", "user asked").entry.op                # 'forget': the file is gone

A tenant's testimony mode (``rfc8785``, ``mnemo`` or ``salted``; see
:mod:`merkle_memory.ledger.records`) is recorded in ``TENANT/testimony.json`` or implied by
its ledger (:mod:`merkle_memory.ledger.settings`); ``Tenant(root, testimony="salted")`` records
it with the first write.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from .. import _pg
from .._fsio import create_new, create_tree_atomic, fsync_dir, makedirs_durable
from .._progress import ProgressCallback
from ..errors import (
    LedgerBrokenError,
    MerkleMemoryError,
    RecordError,
    TenantError,
)
from ._adopt import Holdings, SealReport, seal_unsealed
from ._chain import Ledger
from ._entry import Entry, as_path
from ._tail import iter_objects_naming
from ._verify import VerifyReport, verify_ledger
from .records import (
    DEFAULT_SEALED_FIELDS,
    SYMLINK_REASON,
    RecordState,
    _retiring_digest,
    _scan_pending,
    check_sealed_fields,
    check_testimony_mode,
    read_record,
    record_bytes,
    record_path,
    record_to_seal,
    scan_one,
    scan_pending,
    scan_records,
    validate_record_id,
)
from .settings import (
    SETTINGS_NAME,
    choose_testimony_mode,
    implied_testimony_mode,
    read_testimony_mode,
    write_testimony_mode,
)
from .tombstones import (
    FORGOTTEN_DIR,
    ForgetReceipt,
    Tombstone,
    check_reason,
    forget_record,
    read_tombstone,
    scan_pending_tombstones,
    settle_forgets,
    tombstone_path,
)

__all__ = [
    "TENANT_NAME",
    "SealReport",
    "Tenant",
    "discover_tenants",
    "is_tenant_name",
]

log = logging.getLogger("merkle_memory.ledger")

TENANT_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
"""A tenant directory name (so ``rocky.archived-2026-01`` is not a tenant)."""


def is_tenant_name(name: str) -> bool:
    """Whether ``name`` is a valid tenant directory name (``[A-Za-z0-9][A-Za-z0-9_-]{0,63}``);
    ``False`` for anything that is not a ``str``."""
    return isinstance(name, str) and TENANT_NAME.fullmatch(name) is not None


def discover_tenants(root: str | os.PathLike[str]) -> tuple[list[Path], list[str]]:
    """List the tenants of a multi-tenant root: the folders ``ROOT/agents/<name>/``.

    Entries are examined with ``lstat``: a symbolic link under ``agents/`` (or ``agents``
    itself) is never followed (so ``seal --all`` never writes where it points) and is
    skipped, whatever it points to.

    Args:
        root: the root folder.

    Returns:
        ``(tenant folders sorted by name, names of entries skipped: folders whose name is
        not a tenant name, and symbolic links; ``["agents"]`` alone when ``agents`` is
        one)``. Plain files, FIFOs and other non-folders under ``agents/`` are ignored. Both
        are empty when ``ROOT/agents`` does not exist.

    Raises:
        TenantError: ``root`` is not a path.
        OSError: ``ROOT/agents`` exists but cannot be listed.
    """
    agents = as_path(root, "a root folder", TenantError) / "agents"
    if agents.is_symlink():
        return [], ["agents"]
    if not agents.is_dir():
        return [], []
    tenants: list[Path] = []
    skipped: list[str] = []
    with os.scandir(agents) as listing:
        entries = sorted(listing, key=lambda e: e.name)
    for entry in entries:
        if entry.is_symlink():
            skipped.append(entry.name)
        elif not entry.is_dir(follow_symlinks=False):
            continue
        elif is_tenant_name(entry.name):
            tenants.append(agents / entry.name)
        else:
            skipped.append(entry.name)
    return tenants, skipped


class Tenant:
    """One tenant folder: records in ``memory/`` sealed by ``ledger.jsonl``.

    A folder is a tenant when it holds a ``memory/`` folder or a ``ledger.jsonl`` (or both).
    ``verify`` and ``seal`` refuse any other folder (``TenantError``), and a ``memory/`` that
    is a symbolic link; ``save`` creates the tenant (folder, ``memory/``, ledger) when the
    folder is missing or empty.

    Args:
        root: the tenant folder (``str`` or path-like).
        sealed_fields: the fields covered by each record's testimony (default: mnemo's eight).
        testimony: the testimony mode to write with (``"rfc8785"``, ``"mnemo"`` or
            ``"salted"``), recorded in ``TENANT/testimony.json`` by the first ``save`` or
            ``forget``; ``None`` (the default) keeps the tenant's mode (``testimony_mode``).
            A salted tenant stays salted: asking it for another mode raises ``TenantError``
            at the first write.

    Raises:
        TenantError: ``root`` is not a ``str`` or path-like.
        RecordError: ``sealed_fields`` is not a sequence of ``str``, or ``testimony`` is not
            a mode.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        sealed_fields: Sequence[str] = DEFAULT_SEALED_FIELDS,
        testimony: str | None = None,
    ) -> None:
        if _pg.is_url(root):
            raise TenantError("a postgresql:// tenant is opened with ledger.open_tenant", None)
        self.root = as_path(root, "a tenant folder", TenantError)
        self.memory_dir = self.root / "memory"
        self.forgotten_dir = self.root / FORGOTTEN_DIR
        self.sealed_fields = check_sealed_fields(sealed_fields)
        self.requested_testimony = None if testimony is None else check_testimony_mode(testimony)
        self.ledger = Ledger(self.root / "ledger.jsonl")
        self._implied: str | None = None  # the mode the ledger's first line implies, once read
        # The save path (issue 15): text paths, the testimony.json last read (its lstat
        # identity and mode) and the mode the last save wrote with (a hint, re-checked
        # under the lock).
        self._root_text = str(self.root)
        self._memory_text = str(self.memory_dir)
        self._settings_text = os.path.join(self._root_text, SETTINGS_NAME)
        self._settings: tuple[tuple[int, ...], str | None] | None = None
        self._hint: str | None = None

    def __repr__(self) -> str:
        return f"Tenant({str(self.root)!r})"

    @property
    def name(self) -> str:
        """The tenant folder's name (the key of the CLI's JSON output)."""
        return self.root.name

    @property
    def testimony_mode(self) -> str:
        """The tenant's testimony mode: the one ``TENANT/testimony.json`` records, else the
        one its ledger implies (``"mnemo"`` when mnemo-cortex wrote its first line, else
        ``"rfc8785"``; :func:`~merkle_memory.ledger.settings.ledger_testimony_mode`).

        Raises:
            StoreFileError: ``testimony.json`` is a symbolic link or not a regular file.
            LedgerFormatError: ``testimony.json`` is malformed.
            OSError: a file exists but cannot be read.
        """
        try:
            recorded = read_testimony_mode(self.root)
        except NotADirectoryError:
            recorded = None
        return recorded if recorded is not None else self._implied_mode()

    def _implied_mode(self) -> str:
        """``ledger_testimony_mode`` of the ledger, kept once its first line exists (the first
        line of an append-only ledger never changes), so saves read it once per object."""
        if self._implied is not None:
            return self._implied
        mode, final = implied_testimony_mode(self.ledger.store)
        if final:
            self._implied = mode
        return mode

    def _mode_to_write(self) -> tuple[str, bool]:
        """``(the mode to write with, whether testimony.json must record it first)``.

        Raises:
            TenantError: the tenant is salted and another mode was asked for.
        """
        recorded = self._recorded_mode()
        return choose_testimony_mode(
            recorded,
            self.requested_testimony,
            self._implied_mode,
            self._has_lines,
            str(self.root),
        )

    def _recorded_mode(self) -> str | None:
        """``read_testimony_mode(root)`` (``None`` also when the root is not a folder),
        read again only when ``testimony.json``'s ``lstat`` identity (device, inode, size,
        mode, modification and change times) differs from the last read's: one ``lstat``
        per call otherwise. The file is only ever replaced whole (``write_testimony_mode``:
        a new inode); an edit in place keeping its size within one tick of the kernel's
        clock is the fingerprint's known limit (docs/THREAT_MODEL.md)."""
        try:
            st = os.lstat(self._settings_text)
        except (FileNotFoundError, NotADirectoryError):
            self._settings = None
            return None
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mode, st.st_mtime_ns, st.st_ctime_ns)
        cached = self._settings
        if cached is not None and cached[0] == key:
            return cached[1]
        self._settings = None
        try:
            recorded = read_testimony_mode(self.root)
        except NotADirectoryError:
            return None
        self._settings = (key, recorded)
        return recorded

    def _has_lines(self) -> bool:
        """Whether ``ledger.jsonl`` holds any byte (an entry, or a fragment of one)."""
        with self.ledger.store.reader() as file:
            return file is not None and file.size() > 0

    def _write_mode(self) -> str:
        """The mode to write with, recorded in ``testimony.json`` first when the tenant was
        asked for one it does not record yet (under the ledger lock, before any record it
        governs, so a crash never leaves a record sealed in a mode verify does not know).

        Raises:
            TenantError: the tenant is salted and another mode was asked for.
        """
        mode, record = self._mode_to_write()
        if record:
            write_testimony_mode(self.root, mode)
        self._hint = mode
        return mode

    def records(
        self,
        *,
        ignored: list[tuple[str, Path]] | None = None,
        progress: ProgressCallback | None = None,
    ) -> dict[str, RecordState]:
        """``scan_records(memory_dir, sealed_fields, ignored=ignored, mode=testimony_mode,
        progress=progress)``: id -> what is on disk (``ignored``, when given, receives ``(id,
        path)`` of each ignored claimant; ``progress``, phase ``"records"``, counts the files
        read)."""
        mode = self.testimony_mode
        return scan_records(
            self.memory_dir, self.sealed_fields, ignored=ignored, mode=mode, progress=progress
        )

    def testimony(self) -> Mapping[str, tuple[str, ...]]:
        """Memory id -> acceptable testimony digests of each record file that exists.

        A re-save interrupted after its line (``save``): ``<id>.json`` still holds a version
        an entry of the id sealed and ``<id>.json.pending`` the new one; both are then
        acceptable, so the id reads ``sealed`` by whichever entry is latest until ``seal``
        settles it. A pending file beside a record that no entry ever sealed adds nothing
        (the record is judged alone). A forget under way (``forget``: its tombstone
        ``forgotten/<id>.json.pending`` written, the record not yet removed) adds the
        tombstone's digest, so the id reads ``forgotten``, never ``reappeared``.
        """
        return self._testimony(None)

    def _testimony(
        self,
        ignored: list[tuple[str, Path]] | None,
        progress: ProgressCallback | None = None,
    ) -> dict[str, tuple[str, ...]]:
        """``testimony()``, appending ignored claimants to ``ignored`` (``scan_records``)."""
        mode = self.testimony_mode
        states = self.records(ignored=ignored, progress=progress)
        out = {mid: state.forms for mid, state in states.items()}
        for mid, pending in scan_pending(self.memory_dir, self.sealed_fields, mode=mode).items():
            current = out.get(mid)
            if current and set(current) & set(self._sealed_digests(mid)):
                out[mid] = current + tuple(f for f in pending.forms if f not in current)
        for mid, tomb in scan_pending_tombstones(self.root).items():
            if mid in out:
                out[mid] = (*out[mid], tomb.digest())
        return out

    def _sealed_digests(self, memory_id: str) -> list[str]:
        """The ``content_sha256`` of every line naming ``memory_id``, latest first.

        The lines naming the id in any valid form (``_tail.iter_objects_naming``: this
        library's, the anchor's, other spacing, escapes, key order, CRLF), read through the
        ledger's reader from the last back; each whose ``content_sha256`` is a ``str``
        counts (as verify's bookkeeping counts a line past a break). Only for ids with a
        pending file: about one read of the ledger, a parse only for lines that may name the
        id.

        Returns:
            The digests as the lines hold them, the id's latest line first (``[]`` when none).

        Raises:
            OSError: the ledger cannot be read.
        """
        found: list[str] = []
        with self.ledger.store.reader() as file:
            if file is None:
                return found
            for obj in iter_objects_naming(file, file.size(), memory_id):
                digest = obj.get("content_sha256")
                if type(digest) is str:
                    found.append(digest)
        return found

    def _settle_pending(self, only: str | None = None) -> list[tuple[Path, str]]:
        """Under the ledger lock: finish or drop each re-save a crash interrupted.

        A pending version whose testimony is the id's latest entry was acknowledged by its
        line: it replaces ``<id>.json`` (rename). Any other pending file never got its line:
        it is removed (the sealed version stays), and so is every ``<id>.json.pending``
        (named by a valid id) that can never be settled, which verify never reads as a
        record: empty, torn or unparseable, carrying another id or none, not sealable, a
        symbolic link (the link is removed, never its target) or a FIFO. The folder is
        fsynced after any change. ``only``: settle that id's file alone (a re-save settles
        its own leftover before writing a new pending file; another id's is left as it is).

        Returns:
            ``(path, why)`` of each pending name left in place: a folder (``"is a
            folder"``), or a file the system refuses to read (``"cannot be read
            (<reason>)"``: it may hold an acknowledged version).

        Raises:
            OSError: from the file system.
        """
        found = _scan_pending(self.memory_dir, self.sealed_fields, self.testimony_mode, only)
        for mid, pending in found.settle.items():
            latest = self._sealed_digests(mid)[:1]
            if latest and latest[0] in pending.forms:
                os.replace(pending.path, record_path(self.memory_dir, mid))
            else:
                os.unlink(pending.path)
        for path in found.leftovers:
            os.unlink(path)  # a symbolic link itself, never its target
        if found.settle or found.leftovers:
            fsync_dir(self.memory_dir)
        return found.kept

    def initialize(self) -> str:
        """Make the folder a tenant (the folder and ``memory/`` when missing, an empty
        ``ledger.jsonl``) and record the testimony mode asked for in the constructor in
        ``testimony.json``; idempotent.

        Returns:
            The tenant's testimony mode after the call.

        Raises:
            TenantError: the path is a file, ``memory`` is a symbolic link or not a folder,
                or a salted tenant was asked for another mode.
            LedgerFormatError, StoreFileError: ``testimony.json`` is malformed or not a
                regular file.
            OSError: from the file system.
        """
        self.check_layout(creating=True)
        self._create()
        with self.ledger.locked():
            return self._write_mode()

    def check_layout(self, *, creating: bool = False) -> None:
        """Refuse a folder that is not a tenant (what ``verify`` and ``seal`` check first).

        Args:
            creating: ``True`` for ``save``: a missing folder, or one with neither
                ``memory/`` nor ``ledger.jsonl``, is then fine (it becomes a tenant).

        Raises:
            TenantError: the path is no folder; neither ``memory/`` nor ``ledger.jsonl``
                (unless ``creating``); ``memory`` is not a folder; ``memory/`` or
                ``forgotten/`` is a symbolic link (never followed, as the bank never follows
                one).
            OSError: the folder cannot be examined.
        """
        self._layout(creating)

    def _layout(self, creating: bool) -> tuple[bool, bool]:
        """``check_layout``; returns ``(the folder exists, memory/ is a folder)`` as seen.
        With ``creating`` the ledger's existence is not looked at (nothing depends on it)."""
        where = self._root_text
        try:
            root_mode = os.stat(where).st_mode
        except (FileNotFoundError, NotADirectoryError):
            if creating:
                return False, False
            raise TenantError("not a tenant folder (no such folder)", where) from None
        if not stat.S_ISDIR(root_mode):
            raise TenantError("not a tenant folder (not a folder)", where)
        try:
            memory_mode = os.lstat(self._memory_text).st_mode
        except FileNotFoundError:
            memory_mode = None
        if memory_mode is not None and stat.S_ISLNK(memory_mode):
            raise TenantError(f"memory/ is {SYMLINK_REASON}", where)
        if os.path.islink(self.forgotten_dir):
            raise TenantError(f"{FORGOTTEN_DIR}/ is {SYMLINK_REASON}", where)
        has_memory = memory_mode is not None and stat.S_ISDIR(memory_mode)
        if not (creating or has_memory or os.path.lexists(self.ledger.path)):
            raise TenantError("not a tenant folder (no memory/ and no ledger.jsonl)", where)
        if memory_mode is not None and not has_memory:
            raise TenantError("memory is not a folder", where)
        return True, has_memory

    def verify(self, *, progress: ProgressCallback | None = None) -> VerifyReport:
        """Verify the ledger against the records (never changes a file).

        A record file that is a symbolic link is never read: it counts as unparseable
        (``altered`` if an entry seals its id, else ``unsealed``). A file claiming an id
        whose ``<id>.json`` speaks for it with other testimony is not read as the record
        either; the report lists it in ``ignored_claimants`` (``ok`` unchanged; see
        ``scan_records``). Safe against live writers:
        the record scan runs under the ledger's shared lock (writers wait for it), and inside
        ``with tenant.ledger.locked():`` it runs under the lock already held.

        Args:
            progress: optional ``progress(phase, done, total)`` callback
                (``merkle_memory._progress``): phase ``"records"`` (files read), then
                ``"ledger"`` (bytes of the ledger walked).

        Raises:
            TenantError: not a tenant folder (see ``check_layout``).
            OSError: a file exists but cannot be read.
        """
        self.check_layout()
        ignored: list[tuple[str, Path]] = []
        if self.ledger.holds_lock:
            # Inside ``with tenant.ledger.locked()``: no writer can move, and taking the
            # shared lock through another descriptor would wait for ourselves.
            report = verify_ledger(
                self.ledger.path, self._testimony(ignored, progress), progress=progress
            )
        else:
            # The records are scanned under the shared lock of the ledger snapshot (head,
            # size); ``save`` writes a record and its line under the exclusive lock, so the
            # scan sees exactly the snapshot's records: a racing save is neither missing nor
            # altered.
            report = verify_ledger(
                self.ledger.path,
                lambda: self._testimony(ignored, progress),
                testimony_under_lock=True,
                progress=progress,
            )
        return _with_claimants(report, ignored)

    def _create(self) -> None:
        """Make a missing tenant folder with its ``memory/`` in one rename (missing parents
        made durably first), so a crash never leaves a folder that is not yet a tenant."""
        if os.path.lexists(self.root):
            return
        makedirs_durable(self.root.parent)
        create_tree_atomic(self.root, ("memory",))

    def save(self, record: Mapping[str, Any]) -> Entry:
        """Write a record and seal it (``op: "save"``).

        All under the ledger lock, so a concurrent ``seal`` never adopts the record too. A
        first save writes ``memory/<id>.json`` atomically and durably (temp, fsync, rename,
        fsync the folder), then appends its line: a crash in between leaves it ``unsealed``.
        A re-save (``<id>.json`` exists) keeps the sealed version until the new one is
        sealed: it creates ``<id>.json.pending`` (exclusively, in place), fsyncs it and the
        folder, appends the line, then renames the pending file over ``<id>.json`` without
        a folder fsync. A crash before the line leaves the old version sealed (the pending
        file, whole, empty or torn, is ignored, and removed by ``seal``); after it, whether
        or not the rename survived, verify accepts the pending version as the record (see
        ``testimony``) and ``seal`` finishes the rename. A re-save that finds
        ``<id>.json.pending`` first settles it as ``seal`` would: renamed into place when the
        id's latest entry names it, else removed, as is any pending file of the id that can
        never be settled (empty, torn, carrying another id, not sealable, a symbolic link:
        the link itself is removed); the pending files of other ids are left alone. So a
        crash never leaves the record ``altered`` nor loses an acknowledged version
        (docs/THREAT_MODEL.md, "What a crash at each step leaves"). Flushes: four for either
        kind of save (the record file, its folder, the ledger line, ``ledger.head``). A
        missing or empty folder becomes a tenant.

        The testimony follows the tenant's mode (``testimony_mode``; a mode asked for in the
        constructor is recorded in ``testimony.json`` first): ``"salted"`` writes the record
        with a fresh ``testimony_salt`` (any salt it held is replaced) and seals
        ``SHA-256(salt || RFC 8785 bytes)``; ``"mnemo"`` seals mnemo-cortex's own digest of
        the record as written (so integers beyond 2**53 are accepted there).

        A save is an event (mnemo-cortex's semantics): saving the same record again appends
        a new ``save`` entry every time, even when nothing changed, and verify judges the
        record by its latest entry. (The memory bank differs: an identical ``MemoryBank.save``
        writes nothing, since its file name is the content's hash.)

        Args:
            record: a JSON object (a mapping with ``str`` keys) whose ``id`` passes
                ``validate_record_id``.

        Returns:
            The acknowledged entry.

        Raises:
            RecordError: not a mapping with ``str`` keys, invalid id, not JSON, or a sealed
                value outside the mode's domain (RFC 8785 for ``rfc8785`` and ``salted``;
                nothing is written).
            TenantError: the folder is a file, ``memory`` is a symbolic link or not a
                folder, or a salted tenant was asked for another mode (nothing is written);
                or, for a re-save, ``<id>.json.pending`` is a folder or a file the system
                refuses to read (``reason`` says which; never removed, since it may hold an
                acknowledged version: the record is not written and no line appended).
            LedgerFormatError, StoreFileError: ``testimony.json`` is malformed or not a
                regular file (nothing is written).
            LedgerRollbackError, LedgerBrokenError, LedgerFormatError: the append was refused
                (a first save's record file is written and reads ``unsealed``; a re-save's
                pending file is removed and the sealed version stays).
            OSError: from the file system.
        """
        if not isinstance(record, Mapping):
            raise RecordError(f"a record must be a mapping, not {type(record).__name__}")
        record_id = validate_record_id(record.get("id"))
        exists, has_memory = self._layout(True)
        # The mode the last save wrote with, else the one to write with now: a hint (the
        # record is checked against it before anything is written), re-read under the lock.
        hint = self._hint if self._hint is not None and exists else self._mode_to_write()[0]
        prepared, digest = record_to_seal(record, self.sealed_fields, mode=hint)
        if not exists:
            self._create()
        with self.ledger.locked():  # so that a concurrent seal never adopts it in between
            mode = self._write_mode()
            if mode != hint:  # another process recorded a mode meanwhile
                prepared, digest = record_to_seal(record, self.sealed_fields, mode=mode)
            memory = self._memory_text
            tomb = os.path.join(self._root_text, FORGOTTEN_DIR, f"{record_id}.json.pending")
            if os.path.lexists(tomb):
                self._settle_forgets(only=record_id)  # a forget of this id was interrupted
            target = os.path.join(memory, f"{record_id}.json")
            if not os.path.lexists(target):
                data = record_bytes(prepared)
                if not has_memory:
                    makedirs_durable(memory)
                try:
                    create_new(target, data)  # temp, fsync, rename, fsync memory/
                except FileNotFoundError:
                    if os.path.isdir(memory):
                        raise
                    makedirs_durable(memory)  # removed since it was looked at: made again
                    create_new(target, data)
                return self.ledger.append(record_id, digest, op="save")
            pending = target + ".pending"
            if os.path.lexists(pending):
                # A crash left an earlier re-save of this id pending: finish or drop it first,
                # or the new pending file would overwrite a version the ledger already names.
                kept = self._settle_pending(only=record_id)
                if kept:  # a folder, or unreadable: create_new would fail (FileExistsError)
                    path, why = kept[0]
                    raise TenantError(
                        f"memory/{path.name} {why}: it is neither settled nor removed; "
                        f"remove it to save {record_id!r} again",
                        self._root_text,
                    )
            # Written in place (no temp file): a torn pending file is never accepted (its
            # testimony matches no entry) and seal removes it.
            create_new(pending, record_bytes(prepared), atomic=False)
            try:
                entry = self.ledger.append(record_id, digest, op="save")
            except MerkleMemoryError:
                os.unlink(pending)  # refused: nothing names the new version
                fsync_dir(self.memory_dir)
                raise
            # Not fsynced: if a crash loses this rename, the pending file is the record verify
            # reads (the latest entry names it) and seal finishes the rename.
            os.replace(pending, target)
            return entry

    def seal(self, *, progress: ProgressCallback | None = None) -> SealReport:
        """Adopt every record that has no entry (``op: "adopt"``, sorted by id, one fsync).

        Under the ledger lock: settle re-saves and forgets a crash interrupted (see ``save``
        and ``forget``; every ``memory/<id>.json.pending`` that can never be settled is
        removed, a folder or a file the system refuses to read is left with a warning on the
        ``merkle_memory.ledger`` logger), refuse a
        rollback and quarantine a torn tail, verify, refuse a broken chain, then adopt exactly
        the ``unsealed`` records. Deciding under the lock
        means two processes sealing at once never seal one id twice. An altered record has an
        entry, so it is never re-sealed. A claimant ``scan_records`` ignores is never adopted.

        Args:
            progress: optional ``progress(phase, done, total)`` callback
                (``merkle_memory._progress``): phase ``"records"`` (files read), then
                ``"ledger"`` (bytes walked) for each verify of the seal.

        Returns:
            A ``SealReport`` (the report is re-verified after the adoption and lists the
            ignored claimants as ``verify`` does).

        Raises:
            TenantError: not a tenant folder (see ``check_layout``); nothing is written.
            LedgerBrokenError: the chain is broken; ``.report`` holds the ``VerifyReport``
                (with its ``ignored_claimants``).
            LedgerRollbackError: the ledger went backwards.
            LedgerFormatError: ``ledger.head`` is unreadable.
            OSError: from the file system.
        """
        self.check_layout()
        ignored: list[tuple[str, Path]] = []

        def holdings() -> Holdings:
            del ignored[:]
            states = self.records(ignored=ignored, progress=progress)
            sealable: dict[str, str] = {}
            problems: dict[str, str] = {}
            for mid, state in states.items():
                if state.sealable is None:
                    problems[mid] = state.problem or "cannot be sealed"
                else:
                    sealable[mid] = state.sealable
            testimony = {mid: state.forms for mid, state in states.items()}
            return Holdings(testimony, sealable, problems)

        with self.ledger.locked():
            for path, why in self._settle_pending():
                log.warning("%s: memory/%s %s: left in place", self.name, path.name, why)
            self._settle_forgets()
            try:
                result = seal_unsealed(self.ledger, holdings, label=self.name, progress=progress)
            except LedgerBrokenError as exc:
                if isinstance(exc.report, VerifyReport):
                    exc.report = _with_claimants(exc.report, ignored)
                raise
        return dataclasses.replace(result, report=_with_claimants(result.report, ignored))

    # --- forgetting ------------------------------------------------------------------------

    def forget(self, record_id: str, reason: str, *, force: bool = False) -> ForgetReceipt:
        """Erase a record's file and seal a tombstone (``op: "forget"``; issue 20).

        Under the ledger lock, the chain is verified first (a broken chain is refused,
        nothing changed), and an ``altered`` record (its file no longer matches its latest
        entry) is refused unless ``force``: removing its file would erase the evidence of the
        change. Then each step durable before the next (docs/THREAT_MODEL.md,
        "Forgetting"): (1) write the tombstone as ``forgotten/<id>.json.pending`` (temp,
        fsync, rename, fsync the folder); (2) append the ``forget`` entry (its line fsynced,
        then ``ledger.head``); (3) remove ``memory/<id>.json`` and fsync ``memory/``; (4)
        rename the tombstone to ``forgotten/<id>.json`` and fsync ``forgotten/``. A crash
        before (2) leaves the record ``sealed`` (the pending tombstone is dropped by the next
        ``seal``, ``save`` or ``forget``); from (2) on, verify reads the id as ``forgotten``,
        and ``seal`` (or forgetting again) finishes the steps. The record is never
        ``missing`` and its file is removed only once the tombstone's line is durable.

        The tombstone ``retires`` the testimony of the id's latest entry (for a record never
        sealed: its current testimony). Forgetting an id already forgotten appends nothing:
        it removes a record file put back since (verify's ``reappeared``) and returns the
        earlier receipt. Saving the id again later seals a new record (verify judges by the
        latest entry); the tombstone file is then kept as history (a second forget replaces
        it). In ``"salted"`` mode the ledger's digests of the record cannot be linked to its
        content once the file is gone; in the other modes they can be brute-forced from
        guesses of short content (docs/THREAT_MODEL.md).

        Args:
            record_id: the record's id (``validate_record_id``).
            reason: why, kept in the tombstone (not empty or blank; at most 4096
                characters; never the content).
            force: forget an ``altered`` record anyway (the receipt's ``was_altered`` says
                so; the tombstone retires the digest the ledger sealed).

        Returns:
            A :class:`~merkle_memory.ledger.tombstones.ForgetReceipt`.

        Raises:
            RecordError: an invalid id, or no record and no entry of that id (nothing to
                forget), or a record never sealed whose file does not parse (it has no
                entry: delete it, nothing records it), or an ``altered`` record without
                ``force`` (nothing changed).
            LedgerFormatError: a bad reason (empty, too long, not a string).
            TenantError: not a tenant folder (see ``check_layout``).
            LedgerBrokenError: the chain is broken (``.report`` holds the verify report);
                nothing changed.
            LedgerRollbackError: the append was refused; nothing changed (the pending
                tombstone is removed).
            OSError: from the file system.
        """
        record_id = validate_record_id(record_id)
        reason = check_reason(reason)
        self.check_layout()

        def unsealed(path: Path) -> str:
            try:
                record = read_record(path)
                return _retiring_digest(record, self.sealed_fields, self.testimony_mode)
            except (RecordError, OSError) as exc:
                raise RecordError(
                    f"{record_id!r} was never sealed and cannot be read ({exc}); it has no "
                    "ledger entry, so removing its file leaves nothing to forget"
                ) from None

        def nothing(mid: str) -> Exception:
            return RecordError(f"no record {mid!r} in {self.root}: nothing to forget")

        def forms(path: Path) -> tuple[str, ...]:
            key, state = scan_one(path, self.sealed_fields, self.testimony_mode)
            return state.forms if key == record_id else ()

        with self.ledger.locked():
            self._settle_pending(only=record_id)
            return forget_record(
                self.ledger,
                self.root,
                record_id,
                reason,
                self._locate,
                unsealed,
                nothing,
                forms=forms,
                force=force,
                label=f"{self.name}: ",
            )

    def tombstone(self, record_id: str) -> Tombstone | None:
        """The tombstone of the last forget of ``record_id`` (``forgotten/<id>.json``), or
        ``None`` when there is none.

        Raises:
            RecordError: an invalid id.
            StoreFileError: the file is a symbolic link or not a regular file.
            LedgerFormatError: the file is not a tombstone.
            OSError: it cannot be read.
        """
        return read_tombstone(tombstone_path(self.root, validate_record_id(record_id)))

    def _locate(self, record_id: str) -> Path | None:
        """``memory/<id>.json`` when it exists (a symbolic link included), else ``None``."""
        path = record_path(self.memory_dir, record_id)
        return path if os.path.lexists(path) else None

    def _settle_forgets(self, only: str | None = None) -> set[str]:
        """Under the ledger lock: finish or drop each forget a crash interrupted
        (:func:`~merkle_memory.ledger.tombstones.settle_forgets`)."""
        return settle_forgets(self.ledger, self.root, self._locate, only=only)


def _with_claimants(report: VerifyReport, ignored: list[tuple[str, Path]]) -> VerifyReport:
    """``report`` with ``ignored_claimants`` ``(id, "memory/<file name>")``, sorted."""
    if not ignored:
        return report
    pairs = sorted({(mid, f"memory/{path.name}") for mid, path in ignored})
    return dataclasses.replace(report, ignored_claimants=tuple(pairs))

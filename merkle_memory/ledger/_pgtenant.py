"""Tenants in PostgreSQL, one addressing scheme for every tenant, and moving tenants between
backends (private; public face :mod:`merkle_memory.ledger`).

* :class:`PostgresTenant`: a tenant whose records (``mm_records``, one row per record file,
  its exact bytes under its file name) and ledger (:class:`PostgresLedgerStore`) live in one
  database. A save is one transaction: the record row, the entry's line and the head commit
  together, so a crash never leaves a record without its line or a line without its record.
* :func:`open_tenant`: a folder or a ``postgresql://...#tenant`` URL, whichever it is given.
* :func:`export_tenant` / :func:`import_tenant`: copy a tenant between a database and a
  folder, byte for byte (``ledger.jsonl``, ``memory/*.json``, ``ledger.torn``; the head's seq,
  hash and end), so verify reports the same on both sides.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import stat
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from .. import _pg
from .._fsio import fsync_dir, makedirs_durable, read_regular_file
from .._progress import ProgressCallback
from ..errors import (
    LedgerBrokenError,
    RecordError,
    StoreFileError,
    TenantError,
)
from ._adopt import Holdings, SealReport, seal_unsealed
from ._chain import Ledger
from ._entry import Entry, as_path
from ._folder import FolderLedgerStore
from ._postgres import PostgresLedgerStore
from ._verify import VerifyReport, verify_ledger
from .records import (
    DEFAULT_SEALED_FIELDS,
    PENDING_SUFFIX,
    RecordState,
    _decode,
    _forms,
    _sealed,
    _speaker,
    check_sealed_fields,
    record_bytes,
    testimony,
    validate_record_id,
)
from .settings import read_testimony_mode
from .storage import Head
from .tenant import Tenant, _with_claimants
from .tombstones import ForgetReceipt

__all__ = [
    "PostgresTenant",
    "export_tenant",
    "import_tenant",
    "list_postgres_tenants",
    "open_tenant",
]

_UPSERT_RECORD: Final = (
    "INSERT INTO mm_records (tenant_id, name, body) VALUES (%s, %s, %s)"
    " ON CONFLICT (tenant_id, name) DO UPDATE SET body = excluded.body"
)
_COPY_BLOCK: Final = 1 << 20


def scan_record_rows(
    rows: Sequence[tuple[str, bytes]],
    sealed_fields: Sequence[str],
    ignored: list[tuple[str, Path]] | None = None,
) -> dict[str, RecordState]:
    """``records.scan_records`` over ``(file name, bytes)`` rows instead of a folder.

    The same rules (the key is the record's id, or the name's stem when it cannot be read;
    of files claiming one id with different testimony ``<id>.json`` speaks), with the path
    of each state ``memory/<name>``, so reports name the same files on every backend.
    """
    fields = check_sealed_fields(sealed_fields)
    claims: dict[str, list[RecordState]] = {}
    for name, body in sorted(rows):
        if not name.endswith(".json"):
            continue
        path = Path("memory") / name
        try:
            record = _decode(body)
            key = validate_record_id(record.get("id"))
        except RecordError as exc:
            key, state = name[:-5] or name, RecordState(path, (), None, str(exc))
        else:
            forms, sealable, problem = _forms(_sealed(record, fields))
            state = RecordState(path, forms, sealable, problem)
        claims.setdefault(key, []).append(state)
    return {key: _speaker(key, states, ignored) for key, states in claims.items()}


class PostgresTenant:
    """One tenant of a PostgreSQL database: records in ``mm_records``, sealed by its ledger.

    The same methods and reports as :class:`~merkle_memory.ledger.Tenant` (``save``, ``seal``,
    ``verify``, ``records``, ``testimony``); a record's "file" is its row, named
    ``<id>.json`` as in a folder.

    Args:
        url: ``postgresql://...#tenant`` (libpq's URI form; the fragment is the tenant name,
            ``[A-Za-z0-9][A-Za-z0-9_-]{0,63}``).
        sealed_fields: the fields covered by each record's testimony (default: mnemo's eight).

    Raises:
        LedgerError: no valid tenant name after ``#``.
        DatabaseError: not a PostgreSQL URL.
        RecordError: ``sealed_fields`` is not a sequence of ``str``.
    """

    def __init__(self, url: str, *, sealed_fields: Sequence[str] = DEFAULT_SEALED_FIELDS) -> None:
        self.store = PostgresLedgerStore(url)
        self.sealed_fields = check_sealed_fields(sealed_fields)
        self.ledger = Ledger(self.store)

    def __repr__(self) -> str:
        return f"PostgresTenant({self.store.label!r})"

    @property
    def name(self) -> str:
        """The tenant's name (the URL's fragment; the key of the CLI's JSON output)."""
        return self.store.tenant

    def _rows(self) -> list[tuple[str, bytes]]:
        def work(conn: Any, tenant: int) -> list[tuple[str, bytes]]:
            rows = conn.execute(
                "SELECT name, body FROM mm_records WHERE tenant_id = %s", (tenant,)
            ).fetchall()
            return [(str(name), bytes(body)) for name, body in rows]

        return self.store.with_connection("read the records", work, default=[])

    def records(self, *, ignored: list[tuple[str, Path]] | None = None) -> dict[str, RecordState]:
        """Memory id -> what the database holds (see :func:`scan_record_rows`)."""
        return scan_record_rows(self._rows(), self.sealed_fields, ignored)

    def testimony(self) -> Mapping[str, tuple[str, ...]]:
        """Memory id -> acceptable testimony digests of each record row."""
        return {mid: state.forms for mid, state in self.records().items()}

    @property
    def testimony_mode(self) -> str:
        """Always ``"rfc8785"``: a database tenant has no ``testimony.json`` yet (a salted or
        mnemo tenant folder is refused by :func:`import_tenant`)."""
        return "rfc8785"

    def initialize(self) -> str:
        """Create the tenant in the database (its row, and the tables when missing), with an
        empty ledger; idempotent.

        Returns:
            The tenant's testimony mode, ``"rfc8785"``.

        Raises:
            DatabaseError: the database refused or cannot be reached.
        """
        self.store.tenant_id(create=True)
        return self.testimony_mode

    def forget(self, record_id: str, reason: str, *, force: bool = False) -> ForgetReceipt:
        """Not supported yet: a database tenant has no place for tombstones.

        Raises:
            TenantError: always (nothing is read or written).
        """
        del record_id, reason, force
        raise TenantError(
            "forgetting is not supported for a postgresql:// tenant yet (no place for "
            "tombstones): export it to a folder (merkle-memory ledger export) to forget there",
            self.store.label,
        )

    def check_layout(self, *, creating: bool = False) -> None:
        """Refuse a tenant that does not exist (``verify`` and ``seal``), unless ``creating``.

        Raises:
            TenantError: no such tenant in the database.
            DatabaseError: the database cannot be reached.
        """
        if not creating and not self.store.exists():
            raise TenantError(f"no tenant {self.name!r} in the database", self.store.label)

    def verify(self, *, progress: ProgressCallback | None = None) -> VerifyReport:
        """Verify the ledger against the records, in one snapshot of the database.

        Every hash is recomputed from the stored lines, every testimony from the stored
        record bytes (docs/THREAT_MODEL.md, "PostgreSQL"). Changes nothing. ``progress``
        (``merkle_memory._progress``) is called as by :meth:`Tenant.verify`.

        Raises:
            TenantError: no such tenant.
            DatabaseError: the database cannot be reached.
        """
        self.check_layout()
        ignored: list[tuple[str, Path]] = []

        def testimony() -> dict[str, tuple[str, ...]]:
            del ignored[:]
            return {m: s.forms for m, s in self.records(ignored=ignored).items()}

        report = verify_ledger(self.store, testimony, testimony_under_lock=True, progress=progress)
        return _with_claimants(report, ignored)

    def save(self, record: Mapping[str, Any]) -> Entry:
        """Write a record and seal it (``op: "save"``) in one transaction.

        The record's row (``<id>.json``, the bytes a folder tenant would write) and its entry
        commit together with the head, with ``synchronous_commit = on``, before this returns;
        a re-save replaces the row and appends a new entry (mnemo-cortex's event semantics).

        Raises:
            RecordError: not a mapping with ``str`` keys, invalid id, not JSON, or a sealed
                value outside RFC 8785 (nothing is written).
            LedgerRollbackError, LedgerBrokenError, LedgerFormatError: the append was refused
                (nothing is written).
            DatabaseError: the database refused or cannot be reached (nothing is written).
        """
        if not isinstance(record, Mapping):
            raise RecordError(f"a record must be a mapping, not {type(record).__name__}")
        record_id = validate_record_id(record.get("id"))
        digest = testimony(record, self.sealed_fields)
        body = record_bytes(record)
        pair = [(record_id, digest)]
        queued = self.ledger.append_queued(pair, "save", time.time(), (f"{record_id}.json", body))
        if queued is not None:  # the group commit of the database (ledger._postgres)
            return queued[0]
        with self.ledger.locked():
            tenant = self.store.tenant_id()
            self.store.stage(_UPSERT_RECORD, (tenant, f"{record_id}.json", body))
            return self.ledger.append(record_id, digest, op="save")

    def seal(self, *, progress: ProgressCallback | None = None) -> SealReport:
        """Adopt every record that has no entry (as :meth:`Tenant.seal`, under the tenant's
        lock, one transaction for the adoption; ``progress`` as there).

        Raises:
            TenantError: no such tenant.
            LedgerBrokenError: the chain is broken (``.report`` holds the verify report).
            LedgerRollbackError: the ledger went backwards.
            DatabaseError: the database cannot be reached.
        """
        self.check_layout()
        ignored: list[tuple[str, Path]] = []

        def holdings() -> Holdings:
            del ignored[:]
            states = self.records(ignored=ignored)
            sealable = {m: s.sealable for m, s in states.items() if s.sealable is not None}
            problems = {
                m: s.problem or "cannot be sealed" for m, s in states.items() if s.sealable is None
            }
            return Holdings({m: s.forms for m, s in states.items()}, sealable, problems)

        try:
            result = seal_unsealed(self.ledger, holdings, label=self.name, progress=progress)
        except LedgerBrokenError as exc:
            if isinstance(exc.report, VerifyReport):
                exc.report = _with_claimants(exc.report, ignored)
            raise
        return dataclasses.replace(result, report=_with_claimants(result.report, ignored))


def open_tenant(
    location: str | os.PathLike[str], *, sealed_fields: Sequence[str] = DEFAULT_SEALED_FIELDS
) -> Tenant | PostgresTenant:
    """The tenant at ``location``: a folder, or ``postgresql://...#tenant``.

    Raises:
        TenantError: ``location`` is neither a path nor a URL.
        LedgerError: a URL without a valid tenant name after ``#``.
        RecordError: ``sealed_fields`` is not a sequence of ``str``.
    """
    if _pg.is_url(location):
        return PostgresTenant(str(location), sealed_fields=sealed_fields)
    return Tenant(location, sealed_fields=sealed_fields)


def list_postgres_tenants(url: str) -> list[str]:
    """The names of the tenants of a database, sorted (none when it has no ledger tables).

    Args:
        url: ``postgresql://...`` (a fragment, if any, is ignored).

    Raises:
        DatabaseError: the database cannot be reached.
    """
    conninfo, _fragment = _pg.split_url(url)
    pool = _pg.Pool(conninfo, max_idle=0)
    psycopg = _pg.driver()
    try:
        with pool.connection() as conn:
            if conn.execute("SELECT to_regclass('mm_tenants')").fetchone()[0] is None:
                return []
            rows = conn.execute("SELECT name FROM mm_tenants ORDER BY name").fetchall()
            return [str(row[0]) for row in rows]
    except psycopg.Error as exc:
        raise _pg.translate(exc, conninfo, "list the tenants") from None


# --- moving a tenant between backends -----------------------------------------------------


def _empty_folder(path: Path) -> bool:
    try:
        with os.scandir(path) as listing:
            return next(listing, None) is None
    except FileNotFoundError:
        return True


def export_tenant(url: str, folder: str | os.PathLike[str]) -> Path:
    """Copy a PostgreSQL tenant into a new tenant folder, byte for byte.

    Writes ``memory/<name>`` for every record row, ``ledger.jsonl`` (the stored lines),
    ``ledger.torn`` (when anything was quarantined) and ``ledger.head`` (the head's seq, hash
    and end; no fingerprint, so the folder's first append walks the chain once), all read in
    one snapshot. The folder is built beside ``folder`` and renamed into place (files and
    folders fsynced first), so ``folder`` is either absent or whole.

    Args:
        url: ``postgresql://...#tenant``.
        folder: where the tenant folder goes: absent, or an empty folder.

    Returns:
        The folder.

    Raises:
        TenantError: no such tenant, or ``folder`` exists and is not an empty folder.
        DatabaseError: the database cannot be reached.
        OSError: from the file system (nothing is left at ``folder``).
    """
    source = PostgresTenant(url)
    target = as_path(folder, "a tenant folder", TenantError)
    if target.is_symlink() or (target.exists() and not (target.is_dir() and _empty_folder(target))):
        raise TenantError("export needs an absent or empty folder", str(target))
    makedirs_durable(target.parent)
    work = target.with_name(f".{target.name}.exporting-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    (work / "memory").mkdir(parents=True)
    try:
        with source.store.reader() as file:
            if file is None:
                raise TenantError(f"no tenant {source.name!r} in the database", source.store.label)
            for name, body in source._rows():
                _write_new(work / "memory" / name, body)
            with open(work / "ledger.jsonl", "wb") as handle:
                offset, size = 0, file.size()
                while offset < size:
                    chunk = file.read(offset, min(_COPY_BLOCK, size - offset))
                    handle.write(chunk)
                    offset += len(chunk)
                handle.flush()
                os.fsync(handle.fileno())
            torn = source.store.with_connection(
                "read the quarantine",
                lambda conn, tenant: bytes(
                    conn.execute("SELECT torn FROM mm_tenants WHERE id = %s", (tenant,)).fetchone()[
                        0
                    ]
                ),
                default=b"",
            )
            head = source.store.read_head()
        if torn:
            _write_new(work / "ledger.torn", torn)
        if head is not None:
            FolderLedgerStore(work / "ledger.jsonl").write_head(
                Head(head.seq, head.hash, head.end, None)
            )
        fsync_dir(work / "memory")
        fsync_dir(work)
        if target.exists():
            target.rmdir()  # empty: replaced by the whole tenant in one rename
        os.rename(work, target)
        fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return target


def _torn(conn: Any, tenant: int) -> bytes:
    """The tenant's quarantined fragments (``ledger.torn``'s bytes)."""
    return bytes(conn.execute("SELECT torn FROM mm_tenants WHERE id = %s", (tenant,)).fetchone()[0])


def _write_new(path: Path, data: bytes) -> None:
    """Create ``path`` with ``data`` and fsync it (a fresh folder: no rename needed)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _folder_records(memory: Path) -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of every ``memory/*.json``; refuses what a row cannot stand for."""
    rows: list[tuple[str, bytes]] = []
    try:
        entries = sorted(os.scandir(memory), key=lambda e: e.name)
    except FileNotFoundError:
        return rows
    for entry in entries:
        if entry.name.endswith(PENDING_SUFFIX):
            raise TenantError(
                f"memory/{entry.name}: a re-save was interrupted; run `ledger seal` on the"
                " folder first",
                str(memory.parent),
            )
        if not entry.name.endswith(".json"):
            continue
        if not stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
            raise TenantError(
                f"memory/{entry.name} is not a regular file (a database holds bytes only)",
                str(memory.parent),
            )
        data = read_regular_file(entry.path, StoreFileError)
        rows.append((entry.name, data or b""))
    return rows


def _refuse_what_a_database_cannot_hold(source: Tenant) -> None:
    """Refuse, before anything is written, a tenant folder whose copy would lose something:
    a testimony mode other than RFC 8785 recorded in ``testimony.json`` (a salted tenant's
    records would read altered, a mnemo one would be sealed in another mode), and forgotten
    records (``forgotten/`` tombstones, ``op: "forget"`` entries): a database tenant has no
    place for either yet."""
    mode = read_testimony_mode(source.root)
    if mode is not None and mode != "rfc8785":
        raise TenantError(
            f"a {mode} tenant cannot be copied to PostgreSQL yet (testimony.json)",
            str(source.root),
        )
    try:
        with os.scandir(source.forgotten_dir) as listing:
            tombstones = sorted(entry.name for entry in listing)
    except (FileNotFoundError, NotADirectoryError):
        tombstones = []
    if tombstones:
        raise TenantError(
            f"a tenant with forgotten records cannot be copied to PostgreSQL yet "
            f"(forgotten/{tombstones[0]}: tombstones have no place there)",
            str(source.root),
        )


def _refuse_forget_entries(source: Tenant, data: bytes) -> None:
    """Refuse a ledger holding ``op: "forget"`` entries (their tombstones have no place in a
    database tenant yet), in either line form."""
    if b'"op":"forget"' in data or b'"op": "forget"' in data:
        raise TenantError(
            "a tenant with forgotten records cannot be copied to PostgreSQL yet "
            '(its ledger holds op: "forget" entries)',
            str(source.root),
        )


def import_tenant(folder: str | os.PathLike[str], url: str) -> PostgresTenant:
    """Copy a tenant folder into a new (or empty) PostgreSQL tenant, byte for byte.

    Under the folder's ledger lock (so no append moves it meanwhile), reads ``ledger.jsonl``,
    ``ledger.head``, ``ledger.torn`` and every ``memory/*.json``; then writes them all in one
    transaction under the database tenant's locks. Nothing is written unless everything is.

    Args:
        folder: a tenant folder (``memory/`` or ``ledger.jsonl``).
        url: ``postgresql://...#tenant``; the tenant must not exist or be empty.

    Returns:
        The database tenant.

    Raises:
        TenantError: not a tenant folder; a salted or mnemo tenant (``testimony.json``) or
            one with forgotten records (``forgotten/``, ``op: "forget"`` entries), refused
            before anything is written (a database tenant has no place for them yet); a
            record file that is a symbolic link or not a regular file, or a ``.pending``
            re-save left by a crash; the database tenant already holds a ledger or records.
        LedgerFormatError: the folder's ``ledger.head`` is unreadable.
        DatabaseError: the database refused or cannot be reached (nothing is kept).
        OSError: from the file system.
    """
    source = Tenant(folder)
    source.check_layout()
    _refuse_what_a_database_cannot_hold(source)
    target = PostgresTenant(url)
    with contextlib.ExitStack() as stack:
        data = b""
        head = None
        if source.ledger.store.exists():
            file = stack.enter_context(source.ledger.locked(write=False))
            data = file.read(0, file.size())
            head = source.ledger.store.read_head()
        _refuse_forget_entries(source, data)
        torn = read_regular_file(source.root / "ledger.torn", StoreFileError) or b""
        rows = _folder_records(source.memory_dir)
        with target.ledger.locked() as dest:
            store = target.store
            tenant = store.tenant_id()
            taken = store.with_connection(
                "read the records",
                lambda conn, t: conn.execute(
                    "SELECT count(*) FROM mm_records WHERE tenant_id = %s", (t,)
                ).fetchone()[0],
                default=0,
            )
            if dest.size() or store.read_head() is not None or taken:
                raise TenantError(
                    f"tenant {target.name!r} already holds a ledger or records", store.label
                )
            for name, body in rows:
                store.stage(_UPSERT_RECORD, (tenant, name, body))
            if torn:
                store.stage("UPDATE mm_tenants SET torn = %s WHERE id = %s", (torn, tenant))
            if data:
                dest.append(0, data)
            if head is not None:
                store.write_head(head)
    return target

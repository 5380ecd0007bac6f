"""Tenants in PostgreSQL, one addressing scheme for every tenant, and moving tenants between
backends (private; public face :mod:`merkle_memory.ledger`).

* :class:`PostgresTenant`: a tenant whose records (``mm_records``, one row per record file,
  its exact bytes under its file name) and ledger (:class:`PostgresLedgerStore`) live in one
  database. A save is one transaction: the record row, the entry's line and the head commit
  together, so a crash never leaves a record without its line or a line without its record.
* :func:`open_tenant`: a folder or a ``postgresql://...#tenant`` URL, whichever it is given.
* :func:`export_tenant` / :func:`import_tenant`: copy a tenant between a database and a
  folder, byte for byte (``ledger.jsonl``, ``memory/*.json``, ``ledger.torn``,
  ``testimony.json``, ``forgotten/*.json``; the head's seq, hash and end), so verify reports
  the same on both sides.

A tenant's testimony mode and its tombstones live beside the ledger tables (component
``tenant`` version 1 in ``mm_schema``, installed by the first write that needs it; a database
without them reads as tenants with no recorded mode and nothing forgotten)::

    mm_tenant_settings (tenant_id PRIMARY KEY, testimony)   -- testimony.json: the mode
    mm_tombstones      (tenant_id, name, body)              -- forgotten/<name>: its bytes
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from .. import _pg
from .._fsio import fsync_dir, makedirs_durable, read_regular_file, write_all
from .._progress import ProgressCallback
from ..errors import (
    DatabaseError,
    LedgerBrokenError,
    LedgerFormatError,
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
    SALT_FIELD,
    RecordState,
    _decode,
    _forms,
    _retiring_digest,
    _sealed,
    _speaker,
    check_sealed_fields,
    check_testimony_mode,
    record_bytes,
    record_to_seal,
    validate_record_id,
)
from .settings import (
    SETTINGS_NAME,
    choose_testimony_mode,
    implied_testimony_mode,
    read_testimony_mode,
    settings_bytes,
)
from .storage import Head, LedgerStore
from .tenant import Tenant, _with_claimants
from .tombstones import (
    FORGOTTEN_DIR,
    TOMBSTONE_PENDING_SUFFIX,
    ForgetReceipt,
    Tombstone,
    TombstoneKeeper,
    check_reason,
    forget_locked,
)

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
_TABLES_VERSION: Final = 1
_TABLES_LOCK: Final = _pg.INSTALLER_LOCK  # one installer of any of the package's tables
_TABLES: Final = (
    """CREATE TABLE IF NOT EXISTS mm_tenant_settings (
        tenant_id integer PRIMARY KEY REFERENCES mm_tenants (id),
        testimony text NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS mm_tombstones (
        tenant_id integer NOT NULL REFERENCES mm_tenants (id),
        name      text COLLATE "C" NOT NULL,
        body      bytea NOT NULL,
        PRIMARY KEY (tenant_id, name)
    )""",
    "INSERT INTO mm_schema VALUES ('tenant', 1) ON CONFLICT (component) DO NOTHING",
)
_UPSERT_MODE: Final = (
    "INSERT INTO mm_tenant_settings (tenant_id, testimony) VALUES (%s, %s)"
    " ON CONFLICT (tenant_id) DO UPDATE SET testimony = excluded.testimony"
)
_UPSERT_TOMBSTONE: Final = (
    "INSERT INTO mm_tombstones (tenant_id, name, body) VALUES (%s, %s, %s)"
    " ON CONFLICT (tenant_id, name) DO UPDATE SET body = excluded.body"
)


def _has_tables(conn: Any) -> bool:
    """Whether the ``tenant`` component's tables are installed (one query: a tenant's
    database always has ``mm_schema``).

    Raises:
        DatabaseError: they are, in a version this library does not read.
    """
    row = conn.execute("SELECT version FROM mm_schema WHERE component = 'tenant'").fetchone()
    version = None if row is None else int(row[0])
    if version is not None and version != _TABLES_VERSION:
        raise DatabaseError(
            f"tenant schema version {version}, this library reads version {_TABLES_VERSION}"
        )
    return version is not None


def scan_record_rows(
    rows: Sequence[tuple[str, bytes]],
    sealed_fields: Sequence[str],
    ignored: list[tuple[str, Path]] | None = None,
    *,
    mode: str = "rfc8785",
) -> dict[str, RecordState]:
    """``records.scan_records`` over ``(file name, bytes)`` rows instead of a folder.

    The same rules (the key is the record's id, or the name's stem when it cannot be read;
    of files claiming one id with different testimony ``<id>.json`` speaks; ``mode`` the
    tenant's testimony mode), with the path of each state ``memory/<name>``, so reports name
    the same files on every backend.
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
            sealed = _sealed(record, fields)
            forms, sealable, problem = _forms(sealed, mode, record.get(SALT_FIELD))
            state = RecordState(path, forms, sealable, problem)
        claims.setdefault(key, []).append(state)
    return {key: _speaker(key, states, ignored) for key, states in claims.items()}


class PostgresTenant:
    """One tenant of a PostgreSQL database: records in ``mm_records``, sealed by its ledger.

    The same methods and reports as :class:`~merkle_memory.ledger.Tenant` (``save``, ``seal``,
    ``verify``, ``forget``, ``records``, ``testimony``, ``tombstone``); a record's "file" is
    its row, named ``<id>.json`` as in a folder, and so is a tombstone's
    (``mm_tombstones``). The testimony mode is recorded in ``mm_tenant_settings`` (a
    folder's ``testimony.json``) or, when no row records one, implied by the ledger as for a
    folder (:func:`~merkle_memory.ledger.settings.ledger_testimony_mode`).

    Args:
        url: ``postgresql://...#tenant`` (libpq's URI form; the fragment is the tenant name,
            ``[A-Za-z0-9][A-Za-z0-9_-]{0,63}``).
        sealed_fields: the fields covered by each record's testimony (default: mnemo's eight).
        testimony: the testimony mode to write with (``"rfc8785"``, ``"mnemo"`` or
            ``"salted"``), recorded with the first ``save``, ``forget`` or ``initialize``
            in the same transaction; ``None`` keeps the tenant's mode. As for a folder, a
            salted tenant stays salted and a tenant with entries cannot become salted
            (``TenantError`` at the first write).

    Raises:
        LedgerError: no valid tenant name after ``#``.
        DatabaseError: not a PostgreSQL URL.
        RecordError: ``sealed_fields`` is not a sequence of ``str``, or ``testimony`` is not
            a mode.
    """

    def __init__(
        self,
        url: str,
        *,
        sealed_fields: Sequence[str] = DEFAULT_SEALED_FIELDS,
        testimony: str | None = None,
    ) -> None:
        self.store = PostgresLedgerStore(url)
        self.sealed_fields = check_sealed_fields(sealed_fields)
        self.requested_testimony = None if testimony is None else check_testimony_mode(testimony)
        self.ledger = Ledger(self.store)
        self._tables_ready = False  # the tenant component is installed (it stays so)
        self._implied: str | None = None  # the mode the ledger's first line implies, once read

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

    def _row(self, record_id: str) -> bytes | None:
        """The bytes of ``memory/<id>.json``'s row, or ``None``."""

        def work(conn: Any, tenant: int) -> bytes | None:
            row = conn.execute(
                "SELECT body FROM mm_records WHERE tenant_id = %s AND name = %s",
                (tenant, f"{record_id}.json"),
            ).fetchone()
            return None if row is None else bytes(row[0])

        return self.store.with_connection("read a record", work, default=None)

    def records(self, *, ignored: list[tuple[str, Path]] | None = None) -> dict[str, RecordState]:
        """Memory id -> what the database holds (see :func:`scan_record_rows`), judged in
        the tenant's testimony mode."""
        mode = self.testimony_mode
        return scan_record_rows(self._rows(), self.sealed_fields, ignored, mode=mode)

    def testimony(self) -> Mapping[str, tuple[str, ...]]:
        """Memory id -> acceptable testimony digests of each record row."""
        return {mid: state.forms for mid, state in self.records().items()}

    # --- the testimony mode and the tombstones' table ------------------------------------

    def _install_tables(self) -> None:
        """Create the tenant (and the ledger tables) and the ``tenant`` component's tables
        when missing (their own transaction, serialized against other installers), before
        a write that needs them.

        Raises:
            DatabaseError: the database refused, or holds another version of the tables.
        """
        if self._tables_ready:
            return
        self.store.tenant_id(create=True)

        def work(conn: Any, tenant: int) -> None:
            del tenant
            if _has_tables(conn):
                return
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_TABLES_LOCK,))
                for statement in _TABLES:
                    conn.execute(statement)

        self.store.with_connection("install the tenant tables", work, default=None)
        self._tables_ready = True

    def _recorded_mode(self) -> str | None:
        """The mode ``mm_tenant_settings`` records for the tenant, or ``None``."""

        def work(conn: Any, tenant: int) -> str | None:
            if not self._tables_ready:
                if not _has_tables(conn):
                    return None
                self._tables_ready = True
            row = conn.execute(
                "SELECT testimony FROM mm_tenant_settings WHERE tenant_id = %s", (tenant,)
            ).fetchone()
            return None if row is None else str(row[0])

        mode = self.store.with_connection("read the testimony mode", work, default=None)
        if mode is not None and mode not in ("rfc8785", "mnemo", "salted"):
            raise LedgerFormatError(f"{self.store.label}: unknown testimony mode {mode!r:.80}")
        return mode

    @property
    def testimony_mode(self) -> str:
        """The tenant's testimony mode: the one ``mm_tenant_settings`` records, else the one
        its ledger implies (``"mnemo"`` when mnemo-cortex wrote its first line, else
        ``"rfc8785"``), as for a folder.

        Raises:
            LedgerFormatError: the recorded mode is not one this library knows.
            DatabaseError: the database cannot be reached.
        """
        recorded = self._recorded_mode()
        return recorded if recorded is not None else self._implied_mode()

    def _implied_mode(self) -> str:
        """The mode the ledger implies, kept once its first line exists (it never changes)."""
        if self._implied is not None:
            return self._implied
        mode, final = implied_testimony_mode(self.store)
        if final:
            self._implied = mode
        return mode

    def _mode_to_write(self) -> tuple[str, bool]:
        """``(the mode to write with, whether it must be recorded first)``
        (:func:`~merkle_memory.ledger.settings.choose_testimony_mode`).

        Raises:
            TenantError: the tenant is salted and another mode was asked for, or salted was
                asked for a tenant whose ledger holds entries.
        """

        def has_lines() -> bool:
            with self.store.reader() as file:
                return file is not None and file.size() > 0

        return choose_testimony_mode(
            self._recorded_mode(),
            self.requested_testimony,
            self._implied_mode,
            has_lines,
            self.store.label,
        )

    def _write_mode(self) -> str:
        """Inside a write block: the mode to write with, its row staged when it must be
        recorded (committed with the block's first head, before any record it governs)."""
        mode, record = self._mode_to_write()
        if record:
            self.store.stage(_UPSERT_MODE, (self.store.tenant_id(), mode))
        return mode

    def initialize(self) -> str:
        """Create the tenant in the database (its row, and the tables when missing), with an
        empty ledger, and record the testimony mode asked for in the constructor;
        idempotent.

        Returns:
            The tenant's testimony mode after the call.

        Raises:
            TenantError: a salted tenant was asked for another mode, or salted was asked
                for a tenant whose ledger holds entries.
            DatabaseError: the database refused or cannot be reached.
        """
        self.store.tenant_id(create=True)
        if self.requested_testimony is not None:
            self._install_tables()
            with self.ledger.locked():
                self._write_mode()
        return self.testimony_mode

    def tombstone(self, record_id: str) -> Tombstone | None:
        """The tombstone of the last forget of ``record_id`` (its ``mm_tombstones`` row),
        or ``None`` when there is none.

        Raises:
            RecordError: an invalid id.
            LedgerFormatError: the row is not a tombstone.
            DatabaseError: the database cannot be reached.
        """
        body = _RowTombstones(self).body(validate_record_id(record_id))
        return None if body is None else Tombstone.from_bytes(body)

    def forget(self, record_id: str, reason: str, *, force: bool = False) -> ForgetReceipt:
        """Erase a record's row and seal a tombstone (``op: "forget"``), in one transaction.

        The same algorithm, refusals and receipt as :meth:`Tenant.forget`
        (:func:`~merkle_memory.ledger.tombstones.forget_locked`): under the tenant's lock
        the chain is verified (a broken chain refused), an ``altered`` record refused unless
        ``force``; then the tombstone row (``mm_tombstones``, the bytes of
        ``forgotten/<id>.json``), the removal of the record's row, the ``forget`` entry and
        the head commit together, with ``synchronous_commit = on``, before this returns. A
        crash (or a killed client) at any point leaves the record ``sealed`` with nothing of
        the forget, or ``forgotten``: never half (docs/THREAT_MODEL.md). Forgetting an id
        already forgotten appends nothing; it removes a record row put back since.

        Raises:
            RecordError: an invalid id, nothing to forget, a record never sealed that does
                not parse, or an ``altered`` record without ``force`` (nothing changed).
            LedgerFormatError: a bad reason (empty, too long, not a string).
            TenantError: no such tenant.
            LedgerBrokenError: the chain is broken (``.report`` holds the verify report).
            LedgerRollbackError: the append was refused (nothing changed).
            DatabaseError: the database refused or cannot be reached (nothing changed).
        """
        record_id = validate_record_id(record_id)
        reason = check_reason(reason)
        self.check_layout()
        self._install_tables()

        def unsealed(body: bytes) -> str:
            try:
                record = _decode(body)
                return _retiring_digest(record, self.sealed_fields, self.testimony_mode)
            except RecordError as exc:
                raise RecordError(
                    f"{record_id!r} was never sealed and cannot be read ({exc}); it has no "
                    "ledger entry, so removing its row leaves nothing to forget"
                ) from None

        def nothing(mid: str) -> Exception:
            return RecordError(f"no record {mid!r} in {self.store.label}: nothing to forget")

        def forms(body: bytes) -> tuple[str, ...]:
            rows = [(f"{record_id}.json", body)]
            states = scan_record_rows(rows, self.sealed_fields, mode=self.testimony_mode)
            state = states.get(record_id)
            return () if state is None else state.forms

        with self.ledger.locked():
            self._write_mode()
            return forget_locked(
                self.ledger,
                _RowTombstones(self),
                record_id,
                reason,
                self._row,
                unsealed,
                nothing,
                forms=forms,
                force=force,
                label=f"{self.name}: ",
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
        The testimony follows the tenant's mode as :meth:`Tenant.save` says (``"salted"``
        writes a fresh ``testimony_salt``); a mode asked for in the constructor is recorded
        in the same transaction.

        Raises:
            RecordError: not a mapping with ``str`` keys, invalid id, not JSON, or a sealed
                value outside the mode's domain (nothing is written).
            TenantError: a salted tenant was asked for another mode (nothing is written).
            LedgerRollbackError, LedgerBrokenError, LedgerFormatError: the append was refused
                (nothing is written).
            DatabaseError: the database refused or cannot be reached (nothing is written).
        """
        if not isinstance(record, Mapping):
            raise RecordError(f"a record must be a mapping, not {type(record).__name__}")
        record_id = validate_record_id(record.get("id"))
        if self.requested_testimony is not None:
            self._install_tables()
        else:
            queued = self._save_queued(record, record_id)
            if queued is not None:  # the group commit of the database (ledger._postgres)
                return queued
        with self.ledger.locked():
            mode = self._write_mode()
            prepared, digest = record_to_seal(record, self.sealed_fields, mode=mode)
            tenant = self.store.tenant_id()
            self.store.stage(_UPSERT_RECORD, (tenant, f"{record_id}.json", record_bytes(prepared)))
            return self.ledger.append(record_id, digest, op="save")

    def _save_queued(self, record: Mapping[str, Any], record_id: str) -> Entry | None:
        """Save through the database's append queue when the testimony mode cannot change
        before the queued entry commits: the tenant records ``salted`` (final), or its ledger
        has a first line (``salted`` can then no longer be asked for, and a record sealed
        while ``rfc8785`` and ``mnemo`` change places verifies under both). ``None`` when the
        queue is not taken (an empty tenant, a database without the queue, a hook, ...): the
        caller then takes the locked path, which decides the mode under the head row.

        Raises:
            RecordError: the record cannot be sealed in the tenant's mode.
            LedgerRollbackError, LedgerBrokenError, LedgerFormatError, DatabaseError: as
                :meth:`save`.
        """
        recorded = self._recorded_mode()
        if recorded == "salted":
            mode = recorded
        else:
            implied = self._implied_mode()
            if self._implied is None:  # no first line yet: the mode is not settled
                return None
            mode = recorded if recorded is not None else implied
        prepared, digest = record_to_seal(record, self.sealed_fields, mode=mode)
        queued = self.ledger.append_queued(
            [(record_id, digest)],
            "save",
            time.time(),
            (f"{record_id}.json", record_bytes(prepared)),
        )
        return None if queued is None else queued[0]

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


class _RowTombstones(TombstoneKeeper[bytes]):
    """The tombstones of a database tenant (``mm_tombstones``) and its record rows, for
    :func:`~merkle_memory.ledger.tombstones.forget_locked` inside the tenant's write block:
    every change is staged in the block's transaction and commits with the ``forget``
    entry's head, so a forget is never half done and there is nothing to settle."""

    def __init__(self, tenant: PostgresTenant) -> None:
        self._tenant = tenant
        self._store = tenant.store

    def body(self, memory_id: str) -> bytes | None:
        """The bytes of ``forgotten/<id>.json``'s row, or ``None``."""

        def work(conn: Any, tenant: int) -> bytes | None:
            if not _has_tables(conn):
                return None
            row = conn.execute(
                "SELECT body FROM mm_tombstones WHERE tenant_id = %s AND name = %s",
                (tenant, f"{memory_id}.json"),
            ).fetchone()
            return None if row is None else bytes(row[0])

        return self._store.with_connection("read a tombstone", work, default=None)

    def settle(self, memory_id: str) -> bool:
        """Nothing to settle: a forget commits whole or not at all."""
        del memory_id
        return False

    def remove_record(self, memory_id: str) -> bool:
        """Stage the deletion of the record's row; ``False`` when there is none."""
        if self._tenant._row(memory_id) is None:
            return False
        self._store.stage(
            "DELETE FROM mm_records WHERE tenant_id = %s AND name = %s",
            (self._store.tenant_id(), f"{memory_id}.json"),
        )
        return True

    def stored(self, memory_id: str) -> Tombstone | None:
        """The tombstone row (``None`` when missing or not a tombstone)."""
        body = self.body(memory_id)
        try:
            return None if body is None else Tombstone.from_bytes(body)
        except LedgerFormatError:
            return None

    def seal(self, tomb: Tombstone, append: Callable[[], Entry]) -> tuple[Entry, bool]:
        """Stage the tombstone row and the removal of the record's row, then ``append``:
        its head commits them all in one transaction."""
        name = f"{tomb.memory_id}.json"
        self._store.stage(_UPSERT_TOMBSTONE, (self._store.tenant_id(), name, tomb.to_bytes()))
        removed = self.remove_record(tomb.memory_id)
        return append(), removed


def open_tenant(
    location: str | os.PathLike[str],
    *,
    sealed_fields: Sequence[str] = DEFAULT_SEALED_FIELDS,
    testimony: str | None = None,
) -> Tenant | PostgresTenant:
    """The tenant at ``location``: a folder, or ``postgresql://...#tenant``.

    Args:
        location: the tenant folder or URL.
        sealed_fields: the fields each record's testimony covers.
        testimony: the testimony mode to write with (``None``: the tenant's own), as
            :class:`~merkle_memory.ledger.Tenant` takes it.

    Raises:
        TenantError: ``location`` is neither a path nor a URL.
        LedgerError: a URL without a valid tenant name after ``#``.
        RecordError: ``sealed_fields`` is not a sequence of ``str``, or ``testimony`` is
            not a mode.
    """
    if _pg.is_url(location):
        return PostgresTenant(str(location), sealed_fields=sealed_fields, testimony=testimony)
    return Tenant(location, sealed_fields=sealed_fields, testimony=testimony)


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
    ``ledger.torn`` (when anything was quarantined), ``testimony.json`` (when the tenant
    records its mode), ``forgotten/<name>`` for every tombstone row and ``ledger.head`` (the
    head's seq, hash and end; no fingerprint, so the folder's first append walks the chain
    once), all read in one snapshot. The folder is built beside ``folder`` and renamed into
    place (files and folders fsynced first), so ``folder`` is either absent or whole.

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
            torn = source.store.with_connection("read the quarantine", _torn, default=b"")
            head = source.store.read_head()
            mode = source._recorded_mode()
            none: list[tuple[str, bytes]] = []
            tombstones = source.store.with_connection(
                "read the tombstones", _tombstone_rows, default=none
            )
            side = _side_files(source.store)
        if torn:
            _write_new(work / "ledger.torn", torn)
        for name, body in side:
            _write_new(work / name, body)
            if name.startswith("ledger.recovery-"):
                os.chmod(work / name, 0o444)  # as the folder store writes a recovery record
        if mode is not None:
            _write_new(work / SETTINGS_NAME, settings_bytes(mode))
        if tombstones:
            (work / FORGOTTEN_DIR).mkdir()
            for name, body in tombstones:
                _write_new(work / FORGOTTEN_DIR / name, body)
            fsync_dir(work / FORGOTTEN_DIR)
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


def _side_files(store: LedgerStore) -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of every file the store keeps beside its ledger (``ledger.cosigned``,
    ``ledger.witnesses``, ``ledger.recovery-<n>.json``), by name."""
    found: list[tuple[str, bytes]] = []
    for name in store.side_files():
        body = store.read_side_file(name)
        if body is not None:
            found.append((name, body))
    return found


def _torn(conn: Any, tenant: int) -> bytes:
    """The tenant's quarantined fragments (``ledger.torn``'s bytes)."""
    return bytes(conn.execute("SELECT torn FROM mm_tenants WHERE id = %s", (tenant,)).fetchone()[0])


def _holds_anything(conn: Any, tenant: int) -> int:
    """How many record and tombstone rows the tenant has (its testimony mode row, written by
    ``ledger init``, leaves it empty: :func:`import_tenant` compares the modes)."""
    count = "SELECT count(*) FROM {} WHERE tenant_id = %s"
    tables = ["mm_records"] + (["mm_tombstones"] if _has_tables(conn) else [])
    return sum(int(conn.execute(count.format(t), (tenant,)).fetchone()[0]) for t in tables)


def _tombstone_rows(conn: Any, tenant: int) -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of every tombstone row of the tenant, by name."""
    if not _has_tables(conn):
        return []
    rows = conn.execute(
        "SELECT name, body FROM mm_tombstones WHERE tenant_id = %s ORDER BY name", (tenant,)
    ).fetchall()
    return [(str(name), bytes(body)) for name, body in rows]


def _write_new(path: Path, data: bytes) -> None:
    """Create ``path`` with ``data`` and fsync it (a fresh folder: no rename needed)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _folder_records(memory: Path) -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of every ``memory/*.json``; refuses a re-save a crash interrupted
    (a ``.json.pending`` record) and what a row cannot stand for."""
    return _folder_rows(memory, "memory", PENDING_SUFFIX, "a re-save")


def _folder_tombstones(forgotten: Path) -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of every ``forgotten/*.json``; refuses a forget a crash interrupted
    (a ``.json.pending`` tombstone: ``ledger seal`` settles it) and what a row cannot stand
    for."""
    return _folder_rows(forgotten, FORGOTTEN_DIR, TOMBSTONE_PENDING_SUFFIX, "a forget")


def _folder_rows(
    folder: Path, shown: str, pending_suffix: str, what: str
) -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of every ``*.json`` file of ``folder`` (``[]`` when it is absent),
    by name; ``TenantError`` for a ``pending_suffix`` file (``what`` a crash interrupted:
    ``ledger seal`` settles it first) or a ``*.json`` that is not a regular file."""
    rows: list[tuple[str, bytes]] = []
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return rows
    for entry in entries:
        if entry.name.endswith(pending_suffix):
            raise TenantError(
                f"{shown}/{entry.name}: {what} was interrupted; run `ledger seal` on the"
                " folder first",
                str(folder.parent),
            )
        if not entry.name.endswith(".json"):
            continue
        if not stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
            raise TenantError(
                f"{shown}/{entry.name} is not a regular file (a database holds bytes only)",
                str(folder.parent),
            )
        data = read_regular_file(entry.path, StoreFileError)
        rows.append((entry.name, data or b""))
    return rows


def import_tenant(folder: str | os.PathLike[str], url: str) -> PostgresTenant:
    """Copy a tenant folder into a new (or empty) PostgreSQL tenant, byte for byte.

    Under the folder's ledger lock (so no append moves it meanwhile), reads ``ledger.jsonl``,
    ``ledger.head``, ``ledger.torn``, every ``memory/*.json``, ``testimony.json`` and every
    ``forgotten/*.json``; then writes them all in one transaction under the database
    tenant's locks (the mode in ``mm_tenant_settings``, each tombstone's bytes in
    ``mm_tombstones``). Nothing is written unless everything is.

    Args:
        folder: a tenant folder (``memory/`` or ``ledger.jsonl``).
        url: ``postgresql://...#tenant``; the tenant must not exist or be empty (no ledger
            line, head, record or tombstone; a testimony mode recorded by ``ledger init``
            must equal the folder's, recorded or implied).

    Returns:
        The database tenant.

    Raises:
        TenantError: not a tenant folder; a record or tombstone file that is a symbolic
            link or not a regular file, or a ``.pending`` re-save or forget left by a crash
            (``ledger seal`` settles it); the database tenant already holds a ledger,
            records or tombstones, or records a testimony mode other than the folder's.
        LedgerFormatError: the folder's ``ledger.head`` or ``testimony.json`` is
            unreadable.
        DatabaseError: the database refused or cannot be reached (nothing is kept).
        OSError: from the file system.
    """
    source = Tenant(folder)
    source.check_layout()
    mode = read_testimony_mode(source.root)
    folder_mode = source.testimony_mode  # recorded, else implied by the folder's ledger
    tombstones = _folder_tombstones(source.forgotten_dir)
    target = PostgresTenant(url)
    if mode is not None or tombstones:
        target._install_tables()
    with contextlib.ExitStack() as stack:
        data = b""
        head = None
        if source.ledger.store.exists():
            file = stack.enter_context(source.ledger.locked(write=False))
            data = file.read(0, file.size())
            head = source.ledger.store.read_head()
        torn = read_regular_file(source.root / "ledger.torn", StoreFileError) or b""
        side = _side_files(source.ledger.store)
        rows = _folder_records(source.memory_dir)
        with target.ledger.locked() as dest:
            store = target.store
            tenant = store.tenant_id()
            taken = store.with_connection("read the records", _holds_anything, default=0)
            if dest.size() or store.read_head() is not None or taken:
                raise TenantError(
                    f"tenant {target.name!r} already holds a ledger or records", store.label
                )
            recorded = target._recorded_mode()
            if recorded is not None and recorded != folder_mode:
                raise TenantError(
                    f"the empty tenant {target.name!r} records testimony mode {recorded!r} "
                    f"(ledger init), the folder's is {folder_mode!r}: import into a new "
                    "tenant, or one made with the folder's mode",
                    store.label,
                )
            if mode is not None:
                store.stage(_UPSERT_MODE, (tenant, mode))
            for name, body in rows:
                store.stage(_UPSERT_RECORD, (tenant, name, body))
            for name, body in tombstones:
                store.stage(_UPSERT_TOMBSTONE, (tenant, name, body))
            if torn:
                store.stage("UPDATE mm_tenants SET torn = %s WHERE id = %s", (torn, tenant))
            for name, body in side:
                store.write_side_file(name, body)  # in this transaction
            if data:
                dest.append(0, data)
            if head is not None:
                store.write_head(head)
    return target

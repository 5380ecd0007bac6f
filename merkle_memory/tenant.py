"""A tenant: a folder of memory records sealed by one ledger (DESIGN section 4).

Layout (compatible with mnemo-cortex): ``TENANT/memory/*.json`` (records),
``TENANT/ledger.jsonl``, ``TENANT/ledger.head``, ``TENANT/ledger.torn``. A multi-tenant root
holds ``ROOT/agents/<name>/`` with names matching ``[A-Za-z0-9][A-Za-z0-9_-]{0,63}``.

Quick start::

    from merkle_memory.tenant import Tenant
    t = Tenant("agents/cc")
    t.save({"id": "m1", "summary": "we chose sqlite"})   # record file, then its ledger line
    t.seal().sealed_ids                                  # adopt records with no entry
    t.verify().to_dict()["ok"]                           # True
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .errors import LedgerBrokenError, LedgerError
from .ledger import Entry, Ledger, VerifyReport, verify_ledger
from .records import (
    DEFAULT_SEALED_FIELDS,
    RecordState,
    scan_records,
    testimony,
    validate_record_id,
    write_record,
)

__all__ = [
    "TENANT_NAME",
    "SealReport",
    "Tenant",
    "discover_tenants",
    "is_tenant_name",
]

TENANT_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
"""A tenant directory name (so ``rocky.archived-2026-01`` is not a tenant)."""


def is_tenant_name(name: str) -> bool:
    """Whether ``name`` is a valid tenant directory name (``[A-Za-z0-9][A-Za-z0-9_-]{0,63}``)."""
    return TENANT_NAME.fullmatch(name) is not None


def discover_tenants(root: str | os.PathLike[str]) -> tuple[list[Path], list[str]]:
    """List the tenants of a multi-tenant root: the folders ``ROOT/agents/<name>/``.

    Args:
        root: the root folder.

    Returns:
        ``(tenant folders sorted by name, names of folders skipped because they are not
        tenant names)``. Plain files under ``agents/`` are ignored. Both are empty when
        ``ROOT/agents`` does not exist.

    Raises:
        OSError: ``ROOT/agents`` exists but cannot be listed.
    """
    agents = Path(root) / "agents"
    if not agents.is_dir():
        return [], []
    tenants: list[Path] = []
    skipped: list[str] = []
    for child in sorted(agents.iterdir(), key=lambda p: p.name):
        if not child.is_dir():
            continue
        if is_tenant_name(child.name):
            tenants.append(child)
        else:
            skipped.append(child.name)
    return tenants, skipped


@dataclass(frozen=True, slots=True)
class SealReport:
    """The result of ``Tenant.seal``: the verify report after sealing, plus what was adopted.

    Attributes:
        report: ``VerifyReport`` of the tenant after the adoption.
        sealed_ids: ids adopted by this call, in the order sealed (sorted).
        skipped: unsealed ids that could not be sealed (invalid id, unparseable file, or a
            value outside RFC 8785); they stay ``unsealed``.
    """

    report: VerifyReport
    sealed_ids: tuple[str, ...]
    skipped: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """``report.ok``."""
        return self.report.ok

    @property
    def sealed_now(self) -> int:
        """Number of records adopted by this call."""
        return len(self.sealed_ids)

    def to_dict(self) -> dict[str, Any]:
        """The verify report's keys plus ``sealed_now`` (int) and ``sealed_ids`` (list)."""
        out = self.report.to_dict()
        out["sealed_now"] = self.sealed_now
        out["sealed_ids"] = list(self.sealed_ids)
        return out


class Tenant:
    """One tenant folder: records in ``memory/`` sealed by ``ledger.jsonl``.

    Args:
        root: the tenant folder.
        sealed_fields: the fields covered by each record's testimony (default: mnemo's eight).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        sealed_fields: Sequence[str] = DEFAULT_SEALED_FIELDS,
    ) -> None:
        self.root = Path(root)
        self.memory_dir = self.root / "memory"
        self.sealed_fields = tuple(sealed_fields)
        self.ledger = Ledger(self.root / "ledger.jsonl")

    def __repr__(self) -> str:
        return f"Tenant({str(self.root)!r})"

    @property
    def name(self) -> str:
        """The tenant folder's name (the key of the CLI's JSON output)."""
        return self.root.name

    def records(self) -> dict[str, RecordState]:
        """``scan_records(memory_dir, sealed_fields)``: id -> what is on disk."""
        return scan_records(self.memory_dir, self.sealed_fields)

    def testimony(self) -> Mapping[str, tuple[str, ...]]:
        """Memory id -> acceptable testimony digests of each record file that exists."""
        return {mid: state.forms for mid, state in self.records().items()}

    def verify(self) -> VerifyReport:
        """Verify the ledger against the records (never changes a file).

        Raises:
            OSError: a file exists but cannot be read.
        """
        # The testimony is gathered after the ledger snapshot (head, size): a save racing this
        # verify reads unsealed at worst, never missing.
        return verify_ledger(self.ledger.path, self.testimony)

    def save(self, record: Mapping[str, Any]) -> Entry:
        """Write a record and seal it (``op: "save"``).

        The record file is written atomically and fsynced (folder too) before its ledger line
        is appended, so an acknowledged entry never names a record that is not durable. Both
        happen under the ledger lock, so a concurrent ``seal`` never adopts the record too.

        Args:
            record: a JSON object whose ``id`` passes ``validate_record_id``.

        Returns:
            The acknowledged entry.

        Raises:
            RecordError: invalid id, not JSON, or a sealed value outside RFC 8785 (nothing is
                written).
            LedgerRollbackError, LedgerBrokenError, LedgerFormatError: the append was refused
                (the record file is written and reads ``unsealed``).
            OSError: from the file system.
        """
        record_id = validate_record_id(record.get("id"))
        digest = testimony(record, self.sealed_fields)
        with self.ledger.locked():  # so that a concurrent seal never adopts it in between
            write_record(self.memory_dir, record)
            return self.ledger.append(record_id, digest, op="save")

    def seal(self) -> SealReport:
        """Adopt every record that has no entry (``op: "adopt"``, sorted by id, one fsync).

        Under the ledger lock: refuse a rollback and quarantine a torn tail, verify, refuse a
        broken chain, then adopt exactly the ``unsealed`` records. Deciding under the lock
        means two processes sealing at once never seal one id twice. An altered record has an
        entry, so it is never re-sealed.

        Returns:
            A ``SealReport`` (the report is re-verified after the adoption).

        Raises:
            LedgerBrokenError: the chain is broken; ``.report`` holds the ``VerifyReport``.
            LedgerRollbackError: the ledger went backwards.
            LedgerFormatError: ``ledger.head`` is unreadable.
            LedgerError: the tenant folder does not exist.
            OSError: from the file system.
        """
        if not self.root.is_dir():
            raise LedgerError(f"{self.root} is not a tenant folder")
        with self.ledger.locked():
            self.ledger.recover()
            states = self.records()
            testimony_map = {mid: state.forms for mid, state in states.items()}
            before = verify_ledger(self.ledger.path, testimony_map)
            if before.chain == "broken":
                raise LedgerBrokenError(
                    f"{self.name}: {before.summary()}; refusing to adopt", before
                )
            pairs: list[tuple[str, str]] = []
            skipped: list[str] = []
            for mid in before.unsealed:
                sealable = states[mid].sealable
                if sealable is None:
                    skipped.append(mid)
                else:
                    pairs.append((mid, sealable))
            if pairs:
                self.ledger.append_many(pairs, op="adopt")
            after = verify_ledger(self.ledger.path, testimony_map)
        return SealReport(after, tuple(mid for mid, _ in pairs), tuple(skipped))

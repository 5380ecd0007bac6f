"""Scanning and verifying the files of a memory bank (private; ``MemoryBank.verify``).

DESIGN section 5: every file of ``memories/`` and ``memories/archive/`` is parsed strictly, its
id recomputed and compared with the stored ``id`` and the file name; the ledger is verified
(DESIGN section 4) against the testimony ``{id: id}`` of every file that verifies, active or
archived, so that archiving never makes a memory missing. A tampered file still named for an
id testifies ``""`` (which never matches), so the ledger calls that id altered rather than
missing. Nothing here writes.

Order: ``verify_ledger`` snapshots the ledger (head and size) first, then calls back to scan
the files (under the bank's shared lock), then walks only the snapshot. A memory is durable
before its line is appended, so a save by another process racing verify reads ``unsealed``
at worst (its file scanned, its line past the snapshot), never ``missing``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import BankError
from ..ledger import verify_ledger
from . import _files as _bankfs
from ._migrated import INDEX_NAME, check_index
from ._report import BankProblem, BankReport
from .memory import Memory

if TYPE_CHECKING:
    from ._bank import MemoryBank

__all__ = ["Tally", "scan", "scan_bank", "tally", "verify_bank"]

_log = logging.getLogger("merkle_memory.bank")


def scan(
    bank: MemoryBank, problems: list[BankProblem] | None, *, warn: bool = True
) -> Iterator[tuple[Memory, bool, str]]:
    """Yield ``(memory, archived, relative path)`` for each file that verifies, active first,
    by name; append a :class:`BankProblem` to ``problems`` (when given) for every other file.

    Temp files of interrupted writes are skipped (``verify`` lists them as leftovers; with
    ``warn``, each is also logged as a warning on the ``merkle_memory.bank`` logger). The
    migration index ``memories/.migrated.json`` is not a memory: it is skipped, and reported
    only when it does not parse as an index."""
    out = problems if problems is not None else []
    for folder, archived in ((bank.active_dir, False), (bank.archive_dir, True)):
        rel_folder = bank._rel(folder)
        try:
            if not _bankfs.real_dir(folder, rel_folder + "/"):
                continue
        except BankError as exc:
            out.append(BankProblem(rel_folder, _bankfs.UNEXPECTED_FILE, str(exc)))
            if not archived:
                return
            continue
        base = os.fspath(folder)
        for name in bank._names(folder):
            path = os.path.join(base, name)
            rel = f"{rel_folder}/{name}"
            if not archived and name == "archive":
                continue
            if not archived and name == INDEX_NAME:
                if (bad := check_index(path)) is not None:
                    out.append(BankProblem(rel, *bad))
                continue
            if _bankfs.is_temp_name(name):
                if warn:
                    _log.warning("%s: temp file left by an interrupted write", rel)
                continue
            found = _bankfs.inspect_file(path)
            if found.memory is None:
                assert found.kind is not None and found.reason is not None
                out.append(BankProblem(rel, found.kind, found.reason))
                continue
            yield found.memory, archived, rel


@dataclass(slots=True)
class Tally:
    """What one scan of both folders found.

    Attributes:
        testimony: memory id -> testimony for ``verify_ledger``: the id itself for a file that
            verifies, ``""`` for a tampered file still named for an id (never matches).
        valid: ids of the files that verify (the only ones ever sealed from a scan).
        active: number of active files that verify.
        archived: number of archived files that verify.
        problems: every file that does not verify, in scan order.
        leftovers: temp files of interrupted writes (paths relative to the bank).
    """

    testimony: dict[str, str] = field(default_factory=dict)
    valid: set[str] = field(default_factory=set)
    active: int = 0
    archived: int = 0
    problems: list[BankProblem] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)


def tally(bank: MemoryBank) -> Tally:
    """Scan both folders of ``bank`` (the caller holds a bank lock, shared or exclusive)."""
    found = Tally()
    for folder in (bank.active_dir, bank.archive_dir):
        found.leftovers.extend(
            bank._rel(folder / n) for n in bank._names(folder) if _bankfs.is_temp_name(n)
        )
    for memory, is_archived, _rel in scan(bank, found.problems, warn=False):
        found.testimony[memory.id] = memory.id
        found.valid.add(memory.id)
        if is_archived:
            found.archived += 1
        else:
            found.active += 1
    for problem in found.problems:
        named = _bankfs.id_from_name(problem.path.rpartition("/")[2])
        if named is not None:
            found.testimony.setdefault(named, "")
    return found


def scan_bank(bank: MemoryBank) -> Tally:
    """:func:`tally` under the bank's shared lock (held for the scan only)."""
    with bank._read_lock():
        return tally(bank)


def verify_bank(bank: MemoryBank) -> BankReport:
    """Check every memory file and the ledger of ``bank`` (see the module docstring).

    Takes the bank's shared lock only while scanning, inside the ``verify_ledger`` callback,
    after the ledger snapshot; the caller holds no bank lock.

    Raises:
        BankError: ``ledger.jsonl`` is a symlink.
        OSError: the ledger exists but cannot be read.
    """
    _bankfs.refuse_symlink(bank.ledger_path, "ledger.jsonl")
    scanned: list[Tally] = []

    def testimony() -> dict[str, str]:
        scanned.append(scan_bank(bank))
        return scanned[0].testimony

    ledger: dict[str, Any] = verify_ledger(bank.ledger_path, testimony).to_dict()
    found = scanned[0]
    return BankReport(
        active=found.active,
        archived=found.archived,
        problems=tuple(found.problems),
        leftovers=tuple(found.leftovers),
        ledger=ledger,
    )

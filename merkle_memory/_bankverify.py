"""Scanning and verifying the files of a memory bank (private; ``MemoryBank.verify``).

DESIGN section 5: every file of ``memories/`` and ``memories/archive/`` is parsed strictly, its
id recomputed and compared with the stored ``id`` and the file name; then the ledger is
verified (DESIGN section 4) against the testimony ``{id: id}`` of every file that verifies,
active or archived, so that archiving never makes a memory missing. A tampered file still
named for an id testifies ``""`` (which never matches), so the ledger calls that id altered
rather than missing. Nothing here writes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from . import _bankfs
from ._bankreport import BankProblem, BankReport
from .errors import BankError
from .ledger import verify_ledger
from .memory import Memory

if TYPE_CHECKING:
    from .bank import MemoryBank

__all__ = ["scan", "verify_bank"]

_log = logging.getLogger("merkle_memory.bank")


def scan(
    bank: MemoryBank, problems: list[BankProblem] | None
) -> Iterator[tuple[Memory, bool, str]]:
    """Yield ``(memory, archived, relative path)`` for each file that verifies, active first,
    by name; append a :class:`BankProblem` to ``problems`` (when given) for every other file.
    Temp files of interrupted writes are skipped (``verify`` lists them as leftovers)."""
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
            if _bankfs.is_temp_name(name):
                _log.warning("%s: temp file left by an interrupted write", rel)
                continue
            found = _bankfs.inspect_file(path)
            if found.memory is None:
                assert found.kind is not None and found.reason is not None
                out.append(BankProblem(rel, found.kind, found.reason))
                continue
            yield found.memory, archived, rel


def verify_bank(bank: MemoryBank) -> BankReport:
    """Check every memory file and the ledger of ``bank`` (the caller holds the read lock)."""
    problems: list[BankProblem] = []
    leftovers: list[str] = []
    active = archived = 0
    testimony: dict[str, str] = {}
    for folder in (bank.active_dir, bank.archive_dir):
        leftovers.extend(
            bank._rel(folder / n) for n in bank._names(folder) if _bankfs.is_temp_name(n)
        )
    for memory, is_archived, _rel in scan(bank, problems):
        testimony[memory.id] = memory.id
        if is_archived:
            archived += 1
        else:
            active += 1
    for problem in problems:
        named = _bankfs.id_from_name(problem.path.rpartition("/")[2])
        if named is not None:
            testimony.setdefault(named, "")
    _bankfs.refuse_symlink(bank.ledger_path, "ledger.jsonl")
    ledger: dict[str, Any] = verify_ledger(bank.ledger_path, testimony).to_dict()
    return BankReport(
        active=active,
        archived=archived,
        problems=tuple(problems),
        leftovers=tuple(leftovers),
        ledger=ledger,
    )

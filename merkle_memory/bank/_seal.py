"""Sealing the memories of a bank in its ledger (private; DESIGN section 5, last bullet).

Every memory file is sealed in ``BANK/ledger.jsonl`` with ``memory_id = content_sha256 = id``
after the file is durable. A process that dies between the two leaves the memory
``unsealed``; two ways close that gap, both deciding under the ledger lock (as
``Tenant.seal`` does), inside the bank's exclusive lock, so two processes never seal one id
twice:

- :func:`seal_if_unsealed`: a save (or a consolidate or migrate rerun) that finds its memory's
  file already there seals it (``op: "save"``) when the ledger has no entry for it.
- :func:`seal_bank`: ``MemoryBank.seal`` adopts every memory file that verifies, active or
  archived, with no entry (``op: "adopt"``, sorted ids, one group commit), refusing onto a
  broken chain. A tampered file is never sealed: it does not verify, so it is not a candidate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import LedgerBrokenError
from ..ledger import Ledger, verify_ledger
from ..ledger import seal_if_unsealed as seal_memory_id
from ._files import refuse_symlink
from ._report import BankSealReport
from ._verify import tally

if TYPE_CHECKING:
    from ._bank import MemoryBank

__all__ = ["seal_bank", "seal_if_unsealed"]


def _ledger(bank: MemoryBank) -> Ledger:
    refuse_symlink(bank.ledger_path, "ledger.jsonl")
    return Ledger(bank.ledger_path)


def seal_if_unsealed(bank: MemoryBank, memory_id: str, *, op: str = "save") -> bool:
    """Seal ``memory_id`` unless the ledger already has an entry for it.

    The caller holds the bank's exclusive lock and has checked that the memory's file exists
    and verifies. Under the ledger lock: a line naming the id (canonical form, fast byte
    search) means it is sealed; otherwise the torn tail is quarantined, the ledger verified
    against ``{id: id}``, and the id appended only when the verify calls it ``unsealed`` (no
    trusted or untrusted entry, in any line form).

    Args:
        bank: the bank.
        memory_id: 64-char lowercase hex.
        op: the entry's op, ``"save"`` or ``"adopt"``.

    Returns:
        True when an entry was appended.

    Raises:
        BankError: ``ledger.jsonl`` is a symlink.
        LedgerRollbackError, LedgerBrokenError, LedgerFormatError: the append was refused.
        OSError: from the file system.
    """
    return seal_memory_id(_ledger(bank), memory_id, memory_id, op=op)


def seal_bank(bank: MemoryBank) -> BankSealReport:
    """Adopt every memory file that verifies and has no ledger entry (``MemoryBank.seal``).

    The caller holds the bank's exclusive lock. Under the ledger lock: quarantine a torn tail
    and refuse a rollback (``Ledger.recover``), scan both folders, verify the ledger against
    what ``bank verify`` would testify, refuse a broken chain, append the ``unsealed`` ids
    that verify (sorted, ``op: "adopt"``, one write and one fsync), verify again.

    Returns:
        A :class:`BankSealReport` whose ``ledger`` is the verify report after the adoption.

    Raises:
        LedgerBrokenError: the chain is broken (nothing is appended); ``.report`` holds the
            ``VerifyReport``.
        LedgerRollbackError, LedgerFormatError: the ledger went backwards, or ``ledger.head``
            is unreadable (nothing is appended).
        BankError: ``ledger.jsonl`` is a symlink.
        OSError: from the file system.
    """
    ledger = _ledger(bank)
    with ledger.locked():
        try:
            ledger.recover()
        except LedgerBrokenError:
            broken = True  # the last line is no valid entry: report the verify's view of it
        else:
            broken = False
        found = tally(bank)
        before = verify_ledger(ledger.path, found.testimony)
        if broken or before.chain == "broken":
            raise LedgerBrokenError(f"{bank.root}: {before.summary()}; refusing to adopt", before)
        adopt = sorted(mid for mid in before.unsealed if mid in found.valid)
        ledger.append_many([(mid, mid) for mid in adopt], op="adopt")
        after = verify_ledger(ledger.path, found.testimony)
    skipped = tuple(p.path for p in found.problems)
    return BankSealReport(tuple(adopt), after.to_dict(), skipped)

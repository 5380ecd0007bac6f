"""Sealing what a store holds but its ledger does not: the one adopt algorithm.

A store (a tenant's ``memory/`` folder, a memory bank) writes a file, makes it durable, then
appends its ledger line (DESIGN section 4 append order). A crash between the two leaves the
file ``unsealed``. Two ways close that gap, both deciding under the ledger lock so that two
processes never seal one id twice:

- :func:`seal_unsealed`: adopt every unsealed id at once (``Tenant.seal``, ``MemoryBank.seal``);
- :func:`seal_if_unsealed`: seal one id a writer found already on disk (a re-save).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .. import canonical
from .._progress import ProgressCallback
from ..errors import CanonicalizationError, LedgerBrokenError, LedgerError
from ._chain import Ledger
from ._tail import split_fragment
from ._verify import Testimony, VerifyReport, verify_ledger
from .storage import LedgerFile

__all__ = ["Holdings", "SealReport", "seal_if_unsealed", "seal_unsealed"]

_CHUNK: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class Holdings:
    """What a store holds, read under the ledger lock by :func:`seal_unsealed`.

    Attributes:
        testimony: memory id -> the testimony digest(s) of every record that exists (see
            :data:`~merkle_memory.ledger.Testimony`); what verify judges against.
        sealable: memory id -> the digest (64-char lowercase hex) to seal for each record
            that may be adopted; an ``unsealed`` id missing here is skipped.
        problems: memory id -> one-line reason (no path) why that record cannot be sealed,
            for the ids of ``testimony`` missing from ``sealable``.
    """

    testimony: Testimony
    sealable: Mapping[str, str]
    problems: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SealReport:
    """The result of an adoption: the verify report after it, plus what was adopted.

    Attributes:
        report: ``VerifyReport`` of the store after the adoption.
        sealed_ids: ids adopted by this call (64-char hex for a bank, record ids for a
            tenant), in the order sealed (sorted).
        skipped: unsealed ids that could not be sealed, sorted; they stay ``unsealed``.
        skip_reasons: ``(id, reason)`` for each of ``skipped``, in the same order (reason: one
            line without the path, e.g. ``"a symbolic link (never followed)"``).
    """

    report: VerifyReport
    sealed_ids: tuple[str, ...]
    skipped: tuple[str, ...] = ()
    skip_reasons: tuple[tuple[str, str], ...] = ()

    @property
    def ok(self) -> bool:
        """``report.ok``: nothing altered, missing or disputed, and the chain whole."""
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


def _check_ledger(ledger: object, where: str) -> None:
    if not isinstance(ledger, Ledger):
        raise LedgerError(f"{where} needs a Ledger, not {type(ledger).__name__}")


def seal_unsealed(
    ledger: Ledger,
    read: Callable[[], Holdings],
    *,
    label: str,
    progress: ProgressCallback | None = None,
) -> SealReport:
    """Adopt every record that has no entry (``op: "adopt"``, sorted by id, one fsync).

    Under the ledger lock: remove the temp files crashes left of the store's derived files
    (:meth:`~merkle_memory.ledger.storage.LedgerStore.remove_leftovers`), refuse a rollback
    and quarantine a torn tail (:meth:`Ledger.recover`), call ``read``, verify against its
    testimony, refuse a broken chain, append exactly the ``unsealed`` ids that are sealable
    in one group commit (:meth:`Ledger.append_many`), verify again. An altered record has an
    entry, so it is never re-sealed. A last line that is no valid entry is judged by verify
    (the chain is broken there), so the refusal names what verify would name.

    Args:
        ledger: the store's ledger.
        read: called once, under the lock, after recovery; returns what the store holds.
        label: names the store in the refusal message (a tenant name, a bank folder).
        progress: optional ``progress(phase, done, total)`` callback
            (``merkle_memory._progress``), passed to both verifies (phase ``"ledger"``).

    Returns:
        A :class:`SealReport` (its report is re-verified after the adoption).

    Raises:
        LedgerError: ``ledger`` is not a :class:`Ledger`.
        LedgerBrokenError: the chain is broken, nothing is appended; ``.report`` holds the
            ``VerifyReport``.
        LedgerRollbackError: the ledger went backwards (nothing is appended).
        LedgerFormatError: ``ledger.head`` is unreadable (nothing is appended).
        OSError: from the file system.
    """
    _check_ledger(ledger, "seal_unsealed")
    with ledger.locked():
        ledger.store.remove_leftovers()
        try:
            ledger.recover()
        except LedgerBrokenError:
            broken = True
        else:
            broken = False
        holdings = read()
        before = verify_ledger(ledger.store, holdings.testimony, progress=progress)
        if broken or before.chain == "broken":
            raise LedgerBrokenError(f"{label}: {before.summary()}; refusing to adopt", before)
        pairs: list[tuple[str, str]] = []
        skipped: list[tuple[str, str]] = []
        for mid in before.unsealed:
            digest = holdings.sealable.get(mid)
            if digest is None:
                skipped.append((mid, holdings.problems.get(mid, "cannot be sealed")))
            else:
                pairs.append((mid, digest))
        pairs.sort()
        skipped.sort()
        if pairs:
            ledger.append_many(pairs, op="adopt")
        after = verify_ledger(ledger.store, holdings.testimony, progress=progress)
    return SealReport(
        after,
        tuple(mid for mid, _ in pairs),
        tuple(mid for mid, _ in skipped),
        tuple(skipped),
    )


def _names_in_whole_lines(file: LedgerFile, memory_id: str) -> bool:
    """Whether a newline-terminated line of the ledger holds ``"memory_id":`` followed by
    the id's RFC 8785 string (``canonical.dumps(memory_id)``).

    A byte search in this library's canonical line form, no parsing: the fast path of
    :func:`seal_if_unsealed` for the common case (the record is sealed). Outside a JSON
    string a ``"`` is never escaped, and inside the id's string every ``"`` and ``\\`` is,
    so a hit in an entry line is its ``memory_id`` member, whose value is exactly the id
    (an id holding ``"`` once matched the line of a shorter id: ``a","op":"save`` that of
    ``a``). ``False`` (the caller then decides by verify, which reads every line form) for
    an id in another form or one that has no RFC 8785 form (a lone surrogate). The
    unterminated last line is not searched (a torn append is not an entry). A whole line
    that names the id but is not a valid entry also counts: the chain is broken there, and
    sealing onto a broken chain is left to an explicit adoption (which refuses it).
    """
    try:
        needle = b'"memory_id":' + canonical.dumps(memory_id)
    except CanonicalizationError:
        return False
    end, _fragment = split_fragment(file, file.size())
    carry = b""
    offset = 0
    while offset < end:
        chunk = file.read(offset, min(_CHUNK, end - offset))
        if not chunk:
            break
        window = carry + chunk
        if needle in window:
            return True
        carry = window[-(len(needle) - 1) :]
        offset += len(chunk)
    return False


def seal_if_unsealed(ledger: Ledger, memory_id: str, digest: str, *, op: str = "save") -> bool:
    """Seal ``memory_id`` with ``digest`` unless the ledger already has an entry for it.

    For a writer that finds its record already on disk and durable (a re-save after a crash
    between the file and its line). Under the ledger lock: a line naming the id (canonical
    form, fast byte search) means it is sealed; otherwise the torn tail is quarantined, the
    ledger verified against ``{memory_id: digest}``, and the id appended only when verify calls
    it ``unsealed`` (no trusted or untrusted entry, in any line form).

    Args:
        ledger: the store's ledger.
        memory_id: the record's id (for a bank, 64-char lowercase hex).
        digest: its testimony digest, 64-char lowercase hex.
        op: the entry's op, ``"save"`` or ``"adopt"``.

    Returns:
        True when an entry was appended.

    Raises:
        LedgerError: ``ledger`` is not a :class:`Ledger`.
        LedgerRollbackError, LedgerBrokenError, LedgerFormatError: the append was refused.
        OSError: from the file system.
    """
    _check_ledger(ledger, "seal_if_unsealed")
    with ledger.locked() as file:
        if _names_in_whole_lines(file, memory_id):
            return False
        ledger.recover()
        if memory_id not in verify_ledger(ledger.store, {memory_id: digest}).unsealed:
            return False
        ledger.append(memory_id, digest, op=op)
    return True

"""Accepting a rollback, on the record: the way out of a refused append (DESIGN section 4).

When ``ledger.jsonl`` went behind ``ledger.head`` (truncated, emptied, restored from an older
copy) or holds another entry at the head's seq (replaced), every append is refused with
``LedgerRollbackError``, rightly: entries the head vouched for are gone. When the loss is
known and accepted (the old file is lost for good, the restore was deliberate), the owner
says so with :func:`accept_rollback` (``merkle-memory ledger recover TENANT
--accept-rollback``). It never deletes evidence and never makes the loss silent:

1. it writes a recovery record ``ledger.recovery-<n>.json`` beside the ledger (``n`` = 1,
   2, ... never reused; RFC 8785 JSON and a newline, read-only, written atomically and
   durably: ``docs/FORMAT.md`` section 4.6; a database tenant: a row of ``mm_ledger_files``
   with the same bytes, section 12) holding the old head, what the ledger holds now,
   and each seq the head vouched for that the ledger lacks, with every hash still known for
   it (the head's own, and the RFC 6962 leaf hash the Merkle sidecar ``ledger.tree`` kept);
2. only then (so a crash never loses the evidence) it moves a torn tail to ``ledger.torn``,
   empties the Merkle sidecar (it held leaves of the lost entries; the next proof rebuilds it
   from the ledger) and replaces ``ledger.head`` with the ledger's own last entry (or removes
   it when the ledger holds none), so that the next append continues the chain from what is
   on disk. A database tenant does steps 1 and 2 in one transaction: both or neither.

``ledger verify`` lists the recovery records of a tenant, so an accepted rollback stays
visible. A rerun after a crash reuses the record it finds for the same head instead of
writing another. A chain that is broken on disk is refused (``LedgerBrokenError``): accepting
a rollback never repairs a broken chain. Checkpoints handed out before the rollback still
show it: a consistency proof from their size cannot be made any more (docs/THREAT_MODEL.md).

Quick start::

    from merkle_memory.ledger.recovery import accept_rollback
    done = accept_rollback("agents/cc/ledger.jsonl")     # None when nothing was refused
    done.record                                          # .../ledger.recovery-1.json
    accept_rollback("postgresql:///agents?host=/run/pg#cc")   # a database tenant
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .. import canonical
from ..errors import (
    CanonicalizationError,
    LedgerBrokenError,
    MerkleMemoryError,
    StoreFileError,
)
from ..rfc6962 import hash_leaf
from ._chain import Ledger
from ._entry import Entry, as_path, leaf_line, parse_line
from ._folder import FolderLedgerStore, as_store
from ._tail import is_complete_object, iter_line_blocks, split_fragment
from ._treesync import SyncState
from ._verify import _Walk
from .storage import Head, LedgerFile, LedgerStore

__all__ = [
    "RECORD_KIND",
    "RollbackRecovery",
    "accept_rollback",
    "recovery_record_names",
    "recovery_records",
]

RECORD_KIND: Final = "accepted-rollback"
"""The ``kind`` of a recovery record."""

_RECORD_NAME: Final = re.compile(r"ledger\.recovery-([1-9][0-9]{0,8})\.json")

log = logging.getLogger("merkle_memory.ledger")


@dataclass(frozen=True, slots=True)
class RollbackRecovery:
    """What :func:`accept_rollback` did.

    Attributes:
        record: the recovery record holding the evidence: the path of
            ``ledger.recovery-<n>.json`` beside a folder ledger; for a database tenant the
            bare name (its ``mm_ledger_files`` row).
        head: the head that was replaced (the last entry it vouched for).
        on_disk_seq: the last seq the ledger holds now (0 when it holds none); the next
            append writes ``on_disk_seq + 1``.
        lacking: the seqs the head vouched for that the ledger lacks or holds differently,
            ascending.
        reused: ``True`` when an earlier run (interrupted by a crash) had already written the
            record for this head, which was kept as it was.
    """

    record: Path
    head: Head
    on_disk_seq: int
    lacking: tuple[int, ...]
    reused: bool = False

    def to_dict(self) -> dict[str, Any]:
        """``{"record", "head": {"seq", "hash"}, "on_disk_seq", "lacking": [seq], "reused"}``
        (``record`` is the file's name)."""
        return {
            "record": self.record.name,
            "head": {"seq": self.head.seq, "hash": self.head.hash},
            "on_disk_seq": self.on_disk_seq,
            "lacking": list(self.lacking),
            "reused": self.reused,
        }


def recovery_records(ledger: str | os.PathLike[str]) -> list[Path]:
    """The recovery records beside a folder ledger, oldest first.

    Args:
        ledger: the ``ledger.jsonl`` path (the file need not exist).

    Returns:
        The paths of ``ledger.recovery-<n>.json`` in the ledger's folder, by ``n``; empty
        when there is none or the folder does not exist.

    Raises:
        LedgerError: ``ledger`` is not a path.
        OSError: the folder exists but cannot be listed.
    """
    folder = as_path(ledger, "a ledger path").parent
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = [(int(m.group(1)), name) for name in names if (m := _RECORD_NAME.fullmatch(name))]
    return [folder / name for _n, name in sorted(found)]


@dataclass(slots=True)
class _OnDisk:
    """One pass over the ledger's whole lines: the chain verdict and what recovery needs."""

    walk: _Walk
    last: Entry | None = None  # the last entry (of an intact chain)
    at_head_seq: str | None = None  # the hash the ledger holds at the head's seq
    first_difference: int | None = None  # first seq whose leaf differs from the sidecar's


def _entries(file: LedgerFile, end: int) -> Iterator[tuple[bytes, Entry | None, bytes | None]]:
    """``(stripped line, entry or None, leaf hash or None)`` of every non-blank line."""
    for batch in iter_line_blocks(file, 0, end):
        for raw in batch:
            line = raw.strip()
            if not line:
                continue
            fast = leaf_line(line)
            try:
                entry = Entry.from_dict(parse_line(line), check_hash=True)
            except MerkleMemoryError:
                yield line, None, None
                continue
            data = fast[3] if fast is not None else entry.line()
            yield line, entry, hash_leaf(data)


def _read(file: LedgerFile, end: int, head: Head, sidecar: list[bytes] | None) -> _OnDisk:
    state = _OnDisk(_Walk(None))
    for index, (line, entry, leaf) in enumerate(_entries(file, end)):
        state.walk.feed([line])
        if state.walk.broken_at is not None:
            break
        if entry is None or leaf is None:  # the walk accepted a line the parser refuses
            state.walk.broken_at, state.walk.reason = state.walk.expect_seq, "unparseable line"
            break
        state.last = entry
        if entry.seq == head.seq:
            state.at_head_seq = entry.hash
        known = sidecar is not None and index < len(sidecar) and state.first_difference is None
        if known and sidecar is not None and sidecar[index] != leaf:
            state.first_difference = entry.seq
    state.walk.finish(None)
    return state


def _sidecar_leaves(store: LedgerStore, upto: int) -> list[bytes] | None:
    """The sidecar's first ``upto`` leaf hashes as stored (fewer if it has fewer), or
    ``None`` when it cannot be read (derived data: its absence only loses evidence)."""
    try:
        sidecar = store.sidecar()
        return [sidecar[i] for i in range(min(len(sidecar), upto))]
    except (MerkleMemoryError, OSError, IndexError, ValueError):
        return None


def _tree_root(store: LedgerStore, size: int) -> str | None:
    try:
        sidecar = store.sidecar()
        return sidecar.root(size).hex() if size and len(sidecar) >= size else None
    except (MerkleMemoryError, OSError, IndexError, ValueError):
        return None


def _number(name: str) -> int:
    found = _RECORD_NAME.fullmatch(name)
    return int(found.group(1)) if found is not None else 0


def recovery_record_names(ledger: Ledger | LedgerStore | str | os.PathLike[str]) -> list[str]:
    """The names of a ledger's recovery records, oldest first (by ``n``), on any store: the
    files beside a folder ledger, the ``mm_ledger_files`` rows of a database tenant.

    Args:
        ledger: a :class:`Ledger`, a store, a ``ledger.jsonl`` path or a
            ``postgresql://...#tenant`` URL.

    Raises:
        LedgerError: ``ledger`` is none of these.
        DatabaseError: the database cannot be reached.
        OSError: the folder exists but cannot be listed.
    """
    store = ledger.store if isinstance(ledger, Ledger) else as_store(ledger)
    found = [(_number(name), name) for name in store.side_files() if _RECORD_NAME.fullmatch(name)]
    return [name for _n, name in sorted(found)]


def _next_name(store: LedgerStore) -> str:
    """``ledger.recovery-<n>.json`` with ``n`` one more than the highest taken (from 1)."""
    taken = recovery_record_names(store)
    return f"ledger.recovery-{_number(taken[-1]) + 1 if taken else 1}.json"


def _reusable(store: LedgerStore, head: Head, on_disk: dict[str, Any]) -> str | None:
    """The latest recovery record when it already accepts this very head and ledger (an
    earlier run stopped by a crash after writing it)."""
    taken = recovery_record_names(store)
    if not taken:
        return None
    try:
        data = store.read_side_file(taken[-1])
        record = canonical.loads(data.rstrip(b"\n")) if data is not None else None
    except (CanonicalizationError, StoreFileError):
        return None
    if not isinstance(record, dict) or record.get("kind") != RECORD_KIND:
        return None
    old = record.get("head")
    same_head = isinstance(old, dict) and (old.get("seq"), old.get("hash")) == (
        head.seq,
        head.hash,
    )
    seen = record.get("on_disk")
    same_disk = isinstance(seen, dict) and (seen.get("entries"), seen.get("last_hash")) == (
        on_disk["entries"],
        on_disk["last_hash"],
    )
    return taken[-1] if same_head and same_disk else None


def accept_rollback(
    ledger: Ledger | LedgerStore | str | os.PathLike[str], *, now: float | None = None
) -> RollbackRecovery | None:
    """Accept that a ledger went back behind its head: keep the evidence, then let the next
    append continue the chain from what is stored (module docstring).

    Under the ledger's exclusive lock: read the head; walk the whole ledger (a torn tail
    excluded) as verify does; if the ledger still holds the head's entry, there is nothing to
    accept and nothing is written. Otherwise write the recovery record (``docs/FORMAT.md``
    section 4.6) with :meth:`~merkle_memory.ledger.storage.LedgerStore.write_side_file`, and
    only then quarantine a torn tail, remove the temp files crashes left of the store's
    derived files (``LedgerStore.remove_leftovers``), empty the Merkle sidecar and reset its
    state, and replace the head with the ledger's last entry (``end`` and ``fingerprint`` of
    the ledger as it is now), or remove the head when the ledger holds no entry. A folder
    makes the record durable (a file beside ``ledger.jsonl``) before it changes anything; a
    database tenant writes the record row (``mm_ledger_files``) and the new head in one
    transaction, so a crash leaves both or neither. Logs a WARNING on ``merkle_memory.ledger``.

    Args:
        ledger: a :class:`Ledger`, a store, a ``ledger.jsonl`` path (a tenant's or a
            bank's) or a ``postgresql://...#tenant`` URL. A ``Ledger`` object that itself
            appended entries the ledger has lost remembers its last append and keeps
            refusing to go back behind it: append through a new ``Ledger`` (or ``Tenant``)
            afterwards.
        now: the time written in the record, epoch seconds (default: now).

    Returns:
        A :class:`RollbackRecovery`, or ``None`` when there was no rollback to accept (no
        head, or the ledger holds the head's entry).

    Raises:
        LedgerBrokenError: the chain on disk is broken (nothing is written: a broken chain
            is never accepted; see ``verify``).
        LedgerFormatError: ``ledger.head`` is unreadable.
        LedgerError: ``ledger`` is not a ledger, a path nor a URL naming a tenant, or its
            store keeps no files beside the ledger.
        StoreFileError: a file of the ledger is a symlink or not a regular file.
        DatabaseError: the database refused or cannot be reached (nothing is kept).
        OSError: from the file system.
    """
    led = ledger if isinstance(ledger, Ledger) else Ledger(as_store(ledger))
    store = led.store
    if not store.exists() and store.read_head() is None:
        return None  # no ledger and no head: nothing vouched for, nothing to create
    with led.locked() as file:
        head = store.read_head()
        if head is None:
            return None
        size = file.size()
        offset, fragment = split_fragment(file, size)
        torn = bool(fragment) and not is_complete_object(fragment)
        end = offset if torn else size
        sidecar = _sidecar_leaves(store, head.seq)
        seen = _read(file, end, head, sidecar)
        if seen.walk.broken_at is not None:
            raise LedgerBrokenError(
                f"{store.label}: ledger chain broken at seq {seen.walk.broken_at}: "
                f"{seen.walk.reason}; a rollback is accepted only onto an intact chain"
                " (run verify)"
            )
        found = seen.last.seq if seen.last is not None else 0
        if found >= head.seq and seen.at_head_seq == head.hash:
            return None  # the ledger holds the head's entry: no rollback
        first = found + 1 if found < head.seq else head.seq
        if seen.first_difference is not None:
            first = min(first, seen.first_difference)
        lacking = tuple(range(first, head.seq + 1))
        on_disk = {
            "entries": found,
            "last_hash": seen.last.hash if seen.last is not None else None,
            "size": end,
            "torn_tail": len(fragment) if torn else None,
            "hash_at_head_seq": seen.at_head_seq,
        }
        name = _reusable(store, head, on_disk)
        reused = name is not None
        if name is None:
            name = _next_name(store)
            document = _document(store, head, on_disk, lacking, sidecar, now)
            store.write_side_file(name, canonical.dumps(document) + b"\n")
        # The evidence is durable (a folder) or in this transaction (a database): now the
        # ledger may move on.
        if torn:
            file.quarantine(offset, fragment)
        store.remove_leftovers()
        store.clear_sidecar()
        store.write_sidecar_state(SyncState().to_bytes())
        if seen.last is None:
            store.remove_head()
        else:
            store.write_head(Head(seen.last.seq, seen.last.hash, end, file.fingerprint()))
    record = store.path.with_name(name) if isinstance(store, FolderLedgerStore) else Path(name)
    log.warning(
        "Ledger %s: accepted a rollback from seq %d to seq %d; evidence in %s",
        store.label,
        head.seq,
        found,
        record,
    )
    return RollbackRecovery(record, head, found, lacking, reused)


def _document(
    store: LedgerStore,
    head: Head,
    on_disk: dict[str, Any],
    lacking: tuple[int, ...],
    sidecar: list[bytes] | None,
    now: float | None,
) -> dict[str, Any]:
    """The recovery record's object (``docs/FORMAT.md`` section 4.6)."""
    if on_disk["entries"] < head.seq:
        why = (
            f"went backwards: ledger.head records seq {head.seq} but the file ends at seq "
            f"{on_disk['entries']}"
        )
    else:
        why = f"was replaced: it holds a different entry at seq {head.seq} than ledger.head"
    return {
        "kind": RECORD_KIND,
        "accepted_at": round(time.time() if now is None else now, 6),
        "ledger": "ledger.jsonl",
        "reason": why,
        "head": {
            "seq": head.seq,
            "hash": head.hash,
            "end": head.end,
            "fingerprint": head.fingerprint,
        },
        "on_disk": on_disk,
        "lacking": [
            {
                "seq": seq,
                "hash": head.hash if seq == head.seq else None,
                "leaf_hash": (
                    sidecar[seq - 1].hex() if sidecar is not None and seq <= len(sidecar) else None
                ),
            }
            for seq in lacking
        ],
        "tree_root_at_head": _tree_root(store, head.seq),
    }

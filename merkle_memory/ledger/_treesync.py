"""The sync state of a ledger's Merkle sidecar, and the scan that extends it (private).

Used by ``proofs``: ``scan`` turns the ledger lines past a byte offset into RFC 6962
leaf hashes (leaf data = ``Entry.line()``) while checking the chain; ``SyncState`` is the
``ledger.tree.state`` file (see ``proofs`` and ``docs/FORMAT.md`` section 7); ``anchored``
checks the cheap anchors that tie a state and its sidecar to the ledger; ``in_memory`` is the
read-only fallback: every leaf of the ledger hashed in memory, nothing written.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .. import canonical
from .._progress import EVERY, ProgressCallback
from ..errors import IndexOutOfRangeError, LedgerError, LedgerRollbackError, MerkleMemoryError
from ..rfc6962 import hash_leaf
from ..rfc6962 import root as merkle_root
from ._entry import GENESIS, Entry, leaf_line, parse_line
from ._idindex import IdsState, id_key
from ._tail import iter_line_blocks, split_fragment
from .storage import LedgerFile, LedgerStore, Sidecar

log = logging.getLogger("merkle_memory.ledger")

__all__ = [
    "MemoryTree",
    "SyncState",
    "anchored",
    "in_memory",
    "read_state",
    "refuse_gone",
    "refuse_shorter",
    "scan",
]


@dataclass(frozen=True, slots=True)
class SyncState:
    """How far the sidecar covers the ledger, and what it was checked against.

    The ``ledger.tree.state`` file (``docs/FORMAT.md`` section 7).

    Attributes:
        leaves: number of entries (leaves) the sidecar covers.
        offset: byte offset in the ledger just past entry ``leaves``.
        last_hash: hash of entry ``leaves`` (64-char hex; 64 zeros when none).
        broken_at: seq of the first chain break found while syncing, or ``None``.
        reason: why, or ``None``.
        root: 64-char hex RFC 6962 root of the first ``leaves`` leaves, computed from the
            ledger when they were checked; ``None`` when unknown (a state written before it
            was recorded: the next sync checks the whole sidecar).
        ledger_size: the ledger's size in bytes when it was last checked, or ``None``.
        ledger_stamp: the ledger's ``LedgerFile.stamp`` then, or ``None``.
        ids_buckets: buckets of the id index covering the same ``leaves`` entries
            (``_idindex``), or ``None`` when there is none (a store that keeps none, or a
            state written before the index: the next sync builds it).
        ids_count: distinct ids it holds, or ``None``.
        ids_root: 64-char hex root of its digest tree, computed when it was built or updated
            from the ledger, or ``None``.
    """

    leaves: int = 0
    offset: int = 0
    last_hash: str = GENESIS
    broken_at: int | None = None
    reason: str | None = None
    root: str | None = None
    ledger_size: int | None = None
    ledger_stamp: str | None = None
    ids_buckets: int | None = None
    ids_count: int | None = None
    ids_root: str | None = None

    @property
    def ids(self) -> IdsState | None:
        """The id index's recorded state, or ``None`` when there is none."""
        if self.ids_buckets is None or self.ids_count is None or self.ids_root is None:
            return None
        return IdsState(self.ids_buckets, self.ids_count, bytes.fromhex(self.ids_root))

    def with_ids(self, ids: IdsState | None) -> SyncState:
        """This state recording ``ids`` as its id index (``None``: none)."""
        if ids is None:
            return dataclasses.replace(self, ids_buckets=None, ids_count=None, ids_root=None)
        return dataclasses.replace(
            self, ids_buckets=ids.buckets, ids_count=ids.count, ids_root=ids.root.hex()
        )

    def to_bytes(self) -> bytes:
        """The state file's content: RFC 8785 JSON of these fields (see ``docs/FORMAT.md``)."""
        return canonical.dumps(
            {
                "leaves": self.leaves,
                "offset": self.offset,
                "last_hash": self.last_hash,
                "broken_at": self.broken_at,
                "reason": self.reason,
                "root": self.root,
                "ledger_size": self.ledger_size,
                "ledger_stamp": self.ledger_stamp,
                "ids_buckets": self.ids_buckets,
                "ids_count": self.ids_count,
                "ids_root": self.ids_root,
            }
        )


def read_state(store: LedgerStore) -> SyncState | None:
    """The stored sync state of ``store``'s sidecar; ``None`` when missing or unreadable.

    Raises:
        OSError: it exists but cannot be read.
    """
    try:
        raw = store.read_sidecar_state()
        if raw is None:
            return None
        data = json.loads(raw)
        root, size, stamp = data.get("root"), data.get("ledger_size"), data.get("ledger_stamp")
        buckets, count, ids_root = (
            data.get("ids_buckets"),
            data.get("ids_count"),
            data.get("ids_root"),
        )
        if buckets is not None and (
            type(buckets) is not int or buckets < 1 or buckets & (buckets - 1)
        ):
            buckets = None  # not a power of two: no usable index recorded
        return SyncState(
            int(data["leaves"]),
            int(data["offset"]),
            str(data["last_hash"]),
            None if data["broken_at"] is None else int(data["broken_at"]),
            None if data["reason"] is None else str(data["reason"]),
            None if root is None else bytes.fromhex(root).hex(),
            None if size is None else int(size),
            None if stamp is None else str(stamp),
            buckets,
            None if count is None else int(count),
            None if ids_root is None or len(ids_root) != 64 else bytes.fromhex(ids_root).hex(),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None  # unreadable derived state: rebuilt from the ledger


def _lines(file: LedgerFile, offset: int) -> Iterator[tuple[bytes, int, int]]:
    """Yield (complete line without newline, offset where it starts, offset just past it)
    from ``offset`` on."""
    size = file.size()
    if size <= offset:
        return
    end, fragment = split_fragment(file, size)
    if end < offset:
        end, fragment = offset, file.read(offset, size - offset)
    pos = offset
    for batch in iter_line_blocks(file, offset, end):
        for line in batch:
            start = pos
            pos += len(line) + 1
            yield line, start, pos
    if fragment.strip():
        try:
            parse_line(fragment.strip())
        except LedgerError:
            return  # a torn fragment: not a leaf
        yield fragment, size - len(fragment), size


def scan(
    state: SyncState,
    file: LedgerFile,
    *,
    ids: Callable[[bytes, int], None] | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[list[bytes], SyncState]:
    """Leaf hashes of every complete line past ``state.offset``, and the state after them.

    Checks each entry as it covers it (well-formed, hash matching either form, seq the
    previous plus 1, ``prev`` the previous hash); the first failure is recorded as
    ``broken_at`` and ``reason``. A line that is not an entry at all ends the scan.
    ``progress`` (``merkle_memory._progress``): phase ``"ledger"``, the byte offset reached
    out of the ledger's size, every few hundred lines and at the end. With ``ids``, also calls
    ``ids(id key, byte offset where the line starts)`` for each leaf, in order (``_idindex``:
    the same pass feeds the id index). The state returned records no id index (the caller adds
    it).
    """
    leaves: list[bytes] = []
    n, offset, last, broken_at, reason = (
        state.leaves,
        state.offset,
        state.last_hash,
        state.broken_at,
        state.reason,
    )
    total = file.size() if progress is not None else 0
    for count, (raw, start, end) in enumerate(_lines(file, state.offset), 1):
        if progress is not None and count % EVERY == 0:
            progress("ledger", end, total)
        line = raw.strip()
        if not line:
            offset = end
            continue
        fast = leaf_line(line)
        if fast is not None:
            seq, prev, claimed, data = fast[0], fast[1].decode(), fast[2].decode(), fast[3]
            memory_id: str | bytes = fast[4]
        else:
            try:
                entry = Entry.from_dict(parse_line(line), check_hash=True)
                data = entry.line()
            except MerkleMemoryError as exc:
                if broken_at is None:
                    broken_at, reason = n + 1, f"entry {n + 1} is unusable: {exc}"
                break
            seq, prev, claimed, memory_id = entry.seq, entry.prev, entry.hash, entry.memory_id
        if ids is not None:
            ids(id_key(memory_id), start)
        if broken_at is None and (seq != n + 1 or prev != last):
            broken_at = n + 1
            reason = f"entry {n + 1} does not follow entry {n} (seq {seq}, prev mismatch)"
        leaves.append(hash_leaf(data))
        n, offset, last = n + 1, end, claimed
    if progress is not None:
        progress("ledger", total, total)
    return leaves, SyncState(n, offset, last, broken_at, reason)


def _line_ending_at(file: LedgerFile, offset: int) -> bytes | None:
    """The last non-blank ledger line before byte ``offset`` (stripped), or ``None`` (also
    when byte ``offset - 1`` is not the newline that ended the synced lines)."""
    if file.read(offset - 1, 1) != b"\n":
        return None
    window = 4096
    while True:
        start = max(0, offset - window)
        data = file.read(start, offset - start)
        if len(data) != offset - start:
            return None
        text = data.rstrip()
        cut = text.rfind(b"\n")
        if cut >= 0 or start == 0:
            return text[cut + 1 :].strip() or None
        if window >= 1 << 24:
            return None
        window *= 8


def anchored(state: SyncState, file: LedgerFile, sidecar: Sidecar) -> bool:
    """Whether ``state`` and ``sidecar`` still stand on the ledger, checked cheaply.

    The last entry the state covers must still end at ``state.offset`` in the ledger, have
    the state's ``last_hash`` (and seq ``leaves`` on an intact chain), and be the sidecar's
    last covered leaf; the sidecar's root of ``leaves`` leaves must be the state's ``root``
    (O(log n) hashes read). A sidecar forged in any hash a root or proof is computed from
    fails the root; a state moved to another offset fails the line.
    """
    if state.root is None or len(sidecar) < state.leaves:
        return False
    try:
        if sidecar.root(state.leaves).hex() != state.root:
            return False
    except (IndexOutOfRangeError, LedgerError):
        return False
    if not state.leaves:
        return state.offset == 0 or _line_ending_at(file, state.offset) is None
    line = _line_ending_at(file, state.offset)
    if line is None:
        return False
    fast = leaf_line(line)
    if fast is not None:
        seq, claimed, data = fast[0], fast[2].decode(), fast[3]
    else:
        try:
            entry = Entry.from_dict(parse_line(line), check_hash=True)
            seq, claimed, data = entry.seq, entry.hash, entry.line()
        except MerkleMemoryError:
            return False
    if claimed != state.last_hash or (state.broken_at is None and seq != state.leaves):
        return False
    return sidecar[state.leaves - 1] == hash_leaf(data)


class MemoryTree:
    """Leaf hashes held in memory (the read-only fallback); roots cost O(size)."""

    def __init__(self, leaves: list[bytes]) -> None:
        self._leaves = leaves

    def __len__(self) -> int:
        """Number of leaves."""
        return len(self._leaves)

    def __getitem__(self, index: int, /) -> bytes:
        """The 32-byte hash of leaf ``index`` (0-based)."""
        return self._leaves[index]

    def root(self, size: int | None = None) -> bytes:
        """The RFC 6962 root (32 bytes) of the first ``size`` leaves (all by default)."""
        return merkle_root(self._leaves if size is None else self._leaves[:size])


def refuse_gone(store: LedgerStore, state: SyncState | None) -> None:
    """``LedgerRollbackError`` if the ledger is gone but ``state`` covered entries."""
    if state is not None and state.leaves:
        raise LedgerRollbackError(
            f"{store.label} is gone but {state.leaves} entries were synced", state.leaves, 0
        )


def refuse_shorter(store: LedgerStore, file: LedgerFile, state: SyncState | None) -> bool:
    """Judge a ledger shorter than ``state`` covers; True when ``state`` must be ignored.

    The state is derived data and trusted for nothing, so it alone never blocks proofs: when
    ``ledger.head`` vouches for the ledger as it is (it records where its entry ends, and that
    is within the file), the state is stale or forged, a WARNING is logged and True returned
    (the caller re-reads the whole ledger and rebuilds). When the head records a later end,
    or cannot vouch (no head, or one written before heads recorded ``end``), the shorter
    ledger is a rollback.

    Returns:
        False when the ledger is not shorter than ``state`` covers (or there is no state).

    Raises:
        LedgerRollbackError: the ledger is shorter and its head does not vouch for it.
    """
    if state is None or file.size() >= state.offset:
        return False
    head = store.read_head()
    if head is None or head.end is None or head.end > file.size():
        raise LedgerRollbackError(
            f"{store.label} is shorter than the {state.leaves} entries already synced",
            state.leaves,
        )
    log.warning(
        "The Merkle sidecar state of %s covers %d entries but the ledger, as its head"
        " records it, holds fewer (stale or forged state); rebuilt from the ledger",
        store.label,
        state.leaves,
    )
    return True


def in_memory(
    store: LedgerStore, progress: ProgressCallback | None = None
) -> tuple[SyncState, MemoryTree]:
    """Every leaf of the ledger computed in memory (O(n) time and 32 bytes a leaf); nothing
    is written. The stored state, when readable, still guards against a rollback."""
    try:
        stored = read_state(store)
    except OSError:
        stored = None
    with store.reader() as file:
        if file is None:
            refuse_gone(store, stored)
            return SyncState(), MemoryTree([])
        refuse_shorter(store, file, stored)  # a forged state is only warned about here
        leaves, state = scan(SyncState(), file, progress=progress)
    return state, MemoryTree(leaves)

"""RFC 6962 proofs over a ledger, served from its Merkle tree sidecar (``treelog``).

The leaves of a ledger are its entries in order; the leaf data of an entry is
``Entry.line()`` (``canonical.dumps`` of the entry, hash included: for lines this library wrote,
the line without its newline), so leaf ``i`` is the entry of seq ``i + 1`` (DESIGN §6).

Files beside ``ledger.jsonl``: ``ledger.tree`` (the sidecar, see ``treelog``) and
``ledger.tree.state``, a small JSON object replaced atomically after each sidecar append::

    {"leaves": n, "offset": byte offset in ledger.jsonl just past entry n,
     "last_hash": hash of entry n (or null), "broken_at": seq or null, "reason": str or null}

``sync`` catches the sidecar up with the ledger under the ledger lock (the exclusive
``flock`` every append takes, so the sidecar is only ever appended under that lock), reading
only the lines past ``offset`` (well-formed lines are read without a JSON parser, see
``_ledger_lines.leaf_line``). ``check`` compares the whole sidecar with the whole ledger and
``rebuild`` writes it anew from the ledger.

When the sidecar is appended (decision): lazily, by ``sync`` at proof time, not on every
ledger append. Every ``prove_inclusion``, ``prove_consistency`` and ``tree_head`` (so the CLI's
``ledger prove``, ``consistency`` and ``checkpoint``) syncs first, so a proof always covers
every acknowledged entry. Appending eagerly would add the sidecar's fsync and the state's
atomic replace (temp file, fsync, rename, folder fsync) to every append, doubling its fsyncs,
to save a sync that costs O(new entries) when a proof is asked for. ``attach(ledger)`` gives
the eager behaviour to a caller who wants it (it installs the ledger's ``on_append`` hook,
which runs under the ledger lock).

Refusal rule (DESIGN section 6, "proofs are refused when the chain is known to be broken"):
the break is the one **found when the sidecar is synced**, i.e. at append time in the sense
of the ledger's own lock, not by the last ``ledger verify`` (verify never writes a file, so
it leaves nothing to consult). ``sync`` checks every entry as it first covers it: the line is
a well-formed entry whose hash matches (either form), its seq is the previous one plus 1 and
its ``prev`` is the previous entry's hash. The first failure is recorded in the state
(``broken_at``, ``reason``) and from then on ``prove_inclusion``, ``prove_consistency`` and
``tree_head`` raise ``LedgerBrokenError``; ``rebuild`` re-checks from the first entry. Not
part of the rule: record files (an altered record is a verify verdict, not a ledger break),
and a rewrite inside the already-synced prefix, which ``sync`` never rereads: ``check``,
``rebuild`` and ``ledger verify`` find it, a proof of the rewritten entry itself fails (its
leaf differs from the sidecar's), and an entry appended after a rewritten last entry breaks
the ``prev`` link. A ledger file shorter than the synced offset raises
``LedgerRollbackError``.

Cost at 1,000,000 entries (``benchmarks/bench_proofs.py``, docs/PERFORMANCE.md): the first
sync reads the whole ledger once; afterwards an inclusion proof reads O(log n) hashes with
``pread`` on one open descriptor, and never rereads the ledger to hash it. Finding the
latest entry of a memory id is a backwards byte search of the ledger (fast for recent
entries, a scan of the file for an id last sealed long ago).
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final, Protocol

from .. import canonical
from .._fsio import atomic_write
from ..checkpoint import Checkpoint
from ..errors import IndexOutOfRangeError, LedgerBrokenError, LedgerError, TreeLogError
from ..proof import consistency_proof, inclusion_proof
from ..rfc6962 import hash_leaf
from ._chain import Ledger
from ._entry import Entry, as_path, parse_line
from ._proof_documents import ConsistencyProof, InclusionProof
from ._treesync import SyncState, in_memory, read_state, refuse_gone, refuse_shorter, scan
from .treelog import SIDECAR_NAME, TreeLog, node_count

__all__ = [
    "STATE_NAME",
    "ConsistencyProof",
    "InclusionProof",
    "SyncState",
    "attach",
    "check",
    "prove_consistency",
    "prove_inclusion",
    "rebuild",
    "sync",
    "tree_head",
]

STATE_NAME = "ledger.tree.state"

log = logging.getLogger("merkle_memory.ledger")

_READ_ONLY: Final = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
"""``errno`` values meaning "this reader may not write here": proofs are then computed in
memory from the ledger instead of from the sidecar."""


class _Tree(Protocol):
    """What a proof needs: leaf hashes by index and the root of a prefix."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int, /) -> bytes: ...

    def root(self, size: int | None = None) -> bytes: ...


def _paths(ledger: Ledger | str | os.PathLike[str]) -> tuple[Path, Path, Path]:
    path = ledger.path if isinstance(ledger, Ledger) else as_path(ledger, "a Ledger or a path")
    if path.is_dir():
        path = path / "ledger.jsonl"
    return path, path.with_name(SIDECAR_NAME), path.with_name(STATE_NAME)


def _ledger(ledger: Ledger | str | os.PathLike[str]) -> tuple[Ledger, Path, Path]:
    path, tree_path, state_path = _paths(ledger)
    return (ledger if isinstance(ledger, Ledger) else Ledger(path)), tree_path, state_path


def _sync_locked(ledger_path: Path, tree_path: Path, state_path: Path) -> SyncState:
    tree = TreeLog(tree_path)
    state = read_state(state_path)
    stored = len(tree)
    if state is None or stored < state.leaves:
        return _rebuild_locked(ledger_path, tree_path, state_path)
    if stored > state.leaves:  # crash between sidecar append and state write: redo them
        with open(tree_path, "r+b") as handle:
            handle.truncate(node_count(state.leaves) * 32)
            os.fsync(handle.fileno())
    try:
        fd = os.open(ledger_path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        refuse_gone(ledger_path, state)
        return state
    try:
        refuse_shorter(ledger_path, fd, state)
        leaves, new = scan(state, fd)
    finally:
        os.close(fd)
    if leaves:
        tree.append(leaves)
    if new != state:
        atomic_write(state_path, new.to_bytes())
    return new


def _rebuild_locked(ledger_path: Path, tree_path: Path, state_path: Path) -> SyncState:
    TreeLog.rebuild(tree_path, [])
    try:
        fd = os.open(ledger_path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        new = SyncState()
    else:
        try:
            leaves, new = scan(SyncState(), fd)
        finally:
            os.close(fd)
        if leaves:
            TreeLog(tree_path).append(leaves)
    atomic_write(state_path, new.to_bytes())
    return new


def _current(ledger: Ledger | str | os.PathLike[str]) -> tuple[Path, SyncState, _Tree]:
    """The ledger's synced state and tree, for serving proofs (see ``prove_inclusion``)."""
    led, tree_path, state_path = _ledger(ledger)
    if not led.path.exists():  # nothing to lock, nothing to write
        state, tree = in_memory(led.path, state_path)
        return led.path, state, tree
    with led.locked(write=False):
        try:
            return led.path, _sync_locked(led.path, tree_path, state_path), TreeLog(tree_path)
        except OSError as exc:
            if exc.errno not in _READ_ONLY:
                raise
            log.debug("sidecar of %s not writable (%s): proving in memory", led.path, exc)
            state, tree = in_memory(led.path, state_path)
            return led.path, state, tree


def sync(ledger: Ledger | str | os.PathLike[str]) -> SyncState:
    """Catch the sidecar up with the ledger under the ledger lock; return the new state.

    Reads only the lines past the synced offset (a missing or unreadable state or sidecar
    is rebuilt from the whole ledger instead). The lock is taken through a read-only
    descriptor, so only the sidecar files need write access. Nothing is created when there
    is no ledger file.

    Args:
        ledger: a ``Ledger``, its ``ledger.jsonl`` path, or the tenant directory.

    Raises:
        LedgerRollbackError: the ledger file is shorter than what was already synced, or
            gone after entries were synced.
        LedgerError: ``ledger`` is neither a ``Ledger`` nor a path.
        OSError: from the file system (e.g. the sidecar cannot be written).
    """
    led, tree_path, state_path = _ledger(ledger)
    if not led.path.exists():
        refuse_gone(led.path, read_state(state_path))
        return SyncState()
    with led.locked(write=False):
        return _sync_locked(led.path, tree_path, state_path)


def rebuild(ledger: Ledger | str | os.PathLike[str]) -> SyncState:
    """Rebuild the sidecar and its state from the whole ledger (O(n)), under the lock.

    Raises:
        LedgerError: ``ledger`` is neither a ``Ledger`` nor a path.
        OSError: from the file system.
    """
    led, tree_path, state_path = _ledger(ledger)
    with led.locked():
        return _rebuild_locked(led.path, tree_path, state_path)


def attach(ledger: Ledger) -> None:
    """Keep the sidecar of ``ledger`` current: sync it in the ledger's ``on_append`` hook."""
    _, tree_path, state_path = _paths(ledger.path)

    def hook(entries: Sequence[Entry]) -> None:
        _sync_locked(ledger.path, tree_path, state_path)

    ledger.on_append = hook


def check(ledger: str | os.PathLike[str]) -> bool:
    """Compare the whole sidecar with the whole ledger (O(n), no lock, changes nothing).

    Returns:
        ``True`` when every stored hash matches the ledger's entries.

    Raises:
        TreeLogError: the sidecar differs (``leaf_index`` = first wrong leaf).
        LedgerFormatError: a ledger line that is not an entry.
    """
    ledger_path, tree_path, _ = _paths(ledger)
    data = (entry.line() for entry in Ledger(ledger_path).entries(check_hash=False))
    result = TreeLog(tree_path).check(data)
    if not result.ok:
        raise TreeLogError(
            f"sidecar {tree_path} differs from the ledger from leaf {result.first_bad_leaf}",
            result.first_bad_leaf,
        )
    return True


def _refuse_if_broken(state: SyncState, ledger_path: Path) -> None:
    if state.broken_at is not None:
        raise LedgerBrokenError(
            f"{ledger_path}: chain broken at seq {state.broken_at} ({state.reason}); "
            "no proofs are served"
        )


def _find_latest(ledger_path: Path, memory_id: str, size: int) -> Entry | None:
    """The last entry of ``memory_id`` among the first ``size`` (searching bytes backwards)."""
    needle = b'"memory_id":' + canonical.dumps(memory_id)
    try:
        fd = os.open(ledger_path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        length = os.fstat(fd).st_size
        if not length:
            return None
        with mmap.mmap(fd, length, access=mmap.ACCESS_READ) as view:
            end = length
            while (hit := view.rfind(needle, 0, end)) >= 0:
                start = view.rfind(b"\n", 0, hit) + 1
                stop = view.find(b"\n", hit)
                line = view[start : length if stop < 0 else stop].strip()
                end = start
                try:
                    entry = Entry.from_dict(parse_line(line), check_hash=True)
                except LedgerError:
                    continue
                if entry.memory_id == memory_id and entry.seq <= size:
                    return entry
    finally:
        os.close(fd)
    found = None  # an id written in a form the byte search cannot see: full scan
    for entry in Ledger(ledger_path).entries(check_hash=True):
        if entry.memory_id == memory_id and entry.seq <= size:
            found = entry
    return found


def prove_inclusion(ledger: Ledger | str | os.PathLike[str], memory_id: str) -> InclusionProof:
    """Prove the latest entry of ``memory_id`` is in the ledger's current tree.

    Syncs the sidecar first (under the ledger lock: pass the ``Ledger`` object, e.g.
    ``tenant.ledger``, to prove while holding its lock), then reads O(log n) hashes from it.
    The lock is taken through a read-only descriptor; when the sidecar files cannot be
    written (``EACCES``, ``EPERM``, ``EROFS``: a read-only auditor, a read-only mount) the
    whole ledger is read and hashed in memory instead (O(n) time, 32 bytes per entry) and
    nothing is written. A broken chain is refused either way.

    Args:
        ledger: a ``Ledger``, its ``ledger.jsonl`` path, or the tenant directory.
        memory_id: the record id.

    Returns:
        The proof; its ``entry`` is the entry proven (its RFC 8785 line is the leaf data).

    Raises:
        LedgerBrokenError: the chain is known to be broken (see the module docstring).
        LedgerRollbackError: the ledger is shorter than what the sidecar already covers.
        LedgerError: no entry seals ``memory_id`` (or it is not a ``str``); ``TreeLogError``
            if the sidecar's leaf disagrees with the entry found.
        OSError: the ledger cannot be read.
    """
    if type(memory_id) is not str:
        raise LedgerError(f"a memory id is a str, not {type(memory_id).__name__}")
    ledger_path, state, tree = _current(ledger)
    _refuse_if_broken(state, ledger_path)
    entry = _find_latest(ledger_path, memory_id, state.leaves)
    if entry is None:
        raise LedgerError(f"no ledger entry seals memory id {memory_id!r}")
    index, size = entry.seq - 1, state.leaves
    leaf = hash_leaf(entry.line())
    if tree[index] != leaf:
        raise TreeLogError(f"sidecar leaf {index} differs from the ledger entry", index)
    path = inclusion_proof(index, size, tree)
    return InclusionProof(memory_id, index, size, leaf, tree.root(size), tuple(path), entry)


def prove_consistency(ledger: Ledger | str | os.PathLike[str], old_size: int) -> ConsistencyProof:
    """Prove the ledger's current tree extends its first ``old_size`` entries.

    Syncs like ``prove_inclusion`` (read-only lock; in memory, O(n), when the sidecar cannot
    be written).

    Raises:
        LedgerBrokenError: the chain is known to be broken.
        LedgerRollbackError: the ledger is shorter than what the sidecar already covers.
        IndexOutOfRangeError: ``old_size`` is not an int, is 0, or is beyond the current size.
        OSError: the ledger cannot be read.
    """
    if not isinstance(old_size, int) or isinstance(old_size, bool):
        raise IndexOutOfRangeError(f"old_size must be an int, not {type(old_size).__name__}")
    ledger_path, state, tree = _current(ledger)
    _refuse_if_broken(state, ledger_path)
    size = state.leaves
    path = consistency_proof(old_size, size, tree)
    return ConsistencyProof(old_size, size, tree.root(old_size), tree.root(size), tuple(path))


def tree_head(ledger: Ledger | str | os.PathLike[str], origin: str) -> Checkpoint:
    """Return the unsigned checkpoint (origin, size, root) of the ledger's current tree.

    Syncs like ``prove_inclusion`` (read-only lock; in memory, O(n), when the sidecar cannot
    be written).

    Raises:
        LedgerBrokenError: the chain is known to be broken.
        LedgerRollbackError: the ledger is shorter than what the sidecar already covers.
        CheckpointError: an invalid origin.
        OSError: the ledger cannot be read.
    """
    ledger_path, state, tree = _current(ledger)
    _refuse_if_broken(state, ledger_path)
    return Checkpoint(origin, state.leaves, tree.root(state.leaves))

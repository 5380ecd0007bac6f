"""RFC 6962 proofs over a ledger, served from its Merkle tree sidecar (``treelog``).

The leaves of a ledger are its entries in order; the leaf data of an entry is
``Entry.line()`` (``canonical.dumps`` of the entry, hash included: for lines this library wrote,
the line without its newline), so leaf ``i`` is the entry of seq ``i + 1`` (DESIGN §6).

The sidecar and its sync state are kept by the ledger's
:class:`~merkle_memory.ledger.storage.LedgerStore`; in the folder store they are the files
beside ``ledger.jsonl``: ``ledger.tree`` (the sidecar, see ``treelog``) and
``ledger.tree.state``, a small JSON object replaced atomically after each sidecar append::

    {"leaves": n, "offset": byte offset in ledger.jsonl just past entry n,
     "last_hash": hash of entry n (or null), "broken_at": seq or null, "reason": str or null,
     "root": hex root of the n leaves computed from the ledger (or null),
     "ledger_size": bytes of ledger.jsonl when checked (or null),
     "ledger_stamp": its LedgerFile.stamp then (or null),
     "ids_buckets", "ids_count", "ids_root": the id index over the same entries (or null)}

and ``ledger.ids``, the id index (``_idindex``, docs/FORMAT.md section 7.1): memory id ->
where its latest entry's line starts, buckets under a Merkle tree whose root the state
records. The same sync keeps it: the lines it reads for the sidecar give the ids.

``sync`` catches the sidecar up with the ledger under the ledger lock (the exclusive
``flock`` every append takes, so the sidecar is only ever appended under that lock), reading
only the lines past ``offset`` (well-formed lines are read without a JSON parser, see
``_entry.leaf_line``). ``check`` compares the whole sidecar with the whole ledger and
``rebuild`` writes it anew from the ledger.

Proof documents (``InclusionProof``, ``ConsistencyProof``: the JSON that ``ledger prove`` and
``ledger consistency`` print) hold hashes as 32-byte ``bytes`` and write them as 64-char
lowercase hex (DESIGN §7 keys). An inclusion proof document also carries ``entry``: the proven
ledger entry as a JSON object (its seven keys). Its RFC 8785 form (``Entry.line()``, the ledger
line without its newline for lines this library wrote) is the leaf data, so a verifier
recomputes ``leaf_hash = SHA-256(0x00 || that)`` and checks that the entry's ``memory_id`` and
``seq`` (= ``leaf_index + 1``) are the ones the document claims: the id and the position are
authenticated by the root, not taken on the document's word. ``tree_size`` is authenticated
only by a root whose size the verifier knows (a signed checkpoint, or a pinned size).

When the sidecar is appended (decision): lazily, by ``sync`` at proof time, not on every
ledger append. Every ``prove_inclusion``, ``prove_consistency`` and ``tree_head`` (so the CLI's
``ledger prove``, ``consistency`` and ``checkpoint``) syncs first, so a proof always covers
every acknowledged entry. Appending eagerly would add the sidecar's fsync and the state's
atomic replace (temp file, fsync, rename, folder fsync) to every append, doubling its fsyncs,
to save a sync that costs O(new entries) when a proof is asked for. ``attach(ledger)`` gives
the eager behaviour to a caller who wants it (it installs the ledger's ``on_append`` hook,
which runs under the ledger lock).

What the sidecar is trusted for: nothing (issue 14). It is derived data, and every hash served
is tied to the ledger first. The state records, besides how far the sidecar covers the
ledger, the root of the covered leaves as computed from the ledger (``root``) and the ledger's
size and ``LedgerFile.stamp`` when it was checked. Each sync, under the ledger lock:

* the whole ledger is re-read (O(n): the chain checked from the first entry, the sidecar's
  covered prefix compared by root and last leaf, kept if equal, else rebuilt with a WARNING)
  when there is no usable state, when the state records a break (one edited field must not
  make an intact ledger refused forever), when the ledger did not grow but its stamp changed
  or cannot be trusted (an edit in place), or when an anchor fails;
* the anchors (O(log n)): the last covered entry still ends at ``offset`` with the recorded
  hash and seq and is the sidecar's last covered leaf, and the sidecar's root of the covered
  leaves is the recorded root;
* then only the new lines are scanned and appended, as before.

And every proof is verified against that root before it is returned (the leaf against the
ledger entry too): a wrong hash anywhere in the sidecar makes the sidecar be rebuilt from the
ledger and the proof computed again, so it is never served.

Refusal rule (DESIGN section 6, "proofs are refused when the chain is known to be broken"):
the break is the one **found when the sidecar is synced or re-checked** (verify never writes a
file, so it leaves nothing to consult). ``sync`` checks every entry as it first covers it (and
all of them on a re-check): the line is a well-formed entry whose hash matches (either form),
its seq is the previous one plus 1 and its ``prev`` is the previous entry's hash. The first
failure is recorded in the state (``broken_at``, ``reason``) and ``prove_inclusion``,
``prove_consistency`` and ``tree_head`` raise ``LedgerBrokenError``; a state recording a break
is not believed on its own, every later sync re-reads the whole ledger and records what it
finds.
They also read the head (``ledger.head``, the database's head row) before the ledger, under
the lock, and raise ``LedgerRollbackError`` with ``verify``'s reason when it records a later
entry than the ledger holds, or another entry at the last seq (a rollback: entries that were
acknowledged are gone, so no tree of what is left is signed or published). Not part of the
rule: record files (an altered record is a verify verdict, not a ledger
break). Left to ``ledger verify`` (which re-reads everything): a same-length rewrite inside
the synced prefix made together with an append (the size grew, the anchors still hold), and a
sidecar and state forged together consistently. A ledger file shorter than the synced offset
raises ``LedgerRollbackError``.

The id index is trusted for nothing either: every bucket a lookup reads is checked against
the root recorded in the state (O(log n) digests), and the line it names must be a whole entry
of that id within the checked entries, its leaf the sidecar's; otherwise the sidecar and the
index are rebuilt from the ledger and the proof made again (see ``_latest``). Proofs are made
under the ledger lock, so ledger, sidecar and index are one snapshot.

Cost at 1,000,000 entries (``benchmarks/bench_proofs.py``, docs/PERFORMANCE.md): the first
sync reads the whole ledger once (and builds the index); afterwards a proof by id reads one
bucket of the index and O(log n) digests and hashes, one line of the ledger, and never
rereads the ledger to hash it: about 0.4 ms (page cache warm). A store without an index
(``LedgerStore.id_index`` yields ``None``) finds an id's latest entry by a backwards byte
search of the ledger (fast for recent entries, a scan for an id last sealed long ago).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hmac
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from .._progress import EVERY, ProgressCallback
from ..checkpoint import Checkpoint
from ..errors import (
    IndexOutOfRangeError,
    LedgerBrokenError,
    LedgerError,
    LedgerRollbackError,
    MerkleMemoryError,
    ProofError,
    TreeLogError,
)
from ..proof import consistency_proof, inclusion_proof, verify_consistency, verify_inclusion
from ..rfc6962 import hash_leaf
from ..rfc6962 import root as merkle_root
from ._chain import Ledger
from ._entry import Entry, as_path, parse_line
from ._folder import STATE_NAME, FolderLedgerStore
from ._idindex import IdsState, IndexMismatch, Table, buckets_for
from ._idindex import lookup as lookup_id
from ._idindex import update as update_ids
from ._tail import iter_objects_naming
from ._treesync import (
    SyncState,
    anchored,
    in_memory,
    read_state,
    refuse_gone,
    refuse_shorter,
    scan,
)
from ._verify import head_ahead_reason
from .storage import Head, LedgerFile, LedgerStore

__all__ = [
    "STATE_NAME",
    "ConsistencyProof",
    "InclusionProof",
    "LedgerLike",
    "SyncState",
    "attach",
    "check",
    "prove_consistency",
    "prove_inclusion",
    "rebuild",
    "sync",
    "tree_head",
]

log = logging.getLogger("merkle_memory.ledger")

_T = TypeVar("_T")

_READ_ONLY: Final = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
"""``errno`` values meaning "this reader may not write here": proofs are then computed in
memory from the ledger instead of from the sidecar."""


@dataclass(frozen=True, slots=True)
class InclusionProof:
    """An inclusion proof of one ledger entry (JSON keys of ``ledger prove``, DESIGN §7).

    Attributes:
        memory_id: the record id.
        leaf_index: 0-based leaf index (= seq - 1).
        tree_size: tree size in leaves the proof is for.
        leaf_hash: 32-byte RFC 6962 leaf hash of the entry line.
        root_hash: 32-byte root of the tree of ``tree_size`` leaves.
        inclusion_proof: the audit path, 32-byte hashes, leaf sibling first.
        entry: the ledger entry proven; ``entry.line()`` is the leaf data (JSON key
            ``entry``: the entry object with its seven keys).
    """

    memory_id: str
    leaf_index: int
    tree_size: int
    leaf_hash: bytes
    root_hash: bytes
    inclusion_proof: tuple[bytes, ...]
    entry: Entry

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form: the DESIGN §7 keys (hashes as 64-char lowercase hex), then
        ``entry`` (the entry object)."""
        return {
            "memory_id": self.memory_id,
            "leaf_index": self.leaf_index,
            "tree_size": self.tree_size,
            "leaf_hash": self.leaf_hash.hex(),
            "root_hash": self.root_hash.hex(),
            "inclusion_proof": [h.hex() for h in self.inclusion_proof],
            "entry": self.entry.to_dict(),
        }

    @classmethod
    def from_dict(cls, value: Any) -> InclusionProof:
        """Parse the JSON form.

        Raises:
            ProofError: not an object, a missing key (``entry`` included: documents without
                it cannot bind the id and position), a bad value, or an ``entry`` that is not
                a well-formed ledger entry (its own ``hash`` is not checked: the leaf hash
                covers every byte of it).
        """
        if not isinstance(value, dict):
            raise ProofError("not an inclusion proof document: not a JSON object")
        try:
            return cls(
                _str(value["memory_id"]),
                _int(value["leaf_index"]),
                _int(value["tree_size"]),
                _hex(value["leaf_hash"]),
                _hex(value["root_hash"]),
                tuple(_hex(h) for h in _list(value["inclusion_proof"])),
                _entry(value["entry"]),
            )
        except KeyError as exc:
            raise ProofError(f"not an inclusion proof document: missing {exc}") from exc

    def check_entry(self) -> None:
        """Check that ``entry`` is what the other fields claim: ``leaf_hash`` is the RFC 6962
        leaf hash of ``entry.line()``, ``entry.memory_id == memory_id`` and ``entry.seq ==
        leaf_index + 1``.

        Raises:
            ProofError: any of the three differs, or the entry has no RFC 8785 form.
        """
        try:
            data = self.entry.line()
        except MerkleMemoryError as exc:
            raise ProofError(f"the entry has no canonical form: {exc}") from exc
        if not hmac.compare_digest(hash_leaf(data), self.leaf_hash):
            raise ProofError("leaf_hash is not the leaf hash of the entry")
        if self.entry.memory_id != self.memory_id:
            raise ProofError(
                f"the entry seals memory id {self.entry.memory_id!r}, not {self.memory_id!r}"
            )
        if self.entry.seq != self.leaf_index + 1:
            raise ProofError(
                f"the entry has seq {self.entry.seq}, not leaf_index + 1 = {self.leaf_index + 1}"
            )

    def verify(self, root: bytes) -> None:
        """``check_entry``, then ``verify_inclusion`` against the trusted 32-byte ``root``.

        ``tree_size`` is taken from the document: ``root`` must be trusted *for that size*
        (a checkpoint of that size), else only "in the tree with this root" is proven.

        Raises:
            ProofError: the entry does not match, or the proof does not verify
                (``RootMismatchError`` and the other ``ProofError`` subclasses).
        """
        self.check_entry()
        verify_inclusion(
            self.leaf_hash, self.leaf_index, self.tree_size, self.inclusion_proof, root
        )


@dataclass(frozen=True, slots=True)
class ConsistencyProof:
    """A consistency proof between two ledger sizes (JSON keys of ``ledger consistency``).

    Attributes:
        old_size: the older tree size in leaves.
        new_size: the newer tree size.
        old_root: 32-byte root of the older tree.
        new_root: 32-byte root of the newer tree.
        consistency_proof: 32-byte hashes.
    """

    old_size: int
    new_size: int
    old_root: bytes
    new_root: bytes
    consistency_proof: tuple[bytes, ...]

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (hashes as 64-char lowercase hex)."""
        return {
            "old_size": self.old_size,
            "new_size": self.new_size,
            "old_root": self.old_root.hex(),
            "new_root": self.new_root.hex(),
            "consistency_proof": [h.hex() for h in self.consistency_proof],
        }

    @classmethod
    def from_dict(cls, value: Any) -> ConsistencyProof:
        """Parse the JSON form. Raises ``ProofError`` for a missing key or a bad value."""
        if not isinstance(value, dict):
            raise ProofError("not a consistency proof document: not a JSON object")
        try:
            return cls(
                _int(value["old_size"]),
                _int(value["new_size"]),
                _hex(value["old_root"]),
                _hex(value["new_root"]),
                tuple(_hex(h) for h in _list(value["consistency_proof"])),
            )
        except KeyError as exc:
            raise ProofError(f"not a consistency proof document: missing {exc}") from exc

    def verify(self) -> None:
        """``verify_consistency`` between ``old_root`` and ``new_root`` (raises ``ProofError``)."""
        verify_consistency(
            self.old_size, self.new_size, self.consistency_proof, self.old_root, self.new_root
        )


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ProofError(f"expected a string, got {str(value)[:80]!r}")
    return value


def _entry(value: Any) -> Entry:
    try:
        return Entry.from_dict(value, check_hash=False)
    except MerkleMemoryError as exc:
        raise ProofError(f"entry is not a ledger entry: {exc}") from exc


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProofError(f"expected an integer, got {value!r}")
    return value


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ProofError("expected a list of hex hashes")
    return value


def _hex(value: Any) -> bytes:
    if not isinstance(value, str) or len(value) != 64:
        raise ProofError(f"expected a 64-char hex hash, got {str(value)[:80]!r}")
    try:
        return bytes.fromhex(value)
    except ValueError as exc:
        raise ProofError(f"not hex: {value[:80]!r}") from exc


class _Tree(Protocol):
    """What a proof needs: leaf hashes by index and the root of a prefix (a sidecar, or the
    leaves hashed in memory)."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int, /) -> bytes: ...

    def root(self, size: int | None = None) -> bytes: ...


LedgerLike = Ledger | LedgerStore | str | os.PathLike[str]
"""What the functions here accept: a ``Ledger``, a ``LedgerStore``, a ``ledger.jsonl`` path or
the tenant folder that holds it."""


def _ledger(ledger: LedgerLike) -> Ledger:
    if isinstance(ledger, Ledger):
        return ledger
    if isinstance(ledger, LedgerStore):
        return Ledger(ledger)
    path = as_path(ledger, "a Ledger or a path")
    if path.is_dir():
        path = path / "ledger.jsonl"
    return Ledger(FolderLedgerStore(path))


def _sync_locked(
    store: LedgerStore, file: LedgerFile, progress: ProgressCallback | None = None
) -> SyncState:
    """Under the ledger lock (``file`` lent by it): check the sidecar against the ledger, then
    catch it up. Cheap when the state's anchors hold (see the module docstring, "What the
    sidecar is trusted for"); otherwise the whole ledger is re-read (``_recheck_locked``)."""
    state = read_state(store)
    sidecar = store.sidecar()
    if (
        state is None
        or state.root is None
        or state.ledger_size is None
        or state.broken_at is not None  # a recorded break is never trusted: re-read it
    ):
        return _recheck_locked(store, file, state, progress)
    if refuse_shorter(store, file, state):
        return _recheck_locked(store, file, None, progress)
    stamp = file.stamp(settled=True)
    unchanged = stamp is not None and stamp == state.ledger_stamp
    if not (unchanged or file.size() > state.ledger_size) or not anchored(state, file, sidecar):
        return _recheck_locked(store, file, state, progress)  # edited in place, or anchors fail
    if len(sidecar) > state.leaves:  # crash between sidecar append and state write
        store.truncate_sidecar(state.leaves)
    elif unchanged and state.ids is not None:
        if progress is not None:  # nothing to read: the end of no work, as a scan reports it
            progress("ledger", state.ledger_size, state.ledger_size)
        return state  # the ledger's bytes are the ones checked: nothing to add
    found: list[tuple[bytes, int]] = []
    leaves, new = scan(state, file, ids=lambda key, at: found.append((key, at)), progress=progress)
    root = bytes.fromhex(state.root)
    if leaves:
        store.append_sidecar(leaves)
        root = store.sidecar().root(new.leaves)
    ids = _update_ids(store, file, state, found)
    return _record(store, file, new.with_ids(ids), root, state)


def _update_ids(
    store: LedgerStore, file: LedgerFile, state: SyncState, found: list[tuple[bytes, int]]
) -> IdsState | None:
    """The id index caught up with the ``found`` lines (their keys and offsets), in place
    when the recorded one checks out (every bucket touched against its root), else built
    anew from the whole ledger (one more pass). ``None``: the store keeps no index."""
    with store.id_index(write=True) as index:
        if index is None:
            return None
        if state.ids is not None:
            try:
                updated = update_ids(index, state.ids, found)
            except IndexMismatch as exc:
                log.warning(
                    "The id index of %s differs from its recorded root (%s); rebuilt from the"
                    " ledger",
                    store.label,
                    exc,
                )
                updated = None
            if updated is not None:
                return updated
    table = _ids_table(store, file)
    assert table is not None
    scan(SyncState(), file, ids=table.put)
    return _write_ids(store, table)


def _ids_table(store: LedgerStore, file: LedgerFile) -> Table | None:
    """An empty id index sized for the ledger (one id per ten lines of about 200 bytes; it
    grows as needed), or ``None`` when the store keeps none."""
    with store.id_index(write=False) as index:
        if index is None:
            return None
    return Table(buckets_for(file.size() // 2000 + 1))


def _write_ids(store: LedgerStore, table: Table | None) -> IdsState | None:
    if table is None:
        return None
    data, ids = table.file()
    store.replace_id_index(data)
    return ids


def _record(
    store: LedgerStore, file: LedgerFile, new: SyncState, root: bytes, old: SyncState | None
) -> SyncState:
    """Write ``new`` (with its ``root`` and the ledger's size and stamp) as the state, unless
    it is ``old`` unchanged (``old=None``: always, so that a re-check moves the state's
    change time past the ledger's and the next sync can trust the stamp)."""
    new = dataclasses.replace(
        new, root=root.hex(), ledger_size=file.size(), ledger_stamp=file.stamp(settled=False)
    )
    if old is None or new != old:
        store.write_sidecar_state(new.to_bytes())
    return new


def _recheck_locked(
    store: LedgerStore,
    file: LedgerFile,
    old: SyncState | None,
    progress: ProgressCallback | None = None,
) -> SyncState:
    """Re-read the whole ledger (O(n)): check its chain from the first entry and the sidecar
    against it; keep a sidecar whose covered prefix has the ledger's root, else rebuild it
    (a WARNING when it held leaves the ledger does not have: it was altered). Temp files
    crashes left of the sidecar files are removed first (``LedgerStore.remove_leftovers``:
    this path already reads the whole ledger, so one listing of the folder is nothing)."""
    refuse_shorter(store, file, old)  # raises on a rollback; a forged state is re-read anyway
    store.remove_leftovers()
    table = _ids_table(store, file)
    put = None if table is None else table.put
    leaves, new = scan(SyncState(), file, ids=put, progress=progress)
    sidecar = store.sidecar()
    stored = min(len(sidecar), len(leaves))
    prefix_ok = False
    with contextlib.suppress(IndexOutOfRangeError, TreeLogError):
        prefix_ok = sidecar.root(stored) == merkle_root(leaves[:stored])
    if prefix_ok and stored:
        prefix_ok = sidecar[stored - 1] == leaves[stored - 1]
    if prefix_ok:
        if len(sidecar) > stored:
            store.truncate_sidecar(stored)
        if len(leaves) > stored:
            store.append_sidecar(leaves[stored:])
    else:
        log.warning(
            "The Merkle sidecar of %s differs from the ledger (altered or corrupt);"
            " rebuilt from the ledger",
            store.label,
        )
        store.clear_sidecar()
        if leaves:
            store.append_sidecar(leaves)
    ids = _write_ids(store, table)
    return _record(store, file, new.with_ids(ids), merkle_root(leaves), None)


def _rebuild_locked(
    store: LedgerStore, file: LedgerFile, progress: ProgressCallback | None = None
) -> SyncState:
    """Under the lock: remove the temp files crashes left (``LedgerStore.remove_leftovers``),
    then rebuild the sidecar, the id index and the state from the whole ledger."""
    store.remove_leftovers()
    store.clear_sidecar()
    table = _ids_table(store, file)
    put = None if table is None else table.put
    leaves, new = scan(SyncState(), file, ids=put, progress=progress)
    if leaves:
        store.append_sidecar(leaves)
    ids = _write_ids(store, table)
    return _record(store, file, new.with_ids(ids), merkle_root(leaves), None)


@dataclass(frozen=True, slots=True)
class _Checked:
    """What a proof is made from: the ledger's checked state and tree, and (under the lock)
    the ledger's bytes; ``fresh`` when the sidecar and the id index were just rebuilt."""

    store: LedgerStore
    state: SyncState
    tree: _Tree
    file: LedgerFile | None
    fresh: bool
    head: Head | None = None


@contextlib.contextmanager
def _current(
    ledger: LedgerLike, *, fresh: bool = False, progress: ProgressCallback | None = None
) -> Iterator[_Checked]:
    """The ledger's checked state and tree, for serving proofs (see ``prove_inclusion``),
    with the ledger lock held for the block; ``fresh``: the sidecar and the id index are
    rebuilt from the ledger first. Without write access to them: computed in memory, no
    lock held, no id index."""
    led = _ledger(ledger)
    store = led.store
    if store.exists():  # else nothing to lock, nothing to write
        with led.locked(write=False) as file:
            head = store.read_head()
            try:
                if fresh:
                    synced = _rebuild_locked(store, file, progress)
                else:
                    synced = _sync_locked(store, file, progress)
            except OSError as exc:
                if exc.errno not in _READ_ONLY:
                    raise
                log.debug("sidecar of %s not writable (%s): proving in memory", store.label, exc)
            else:
                yield _Checked(store, synced, store.sidecar(), file, fresh, head)
                return
    head = store.read_head()  # before the ledger is read: it only grows past this head
    state, tree = in_memory(store, progress)
    yield _Checked(store, state, tree, None, fresh, head)


def sync(ledger: LedgerLike) -> SyncState:
    """Catch the sidecar up with the ledger under the ledger lock; return the new state.

    Checks the sidecar and its state against the ledger first (the anchors, O(log n); the
    whole ledger, O(n), when they fail, when the state is missing or unreadable, or when the
    ledger changed in place: see "What the sidecar is trusted for"), then reads only the
    lines past the synced offset. The lock is taken through a read-only descriptor, so only
    the sidecar files need write access. Nothing is created when there is no ledger file.

    Args:
        ledger: a ``Ledger``, a ``LedgerStore``, its ``ledger.jsonl`` path, or the tenant
            directory.

    Raises:
        LedgerRollbackError: the ledger file is shorter than what was already synced, or
            gone after entries were synced.
        StoreFileError: a file of the store is a symlink or not a regular file.
        LedgerError: ``ledger`` is neither a ``Ledger``, a store nor a path.
        OSError: from the file system (e.g. the sidecar cannot be written).
    """
    led = _ledger(ledger)
    if not led.store.exists():
        refuse_gone(led.store, read_state(led.store))
        return SyncState()
    with led.locked(write=False) as file:
        return _sync_locked(led.store, file)


def rebuild(ledger: LedgerLike) -> SyncState:
    """Rebuild the sidecar and its state from the whole ledger (O(n)), under the lock.

    Raises:
        LedgerError: ``ledger`` is neither a ``Ledger``, a store nor a path.
        OSError: from the file system.
    """
    led = _ledger(ledger)
    with led.locked() as file:
        return _rebuild_locked(led.store, file)


def attach(ledger: Ledger) -> None:
    """Keep the sidecar of ``ledger`` current: sync it in the ledger's ``on_append`` hook."""

    def hook(entries: Sequence[Entry]) -> None:
        with ledger.locked() as file:  # re-entered: the hook runs under the append's lock
            _sync_locked(ledger.store, file)

    ledger.on_append = hook


def check(
    ledger: LedgerLike, *, behind_ok: bool = False, progress: ProgressCallback | None = None
) -> bool:
    """Compare the whole sidecar with the whole ledger (O(n), no lock, changes nothing).

    Args:
        ledger: a ``Ledger``, a ``LedgerStore``, its ``ledger.jsonl`` path, or the tenant
            directory.
        behind_ok: ``True``: a sidecar that holds the right hashes for fewer entries than
            the ledger (not yet synced, the usual state between proofs) passes.
        progress: optional ``progress(phase, done, total)`` callback
            (``merkle_memory._progress``): phase ``"sidecar"``, in ledger entries read, out
            of the leaves the sidecar holds (``None`` when it holds none).

    Returns:
        ``True`` when every stored hash matches the ledger's entries.

    Raises:
        TreeLogError: the sidecar differs (``leaf_index`` = first wrong leaf).
        LedgerFormatError: a ledger line that is not an entry.
        StoreFileError: a file of the store is a symlink or not a regular file.
    """
    led = _ledger(ledger)
    sidecar = led.store.sidecar()
    data: Iterable[bytes] = (entry.line() for entry in led.entries(check_hash=False))
    if progress is not None:
        data = _counted(data, progress, len(sidecar) or None)
    result = sidecar.check(data)
    behind = result.first_bad_leaf == result.stored_leaves < result.expected_leaves
    if not (result.ok or (behind_ok and behind)):
        raise TreeLogError(
            f"the Merkle sidecar of {led.store.label} differs from the ledger from leaf"
            f" {result.first_bad_leaf} (derived data: the next proof rebuilds it; unless the"
            " sidecar was damaged, the ledger's entries from that leaf on are not the ones it"
            " once held: a rollback of the ledger with its head, or another history: compare"
            " with a witnessed checkpoint first)",
            result.first_bad_leaf,
        )
    return True


def _counted(
    items: Iterable[bytes], progress: ProgressCallback, total: int | None
) -> Iterator[bytes]:
    """``items`` unchanged, reported as phase ``"sidecar"`` every few hundred items (out of
    ``total``, the sidecar's leaves, or ``None`` when it has none)."""
    done = 0
    for done, item in enumerate(items, 1):
        if done % EVERY == 0:
            progress("sidecar", done if total is None else min(done, total), total)
        yield item
    progress("sidecar", done if total is None else min(done, total), total)


class _Inconsistent(Exception):
    """A sidecar hash a proof was computed from is not the ledger's (never escapes)."""


def _serve(
    ledger: LedgerLike,
    make: Callable[[_Checked], _T],
    progress: ProgressCallback | None = None,
) -> _T:
    """``make(checked)`` on the checked tree, under the ledger lock, refusing a broken chain.

    ``make`` verifies what it computed (a proof against the root, the leaf against the
    ledger entry, the entry the id index names against the ledger) and raises
    ``_Inconsistent`` when a sidecar hash or the index is wrong; the sidecar and the index
    are then rebuilt from the ledger (a WARNING) and ``make`` runs once more. So a wrong
    hash in the sidecar or a wrong index is never served, whichever part is wrong.

    Raises:
        LedgerBrokenError: the chain is broken (found while checking the ledger).
        TreeLogError: the rebuilt sidecar still disagrees (the ledger changed meanwhile).
    """
    for fresh in (False, True):
        with _current(ledger, fresh=fresh, progress=progress) as checked:
            state = checked.state
            if state.broken_at is not None:
                raise LedgerBrokenError(
                    f"{checked.store.label}: chain broken at seq {state.broken_at} "
                    f"({state.reason}); no proofs are served"
                )
            _check_head(checked)
            try:
                return make(checked)
            except _Inconsistent as exc:
                if fresh:
                    raise TreeLogError(f"{checked.store.label}: {exc}; try again") from None
                log.warning(
                    "Merkle sidecar of %s: %s; rebuilt from the ledger", checked.store.label, exc
                )
    raise AssertionError("unreachable")  # pragma: no cover


def _check_head(checked: _Checked) -> None:
    """Refuse a ledger that lost acknowledged entries: its head (``ledger.head``, the
    database's head row) records a later entry than the ledger holds, or another entry at
    the last seq. ``verify`` reports the same break with the same reason; nothing is proven
    or signed for such a tree (DESIGN section 6). The head was read before the ledger (under
    the lock, or before an unlocked read), so an append meanwhile never looks like a loss.

    Raises:
        LedgerRollbackError: the head is ahead of the ledger or names another last entry.
        LedgerFormatError: the head is unreadable.
    """
    store, state, head = checked.store, checked.state, checked.head
    if head is None:
        return
    if head.seq > state.leaves:
        reason = head_ahead_reason(head.seq, state.leaves)
    elif head.seq == state.leaves and not hmac.compare_digest(head.hash, state.last_hash):
        reason = f"ledger.head records a different entry at seq {head.seq}"
    else:
        return
    broken = min(head.seq, state.leaves + 1)
    raise LedgerRollbackError(
        f"{store.label}: ledger chain broken at seq {broken}: {reason}; "
        "nothing is proven or signed",
        expected_seq=head.seq,
        found_seq=state.leaves,
    )


def _root(state: SyncState, tree: _Tree, size: int) -> bytes:
    """The root of ``size`` leaves: for all the tree covers, the root recorded when it was
    checked against the ledger (every proof served is verified against it); else the
    tree's."""
    if state.root is not None and size == state.leaves:
        return bytes.fromhex(state.root)
    return tree.root(size)


def _latest(checked: _Checked, memory_id: str) -> Entry | None:
    """The last entry of ``memory_id`` among the ``checked.state.leaves`` the tree covers.

    Through the id index when there is one (O(log n) reads, every bucket checked against the
    recorded root; the entry named must be a whole entry line of that id within the tree),
    else by reading the ledger (``_find_latest``). An index that fails a check raises
    ``_Inconsistent`` (the caller rebuilds it); after a rebuild, an entry of another id (two
    ids sharing a 64-bit key) sends the search to the ledger.
    """
    state, file = checked.state, checked.file
    if file is not None and state.ids is not None:
        with checked.store.id_index(write=False) as index:
            if index is not None:
                try:
                    offset = lookup_id(index, state.ids, memory_id)
                except IndexMismatch as exc:
                    raise _Inconsistent(f"its id index: {exc}") from None
                if offset is None:
                    return None
                entry = _entry_at(file, offset, state.offset)
                if entry is not None and entry.memory_id == memory_id:
                    if entry.seq <= state.leaves:
                        return entry
                elif checked.fresh and entry is not None:
                    return _find_latest(checked.store, memory_id, state.leaves)
                raise _Inconsistent(f"its id index names no entry of {memory_id!r} at {offset}")
    return _find_latest(checked.store, memory_id, state.leaves)


def _entry_at(file: LedgerFile, offset: int, end: int) -> Entry | None:
    """The entry whose line starts at byte ``offset`` (before ``end``), or ``None`` when no
    whole entry line starts there."""
    if not 0 <= offset < end or (offset and file.read(offset - 1, 1) != b"\n"):
        return None
    data = b""
    block = 4096
    while True:
        data = file.read(offset, min(block, end - offset))
        cut = data.find(b"\n")
        if cut >= 0 or offset + len(data) >= end or block >= 1 << 20:
            break
        block *= 16
    line = data if cut < 0 else data[:cut]
    try:
        return Entry.from_dict(parse_line(line.strip()), check_hash=True)
    except LedgerError:
        return None


def _find_latest(store: LedgerStore, memory_id: str, size: int) -> Entry | None:
    """The last entry of ``memory_id`` with seq at most ``size`` (the id's latest entry among
    the first ``size`` entries), or ``None`` when there is none.

    The lines naming the id in any valid form (``_tail.iter_objects_naming``: this library's,
    the anchor's, other spacing, escapes, key order, CRLF) are read from the last to the
    first; the first that is a well-formed entry whose hash matches (``Entry.from_dict``
    with the hash checked) and whose seq is at most ``size`` is returned. Any other line is
    skipped. About one read of the bytes after the entry found, a JSON parse only for lines
    that may name the id; the id index is the fast path (``_latest``).

    Raises:
        OSError: the ledger cannot be read.
    """
    with store.reader() as file:
        if file is None:
            return None
        for obj in iter_objects_naming(file, file.size(), memory_id):
            try:
                entry = Entry.from_dict(obj, check_hash=True)
            except LedgerError:
                continue
            if entry.seq <= size:
                return entry
    return None


def prove_inclusion(
    ledger: LedgerLike, memory_id: str, *, progress: ProgressCallback | None = None
) -> InclusionProof:
    """Prove the latest entry of ``memory_id`` is in the ledger's current tree.

    Syncs the sidecar first (under the ledger lock: pass the ``Ledger`` object, e.g.
    ``tenant.ledger``, to prove while holding its lock), then reads O(log n) hashes from it.
    The lock is taken through a read-only descriptor; when the sidecar files cannot be
    written (``EACCES``, ``EPERM``, ``EROFS``: a read-only auditor, a read-only mount) the
    whole ledger is read and hashed in memory instead (O(n) time, 32 bytes per entry) and
    nothing is written. A broken chain is refused either way.

    Args:
        ledger: a ``Ledger``, a ``LedgerStore``, its ``ledger.jsonl`` path, or the tenant
            directory.
        memory_id: the record id.
        progress: optional ``progress(phase, done, total)`` callback
            (``merkle_memory._progress``): phase ``"ledger"``, in bytes, while the ledger is
            read to build or check the sidecar (the first proof, or after a foreign write).

    Returns:
        The proof; its ``entry`` is the entry proven (its RFC 8785 line is the leaf data).

    Raises:
        LedgerBrokenError: the chain is known to be broken (see the module docstring).
        LedgerRollbackError: the ledger is shorter than what the sidecar already covers, or
            its head records a later entry than it holds (or another last entry).
        StoreFileError: a file of the store is a symlink or not a regular file.
        LedgerError: no entry seals ``memory_id`` (or it is not a ``str``); ``TreeLogError``
            if the sidecar still disagrees with the ledger after it was rebuilt (the ledger
            changed meanwhile: try again).
        OSError: the ledger cannot be read.
    """
    if type(memory_id) is not str:
        raise LedgerError(f"a memory id is a str, not {type(memory_id).__name__}")

    def make(checked: _Checked) -> InclusionProof:
        state, tree = checked.state, checked.tree
        entry = _latest(checked, memory_id)
        if entry is None:
            raise LedgerError(f"no ledger entry seals memory id {memory_id!r}")
        index, size = entry.seq - 1, state.leaves
        leaf = hash_leaf(entry.line())
        if tree[index] != leaf:
            raise _Inconsistent(f"leaf {index} differs from the ledger entry of seq {entry.seq}")
        path = tuple(inclusion_proof(index, size, tree))
        root = _root(state, tree, size)
        try:
            verify_inclusion(leaf, index, size, path, root)
        except ProofError as exc:
            raise _Inconsistent(f"the inclusion proof of leaf {index} does not verify") from exc
        return InclusionProof(memory_id, index, size, leaf, root, path, entry)

    return _serve(ledger, make, progress)


def prove_consistency(
    ledger: LedgerLike, old_size: int, *, progress: ProgressCallback | None = None
) -> ConsistencyProof:
    """Prove the ledger's current tree extends its first ``old_size`` entries.

    Syncs like ``prove_inclusion`` (read-only lock; in memory, O(n), when the sidecar cannot
    be written; ``progress`` as there) and verifies the proof before returning it.

    Raises:
        LedgerBrokenError: the chain is known to be broken.
        LedgerRollbackError: the ledger is shorter than what the sidecar already covers, or
            its head records a later entry than it holds (or another last entry).
        StoreFileError: a file of the store is a symlink or not a regular file.
        IndexOutOfRangeError: ``old_size`` is not an int, is 0, or is beyond the current size.
        OSError: the ledger cannot be read.
    """
    if not isinstance(old_size, int) or isinstance(old_size, bool):
        raise IndexOutOfRangeError(f"old_size must be an int, not {type(old_size).__name__}")

    def make(checked: _Checked) -> ConsistencyProof:
        state, tree = checked.state, checked.tree
        size = state.leaves
        path = tuple(consistency_proof(old_size, size, tree))
        old_root, new_root = tree.root(old_size), _root(state, tree, size)
        try:
            verify_consistency(old_size, size, path, old_root, new_root)
        except ProofError as exc:
            raise _Inconsistent(f"the consistency proof from {old_size} does not verify") from exc
        return ConsistencyProof(old_size, size, old_root, new_root, path)

    return _serve(ledger, make, progress)


def tree_head(
    ledger: LedgerLike, origin: str, *, progress: ProgressCallback | None = None
) -> Checkpoint:
    """Return the unsigned checkpoint (origin, size, root) of the ledger's current tree.

    Syncs like ``prove_inclusion`` (read-only lock; in memory, O(n), when the sidecar cannot
    be written; ``progress`` as there); the root is the one computed from the ledger when it
    was checked.

    Raises:
        LedgerBrokenError: the chain is known to be broken.
        LedgerRollbackError: the ledger is shorter than what the sidecar already covers, or
            its head records a later entry than it holds (or another last entry).
        StoreFileError: a file of the store is a symlink or not a regular file.
        CheckpointError: an invalid origin.
        OSError: the ledger cannot be read.
    """

    def make(checked: _Checked) -> Checkpoint:
        state = checked.state
        return Checkpoint(origin, state.leaves, _root(state, checked.tree, state.leaves))

    return _serve(ledger, make, progress)

"""Private: :func:`verify_store` and its report (public face :mod:`merkle_memory.dag.store`).

Every stored row is read once, in insertion order: its hash is recomputed from the stored
bucket and parent (DESIGN section 3), its other columns are read as ``get`` reads them
(:attr:`~merkle_memory.dag.store.StoredRow.problem`), and one ``hash -> parent`` map finds
dangling parents and cycles. A pruned row (its content forgotten, ``NodeStore.forget``) keeps
its stored hash: it is listed as ``pruned``, not recomputed, and still takes part in the
parent links, so the structure around it verifies.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any

from .._json import HEX64
from .._progress import EVERY, ProgressCallback
from ..errors import MerkleMemoryError, NodeStoreError
from ._node import Bucket, node_hash
from ._store_base import NodeStore, StoredRow

__all__ = ["Dangling", "HashMismatch", "StoreReport", "Unreadable", "verify_store"]


@dataclass(frozen=True, slots=True)
class HashMismatch:
    """A stored node whose hash is not the hash of its stored bucket and parent.

    Attributes:
        hash: the stored hash text.
        computed: the recomputed 64-char hex hash, or ``None`` when the bucket is unreadable.
        reason: one line saying what is wrong.
    """

    hash: str
    computed: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class Dangling:
    """A stored node whose parent is not in the store.

    Attributes:
        hash: the stored node's hash.
        parent_hash: the parent hash it names.
    """

    hash: str
    parent_hash: str


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A stored row that :meth:`NodeStore.get` (so ``dag show``) cannot read, although its
    hash may verify: e.g. metadata that is not a JSON object, or a ``role`` column that is not
    the bucket's role.

    Attributes:
        hash: the stored hash text.
        reason: one line saying which column is wrong and why.
    """

    hash: str
    reason: str


@dataclass(frozen=True, slots=True)
class StoreReport:
    """What :func:`verify_store` found (``dag verify --json`` prints :meth:`to_dict`).

    Attributes:
        nodes: number of stored nodes checked.
        roots: number of stored nodes without a parent.
        mismatches: nodes whose hash does not match their stored bucket and parent.
        dangling: nodes whose parent is absent.
        cycles: each cycle of parent links, as the hashes on it (starting from the node met
            first in insertion order).
        unreadable: rows the store cannot read back as nodes (or whose ``role`` column
            disagrees with the bucket) that are not already in ``mismatches``; also a row
            marked pruned whose bucket still holds content (the forget did not happen).
        pruned: hashes of the nodes whose content was forgotten, in insertion order: their
            hash is kept as stored (it cannot be recomputed without the content); not a
            failure.
    """

    nodes: int
    roots: int
    mismatches: tuple[HashMismatch, ...]
    dangling: tuple[Dangling, ...]
    cycles: tuple[tuple[str, ...], ...]
    unreadable: tuple[Unreadable, ...] = ()
    pruned: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """``True`` when there is no mismatch, no unreadable row, no dangling parent and no
        cycle: then every node reads back (``get``, ``dag show``) and verifies."""
        return not (self.mismatches or self.unreadable or self.dangling or self.cycles)

    def to_dict(self) -> dict[str, Any]:
        """``{"ok", "nodes", "roots", "mismatches": [{"hash", "computed", "reason"}],
        "unreadable": [{"hash", "reason"}], "dangling": [{"hash", "parent_hash"}],
        "cycles": [[hash, ...]]}``, plus ``"pruned": [hash, ...]`` when a node was pruned."""
        out: dict[str, Any] = {
            "ok": self.ok,
            "nodes": self.nodes,
            "roots": self.roots,
            "mismatches": [
                {"hash": m.hash, "computed": m.computed, "reason": m.reason}
                for m in self.mismatches
            ],
            "unreadable": [{"hash": u.hash, "reason": u.reason} for u in self.unreadable],
            "dangling": [{"hash": d.hash, "parent_hash": d.parent_hash} for d in self.dangling],
            "cycles": [list(c) for c in self.cycles],
        }
        if self.pruned:
            out["pruned"] = list(self.pruned)
        return out


def _pruned_problem(row: StoredRow) -> str | None:
    """Why a row marked pruned is not a pruned node: its bucket still holds content."""
    bucket = row.bucket
    if isinstance(bucket, dict) and bucket.get("content"):
        return "marked pruned but its bucket still holds content"
    return None


def _recompute(row: StoredRow) -> HashMismatch | None:
    if not HEX64.fullmatch(row.hash):
        return HashMismatch(row.hash, None, "stored hash is not 64-char lowercase hex")
    if row.parent_hash is not None and not HEX64.fullmatch(row.parent_hash):
        return HashMismatch(row.hash, None, "stored parent hash is not 64-char lowercase hex")
    try:
        bucket = Bucket.from_dict(row.bucket)
        computed = node_hash(bucket, row.parent_hash)
    except MerkleMemoryError as exc:
        return HashMismatch(row.hash, None, f"stored bucket is unreadable: {exc}")
    if hmac.compare_digest(computed, row.hash):
        return None
    return HashMismatch(row.hash, computed, "hash does not match the stored bucket and parent")


def _find_cycles(parents: dict[str, str | None]) -> list[tuple[str, ...]]:
    """Cycles of the parent relation; each node is visited once (O(n))."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    cycles: list[tuple[str, ...]] = []
    for start in parents:
        if start in state:
            continue
        path: list[str] = []
        current: str | None = start
        while current is not None and current in parents and current not in state:
            state[current] = 1
            path.append(current)
            current = parents[current]
        if current is not None and state.get(current) == 1:
            cycles.append(tuple(path[path.index(current) :]))
        for visited in path:
            state[visited] = 2
    return cycles


def verify_store(store: NodeStore, *, progress: ProgressCallback | None = None) -> StoreReport:
    """Recompute every stored node hash and check every parent link (``dag verify``).

    Holds one ``hash -> parent`` map in memory (about 150 bytes per node); buckets are read
    one at a time.

    Args:
        store: the node store.
        progress: optional ``progress(phase, done, total)`` callback
            (``merkle_memory._progress``): phase ``"nodes"``, in stored rows checked out of
            ``len(store)``.

    Returns:
        A :class:`StoreReport`; a pruned node (``NodeStore.forget``) is listed in ``pruned``
        and its hash not recomputed; ``report.ok`` is ``False`` when any node's hash differs from
        ``node_hash(stored bucket, stored parent)``, any stored row cannot be read back as a
        node by :meth:`NodeStore.get` (every column ``get`` and ``dag show`` read is tried:
        :attr:`StoredRow.problem`), any parent is absent, or parent links form a cycle. So a
        store that verifies is one that ``get`` can read in full.

    Raises:
        NodeStoreError: ``store`` is not a ``NodeStore``, or the store itself cannot be read.
    """
    if not isinstance(store, NodeStore):
        raise NodeStoreError(f"store must be a NodeStore, not {type(store).__name__}")
    parents: dict[str, str | None] = {}
    mismatches: list[HashMismatch] = []
    unreadable: list[Unreadable] = []
    pruned: list[str] = []
    roots = 0
    total = len(store) if progress is not None else 0
    for done, row in enumerate(store.rows(), 1):
        if progress is not None and done % EVERY == 0:
            progress("nodes", min(done, total), total)
        parents[row.hash] = row.parent_hash or None
        roots += not row.parent_hash
        if row.pruned:
            problem = _pruned_problem(row) or row.problem
            if problem is not None:
                unreadable.append(Unreadable(row.hash, problem))
            else:
                pruned.append(row.hash)
            continue
        mismatch = _recompute(row)
        if mismatch is not None:
            mismatches.append(mismatch)
        # A row whose bucket, hash or parent is unusable is reported once, as a mismatch.
        if row.problem is not None and (mismatch is None or mismatch.computed is not None):
            unreadable.append(Unreadable(row.hash, row.problem))
    if progress is not None:
        progress("nodes", total, total)
    dangling = [Dangling(h, p) for h, p in parents.items() if p is not None and p not in parents]
    return StoreReport(
        nodes=len(parents),
        roots=roots,
        mismatches=tuple(mismatches),
        dangling=tuple(dangling),
        cycles=tuple(_find_cycles(parents)),
        unreadable=tuple(unreadable),
        pruned=tuple(pruned),
    )

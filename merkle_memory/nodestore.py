"""Node stores: where conversation DAG nodes live between imports (DESIGN section 3).

Two stores share one interface, :class:`NodeStore`:

* :class:`MemoryNodeStore`, a dict in this process;
* :class:`~merkle_memory._sqlite_store.SQLiteNodeStore` (opened with :func:`open_store`), one
  SQLite file in WAL mode, every :meth:`NodeStore.put_many` one transaction, so a process killed
  mid-import leaves the store as it was before that import or after it, never in between.

Both follow tapes' storage helpers (``pkg/storage``; shared research ``tapes.md`` section 3):
``put`` is idempotent and says whether it inserted; ``ancestry`` walks node-first and *reports*
a missing parent or a cycle rather than failing or looping; ``load_dag(hash)`` gives the
ancestry root-first and then every descendant of ``hash`` (siblings off the path are left
out). Unlike tapes, :meth:`NodeStore.roots`, :meth:`NodeStore.leaves` and
:meth:`NodeStore.children` have a defined order: insertion order.

A store holds whatever was put in it; :func:`verify_store` recomputes every node hash from the
stored bucket and reports mismatches, dangling parents and cycles.
"""

from __future__ import annotations

import hmac
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .dag import Bucket, Dag, Node, node_hash
from .errors import MerkleMemoryError, NodeNotFoundError, NodeStoreError

__all__ = [
    "Ancestry",
    "Dangling",
    "HashMismatch",
    "MemoryNodeStore",
    "NodeStore",
    "StoreReport",
    "StoredRow",
    "open_store",
    "verify_store",
]

_HEX64: Final = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class Ancestry:
    """The path from a node up to its root, as far as the store can follow it.

    Attributes:
        nodes: the node itself first, then its parent, ..., the root last (tapes order).
        missing_parent: the 64-char hex hash of a parent the store does not hold (the walk
            stopped below it), or ``None``.
        cycle: ``True`` when the walk met a node it had already visited (only possible in a
            tampered store, since a hash commits to its parent).
    """

    nodes: tuple[Node, ...]
    missing_parent: str | None = None
    cycle: bool = False

    @property
    def complete(self) -> bool:
        """Whether the walk reached a root (no missing parent, no cycle)."""
        return self.missing_parent is None and not self.cycle


@dataclass(frozen=True, slots=True)
class StoredRow:
    """One stored node as raw as the store keeps it, for :func:`verify_store`.

    Attributes:
        hash: the stored hash text (normally 64-char lowercase hex, but a tampered store may
            hold anything).
        parent_hash: the stored parent hash text, or ``None`` for a root.
        bucket: the stored bucket as a JSON object (``Bucket.to_dict()`` form), or ``None``
            when the stored bytes do not parse.
        role: the bucket's role, for display (``"?"`` when unknown).
    """

    hash: str
    parent_hash: str | None
    bucket: Any
    role: str = "?"


class NodeStore(ABC):
    """Interface of a node store (DESIGN section 3). Subclasses provide the primitives."""

    @abstractmethod
    def put(self, node: Node) -> bool:
        """Store ``node`` unless its hash is already present (idempotent, tapes ``Put``).

        Returns:
            ``True`` if the node was inserted, ``False`` if a node with that hash was there
            already (the stored node is left unchanged).

        Raises:
            NodeStoreError: the store cannot be written.
        """

    @abstractmethod
    def get(self, node_hash_hex: str) -> Node | None:
        """The node stored under a 64-char hex hash, or ``None``.

        Raises:
            NodeStoreError: the stored row cannot be read back as a node.
        """

    @abstractmethod
    def children(self, node_hash_hex: str) -> list[Node]:
        """The nodes whose parent is ``node_hash_hex``, in insertion order."""

    @abstractmethod
    def roots(self) -> list[Node]:
        """The nodes with no parent, in insertion order."""

    @abstractmethod
    def leaves(self) -> list[Node]:
        """The nodes with no children, in insertion order."""

    @abstractmethod
    def __iter__(self) -> Iterator[Node]:
        """Every stored node, in insertion order."""

    @abstractmethod
    def __len__(self) -> int:
        """The number of stored nodes."""

    @abstractmethod
    def rows(self) -> Iterator[StoredRow]:
        """Every stored node in raw form, in insertion order (see :class:`StoredRow`)."""

    def __contains__(self, node_hash_hex: object) -> bool:
        return isinstance(node_hash_hex, str) and self.get(node_hash_hex) is not None

    def put_many(self, nodes: Iterable[Node]) -> int:
        """Store every node of ``nodes`` (parents before children); return how many were new.

        The SQLite store does this in one transaction: all or nothing.

        Raises:
            NodeStoreError: the store cannot be written (nothing of this call is kept).
        """
        return sum(1 for node in nodes if self.put(node))

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release the store's resources (a no-op for the in-memory store)."""

    def __enter__(self) -> NodeStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _hashes_from(self, prefix: str) -> Iterator[str]:
        """Stored hashes starting with ``prefix`` (a subclass may answer from an index)."""
        return (row.hash for row in self.rows() if row.hash.startswith(prefix))

    def resolve(self, prefix: str) -> str:
        """The full hash of the one stored node whose hash starts with ``prefix``.

        Args:
            prefix: 4 to 64 lowercase hex characters.

        Raises:
            NodeNotFoundError: no stored hash starts with ``prefix``.
            NodeStoreError: ``prefix`` is not 4-64 lowercase hex characters, or more than one
                stored hash starts with it.
        """
        if not re.fullmatch(r"[0-9a-f]{4,64}", prefix):
            raise NodeStoreError(f"not a node hash or hash prefix (4-64 hex digits): {prefix!r}")
        found: list[str] = []
        for candidate in self._hashes_from(prefix):
            found.append(candidate)
            if len(found) > 1:
                raise NodeStoreError(f"hash prefix {prefix} is ambiguous")
        if not found:
            raise NodeNotFoundError(f"no node {prefix} in the store", prefix)
        return found[0]

    def ancestry(self, node_hash_hex: str) -> Ancestry:
        """Walk from a node to its root (tapes ``AncestryChain``), never looping.

        Args:
            node_hash_hex: 64-char lowercase hex hash of a stored node.

        Returns:
            An :class:`Ancestry`, node first; its ``missing_parent`` or ``cycle`` says why the
            walk stopped short of a root, if it did.

        Raises:
            NodeNotFoundError: no node is stored under ``node_hash_hex``.
        """
        node = self.get(node_hash_hex)
        if node is None:
            raise NodeNotFoundError(f"no node {node_hash_hex!r} in the store", node_hash_hex)
        chain = [node]
        seen = {node.hash}
        while node.parent_hash:
            parent = self.get(node.parent_hash)
            if parent is None:
                return Ancestry(tuple(chain), missing_parent=node.parent_hash)
            if parent.hash in seen:
                return Ancestry(tuple(chain), cycle=True)
            seen.add(parent.hash)
            chain.append(parent)
            node = parent
        return Ancestry(tuple(chain))

    def load_dag(self, node_hash_hex: str) -> Dag:
        """A single-rooted :class:`~merkle_memory.dag.Dag` around one node (tapes ``LoadDag``).

        The DAG holds the node's ancestry, root first, then every descendant of the node in
        pre-order (children in insertion order). Siblings off the path are not loaded.

        Raises:
            NodeNotFoundError: no node is stored under ``node_hash_hex``.
            NodeStoreError: the ancestry stops at a missing parent or runs into a cycle.
        """
        found = self.ancestry(node_hash_hex)
        if found.missing_parent is not None:
            raise NodeStoreError(
                f"ancestry of {node_hash_hex} is incomplete: parent "
                f"{found.missing_parent} is missing"
            )
        if found.cycle:
            raise NodeStoreError(f"ancestry of {node_hash_hex} runs into a cycle")
        dag = Dag()
        for node in reversed(found.nodes):
            dag.add(node)
        seen = {node.hash for node in found.nodes}
        stack = list(reversed(self.children(node_hash_hex)))
        while stack:
            node = stack.pop()
            if node.hash in seen:
                continue
            seen.add(node.hash)
            dag.add(node)
            stack.extend(reversed(self.children(node.hash)))
        return dag


class MemoryNodeStore(NodeStore):
    """A node store held in this process's memory (dicts, insertion-ordered)."""

    def __init__(self, nodes: Iterable[Node] = ()) -> None:
        """Create a store, optionally filled with ``nodes`` (parents first or not)."""
        self._nodes: dict[str, Node] = {}
        self._children: dict[str, list[str]] = {}
        self.put_many(nodes)

    def put(self, node: Node) -> bool:
        """See :meth:`NodeStore.put`."""
        if not isinstance(node, Node):
            raise NodeStoreError(f"can only store a Node, not {type(node).__name__}")
        if node.hash in self._nodes:
            return False
        self._nodes[node.hash] = node
        if node.parent_hash:
            self._children.setdefault(node.parent_hash, []).append(node.hash)
        return True

    def get(self, node_hash_hex: str) -> Node | None:
        """See :meth:`NodeStore.get`."""
        return self._nodes.get(node_hash_hex)

    def children(self, node_hash_hex: str) -> list[Node]:
        """See :meth:`NodeStore.children`."""
        return [self._nodes[h] for h in self._children.get(node_hash_hex, ())]

    def roots(self) -> list[Node]:
        """See :meth:`NodeStore.roots`."""
        return [n for n in self._nodes.values() if not n.parent_hash]

    def leaves(self) -> list[Node]:
        """See :meth:`NodeStore.leaves`."""
        return [n for n in self._nodes.values() if n.hash not in self._children]

    def __iter__(self) -> Iterator[Node]:
        return iter(list(self._nodes.values()))

    def __len__(self) -> int:
        return len(self._nodes)

    def rows(self) -> Iterator[StoredRow]:
        """See :meth:`NodeStore.rows`."""
        for node in list(self._nodes.values()):
            yield StoredRow(node.hash, node.parent_hash, node.bucket.to_dict(), node.bucket.role)


def open_store(path: str | Path | None, *, create: bool = True) -> NodeStore:
    """Open a node store: SQLite at ``path``, or a fresh in-memory store for ``None``.

    Args:
        path: the SQLite file, or ``None``.
        create: create the file (with its schema) when it is missing or empty; when
            ``False`` a missing file, or one without the node store schema, is an error and
            is never written to.

    Raises:
        NodeStoreError: the file is missing or has no schema (``create=False``), or is not a
            node store this library can use.
    """
    if path is None:
        return MemoryNodeStore()
    from ._sqlite_store import SQLiteNodeStore

    return SQLiteNodeStore(path, create=create)


# --- verification ---------------------------------------------------------------------------


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
class StoreReport:
    """What :func:`verify_store` found (``dag verify --json`` prints :meth:`to_dict`).

    Attributes:
        nodes: number of stored nodes checked.
        roots: number of stored nodes without a parent.
        mismatches: nodes whose hash does not match their stored bucket and parent.
        dangling: nodes whose parent is absent.
        cycles: each cycle of parent links, as the hashes on it (starting from the node met
            first in insertion order).
    """

    nodes: int
    roots: int
    mismatches: tuple[HashMismatch, ...]
    dangling: tuple[Dangling, ...]
    cycles: tuple[tuple[str, ...], ...]

    @property
    def ok(self) -> bool:
        """``True`` when there is no mismatch, no dangling parent and no cycle."""
        return not (self.mismatches or self.dangling or self.cycles)

    def to_dict(self) -> dict[str, Any]:
        """``{"ok", "nodes", "roots", "mismatches": [{"hash", "computed", "reason"}],
        "dangling": [{"hash", "parent_hash"}], "cycles": [[hash, ...]]}``."""
        return {
            "ok": self.ok,
            "nodes": self.nodes,
            "roots": self.roots,
            "mismatches": [
                {"hash": m.hash, "computed": m.computed, "reason": m.reason}
                for m in self.mismatches
            ],
            "dangling": [{"hash": d.hash, "parent_hash": d.parent_hash} for d in self.dangling],
            "cycles": [list(c) for c in self.cycles],
        }


def _recompute(row: StoredRow) -> HashMismatch | None:
    if not _HEX64.fullmatch(row.hash):
        return HashMismatch(row.hash, None, "stored hash is not 64-char lowercase hex")
    if row.parent_hash is not None and not _HEX64.fullmatch(row.parent_hash):
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


def verify_store(store: NodeStore) -> StoreReport:
    """Recompute every stored node hash and check every parent link (``dag verify``).

    Holds one ``hash -> parent`` map in memory (about 150 bytes per node); buckets are read
    one at a time.

    Returns:
        A :class:`StoreReport`; ``report.ok`` is ``False`` when any node's hash differs from
        ``node_hash(stored bucket, stored parent)``, any parent is absent, or parent links
        form a cycle.

    Raises:
        NodeStoreError: the store itself cannot be read.
    """
    parents: dict[str, str | None] = {}
    mismatches: list[HashMismatch] = []
    roots = 0
    for row in store.rows():
        parents[row.hash] = row.parent_hash or None
        roots += not row.parent_hash
        problem = _recompute(row)
        if problem is not None:
            mismatches.append(problem)
    dangling = [Dangling(h, p) for h, p in parents.items() if p is not None and p not in parents]
    return StoreReport(
        nodes=len(parents),
        roots=roots,
        mismatches=tuple(mismatches),
        dangling=tuple(dangling),
        cycles=tuple(_find_cycles(parents)),
    )

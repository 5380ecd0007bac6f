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
stored bucket, reads every row back as ``get`` does, and reports mismatches, unreadable rows,
dangling parents and cycles.
"""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import NodeNotFoundError, NodeStoreError
from ._node import Dag, Node
from ._store_verify import Dangling, HashMismatch, StoreReport, Unreadable, verify_store

__all__ = [
    "Ancestry",
    "Dangling",
    "HashMismatch",
    "MemoryNodeStore",
    "NodeStore",
    "StoreReport",
    "StoredRow",
    "Unreadable",
    "open_store",
    "verify_store",
]


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
        problem: why :meth:`NodeStore.get` cannot read this row back as a node (a column that
            does not parse or has the wrong shape: metadata, bucket, hash, parent hash), or
            why the row disagrees with itself (a stored ``role`` that is not the bucket's);
            ``None`` for a sound row.
    """

    hash: str
    parent_hash: str | None
    bucket: Any
    role: str = "?"
    problem: str | None = None


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
        NodeStoreError: ``path`` is neither a ``str``, an ``os.PathLike`` nor ``None`` (nothing
            is created), the file is missing or has no schema (``create=False``), or is not a
            node store this library can use.
    """
    if path is None:
        return MemoryNodeStore()
    if not isinstance(path, str | os.PathLike):
        raise NodeStoreError(
            f"node store path must be a str, an os.PathLike or None, not {type(path).__name__}"
        )
    from ._sqlite import SQLiteNodeStore

    return SQLiteNodeStore(path, create=create)

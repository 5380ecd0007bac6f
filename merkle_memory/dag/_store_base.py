"""Private: the node-store interface, :class:`NodeStore`, and the values it returns.

The bottom of the node-store part of :mod:`merkle_memory.dag` (public face:
:mod:`merkle_memory.dag.store`): the in-memory, SQLite and PostgreSQL stores implement
:class:`NodeStore`, and ``verify_store`` reads any store through :meth:`NodeStore.rows`.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from .. import canonical
from ..errors import MerkleMemoryError, NodeNotFoundError, NodeStoreError
from ._graph import Dag
from ._node import Bucket, Node

__all__ = ["Ancestry", "NodeStore", "StoredRow"]


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
        pruned: the node's content was forgotten (:meth:`NodeStore.forget`): its bucket
            holds no content, so its hash is kept as stored, not recomputed.
    """

    hash: str
    parent_hash: str | None
    bucket: Any
    role: str = "?"
    problem: str | None = None
    pruned: bool = False


class NodeStore(ABC):
    """Interface of a node store (DESIGN section 3; tapes ``pkg/storage``).

    A store keeps :class:`~merkle_memory.dag.Node` values by hash, in insertion order. An
    implementation provides the primitives (the abstract methods: ``put``, ``get``,
    ``children``, ``roots``, ``leaves``, ``__iter__``, ``__len__`` and ``rows``, every list in
    insertion order); the walks (:meth:`ancestry`, :meth:`load_dag`, :meth:`resolve`) are
    written once here on top of them. An implementation may override :meth:`put_many` (to
    make it one transaction), :meth:`hashes_with_prefix` and ``__contains__`` (to answer from
    an index), and :meth:`close`.

    A store holds whatever was put in it; :func:`~merkle_memory.dag.store.verify_store`
    checks it through :meth:`rows`.
    """

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

        The SQLite and PostgreSQL stores do this in one transaction: all or nothing.

        Raises:
            NodeStoreError: the store cannot be written (nothing of this call is kept).
        """
        return sum(1 for node in nodes if self.put(node))

    def forget(self, node_hash_hex: str, reason: str = "") -> bool:
        """Replace a node's content by nothing, keeping its hash, its parent link and its
        children (issue 20): the bucket keeps its ``type`` and ``role`` with an empty
        ``content``; metadata is kept. The node is then *pruned*: ``get`` returns it with no
        content, :func:`~merkle_memory.dag.store.verify_store` reports it as ``pruned``
        instead of recomputing its hash, and descendants keep their ids (each hash commits
        to its parent's hash, which stays). Putting the node again changes nothing (``put``
        is a no-op for a known hash).

        Args:
            node_hash_hex: the node's full 64-char hash.
            reason: why, kept with the marker (free text, may be empty).

        Returns:
            ``True`` when pruned now, ``False`` when it already was.

        Raises:
            NodeNotFoundError: no such node.
            NodeStoreError: the store cannot forget (this default), or cannot be written.
        """
        raise NodeStoreError(f"{type(self).__name__} cannot forget nodes")

    def is_pruned(self, node_hash_hex: str) -> bool:
        """Whether the node's content was forgotten (:meth:`forget`); ``False`` by default."""
        return False

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release the store's resources (a no-op for the in-memory store)."""

    def __enter__(self) -> NodeStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def hashes_with_prefix(self, prefix: str) -> Iterator[str]:
        """The stored hashes that start with ``prefix``, for :meth:`resolve`.

        The default scans :meth:`rows`; a store with an index on the hash answers from it.

        Args:
            prefix: 4 to 64 lowercase hex characters (checked by :meth:`resolve`).
        """
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
        for candidate in self.hashes_with_prefix(prefix):
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


def row_to_node(row: tuple[Any, ...]) -> Node:
    """The node of a stored row ``(hash, parent_hash, role, bucket, metadata)`` of either SQL
    store (SQLite, PostgreSQL), as their ``get`` reads it (the ``role`` column is not read:
    the bucket holds the role).

    Raises:
        NodeStoreError: a column cannot be read (``... cannot be read: <column>: <why>``).
    """
    node_hex, parent, _role, bucket, metadata = row
    column = "bucket"
    try:
        parsed = Bucket.from_dict(cast("Any", canonical.loads(bucket)))  # it checks the type
        column = "metadata"
        meta = cast("Any", canonical.loads(metadata))  # Node checks it is an object
        column = "row"  # hash and parent hash shapes, metadata an object
        return Node(hash=node_hex, parent_hash=parent or None, bucket=parsed, metadata=meta)
    except MerkleMemoryError as exc:
        raise NodeStoreError(f"stored node {node_hex!r} cannot be read: {column}: {exc}") from exc


def row_problem(row: tuple[Any, ...]) -> str | None:
    """Why an SQL store's ``get`` cannot read a stored row, or why its ``role`` column
    disagrees with its bucket; ``None`` for a sound row."""
    try:
        node = row_to_node(row)
    except NodeStoreError as exc:  # the reason without the "stored node ..." prefix
        return str(exc).removeprefix(f"stored node {row[0]!r} cannot be read: ")
    role = row[2]
    if role != node.bucket.role:
        return f"stored role {role!r} differs from the bucket's role {node.bucket.role!r}"
    return None


def stored_row(row: tuple[Any, ...], pruned: bool) -> StoredRow:
    """What ``rows()`` gives for one stored row ``(hash, parent_hash, role, bucket,
    metadata)`` of either store: the bucket parsed (``None`` when it does not parse) and
    :func:`row_problem`'s verdict."""
    node_hex, parent, role, bucket, _metadata = row
    try:
        parsed = canonical.loads(bucket)
    except MerkleMemoryError:
        parsed = None
    return StoredRow(
        str(node_hex),
        str(parent) if parent else None,
        parsed,
        str(role),
        problem=row_problem(row),
        pruned=pruned,
    )

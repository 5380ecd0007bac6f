"""Private: the in-memory DAG index behind ``dag.Dag`` and ``dag.Forest`` (tapes ``dag.go``).

Every walk here is iterative: a conversation is a long chain, and recursion would hit Python's
stack limit after about a thousand turns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ..errors import DagError

if TYPE_CHECKING:
    from ._node import Bucket, Node

__all__ = ["Dag", "DagNode", "Forest"]


class DagNode:
    """A node placed in a :class:`Dag` or :class:`Forest`, with links to parent and children.

    Attributes:
        node: the :class:`~merkle_memory.dag.Node`.
        parent: the parent's ``DagNode``, or ``None`` for a root.
        children: child ``DagNode`` objects in insertion order (do not modify; use ``add``).
    """

    __slots__ = ("children", "node", "parent")

    def __init__(self, node: Node, parent: DagNode | None) -> None:
        self.node = node
        self.parent = parent
        self.children: list[DagNode] = []

    @property
    def hash(self) -> str:
        """The node id, 64-char lowercase hex."""
        return self.node.hash

    @property
    def parent_hash(self) -> str | None:
        """The parent's id, or ``None`` for a root."""
        return self.node.parent_hash

    @property
    def bucket(self) -> Bucket:
        """The node's message."""
        return self.node.bucket

    def is_leaf(self) -> bool:
        """Whether the node has no children."""
        return not self.children

    def is_branching(self) -> bool:
        """Whether the node has more than one child (a rewind or fork point)."""
        return len(self.children) > 1

    def __repr__(self) -> str:
        return f"DagNode({self.hash[:12]}, children={len(self.children)})"


class _Index:
    """Nodes by hash, in insertion order, with the shared tapes semantics."""

    _single_root: bool = False

    def __init__(self) -> None:
        self._nodes: dict[str, DagNode] = {}
        self._roots: list[DagNode] = []

    def add(self, node: Node) -> DagNode:
        """Add ``node`` under its parent and return its ``DagNode`` (tapes ``AddNode``).

        A node whose hash is already present is not added again: the existing ``DagNode`` is
        returned, with no check on its parent (ids are content addresses).

        Raises:
            DagError: ``node`` is ``None``, its parent is not in the index, or (single-rooted
                :class:`Dag` only) it is a second root.
        """
        if node is None:
            raise DagError("cannot add None to a DAG")
        known = self._nodes.get(node.hash)
        if known is not None:
            return known
        parent: DagNode | None = None
        if node.parent_hash is None:
            if self._single_root and self._roots:
                raise DagError(
                    f"the DAG already has a root ({self._roots[0].hash}); "
                    f"{node.hash} would be a second one",
                    node.hash,
                )
        else:
            parent = self._nodes.get(node.parent_hash)
            if parent is None:
                raise DagError(
                    f"parent {node.parent_hash} of node {node.hash} is not in the DAG", node.hash
                )
        placed = DagNode(node, parent)
        self._nodes[node.hash] = placed
        if parent is None:
            self._roots.append(placed)
        else:
            parent.children.append(placed)
        return placed

    def get(self, node_hash: str) -> DagNode | None:
        """The ``DagNode`` with id ``node_hash``, or ``None`` if unknown."""
        return self._nodes.get(node_hash)

    def __contains__(self, node_hash: object) -> bool:
        return node_hash in self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self) -> Iterator[DagNode]:
        """Every ``DagNode`` in insertion order."""
        return iter(list(self._nodes.values()))

    def size(self) -> int:
        """The number of distinct nodes."""
        return len(self._nodes)

    def ancestors(self, node_hash: str) -> list[DagNode] | None:
        """The path from ``node_hash`` up to its root: the node first, the root last.

        Returns ``None`` if ``node_hash`` is unknown (tapes ``Ancestors``).
        """
        current = self._nodes.get(node_hash)
        if current is None:
            return None
        path: list[DagNode] = []
        while current is not None:
            path.append(current)
            current = current.parent
        return path

    def descendants(self, node_hash: str) -> list[DagNode] | None:
        """Every node below ``node_hash`` (not itself), pre-order, children in insertion order.

        Returns ``[]`` for a leaf and ``None`` if ``node_hash`` is unknown (tapes
        ``Descendants``).
        """
        start = self._nodes.get(node_hash)
        if start is None:
            return None
        out: list[DagNode] = []
        stack = list(reversed(start.children))
        while stack:
            current = stack.pop()
            out.append(current)
            stack.extend(reversed(current.children))
        return out

    def leaves(self) -> list[DagNode]:
        """Nodes without children, in insertion order."""
        return [n for n in self._nodes.values() if not n.children]

    def branch_points(self) -> list[DagNode]:
        """Nodes with more than one child, in insertion order."""
        return [n for n in self._nodes.values() if len(n.children) > 1]

    def is_branching(self) -> bool:
        """Whether any node has more than one child."""
        return any(len(n.children) > 1 for n in self._nodes.values())

    def walk(self, callback: Callable[[DagNode], bool]) -> None:
        """Visit nodes pre-order from the root(s) (roots and children in insertion order).

        The walk stops as soon as ``callback`` returns ``False`` (tapes ``Walk``); an exception
        raised by ``callback`` stops it and propagates. An empty DAG never calls ``callback``.
        """
        stack = list(reversed(self._roots))
        while stack:
            current = stack.pop()
            if not callback(current):
                return
            stack.extend(reversed(current.children))


class Dag(_Index):
    """A single-rooted conversation DAG with tapes ``merkle.Dag`` semantics.

    ``add`` is a no-op for a known hash and raises :class:`~merkle_memory.errors.DagError` for
    ``None``, an unknown parent or a second root. Unlike tapes, ``leaves()`` and
    ``branch_points()`` come in insertion order.
    """

    _single_root = True

    @property
    def root(self) -> DagNode | None:
        """The root, or ``None`` while the DAG is empty."""
        return self._roots[0] if self._roots else None


class Forest(_Index):
    """Like :class:`Dag`, but with any number of roots (e.g. every conversation of a set of
    transcripts, with sidechains and compactions as their own roots)."""

    def roots(self) -> list[DagNode]:
        """Root nodes in insertion order."""
        return list(self._roots)

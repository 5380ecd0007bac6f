"""Private: :class:`MemoryNodeStore`, the node store held in this process's memory."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator

from ..errors import NodeNotFoundError, NodeStoreError
from ._node import Node
from ._store_base import NodeStore, StoredRow

__all__ = ["MemoryNodeStore"]


class MemoryNodeStore(NodeStore):
    """A node store held in this process's memory (dicts, insertion-ordered)."""

    def __init__(self, nodes: Iterable[Node] = ()) -> None:
        """Create a store, optionally filled with ``nodes`` (parents first or not)."""
        self._nodes: dict[str, Node] = {}
        self._children: dict[str, list[str]] = {}
        self._pruned: dict[str, str] = {}
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
            yield StoredRow(
                node.hash,
                node.parent_hash,
                node.bucket.to_dict(),
                node.bucket.role,
                pruned=node.hash in self._pruned,
            )

    def forget(self, node_hash_hex: str, reason: str = "") -> bool:
        """See :meth:`NodeStore.forget`: the node is replaced by one with no content."""
        node = self._nodes.get(node_hash_hex)
        if node is None:
            raise NodeNotFoundError(f"no node {node_hash_hex} in the store", node_hash_hex)
        if node_hash_hex in self._pruned:
            return False
        empty = dataclasses.replace(node.bucket, content=())
        self._nodes[node_hash_hex] = Node(node.hash, node.parent_hash, empty, node.metadata)
        self._pruned[node_hash_hex] = str(reason)
        return True

    def is_pruned(self, node_hash_hex: str) -> bool:
        """See :meth:`NodeStore.is_pruned`."""
        return node_hash_hex in self._pruned

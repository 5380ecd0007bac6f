"""Conversation turns as a Merkle DAG: buckets, nodes, their hashes, graphs and node stores.

A :class:`Node` is one message of a conversation (a :class:`Bucket` of :class:`ContentBlock`)
plus the hash of its parent; its id commits to the whole conversation before it, and harness
noise removed by :func:`~merkle_memory.projection.project_content` does not change it
(DESIGN section 3, tapes ``pkg/merkle``). :class:`Dag` and :class:`Forest` index nodes in
memory; a :class:`NodeStore` keeps them between imports (:mod:`merkle_memory.dag.store`).

Quick start::

    from merkle_memory.dag import Bucket, ContentBlock, Node, open_store
    root = Node.create(Bucket("message", "user", [ContentBlock("text", text="hi")]))
    with open_store("nodes.db") as store:
        store.put(root)
        store.load_dag(root.hash).root.hash == root.hash

Layers inside the package (each imports only those before it): ``_node`` (Bucket, Node,
hashes), ``_graph`` (Dag, Forest), ``_store_base`` (the NodeStore interface), ``_archive``
(ArchiveStore: the ``dag sync`` archive and pruned markers, for both databases),
``_memory_store``, ``_sqlite`` and ``_postgres`` (the implementations), ``_store_verify``
(verify_store), ``store`` (the public face of node stores, with ``open_store``).
"""

from ..blocks import ContentBlock
from ._graph import Dag, DagNode, Forest
from ._node import Bucket, Node, node_digest, node_hash
from .store import MemoryNodeStore, NodeStore, StoreReport, open_store, verify_store

__all__ = [
    "Bucket",
    "ContentBlock",
    "Dag",
    "DagNode",
    "Forest",
    "MemoryNodeStore",
    "Node",
    "NodeStore",
    "StoreReport",
    "node_digest",
    "node_hash",
    "open_store",
    "verify_store",
]

"""Conversation turns as a Merkle DAG: buckets, nodes, their hashes, graphs and node stores.

A :class:`Node` is one message of a conversation (a :class:`Bucket` of :class:`ContentBlock`)
plus the hash of its parent; its id commits to the whole conversation before it, and harness
noise removed by :func:`~merkle_memory.projection.project_content` does not change it
(DESIGN section 3, tapes ``pkg/merkle``). :class:`Dag` and :class:`Forest` index nodes in
memory; :mod:`merkle_memory.dag.store` keeps them in a node store.
"""

from ..blocks import ContentBlock
from ._graph import Dag, DagNode, Forest
from ._node import Bucket, Node, node_digest, node_hash

__all__ = [
    "Bucket",
    "ContentBlock",
    "Dag",
    "DagNode",
    "Forest",
    "Node",
    "node_digest",
    "node_hash",
]

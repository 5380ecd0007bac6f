"""The id index: memory id -> where its latest entry's line starts, in O(log n) reads (private).

Derived data kept beside the Merkle sidecar (the folder store: ``ledger.ids``) and maintained by
the same sync that reads every new ledger line (``_treesync.scan``), so that proving a record
by its id never scans the ledger (``proofs.prove_inclusion``). Trusted for nothing: every
bucket read is checked against the root recorded in the sidecar's state, itself computed from
the ledger, and the entry found is checked against the ledger and the sidecar before a proof
is made from it (``docs/FORMAT.md`` section 7.1, ``docs/THREAT_MODEL.md``).

Layout (``B`` buckets, a power of two):

* ``B`` buckets of 4,096 bytes, each 256 slots of 16 bytes: the **key** (the first 8 bytes of
  the SHA-256 of the id's UTF-8 bytes) and the **value** (the byte offset in the ledger where
  the line of the id's latest entry starts, plus one, 8 bytes big-endian; 0: an empty slot).
  An id's home bucket is its key (big-endian) modulo ``B``; a full bucket continues into the
  next one (modulo ``B``). Slots fill from the first, never emptied, so a bucket whose last
  slot is empty ends the search;
* then the **digest tree** over the buckets, ``2B - 1`` digests of 32 bytes in heap order
  (node ``i``'s children are ``2i`` and ``2i + 1``; node 1, the root, first; bucket ``j`` is
  node ``B + j``): a bucket's digest is ``SHA-256(0x00 || bucket)``, a node's
  ``SHA-256(0x01 || left || right)``.

The sidecar's state records ``ids_buckets``, ``ids_count`` (distinct ids) and ``ids_root``
(hex). A lookup reads one bucket (or the next few) and the ``log2 B`` sibling digests of each,
recomputes the root and compares it with the recorded one. An update checks every bucket it
touches the same way first, then writes the buckets and the digests on their paths in place.
When the ids would fill more than half of the slots, the index is built anew, twice as large.
"""

from __future__ import annotations

import hashlib
import hmac
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from .storage import IndexFile

__all__ = [
    "BUCKET_SIZE",
    "IdsState",
    "IndexMismatch",
    "Table",
    "buckets_for",
    "build",
    "id_key",
    "lookup",
    "update",
]

BUCKET_SIZE: Final = 4096
SLOT_SIZE: Final = 16
SLOTS: Final = BUCKET_SIZE // SLOT_SIZE
DIGEST: Final = 32
_EMPTY_VALUE: Final = bytes(8)


class IndexMismatch(Exception):
    """A part of the index read does not match the recorded root (never escapes ``proofs``)."""


@dataclass(frozen=True, slots=True)
class IdsState:
    """What the sidecar's state records about the index.

    Attributes:
        buckets: number of buckets (a power of two, at least 1).
        count: number of distinct ids (keys) it holds.
        root: the 32-byte root of its digest tree.
    """

    buckets: int
    count: int
    root: bytes


def id_key(memory_id: str | bytes) -> bytes:
    """The 8-byte key of an id (``str``, or the UTF-8 bytes of one as a line holds them)."""
    if isinstance(memory_id, str):
        memory_id = memory_id.encode("utf-8", "surrogatepass")
    return hashlib.sha256(memory_id).digest()[:8]


def buckets_for(ids: int) -> int:
    """The number of buckets for about ``ids`` distinct ids: the smallest power of two that
    keeps them within half of the slots."""
    buckets = 1
    while buckets * SLOTS < 2 * ids:
        buckets *= 2
    return buckets


def _leaf(bucket: bytes | bytearray | memoryview) -> bytes:
    digest = hashlib.sha256(b"\x00")
    digest.update(bucket)
    return digest.digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _find(bucket: bytes | bytearray, key: bytes) -> int:
    """The slot index of ``key`` in ``bucket``, or -1."""
    at = bucket.find(key)
    while at >= 0:
        if at % SLOT_SIZE == 0:
            return at // SLOT_SIZE
        at = bucket.find(key, at + 1)
    return -1


def _fill(bucket: bytes | bytearray) -> int:
    """How many slots are used (they form a prefix: a binary search on the values)."""
    low, high = 0, SLOTS
    while low < high:
        mid = (low + high) // 2
        at = mid * SLOT_SIZE + 8
        if bucket[at : at + 8] == _EMPTY_VALUE:
            high = mid
        else:
            low = mid + 1
    return low


class Table:
    """An index built in memory (a full build), then written as one file."""

    def __init__(self, buckets: int) -> None:
        self._reset(buckets)

    def _reset(self, buckets: int) -> None:
        self.buckets = buckets
        self.data = bytearray(buckets * BUCKET_SIZE)
        self.used = array("H", bytes(2 * buckets))
        self.count = 0

    def put(self, key: bytes, offset: int) -> None:
        """Record that the latest entry of the id with ``key`` starts at byte ``offset``."""
        if 2 * (self.count + 1) > self.buckets * SLOTS:
            self._grow()
        mask = self.buckets - 1
        home = int.from_bytes(key, "big") & mask
        value = (offset + 1).to_bytes(8, "big")
        data = self.data
        for step in range(self.buckets):
            j = (home + step) & mask
            start = j * BUCKET_SIZE
            used = self.used[j]
            at = data.find(key, start, start + used * SLOT_SIZE)
            while at >= 0 and (at - start) % SLOT_SIZE:
                at = data.find(key, at + 1, start + used * SLOT_SIZE)
            if at >= 0:
                data[at + 8 : at + 16] = value
                return
            if used < SLOTS:
                at = start + used * SLOT_SIZE
                data[at : at + 16] = key + value
                self.used[j] = used + 1
                self.count += 1
                return
        raise AssertionError("unreachable: the table is at most half full")  # pragma: no cover

    def _grow(self) -> None:
        old, used = self.data, self.used
        self._reset(self.buckets * 2)
        for j, count in enumerate(used):
            start = j * BUCKET_SIZE
            for at in range(start, start + count * SLOT_SIZE, SLOT_SIZE):
                self.put(bytes(old[at : at + 8]), int.from_bytes(old[at + 8 : at + 16], "big") - 1)

    def file(self) -> tuple[bytearray, IdsState]:
        """The index file's bytes and its state (the table's own buffer, extended in place
        with the digest tree: the table is not used afterwards)."""
        buckets, data = self.buckets, self.data
        view = memoryview(data)
        tree = [b""] * (2 * buckets)
        for j in range(buckets):
            tree[buckets + j] = _leaf(view[j * BUCKET_SIZE : (j + 1) * BUCKET_SIZE])
        view.release()
        for i in range(buckets - 1, 0, -1):
            tree[i] = _node(tree[2 * i], tree[2 * i + 1])
        data += b"".join(tree[1:])
        return data, IdsState(buckets, self.count, tree[1])


def build(found: Iterable[tuple[bytes, int]], expected: int) -> tuple[bytearray, IdsState]:
    """The index of ``(key, line offset)`` pairs in ledger order (the latest wins), sized for
    about ``expected`` distinct ids (it grows when there are more)."""
    table = Table(buckets_for(expected))
    for key, offset in found:
        table.put(key, offset)
    return table.file()


class _Reader:
    """Reads buckets and digests of an index file, checking buckets against the root."""

    def __init__(self, file: IndexFile, ids: IdsState) -> None:
        self.file, self.ids = file, ids
        self.digests: dict[int, bytes] = {}  # node -> digest as read (original values)
        if file.size() != ids.buckets * BUCKET_SIZE + (2 * ids.buckets - 1) * DIGEST:
            raise IndexMismatch("the index is not the size its state records")

    def digest(self, node: int) -> bytes:
        found = self.digests.get(node)
        if found is None:
            at = self.ids.buckets * BUCKET_SIZE + (node - 1) * DIGEST
            found = self.file.read(at, DIGEST)
            self.digests[node] = found
        return found

    def bucket(self, j: int) -> bytes:
        """Bucket ``j``, after checking it (and the digests of its path) against the root."""
        data = self.file.read(j * BUCKET_SIZE, BUCKET_SIZE)
        digest, node = _leaf(data), self.ids.buckets + j
        while node > 1:
            sibling = self.digest(node ^ 1)
            digest = _node(digest, sibling) if node % 2 == 0 else _node(sibling, digest)
            node //= 2
        if len(data) != BUCKET_SIZE or not hmac.compare_digest(digest, self.ids.root):
            raise IndexMismatch(f"bucket {j} does not match the recorded root")
        return data


def lookup(file: IndexFile, ids: IdsState, memory_id: str) -> int | None:
    """Where the line of the latest entry of ``memory_id`` starts (byte offset), or ``None``
    when the index holds no entry of it.

    Raises:
        IndexMismatch: a bucket read does not match ``ids.root`` (or the file is not the size
            the state records).
    """
    reader = _Reader(file, ids)
    key = id_key(memory_id)
    mask = ids.buckets - 1
    home = int.from_bytes(key, "big") & mask
    for step in range(ids.buckets):
        bucket = reader.bucket((home + step) & mask)
        slot = _find(bucket, key)
        if slot >= 0:
            value = int.from_bytes(bucket[slot * SLOT_SIZE + 8 : (slot + 1) * SLOT_SIZE], "big")
            if value == 0:
                raise IndexMismatch("a key without a value")
            return value - 1
        if bucket[-8:] == _EMPTY_VALUE:
            return None
    raise IndexMismatch("every bucket is full")


def update(file: IndexFile, ids: IdsState, found: list[tuple[bytes, int]]) -> IdsState | None:
    """Add ``(key, line offset)`` pairs (ledger order) to the index in place, durably.

    Every bucket touched is checked against ``ids.root`` first; the buckets and the digests
    of their paths are then written, and the file flushed.

    Returns:
        The new state, or ``None`` when the ids would fill more than half of the slots (the
        caller builds a larger index; nothing was written).

    Raises:
        IndexMismatch: a bucket touched does not match ``ids.root`` (nothing was written).
        OSError: from the storage.
    """
    if not found:
        return ids
    reader = _Reader(file, ids)
    buckets, count = ids.buckets, ids.count
    mask = buckets - 1
    touched: dict[int, bytearray] = {}
    for key, offset in found:
        home = int.from_bytes(key, "big") & mask
        value = (offset + 1).to_bytes(8, "big")
        for step in range(buckets):
            j = (home + step) & mask
            bucket = touched.get(j)
            if bucket is None:
                bucket = touched[j] = bytearray(reader.bucket(j))
            slot = _find(bucket, key)
            if slot >= 0:
                bucket[slot * SLOT_SIZE + 8 : (slot + 1) * SLOT_SIZE] = value
                break
            used = _fill(bucket)
            if used < SLOTS:
                bucket[used * SLOT_SIZE : (used + 1) * SLOT_SIZE] = key + value
                count += 1
                break
        if 2 * count > buckets * SLOTS:
            return None
    new: dict[int, bytes] = {buckets + j: _leaf(bytes(b)) for j, b in touched.items()}
    level = set(new)
    while level - {1}:
        parents = {node // 2 for node in level if node > 1}
        for parent in parents:
            left, right = 2 * parent, 2 * parent + 1
            new[parent] = _node(
                new.get(left) or reader.digest(left), new.get(right) or reader.digest(right)
            )
        level = parents
    for j, bucket in sorted(touched.items()):
        file.write(j * BUCKET_SIZE, bytes(bucket))
    base = buckets * BUCKET_SIZE
    for node in sorted(new):
        file.write(base + (node - 1) * DIGEST, new[node])
    file.flush()
    return IdsState(buckets, count, new[1])

"""RFC 6962 Merkle tree hashing and the compact range (RFC 6962 §2.1, RFC 9162 §2.1).

Leaves are hashed ``SHA-256(0x00 || data)``, interior nodes ``SHA-256(0x01 || left || right)``
and the empty tree is ``SHA-256("")``. A tree of ``n > 1`` leaves splits at ``k``, the largest
power of two below ``n``; odd nodes are never duplicated, the right subtree is simply smaller.

Hashes are 32-byte ``bytes`` throughout; hex appears only at the edges (files, JSON, CLI).

Example::

    >>> from merkle_memory import rfc6962
    >>> cr = rfc6962.CompactRange()
    >>> for data in (b"a", b"b", b"c"):
    ...     cr.append(rfc6962.hash_leaf(data))
    >>> cr.root() == rfc6962.root([rfc6962.hash_leaf(d) for d in (b"a", b"b", b"c")])
    True
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from .errors import HashLengthError, IndexOutOfRangeError, ProofError

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "CompactRange",
    "check_hash",
    "hash_children",
    "hash_leaf",
    "largest_power_of_two_below",
    "root",
]

HASH_SIZE = 32
"""Size of every hash in bytes (SHA-256)."""

EMPTY_ROOT: bytes = hashlib.sha256(b"").digest()
"""Merkle Tree Hash of the empty tree, ``SHA-256("")`` (RFC 6962 §2.1), 32 bytes."""

_LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"
_sha256 = hashlib.sha256


def hash_leaf(data: bytes) -> bytes:
    """Return the RFC 6962 leaf hash ``SHA-256(0x00 || data)``, 32 bytes.

    Args:
        data: the leaf input, bytes-like (``bytes``, ``bytearray``, ``memoryview``); for a
            ledger entry: its canonical line without the newline.

    Raises:
        ProofError: ``data`` is not bytes-like (a ``str``, an ``int``, ``None``, ...).
    """
    try:
        return _sha256(_LEAF_PREFIX + data).digest()
    except TypeError:
        raise ProofError(
            f"leaf data must be bytes-like (bytes, bytearray, memoryview), "
            f"got {type(data).__name__}"
        ) from None


def hash_children(left: bytes, right: bytes) -> bytes:
    """Return the RFC 6962 interior node hash ``SHA-256(0x01 || left || right)``, 32 bytes.

    The raw hash function accepts children of any length (the published vectors include
    4-byte children); the proof verifiers are the ones that insist on 32-byte hashes.

    Args:
        left: the left child hash, bytes-like.
        right: the right child hash, bytes-like.

    Raises:
        HashLengthError: a child is not bytes-like (a ``str``, ``None``, ...).
    """
    try:
        return _sha256(_NODE_PREFIX + left + right).digest()
    except TypeError:
        bad = left if _is_bytes_like(right) else right
        raise HashLengthError(
            f"child hash must be bytes-like (bytes, bytearray, memoryview), "
            f"got {type(bad).__name__}"
        ) from None


def _is_bytes_like(value: object) -> bool:
    try:
        memoryview(value)  # type: ignore[arg-type]
    except TypeError:
        return False
    return True


def largest_power_of_two_below(n: int) -> int:
    """Return ``k``, the largest power of two strictly below ``n`` (RFC 6962 §2.1), ``n >= 2``."""
    return 1 << ((n - 1).bit_length() - 1)


def check_hash(value: object, what: str) -> bytes:
    """Return a 32-byte hash as ``bytes``; any bytes-like value (``bytes``, ``bytearray``,
    ``memoryview``) of 32 bytes is accepted and copied, the same everywhere.

    Args:
        value: the candidate hash.
        what: how the message names it (e.g. ``"leaf hash"``).

    Raises:
        HashLengthError: ``value`` is bytes-like but not 32 bytes long (the message names its
            length), or not bytes-like at all (the message names its type).
    """
    if type(value) is bytes and len(value) == HASH_SIZE:
        return value
    if not isinstance(value, bytes | bytearray | memoryview):
        raise HashLengthError(
            f"{what} must be {HASH_SIZE} bytes (bytes-like), got {type(value).__name__}"
        )
    data = bytes(value)
    if len(data) != HASH_SIZE:
        raise HashLengthError(
            f"{what} must be {HASH_SIZE} bytes, got {len(data)} ({type(value).__name__})"
        )
    return data


def root(leaf_hashes: Iterable[bytes]) -> bytes:
    """Return the Merkle Tree Hash (RFC 6962 §2.1) of a list of leaf hashes, 32 bytes.

    Args:
        leaf_hashes: 32-byte leaf hashes (``hash_leaf`` outputs) in leaf order.

    Returns:
        ``EMPTY_ROOT`` for no leaves, else the tree's root hash.

    Raises:
        ProofError: ``leaf_hashes`` is not iterable.
        HashLengthError: a leaf hash is not 32 bytes.
    """
    try:
        hashes = iter(leaf_hashes)
    except TypeError:
        raise ProofError(
            f"leaf_hashes must be an iterable of 32-byte hashes, not {type(leaf_hashes).__name__}"
        ) from None
    compact = CompactRange()
    for leaf_hash in hashes:
        compact.append(leaf_hash)
    return compact.root()


class CompactRange:
    """The right edge of a growing Merkle tree: the roots of its perfect subtrees.

    For a tree of ``size`` leaves the state is one 32-byte hash per set bit of ``size``
    (largest subtree first), so O(log n) memory; ``append`` costs O(1) hashes amortized and
    ``root`` O(log n). Serializable with ``to_bytes``/``from_bytes`` (8-byte big-endian size
    followed by the hashes) and ``to_dict``/``from_dict`` (``{"size", "hashes": [hex]}``).
    """

    __slots__ = ("_hashes", "_size")

    def __init__(self, size: int = 0, hashes: Sequence[bytes] = ()) -> None:
        """Create a compact range, empty by default.

        Args:
            size: number of leaves already covered, ``>= 0``.
            hashes: the perfect-subtree roots of those leaves, largest first, one per set bit
                of ``size``.

        Raises:
            IndexOutOfRangeError: ``size`` is negative or not an int.
            ProofError: the number of hashes does not match ``bin(size).count("1")``.
            HashLengthError: a hash is not 32 bytes.
        """
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise IndexOutOfRangeError(f"compact range size must be an int >= 0, got {size!r}")
        if len(hashes) != size.bit_count():
            raise ProofError(
                f"compact range of size {size} needs {size.bit_count()} hashes, got {len(hashes)}"
            )
        self._size = size
        self._hashes = [check_hash(h, "compact range hash") for h in hashes]

    @property
    def size(self) -> int:
        """Number of leaves appended so far."""
        return self._size

    @property
    def hashes(self) -> tuple[bytes, ...]:
        """The perfect-subtree roots, largest subtree first (32 bytes each)."""
        return tuple(self._hashes)

    def append(self, leaf_hash: bytes) -> None:
        """Append one leaf hash (32 bytes), merging completed perfect subtrees.

        Raises:
            HashLengthError: ``leaf_hash`` is not 32 bytes.
        """
        leaf_hash = check_hash(leaf_hash, "leaf hash")
        stack = self._hashes
        stack.append(leaf_hash)
        i = self._size
        while i & 1:
            right = stack.pop()
            stack[-1] = _sha256(_NODE_PREFIX + stack[-1] + right).digest()
            i >>= 1
        self._size += 1

    def extend(self, leaf_hashes: Iterable[bytes]) -> None:
        """Append every leaf hash of ``leaf_hashes`` in order (see ``append``)."""
        for leaf_hash in leaf_hashes:
            self.append(leaf_hash)

    def root(self) -> bytes:
        """Return the Merkle Tree Hash of the leaves appended so far (32 bytes)."""
        if not self._hashes:
            return EMPTY_ROOT
        stack = self._hashes
        node = stack[-1]
        for left in reversed(stack[:-1]):
            node = _sha256(_NODE_PREFIX + left + node).digest()
        return node

    def copy(self) -> CompactRange:
        """Return an independent copy of this compact range."""
        return CompactRange(self._size, self._hashes)

    def to_bytes(self) -> bytes:
        """Serialize as an 8-byte big-endian size followed by the 32-byte hashes."""
        return self._size.to_bytes(8, "big") + b"".join(self._hashes)

    @classmethod
    def from_bytes(cls, data: bytes) -> CompactRange:
        """Parse the ``to_bytes`` form.

        Raises:
            ProofError: wrong length for the size it states.
        """
        if len(data) < 8 or (len(data) - 8) % HASH_SIZE:
            raise ProofError(f"compact range bytes have a bad length {len(data)}")
        size = int.from_bytes(data[:8], "big")
        body = data[8:]
        hashes = [body[i : i + HASH_SIZE] for i in range(0, len(body), HASH_SIZE)]
        return cls(size, hashes)

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"size": int, "hashes": [64-char lowercase hex, ...]}``."""
        return {"size": self._size, "hashes": [h.hex() for h in self._hashes]}

    @classmethod
    def from_dict(cls, value: Any) -> CompactRange:
        """Parse the ``to_dict`` form.

        Raises:
            ProofError: not an object with an int ``size`` and a list of hex ``hashes``, or a
                hash count that does not match the size (``HashLengthError`` for a bad hash).
        """
        if not isinstance(value, dict) or set(value) != {"size", "hashes"}:
            raise ProofError("compact range must be an object with keys 'size' and 'hashes'")
        hashes = value["hashes"]
        if not isinstance(hashes, list) or not all(isinstance(h, str) for h in hashes):
            raise ProofError("compact range 'hashes' must be a list of hex strings")
        try:
            raw = [bytes.fromhex(h) for h in hashes]
        except ValueError as exc:
            raise ProofError(f"compact range hash is not hex: {exc}") from exc
        return cls(value["size"], raw)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CompactRange):
            return NotImplemented
        return self._size == other._size and self._hashes == other._hashes

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"CompactRange(size={self._size}, root={self.root().hex()})"

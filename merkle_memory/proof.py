"""RFC 6962 inclusion and consistency proofs: computing them and verifying them strictly.

Computing (RFC 6962 §2.1.1 ``PATH``, §2.1.2 ``SUBPROOF``): ``inclusion_proof`` and
``consistency_proof`` read leaf hashes from any sequence-like source (``__len__`` and
``__getitem__`` returning 32-byte hashes). Every hash in a proof is the root of a range that
splits into O(log n) *perfect* subtrees, and those pieces are shared across the levels of one
proof, so a proof needs O(log n) perfect-subtree roots. A source that also has
``perfect_root(level, index)`` (the root of leaves ``[index * 2**level, (index + 1) *
2**level)``, as ``treelog.TreeLog`` does from its stored interior nodes) serves each in O(1);
for a plain list they are hashed from the leaves (O(n) for the proof, like computing the root).

Verifying (after transparency-dev/merkle ``proof/verify.go`` and RFC 9162 §2.1.3.2/§2.1.4.2)
is strict: the index and sizes come from the caller and are never read from the proof; the
proof must have exactly the length the index and sizes require; every hash must be exactly
32 bytes; roots are compared with ``hmac.compare_digest``; failures raise ``ProofError``
subclasses, never return ``False``. Rules at the edges: inclusion needs ``0 <= index < size``
(so size 0 always fails); consistency fails when ``size1 > size2`` and always when
``size1 == 0`` (it proves nothing, even 0 -> 0); ``size1 == size2`` needs an empty proof and
equal roots.

Subtree proofs (what subtree cosignatures sign; after transparency-dev/merkle and the
``subtrees`` section of draft-ietf-plants-merkle-tree-certs): a *subtree* ``[start, end)`` is
valid when ``0 <= start < end`` and ``start`` is a multiple of the bit ceiling of
``end - start`` (the smallest power of two ``>= end - start``), so that it is the tree of the
leaves ``start..end-1`` hashed by RFC 6962 as if they were a tree of their own, and each of its
perfect pieces is a node of every tree that covers it. A subtree inclusion proof is the RFC 6962
inclusion proof of leaf ``index - start`` in that tree of ``end - start`` leaves. A subtree
consistency proof shows that the subtree's root is consistent with the root of a tree of
``tree_size >= end`` leaves: walking down from the tree's root, each node's sibling off the
path to the subtree is listed (deepest first); when the subtree is not itself a node of the tree
(it is not a perfect subtree and ends before the tree does), the path splits it and the proof
starts with the root of its right-most piece, so the verifier recomputes both the subtree's root
and the tree's root. Lengths are exact, as for the other proofs.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from .errors import IndexOutOfRangeError, ProofError, ProofLengthError, RootMismatchError
from .rfc6962 import check_hash, hash_children, largest_power_of_two_below

__all__ = [
    "LeafSource",
    "SubtreeSource",
    "check_subtree",
    "consistency_proof",
    "inclusion_proof",
    "root_from_inclusion_proof",
    "root_from_subtree_consistency_proof",
    "subtree_consistency_proof",
    "subtree_inclusion_proof",
    "subtree_root",
    "verify_consistency",
    "verify_inclusion",
    "verify_subtree_consistency",
    "verify_subtree_inclusion",
]


class LeafSource(Protocol):
    """A sequence-like source of 32-byte leaf hashes (a list, or a ``treelog.TreeLog``)."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int, /) -> bytes: ...


@runtime_checkable
class SubtreeSource(Protocol):
    """A leaf source that also serves perfect-subtree roots in O(1) (e.g. ``TreeLog``)."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int, /) -> bytes: ...

    def perfect_root(self, level: int, index: int) -> bytes:
        """Root of the ``2**level`` leaves starting at leaf ``index * 2**level``."""
        ...


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --- computing proofs ----------------------------------------------------------------------


def _range_hasher(source: LeafSource) -> Callable[[int, int], bytes]:
    """Return ``mth(start, end)`` = MTH of leaves ``[start, end)`` for RFC-aligned ranges.

    Ranges met in PATH/SUBPROOF start at a multiple of a power of two at least their length,
    so their MTH is the right-to-left fold of their perfect pieces (largest first). Pieces are
    memoized: within one proof the ragged right-edge ranges share them.
    """
    memo: dict[tuple[int, int], bytes] = {}
    fast = source.perfect_root if isinstance(source, SubtreeSource) else None

    def leaf(i: int) -> bytes:
        return check_hash(source[i], f"leaf hash {i} of the source")

    def perfect(level: int, index: int) -> bytes:
        key = (level, index)
        found = memo.get(key)
        if found is not None:
            return found
        if fast is not None:
            node = check_hash(fast(level, index), "perfect subtree root of the source")
        else:
            start = index << level
            layer = [leaf(i) for i in range(start, start + (1 << level))]
            while len(layer) > 1:
                layer = [hash_children(layer[j], layer[j + 1]) for j in range(0, len(layer), 2)]
            node = layer[0]
        memo[key] = node
        return node

    def mth(start: int, end: int) -> bytes:
        pieces: list[bytes] = []
        while start < end:
            level = (end - start).bit_length() - 1
            if start:
                level = min(level, (start & -start).bit_length() - 1)
            pieces.append(perfect(level, start >> level))
            start += 1 << level
        node = pieces[-1]
        for left in reversed(pieces[:-1]):
            node = hash_children(left, node)
        return node

    return mth


def _check_source_size(size: int, source: LeafSource) -> None:
    try:
        available = len(source)
    except TypeError:
        raise ProofError(
            "leaf_hashes must be a sequence of 32-byte leaf hashes or a leaf source, "
            f"not {type(source).__name__}"
        ) from None
    if size > available:
        raise IndexOutOfRangeError(f"tree size {size} exceeds the {available} leaves available")


def inclusion_proof(index: int, size: int, leaf_hashes: LeafSource) -> list[bytes]:
    """Return the inclusion proof of leaf ``index`` in the tree of the first ``size`` leaves.

    RFC 6962 §2.1.1 ``PATH(index, D[0:size])``, leaf sibling first, root child last.

    Args:
        index: 0-based leaf index, ``0 <= index < size``.
        size: tree size in leaves, at most ``len(leaf_hashes)``.
        leaf_hashes: source of 32-byte leaf hashes (see the module docstring).

    Returns:
        The audit path, a list of 32-byte hashes.

    Raises:
        IndexOutOfRangeError: ``index`` or ``size`` out of range.
        ProofError: ``leaf_hashes`` has no length (not a sequence or a leaf source).
        HashLengthError: the source returned a hash that is not 32 bytes.
    """
    if not (_is_int(index) and _is_int(size)) or not 0 <= index < size:
        raise IndexOutOfRangeError(f"leaf index {index!r} is not in a tree of size {size!r}")
    _check_source_size(size, leaf_hashes)
    mth = _range_hasher(leaf_hashes)
    path: list[bytes] = []
    start, n, m = 0, size, index
    while n > 1:
        k = largest_power_of_two_below(n)
        if m < k:
            path.append(mth(start + k, start + n))
            n = k
        else:
            path.append(mth(start, start + k))
            start, m, n = start + k, m - k, n - k
    path.reverse()
    return path


def consistency_proof(size1: int, size2: int, leaf_hashes: LeafSource) -> list[bytes]:
    """Return the consistency proof between the trees of the first ``size1`` and ``size2`` leaves.

    RFC 6962 §2.1.2 ``PROOF(size1, D[0:size2])``; empty when ``size1 == size2``.

    Args:
        size1: the older tree size, ``1 <= size1 <= size2``.
        size2: the newer tree size, at most ``len(leaf_hashes)``.
        leaf_hashes: source of 32-byte leaf hashes.

    Returns:
        A list of 32-byte hashes.

    Raises:
        IndexOutOfRangeError: ``size1 == 0`` (a proof from the empty tree proves nothing),
            ``size1 > size2``, or ``size2`` beyond the source.
        ProofError: ``leaf_hashes`` has no length (not a sequence or a leaf source).
        HashLengthError: the source returned a hash that is not 32 bytes.
    """
    if not (_is_int(size1) and _is_int(size2)) or not 0 < size1 <= size2:
        raise IndexOutOfRangeError(
            f"no consistency proof from size {size1!r} to size {size2!r} (need 0 < size1 <= size2)"
        )
    _check_source_size(size2, leaf_hashes)
    mth = _range_hasher(leaf_hashes)
    proof: list[bytes] = []
    start, m, n, whole = 0, size1, size2, True
    while m != n:
        k = largest_power_of_two_below(n)
        if m <= k:
            proof.append(mth(start + k, start + n))
            n = k
        else:
            proof.append(mth(start, start + k))
            start, m, n, whole = start + k, m - k, n - k, False
    if not whole:
        proof.append(mth(start, start + n))
    proof.reverse()
    return proof


# --- verifying proofs ----------------------------------------------------------------------


def _decompose(index: int, size: int) -> tuple[int, int]:
    """Split an inclusion proof of ``index`` in ``size`` into (inner, border) lengths."""
    inner = (index ^ (size - 1)).bit_length()
    border = (index >> inner).bit_count()
    return inner, border


def _check_proof(proof: Sequence[bytes], expected: int) -> list[bytes]:
    if isinstance(proof, bytes | bytearray | memoryview | str):
        raise ProofLengthError(
            f"proof must be a sequence of 32-byte hashes, not one {type(proof).__name__} object"
        )
    try:
        hashes = list(proof)
    except TypeError as exc:
        raise ProofLengthError("proof must be a sequence of 32-byte hashes") from exc
    if len(hashes) != expected:
        raise ProofLengthError(f"proof has {len(hashes)} hashes, expected {expected}")
    return [check_hash(h, f"proof hash {i}") for i, h in enumerate(hashes)]


def root_from_inclusion_proof(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes]
) -> bytes:
    """Return the root that ``proof`` leads to from ``leaf_hash`` at ``index`` in ``size``.

    RFC 9162 §2.1.3.2, with the exact length rule of transparency-dev/merkle.

    Args:
        leaf_hash: the 32-byte leaf hash.
        index: 0-based leaf index, from the caller.
        size: tree size in leaves, from the caller.
        proof: the audit path, leaf sibling first.

    Returns:
        The calculated 32-byte root.

    Raises:
        IndexOutOfRangeError: ``index >= size`` or ``index < 0`` (size 0 always fails).
        ProofLengthError: the proof is not exactly as long as ``index`` and ``size`` require,
            or is not a sequence of hashes (a ``str``/``bytes`` object is refused whole).
        HashLengthError: the leaf hash or a proof hash is not 32 bytes.
    """
    if not (_is_int(index) and _is_int(size)) or not 0 <= index < size:
        raise IndexOutOfRangeError(f"leaf index {index!r} is not in a tree of size {size!r}")
    node = check_hash(leaf_hash, "leaf hash")
    inner, border = _decompose(index, size)
    hashes = _check_proof(proof, inner + border)
    for i, sibling in enumerate(hashes[:inner]):
        left_sibling = (index >> i) & 1
        node = hash_children(sibling, node) if left_sibling else hash_children(node, sibling)
    for sibling in hashes[inner:]:
        node = hash_children(sibling, node)
    return node


def verify_inclusion(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Check that ``leaf_hash`` is leaf ``index`` of the tree of ``size`` leaves with ``root``.

    Args:
        leaf_hash: the 32-byte leaf hash (``rfc6962.hash_leaf(data)``).
        index: 0-based leaf index, from the caller, never from the proof.
        size: tree size in leaves, from the caller.
        proof: the audit path (sequence of 32-byte hashes), leaf sibling first.
        root: the trusted 32-byte root of that tree.

    Returns:
        None when the proof verifies.

    Raises:
        IndexOutOfRangeError: ``index >= size`` (so size 0 always fails) or negative.
        ProofLengthError: wrong number of proof hashes.
            A ``str``/``bytes`` object instead of a sequence of hashes is refused too.
        HashLengthError: a leaf, proof or root hash that is not 32 bytes.
        RootMismatchError: the proof leads to another root (``expected`` = ``root``,
            ``calculated`` = where it leads).
    """
    calculated = root_from_inclusion_proof(leaf_hash, index, size, proof)
    expected = check_hash(root, "root")
    if not hmac.compare_digest(calculated, expected):
        raise RootMismatchError(expected=expected, calculated=calculated)


def verify_consistency(
    size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes
) -> None:
    """Check that the tree of ``size2`` leaves with ``root2`` extends the one with ``root1``.

    RFC 9162 §2.1.4.2, with the exact length rule of transparency-dev/merkle.

    Args:
        size1: the older tree size, from the caller, ``0 < size1 <= size2``.
        size2: the newer tree size, from the caller.
        proof: the consistency proof (sequence of 32-byte hashes).
        root1: trusted 32-byte root of the older tree.
        root2: trusted 32-byte root of the newer tree.

    Returns:
        None when the proof verifies.

    Raises:
        IndexOutOfRangeError: ``size1 > size2``, a negative size, or ``size1 == 0`` (always,
            even 0 -> 0: a proof from the empty tree proves nothing).
        ProofLengthError: wrong number of proof hashes (``size1 == size2`` needs none).
            A ``str``/``bytes`` object instead of a sequence of hashes is refused too.
        HashLengthError: a root or proof hash that is not 32 bytes.
        RootMismatchError: the proof does not lead to ``root1`` or to ``root2``; for equal
            sizes, the two roots differ.
    """
    if not (_is_int(size1) and _is_int(size2)) or size1 < 0 or size2 < 0:
        raise IndexOutOfRangeError(f"tree sizes must be ints >= 0, got {size1!r}, {size2!r}")
    if size1 > size2:
        raise IndexOutOfRangeError(f"size1 {size1} is greater than size2 {size2}")
    if size1 == 0:
        raise IndexOutOfRangeError("a consistency proof from the empty tree proves nothing")
    first = check_hash(root1, "root1")
    second = check_hash(root2, "root2")
    if size1 == size2:
        _check_proof(proof, 0)
        if not hmac.compare_digest(first, second):
            raise RootMismatchError(expected=second, calculated=first)
        return
    inner, border = _decompose(size1 - 1, size2)
    shift = (size1 & -size1).bit_length() - 1
    inner -= shift
    seeded = size1 == 1 << shift  # size1 is a perfect subtree: its root is the seed
    offset = 0 if seeded else 1
    hashes = _check_proof(proof, offset + inner + border)
    seed = first if seeded else hashes[0]
    path = hashes[offset:]
    mask = (size1 - 1) >> shift

    node1 = seed
    node2 = seed
    for i in range(inner):
        if (mask >> i) & 1:
            node1 = hash_children(path[i], node1)
            node2 = hash_children(path[i], node2)
        else:
            node2 = hash_children(node2, path[i])
    for sibling in path[inner:]:
        node1 = hash_children(sibling, node1)
        node2 = hash_children(sibling, node2)
    if not hmac.compare_digest(node1, first):
        raise RootMismatchError(expected=first, calculated=node1)
    if not hmac.compare_digest(node2, second):
        raise RootMismatchError(expected=second, calculated=node2)


# --- subtrees ------------------------------------------------------------------------------


def check_subtree(start: int, end: int) -> None:
    """Check that ``[start, end)`` is a valid subtree (see the module docstring).

    Args:
        start: 0-based index of the subtree's first leaf.
        end: 0-based index just past its last leaf (exclusive).

    Raises:
        IndexOutOfRangeError: a non-int bound, ``start < 0``, ``start >= end``, or ``start``
            not a multiple of the bit ceiling of ``end - start``.
    """
    if not (_is_int(start) and _is_int(end)) or not 0 <= start < end:
        raise IndexOutOfRangeError(
            f"subtree [{start!r}, {end!r}) is empty or out of range (need 0 <= start < end)"
        )
    ceiling = 1 << (end - start - 1).bit_length()
    if start % ceiling:
        raise IndexOutOfRangeError(
            f"subtree [{start}, {end}): start is not a multiple of {ceiling}, the bit ceiling "
            "of its width"
        )


class _Offset:
    """The leaves ``start..end-1`` of a source seen as a source of their own."""

    def __init__(self, source: LeafSource, start: int, end: int) -> None:
        self._source = source
        self._start = start
        self._end = end

    def __len__(self) -> int:
        return self._end - self._start

    def __getitem__(self, index: int, /) -> bytes:
        return self._source[self._start + index]


class _OffsetTree(_Offset):
    """An ``_Offset`` of a ``SubtreeSource``: ``start`` is aligned to every level a proof in a
    valid subtree asks for, so its perfect subtrees are the source's."""

    def __init__(self, source: SubtreeSource, start: int, end: int) -> None:
        super().__init__(source, start, end)
        self._tree = source

    def perfect_root(self, level: int, index: int) -> bytes:
        """Root of the ``2**level`` leaves starting at leaf ``index * 2**level`` of the view."""
        return self._tree.perfect_root(level, (self._start >> level) + index)


def subtree_root(start: int, end: int, leaf_hashes: LeafSource) -> bytes:
    """Return the root (32 bytes) of the valid subtree ``[start, end)`` of ``leaf_hashes``.

    Raises:
        IndexOutOfRangeError: not a valid subtree, or ``end`` beyond the source.
        HashLengthError: the source returned a hash that is not 32 bytes.
    """
    check_subtree(start, end)
    _check_source_size(end, leaf_hashes)
    return _range_hasher(leaf_hashes)(start, end)


def subtree_inclusion_proof(
    leaf_index: int, start: int, end: int, leaf_hashes: LeafSource
) -> list[bytes]:
    """Return the inclusion proof of leaf ``leaf_index`` in the valid subtree ``[start, end)``.

    It is ``inclusion_proof(leaf_index - start, end - start, ...)`` over the subtree's leaves.

    Args:
        leaf_index: 0-based index of the leaf in the whole log, ``start <= leaf_index < end``.
        start: first leaf of the subtree.
        end: one past its last leaf, at most ``len(leaf_hashes)``.
        leaf_hashes: source of 32-byte leaf hashes.

    Raises:
        IndexOutOfRangeError: not a valid subtree, the leaf outside it, or ``end`` beyond the
            source.
        HashLengthError: the source returned a hash that is not 32 bytes.
    """
    check_subtree(start, end)
    if not _is_int(leaf_index) or not start <= leaf_index < end:
        raise IndexOutOfRangeError(f"leaf {leaf_index!r} is not in the subtree [{start}, {end})")
    _check_source_size(end, leaf_hashes)
    view = (
        _OffsetTree(leaf_hashes, start, end)
        if isinstance(leaf_hashes, SubtreeSource)
        else _Offset(leaf_hashes, start, end)
    )
    return inclusion_proof(leaf_index - start, end - start, view)


def _subtree_path(start: int, end: int, size: int) -> tuple[list[tuple[str, int, int]], int | None]:
    """Walk from the root of ``size`` leaves down to the subtree ``[start, end)``.

    Returns the sibling taken at each step (``("L", lo, hi)`` when the path went left and the
    sibling ``[lo, hi)`` is on the right, ``"R"`` for the mirror case, ``"S"`` when the node
    splits the subtree: its left child lies wholly inside the subtree), top first, and
    ``None`` when the node reached at the bottom is the whole subtree, else the first leaf of
    that node: the subtree's right-most piece ``[piece, end)``.
    """
    steps: list[tuple[str, int, int]] = []
    lo, hi, whole = 0, size, True
    while not (start == lo and end == hi):
        mid = lo + largest_power_of_two_below(hi - lo)
        if end <= mid:
            steps.append(("L", mid, hi))
            hi = mid
        elif start >= mid:
            steps.append(("R", lo, mid))
            lo = mid
        else:  # start == lo: the left child is inside the subtree
            steps.append(("S", lo, mid))
            lo = start = mid
            whole = False
    return steps, None if whole else lo


def _check_subtree_in(start: int, end: int, tree_size: int) -> None:
    check_subtree(start, end)
    if not _is_int(tree_size) or end > tree_size:
        raise IndexOutOfRangeError(
            f"subtree [{start}, {end}) is not inside a tree of size {tree_size!r}"
        )


def subtree_consistency_proof(
    start: int, end: int, tree_size: int, leaf_hashes: LeafSource
) -> list[bytes]:
    """Return the consistency proof of the valid subtree ``[start, end)`` with the tree of
    ``tree_size`` leaves (see the module docstring); empty when ``start == 0`` and
    ``end == tree_size``.

    Args:
        start: first leaf of the subtree.
        end: one past its last leaf, ``end <= tree_size``.
        tree_size: the tree size in leaves, at most ``len(leaf_hashes)``.
        leaf_hashes: source of 32-byte leaf hashes.

    Returns:
        A list of 32-byte hashes, deepest first.

    Raises:
        IndexOutOfRangeError: not a valid subtree, ``end > tree_size``, or ``tree_size`` beyond
            the source.
        HashLengthError: the source returned a hash that is not 32 bytes.
    """
    _check_subtree_in(start, end, tree_size)
    _check_source_size(tree_size, leaf_hashes)
    mth = _range_hasher(leaf_hashes)
    steps, piece = _subtree_path(start, end, tree_size)
    proof = [mth(lo, hi) for _, lo, hi in reversed(steps)]
    if piece is not None:
        proof.insert(0, mth(piece, end))
    return proof


def root_from_subtree_consistency_proof(
    start: int, end: int, tree_size: int, proof: Sequence[bytes], subtree_root: bytes
) -> bytes:
    """Return the root of the tree of ``tree_size`` leaves that ``proof`` leads to from the
    subtree ``[start, end)`` with root ``subtree_root``, after checking that the proof's
    pieces of the subtree hash to ``subtree_root``.

    Raises:
        IndexOutOfRangeError: not a valid subtree, or ``end > tree_size``.
        ProofLengthError: the proof is not exactly as long as the bounds require.
        HashLengthError: the subtree root or a proof hash is not 32 bytes.
        RootMismatchError: the proof's pieces of the subtree do not hash to ``subtree_root``
            (``expected`` = ``subtree_root``).
    """
    _check_subtree_in(start, end, tree_size)
    expected = check_hash(subtree_root, "subtree root")
    steps, piece = _subtree_path(start, end, tree_size)
    hashes = _check_proof(proof, len(steps) + (0 if piece is None else 1))
    if piece is None:
        node = part = expected
        siblings = hashes
    else:
        node = part = hashes[0]
        siblings = hashes[1:]
    for (kind, _, _), sibling in zip(reversed(steps), siblings, strict=True):
        if kind == "L":
            node = hash_children(node, sibling)
        elif kind == "R":
            node = hash_children(sibling, node)
        else:
            node = hash_children(sibling, node)
            part = hash_children(sibling, part)
    if not hmac.compare_digest(part, expected):
        raise RootMismatchError(expected=expected, calculated=part)
    return node


def verify_subtree_inclusion(
    leaf_hash: bytes,
    leaf_index: int,
    start: int,
    end: int,
    proof: Sequence[bytes],
    subtree_root: bytes,
) -> None:
    """Check that ``leaf_hash`` is leaf ``leaf_index`` of the subtree ``[start, end)`` whose root
    is ``subtree_root``.

    Args:
        leaf_hash: the 32-byte leaf hash.
        leaf_index: 0-based index of the leaf in the whole log, ``start <= leaf_index < end``.
        start: first leaf of the subtree (a multiple of the bit ceiling of ``end - start``).
        end: one past its last leaf.
        proof: the inclusion proof inside the subtree, leaf sibling first.
        subtree_root: the trusted 32-byte root of the subtree.

    Raises:
        IndexOutOfRangeError: not a valid subtree, or the leaf outside it.
        ProofLengthError: wrong number of proof hashes.
        HashLengthError: a hash that is not 32 bytes.
        RootMismatchError: the proof leads to another root.
    """
    check_subtree(start, end)
    if not _is_int(leaf_index) or not start <= leaf_index < end:
        raise IndexOutOfRangeError(f"leaf {leaf_index!r} is not in the subtree [{start}, {end})")
    verify_inclusion(leaf_hash, leaf_index - start, end - start, proof, subtree_root)


def verify_subtree_consistency(
    start: int,
    end: int,
    tree_size: int,
    proof: Sequence[bytes],
    subtree_root: bytes,
    root: bytes,
) -> None:
    """Check that the subtree ``[start, end)`` with ``subtree_root`` is part of the tree of
    ``tree_size`` leaves with ``root``.

    Args:
        start: first leaf of the subtree (a multiple of the bit ceiling of ``end - start``).
        end: one past its last leaf, ``end <= tree_size``.
        tree_size: the tree size in leaves, from the caller.
        proof: the subtree consistency proof (32-byte hashes, deepest first).
        subtree_root: the trusted 32-byte root of the subtree.
        root: the trusted 32-byte root of the tree.

    Raises:
        IndexOutOfRangeError: not a valid subtree, or ``end > tree_size``.
        ProofLengthError: wrong number of proof hashes (none when ``start == 0`` and
            ``end == tree_size``).
        HashLengthError: a hash that is not 32 bytes.
        RootMismatchError: the proof does not lead to ``subtree_root`` or to ``root``.
    """
    expected = check_hash(root, "root")
    calculated = root_from_subtree_consistency_proof(start, end, tree_size, proof, subtree_root)
    if not hmac.compare_digest(calculated, expected):
        raise RootMismatchError(expected=expected, calculated=calculated)

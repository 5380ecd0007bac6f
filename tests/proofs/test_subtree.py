"""Subtree inclusion and consistency proofs (merkle_memory.proof, issue 18 item 6)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import mth, path, split_size

from merkle_memory import rfc6962
from merkle_memory.errors import (
    HashLengthError,
    IndexOutOfRangeError,
    ProofLengthError,
    RootMismatchError,
)
from merkle_memory.proof import (
    check_subtree,
    root_from_subtree_consistency_proof,
    subtree_consistency_proof,
    subtree_inclusion_proof,
    subtree_root,
    verify_subtree_consistency,
    verify_subtree_inclusion,
)
from merkle_memory.rfc6962 import hash_leaf

# --- naive reference, written from the definitions (RFC 6962 section 2.1 as
# ``support.mth``/``support.path``, the subtree rules of transparency-dev/merkle and
# draft-ietf-plants-merkle-tree-certs "Subtrees") -------------------------------------------


def valid(start: int, end: int) -> bool:
    if not 0 <= start < end:
        return False
    ceiling = 1
    while ceiling < end - start:
        ceiling *= 2
    return start % ceiling == 0


def sub_proof(start: int, end: int, d: tuple[bytes, ...], known: bool) -> list[bytes]:
    n = len(d)
    if start == 0 and end == n:
        return [] if known else [mth(d)]
    k = split_size(n)
    if end <= k:
        return [*sub_proof(start, end, d[:k], known), mth(d[k:])]
    if start >= k:
        return [*sub_proof(start - k, end - k, d[k:], known), mth(d[:k])]
    return [*sub_proof(0, end - k, d[k:], False), mth(d[:k])]


LEAVES = [hash_leaf(b"subtree %d" % i) for i in range(64)]
ROOTS = [rfc6962.root(LEAVES[:n]) for n in range(65)]
SUBTREES = [(s, e) for e in range(1, 65) for s in range(e) if valid(s, e)]


def test_check_subtree_agrees_with_the_naive_rule_up_to_64() -> None:
    """check_subtree accepts exactly the bounds the naive bit-ceiling rule accepts."""
    for end in range(0, 66):
        for start in range(-1, 66):
            if valid(start, end):
                check_subtree(start, end)
            else:
                with pytest.raises(IndexOutOfRangeError):
                    check_subtree(start, end)
    # widths 1, 2, 3-4, 5-8, 9-16, 17-32, 33-64: 64 + 32 + 6 * 32 aligned starts in 64 leaves
    assert len(SUBTREES) == 256


def test_subtree_root_is_the_mth_of_its_leaves() -> None:
    """subtree_root([s, e)) == MTH(D[s:e]) for every valid subtree up to 64 leaves."""
    for start, end in SUBTREES:
        assert subtree_root(start, end, LEAVES) == mth(tuple(LEAVES[start:end]))


def test_subtree_inclusion_matches_naive_path_and_verifies() -> None:
    """Every leaf of every valid subtree: the proof is PATH inside the subtree and verifies."""
    for start, end in SUBTREES:
        sub = tuple(LEAVES[start:end])
        root = mth(sub)
        for index in range(start, end):
            proof = subtree_inclusion_proof(index, start, end, LEAVES)
            assert proof == path(index - start, sub)
            verify_subtree_inclusion(LEAVES[index], index, start, end, proof, root)


def test_subtree_consistency_matches_naive_reference_for_all_sizes_to_64() -> None:
    """Every valid subtree of every tree size up to 64: the proof equals the naive recursion,
    verifies, and leads back to the tree's root."""
    count = 0
    for size in range(1, 65):
        d = tuple(LEAVES[:size])
        for start, end in SUBTREES:
            if end > size:
                continue
            proof = subtree_consistency_proof(start, end, size, LEAVES)
            assert proof == sub_proof(start, end, d, True)
            sub = mth(d[start:end])
            verify_subtree_consistency(start, end, size, proof, sub, ROOTS[size])
            assert root_from_subtree_consistency_proof(start, end, size, proof, sub) == ROOTS[size]
            count += 1
    assert count == 7312


def test_whole_tree_and_perfect_subtrees_need_no_seed() -> None:
    """[0, n) of a tree of n needs an empty proof; a perfect subtree's proof holds no hash of
    its own leaves; a non-perfect one starts with its right-most piece."""
    assert subtree_consistency_proof(0, 13, 13, LEAVES) == []
    assert subtree_consistency_proof(8, 12, 16, LEAVES) == [
        mth(tuple(LEAVES[12:16])),
        mth(tuple(LEAVES[0:8])),
    ]
    assert subtree_consistency_proof(8, 14, 16, LEAVES) == [
        mth(tuple(LEAVES[12:14])),
        mth(tuple(LEAVES[14:16])),
        mth(tuple(LEAVES[8:12])),
        mth(tuple(LEAVES[0:8])),
    ]


def test_every_bit_flip_in_a_consistency_proof_is_refused() -> None:
    """Flipping any bit of any proof hash, or of either root, makes verification fail."""
    for size in (1, 5, 13, 16, 37, 64):
        for start, end in SUBTREES:
            if end > size:
                continue
            proof = subtree_consistency_proof(start, end, size, LEAVES)
            sub = subtree_root(start, end, LEAVES)
            for i in range(len(proof)):
                bad = list(proof)
                bad[i] = bytes([bad[i][0] ^ 0x80]) + bad[i][1:]
                with pytest.raises(RootMismatchError):
                    verify_subtree_consistency(start, end, size, bad, sub, ROOTS[size])
            flipped = bytes([sub[0] ^ 1]) + sub[1:]
            with pytest.raises(RootMismatchError):
                verify_subtree_consistency(start, end, size, proof, flipped, ROOTS[size])
            wrong_root = bytes([ROOTS[size][0] ^ 1]) + ROOTS[size][1:]
            with pytest.raises(RootMismatchError):
                verify_subtree_consistency(start, end, size, proof, sub, wrong_root)


def test_strict_lengths() -> None:
    """A proof one hash short or one hash long is refused for its length, never verified."""
    proof = subtree_consistency_proof(8, 14, 16, LEAVES)
    sub = subtree_root(8, 14, LEAVES)
    with pytest.raises(ProofLengthError):
        verify_subtree_consistency(8, 14, 16, proof[:-1], sub, ROOTS[16])
    with pytest.raises(ProofLengthError):
        verify_subtree_consistency(8, 14, 16, [*proof, proof[0]], sub, ROOTS[16])
    with pytest.raises(ProofLengthError):
        verify_subtree_consistency(0, 16, 16, [ROOTS[16]], ROOTS[16], ROOTS[16])
    inc = subtree_inclusion_proof(9, 8, 14, LEAVES)
    with pytest.raises(ProofLengthError):
        verify_subtree_inclusion(LEAVES[9], 9, 8, 14, inc[:-1], sub)
    with pytest.raises(ProofLengthError):
        verify_subtree_inclusion(LEAVES[9], 9, 8, 14, b"".join(inc), sub)  # type: ignore[arg-type]


def test_bad_bounds_are_refused() -> None:
    """Misaligned subtrees, an end beyond the tree, a leaf outside the subtree and non-int
    bounds raise IndexOutOfRangeError."""
    sub = subtree_root(8, 12, LEAVES)
    with pytest.raises(IndexOutOfRangeError):
        verify_subtree_consistency(4, 12, 16, [], sub, ROOTS[16])  # start 4, width 8
    with pytest.raises(IndexOutOfRangeError):
        verify_subtree_consistency(8, 12, 11, [], sub, ROOTS[16])
    with pytest.raises(IndexOutOfRangeError):
        verify_subtree_inclusion(LEAVES[12], 12, 8, 12, [], sub)
    with pytest.raises(IndexOutOfRangeError):
        verify_subtree_inclusion(LEAVES[8], 8, 8, 8, [], sub)
    with pytest.raises(IndexOutOfRangeError):
        subtree_consistency_proof(8, 12, 16, LEAVES[:15])
    with pytest.raises(IndexOutOfRangeError):
        subtree_inclusion_proof(3, True, 4, LEAVES)  # type: ignore[arg-type]
    with pytest.raises(IndexOutOfRangeError):
        check_subtree(0, 2.0)  # type: ignore[arg-type]


def test_hash_lengths_are_checked() -> None:
    """A 31-byte subtree root or proof hash raises HashLengthError."""
    proof = subtree_consistency_proof(8, 14, 16, LEAVES)
    sub = subtree_root(8, 14, LEAVES)
    with pytest.raises(HashLengthError):
        verify_subtree_consistency(8, 14, 16, proof, sub[:31], ROOTS[16])
    with pytest.raises(HashLengthError):
        verify_subtree_consistency(8, 14, 16, [proof[0][:31], *proof[1:]], sub, ROOTS[16])


def test_a_proof_for_one_subtree_does_not_fit_another() -> None:
    """The proof of [8, 12) in 16 does not verify [12, 16) (same width, same length)."""
    proof = subtree_consistency_proof(8, 12, 16, LEAVES)
    other = subtree_root(12, 16, LEAVES)
    with pytest.raises(RootMismatchError):
        verify_subtree_consistency(12, 16, 16, proof, other, ROOTS[16])


@given(st.integers(0, 40), st.integers(1, 2**40), st.integers(0, 2**40))
def test_proof_length_is_a_function_of_the_bounds(level: int, width: int, extra: int) -> None:
    """For large trees the expected proof length never exceeds 2 * 64 and a proof of the wrong
    length is refused before any hashing (bounds from the caller only)."""
    ceiling = 1 << (width - 1).bit_length()
    start = ceiling * level
    end = start + width
    size = end + extra
    seed = hash_leaf(b"x")
    with pytest.raises(ProofLengthError):
        root_from_subtree_consistency_proof(start, end, size, [seed] * 130, seed)


def test_offset_view_uses_the_sidecar_perfect_roots(tmp_path: object) -> None:
    """A source with perfect_root (TreeLog) gives the same subtree proofs as a plain list."""
    from pathlib import Path

    from merkle_memory.ledger.treelog import TreeLog

    folder = Path(str(tmp_path))
    tree = TreeLog(folder / "ledger.tree")
    tree.append(LEAVES)
    for start, end in [(0, 64), (32, 64), (48, 56), (40, 43), (16, 31)]:
        for index in (start, end - 1):
            assert subtree_inclusion_proof(index, start, end, tree) == subtree_inclusion_proof(
                index, start, end, LEAVES
            )
        assert subtree_consistency_proof(start, end, 64, tree) == subtree_consistency_proof(
            start, end, 64, LEAVES
        )
    tree.close()

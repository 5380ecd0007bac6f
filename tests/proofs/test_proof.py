"""Inclusion and consistency proofs: computing, verifying, edge rules (merkle_memory.proof)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import asset_path, mth, path, split_size

from merkle_memory import proof, rfc6962
from merkle_memory.checkpoint import Checkpoint
from merkle_memory.errors import (
    CheckpointError,
    HashLengthError,
    IndexOutOfRangeError,
    ProofError,
    ProofLengthError,
    RootMismatchError,
)
from merkle_memory.proof import (
    consistency_proof,
    inclusion_proof,
    root_from_inclusion_proof,
    verify_consistency,
    verify_inclusion,
)
from merkle_memory.rfc6962 import hash_leaf

# --- naive reference: RFC 6962 section 2.1.1 PATH and 2.1.2 SUBPROOF, written plainly ------
# (only MTH is memoized, so the 4,000-odd reference proofs stay fast)


def subproof(m: int, d: tuple[bytes, ...], b: bool) -> list[bytes]:
    n = len(d)
    if m == n:
        return [] if b else [mth(d)]
    k = split_size(n)
    if m <= k:
        return [*subproof(m, d[:k], b), mth(d[k:])]
    return [*subproof(m - k, d[k:], False), mth(d[:k])]


LEAVES = [hash_leaf(i.to_bytes(2, "big")) for i in range(64)]
ROOTS = [rfc6962.root(LEAVES[:n]) for n in range(65)]


def test_inclusion_matches_naive_path_for_every_index_and_size_to_64() -> None:
    """inclusion_proof equals PATH(m, D[n]) and verifies, for all 1 <= n <= 64, 0 <= m < n."""
    for n in range(1, 65):
        for m in range(n):
            proof = inclusion_proof(m, n, LEAVES)
            assert proof == path(m, tuple(LEAVES[:n]))
            verify_inclusion(LEAVES[m], m, n, proof, ROOTS[n])


def test_consistency_matches_naive_subproof_for_every_pair_to_64() -> None:
    """consistency_proof equals PROOF(m, D[n]) and verifies, for all 1 <= m <= n <= 64."""
    for n in range(1, 65):
        for m in range(1, n + 1):
            proof = consistency_proof(m, n, LEAVES)
            assert proof == subproof(m, tuple(LEAVES[:n]), True)
            verify_consistency(m, n, proof, ROOTS[m], ROOTS[n])


def _hx(values: list[str]) -> list[bytes]:
    return [bytes.fromhex(v) for v in values]


def _load(name: str) -> dict:
    return json.loads(asset_path("tlog", name).read_text())


def test_published_inclusion_vectors() -> None:
    """Every inclusion vector verifies, its leaf hash recomputes from its input, and the
    proof is reproduced where the vector's leaves are known."""
    known = {
        "roots": [hash_leaf(bytes.fromhex(x)) for x in _load("roots.json")["leaves_hex"]],
        "abcd": [hash_leaf(bytes([b])) for b in (0xAA, 0xBB, 0xCC, 0xDD)],
    }
    reproduced = 0
    for case in _load("inclusion_proofs.json")["vectors"]:
        leaf = bytes.fromhex(case["leaf_hash"])
        assert hash_leaf(bytes.fromhex(case["leaf_input_hex"])) == leaf
        proof = _hx(case["proof"] or [])
        verify_inclusion(leaf, case["leaf_index"], case["tree_size"], proof, _hx([case["root"]])[0])
        for leaves in known.values():
            size, index = case["tree_size"], case["leaf_index"]
            same_tree = size <= len(leaves) and leaves[index] == leaf
            if same_tree and rfc6962.root(leaves[:size]).hex() == case["root"]:
                assert inclusion_proof(index, size, leaves) == proof
                reproduced += 1
    assert reproduced == 15  # all but the real CT log entry, whose leaves are not given


def test_published_consistency_vectors() -> None:
    """Every consistency vector verifies and is reproduced from the reference leaves."""
    leaves = [hash_leaf(bytes.fromhex(x)) for x in _load("roots.json")["leaves_hex"]]
    for case in _load("consistency_proofs.json")["vectors"]:
        proof = _hx(case["proof"] or [])
        r1, r2 = _hx([case["root1"], case["root2"]])
        verify_consistency(case["size1"], case["size2"], proof, r1, r2)
        assert consistency_proof(case["size1"], case["size2"], leaves) == proof


def test_derived_8_leaf_vectors() -> None:
    """All derived proofs over the 8 reference leaves are reproduced and verify."""
    leaves = [hash_leaf(bytes.fromhex(x)) for x in _load("roots.json")["leaves_hex"]]
    data = _load("derived_8leaf_all_proofs.json")
    for case in data["inclusion"]:
        i, n = case["leaf_index"], case["tree_size"]
        assert inclusion_proof(i, n, leaves) == _hx(case["proof"] or [])
        verify_inclusion(leaves[i], i, n, _hx(case["proof"] or []), rfc6962.root(leaves[:n]))
    for case in data["consistency"]:
        m, n = case["size1"], case["size2"]
        proof = _hx(case["proof"] or [])
        assert consistency_proof(m, n, leaves) == proof
        verify_consistency(m, n, proof, rfc6962.root(leaves[:m]), rfc6962.root(leaves[:n]))
    assert len(data["inclusion"]) == 36 and len(data["consistency"]) == 28


def test_real_ct_log_entry_verifies() -> None:
    """The 22-hash proof of CT log entry 848049 in a tree of 3,630,887 verifies."""
    case = next(c for c in _load("inclusion_proofs.json")["vectors"] if c["tree_size"] == 3630887)
    leaf, root = _hx([case["leaf_hash"], case["root"]])
    proof = _hx(case["proof"])
    assert len(proof) == 22
    assert root_from_inclusion_proof(leaf, 848049, 3630887, proof) == root
    with pytest.raises(RootMismatchError):
        verify_inclusion(leaf, 848048, 3630887, proof, root)


# --- edge rules (DESIGN section 6) ---------------------------------------------------------


def test_inclusion_size_zero_and_index_out_of_range_fail() -> None:
    """Size 0 always fails; index >= size and negative index fail; bools are not ints."""
    for index, size in ((0, 0), (1, 1), (5, 4), (-1, 4), (True, 4)):
        with pytest.raises(IndexOutOfRangeError):
            verify_inclusion(LEAVES[0], index, size, [], ROOTS[1])
        with pytest.raises(IndexOutOfRangeError):
            inclusion_proof(index, size, LEAVES)
    with pytest.raises(IndexOutOfRangeError):
        inclusion_proof(0, 65, LEAVES)


def test_consistency_edge_rules() -> None:
    """size1 == 0 always fails (even 0 -> 0); size1 > size2 fails; equal sizes need an
    empty proof and equal roots."""
    with pytest.raises(IndexOutOfRangeError):
        verify_consistency(0, 0, [], rfc6962.EMPTY_ROOT, rfc6962.EMPTY_ROOT)
    with pytest.raises(IndexOutOfRangeError):
        verify_consistency(0, 5, [], rfc6962.EMPTY_ROOT, ROOTS[5])
    with pytest.raises(IndexOutOfRangeError):
        verify_consistency(5, 4, [], ROOTS[5], ROOTS[4])
    with pytest.raises(IndexOutOfRangeError):
        consistency_proof(0, 4, LEAVES)
    with pytest.raises(IndexOutOfRangeError):
        consistency_proof(5, 4, LEAVES)
    verify_consistency(7, 7, [], ROOTS[7], ROOTS[7])
    assert consistency_proof(7, 7, LEAVES) == []
    with pytest.raises(ProofLengthError):
        verify_consistency(7, 7, [ROOTS[7]], ROOTS[7], ROOTS[7])
    with pytest.raises(RootMismatchError) as info:
        verify_consistency(7, 7, [], ROOTS[7], ROOTS[6])
    assert info.value.expected == ROOTS[6] and info.value.calculated == ROOTS[7]
    with pytest.raises(ProofLengthError):
        verify_consistency(4, 8, [], ROOTS[4], ROOTS[8])


def test_hash_lengths_are_enforced() -> None:
    """Leaf, root and proof hashes of 31 or 33 bytes (or not bytes) raise HashLengthError."""
    proof = inclusion_proof(3, 8, LEAVES)
    for bad in (LEAVES[3][:31], LEAVES[3] + b"\x00", "ab" * 32):
        with pytest.raises(HashLengthError):
            verify_inclusion(bad, 3, 8, proof, ROOTS[8])  # type: ignore[arg-type]
        with pytest.raises(HashLengthError):
            verify_inclusion(LEAVES[3], 3, 8, proof, bad)  # type: ignore[arg-type]
        with pytest.raises(HashLengthError):
            verify_inclusion(LEAVES[3], 3, 8, [bad, *proof[1:]], ROOTS[8])  # type: ignore[list-item]
        with pytest.raises(HashLengthError):
            verify_consistency(3, 8, consistency_proof(3, 8, LEAVES), bad, ROOTS[8])  # type: ignore[arg-type]


def test_bytes_like_hashes_are_accepted_the_same_everywhere() -> None:
    """Issue 14: a 32-byte bytearray or memoryview is a hash like 32 bytes (it used to be
    refused with "must be 32 bytes, got 32"); a wrong length names the length and the type,
    a value that is not bytes-like names its type."""
    proof = inclusion_proof(3, 8, LEAVES)
    cons = consistency_proof(3, 8, LEAVES)
    for kind in (bytearray, memoryview):
        verify_inclusion(kind(LEAVES[3]), 3, 8, [kind(h) for h in proof], kind(ROOTS[8]))  # type: ignore[arg-type]
        verify_consistency(3, 8, [kind(h) for h in cons], kind(ROOTS[3]), kind(ROOTS[8]))  # type: ignore[arg-type]
        compact = rfc6962.CompactRange()
        compact.append(kind(LEAVES[0]))  # type: ignore[arg-type]
        assert compact.hashes == (LEAVES[0],) and type(compact.hashes[0]) is bytes
        assert Checkpoint("o", 8, kind(ROOTS[8])).root == ROOTS[8]  # type: ignore[arg-type]
    cases = [
        (bytearray(31), "leaf hash must be 32 bytes, got 31 (bytearray)"),
        (memoryview(bytes(33)), "leaf hash must be 32 bytes, got 33 (memoryview)"),
        (b"\x00" * 31, "leaf hash must be 32 bytes, got 31 (bytes)"),
        ("ab" * 16, "leaf hash must be 32 bytes (bytes-like), got str"),
    ]
    for bad, message in cases:
        with pytest.raises(HashLengthError) as info:
            verify_inclusion(bad, 3, 8, proof, ROOTS[8])  # type: ignore[arg-type]
        assert str(info.value) == message
    with pytest.raises(CheckpointError) as failed:
        Checkpoint("o", 8, bytearray(31))  # type: ignore[arg-type]
    assert str(failed.value) == "checkpoint root must be 32 bytes, got 31 (bytearray)"


def test_root_mismatch_carries_both_roots() -> None:
    """RootMismatchError holds the trusted root as expected and the computed one."""
    proof = inclusion_proof(2, 5, LEAVES)
    with pytest.raises(RootMismatchError) as info:
        verify_inclusion(LEAVES[2], 2, 5, proof, ROOTS[4])
    assert info.value.expected == ROOTS[4]
    assert info.value.calculated == ROOTS[5]
    assert isinstance(info.value, ProofError) and isinstance(info.value, ValueError)


def test_proof_that_is_not_a_sequence_is_refused() -> None:
    """A proof given as bytes or None raises a ProofError, not a TypeError."""
    for bad in (b"\x00" * 32, None, 5):
        with pytest.raises(ProofError):
            verify_inclusion(LEAVES[0], 0, 2, bad, ROOTS[2])  # type: ignore[arg-type]


def test_source_returning_bad_hash_is_refused() -> None:
    """A leaf source holding a short hash raises HashLengthError when proving."""
    with pytest.raises(HashLengthError):
        inclusion_proof(0, 2, [LEAVES[0], b"short"])


@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1))))
def test_inclusion_property_larger_trees(case: tuple[int, int]) -> None:
    """For random trees up to 300 leaves, a computed proof leads back to the root."""
    n, m = case
    leaves = [hash_leaf(i.to_bytes(2, "big")) for i in range(n)]
    proof = inclusion_proof(m, n, leaves)
    assert root_from_inclusion_proof(leaves[m], m, n, proof) == rfc6962.root(leaves)


@pytest.mark.parametrize("source", [None, 5, object()])
def test_a_source_without_a_length_is_a_proof_error(source: object) -> None:
    """A leaf source that is neither a sequence nor a leaf source is refused with a
    ``ProofError`` naming its type, by every function that takes one (not a raw TypeError)."""
    calls = [
        lambda: proof.inclusion_proof(0, 3, source),  # type: ignore[arg-type]
        lambda: proof.consistency_proof(1, 3, source),  # type: ignore[arg-type]
        lambda: proof.subtree_root(0, 2, source),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(ProofError) as caught:
            call()
        assert not isinstance(caught.value, TypeError)
        assert str(caught.value) == (
            "leaf_hashes must be a sequence of 32-byte leaf hashes or a leaf source, "
            f"not {type(source).__name__}"
        )

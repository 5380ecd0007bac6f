"""Mutation tests: every altered proof over trees of 1..64 leaves is rejected (issue 5).

For every inclusion proof (every index of every size 1..64) and every consistency proof
(every 1 <= size1 < size2 <= 64): a flipped bit in every proof hash (one per hash by
default, the byte and bit rotating over all hashes so that every byte position and every
bit is exercised across the proofs; every byte of every hash for sizes up to 32 in the slow
variant, and all 256 bits of every hash for sizes 5, 8 and 13), a dropped hash, an extra
hash, a wrong index, a wrong size and a wrong leaf each raise ``ProofError``.

A wrong size is always rejected when it is doubled or halved. A size off by one is rejected
unless the verifier's chaining for it is *identical* (same left/right sequence): e.g. leaf 0
of 3 and leaf 0 of 4 both hash ``H(H(l0, p0), p1)``. Then the proof cannot tell the sizes
apart; the size is bound to the root by the signed checkpoint, not by the proof. The test
checks that this is the only way a changed size passes.
"""

from __future__ import annotations

import itertools

import pytest

from merkle_memory import rfc6962
from merkle_memory.errors import ProofError
from merkle_memory.proof import (
    consistency_proof,
    inclusion_proof,
    verify_consistency,
    verify_inclusion,
)
from merkle_memory.rfc6962 import hash_leaf

N = 64
LEAVES = [hash_leaf(b"leaf %d" % i) for i in range(N)]
ROOTS = [rfc6962.root(LEAVES[:n]) for n in range(N + 1)]
EXTRA = hash_leaf(b"extra")
_COUNTER = itertools.count()
ALL_BITS = {(b, bit) for b in range(32) for bit in range(8)}


def _flips(proof: list[bytes], stride: int, seen: set[tuple[int, int]]) -> list[list[bytes]]:
    """The proof with one bit flipped at every ``stride``-th byte of each hash.

    A running count over all hashes flipped so far (``_COUNTER``) picks the starting byte
    and the bit, so consecutive hashes, across all proofs, get byte
    positions 0, 1, ..., 31, 0, ... and the bit advances every 32 hashes: every (byte, bit)
    pair is exercised even with ``stride == 32`` (one flip per hash). ``seen`` collects the
    (byte, bit) pairs flipped.
    """
    out = []
    for j, h in enumerate(proof):
        k = next(_COUNTER)
        for b in range(k % stride, 32, stride):
            bit = (k // 32 + b) % 8 if stride > 1 else (k + b) % 8
            seen.add((b, bit))
            flipped = bytearray(h)
            flipped[b] ^= 1 << bit
            out.append([*proof[:j], bytes(flipped), *proof[j + 1 :]])
    return out


def _shape_mutations(proof: list[bytes]) -> list[list[bytes]]:
    muts = [[*proof, EXTRA], [EXTRA, *proof]]
    for j in range(len(proof)):
        muts.append(proof[:j] + proof[j + 1 :])
    if len(proof) > 1:
        muts.append(proof[::-1]) if proof[::-1] != proof else None
    return muts


def _inclusion_chaining(index: int, size: int) -> list[int]:
    """What the verifier does for (index, size): 1 = proof hash on the left, 0 = right."""
    inner = (index ^ (size - 1)).bit_length()
    border = (index >> inner).bit_count()
    return [(index >> i) & 1 for i in range(inner)] + [1] * border


def _consistency_chaining(size1: int, size2: int) -> tuple[bool, list[int], int]:
    """What the verifier does for (size1, size2): seeding, inner directions, border length."""
    inner = ((size1 - 1) ^ (size2 - 1)).bit_length()
    border = ((size1 - 1) >> inner).bit_count()
    shift = (size1 & -size1).bit_length() - 1
    mask = (size1 - 1) >> shift
    seeded = size1 == 1 << shift
    return seeded, [(mask >> i) & 1 for i in range(inner - shift)], border


def _rejected_inclusion(
    leaf: bytes, index: int, size: int, proof: list[bytes], root: bytes
) -> bool:
    try:
        verify_inclusion(leaf, index, size, proof, root)
    except ProofError:
        return True
    return False


def _rejected_consistency(m: int, n: int, proof: list[bytes], r1: bytes, r2: bytes) -> bool:
    try:
        verify_consistency(m, n, proof, r1, r2)
    except ProofError:
        return True
    return False


# Default: one flipped bit per proof hash (byte and bit rotating over all hashes, so every
# (byte, bit) pair is covered), sizes 1..64. Slow variant: every byte of every hash, sizes
# 1..32 (bounded: about a fifth of the work of every byte at 1..64).
CASES = [(32, N), pytest.param(1, 32, marks=pytest.mark.slow)]


@pytest.mark.parametrize(("stride", "max_n"), CASES)
def test_inclusion_mutations_rejected(stride: int, max_n: int) -> None:
    """Flipped bits, dropped/extra/reordered hashes, wrong index, size or leaf all fail."""
    checked = 0
    seen: set[tuple[int, int]] = set()
    for n in range(1, max_n + 1):
        root = ROOTS[n]
        for m in range(n):
            proof = inclusion_proof(m, n, LEAVES)
            verify_inclusion(LEAVES[m], m, n, proof, root)
            for bad in _flips(proof, stride, seen) + _shape_mutations(proof):
                assert _rejected_inclusion(LEAVES[m], m, n, bad, root), (m, n)
                checked += 1
            for index in {m - 1, m + 1, m ^ 1, n} - {m}:
                if index >= 0:
                    assert _rejected_inclusion(LEAVES[m], index, n, proof, root), (m, n, index)
            for size in {n // 2, 2 * n, n - 1, n + 1} - {n}:
                if size <= m:
                    continue
                if not _rejected_inclusion(LEAVES[m], m, size, proof, root):
                    assert size in (n - 1, n + 1), (m, n, size)
                    assert _inclusion_chaining(m, size) == _inclusion_chaining(m, n)
            assert _rejected_inclusion(LEAVES[(m + 1) % N], m, n, proof, root)
            assert _rejected_inclusion(EXTRA, m, n, proof, root)
            if n > 1:
                assert _rejected_inclusion(LEAVES[m], m, n, proof, ROOTS[n - 1])
    assert seen == ALL_BITS
    assert checked > (25_000 if stride == 32 else 70_000)


@pytest.mark.parametrize(("stride", "max_n"), CASES)
def test_consistency_mutations_rejected(stride: int, max_n: int) -> None:
    """Flipped bits, dropped/extra hashes, wrong sizes and wrong roots all fail."""
    checked = 0
    seen: set[tuple[int, int]] = set()
    for n in range(2, max_n + 1):
        for m in range(1, n):
            proof = consistency_proof(m, n, LEAVES)
            r1, r2 = ROOTS[m], ROOTS[n]
            verify_consistency(m, n, proof, r1, r2)
            for bad in _flips(proof, stride, seen) + _shape_mutations(proof):
                assert _rejected_consistency(m, n, bad, r1, r2), (m, n)
                checked += 1
            for m2, n2 in {(m - 1, n), (m + 1, n), (m, n - 1), (m, n + 1), (m, 2 * n)}:
                if not 0 < m2 <= n2 or (m2, n2) == (m, n):
                    continue
                if not _rejected_consistency(m2, n2, proof, r1, r2):
                    assert 2 * n not in (n2,), (m, n, m2, n2)
                    same = _consistency_chaining(m2, n2) == _consistency_chaining(m, n)
                    assert same, (m, n, m2, n2)
            assert _rejected_consistency(m, n, proof, ROOTS[m - 1] if m > 1 else EXTRA, r2)
            assert _rejected_consistency(m, n, proof, r1, ROOTS[n - 1])
    assert seen == ALL_BITS
    assert checked > (25_000 if stride == 32 else 70_000)


@pytest.mark.parametrize("n", [5, 8, 13])
def test_every_bit_of_every_hash_small_trees(n: int) -> None:
    """For a few sizes, each of the 256 bits of each proof hash is flipped and rejected."""
    for m in range(n):
        proof = inclusion_proof(m, n, LEAVES)
        for j, h in enumerate(proof):
            for bit in range(256):
                flipped = bytearray(h)
                flipped[bit // 8] ^= 1 << (bit % 8)
                bad = [*proof[:j], bytes(flipped), *proof[j + 1 :]]
                assert _rejected_inclusion(LEAVES[m], m, n, bad, ROOTS[n])

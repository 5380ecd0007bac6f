"""RFC 6962 hashing, tree roots and the compact range (merkle_memory.rfc6962)."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import asset_path

from merkle_memory import rfc6962
from merkle_memory.errors import HashLengthError, IndexOutOfRangeError, ProofError
from merkle_memory.rfc6962 import EMPTY_ROOT, CompactRange, hash_children, hash_leaf


def naive_mth(leaf_hashes: list[bytes]) -> bytes:
    """RFC 6962 section 2.1 MTH, written plainly and recursively."""
    n = len(leaf_hashes)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return leaf_hashes[0]
    k = 1
    while k * 2 < n:
        k *= 2
    left = naive_mth(leaf_hashes[:k])
    right = naive_mth(leaf_hashes[k:])
    return hashlib.sha256(b"\x01" + left + right).digest()


def _load(name: str) -> dict:
    return json.loads(asset_path("tlog", name).read_text())


def test_hash_vectors() -> None:
    """Empty-tree, leaf and node hashes match every published known answer."""
    data = _load("rfc6962_hashes.json")
    assert EMPTY_ROOT.hex() == data["empty_tree"]["mth"]
    assert rfc6962.root([]) == EMPTY_ROOT
    for case in data["leaf_hashes"]:
        assert hash_leaf(bytes.fromhex(case["input_hex"])).hex() == case["leaf_hash"]
    for case in data["node_hashes"]:
        left, right = bytes.fromhex(case["left_hex"]), bytes.fromhex(case["right_hex"])
        assert hash_children(left, right).hex() == case["node_hash"]


def test_root_vectors() -> None:
    """Roots of the 8 reference leaves for sizes 1..8 match the published roots."""
    data = _load("roots.json")
    leaves = [hash_leaf(bytes.fromhex(x)) for x in data["leaves_hex"]]
    assert data["empty_root"] == EMPTY_ROOT.hex()
    for case in data["roots"]:
        assert rfc6962.root(leaves[: case["tree_size"]]).hex() == case["root"]


def test_domain_separation() -> None:
    """A leaf hash is SHA-256(0x00||d) and a node hash SHA-256(0x01||l||r): never equal."""
    a, b = hash_leaf(b"a"), hash_leaf(b"b")
    assert a == hashlib.sha256(b"\x00a").digest()
    assert hash_children(a, b) == hashlib.sha256(b"\x01" + a + b).digest()
    assert hash_leaf(a + b) != hash_children(a, b)


def test_compact_range_matches_naive_for_sizes_0_to_130() -> None:
    """After every append the compact range root equals the naive MTH of the prefix."""
    leaves = [hash_leaf(i.to_bytes(2, "big")) for i in range(130)]
    cr = CompactRange()
    assert cr.root() == EMPTY_ROOT
    for n, leaf in enumerate(leaves, 1):
        cr.append(leaf)
        assert cr.size == n
        assert len(cr.hashes) == n.bit_count()
        assert cr.root() == naive_mth(leaves[:n])


def test_no_odd_node_duplication() -> None:
    """Three leaves hash as H(H(l0,l1), l2), not with l2 duplicated (CVE-2012-2459 shape)."""
    l0, l1, l2 = (hash_leaf(bytes([i])) for i in range(3))
    assert rfc6962.root([l0, l1, l2]) == hash_children(hash_children(l0, l1), l2)
    assert rfc6962.root([l0, l1, l2]) != rfc6962.root([l0, l1, l2, l2])


@given(st.lists(st.binary(max_size=8), max_size=40))
def test_compact_range_serialization_round_trips(items: list[bytes]) -> None:
    """to_bytes/from_bytes and to_dict/from_dict give back an equal compact range."""
    cr = CompactRange()
    cr.extend(hash_leaf(x) for x in items)
    assert CompactRange.from_bytes(cr.to_bytes()) == cr
    assert CompactRange.from_dict(json.loads(json.dumps(cr.to_dict()))) == cr
    assert cr.copy().root() == cr.root() == naive_mth([hash_leaf(x) for x in items])


def test_compact_range_rejects_bad_state() -> None:
    """Wrong hash counts, short hashes, negative sizes and bad dicts raise ProofError kinds."""
    h = hash_leaf(b"x")
    with pytest.raises(ProofError):
        CompactRange(3, [h])
    with pytest.raises(HashLengthError):
        CompactRange(1, [h[:31]])
    with pytest.raises(IndexOutOfRangeError):
        CompactRange(-1, [])
    with pytest.raises(HashLengthError):
        CompactRange().append(b"short")
    with pytest.raises(ProofError):
        CompactRange.from_bytes(b"\x00" * 9)
    with pytest.raises(ProofError):
        CompactRange.from_dict({"size": 1, "hashes": ["zz"]})
    with pytest.raises(ProofError):
        CompactRange.from_dict([])


def test_root_of_a_non_iterable_is_a_proof_error() -> None:
    """``root(5)`` is refused with a ``ProofError`` naming the type, not a raw TypeError."""
    with pytest.raises(ProofError) as caught:
        rfc6962.root(5)  # type: ignore[arg-type]
    assert str(caught.value) == "leaf_hashes must be an iterable of 32-byte hashes, not int"
    assert not isinstance(caught.value, TypeError)

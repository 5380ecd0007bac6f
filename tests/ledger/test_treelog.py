"""The Merkle tree sidecar: layout, O(1) reads, appends, torn tails, rebuild and check."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from merkle_memory import rfc6962
from merkle_memory.errors import HashLengthError, IndexOutOfRangeError
from merkle_memory.ledger.treelog import TreeLog, leaves_for_node_count, node_count, node_position
from merkle_memory.proof import consistency_proof, inclusion_proof
from merkle_memory.rfc6962 import hash_children, hash_leaf

DATA = [b"entry %d" % i for i in range(300)]
HASHES = [hash_leaf(d) for d in DATA]


def test_node_count_and_inverse() -> None:
    """node_count(n) = 2n - popcount(n) and leaves_for_node_count inverts it (floors)."""
    assert [node_count(n) for n in range(9)] == [0, 1, 3, 4, 7, 8, 10, 11, 15]
    for n in range(1, 3000):
        assert leaves_for_node_count(node_count(n)) == n
        assert leaves_for_node_count(node_count(n) - 1) == n - 1


def test_post_order_layout(tmp_path: Path) -> None:
    """The file is the post-order list of perfect-subtree hashes: l0 l1 n01 l2 l3 n23 n0123."""
    tree = TreeLog(tmp_path / "ledger.tree")
    tree.append(HASHES[:4])
    l0, l1, l2, l3 = HASHES[:4]
    n01, n23 = hash_children(l0, l1), hash_children(l2, l3)
    expected = [l0, l1, n01, l2, l3, n23, hash_children(n01, n23)]
    assert (tmp_path / "ledger.tree").read_bytes() == b"".join(expected)
    assert node_position(2, 0) == 6 and node_position(1, 1) == 5 and node_position(0, 3) == 4


def test_append_in_batches_reads_back(tmp_path: Path) -> None:
    """Appending in uneven batches gives the same file as one rebuild; reads match."""
    tree = TreeLog(tmp_path / "a.tree")
    assert len(tree) == 0 and tree.root() == rfc6962.EMPTY_ROOT
    for lo, hi in ((0, 1), (1, 7), (7, 7), (7, 128), (128, 300)):
        assert tree.append(HASHES[lo:hi]) == hi
    rebuilt = TreeLog.rebuild(tmp_path / "b.tree", DATA)
    assert (tmp_path / "a.tree").read_bytes() == (tmp_path / "b.tree").read_bytes()
    assert len(rebuilt) == 300 and list(tree) == HASHES
    for n in (1, 2, 3, 64, 255, 256, 257, 300):
        assert tree.root(n) == rfc6962.root(HASHES[:n])
        assert tree.compact_range(n).size == n


def test_proofs_from_sidecar_equal_proofs_from_list(tmp_path: Path) -> None:
    """The fast perfect_root path gives exactly the proofs computed from plain leaves."""
    tree = TreeLog.rebuild(tmp_path / "t.tree", DATA)
    for n in (1, 5, 64, 100, 300):
        for m in range(0, n, 7):
            assert inclusion_proof(m, n, tree) == inclusion_proof(m, n, HASHES)
        for m in range(1, n + 1, 9):
            assert consistency_proof(m, n, tree) == consistency_proof(m, n, HASHES)


def test_reads_out_of_range_raise(tmp_path: Path) -> None:
    """Leaf, subtree and size reads beyond the stored tree raise IndexOutOfRangeError."""
    tree = TreeLog.rebuild(tmp_path / "t.tree", DATA[:5])
    with pytest.raises(IndexOutOfRangeError):
        tree[5]
    with pytest.raises(IndexOutOfRangeError):
        tree.perfect_root(3, 0)
    with pytest.raises(IndexOutOfRangeError):
        tree.root(6)
    assert tree.perfect_root(2, 0) == rfc6962.root(HASHES[:4])


def test_bad_leaf_hash_writes_nothing(tmp_path: Path) -> None:
    """A short leaf hash in a batch raises HashLengthError and the file is unchanged."""
    tree = TreeLog(tmp_path / "t.tree")
    tree.append(HASHES[:3])
    before = (tmp_path / "t.tree").read_bytes()
    with pytest.raises(HashLengthError):
        tree.append([HASHES[3], b"short"])
    assert (tmp_path / "t.tree").read_bytes() == before


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 40), st.integers(1, 31 * 3))
def test_torn_tail_is_ignored_then_truncated(
    tmp_path_factory: pytest.TempPathFactory, n: int, cut: int
) -> None:
    """Cutting the file mid-append leaves a readable prefix; the next append repairs it."""
    path = tmp_path_factory.mktemp("torn") / "t.tree"
    TreeLog.rebuild(path, DATA[:n])
    full = path.read_bytes()
    path.write_bytes(full[: max(0, len(full) - cut)])
    tree = TreeLog(path)
    kept = len(tree)
    assert kept <= n
    assert list(tree) == HASHES[:kept]
    tree.append(HASHES[kept : n + 1])
    assert path.read_bytes() == (
        TreeLog.rebuild(path.with_suffix(".b"), DATA[: n + 1]).path.read_bytes()
    )


def test_check_finds_first_wrong_leaf(tmp_path: Path) -> None:
    """check() is ok for matching data, else names the first leaf that differs or is missing."""
    tree = TreeLog.rebuild(tmp_path / "t.tree", DATA[:100])
    assert tree.check(DATA[:100]).ok
    altered = list(DATA[:100])
    altered[37] = b"forged"
    result = tree.check(altered)
    assert (result.ok, result.first_bad_leaf) == (False, 37)
    assert tree.check(DATA[:101]).first_bad_leaf == 100
    assert tree.check(DATA[:99]).first_bad_leaf == 99
    raw = bytearray((tmp_path / "t.tree").read_bytes())
    raw[node_position(1, 10) * 32] ^= 1  # an interior node of leaves 20..21
    (tmp_path / "t.tree").write_bytes(bytes(raw))
    assert tree.check(DATA[:100]).first_bad_leaf == 21
    assert TreeLog(tmp_path / "missing").check([]).ok


def test_reads_use_one_cached_descriptor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After the first read, proofs cost preads only: no open() per hash read."""
    tree = TreeLog.rebuild(tmp_path / "t.tree", DATA)
    assert len(tree) == 300
    opened: list[object] = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda *a, **k: (opened.append(a), real_open(*a, **k))[1])
    for m in range(0, 300, 13):
        assert inclusion_proof(m, 300, tree) == inclusion_proof(m, 300, HASHES)
    assert tree.root(300) == rfc6962.root(HASHES) and opened == []


def test_cached_descriptor_follows_appends_and_replacement(tmp_path: Path) -> None:
    """Appends through another object are seen; a rebuild that replaces the file is seen by
    len() (the new file is opened); close() and ``with`` release the descriptor."""
    path = tmp_path / "t.tree"
    reader = TreeLog(path)
    assert len(reader) == 0
    TreeLog(path).append(HASHES[:10])
    assert reader[9] == HASHES[9] and len(reader) == 10
    TreeLog(path).append(HASHES[10:20])
    assert reader.perfect_root(2, 4) == rfc6962.root(HASHES[16:20])
    other = [hash_leaf(b"other %d" % i) for i in range(5)]
    TreeLog.rebuild(path, [b"other %d" % i for i in range(5)])
    assert len(reader) == 5 and list(reader) == other
    fd = reader._fd
    with reader:
        assert reader.root() == rfc6962.root(other)
    with pytest.raises(OSError):
        os.fstat(fd)
    assert reader[4] == other[4]  # reopened on demand
    reader.close()

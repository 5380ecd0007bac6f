"""The Merkle sidecar is derived data, trusted for nothing (issue 14 item 2).

Every hash a proof or a checkpoint is computed from is checked against the ledger before it is
served: a sidecar (``ledger.tree``) that is forged, zeroed, garbage, truncated or extended is
rebuilt from the ledger (never served), and a ledger edited in place after a sync is re-read,
so its broken chain is refused.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from merkle_memory import rfc6962
from merkle_memory.errors import LedgerBrokenError
from merkle_memory.ledger import Entry, Ledger
from merkle_memory.ledger.proofs import (
    check,
    prove_consistency,
    prove_inclusion,
    sync,
    tree_head,
)
from merkle_memory.ledger.treelog import node_count, node_position
from merkle_memory.proof import consistency_proof, inclusion_proof

N = 5  # leaves 0..4: the sidecar holds 8 hashes, the perfect root of leaves 0..3 at 6


def _fill(folder: Path, n: int = N, first: int = 0) -> Ledger:
    """A ledger of ``n`` entries sealing ``m0..m{n-1}`` (digests from ``first``)."""
    led = Ledger(folder / "ledger.jsonl")
    for i in range(n):
        led.append(f"m{i}", f"{first + i:064x}", ts=1_700_000_000 + i)
    return led


def _leaves(folder: Path) -> list[bytes]:
    lines = (folder / "ledger.jsonl").read_bytes().split(b"\n")
    return [rfc6962.hash_leaf(line) for line in lines if line]


def _fabricated_tree(tmp_path: Path) -> bytes:
    """The sidecar of another history of the same size (other digests, same ids)."""
    other = tmp_path / "other"
    _fill(other, first=100)
    sync(other)
    return (other / "ledger.tree").read_bytes()


def _set_hash(tree: Path, position: int, value: bytes) -> None:
    data = bytearray(tree.read_bytes())
    data[32 * position : 32 * position + 32] = value
    tree.write_bytes(bytes(data))


FORGERIES: dict[str, Callable[[Path, Path], None]] = {
    "fabricated-history": lambda t, tmp: t.write_bytes(_fabricated_tree(tmp)),
    "zeroed": lambda t, tmp: t.write_bytes(bytes(len(t.read_bytes()))),
    "zeroed-root-node": lambda t, tmp: _set_hash(t, node_position(2, 0), bytes(32)),
    "zeroed-last-leaf": lambda t, tmp: _set_hash(t, node_position(0, N - 1), bytes(32)),
    "garbage": lambda t, tmp: t.write_bytes(os.urandom(len(t.read_bytes()))),
    "truncated": lambda t, tmp: t.write_bytes(t.read_bytes()[: 32 * node_count(2)]),
    "extended": lambda t, tmp: t.write_bytes(t.read_bytes() + b"\x07" * 64),
    "replaced-by-empty": lambda t, tmp: t.write_bytes(b""),
}


def _assert_served_from_the_ledger(folder: Path) -> None:
    """Checkpoint, inclusion and consistency proofs all use the ledger's true tree."""
    leaves = _leaves(folder)
    true_root = rfc6962.root(leaves)
    assert tree_head(folder, "o.example/t").root == true_root
    for index in range(len(leaves)):
        proof = prove_inclusion(folder, f"m{index}")
        assert proof.root_hash == true_root
        assert list(proof.inclusion_proof) == inclusion_proof(index, len(leaves), leaves)
        proof.verify(true_root)
    for old in range(1, len(leaves) + 1):
        cons = prove_consistency(folder, old)
        assert (cons.old_root, cons.new_root) == (rfc6962.root(leaves[:old]), true_root)
        assert list(cons.consistency_proof) == consistency_proof(old, len(leaves), leaves)
    assert check(folder)


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_forged_sidecar_is_never_served(
    name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever is written over ledger.tree right after a sync (same clock tick or not), the
    next checkpoint and every proof are the ledger's, and the sidecar is the ledger's again."""
    folder = tmp_path / "t"
    _fill(folder)
    sync(folder)
    good = (folder / "ledger.tree").read_bytes()
    FORGERIES[name](folder / "ledger.tree", tmp_path)
    assert (folder / "ledger.tree").read_bytes() != good
    with caplog.at_level(logging.WARNING, logger="merkle_memory.ledger"):
        _assert_served_from_the_ledger(folder)
    assert (folder / "ledger.tree").read_bytes() == good


@pytest.mark.parametrize("name", ["fabricated-history", "zeroed-root-node", "garbage"])
def test_a_forged_sidecar_is_caught_after_the_clock_moved(name: str, tmp_path: Path) -> None:
    """The same, when the forgery comes well after the state was written (no racy window:
    the state's root, not the file's change time, catches it)."""
    folder = tmp_path / "t"
    _fill(folder)
    sync(folder)
    time.sleep(0.02)
    sync(folder)
    FORGERIES[name](folder / "ledger.tree", tmp_path)
    _assert_served_from_the_ledger(folder)


def test_a_forged_inner_node_is_never_served(tmp_path: Path) -> None:
    """A wrong hash that no root is computed from (the node over leaves 2..3) is caught when
    a proof would use it: the proof is checked before it is returned, the sidecar rebuilt."""
    folder = tmp_path / "t"
    _fill(folder)
    sync(folder)
    _set_hash(folder / "ledger.tree", node_position(1, 1), b"\x01" * 32)
    leaves = _leaves(folder)
    proof = prove_inclusion(folder, "m0")
    assert list(proof.inclusion_proof) == inclusion_proof(0, N, leaves)
    proof.verify(rfc6962.root(leaves))
    assert check(folder)


def test_a_forged_sidecar_with_a_moved_state_is_rebuilt(tmp_path: Path) -> None:
    """A state that names an offset that is not the end of its last entry makes the whole
    ledger be re-read: the forged sidecar beside it is rebuilt."""
    folder = tmp_path / "t"
    _fill(folder)
    sync(folder)
    (folder / "ledger.tree").write_bytes(_fabricated_tree(tmp_path))
    state = json.loads((folder / "ledger.tree.state").read_bytes())
    (folder / "ledger.tree.state").write_text(json.dumps({**state, "offset": 7}))
    _assert_served_from_the_ledger(folder)


@pytest.mark.parametrize("settle", [False, True])
def test_an_edit_in_place_after_a_sync_is_refused(settle: bool, tmp_path: Path) -> None:
    """An entry changed in place (same length, so the size does not move) after the sidecar
    was synced breaks the chain: prove, consistency and checkpoint refuse it."""
    folder = tmp_path / "t"
    _fill(folder)
    sync(folder)
    if settle:
        time.sleep(0.02)
        sync(folder)
    path = folder / "ledger.jsonl"
    data = path.read_bytes()
    edited = data.replace(f"{2:064x}".encode(), f"{9:064x}".encode())
    assert len(edited) == len(data) and edited != data
    path.write_bytes(edited)
    for call in (
        lambda: prove_inclusion(folder, "m4"),
        lambda: prove_consistency(folder, 2),
        lambda: tree_head(folder, "o"),
    ):
        with pytest.raises(LedgerBrokenError, match="chain broken at seq 3"):
            call()


def test_an_edit_that_moves_bytes_then_an_append_is_refused(tmp_path: Path) -> None:
    """An entry rewritten with another length: the next append is refused (its entry no
    longer ends where ``ledger.head`` says), and so is a proof (the last synced entry no
    longer ends where the sidecar state says, so the ledger is re-read)."""
    folder = tmp_path / "t"
    led = _fill(folder)
    sync(folder)
    path = folder / "ledger.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"memory_id":"m1"', b'"memory_id":"m1x"'))
    with pytest.raises(LedgerBrokenError, match="chain broken at seq 2"):
        led.append("late", "f" * 64, ts=1_800_000_000)
    with pytest.raises(LedgerBrokenError, match="chain broken at seq 2"):
        tree_head(folder, "o")


def test_appends_keep_the_check_incremental(tmp_path: Path) -> None:
    """After the first check, new entries are checked alone: the ledger's earlier lines are
    not re-read (a proof reads the state, one line, O(log n) hashes and the new lines)."""
    folder = tmp_path / "t"
    led = _fill(folder, 60)
    sync(folder)
    time.sleep(0.02)
    sync(folder)
    path = folder / "ledger.jsonl"
    synced_size = path.stat().st_size
    led.append("new", "e" * 64, ts=1_800_000_000)
    ledger_inode = path.stat().st_ino
    reads: list[int] = []
    real = os.pread

    def pread(fd: int, length: int, offset: int) -> bytes:
        if os.fstat(fd).st_ino == ledger_inode:
            reads.append(offset)
        return real(fd, length, offset)

    mp = pytest.MonkeyPatch()
    mp.setattr(os, "pread", pread)
    try:
        state = sync(folder)
    finally:
        mp.undo()
    assert (state.leaves, state.broken_at) == (61, None)
    assert synced_size > 3 * 4096 and reads and min(reads) == synced_size - 4096
    assert tree_head(folder, "o").root == rfc6962.root(_leaves(folder))


@pytest.mark.parametrize("append", [False, True], ids=["same-ledger", "after-an-append"])
def test_a_state_recording_a_break_is_not_trusted(append: bool, tmp_path: Path) -> None:
    """A ``broken_at`` written into the state of an intact ledger is not believed: the
    ledger is re-read, the proof is served and the state records what the ledger says."""
    led = Ledger(tmp_path / "ledger.jsonl")
    led.append_many([(f"k{i % 4}", f"{i:064x}") for i in range(10)])
    assert prove_inclusion(tmp_path, "k1").entry.seq == 10
    path = tmp_path / "ledger.tree.state"
    state = json.loads(path.read_bytes())
    assert (state["leaves"], state["broken_at"], state["reason"]) == (10, None, None)
    state["broken_at"], state["reason"] = 3, "x"
    path.write_text(json.dumps(state))
    if append:
        led.append("k1", "d" * 64)
    size = 11 if append else 10
    proof = prove_inclusion(tmp_path, "k1")
    assert (proof.entry.seq, proof.tree_size) == (size, size)
    head = tree_head(tmp_path, "o")
    assert head.size == size
    proof.verify(head.root)
    after = json.loads(path.read_bytes())
    assert (after["leaves"], after["broken_at"], after["reason"]) == (size, None, None)
    assert check(tmp_path) is True
    assert prove_consistency(tmp_path, 10).new_size == size


def test_a_real_break_is_still_refused_when_its_state_is_reread(tmp_path: Path) -> None:
    """A state recording a break is re-read on every proof: a break the ledger really has is
    found again (same seq), however often it is asked and after appends."""
    _fill(tmp_path)
    lines = (tmp_path / "ledger.jsonl").read_bytes().splitlines(keepends=True)
    entry = json.loads(lines[2])
    entry["prev"] = "0" * 64
    lines[2] = json.dumps(entry).encode() + b"\n"
    (tmp_path / "ledger.jsonl").write_bytes(b"".join(lines))
    for _ in range(2):
        with pytest.raises(LedgerBrokenError, match="chain broken at seq 3"):
            prove_inclusion(tmp_path, "m0")
    last = json.loads(lines[-1])["hash"]
    later = Entry.create(N + 1, 1_700_000_100, "save", "m9", "e" * 64, last)
    with (tmp_path / "ledger.jsonl").open("ab") as f:  # the library refuses to append here
        f.write(later.line() + b"\n")
    with pytest.raises(LedgerBrokenError, match="chain broken at seq 3"):
        tree_head(tmp_path, "o")
    state = json.loads((tmp_path / "ledger.tree.state").read_bytes())
    assert (state["leaves"], state["broken_at"]) == (2, 3)  # entry 3 is unusable: scan stops

"""Proofs over a real ledger through its sidecar (merkle_memory.ledger.proofs)."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from pathlib import Path

import pytest

from merkle_memory import rfc6962
from merkle_memory.errors import (
    IndexOutOfRangeError,
    LedgerBrokenError,
    LedgerError,
    LedgerRollbackError,
    ProofError,
    TreeLogError,
)
from merkle_memory.ledger import Ledger
from merkle_memory.ledger.proofs import (
    ConsistencyProof,
    InclusionProof,
    attach,
    check,
    prove_consistency,
    prove_inclusion,
    rebuild,
    sync,
    tree_head,
)
from merkle_memory.ledger.treelog import TreeLog


def _digest(i: int) -> str:
    return f"{i:064x}"


def _ledger(tmp_path: Path, n: int) -> Ledger:
    led = Ledger(tmp_path / "ledger.jsonl")
    for i in range(n):
        led.append(f"m{i % 7}", _digest(i), ts=1_700_000_000 + i)
    return led


def _lines(tmp_path: Path) -> list[bytes]:
    return [x for x in (tmp_path / "ledger.jsonl").read_bytes().split(b"\n") if x]


def test_leaves_are_entry_lines(tmp_path: Path) -> None:
    """The tree's leaves are hash_leaf(line without newline), in ledger order."""
    _ledger(tmp_path, 10)
    state = sync(tmp_path)
    assert (state.leaves, state.broken_at) == (10, None)
    expected = [rfc6962.hash_leaf(line) for line in _lines(tmp_path)]
    assert list(TreeLog(tmp_path / "ledger.tree")) == expected
    assert tree_head(tmp_path, "o.example/t").root == rfc6962.root(expected)


def test_prove_latest_entry_and_verify(tmp_path: Path) -> None:
    """prove_inclusion picks the latest entry of the id; the proof verifies and round-trips."""
    _ledger(tmp_path, 30)
    proof = prove_inclusion(tmp_path, "m3")
    assert (proof.leaf_index, proof.tree_size) == (24, 30)  # seq 25 is the last m3
    assert proof.leaf_hash == rfc6962.hash_leaf(_lines(tmp_path)[24])
    proof.verify(proof.root_hash)
    assert InclusionProof.from_dict(proof.to_dict()) == proof
    with pytest.raises(LedgerError):
        prove_inclusion(tmp_path, "nobody")


def test_sync_is_incremental_and_hook_keeps_it_current(tmp_path: Path) -> None:
    """attach() keeps the sidecar current on each append; consistency proofs verify."""
    led = _ledger(tmp_path, 12)
    old = tree_head(tmp_path, "o")
    attach(led)
    for i in range(12, 40):
        led.append(f"x{i}", _digest(i))
    assert len(TreeLog(tmp_path / "ledger.tree")) == 40
    proof = prove_consistency(tmp_path, 12)
    assert proof.old_root == old.root and proof.new_size == 40
    proof.verify()
    assert ConsistencyProof.from_dict(proof.to_dict()) == proof
    assert check(tmp_path)
    with pytest.raises(IndexOutOfRangeError):
        prove_consistency(tmp_path, 0)
    with pytest.raises(IndexOutOfRangeError):
        prove_consistency(tmp_path, 41)


def test_break_after_sync_refuses_proofs(tmp_path: Path) -> None:
    """An appended line that does not chain is found at sync and every proof is refused."""
    _ledger(tmp_path, 5)
    sync(tmp_path)
    lines = _lines(tmp_path)
    with (tmp_path / "ledger.jsonl").open("ab") as handle:
        handle.write(lines[2] + b"\n")  # a replayed old entry: wrong seq and prev
    with pytest.raises(LedgerBrokenError):
        prove_inclusion(tmp_path, "m1")
    with pytest.raises(LedgerBrokenError):
        prove_consistency(tmp_path, 2)
    with pytest.raises(LedgerBrokenError):
        tree_head(tmp_path, "o")


def test_rewrite_inside_synced_prefix_found_by_check(tmp_path: Path) -> None:
    """Editing an already-synced line is invisible to sync but check() names the leaf;
    rebuild() then walks the whole chain and records the break."""
    _ledger(tmp_path, 6)
    sync(tmp_path)
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(path.read_bytes().replace(_digest(3).encode(), _digest(99).encode()))
    with pytest.raises(TreeLogError) as info:
        check(tmp_path)
    assert info.value.leaf_index == 3
    assert rebuild(tmp_path).broken_at == 4


def test_truncated_ledger_is_a_rollback(tmp_path: Path) -> None:
    """A ledger file shorter than the synced offset raises LedgerRollbackError."""
    _ledger(tmp_path, 6)
    sync(tmp_path)
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in _lines(tmp_path)[:3]))
    with pytest.raises(LedgerRollbackError):
        sync(tmp_path)


def test_lost_sidecar_or_state_is_rebuilt(tmp_path: Path) -> None:
    """Deleting the sidecar, or its state, or adding torn bytes, gives the same tree back."""
    _ledger(tmp_path, 9)
    sync(tmp_path)
    good = (tmp_path / "ledger.tree").read_bytes()
    (tmp_path / "ledger.tree").unlink()
    assert sync(tmp_path).leaves == 9
    (tmp_path / "ledger.tree.state").unlink()
    assert sync(tmp_path).leaves == 9
    with (tmp_path / "ledger.tree").open("ab") as handle:
        handle.write(b"\x01" * 40)
    assert sync(tmp_path).leaves == 9
    assert (tmp_path / "ledger.tree").read_bytes()[: len(good)] == good
    assert check(tmp_path)


def test_torn_ledger_tail_is_not_a_leaf(tmp_path: Path) -> None:
    """An unterminated, unparseable last line (a torn append) is not counted."""
    _ledger(tmp_path, 4)
    with (tmp_path / "ledger.jsonl").open("ab") as handle:
        handle.write(b'{"seq":5,"ts"')
    state = sync(tmp_path)
    assert (state.leaves, state.broken_at) == (4, None)


def test_prove_through_a_held_ledger_lock(tmp_path: Path) -> None:
    """Given the Ledger object, proofs sync under its re-entrant lock: a holder of the lock
    (e.g. a tenant that just saved) can prove without deadlocking, and the proof covers
    the entry appended inside the same locked block."""
    led = _ledger(tmp_path, 5)
    with led.locked():
        led.append("inside", _digest(99), ts=1_800_000_000)
        proof = prove_inclusion(led, "inside")
        head = tree_head(led, "o.example/t")
    assert (proof.leaf_index, proof.tree_size, head.size) == (5, 6, 6)
    assert proof.leaf_hash == rfc6962.hash_leaf(_lines(tmp_path)[5])
    proof.verify(head.root)
    prove_consistency(led, 5).verify()


def test_inclusion_proof_carries_and_binds_its_entry(tmp_path: Path) -> None:
    """The proof's entry is the ledger line proven (its canonical form is the leaf data);
    check_entry/verify refuse another id, another position, or an entry that is not the
    leaf; from_dict needs `entry`."""
    _ledger(tmp_path, 9)
    proof = prove_inclusion(tmp_path, "m1")
    assert proof.entry.line() == _lines(tmp_path)[8]
    assert (proof.entry.memory_id, proof.entry.seq, proof.leaf_index) == ("m1", 9, 8)
    doc = proof.to_dict()
    assert list(doc)[-1] == "entry" and doc["entry"] == json.loads(_lines(tmp_path)[8])
    root = proof.root_hash
    other = prove_inclusion(tmp_path, "m0")
    cases = [
        (dataclasses.replace(proof, memory_id="m0"), "the entry seals memory id 'm1', not 'm0'"),
        (dataclasses.replace(proof, leaf_index=7), "the entry has seq 9, not leaf_index + 1 = 8"),
        (dataclasses.replace(proof, entry=other.entry), "leaf_hash is not the leaf hash"),
    ]
    for bad, message in cases:
        with pytest.raises(ProofError, match=re.escape(message)):
            bad.verify(root)
    del doc["entry"]
    with pytest.raises(ProofError, match="missing 'entry'"):
        InclusionProof.from_dict(doc)
    for bad_doc in (None, [], {**proof.to_dict(), "memory_id": 5}):
        with pytest.raises(ProofError):
            InclusionProof.from_dict(bad_doc)


def test_proof_functions_refuse_bad_arguments(tmp_path: Path) -> None:
    """A ledger argument that is no Ledger or path, or a memory id that is no str, is a
    LedgerError; a missing ledger file creates nothing."""
    with pytest.raises(LedgerError):
        prove_inclusion(5, "m")  # type: ignore[arg-type]
    with pytest.raises(LedgerError):
        prove_inclusion(tmp_path, 5)  # type: ignore[arg-type]
    with pytest.raises(LedgerError, match="no ledger entry seals"):
        prove_inclusion(tmp_path, "m")
    assert tree_head(tmp_path, "o").size == 0 and sync(tmp_path).leaves == 0
    assert list(tmp_path.iterdir()) == []


def test_a_forged_state_claiming_more_entries_is_rebuilt_not_a_rollback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The state is trusted for nothing (found by the adversarial trial): a state forged to
    cover more than the ledger holds, while ``ledger.head`` vouches for the ledger as it is,
    is rebuilt with a warning; it never blocks proofs. A ledger really cut short (its head
    records a later end) is still a rollback (``test_truncated_ledger_is_a_rollback``)."""
    _ledger(tmp_path, 6)
    good = sync(tmp_path)
    state_path = tmp_path / "ledger.tree.state"
    state = json.loads(state_path.read_bytes())
    for forged in ({"offset": 1_000_000}, {"leaves": 99, "offset": 1_000_000}):
        state_path.write_text(json.dumps({**state, **forged}))
        with caplog.at_level(logging.WARNING, logger="merkle_memory.ledger"):
            again = sync(tmp_path)
        assert (again.leaves, again.offset, again.root) == (good.leaves, good.offset, good.root)
        assert "stale or forged state" in caplog.text
        caplog.clear()
    assert check(tmp_path)


def test_a_ledger_whose_head_names_another_last_entry_is_not_proven(tmp_path: Path) -> None:
    """Another ledger of the same length copied over this one (ledger.head still names this
    one's seq 3): verify reports the break at seq 3, and tree_head and prove_inclusion refuse
    with that reason; nothing is proven."""
    from merkle_memory.ledger import verify_ledger

    mine, other = Ledger(tmp_path / "a" / "ledger.jsonl"), Ledger(tmp_path / "b" / "ledger.jsonl")
    for i in range(3):
        mine.append(f"m{i}", f"{i:064x}", ts=1_700_000_000)
        other.append(f"m{i}", f"{i + 7:064x}", ts=1_700_000_000)
    mine.path.write_bytes(other.path.read_bytes())
    reason = "ledger.head records a different entry at seq 3"
    report = verify_ledger(mine.path, {})
    assert (report.broken_at, report.reason) == (3, reason)
    for attempt in (lambda: tree_head(mine.path, "o"), lambda: prove_inclusion(mine.path, "m1")):
        with pytest.raises(LedgerRollbackError) as caught:
            attempt()
        assert str(caught.value) == (
            f"{mine.path}: ledger chain broken at seq 3: {reason}; nothing is proven or signed"
        )

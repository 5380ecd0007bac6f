"""Accepting a refused rollback on the record (issue 16 item 2): ``ledger.recovery``.

The evidence (old head, lacking seqs with the hashes still known) is durable before the head
moves; a crash at any step leaves either the rollback still refused or the recovery done, and
a rerun finishes it with the same record.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from support import Crash, Recorder

from merkle_memory import canonical
from merkle_memory.errors import LedgerBrokenError, LedgerRollbackError
from merkle_memory.ledger import Entry, Ledger, read_head, verify_ledger
from merkle_memory.ledger.proofs import prove_inclusion, sync
from merkle_memory.ledger.recovery import (
    RECORD_KIND,
    RollbackRecovery,
    accept_rollback,
    recovery_records,
)
from merkle_memory.rfc6962 import hash_leaf
from merkle_memory.rfc6962 import root as merkle_root

TS = 1789851200.5


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _ledger(folder: Path, ids: list[str], ts: float = TS) -> Ledger:
    ledger = Ledger(folder / "ledger.jsonl")
    for mid in ids:
        ledger.append(mid, _digest(mid), ts=ts)
    return ledger


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _truncated(tmp_path: Path, keep: int = 2) -> tuple[Path, list[Entry]]:
    """Four entries, their sidecar synced, then the ledger cut back to ``keep`` lines."""
    ledger = _ledger(tmp_path, ["m1", "m2", "m3", "m4"])
    entries = list(ledger.entries())
    sync(ledger)
    path = ledger.path
    path.write_bytes(b"".join(_lines(path)[:keep]))
    return path, entries


def test_truncation_is_accepted_with_every_known_hash_on_record(tmp_path: Path) -> None:
    """A ledger cut from 4 entries to 2: the record holds the old head, the lacking seqs 3-4
    with the head's hash (seq 4) and the sidecar's leaf hashes, and the old tree's root;
    then the head names entry 2 and the next append is seq 3, chained to entry 2."""
    path, entries = _truncated(tmp_path)
    old_head = read_head(tmp_path / "ledger.head")
    assert old_head is not None
    with pytest.raises(LedgerRollbackError, match=r"ledger recover .* --accept-rollback"):
        Ledger(path).append("m5", _digest("m5"))
    done = accept_rollback(path, now=1796000000.25)
    record = tmp_path / "ledger.recovery-1.json"
    assert done == RollbackRecovery(record, old_head, 2, (3, 4), reused=False)
    leaves = [hash_leaf(e.line()) for e in entries]
    document = json.loads(record.read_bytes())
    assert record.read_bytes() == canonical.dumps(document) + b"\n"
    assert oct(record.stat().st_mode & 0o777) == "0o444"
    assert document == {
        "kind": RECORD_KIND,
        "accepted_at": 1796000000.25,
        "ledger": "ledger.jsonl",
        "reason": "went backwards: ledger.head records seq 4 but the file ends at seq 2",
        "head": {
            "seq": 4,
            "hash": entries[3].hash,
            "end": old_head.end,
            "fingerprint": old_head.fingerprint,
        },
        "on_disk": {
            "entries": 2,
            "last_hash": entries[1].hash,
            "size": path.stat().st_size,
            "torn_tail": None,
            "hash_at_head_seq": None,
        },
        "lacking": [
            {"seq": 3, "hash": None, "leaf_hash": leaves[2].hex()},
            {"seq": 4, "hash": entries[3].hash, "leaf_hash": leaves[3].hex()},
        ],
        "tree_root_at_head": merkle_root(leaves).hex(),
    }
    head = read_head(tmp_path / "ledger.head")
    assert head is not None and (head.seq, head.hash, head.end) == (
        2,
        entries[1].hash,
        path.stat().st_size,
    )
    after = Ledger(path).append("m5", _digest("m5"), ts=TS)
    assert (after.seq, after.prev) == (3, entries[1].hash)
    report = verify_ledger(path, {})
    assert (report.chain, report.entries) == ("intact", 3)
    proof = prove_inclusion(path, "m5")  # the emptied sidecar is rebuilt from the ledger
    assert (proof.leaf_index, proof.tree_size) == (2, 3)
    assert recovery_records(path) == [record]


def test_nothing_to_accept_writes_nothing(tmp_path: Path) -> None:
    """A ledger that holds its head's entry (or has no head) is left exactly as it was."""
    ledger = _ledger(tmp_path, ["m1", "m2"])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert accept_rollback(ledger.path) is None
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert accept_rollback(tmp_path / "none" / "ledger.jsonl") is None
    assert not (tmp_path / "none").exists()


def test_a_replaced_ledger_names_the_seqs_from_the_first_difference(tmp_path: Path) -> None:
    """A ledger restored from another history (same first 2 entries, other 3 and 4): the
    lacking seqs start where the sidecar's leaves and the ledger's first differ, and the
    record names the entry the ledger holds at the head's seq instead."""
    ours = _ledger(tmp_path, ["m1", "m2", "m3", "m4"])
    sync(ours)
    theirs = Ledger(tmp_path / "other" / "ledger.jsonl")
    for mid in ["m1", "m2"]:
        theirs.append(mid, _digest(mid), ts=TS)
    for mid in ["x3", "x4", "x5"]:
        theirs.append(mid, _digest(mid), ts=TS + 1)
    shutil.copyfile(theirs.path, ours.path)
    with pytest.raises(LedgerRollbackError, match="was replaced"):
        Ledger(ours.path).append("m6", _digest("m6"))
    done = accept_rollback(ours.path)
    assert done is not None and (done.on_disk_seq, done.lacking) == (5, (3, 4))
    document = json.loads(done.record.read_bytes())
    assert document["reason"].startswith("was replaced: it holds a different entry at seq 4")
    assert document["on_disk"]["hash_at_head_seq"] == list(theirs.entries())[3].hash
    assert Ledger(ours.path).append("m6", _digest("m6")).seq == 6


def test_an_emptied_ledger_loses_its_head(tmp_path: Path) -> None:
    """A ledger emptied entirely: the head is removed (no entry to name), the record lacks
    seqs 1-3, and the next append starts a new chain at seq 1."""
    ledger = _ledger(tmp_path, ["m1", "m2", "m3"])
    ledger.path.write_bytes(b"")
    done = accept_rollback(ledger.path)
    assert done is not None and (done.on_disk_seq, done.lacking) == (0, (1, 2, 3))
    assert not (tmp_path / "ledger.head").exists()
    assert Ledger(ledger.path).append("n1", _digest("n1")).seq == 1


def test_a_torn_tail_is_quarantined_after_the_record(tmp_path: Path) -> None:
    """A rollback with a torn fragment after the last whole line: the record counts the
    fragment's bytes; the fragment goes to ledger.torn; the head ends before it."""
    path, _entries = _truncated(tmp_path)
    size = path.stat().st_size
    with path.open("ab") as handle:
        handle.write(b'{"seq":3,"ts":17')
    done = accept_rollback(path)
    assert done is not None
    assert json.loads(done.record.read_bytes())["on_disk"]["torn_tail"] == 16
    assert path.stat().st_size == size
    assert (tmp_path / "ledger.torn").read_bytes().endswith(b'\n{"seq":3,"ts":17\n')
    head = read_head(tmp_path / "ledger.head")
    assert head is not None and (head.seq, head.end) == (2, size)


def test_a_broken_chain_is_never_accepted(tmp_path: Path) -> None:
    """A rollback onto a chain broken in the middle is refused and nothing is written."""
    path, _entries = _truncated(tmp_path, keep=3)
    lines = _lines(path)
    path.write_bytes(lines[0] + lines[2])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(LedgerBrokenError, match="broken at seq 2: sequence gap"):
        accept_rollback(path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_second_rollback_gets_the_next_record_number(tmp_path: Path) -> None:
    """Records are numbered 1, 2, ... and never overwritten."""
    path, _entries = _truncated(tmp_path, keep=3)
    first = accept_rollback(path)
    Ledger(path).append("m4", _digest("m4"))
    path.write_bytes(b"".join(_lines(path)[:1]))
    second = accept_rollback(path)
    assert first is not None and second is not None
    assert (first.record.name, second.record.name) == (
        "ledger.recovery-1.json",
        "ledger.recovery-2.json",
    )
    assert (second.head.seq, second.lacking) == (4, (2, 3, 4))
    assert recovery_records(path) == [first.record, second.record]


def test_the_evidence_is_durable_before_the_head_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Order: the record's temp file is written and fsynced, renamed into place and the
    folder fsynced; only then is the sidecar emptied and a slot of the head written and
    flushed, the last call."""
    path, _entries = _truncated(tmp_path)
    recorder = Recorder(monkeypatch)
    accept_rollback(path)
    monkeypatch.undo()
    calls = recorder.calls
    folder = tmp_path.name
    record = calls.index(("replace", "ledger.recovery-1.json~tmp->ledger.recovery-1.json"))
    assert calls[record - 1] == ("fsync", "ledger.recovery-1.json~tmp")
    assert calls[record + 1 : record + 3] == [("open", folder), ("fsync", folder)]
    head = calls.index(("pwrite", "ledger.head"))  # one slot in place (FORMAT.md 4.3)
    assert record < head
    assert calls[head + 1 :] == [("fdatasync", "ledger.head")]
    # The sidecar is read before (its leaf hashes are evidence), written only after.
    sidecar = [i for i, (op, name) in enumerate(calls) if "ledger.tree" in name and op != "open"]
    assert sidecar and record < min(sidecar) and max(sidecar) < head


def test_a_crash_at_any_step_is_finished_by_a_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash before each file-system call of a recovery leaves either the rollback still
    refused (the old head, the evidence written or not) or the recovery done; a rerun then
    finishes with exactly one record, the same one when it was already written."""
    base = tmp_path / "base"
    base.mkdir()
    _truncated(base)
    count = Recorder(monkeypatch)
    work = tmp_path / "count"
    shutil.copytree(base, work)
    accept_rollback(work / "ledger.jsonl")
    monkeypatch.undo()
    steps = len(count.calls)
    assert steps > 10
    for k in range(steps):
        work = tmp_path / f"crash-{k}"
        shutil.copytree(base, work)
        path = work / "ledger.jsonl"
        recorder = Recorder(monkeypatch, crash_at=k)
        with pytest.raises(Crash):
            accept_rollback(path)
        monkeypatch.undo()
        written = (work / "ledger.recovery-1.json").exists()
        head = read_head(work / "ledger.head")
        assert head is not None
        if head.seq == 4:  # the old head: still refused
            with pytest.raises(LedgerRollbackError):
                Ledger(path).append("x", _digest("x"))
        else:
            assert head.seq == 2 and written, k  # the head moved only after the evidence
        done = accept_rollback(path)
        if head.seq == 4:
            assert done is not None and done.reused == written, (k, recorder.calls[-3:])
        else:
            assert done is None  # finished already
        assert [p.name for p in recovery_records(path)] == ["ledger.recovery-1.json"]
        assert Ledger(path).append("m5", _digest("m5")).seq == 3

"""Crash consistency of the ledger: the last write cut at every byte offset (issue 7).

A crash during step 1 of an append (DESIGN section 4) leaves the file holding the entries
before it plus any prefix of the new line(s), with ``ledger.head`` still naming the entry
before. For every such prefix this checks: verify never raises and reports an intact chain,
with the documented torn tail (``torn_tail``: the fragment's offset and length, not an entry)
when the cut left part of a line; the next append quarantines the fragment to
``ledger.torn`` and continues the chain from the last complete entry; afterwards the chain
is intact and every acknowledged entry is still there.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from merkle_memory.errors import LedgerRollbackError
from merkle_memory.ledger import Entry, Ledger, verify_ledger
from merkle_memory.ledger.tenant import Tenant

# A memory id with 2-, 3- and 4-byte UTF-8 sequences, so cuts land inside characters.
TRICKY_ID = "café-✓-\U0001f600"


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """The crash states here are written by the test itself, so fsync adds nothing but time
    (the real fsync order is exercised by the SIGKILL tests)."""
    monkeypatch.setattr("os.fsync", lambda fd: None)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _build(folder: Path, ids: list[str]) -> Ledger:
    ledger = Ledger(folder / "ledger.jsonl")
    for mid in ids:
        ledger.append(mid, _digest(mid), ts=1789851200.5)
    return ledger


def _seqs(path: Path) -> list[int]:
    return [e.seq for e in Ledger(path).entries(check_hash=True)]


def _check_cut(
    base: Path,
    work: Path,
    prefix: bytes,
    new: list[Entry],
    cut: int,
    acked: list[Entry],
) -> None:
    """Restore ``base`` into ``work`` with the new lines cut at ``cut`` and check recovery.

    The records of the new entries exist (a record is durable before its line), so a new
    entry whose line survived whole reads sealed and one whose line did not reads unsealed.
    """
    new_lines = b"".join(e.line() + b"\n" for e in new)
    work.mkdir(exist_ok=True)
    (work / "ledger.head").write_bytes((base / "ledger.head").read_bytes())
    (work / "ledger.torn").unlink(missing_ok=True)
    path = work / "ledger.jsonl"
    path.write_bytes(prefix + new_lines[:cut])
    acked_ids = {e.memory_id: e.content_sha256 for e in acked}
    records = {**acked_ids, **{e.memory_id: e.content_sha256 for e in new}}
    report = verify_ledger(path, records)
    complete = new_lines[:cut].count(b"\n")
    fragment = new_lines[:cut].rsplit(b"\n", 1)[-1]
    whole_object = fragment.endswith(b"}") and fragment.count(b"{") == 1
    last_seq = acked[-1].seq
    assert report.chain == "intact", report
    assert report.entries == last_seq + complete + (1 if fragment and whole_object else 0)
    if fragment and not whole_object:
        # The documented torn state before the next write: a torn tail, not an entry.
        assert report.torn_tail == (len(prefix) + cut - len(fragment), len(fragment))
    else:
        assert report.torn_tail is None
    kept = last_seq + complete + (1 if fragment and whole_object else 0)
    assert report.sealed == kept
    assert report.altered == () and report.missing == ()
    assert report.unsealed == tuple(sorted(e.memory_id for e in new if e.seq > kept))
    # The next append recovers: quarantine, continue from the last complete entry.
    after = Ledger(path).append("after-crash", _digest("after-crash"))
    assert after.seq == kept + 1
    final = verify_ledger(path, {**records, "after-crash": after.content_sha256})
    assert final.ok and final.chain == "intact" and final.entries == kept + 1
    assert final.sealed == kept + 1
    assert _seqs(path) == list(range(1, kept + 2))
    torn = work / "ledger.torn"
    if fragment and not whole_object:
        data = torn.read_bytes()
        assert data.startswith(b"# quarantined ")
        assert data.endswith(b"\n" + fragment + b"\n")
    else:
        assert not torn.exists()


def test_ledger_last_line_cut_at_every_byte(tmp_path: Path) -> None:
    """Every prefix of the last appended line (multi-byte UTF-8 id) recovers with no loss.

    Crash points: one per byte offset 0..len(line) of the third entry's line.
    """
    base = tmp_path / "base"
    ledger = _build(base, ["m1", "m2"])
    acked = list(ledger.entries())
    prefix = (base / "ledger.jsonl").read_bytes()
    head_before = (base / "ledger.head").read_bytes()
    probe = tmp_path / "probe"
    shutil.copytree(base, probe)
    new_entry = Ledger(probe / "ledger.jsonl").append(TRICKY_ID, _digest(TRICKY_ID))
    new_line = new_entry.line() + b"\n"
    assert (probe / "ledger.jsonl").read_bytes() == prefix + new_line
    assert (base / "ledger.head").read_bytes() == head_before
    for cut in range(len(new_line) + 1):
        _check_cut(base, tmp_path / "work", prefix, [new_entry], cut, acked)
    assert len(new_line) > 250


def test_ledger_group_commit_cut(tmp_path: Path, soak: bool) -> None:
    """Prefixes of a 3-entry ``append_many`` write recover; whole lines in it are kept.

    CI cuts at every 3rd byte plus both sides of every newline (the boundaries where the
    verdict changes); the soak variant cuts at every byte.
    """
    base = tmp_path / "base"
    ledger = _build(base, ["m1"])
    acked = list(ledger.entries())
    prefix = (base / "ledger.jsonl").read_bytes()
    probe = tmp_path / "probe"
    shutil.copytree(base, probe)
    batch = Ledger(probe / "ledger.jsonl").append_many(
        [(f"g{i}", _digest(f"g{i}")) for i in range(3)], op="adopt"
    )
    new_lines = b"".join(e.line() + b"\n" for e in batch)
    cuts = set(range(0, len(new_lines) + 1, 1 if soak else 3))
    for pos, byte in enumerate(new_lines):
        if byte == 0x0A:
            cuts.update((pos - 1, pos, pos + 1, pos + 2))
    cuts.add(len(new_lines))
    for cut in sorted(c for c in cuts if 0 <= c <= len(new_lines)):
        _check_cut(base, tmp_path / "work", prefix, batch, cut, acked)


def test_first_append_cut_at_every_byte(tmp_path: Path) -> None:
    """A crash during the very first append (no head yet) recovers from every prefix."""
    probe = tmp_path / "probe"
    first = Ledger(probe / "ledger.jsonl").append("m1", _digest("m1"))
    line = first.line() + b"\n"
    work = tmp_path / "work"
    work.mkdir()
    for cut in range(len(line)):
        for name in ("ledger.head", "ledger.torn"):
            (work / name).unlink(missing_ok=True)
        (work / "ledger.jsonl").write_bytes(line[:cut])
        report = verify_ledger(work / "ledger.jsonl", {})
        if cut == 0:
            assert report.chain == "empty" and report.ok
        elif cut == len(line) - 1:
            assert report.chain == "intact" and report.entries == 1
        else:  # a torn tail at offset 0: no entry yet, nothing broken
            assert (report.chain, report.ok, report.torn_tail) == ("empty", True, (0, cut))
        entry = Ledger(work / "ledger.jsonl").append("m2", _digest("m2"))
        assert entry.seq == (2 if cut == len(line) - 1 else 1)
        assert verify_ledger(work / "ledger.jsonl", {}).chain == "intact"


def test_crash_between_line_and_head_is_harmless(tmp_path: Path) -> None:
    """Line durable, head one behind (crash in step 2), temp head left over: all recover."""
    ledger = _build(tmp_path, ["m1", "m2"])
    head_two = (tmp_path / "ledger.head").read_bytes()
    ledger.append("m3", _digest("m3"))
    (tmp_path / "ledger.head").write_bytes(head_two)
    (tmp_path / ".ledger.head.abc123.tmp").write_bytes(b'{"hash":"')
    report = verify_ledger(tmp_path / "ledger.jsonl", {})
    assert report.chain == "intact" and report.entries == 3
    entry = Ledger(tmp_path / "ledger.jsonl").append("m4", _digest("m4"))
    assert entry.seq == 4
    assert b'"seq":4' in (tmp_path / "ledger.head").read_bytes()


def test_crash_during_quarantine_is_recovered_by_the_next_append(tmp_path: Path) -> None:
    """Fragment copied to ledger.torn but the ledger not yet truncated: the next append
    quarantines it again (a second copy, no loss) and continues the chain."""
    ledger = _build(tmp_path, ["m1"])
    fragment = b'{"content_sha256":"ab'
    with (tmp_path / "ledger.jsonl").open("ab") as handle:
        handle.write(fragment)
    (tmp_path / "ledger.torn").write_bytes(
        b"# quarantined 1.000 from offset 0\n" + fragment + b"\n"
    )
    assert ledger.append("m2", _digest("m2")).seq == 2
    assert (tmp_path / "ledger.torn").read_bytes().count(fragment) == 2
    assert verify_ledger(tmp_path / "ledger.jsonl", {}).chain == "intact"


def test_truncation_below_head_is_refused_not_repaired(tmp_path: Path) -> None:
    """Cutting an acknowledged line (below the head) is a rollback: append refuses, verify
    names the first missing seq, and no byte is written."""
    _build(tmp_path, ["m1", "m2", "m3"])
    data = (tmp_path / "ledger.jsonl").read_bytes()
    cut = data.rstrip(b"\n").rfind(b"\n") + 1 + 10  # inside line 3 (acknowledged)
    (tmp_path / "ledger.jsonl").write_bytes(data[:cut])
    report = verify_ledger(tmp_path / "ledger.jsonl", {})
    assert report.chain == "broken" and report.broken_at == 3
    with pytest.raises(LedgerRollbackError):
        Ledger(tmp_path / "ledger.jsonl").append("m4", _digest("m4"))
    assert (tmp_path / "ledger.jsonl").read_bytes() == data[:cut]
    assert not (tmp_path / "ledger.torn").exists()


def test_tenant_record_written_but_line_torn(tmp_path: Path) -> None:
    """Tenant.save crashed after the record file, during its line: the record reads unsealed
    (never altered or missing), and ``seal`` adopts it after quarantining the fragment."""
    tenant = Tenant(tmp_path / "t")
    tenant.save({"id": "m1", "summary": "one"})
    tenant.save({"id": "m2", "summary": "two"})
    probe = tmp_path / "probe"
    shutil.copytree(tmp_path / "t", probe)
    entry = Tenant(probe).save({"id": "m3", "summary": "three ✓"})
    line = entry.line() + b"\n"
    prefix = (tmp_path / "t" / "ledger.jsonl").read_bytes()
    record = (probe / "memory" / "m3.json").read_bytes()
    for cut in range(0, len(line), 7):
        work = tmp_path / "work"
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(tmp_path / "t", work)
        (work / "memory" / "m3.json").write_bytes(record)
        (work / "ledger.jsonl").write_bytes(prefix + line[:cut])
        report = Tenant(work).verify()
        assert report.unsealed == ("m3",) and report.sealed == 2
        assert report.altered == () and report.missing == ()
        sealed = Tenant(work).seal()
        assert sealed.sealed_ids == ("m3",)
        final = Tenant(work).verify()
        assert final.ok and final.sealed == 3 and final.chain == "intact"

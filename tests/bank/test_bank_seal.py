"""Tests of sealing in the memory bank: a crash between write and seal, ``MemoryBank.seal``,
consolidate and migrate reruns, and verify racing a save (DESIGN section 5, last bullet)."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support import T0, ledger_report, mem
from support import ledger_lines as lines

from merkle_memory._progress import ProgressCallback
from merkle_memory.bank import BankProblem, MemoryBank
from merkle_memory.bank._report import Tally
from merkle_memory.bank.memory import Memory
from merkle_memory.cli import main
from merkle_memory.errors import BankError, LedgerBrokenError
from merkle_memory.ledger import Ledger, SealReport, VerifyReport, verify_ledger


def summary(bank: MemoryBank) -> list[tuple[int, str, str]]:
    """(seq, op, memory_id) of every ledger line; content_sha256 is checked to equal the id."""
    out = []
    for e in lines(bank):
        assert e["content_sha256"] == e["memory_id"]
        out.append((e["seq"], e["op"], e["memory_id"]))
    return out


def write_unsealed(bank: MemoryBank, memory: Memory, archived: bool = False) -> Path:
    """Place a memory file as a save that died before its seal would leave it."""
    folder = bank.archive_dir if archived else bank.active_dir
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / memory.file_name
    path.write_bytes(memory.to_bytes())
    path.chmod(0o444)
    return path


def crash_on_seal(monkeypatch: pytest.MonkeyPatch, after: int = 0) -> None:
    """Make ``MemoryBank._seal`` die (KeyboardInterrupt) after ``after`` successful seals."""
    real = MemoryBank._seal
    calls = {"n": 0}

    def dying(self: MemoryBank, memory_id: str) -> None:
        calls["n"] += 1
        if calls["n"] > after:
            raise KeyboardInterrupt("simulated crash between write and seal")
        real(self, memory_id)

    monkeypatch.setattr(MemoryBank, "_seal", dying)


# --- gap 1: a re-save seals ------------------------------------------------------------------


def test_resave_seals_a_memory_a_crash_left_unsealed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save that dies after its file is durable leaves it unsealed; saving it again seals it
    once (op save, next seq); a third save appends nothing."""
    bank = MemoryBank(tmp_path)
    a, b = mem("a"), mem("b", 1)
    bank.save(a)
    crash_on_seal(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        bank.save(b)
    monkeypatch.undo()
    assert (tmp_path / "memories" / b.file_name).read_bytes() == b.to_bytes()
    before = bank.verify()
    assert before.ledger == ledger_report(entries=1, sealed=1, unsealed=[b.id])
    assert bank.save(b) == b.id
    assert summary(bank) == [(1, "save", a.id), (2, "save", b.id)]
    assert bank.verify().ledger == ledger_report(entries=2, sealed=2)
    assert bank.save(b) == b.id and bank.save(a) == a.id
    assert len(lines(bank)) == 2


def test_resave_seals_an_unsealed_archived_memory_and_leaves_it_archived(
    tmp_path: Path,
) -> None:
    """An unsealed file in archive/ is sealed by a re-save and stays archived."""
    bank = MemoryBank(tmp_path)
    a = mem("a")
    bank.save(a)
    old = mem("old", -5)
    write_unsealed(bank, old, archived=True)
    assert bank.save(old) == old.id
    assert summary(bank) == [(1, "save", a.id), (2, "save", old.id)]
    assert bank.locate(old.id).archived
    report = bank.verify()
    assert (report.active, report.archived) == (1, 1)
    assert report.ledger == ledger_report(entries=2, sealed=2)


def test_resave_after_a_torn_seal_quarantines_it_and_seals(tmp_path: Path) -> None:
    """A seal cut mid-line (its fragment even names the id) is no entry: the re-save moves
    the fragment to ledger.torn and appends a whole entry."""
    bank = MemoryBank(tmp_path)
    a, b = mem("a"), mem("b", 1)
    bank.save(a)
    write_unsealed(bank, b)
    bid = b.id.encode()
    fragment = b'{"content_sha256":"' + bid + b'","hash":"ab","memory_id":"' + bid + b'","op":"sa'
    with open(bank.ledger_path, "ab") as handle:
        handle.write(fragment)
    assert bank.save(b) == b.id
    assert summary(bank) == [(1, "save", a.id), (2, "save", b.id)]
    assert fragment in (tmp_path / "ledger.torn").read_bytes()
    assert bank.verify().ledger == ledger_report(entries=2, sealed=2)


def test_resave_finds_an_entry_in_a_non_canonical_line(tmp_path: Path) -> None:
    """An entry written with spaces (the anchor's json.dumps form) misses the fast byte
    search; the verify then finds it, so the re-save appends nothing."""
    bank = MemoryBank(tmp_path)
    a = mem("a")
    bank.save(a)
    entry = lines(bank)[0]
    bank.ledger_path.write_text(json.dumps(entry) + "\n", encoding="utf-8")
    assert f'"memory_id": "{a.id}"' in bank.ledger_path.read_text(encoding="utf-8")
    assert bank.verify().ledger == ledger_report(entries=1, sealed=1)
    assert bank.save(a) == a.id
    assert len(lines(bank)) == 1


def test_racing_resaves_and_seals_seal_an_id_once(tmp_path: Path) -> None:
    """Six threads (separate bank objects) re-saving and sealing one unsealed memory append
    exactly one entry for it."""
    bank = MemoryBank(tmp_path)
    a, b = mem("a"), mem("b", 1)
    bank.save(a)
    write_unsealed(bank, b)
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def worker(n: int) -> None:
        try:
            start.wait()
            other = MemoryBank(tmp_path)
            if n % 2:
                other.seal()
            else:
                other.save(b)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [mid for _seq, _op, mid in summary(bank)] == [a.id, b.id]
    assert bank.verify().ledger == ledger_report(entries=2, sealed=2)


# --- gap 1: MemoryBank.seal --------------------------------------------------------------------


def test_seal_adopts_every_valid_unsealed_file_in_one_group_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """seal adopts the unsealed memories that verify, active and archived, sorted, with op
    adopt in one append_many call; a tampered unsealed file is skipped, never sealed."""
    bank = MemoryBank(tmp_path)
    a = mem("a")
    bank.save(a)
    unsealed = [mem("b", 1), mem("c", 2), mem("d", 3)]
    write_unsealed(bank, unsealed[0])
    write_unsealed(bank, unsealed[1], archived=True)
    write_unsealed(bank, unsealed[2])
    bad = mem("tampered", 4)
    bad_path = write_unsealed(bank, bad)
    bad_path.chmod(0o644)
    bad_path.write_text(bad_path.read_text(encoding="utf-8").replace("tampered", "tamp3red"))
    calls: list[tuple[list[tuple[str, str]], str]] = []
    real = Ledger.append_many

    def spy(self: Ledger, items: Any, *, op: str = "save", ts: float | None = None) -> Any:
        pairs = list(items)
        calls.append((pairs, op))
        return real(self, pairs, op=op, ts=ts)

    monkeypatch.setattr(Ledger, "append_many", spy)
    problems: list[BankProblem] = []
    result = bank.seal(problems=problems)
    monkeypatch.undo()
    adopted = sorted(m.id for m in unsealed)
    assert calls == [([(i, i) for i in adopted], "adopt")]
    assert isinstance(result, SealReport)
    assert result.sealed_ids == tuple(adopted) and result.sealed_now == 3
    assert [p.path for p in problems] == [f"memories/{bad.file_name}"]
    assert result.skipped == (bad.id,)
    assert [mid for mid, _reason in result.skip_reasons] == [bad.id]
    expected = ledger_report(entries=4, sealed=4, unsealed=[bad.id])
    assert result.report.to_dict() == expected and result.ok
    assert result.to_dict() == {**expected, "sealed_now": 3, "sealed_ids": adopted}
    assert summary(bank) == [(1, "save", a.id)] + [
        (seq, "adopt", mid) for seq, mid in enumerate(adopted, 2)
    ]
    assert len({e["ts"] for e in lines(bank)[1:]}) == 1  # one group commit, one timestamp
    again = bank.seal()
    assert again.sealed_ids == () and again.report.to_dict() == expected
    assert len(lines(bank)) == 4
    report = bank.verify()
    assert report.ledger == expected and report.tampered == (f"memories/{bad.file_name}",)


def test_seal_command_counts_the_files_it_did_not_seal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`bank seal` warns with the number of files that do not verify (all of them, whatever
    their ledger state), in text and with --json; the JSON document keeps its three keys."""
    bank = MemoryBank(tmp_path)
    a = mem("a")
    bank.save(a)
    sealed_path = tmp_path / "memories" / a.file_name
    sealed_path.chmod(0o644)
    sealed_path.write_text(sealed_path.read_text(encoding="utf-8").replace('"a"', '"A"'))
    write_unsealed(bank, mem("b", 1))
    (tmp_path / "memories" / "notes.txt").write_text("x", encoding="utf-8")
    warning = (
        "warning: 2 file(s) do not verify and were not sealed; run `merkle-memory bank verify`\n"
    )
    assert main(["bank", "seal", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out == f"{mem('b', 1).id}\n"
    assert warning in err
    assert main(["bank", "seal", str(tmp_path), "--json"]) == 1
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert list(doc) == ["sealed_now", "sealed_ids", "ledger"]
    assert (doc["sealed_now"], doc["sealed_ids"]) == (0, [])
    assert doc["ledger"] == ledger_report(ok=False, entries=2, sealed=1, altered=[a.id])
    assert warning in err


def test_seal_never_reseals_a_tampered_sealed_file(tmp_path: Path) -> None:
    """A sealed memory whose file was changed stays altered: seal appends nothing."""
    bank = MemoryBank(tmp_path)
    a = mem("a")
    bank.save(a)
    path = tmp_path / "memories" / a.file_name
    path.chmod(0o644)
    path.write_text(path.read_text(encoding="utf-8").replace('"a"', '"A"'), encoding="utf-8")
    result = bank.seal()
    assert result.sealed_ids == () and not result.ok
    assert result.report.to_dict() == ledger_report(ok=False, entries=1, altered=[a.id])
    assert len(lines(bank)) == 1


def test_seal_refuses_a_broken_chain_and_appends_nothing(tmp_path: Path) -> None:
    """On a broken chain seal raises LedgerBrokenError carrying the VerifyReport; the ledger
    is byte-for-byte unchanged and the unsealed memory stays unsealed."""
    bank = MemoryBank(tmp_path)
    a, b = mem("a"), mem("b", 1)
    bank.save(a)
    bank.save(b)
    c = mem("c", 2)
    write_unsealed(bank, c)
    raw = bank.ledger_path.read_bytes()
    first, rest = raw.split(b"\n", 1)
    tampered = first.replace(b'"op":"save"', b'"op":"adopt"') + b"\n" + rest
    bank.ledger_path.write_bytes(tampered)
    with pytest.raises(LedgerBrokenError, match="refusing to adopt") as caught:
        bank.seal()
    report = caught.value.report
    assert isinstance(report, VerifyReport)
    assert (report.chain, report.broken_at, report.unsealed) == ("broken", 1, (c.id,))
    assert report.reason == "entry hash does not match its contents"
    assert bank.ledger_path.read_bytes() == tampered


def test_seal_of_an_absent_bank_and_an_empty_one(tmp_path: Path) -> None:
    """No bank folder, or a folder that is not a bank (no memories/, no ledger.jsonl):
    BankError, nothing created. An empty bank (an empty memories/): nothing sealed, empty
    chain."""
    with pytest.raises(BankError, match="no memory bank"):
        MemoryBank(tmp_path / "absent").seal()
    assert not (tmp_path / "absent").exists()
    with pytest.raises(BankError, match=r"^no memory bank at "):
        MemoryBank(tmp_path).seal()
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "memories").mkdir()
    result = MemoryBank(tmp_path).seal()
    assert result.sealed_ids == () and result.report.to_dict() == ledger_report(chain="empty")


# --- gap 1: consolidate and migrate reruns ----------------------------------------------------


def test_consolidate_rerun_seals_a_new_memory_a_crash_left_unsealed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash between writing the consolidated memory and sealing it: the rerun finds the
    memory, seals it (op save), archives the originals; nothing is left unsealed."""
    bank = MemoryBank(tmp_path)
    originals = [mem("x"), mem("y", 1)]
    ids = [bank.save(m) for m in originals]
    crash_on_seal(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        bank.consolidate(ids, "x and y", timestamp=T0)
    monkeypatch.undo()
    new = Memory(
        "fact", "project", "x and y", timestamp=T0, links=[f"mm://memory/{i}" for i in ids]
    )
    assert bank.verify().ledger == ledger_report(entries=2, sealed=2, unsealed=[new.id])
    assert bank.consolidate(ids, "x and y", timestamp=T0 + timedelta(days=1)) == new.id
    assert summary(bank) == [(1, "save", ids[0]), (2, "save", ids[1]), (3, "save", new.id)]
    report = bank.verify()
    assert (report.active, report.archived) == (1, 2)
    assert report.ledger == ledger_report(entries=3, sealed=3)


def _legacy(folder: Path, name: str, legacy_id: str, content: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    obj = {
        "id": legacy_id,
        "status": "active",
        "type": "fact",
        "scope": "project",
        "content": content,
        "tags": [],
        "timestamp": "2026-01-01T00:00:00Z",
        "links": [],
    }
    (folder / name).write_text(json.dumps(obj), encoding="utf-8")


def test_migrate_rerun_seals_a_file_a_crash_left_unsealed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash after the first migrated file is written but before it is sealed: the rerun
    finds its twin, seals it, migrates the rest; every memory sealed exactly once."""
    _legacy(tmp_path / "memories", "one.json", "legacy-1", "first")
    _legacy(tmp_path / "memories", "two.json", "legacy-2", "second")
    ts = datetime(2026, 1, 1, tzinfo=UTC)
    first = Memory("fact", "project", "first", timestamp=ts)
    second = Memory("fact", "project", "second", timestamp=ts)
    bank = MemoryBank(tmp_path)
    crash_on_seal(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        bank.migrate()
    monkeypatch.undo()
    assert (tmp_path / "memories" / first.file_name).exists()
    assert bank.verify().ledger is not None
    report = bank.migrate()
    assert report.migrated == 2
    assert [(f.id, f.twin_existed) for f in report.files] == [(first.id, True), (second.id, False)]
    assert summary(bank) == [(1, "save", first.id), (2, "save", second.id)]
    verified = bank.verify()
    assert verified.ok and verified.ledger == ledger_report(entries=2, sealed=2)
    assert bank.migrate().migrated == 0 and len(lines(bank)) == 2


# --- gap 2: verify racing a save ---------------------------------------------------------------


def test_verify_racing_a_save_reports_no_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save by a second bank object landing right after verify's scan (its file unseen, its
    line appended) is never reported missing: verify walks the ledger snapshot it took before
    scanning. The naive order (scan, then read the ledger) does report it missing."""
    bank = MemoryBank(tmp_path)
    a, b = mem("a"), mem("b", 1)
    bank.save(a)
    real = MemoryBank._tally_shared
    scanned: list[dict[str, str]] = []

    def scan_then_a_save(target: MemoryBank, progress: ProgressCallback | None = None) -> Tally:
        found = real(target, progress)
        MemoryBank(tmp_path).save(b)  # another writer, between the scan and the ledger walk
        scanned.append(dict(found.testimony))
        return found

    monkeypatch.setattr(MemoryBank, "_tally_shared", scan_then_a_save)
    report = bank.verify()
    assert report.ok and (report.active, report.archived) == (1, 0)
    assert report.ledger == ledger_report(entries=1, sealed=1)  # b's line is past the snapshot
    assert summary(bank) == [(1, "save", a.id), (2, "save", b.id)]
    naive = verify_ledger(bank.ledger_path, scanned[0])  # the ledger read after the scan
    assert naive.missing == (b.id,)
    monkeypatch.undo()
    assert bank.verify().ledger == ledger_report(entries=2, sealed=2)


def test_verify_with_a_save_between_snapshot_and_scan_reads_unsealed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save landing after the ledger snapshot but before the scan: its file is scanned, its
    line is past the snapshot, so it reads unsealed (not a failure)."""
    bank = MemoryBank(tmp_path)
    a, b = mem("a"), mem("b", 1)
    bank.save(a)
    real = MemoryBank._tally_shared

    def a_save_then_scan(target: MemoryBank, progress: ProgressCallback | None = None) -> Tally:
        MemoryBank(tmp_path).save(b)
        return real(target, progress)

    monkeypatch.setattr(MemoryBank, "_tally_shared", a_save_then_scan)
    report = bank.verify()
    assert report.ok and report.active == 2
    assert report.ledger == ledger_report(entries=1, sealed=1, unsealed=[b.id])


def test_archived_memories_are_never_missing(tmp_path: Path) -> None:
    """Archiving every memory (directly and by consolidation) keeps them all sealed."""
    bank = MemoryBank(tmp_path)
    ids = [bank.save(mem(c, i)) for i, c in enumerate("abc")]
    bank.archive(ids[0])
    new = bank.consolidate(ids[1:], "b+c", timestamp=T0)
    bank.archive(new)
    report = bank.verify()
    assert report.ok and (report.active, report.archived) == (0, 4)
    assert report.ledger == ledger_report(entries=4, sealed=4)

"""Tests of merkle_memory.bank: save, get, list, archive, verify and the ledger seal."""

from __future__ import annotations

import json
import os
import stat
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import T0, ledger_lines, mem

from merkle_memory import canonical
from merkle_memory.bank import MemoryBank
from merkle_memory.bank.memory import Memory
from merkle_memory.errors import BankError, MemoryNotFoundError, TamperedMemoryError
from merkle_memory.strategies import memory_fields


def writable(path: Path) -> None:
    """Make a read-only memory file writable, to tamper with it."""
    path.chmod(0o644)


def test_save_writes_read_only_canonical_file_and_seals_it(tmp_path: Path) -> None:
    """save writes memories/<name> = RFC 8785 of to_dict + newline, 0o444, sealed once."""
    bank = MemoryBank(tmp_path / "bank")
    memory = mem("Project uses FastAPI", tags=["cli"])
    assert bank.save(memory) == memory.id
    path = tmp_path / "bank" / "memories" / memory.file_name
    assert path.read_bytes() == canonical.dumps(memory.to_dict()) + b"\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    lines = ledger_lines(bank)
    assert [(e["seq"], e["op"], e["memory_id"], e["content_sha256"]) for e in lines] == [
        (1, "save", memory.id, memory.id)
    ]
    assert bank.get(memory.id) == memory
    assert memory.id in bank and "0" * 64 not in bank and "x" not in bank


def test_saving_an_identical_memory_is_a_no_op(tmp_path: Path) -> None:
    """A second save of the same memory returns the same id, writes and seals nothing."""
    bank = MemoryBank(tmp_path)
    memory = mem("x")
    bank.save(memory)
    before = sorted(os.listdir(tmp_path / "memories"))
    assert bank.save(Memory("fact", "project", "x", timestamp=T0)) == memory.id
    assert sorted(os.listdir(tmp_path / "memories")) == before
    assert len(ledger_lines(bank)) == 1


def test_resaving_a_changed_memory_gives_a_new_file_and_leaves_the_old_one(
    tmp_path: Path,
) -> None:
    """A changed memory has a new id and file; the old file keeps its bytes (anchor bug c)."""
    bank = MemoryBank(tmp_path)
    old = mem("draft")
    bank.save(old)
    old_path = tmp_path / "memories" / old.file_name
    old_bytes, old_mtime = old_path.read_bytes(), old_path.stat().st_mtime_ns
    from dataclasses import replace

    new = replace(old, content="approved")
    assert bank.save(new) == new.id != old.id
    assert old_path.read_bytes() == old_bytes and old_path.stat().st_mtime_ns == old_mtime
    assert bank.get(old.id) == old and bank.get(new.id) == new
    assert bank.verify().ok


def test_edge_content_round_trips_through_the_bank(tmp_path: Path) -> None:
    """Whitespace at the edges and `---` survive save/get and verify (anchor bugs a, b)."""
    bank = MemoryBank(tmp_path)
    contents = ["  padded  \n", "---\nfront: matter\n---\n", "\n", "", "a|b"]
    ids = [bank.save(mem(c, i)) for i, c in enumerate(contents)]
    assert [bank.get(i).content for i in ids] == contents
    report = bank.verify()
    assert report.ok and report.active == 5 and report.ledger is not None
    assert report.ledger["sealed"] == 5


def test_listing_active_archived_and_all(tmp_path: Path) -> None:
    """memories() lists active, archived or all, sorted by (timestamp, id)."""
    bank = MemoryBank(tmp_path)
    a, b, c = mem("a", 2), mem("b", 1), mem("c", 3)
    for m in (a, b, c):
        bank.save(m)
    assert bank.archive(b.id) == f"memories/archive/{b.file_name}"
    assert [s.memory for s in bank.memories()] == [a, c]
    assert [s.memory for s in bank.memories(archived=True)] == [b]
    everything = bank.memories(archived=None)
    assert [(s.memory, s.status) for s in everything] == [
        (b, "archived"),
        (a, "active"),
        (c, "active"),
    ]
    assert everything[0].to_dict() == {
        **b.to_dict(),
        "status": "archived",
        "file": f"memories/archive/{b.file_name}",
    }


def test_archive_moves_without_rewriting_and_verify_stays_ok(tmp_path: Path) -> None:
    """archive = os.replace into archive/ (same inode and bytes); no ledger 'missing'."""
    bank = MemoryBank(tmp_path)
    memory = mem("x")
    bank.save(memory)
    source = tmp_path / "memories" / memory.file_name
    inode, data = source.stat().st_ino, source.read_bytes()
    bank.archive(memory.id)
    target = tmp_path / "memories" / "archive" / memory.file_name
    assert not source.exists()
    assert target.stat().st_ino == inode and target.read_bytes() == data
    assert bank.archive(memory.id) == f"memories/archive/{memory.file_name}"  # no-op
    report = bank.verify()
    assert report.ok and (report.active, report.archived) == (0, 1)
    assert report.ledger is not None and report.ledger["missing"] == []
    assert bank.locate(memory.id).archived


def test_archive_and_get_errors(tmp_path: Path) -> None:
    """Unknown ids raise MemoryNotFoundError; malformed ids raise BankError before any I/O."""
    bank = MemoryBank(tmp_path)
    bank.save(mem("x"))
    with pytest.raises(MemoryNotFoundError) as caught:
        bank.archive("a" * 64)
    assert caught.value.memory_id == "a" * 64 and isinstance(caught.value, LookupError)
    for bad in ("../../etc/passwd", "A" * 64, "a" * 63, "", "a" * 64 + "/"):
        with pytest.raises(BankError, match="not a memory id"):
            bank.get(bad)
        with pytest.raises(BankError, match="not a memory id"):
            bank.archive(bad)
    with pytest.raises(BankError, match="no memory bank"):
        MemoryBank(tmp_path / "absent").verify()
    with pytest.raises(BankError, match="takes a Memory"):
        bank.save({"type": "fact"})  # type: ignore[arg-type]


def test_verify_names_every_kind_of_tampered_file(tmp_path: Path) -> None:
    """Each kind of bad file is named once with its reason; good files still count."""
    bank = MemoryBank(tmp_path)
    memories = [mem(f"m{i}", i) for i in range(6)]
    for m in memories:
        bank.save(m)
    folder = tmp_path / "memories"
    paths = [folder / m.file_name for m in memories]
    for p in paths:
        writable(p)
    paths[0].write_bytes(b"{not json")
    obj = json.loads(paths[1].read_text())
    obj["content"] = "changed"
    paths[1].write_text(json.dumps(obj))
    obj = json.loads(paths[2].read_text())
    obj["extra"] = 1
    paths[2].write_text(json.dumps(obj))
    renamed = folder / memories[3].file_name.replace("_fact_", "_note_")
    paths[3].rename(renamed)
    (folder / "notes.txt").write_text("hello")
    (folder / "archive" / "sub").mkdir()
    report = bank.verify()
    kinds = {p.path: p.kind for p in report.problems}
    assert kinds == {
        f"memories/{memories[0].file_name}": "unparseable",
        f"memories/{memories[1].file_name}": "content_mismatch",
        f"memories/{memories[2].file_name}": "not_a_memory",
        f"memories/{renamed.name}": "name_mismatch",
        "memories/notes.txt": "unexpected_file",
        "memories/archive/sub": "unexpected_file",
    }
    assert not report.ok and report.active == 2
    assert report.ledger is not None
    # Tampered files named for their id testify "" -> altered; the renamed one too.
    assert report.ledger["altered"] == sorted(m.id for m in memories[:4])
    assert report.ledger["missing"] == []
    assert set(report.tampered) == set(kinds)
    with pytest.raises(TamperedMemoryError, match="content does not match id"):
        bank.get(memories[1].id)
    problems: list[Any] = []
    assert [s.memory for s in bank.memories(problems=problems)] == memories[4:]
    assert sorted(p.path for p in problems) == sorted(kinds)  # both folders are checked


def test_deleted_memory_is_missing_in_the_ledger(tmp_path: Path) -> None:
    """A sealed memory whose file is gone makes verify fail with the ledger's 'missing'."""
    bank = MemoryBank(tmp_path)
    a, b = mem("a"), mem("b", 1)
    bank.save(a)
    bank.save(b)
    (tmp_path / "memories" / a.file_name).unlink()
    report = bank.verify()
    assert not report.ok and report.problems == ()
    assert report.ledger is not None and report.ledger["missing"] == [a.id]


def test_unsealed_memory_is_reported_but_not_a_failure(tmp_path: Path) -> None:
    """A valid file with no ledger entry (crash before the seal) is 'unsealed', ok stays."""
    bank = MemoryBank(tmp_path)
    bank.save(mem("a"))
    stray = mem("b", 1)
    (tmp_path / "memories" / stray.file_name).write_bytes(stray.to_bytes())
    report = bank.verify()
    assert report.ok and report.ledger is not None and report.ledger["unsealed"] == [stray.id]


def test_saving_over_a_tampered_twin_is_refused(tmp_path: Path) -> None:
    """save never overwrites a file carrying the id with other bytes."""
    bank = MemoryBank(tmp_path)
    memory = mem("x")
    bank.save(memory)
    path = tmp_path / "memories" / memory.file_name
    writable(path)
    path.write_bytes(b"garbage")
    with pytest.raises(TamperedMemoryError, match="differs"):
        bank.save(memory)
    assert path.read_bytes() == b"garbage"


@given(memory_fields(max_tags=3, max_links=2), st.data())
@settings(max_examples=40, deadline=None)
def test_any_change_to_a_value_in_a_file_makes_verify_name_it(
    fields: dict[str, Any], data: st.DataObject
) -> None:
    """Replacing any one value of a memory file by another JSON value is always detected."""
    memory = Memory(**fields)
    with tempfile.TemporaryDirectory() as tmp:
        bank = MemoryBank(tmp)
        bank.save(memory)
        path = Path(tmp) / "memories" / memory.file_name
        obj = memory.to_dict()
        key = data.draw(st.sampled_from(sorted(obj)))
        value = data.draw(
            st.one_of(
                st.none(),
                st.booleans(),
                st.integers(-5, 5),
                st.text(max_size=5),
                st.lists(st.text(max_size=3), max_size=2),
                st.just(obj[key] + " " if isinstance(obj[key], str) else ["x"]),
            )
        )
        if canonical.dumps(value) == canonical.dumps(obj[key]):
            value = [value]
        obj[key] = value
        writable(path)
        path.write_bytes(canonical.dumps(obj))
        report = bank.verify()
        assert [p.path for p in report.problems] == [f"memories/{memory.file_name}"]
        assert not report.ok


@given(memory_fields())
@settings(max_examples=40, deadline=None)
def test_save_then_get_round_trips_exactly(fields: dict[str, Any]) -> None:
    """get(save(m)) == m, with the same file bytes."""
    memory = Memory(**fields)
    with tempfile.TemporaryDirectory() as tmp:
        bank = MemoryBank(tmp)
        loaded = bank.get(bank.save(memory))
        assert loaded == memory and loaded.to_bytes() == memory.to_bytes()
        assert loaded.content == fields["content"]


def test_concurrent_saves_from_threads_all_land_and_seal(tmp_path: Path) -> None:
    """Four threads saving distinct memories: all files present, one intact chain."""
    bank = MemoryBank(tmp_path)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(5):
                MemoryBank(tmp_path).save(mem(f"t{n}-{i}", i))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    report = bank.verify()
    assert report.ok and report.active == 20
    assert report.ledger is not None and report.ledger["chain"] == "intact"
    assert report.ledger["sealed"] == 20


def test_one_bank_object_shared_by_threads(tmp_path: Path) -> None:
    """docs/THREAT_MODEL.md "Threads": a MemoryBank holds no open file between calls, so four
    threads saving and archiving through one object lose nothing and leave a bank that
    verifies, with one ledger entry per memory."""
    bank = MemoryBank(tmp_path / "bank")
    bank.save(mem("first"))  # the bank exists before the threads start
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for i in range(15):
                memory_id = bank.save(mem(f"w{worker} m{i}", minutes=i))
                if i % 5 == 0:
                    bank.archive(memory_id)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    report = bank.verify()
    assert report.ok and report.to_dict()["ledger"]["ok"]
    assert len(bank.memories(archived=False)) == 61 - 12
    assert len(bank.memories(archived=True)) == 12
    assert len(ledger_lines(bank)) == 61

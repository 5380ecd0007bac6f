"""Tests of MemoryBank.consolidate: links, archiving, crash between steps, rerun."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from support import T0, mem

from merkle_memory.bank import MemoryBank
from merkle_memory.bank.memory import Memory
from merkle_memory.errors import (
    BankError,
    MemoryFormatError,
    MemoryNotFoundError,
    TamperedMemoryError,
)


def seeded(tmp_path: Path) -> tuple[MemoryBank, list[Memory]]:
    """A bank with three active memories."""
    bank = MemoryBank(tmp_path)
    originals = [mem("uses FastAPI", 0), mem("uses uvicorn", 1), mem("uses pydantic", 2)]
    for m in originals:
        bank.save(m)
    return bank, originals


def test_consolidate_links_originals_and_archives_them(tmp_path: Path) -> None:
    """The new memory links mm://memory/<id> of each original; originals go to archive/."""
    bank, originals = seeded(tmp_path)
    ids = [m.id for m in originals]
    new_id = bank.consolidate(ids, "stack: FastAPI, uvicorn, pydantic", timestamp=T0)
    expected = Memory(
        "fact",
        "project",
        "stack: FastAPI, uvicorn, pydantic",
        timestamp=T0,
        links=[f"mm://memory/{i}" for i in ids],
    )
    assert new_id == expected.id
    assert [s.memory for s in bank.memories()] == [expected]
    assert sorted(s.memory.id for s in bank.memories(archived=True)) == sorted(ids)
    report = bank.verify()
    assert report.ok and (report.active, report.archived) == (1, 3)
    assert report.ledger is not None and report.ledger["sealed"] == 4


def test_crash_between_steps_verifies_and_rerun_only_finishes_archiving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash after the new memory and one archive leaves a bank that verifies; the rerun
    with the same arguments (new timestamp) reuses the memory and archives the rest."""
    bank, originals = seeded(tmp_path)
    ids = [m.id for m in originals]
    real = MemoryBank._archive_unlocked
    calls = {"n": 0}

    def crash_after_first(self: MemoryBank, memory_id: str) -> Path:
        calls["n"] += 1
        if calls["n"] > 1:
            raise KeyboardInterrupt("simulated crash")
        return real(self, memory_id)

    monkeypatch.setattr(MemoryBank, "_archive_unlocked", crash_after_first)
    with pytest.raises(KeyboardInterrupt):
        bank.consolidate(ids, "summary", timestamp=T0)
    monkeypatch.undo()
    mid = bank.verify()
    assert mid.ok and (mid.active, mid.archived) == (3, 1)
    entries_before = mid.ledger["entries"] if mid.ledger else None
    assert entries_before == 4
    new_id = bank.consolidate(ids, "summary", timestamp=T0 + timedelta(days=1))
    assert (
        new_id
        == Memory(
            "fact", "project", "summary", timestamp=T0, links=[f"mm://memory/{i}" for i in ids]
        ).id
    )
    after = bank.verify()
    assert after.ok and (after.active, after.archived) == (1, 3)
    assert after.ledger is not None and after.ledger["entries"] == 4  # nothing new sealed
    assert len(os.listdir(tmp_path / "memories")) == 2  # the new memory + archive/
    # A third run is a no-op too.
    assert bank.consolidate(ids, "summary") == new_id
    assert bank.verify().archived == 3


def test_consolidate_defaults_and_refusals(tmp_path: Path) -> None:
    """type/scope default to the originals' common values, else must be given; bad ids,
    unknown ids and tampered originals are refused before anything is written."""
    bank = MemoryBank(tmp_path)
    a = mem("a", 0, type="fact", scope="user")
    b = mem("b", 1, type="preference", scope="user")
    bank.save(a)
    bank.save(b)
    with pytest.raises(BankError, match="differ in type"):
        bank.consolidate([a.id, b.id], "ab")
    with pytest.raises(BankError, match="at least one"):
        bank.consolidate([], "x")
    with pytest.raises(BankError, match="not one string"):
        bank.consolidate(a.id, "x")
    with pytest.raises(BankError, match=r"^consolidate takes a sequence of ids, not int$"):
        bank.consolidate(5, "x")  # type: ignore[arg-type]
    with pytest.raises(BankError, match="not a memory id"):
        bank.consolidate(["../../x"], "x")
    with pytest.raises(MemoryNotFoundError):
        bank.consolidate([a.id, "f" * 64], "x", type="fact")
    with pytest.raises(MemoryFormatError, match="slug"):
        bank.consolidate([a.id, b.id], "x", type="Bad/Type")
    path = tmp_path / "memories" / b.file_name
    path.chmod(0o644)
    path.write_text(path.read_text().replace('"b"', '"B"'))
    with pytest.raises(TamperedMemoryError):
        bank.consolidate([a.id, b.id], "x", type="insight")
    assert sorted(os.listdir(tmp_path / "memories")) == sorted(
        [a.file_name, b.file_name, "archive"]
    )
    new = bank.consolidate([a.id], "only a", tags=["t"], source_session="s9")
    got = bank.get(new)
    assert (got.type, got.scope, got.tags, got.source_session) == ("fact", "user", ("t",), "s9")

"""Hostile input for the memory bank: symlinks, special files, full or read-only folders."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from merkle_memory import _fsio
from merkle_memory.bank import MemoryBank
from merkle_memory.bank.memory import Memory
from merkle_memory.errors import BankError, TamperedMemoryError

T0 = datetime(2026, 5, 29, 12, 0, tzinfo=UTC)
REPO = Path(__file__).resolve().parents[2]


def every_file(root: Path) -> list[str]:
    """All paths under ``root`` (relative), to check that nothing else was written."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_symlinked_memories_folder_is_refused(tmp_path: Path) -> None:
    """memories/ -> outside: save, list and get refuse; nothing is written outside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    bank_dir = tmp_path / "bank"
    bank_dir.mkdir()
    (bank_dir / "memories").symlink_to(outside)
    bank = MemoryBank(bank_dir)
    with pytest.raises(BankError, match="symlink"):
        bank.save(Memory("fact", "p", "x", timestamp=T0))
    with pytest.raises(BankError, match="symlink"):
        bank.get("a" * 64)
    assert every_file(outside) == []
    report = bank.verify()
    assert [(p.path, p.kind) for p in report.problems] == [("memories", "unexpected_file")]


def test_symlinked_archive_folder_is_refused(tmp_path: Path) -> None:
    """memories/archive -> outside: archive refuses and nothing lands outside."""
    bank = MemoryBank(tmp_path / "bank")
    memory = Memory("fact", "p", "x", timestamp=T0)
    bank.save(memory)
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "bank" / "memories" / "archive").rmdir()
    (tmp_path / "bank" / "memories" / "archive").symlink_to(outside)
    with pytest.raises(BankError, match="symlink"):
        bank.archive(memory.id)
    assert every_file(outside) == []
    assert (tmp_path / "bank" / "memories" / memory.file_name).exists()


@pytest.mark.parametrize("name", ["bank.lock", "ledger.jsonl", "ledger.head"])
def test_symlinked_root_files_are_refused(tmp_path: Path, name: str) -> None:
    """A lock or ledger file that is a symlink to outside is never opened for writing."""
    bank_dir = tmp_path / "bank"
    bank_dir.mkdir()
    target = tmp_path / "victim"
    (bank_dir / name).symlink_to(target)
    with pytest.raises(BankError, match="symlink"):
        MemoryBank(bank_dir).save(Memory("fact", "p", "x", timestamp=T0))
    assert not target.exists()
    assert not (bank_dir / "memories").exists() or every_file(bank_dir / "memories") == ["archive"]


def test_symlinked_memory_file_is_never_followed(tmp_path: Path) -> None:
    """A memory-named symlink inside the bank is reported, not read; get refuses it."""
    bank = MemoryBank(tmp_path / "bank")
    memory = Memory("fact", "p", "x", timestamp=T0)
    outside = tmp_path / "secret.json"
    outside.write_bytes(memory.to_bytes())
    bank.save(Memory("fact", "p", "y", timestamp=T0))
    link = tmp_path / "bank" / "memories" / memory.file_name
    link.symlink_to(outside)
    report = bank.verify()
    assert [(p.path, p.kind) for p in report.problems] == [
        (f"memories/{memory.file_name}", "unexpected_file")
    ]
    assert "symlink" in report.problems[0].reason
    with pytest.raises(TamperedMemoryError, match="symlink"):
        bank.get(memory.id)


def test_fifo_in_the_bank_does_not_block_verify(tmp_path: Path) -> None:
    """A FIFO named like a memory is an unexpected file; reading never blocks on it."""
    bank = MemoryBank(tmp_path)
    bank.save(Memory("fact", "p", "y", timestamp=T0))
    fifo = tmp_path / "memories" / ("20260529_120000_fact_" + "b" * 64 + ".json")
    os.mkfifo(fifo)
    report = bank.verify()
    assert [(p.path, p.kind) for p in report.problems] == [
        (f"memories/{fifo.name}", "unexpected_file")
    ]
    with pytest.raises(TamperedMemoryError):
        bank.get("b" * 64)


def test_names_from_records_cannot_escape(tmp_path: Path) -> None:
    """A type with path separators is refused before any write; ids are 64-hex only."""
    bank = MemoryBank(tmp_path / "bank")
    for kind in ("../../evil", "a/b", "..", "x\x00y"):
        with pytest.raises(BankError):
            bank.save(Memory(kind, "p", "x", timestamp=T0))
    with pytest.raises(BankError):
        bank.archive("../" + "a" * 61)
    with pytest.raises(BankError, match="no memory bank"):  # not a bank: not "not found"
        MemoryBank(tmp_path / "bank2").get("a" * 64)
    assert every_file(tmp_path) == []


def _temp_files(root: Path) -> list[str]:
    return [p.name for p in root.rglob("*") if p.name.endswith(".tmp")]


def test_full_disk_gives_bank_error_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC during the write: BankError naming the cause, no temp file, no memory file,
    nothing sealed."""
    bank = MemoryBank(tmp_path)
    bank.save(Memory("fact", "p", "first", timestamp=T0))

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(_fsio.os, "fsync", full)
    memory = Memory("fact", "p", "second", timestamp=T0)
    with pytest.raises(BankError, match="No space left"):
        bank.save(memory)
    monkeypatch.undo()
    assert _temp_files(tmp_path) == []
    assert not (tmp_path / "memories" / memory.file_name).exists()
    report = bank.verify()
    assert report.ok and report.ledger is not None and report.ledger["entries"] == 1


def test_read_only_folder_gives_bank_error_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EACCES creating the temp file (a read-only folder): BankError, nothing written."""
    bank = MemoryBank(tmp_path)
    bank.save(Memory("fact", "p", "first", timestamp=T0))

    def denied(*args: object, **kwargs: object) -> tuple[int, str]:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    with pytest.raises(BankError, match="Permission denied"):
        bank.save(Memory("fact", "p", "second", timestamp=T0))
    monkeypatch.undo()
    assert _temp_files(tmp_path) == []
    assert bank.verify().active == 1


def test_oversized_and_hostile_json_are_unparseable(tmp_path: Path) -> None:
    """Deep nesting, duplicate keys, NaN, bad UTF-8: reported unparseable, never raised."""
    bank = MemoryBank(tmp_path)
    bank.save(Memory("fact", "p", "x", timestamp=T0))
    folder = tmp_path / "memories"
    bad = {
        "deep.json": b"[" * 100000 + b"]" * 100000,
        "dup.json": b'{"a":1,"a":2}',
        "nan.json": b'{"a":NaN}',
        "utf8.json": b'{"a":"\xff"}',
        "surrogate.json": b'{"a":"\\ud800"}',
    }
    for name, data in bad.items():
        (folder / name).write_bytes(data)
    report = bank.verify()
    assert {p.path: p.kind for p in report.problems} == {
        f"memories/{name}": "unparseable" for name in bad
    }


# --- FIFOs and other special files in place of store files (issue 14, item 7) ----------------

SAVED = Memory("fact", "p", "saved", timestamp=T0)
ARCHIVED = Memory("fact", "p", "archived", timestamp=T0)
NOT_REGULAR = "not a regular file (never opened)"


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m merkle_memory *argv`` in a child, bounded by a 30 s timeout (a hang
    fails the test with ``TimeoutExpired`` instead of blocking the suite)."""
    return subprocess.run(
        [sys.executable, "-m", "merkle_memory", *argv],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def fifo_bank(root: Path, name: str) -> None:
    """A bank with one active and one archived memory (both sealed) and a migration index,
    where ``name`` (relative) is then replaced by (or created as) a FIFO."""
    bank = MemoryBank(root)
    bank.save(SAVED)
    bank.save(ARCHIVED)
    bank.archive(ARCHIVED.id)
    (root / "memories" / ".migrated.json").write_bytes(b'{"ids":{},"schema":"migrated/1"}\n')
    target = root / name
    if target.exists():
        target.chmod(0o644)
        target.unlink()
    os.mkfifo(target)


@pytest.mark.parametrize(
    ("name", "kind", "reason", "ledger_read"),
    [
        (
            f"memories/{SAVED.file_name}",
            "unexpected_file",
            f"not a regular file: {SAVED.file_name}",
            True,
        ),
        (
            f"memories/archive/{ARCHIVED.file_name}",
            "unexpected_file",
            f"not a regular file: {ARCHIVED.file_name}",
            True,
        ),
        (
            "memories/.migrated.json",
            "unexpected_file",
            "migration index: not a regular file: .migrated.json",
            True,
        ),
        ("ledger.jsonl", "unexpected_file", NOT_REGULAR, False),
        ("ledger.head", "unexpected_file", NOT_REGULAR, False),
        ("ledger.torn", "unexpected_file", NOT_REGULAR, True),
        ("bank.lock", "unexpected_file", NOT_REGULAR, True),
    ],
)
def test_cli_verify_reports_a_fifo_and_goes_on(
    tmp_path: Path, name: str, kind: str, reason: str, ledger_read: bool
) -> None:
    """A FIFO in place of a memory file (active or archived), the migration index,
    ``ledger.jsonl``, ``ledger.head``, ``ledger.torn`` or ``bank.lock``: `bank verify
    --json` never opens it for reading (it hung on ``ledger.jsonl``, ``ledger.head`` and
    ``bank.lock``), reports it as a problem, checks every
    other file, and exits 1 with one error line. When the FIFO is a ledger file the ledger
    is not read (``ledger`` null)."""
    root = tmp_path / "bank"
    fifo_bank(root, name)
    done = cli("bank", "verify", str(root), "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: bank failed")
    assert report["problems"] == [{"path": name, "kind": kind, "reason": reason}]
    assert (report["ok"], report["active"], report["archived"]) == (
        False,
        0 if name.endswith(SAVED.file_name) else 1,
        0 if name.endswith(ARCHIVED.file_name) else 1,
    )
    if ledger_read:
        assert report["ledger"]["chain"] == "intact" and report["ledger"]["entries"] == 2
    else:
        assert report["ledger"] is None


@pytest.mark.parametrize("name", ["ledger.jsonl", "ledger.head", "ledger.torn", "bank.lock"])
def test_writers_refuse_a_fifo_root_file_and_never_open_it(tmp_path: Path, name: str) -> None:
    """A FIFO in place of a root file: `bank add` and `bank seal` refuse (exit 1, one line
    naming it) instead of blocking on it; `bank verify` reports it; nothing is written."""
    root = tmp_path / "bank"
    fifo_bank(root, name)
    before = every_file(root)
    message = f"error: {name} is not a regular file (never opened)\n"
    for argv in (
        ["bank", "add", str(root), "--type", "fact", "--scope", "p", "--content", "new"],
        ["bank", "seal", str(root)],
    ):
        done = cli(*argv)
        assert (done.returncode, done.stdout, done.stderr) == (1, "", message)
    assert every_file(root) == before
    problems = [(p.path, p.reason) for p in MemoryBank(root).verify().problems]
    assert problems == [(name, NOT_REGULAR)]

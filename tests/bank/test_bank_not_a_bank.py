"""A folder that is not a memory bank: every operation but save refuses it and creates nothing;
save creates the bank folder itself, never its missing parents (issue 4 follow-up)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from merkle_memory.bank import MemoryBank
from merkle_memory.bank.memory import Memory
from merkle_memory.cli import main
from merkle_memory.errors import BankError, MemoryNotFoundError

REPO = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 5, 29, 12, 0, tzinfo=UTC)
HEX = "a" * 64

OPERATIONS: dict[str, Callable[[MemoryBank], Any]] = {
    "memories": lambda b: b.memories(archived=None),
    "verify": lambda b: b.verify(),
    "get": lambda b: b.get(HEX),
    "locate": lambda b: b.locate(HEX),
    "archive": lambda b: b.archive(HEX),
    "consolidate": lambda b: b.consolidate([HEX], "x"),
    "seal": lambda b: b.seal(),
    "migrate": lambda b: b.migrate(),
}


def tree(root: Path) -> list[str]:
    """Every path under ``root`` (relative, sorted), folders included."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


@pytest.mark.parametrize("name", sorted(OPERATIONS))
@pytest.mark.parametrize("kind", ["absent", "empty", "unrelated"])
def test_operations_refuse_a_folder_that_is_not_a_bank(
    tmp_path: Path, name: str, kind: str
) -> None:
    """An absent folder, an empty one, or one holding other files (no memories/, no
    ledger.jsonl): BankError("no memory bank at ROOT") and not one file or folder created."""
    root = tmp_path / "target"
    if kind != "absent":
        root.mkdir()
    if kind == "unrelated":
        (root / "notes.txt").write_text("hello", encoding="utf-8")
        (root / "memory").mkdir()
    before = tree(tmp_path)
    with pytest.raises(BankError) as caught:
        OPERATIONS[name](MemoryBank(root))
    assert str(caught.value) == f"no memory bank at {root}"
    assert tree(tmp_path) == before


def test_membership_of_a_folder_that_is_not_a_bank_is_false(tmp_path: Path) -> None:
    """``in`` is a predicate: False on a non-bank, never an error, nothing created."""
    assert (HEX in MemoryBank(tmp_path / "absent")) is False
    assert tree(tmp_path) == []


def test_a_bank_is_a_folder_with_memories_or_a_ledger(tmp_path: Path) -> None:
    """memories/ alone (e.g. a legacy store) or ledger.jsonl alone make a bank: verify runs
    (a ledger-only bank reports its sealed memory missing)."""
    only_memories = tmp_path / "m"
    (only_memories / "memories").mkdir(parents=True)
    report = MemoryBank(only_memories).verify()
    assert (report.ok, report.active, report.archived) == (True, 0, 0)
    assert tree(only_memories) == ["memories"]
    full = tmp_path / "full"
    memory = Memory("fact", "p", "x", timestamp=T0)
    MemoryBank(full).save(memory)
    for path in (full / "memories").rglob("*.json"):
        path.unlink()
    (full / "memories" / "archive").rmdir()
    (full / "memories").rmdir()
    report = MemoryBank(full).verify()
    assert report.ledger is not None and report.ledger["missing"] == [memory.id]


def test_failed_archive_in_a_bank_creates_no_archive_folder(tmp_path: Path) -> None:
    """In a bank without memories/archive/ (a legacy store) and without bank.lock, archiving
    or consolidating an unknown id raises MemoryNotFoundError and creates nothing."""
    (tmp_path / "memories").mkdir()
    bank = MemoryBank(tmp_path)
    with pytest.raises(MemoryNotFoundError):
        bank.archive(HEX)
    with pytest.raises(MemoryNotFoundError):
        bank.consolidate([HEX], "x")
    assert tree(tmp_path) == ["memories"]


def test_archive_creates_the_archive_folder_when_it_moves_a_file(tmp_path: Path) -> None:
    """A memory file placed in a bank with no archive/ is archived: archive/ is created."""
    memory = Memory("fact", "p", "x", timestamp=T0)
    (tmp_path / "memories").mkdir()
    (tmp_path / "memories" / memory.file_name).write_bytes(memory.to_bytes())
    assert MemoryBank(tmp_path).archive(memory.id) == f"memories/archive/{memory.file_name}"
    assert tree(tmp_path) == [
        "bank.lock",
        "memories",
        "memories/archive",
        f"memories/archive/{memory.file_name}",
    ]


def test_save_creates_the_bank_folder_but_never_its_parents(tmp_path: Path) -> None:
    """save into a/b/bank with a/ missing: BankError naming the missing folder, nothing
    created; with the parent present, the bank folder and its layout are created."""
    root = tmp_path / "nonexistent" / "deep" / "bank"
    memory = Memory("fact", "p", "x", timestamp=T0)
    with pytest.raises(BankError) as caught:
        MemoryBank(root).save(memory)
    assert str(caught.value) == (
        f"cannot create the bank {root}: the folder {root.parent} does not exist (create it first)"
    )
    assert tree(tmp_path) == []
    root.parent.mkdir(parents=True)
    assert MemoryBank(root).save(memory) == memory.id
    assert tree(root) == [
        "bank.lock",
        "ledger.head",
        "ledger.jsonl",
        "memories",
        f"memories/{memory.file_name}",
        "memories/archive",
    ]


def test_save_refuses_a_bank_path_that_is_a_file(tmp_path: Path) -> None:
    """The bank path names a regular file: BankError, the file untouched."""
    root = tmp_path / "file"
    root.write_bytes(b"data")
    with pytest.raises(BankError) as caught:
        MemoryBank(root).save(Memory("fact", "p", "x", timestamp=T0))
    assert str(caught.value) == f"no memory bank at {root} (not a folder)"
    assert tree(tmp_path) == ["file"] and root.read_bytes() == b"data"


@pytest.mark.parametrize(
    "argv",
    [
        ["archive", "{bank}", HEX],
        ["consolidate", "{bank}", HEX, "--content", "x"],
        ["list", "{bank}"],
        ["list", "{bank}", "--all", "--json"],
        ["verify", "{bank}"],
        ["migrate", "{bank}"],
        ["seal", "{bank}", "--json"],
    ],
)
def test_cli_commands_refuse_a_missing_bank_and_create_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """`bank archive nonexist ID` and the others: exit 1, one line `error: PATH: does not
    exist`, empty stdout, and no folder or lock file left behind; an empty folder instead
    is `error: no memory bank at PATH`."""
    bank = tmp_path / "nonexist"
    code = main(["bank", *(a.format(bank=bank) for a in argv)])
    out, err = capsys.readouterr()
    assert (code, out, err) == (1, "", f"error: {bank}: does not exist\n")
    assert tree(tmp_path) == []
    bank.mkdir()
    code = main(["bank", *(a.format(bank=bank) for a in argv)])
    out, err = capsys.readouterr()
    assert (code, out, err) == (1, "", f"error: no memory bank at {bank}\n")
    assert tree(tmp_path) == ["nonexist"]


@pytest.mark.parametrize("make", ["missing", "empty folder"])
def test_cli_verify_json_of_a_non_bank_prints_a_refusal_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: str
) -> None:
    """`bank verify --json NONBANK` (missing or an empty folder): exit 1, the error line on
    stderr, and on stdout one JSON document of the verify shape with ``ok`` false, zero
    counts, ``ledger`` null and the message in ``error`` (issue 14: it printed nothing);
    nothing created."""
    bank = tmp_path / "nonbank"
    if make == "empty folder":
        bank.mkdir()
    code = main(["bank", "verify", str(bank), "--json"])
    out, err = capsys.readouterr()
    message = f"no memory bank at {bank}" if make == "empty folder" else f"{bank}: does not exist"
    assert (code, err) == (1, f"error: {message}\n")
    assert json.loads(out) == {
        "ok": False,
        "active": 0,
        "archived": 0,
        "problems": [],
        "leftovers": [],
        "ledger": None,
        "error": message,
    }
    assert tree(tmp_path) == ([] if make == "missing" else ["nonbank"])


def test_cli_verify_of_the_root_folder_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    """`bank verify /` is not a bank: exit 1 (it used to report ok, exit 0)."""
    code = main(["bank", "verify", "/"])
    out, err = capsys.readouterr()
    assert (code, out, err) == (1, "", "error: no memory bank at /\n")


def test_cli_add_never_creates_missing_parents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`bank add /nonexistent/deep/bank ...`: exit 1 with a clear error, nothing created."""
    bank = tmp_path / "nonexistent" / "deep" / "bank"
    code = main(["bank", "add", str(bank), "--type", "fact", "--scope", "p", "--content", "x"])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert err == (
        f"error: cannot create the bank {bank}: the folder {bank.parent} does not exist "
        "(create it first)\n"
    )
    assert tree(tmp_path) == []


def test_subprocess_failed_commands_leave_the_working_folder_empty(tmp_path: Path) -> None:
    """`python -m merkle_memory bank archive nonexist ID` and `bank consolidate nonexist2 ID
    --content x` run in an empty folder: exit 1, the error line, the folder still empty."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for name, argv in (
        ("nonexist", ["archive", "nonexist", HEX]),
        ("nonexist2", ["consolidate", "nonexist2", HEX, "--content", "x"]),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "merkle_memory", "bank", *argv],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == f"error: {name}: does not exist\n"
    assert tree(tmp_path) == []

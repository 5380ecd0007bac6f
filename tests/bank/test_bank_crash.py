"""Crash safety of the memory bank as an ORDER of writes (issue 14, items 1 and 2).

Every call of ``os`` that changes a file or a folder (``open``, ``mkdir``, ``rename``,
``replace``, ``unlink``, ``rmdir``, ``chmod``, ``fsync``, ``write``, ``pwrite``, ``ftruncate``,
and the writes of a file opened with ``os.fdopen``) is recorded as ``(call, path relative to
the test folder)``; temp names are normalised (``.<name>.*.tmp``, ``.<name>.creating-*``).
The write-order tests assert the exact sequence for bank save. The crash tests run an
operation once to count its steps, then, for every step k, on a fresh copy of the bank: let
steps 0..k-1 happen, and at step k the process "dies" (that call and every later one raise
:class:`Crash`, so no cleanup handler can touch the disk, as after a SIGKILL). Then the bank
must read as the old state or the new one: ``verify()`` ok with nothing altered or missing
and every memory sealed before still sealed, ``seal()`` adopting what is unsealed, and a
rerun of the operation finishing it.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import asset_path, legacy_bank, mem

from merkle_memory.bank import MemoryBank
from merkle_memory.errors import BankError

_RECORDED = ("open", "mkdir", "rename", "replace", "unlink", "rmdir", "chmod", "link")
_BY_FD = ("fsync", "fdatasync", "write", "pwrite", "ftruncate")


class Crash(BaseException):
    """The simulated death of the process at one step (no handler catches it)."""


class _Writer:
    """A file opened by ``os.fdopen`` whose writes are recorded steps."""

    def __init__(self, log: OsLog, handle: Any, path: str) -> None:
        self._log, self._handle, self._path = log, handle, path

    def __enter__(self) -> _Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.close()

    def write(self, data: bytes) -> int:
        self._log.step("write", self._path)
        return int(self._handle.write(data))

    def flush(self) -> None:
        self._handle.flush()

    def fileno(self) -> int:
        return int(self._handle.fileno())

    def read(self, size: int = -1) -> bytes:
        """Reads are not steps (they change nothing on disk)."""
        data: bytes = self._handle.read(size)
        return data


class OsLog:
    """Records the file-changing ``os`` calls under ``base`` and crashes at step ``crash_at``."""

    def __init__(self, base: Path, crash_at: int | None = None) -> None:
        self.base = str(base)
        self.crash_at = crash_at
        self.events: list[tuple[str, str]] = []
        self.dead = False
        self._fds: dict[int, str] = {}

    def rel(self, path: str | bytes | os.PathLike[str]) -> str:
        """``path`` relative to the test folder, temp names normalised."""
        text = os.fsdecode(path)
        text = os.path.relpath(text, self.base) if os.path.isabs(text) else text
        text = re.sub(r"\.creating-[^/]+", ".creating-*", text)
        return re.sub(r"\.[a-z0-9_]{8}\.tmp$", ".*.tmp", text)

    def step(self, call: str, path: str) -> None:
        """Count one step; raise :class:`Crash` at ``crash_at`` and ever after."""
        if self.dead or len(self.events) == self.crash_at:
            self.dead = True
            raise Crash(f"crash at step {self.crash_at}: {call} {path}")
        self.events.append((call, path))

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real = {name: getattr(os, name) for name in (*_RECORDED, *_BY_FD, "fdopen")}

        def by_path(name: str) -> Callable[..., Any]:
            def call(path: Any, *args: Any, **kwargs: Any) -> Any:
                where = self.rel(path)
                if name in ("rename", "replace", "link"):
                    where += " -> " + self.rel(args[0])
                self.step(name, where)
                result = real[name](path, *args, **kwargs)
                if name == "open":
                    self._fds[result] = self.rel(path)
                return result

            return call

        def by_fd(name: str) -> Callable[..., Any]:
            def call(fd: int, *args: Any, **kwargs: Any) -> Any:
                self.step(name, self._fds.get(fd, f"fd {fd}"))
                return real[name](fd, *args, **kwargs)

            return call

        def fdopen(fd: int, *args: Any, **kwargs: Any) -> Any:
            handle = real["fdopen"](fd, *args, **kwargs)
            return _Writer(self, handle, self._fds.get(fd, f"fd {fd}"))

        for name in _RECORDED:
            monkeypatch.setattr(os, name, by_path(name))
        for name in _BY_FD:
            monkeypatch.setattr(os, name, by_fd(name))
        monkeypatch.setattr(os, "fdopen", fdopen)

    def of(self, path: str) -> list[str]:
        """The calls on ``path`` (a file or folder relative to the test folder), in order."""
        return [call for call, where in self.events if where == path]


def record(
    monkeypatch: pytest.MonkeyPatch, base: Path, action: Callable[[], object]
) -> list[tuple[str, str]]:
    """Run ``action`` with the ``os`` calls under ``base`` recorded; return the events."""
    log = OsLog(base)
    with monkeypatch.context() as patch:
        log.install(patch)
        action()
    return log.events


def crash_at(
    monkeypatch: pytest.MonkeyPatch, base: Path, step: int, action: Callable[[], object]
) -> bool:
    """Run ``action`` dying at ``step``; False when it finished before reaching that step."""
    log = OsLog(base, crash_at=step)
    with monkeypatch.context() as patch:
        log.install(patch)
        try:
            action()
        except Crash:
            return True
    return False


def crash_every_step(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    setup: Callable[[Path], object],
    action: Callable[[Path], object],
) -> Iterator[tuple[int, Path]]:
    """For each step k of ``action(base)``: a fresh ``base`` (made by ``setup``, copied from
    one template) where the process died at step k."""
    template = tmp_path / "template"
    template.mkdir()
    setup(template)

    def fresh(name: str) -> Path:
        base = tmp_path / name
        shutil.copytree(template, base, symlinks=True)
        return base

    first = fresh("count")
    count = len(record(monkeypatch, first, lambda: action(first)))
    assert count > 0
    for k in range(count):
        base = fresh(f"k{k}")
        assert crash_at(monkeypatch, base, k, functools.partial(action, base)), k
        yield k, base


# --- checks after a crash ----------------------------------------------------------------------


def bank_files(root: Path) -> list[str]:
    """Every entry under ``root`` (relative, sorted), temp files included."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def memory_files(root: Path) -> list[str]:
    """The memory files of both folders (no temp file, no index), relative, sorted."""
    return [
        name
        for name in bank_files(root)
        if name.startswith("memories/") and name.endswith(".json") and "/." not in name
    ]


def assert_consistent(bank: MemoryBank, sealed_before: set[str]) -> dict[str, Any]:
    """The bank after a crash: verify raises nothing; no file is tampered; the chain is intact
    (or empty); nothing altered or missing; every memory sealed before is still sealed."""
    report = bank.verify()
    ledger = report.ledger
    assert ledger is not None
    assert report.problems == ()
    assert ledger["chain"] in ("intact", "empty"), ledger
    assert (ledger["altered"], ledger["missing"], ledger["disputed"]) == ([], [], [])
    assert report.ok
    assert not sealed_before & set(ledger["unsealed"])
    assert ledger["sealed"] >= len(sealed_before)
    return ledger


def assert_recovers(bank: MemoryBank) -> None:
    """``seal()`` adopts every unsealed memory: ok, nothing unsealed, no file tampered."""
    result = bank.seal()
    assert result.ok and result.report.unsealed == ()
    report = bank.verify()
    assert report.ok and report.problems == () and report.ledger is not None
    assert report.ledger["unsealed"] == []
    assert report.ledger["sealed"] == report.active + report.archived


def sealed_ids(bank: MemoryBank) -> set[str]:
    """The ids of every memory of the bank (all sealed: checked)."""
    report = bank.verify()
    assert report.ok and report.ledger is not None and report.ledger["unsealed"] == []
    return {s.memory.id for s in bank.memories(archived=None)}


# --- bank creation (item 2) --------------------------------------------------------------------

NEW = mem("a new memory")
"""The memory the save tests write."""

TMP = f"bank/memories/.{NEW.file_name}.*.tmp"
WRITE_NEW: list[tuple[str, str]] = [
    ("open", TMP),
    ("write", TMP),
    ("fsync", TMP),
    ("chmod", TMP),
    ("replace", f"{TMP} -> bank/memories/{NEW.file_name}"),
    ("open", "bank/memories"),
    ("fsync", "bank/memories"),
]
"""How a save writes :data:`NEW`'s file: a temp file in ``memories/`` opened, written,
fsynced, made 0o444, renamed over the memory file; then ``memories/`` fsynced."""


def assert_only_ledger(events: list[tuple[str, str]]) -> None:
    """``events`` (what follows the memory file's write) touch only ledger files (and the
    bank folder, fsynced when one is created), and include the appended line."""
    assert all("ledger" in where for _, where in events if where != "bank"), events
    assert ("pwrite", "bank/ledger.jsonl") in events


def test_save_into_a_new_bank_builds_the_layout_aside_then_renames_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The first save builds ``.bank.creating-*`` with ``memories/archive/``, fsyncs its
    folders, renames it to ``bank`` and fsyncs the parent; only then the lock, the memory file
    (temp, write, fsync, 0o444, replace, fsync ``memories/``), and after it every ledger call."""
    events = record(monkeypatch, tmp_path, lambda: MemoryBank(tmp_path / "bank").save(NEW))
    assert events[:20] == [
        ("mkdir", ".bank.creating-*"),
        ("mkdir", ".bank.creating-*/memories"),
        ("mkdir", ".bank.creating-*/memories/archive"),
        ("open", ".bank.creating-*/memories"),
        ("fsync", ".bank.creating-*/memories"),
        ("open", ".bank.creating-*"),
        ("fsync", ".bank.creating-*"),
        ("rename", ".bank.creating-* -> bank"),
        ("open", "."),
        ("fsync", "."),
        ("open", "bank/bank.lock"),
        ("open", "bank"),
        ("fsync", "bank"),
        *WRITE_NEW,
    ]
    assert_only_ledger(events[20:])
    assert bank_files(tmp_path) == [
        "bank",
        "bank/bank.lock",
        "bank/ledger.head",
        "bank/ledger.jsonl",
        "bank/memories",
        f"bank/memories/{NEW.file_name}",
        "bank/memories/archive",
    ]


def test_save_into_an_existing_folder_builds_memories_aside_under_the_lock(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An existing empty folder: the lock first, then ``memories/`` built as
    ``.memories.creating-*`` (with ``archive/``), fsynced, renamed, ``bank`` fsynced."""
    (tmp_path / "bank").mkdir()
    events = record(monkeypatch, tmp_path, lambda: MemoryBank(tmp_path / "bank").save(NEW))
    assert events[:17] == [
        ("open", "bank/bank.lock"),
        ("open", "bank"),
        ("fsync", "bank"),
        ("mkdir", "bank/.memories.creating-*"),
        ("mkdir", "bank/.memories.creating-*/archive"),
        ("open", "bank/.memories.creating-*"),
        ("fsync", "bank/.memories.creating-*"),
        ("rename", "bank/.memories.creating-* -> bank/memories"),
        ("open", "bank"),
        ("fsync", "bank"),
        *WRITE_NEW,
    ]
    assert_only_ledger(events[17:])


def test_crash_at_every_step_of_the_first_save_leaves_no_bank_or_a_whole_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Dying at any step of the save that creates the bank leaves no bank (verify: "no
    memory bank", at most an empty ``.bank.creating-*`` beside it, which is no bank) or a
    complete one that verifies, the memory absent, unsealed or sealed; seal recovers, and the
    next save completes and removes the leftover temp folder."""
    outcomes = set()
    for k, base in crash_every_step(
        monkeypatch, tmp_path, lambda base: None, lambda base: MemoryBank(base / "bank").save(NEW)
    ):
        bank = MemoryBank(base / "bank")
        if not (base / "bank").exists():
            with pytest.raises(BankError) as caught:
                bank.verify()
            assert str(caught.value) == f"no memory bank at {base / 'bank'}"
            leftovers = [re.sub(r"creating-[^/]+", "creating-*", p) for p in bank_files(base)]
            assert leftovers in (
                [],
                [".bank.creating-*"],
                [".bank.creating-*", ".bank.creating-*/memories"],
                [
                    ".bank.creating-*",
                    ".bank.creating-*/memories",
                    ".bank.creating-*/memories/archive",
                ],
            ), (k, leftovers)
            outcomes.add("no bank")
        else:
            assert {"memories", "memories/archive"} <= set(bank_files(base / "bank")), k
            ledger = assert_consistent(bank, set())
            state = "sealed" if ledger["sealed"] else "unsealed" if ledger["unsealed"] else "none"
            outcomes.add(f"bank, memory {state}")
            assert_recovers(bank)
        assert bank.save(NEW) == NEW.id
        assert sorted(os.listdir(base)) == ["bank"], k
        assert sealed_ids(bank) == {NEW.id}
    assert outcomes == {
        "no bank",
        "bank, memory none",
        "bank, memory unsealed",
        "bank, memory sealed",
    }


# --- save, archive, consolidate, migrate on an existing bank (item 1) --------------------------

OLD = (mem("old one", 1), mem("old two", 2), mem("old three, archived", 3))
"""The sealed memories of the bank the crash tests start from (the third archived)."""


def three_sealed(base: Path) -> None:
    """A bank ``base/bank`` holding :data:`OLD`, all sealed, the third archived."""
    bank = MemoryBank(base / "bank")
    for memory in OLD:
        bank.save(memory)
    bank.archive(OLD[2].id)


def test_save_into_an_existing_bank_writes_the_file_durably_before_any_ledger_call(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Per file: the lock opened; the temp file opened, written, fsynced, made 0o444 and
    renamed over the memory file; ``memories/`` fsynced; then the ledger, never before."""
    three_sealed(tmp_path)
    events = record(monkeypatch, tmp_path, lambda: MemoryBank(tmp_path / "bank").save(NEW))
    assert events[:8] == [("open", "bank/bank.lock"), *WRITE_NEW]
    assert_only_ledger(events[8:])


def test_crash_at_every_step_of_a_save_keeps_the_old_memories_sealed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Dying at any step of a save: the old memories stay sealed, the new one is absent,
    unsealed or sealed (never altered); seal recovers; the save rerun completes."""
    outcomes = set()
    for _k, base in crash_every_step(
        monkeypatch, tmp_path, three_sealed, lambda base: MemoryBank(base / "bank").save(NEW)
    ):
        bank = MemoryBank(base / "bank")
        ledger = assert_consistent(bank, {m.id for m in OLD})
        outcomes.add((NEW.id in bank, tuple(ledger["unsealed"])))
        assert_recovers(bank)
        assert bank.save(NEW) == NEW.id
        assert sealed_ids(bank) == {*(m.id for m in OLD), NEW.id}
    assert outcomes == {(False, ()), (True, (NEW.id,)), (True, ())}


def test_crash_at_every_step_of_an_archive_leaves_the_file_in_one_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Dying at any step of an archive: the memory is in exactly one folder, still sealed;
    the archive rerun completes."""
    outcomes = set()
    name = OLD[0].file_name
    for _k, base in crash_every_step(
        monkeypatch,
        tmp_path,
        three_sealed,
        lambda base: MemoryBank(base / "bank").archive(OLD[0].id),
    ):
        bank = MemoryBank(base / "bank")
        assert_consistent(bank, {m.id for m in OLD})
        where = [f for f in memory_files(base / "bank") if f.endswith(name)]
        assert where in ([f"memories/{name}"], [f"memories/archive/{name}"])
        outcomes.add(where[0])
        assert bank.archive(OLD[0].id) == f"memories/archive/{name}"
        assert bank.locate(OLD[0].id).archived
        assert sealed_ids(bank) == {m.id for m in OLD}
    assert outcomes == {f"memories/{name}", f"memories/archive/{name}"}


def test_crash_at_every_step_of_a_consolidation_then_a_rerun_finishes_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Dying at any step of a consolidation: the originals stay sealed (active or archived),
    the new memory is absent, unsealed or sealed; the rerun (same arguments, default
    timestamp) finds it and finishes: one new memory, the originals archived, all sealed."""
    ids = [OLD[0].id, OLD[1].id]
    for _k, base in crash_every_step(
        monkeypatch,
        tmp_path,
        three_sealed,
        lambda base: MemoryBank(base / "bank").consolidate(ids, "both old"),
    ):
        bank = MemoryBank(base / "bank")
        assert_consistent(bank, {m.id for m in OLD})
        assert len(memory_files(base / "bank")) in (3, 4)
        new_id = bank.consolidate(ids, "both old")
        assert len(memory_files(base / "bank")) == 4
        assert [bank.locate(i).archived for i in (*ids, new_id)] == [True, True, False]
        assert_recovers(bank)
        assert sealed_ids(bank) == {*(m.id for m in OLD), new_id}


def test_crash_at_every_step_of_a_migration_loses_no_memory_and_a_rerun_finishes_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Dying at any step of a migration of the legacy sample: every legacy file is still
    there or its replacement is (durable, unsealed or sealed); nothing is altered or missing;
    the rerun ends in exactly the files and sealed ids of an uninterrupted migration."""
    clean = legacy_bank(tmp_path / "clean")
    done = MemoryBank(clean).migrate()
    replaced = {f.path: f.new_path for f in done.files}
    assert len(replaced) == 3
    final_files = memory_files(clean)
    final = MemoryBank(clean).verify()
    assert final.ledger is not None and final.ledger["unsealed"] == []
    assert [p.path for p in final.problems] == ["memories/notes.json"]  # not legacy: stays

    def setup(base: Path) -> None:
        legacy_bank(base)

    for k, base in crash_every_step(
        monkeypatch, tmp_path, setup, lambda base: MemoryBank(base / "bank").migrate()
    ):
        root = base / "bank"
        bank = MemoryBank(root)
        report = bank.verify()
        assert report.ledger is not None
        assert (report.ledger["altered"], report.ledger["missing"]) == ([], [])
        present = set(bank_files(root))
        for old, new in replaced.items():
            assert old in present or new in present, (k, old)
            if new in present:  # a replacement is only ever whole
                assert bank.locate(new.rsplit("_", 1)[1][:-5]).path == new
        bank.migrate()
        assert memory_files(root) == final_files, k
        after = bank.verify()
        assert after.problems == final.problems and after.ledger is not None
        assert (after.ledger["sealed"], after.ledger["unsealed"]) == (3, []), k


def _tur_bank(base: Path) -> None:
    """A writable copy of the Tur-written OKF bank at ``base/bank``."""
    shutil.copytree(asset_path("bank", "tur_head_okf"), base / "bank")
    for path in [base / "bank", *(base / "bank").rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def test_tur_okf_migration_removes_a_file_and_a_folder_only_after_the_replacement(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Migrating Tur's bank (issue 16 item 9): each .md file is unlinked only after its
    replacement was renamed into place, that folder fsynced and the replacement sealed (its
    ledger.head slot flushed); Tur's active/ and subsumed/ are removed only after their files'
    unlinks and the fsync of the folder, and memories/ is fsynced after those removals."""
    _tur_bank(tmp_path)
    root = tmp_path / "bank"
    reports = []
    events = record(monkeypatch, tmp_path, lambda: reports.append(MemoryBank(root).migrate()))
    moved = {f"bank/{f.path}": f"bank/{f.new_path}" for f in reports[0].files}
    assert len(moved) == 4
    first = {e: i for i, e in reversed(list(enumerate(events)))}
    last = {e: i for i, e in enumerate(events)}
    for old, new in moved.items():
        unlink = first[("unlink", old)]
        folder = new.rsplit("/", 1)[0]
        renamed = events.index(("replace", f"{folder}/.{new.rsplit('/', 1)[1]}.*.tmp -> {new}"))
        fsynced = events.index(("fsync", folder), renamed)
        # sealed: a head slot flushed in place (or a new head file renamed in, FORMAT.md 4.3)
        heads = {
            ("fdatasync", "bank/ledger.head"),
            ("replace", "bank/.ledger.head.*.tmp -> bank/ledger.head"),
        }
        sealed = next(i for i in range(fsynced, len(events)) if events[i] in heads)
        assert renamed < fsynced < sealed < unlink, old
    for folder in ("active", "subsumed"):
        rmdir = first[("rmdir", f"bank/memories/{folder}")]
        unlinks = [first[("unlink", old)] for old in moved if f"/{folder}/" in old]
        assert max(unlinks) < last[("fsync", f"bank/memories/{folder}")] < rmdir
        assert rmdir < last[("fsync", "bank/memories")]
    assert ("rmdir", "bank/memories/archive") not in first
    assert MemoryBank(root).migrate().migrated == 0


@pytest.mark.slow
def test_crash_at_every_step_of_a_tur_migration_then_a_rerun_finishes_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Dying at any step of migrating Tur's bank: every .md file is still there or its
    replacement is; nothing altered or missing; the rerun ends in the files of an
    uninterrupted migration, all four sealed, Tur's folders gone, verify ok."""
    clean = tmp_path / "clean"
    _tur_bank(clean)
    replaced = {f.path: f.new_path for f in MemoryBank(clean / "bank").migrate().files}
    assert len(replaced) == 4
    final_files = memory_files(clean / "bank")
    for k, base in crash_every_step(
        monkeypatch, tmp_path, _tur_bank, lambda base: MemoryBank(base / "bank").migrate()
    ):
        root = base / "bank"
        bank = MemoryBank(root)
        report = bank.verify()
        assert report.ledger is not None
        assert (report.ledger["altered"], report.ledger["missing"]) == ([], []), k
        present = set(bank_files(root))
        for old, new in replaced.items():
            assert old in present or new in present, (k, old)
        bank.migrate()
        assert memory_files(root) == final_files, k
        after = bank.verify()
        assert after.ok and after.problems == (), k
        assert after.ledger is not None and after.ledger["unsealed"] == []
        assert after.ledger["sealed"] == 4, k
        assert sorted(p.name for p in (root / "memories").iterdir() if p.is_dir()) == ["archive"]

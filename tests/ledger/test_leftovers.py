"""Temp files that killed writers leave beside a folder ledger: which are removed, when, and
that the removal never races a writer (``FolderLedgerStore.remove_leftovers``).

A kill between an atomic write's temp file and its rename leaves ``.<name>.<random>.tmp``
behind. The four derived files of the ledger (``ledger.head``, ``ledger.tree``,
``ledger.tree.state``, ``ledger.ids``) are only ever written under the ledger's exclusive
lock, so a holder of that lock removes their leftovers: ``seal`` (``seal_unsealed``), a proof
that re-checks or rebuilds the sidecar, and ``accept_rollback``. Every other temp file (the
records in ``memory/``, ``ledger.cosigned``, ``ledger.witnesses``, ``testimony.json``) has a
writer that does not hold the lock, and is kept.
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import Recorder

from merkle_memory.errors import LedgerError
from merkle_memory.ledger import Ledger, proofs
from merkle_memory.ledger._folder import FolderLedgerStore
from merkle_memory.ledger.recovery import accept_rollback
from merkle_memory.ledger.tenant import Tenant

LEFTOVER = re.compile(r"\.(ledger\.head|ledger\.tree|ledger\.tree\.state|ledger\.ids)\..{8}\.tmp")


def _killed_at_rename(target: str, write: Callable[[], None], folder: Path) -> str:
    """Run ``write`` in a forked child that is SIGKILLed when it renames a temp file onto a
    file named ``target``: exactly what a kill between the temp file and its rename leaves.

    Returns:
        The name of the temp file it left in ``folder`` (the only new name there).
    """
    before = set(os.listdir(folder)) if folder.exists() else set()
    real = os.replace
    with warnings.catch_warnings():  # "multi-threaded, use of fork()": the child only writes
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns into pytest

        def replace(src: Any, dst: Any, **kwargs: Any) -> None:
            if os.path.basename(os.fspath(dst)) == target:
                os.kill(os.getpid(), signal.SIGKILL)
            real(src, dst, **kwargs)

        try:
            os.replace = replace  # type: ignore[assignment]
            write()
        finally:
            os._exit(3)  # not killed: the target was never renamed onto
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, hex(status)
    left = [n for n in set(os.listdir(folder)) - before if n.endswith(".tmp")]
    assert len(left) == 1 and left[0].startswith(f".{target}."), left
    return left[0]


def _tenant_with_leftovers(tmp_path: Path) -> Tenant:
    """A tenant of two sealed records whose folder holds one temp file of each of the four
    derived files, each left by a writer killed before its rename: the head's by the first
    save, the others by ``proofs.rebuild``. (A rebuild removes the leftovers it finds, so each
    is kept aside until the last kill, then put back: the same name, the same bytes.)"""
    root = tmp_path / "t"
    aside = tmp_path / "aside"
    aside.mkdir()
    name = _killed_at_rename(
        "ledger.head", lambda: Tenant(root).save({"id": "x", "summary": "one"}), root
    )
    os.rename(root / name, aside / name)
    tenant = Tenant(root)
    tenant.save({"id": "y", "summary": "two"})
    for target in ("ledger.tree", "ledger.ids", "ledger.tree.state"):
        name = _killed_at_rename(target, lambda: proofs.rebuild(root), root)
        os.rename(root / name, aside / name)
    for name in os.listdir(aside):
        os.rename(aside / name, root / name)
    assert _kinds(root) == [
        "ledger.head",
        "ledger.ids",
        "ledger.tree",
        "ledger.tree.state",
    ]
    return tenant


def _one_entry_and_a_leftover(tmp_path: Path, name: str) -> tuple[FolderLedgerStore, Path]:
    """A folder ledger with one entry, and a file ``name`` (a leftover's name) beside it."""
    led = Ledger(tmp_path / "ledger.jsonl")
    led.append("a", "1" * 64)
    store = led.store
    assert isinstance(store, FolderLedgerStore)
    left = tmp_path / name
    left.write_bytes(b"x")
    return store, left


def _temp_names(folder: Path) -> list[str]:
    """The leftovers of the four derived files in ``folder``, sorted."""
    return sorted(n for n in os.listdir(folder) if LEFTOVER.fullmatch(n))


def _kinds(folder: Path) -> list[str]:
    """The file each leftover in ``folder`` was replacing, sorted."""
    return sorted(m.group(1) for n in os.listdir(folder) if (m := LEFTOVER.fullmatch(n)))


def test_seal_removes_what_killed_writers_left_of_the_ledgers_own_files(tmp_path: Path) -> None:
    """The four kinds of leftover (made by real writers killed at their rename) are removed by
    ``seal``; the files themselves, the records and the verdict are untouched."""
    tenant = _tenant_with_leftovers(tmp_path)
    kept = {n: (tenant.root / n).read_bytes() for n in ("ledger.jsonl", "ledger.head")}
    report = tenant.seal()
    assert report.sealed_ids == ()
    assert report.report.ok
    assert sorted(os.listdir(tenant.root)) == [
        "ledger.head",
        "ledger.ids",
        "ledger.jsonl",
        "ledger.tree",
        "memory",
    ]  # no ledger.tree.state: the last rebuild was killed before it renamed the state
    assert {n: (tenant.root / n).read_bytes() for n in kept} == kept
    assert sorted(os.listdir(tenant.memory_dir)) == ["x.json", "y.json"]


def test_a_proof_that_rebuilds_or_rechecks_the_sidecar_removes_them(tmp_path: Path) -> None:
    """``proofs.rebuild``, and a ``sync`` that re-reads the whole ledger (its state file gone),
    remove the leftovers; a ``sync`` that only catches up lists nothing and keeps them."""
    tenant = _tenant_with_leftovers(tmp_path)
    proofs.rebuild(tenant.root)
    assert _temp_names(tenant.root) == []
    for target in ("ledger.tree", "ledger.ids"):
        name = _killed_at_rename(target, lambda: proofs.rebuild(tenant.root), tenant.root)
        os.rename(tenant.root / name, tmp_path / name)  # kept aside from the next rebuild
    for name in os.listdir(tmp_path):
        if name.endswith(".tmp"):
            os.rename(tmp_path / name, tenant.root / name)
    tenant.save({"id": "z", "summary": "three"})
    proofs.sync(tenant.root)  # catches up: the leftovers stay
    assert _kinds(tenant.root) == [
        "ledger.ids",
        "ledger.tree",
    ]
    (tenant.root / "ledger.tree.state").unlink()
    proofs.sync(tenant.root)  # no state: the whole ledger is re-read
    assert _temp_names(tenant.root) == []
    assert proofs.check(tenant.root)


def test_accept_rollback_removes_them(tmp_path: Path) -> None:
    """An accepted rollback, which empties the sidecar and resets its state, removes them."""
    tenant = _tenant_with_leftovers(tmp_path)
    path = tenant.ledger.path
    path.write_bytes(path.read_bytes().splitlines(keepends=True)[0])
    assert accept_rollback(path) is not None
    assert _temp_names(tenant.root) == []


DECOYS = (
    ".ledger.tree.state.abcdefg.tmp",  # 7 characters: no temp file of mkstemp
    ".ledger.tree.state.abcdefghi.tmp",  # 9
    ".ledger.tree.state.ABCDEFGH.tmp",  # mkstemp never uses capitals
    ".ledger.tree.state.abcdefgh.tmp.bak",
    "ledger.tree.state.abcdefgh.tmp",
    ".ledger.tree.state..tmp",
    ".ledger.tree.stat.abcdefgh.tmp",
    ".ledger.jsonl.abcdefgh.tmp",
    ".ledger.torn.abcdefgh.tmp",
    ".ledger.cosigned.abcdefgh.tmp",  # written by witness_ledger without the lock
    ".ledger.witnesses.abcdefgh.tmp",
    ".ledger.recovery-1.json.abcdefgh.tmp",
    ".testimony.json.abcdefgh.tmp",  # a bank writes it under bank.lock only
    ".bank.lock.abcdefgh.tmp",
)


def test_only_exact_names_of_regular_files_or_links_are_removed(tmp_path: Path) -> None:
    """Names that differ in any part, a folder and a FIFO of a leftover's name, and a record's
    temp file in ``memory/`` (``records.write_record`` writes those without the lock) are all
    kept, bytes unchanged; the one real leftover beside them is removed."""
    tenant = Tenant(tmp_path / "t")
    tenant.save({"id": "x", "summary": "one"})
    root = tenant.root
    for n, name in enumerate(DECOYS):
        (root / name).write_bytes(b"decoy %d\n" % n)
    (root / ".ledger.ids.folder00.tmp").mkdir()
    os.mkfifo(root / ".ledger.head.fifofifo.tmp")
    record_temp = tenant.memory_dir / ".y.json.0123abcd.tmp"  # as create_new names it
    record_temp.write_bytes(b'{"id": "y"}\n')
    (root / ".ledger.ids.abcdefgh.tmp").write_bytes(b"left by a kill")
    before = sorted(os.listdir(root))
    tenant.seal()
    assert sorted(os.listdir(root)) == [n for n in before if n != ".ledger.ids.abcdefgh.tmp"]
    for n, name in enumerate(DECOYS):
        assert (root / name).read_bytes() == b"decoy %d\n" % n
    assert (root / ".ledger.ids.folder00.tmp").is_dir()
    assert record_temp.read_bytes() == b'{"id": "y"}\n'


def test_a_link_named_like_a_leftover_is_removed_never_its_target(tmp_path: Path) -> None:
    """A symlink of a leftover's name (to a file outside, to a folder, dangling) is unlinked
    as a link: its target keeps its bytes and its folder keeps its files."""
    tenant = Tenant(tmp_path / "t")
    tenant.save({"id": "x", "summary": "one"})
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"keep me\n")
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "inside").write_bytes(b"keep\n")
    links = {
        ".ledger.tree.state.linklink.tmp": outside,
        ".ledger.tree.linkdir0.tmp": folder,
        ".ledger.head.dangling.tmp": tmp_path / "missing",
    }
    for name, target in links.items():
        os.symlink(target, tenant.root / name)
    tenant.seal()
    assert _temp_names(tenant.root) == []
    assert outside.read_bytes() == b"keep me\n"
    assert sorted(os.listdir(folder)) == ["inside"]
    assert not (tmp_path / "missing").exists()


def test_the_removal_runs_only_inside_a_locked_block(tmp_path: Path) -> None:
    """Called without the lock, ``remove_leftovers`` raises and lists nothing; inside a
    ``locked`` block (read-only too: its ``flock`` is exclusive) it removes and names them."""
    store, left = _one_entry_and_a_leftover(tmp_path, ".ledger.tree.state.abcdefgh.tmp")
    with pytest.raises(LedgerError, match="only under the ledger lock"):
        store.remove_leftovers()
    assert left.exists()
    with store.locked(write=False):
        assert store.remove_leftovers() == (".ledger.tree.state.abcdefgh.tmp",)
    assert not left.exists()


def test_nothing_is_removed_once_the_locked_ledger_was_replaced(tmp_path: Path) -> None:
    """A ``ledger.jsonl`` replaced while the lock is held (by a program ignoring it): the lock
    no longer excludes the writers of the file the path names, so nothing is removed."""
    store, left = _one_entry_and_a_leftover(tmp_path, ".ledger.ids.abcdefgh.tmp")
    with store.locked(write=True):
        copy = tmp_path / "copy"
        copy.write_bytes((tmp_path / "ledger.jsonl").read_bytes())
        os.replace(copy, tmp_path / "ledger.jsonl")
        assert store.remove_leftovers() == ()
    assert left.exists()


@pytest.fixture
def flock_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Set when a thread named ``sealer`` calls ``fcntl.flock`` to take a lock."""
    called = threading.Event()
    real = fcntl.flock

    def flock(fd: int, operation: int) -> None:
        if threading.current_thread().name == "sealer" and operation & fcntl.LOCK_EX:
            called.set()
        real(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)
    yield called


def test_a_writers_temp_file_in_flight_is_never_removed(
    tmp_path: Path, flock_calls: threading.Event
) -> None:
    """A writer holding the lock has its temp file of ``ledger.tree.state`` in flight; a seal
    in another thread reaches the lock (nothing removed before it), waits there, and the
    writer's rename then succeeds: the seal removes only what is left after it."""
    tenant = Tenant(tmp_path / "t")
    tenant.save({"id": "x", "summary": "one"})
    proofs.sync(tenant.root)
    in_flight = tenant.root / ".ledger.tree.state.inflight.tmp"
    stale = tenant.root / ".ledger.ids.stale000.tmp"
    stale.write_bytes(b"left by a kill")
    errors: list[BaseException] = []

    def seal() -> None:
        try:
            tenant.seal()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    writer = Ledger(tenant.root / "ledger.jsonl")
    state = (tenant.root / "ledger.tree.state").read_bytes()
    with writer.locked():
        in_flight.write_bytes(state)  # as atomic_write: the temp file, then the rename
        sealer = threading.Thread(target=seal, name="sealer")
        sealer.start()
        assert flock_calls.wait(30), "the seal never reached the lock"
        sealer.join(0.2)
        assert sealer.is_alive()  # waiting for the lock
        assert in_flight.exists() and stale.exists()
        os.replace(in_flight, tenant.root / "ledger.tree.state")
    sealer.join(30)
    assert not sealer.is_alive() and errors == []
    assert (tenant.root / "ledger.tree.state").read_bytes() == state
    assert not stale.exists()


def test_the_leftovers_are_unlinked_then_the_folder_fsynced_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Order: ``seal`` takes the lock (opens ``ledger.jsonl``) and, before it writes anything
    else, unlinks each leftover (sorted by name), then fsyncs the folder, once."""
    tenant = Tenant(tmp_path / "t")
    tenant.save({"id": "x", "summary": "one"})
    for name in (".ledger.tree.state.abcdefgh.tmp", ".ledger.head.12345678.tmp"):
        (tenant.root / name).write_bytes(b"x")
    tenant.ledger.store.close()
    rec = Recorder(monkeypatch)
    tenant.seal()
    monkeypatch.undo()
    first = rec.index("unlink", "ledger.head~tmp")
    assert rec.calls[0] == ("open", "ledger.jsonl")  # the lock
    assert {op for op, _ in rec.calls[:first]} == {"open"}  # nothing written before
    assert rec.calls[first : first + 4] == [
        ("unlink", "ledger.head~tmp"),
        ("unlink", "ledger.tree.state~tmp"),
        ("open", "t"),
        ("fsync", "t"),
    ]
    assert [c for c in rec.calls if c[0] == "unlink"] == rec.calls[first : first + 2]
    assert rec.calls.count(("fsync", "t")) == 1


def test_no_listing_on_the_append_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A save, and an append whose ``on_append`` hook keeps the sidecar synced, never list the
    folder (the removal costs them nothing) and leave a leftover where it is."""
    tenant = Tenant(tmp_path / "t")
    tenant.save({"id": "x", "summary": "one"})
    proofs.attach(tenant.ledger)
    tenant.save({"id": "y", "summary": "two"})
    left = tenant.root / ".ledger.tree.state.abcdefgh.tmp"
    left.write_bytes(b"x")
    listed: list[object] = []
    real_scandir, real_listdir = os.scandir, os.listdir

    def scandir(path: Any = ".") -> Any:
        listed.append(path)
        return real_scandir(path)

    def listdir(path: Any = ".") -> list[str]:
        listed.append(path)
        return real_listdir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "listdir", listdir)
    tenant.save({"id": "z", "summary": "three"})
    tenant.save({"id": "x", "summary": "again"})
    monkeypatch.undo()
    assert listed == []
    assert left.exists()
    assert sorted(os.listdir(tenant.root)) == sorted(
        [
            ".ledger.tree.state.abcdefgh.tmp",
            "ledger.head",
            "ledger.ids",
            "ledger.jsonl",
            "ledger.tree",
            "ledger.tree.state",
            "memory",
        ]
    )

"""SIGKILL at random points of a writer, across all stores (issue 7, crash consistency).

A writer child appends in a loop; after each write returns (is acknowledged) it appends the
write's number to its own acknowledgement log and fsyncs that log. The parent kills it with
SIGKILL after a random short delay, then checks the store: opening and verifying raise nothing,
verify is ok or shows only the documented torn state, and every acknowledged write is there.
The next round's child writes into the same store, so each recovery also runs on the state
the previous kill left.

Children are ``os.fork()`` copies of the test process (``merkle_memory`` already imported),
so one kill costs a few milliseconds plus the delay, and 200 kills fit in CI's budget. A child
never returns into pytest: it always leaves through ``os._exit``.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from merkle_memory.bank import MemoryBank
from merkle_memory.bank.memory import Memory
from merkle_memory.dag import Bucket, ContentBlock, Node
from merkle_memory.dag.store import open_store, verify_store
from merkle_memory.ledger import Ledger, verify_ledger
from merkle_memory.ledger.tenant import Tenant

KILLS = {"ledger": 60, "tenant": 50, "bank": 50, "nodestore": 40}
"""Kills per store in CI (200 in total); the soak variant multiplies them by 10."""

TS = datetime(2026, 9, 1, 12, 0, 0, tzinfo=UTC)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _fork_writer(ack_path: Path, write: Callable[[int], None]) -> int:
    """Fork a child that calls ``write(i)`` for i = 0, 1, ... and acknowledges each."""
    pid = os.fork()
    if pid != 0:
        return pid
    code = 0
    try:  # the child: never returns into pytest
        fd = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        i = 0
        while True:
            write(i)
            os.write(fd, f"{i}\n".encode())
            os.fsync(fd)
            i += 1
    except BaseException:
        code = 3
        with open(ack_path.with_suffix(".err"), "w") as handle:
            handle.write(traceback.format_exc())
    finally:
        os._exit(code)


def _kill_after(pid: int, delay: float, ack_path: Path) -> list[int]:
    """Kill ``pid`` with SIGKILL after ``delay`` seconds; return the acknowledged numbers."""
    time.sleep(delay)
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    err = ack_path.with_suffix(".err")
    assert not err.exists(), err.read_text()
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    if not ack_path.exists():
        return []
    lines = ack_path.read_bytes().split(b"\n")
    return [int(x) for x in lines[:-1]]  # the last piece is "" or an unfinished write


def _rounds(kind: str, soak: bool) -> int:
    return KILLS[kind] * (10 if soak else 1)


def _delay(rng: random.Random) -> float:
    return rng.choice([0.0, 0.001, 0.003]) if rng.random() < 0.2 else rng.uniform(0.005, 0.06)


def test_kill_ledger_appender(tmp_path: Path, soak: bool) -> None:
    """Kills during ``Ledger.append``: chain intact or torn at the end, no acked entry lost."""
    rng = random.Random(7001)
    path = tmp_path / "ledger.jsonl"
    acked_all: dict[str, str] = {}
    written: dict[str, str] = {}
    for rnd in range(_rounds("ledger", soak)):
        ack = tmp_path / f"ack-{rnd}.log"

        def write(i: int, rnd: int = rnd) -> None:
            mid = f"k{rnd}-{i}"
            Ledger(path).append(mid, _digest(mid))

        pid = _fork_writer(ack, write)
        acked = _kill_after(pid, _delay(rng), ack)
        for i in acked:
            acked_all[f"k{rnd}-{i}"] = _digest(f"k{rnd}-{i}")
        top = (max(acked) + 1) if acked else 0
        for i in range(top + 1):  # at most one write past the last ack can be in the file
            written[f"k{rnd}-{i}"] = _digest(f"k{rnd}-{i}")
        report = verify_ledger(path, written)
        if report.chain == "broken":  # only the documented torn state
            assert report.reason is not None and "unparseable" in report.reason
            assert report.broken_at == report.entries
        else:
            assert report.ok, report
        assert report.altered == ()
        for mid in acked_all:
            assert mid not in report.unsealed
        assert report.sealed >= len(acked_all) - (1 if report.chain == "broken" else 0)
    final = Ledger(path).append("final", _digest("final"))
    report = verify_ledger(path, {**written, "final": final.content_sha256})
    assert report.ok and report.chain == "intact"
    present = {e.memory_id for e in Ledger(path).entries(check_hash=True)}
    assert set(acked_all) <= present
    assert [e.seq for e in Ledger(path).entries()] == list(range(1, final.seq + 1))


def test_kill_tenant_saver(tmp_path: Path, soak: bool) -> None:
    """Kills during ``Tenant.save`` (record file, then its line): every acked record sealed."""
    rng = random.Random(7002)
    root = tmp_path / "tenant"
    acked_all: set[str] = set()
    for rnd in range(_rounds("tenant", soak)):
        ack = tmp_path / f"ack-{rnd}.log"

        def write(i: int, rnd: int = rnd) -> None:
            Tenant(root).save({"id": f"r{rnd}-{i}", "summary": f"ünïcode {i}", "key_facts": [i]})

        pid = _fork_writer(ack, write)
        acked_all.update(f"r{rnd}-{i}" for i in _kill_after(pid, _delay(rng), ack))
        if not root.exists():  # killed before the first save made the folder (in one rename)
            assert not acked_all
            continue
        report = Tenant(root).verify()
        if report.chain == "broken":
            assert report.reason is not None and "unparseable" in report.reason
        else:
            assert report.ok, report
        assert report.altered == () and report.missing == ()
        assert not acked_all & set(report.unsealed)
    sealed = Tenant(root).seal()  # adopts records whose line was lost, quarantines a tail
    assert sealed.report.ok and sealed.report.chain == "intact"
    assert sealed.report.unsealed == ()
    assert acked_all <= {e.memory_id for e in Tenant(root).ledger.entries(check_hash=True)}


def test_kill_bank_saver(tmp_path: Path, soak: bool) -> None:
    """Kills during ``MemoryBank.save``: every acked memory reads back and verifies."""
    rng = random.Random(7003)
    root = tmp_path / "bank"
    acked_ids: set[str] = set()
    for rnd in range(_rounds("bank", soak)):
        ack = tmp_path / f"ack-{rnd}.log"

        def make(i: int, rnd: int = rnd) -> Memory:
            return Memory("fact", "project", f"memory {rnd}-{i} ✓", tags=["k"], timestamp=TS)

        def write(i: int) -> None:
            MemoryBank(root).save(make(i))

        pid = _fork_writer(ack, write)
        acked_ids.update(make(i).id for i in _kill_after(pid, _delay(rng), ack))
        if not root.exists():  # killed before the first save made the bank (in one rename)
            assert not acked_ids
            continue
        report = MemoryBank(root).verify()
        assert report.problems == ()
        ledger = report.ledger
        assert ledger is not None
        if ledger["chain"] == "broken":
            assert "unparseable" in ledger["reason"]
        else:
            assert report.ok, report.to_dict()
        assert ledger["altered"] == [] and ledger["missing"] == []
        assert not acked_ids & set(ledger["unsealed"])
        bank = MemoryBank(root)
        for mid in acked_ids:
            assert bank.get(mid).id == mid
    bank = MemoryBank(root)
    bank.save(Memory("fact", "project", "after the kills", timestamp=TS))
    report = bank.verify()
    assert report.ok and report.problems == ()
    assert report.active == len(report.ledger["unsealed"]) + report.ledger["sealed"]  # type: ignore[index]
    assert acked_ids <= {s.memory.id for s in bank.memories()}


def _batch(rnd: int, i: int) -> list[Node]:
    """A chain of 4 nodes unique to (rnd, i), hanging off a shared root."""
    root = Node.create(Bucket("message", "user", (ContentBlock(type="text", text="root"),)))
    nodes = [root]
    parent = root.hash
    for j in range(4):
        bucket = Bucket(
            "message",
            "assistant" if j % 2 else "user",
            (ContentBlock(type="text", text=f"turn {rnd}-{i}-{j}"),),
        )
        node = Node.create(bucket, parent)
        nodes.append(node)
        parent = node.hash
    return nodes


def test_kill_sqlite_node_store_importer(tmp_path: Path, soak: bool) -> None:
    """Kills during ``put_many`` on SQLite: each batch is all-or-nothing, acked ones present."""
    rng = random.Random(7004)
    db = tmp_path / "nodes.db"
    acked: list[tuple[int, int]] = []
    for rnd in range(_rounds("nodestore", soak)):
        ack = tmp_path / f"ack-{rnd}.log"

        def write(i: int, rnd: int = rnd) -> None:
            store = open_store(db)
            try:
                store.put_many(_batch(rnd, i))
            finally:
                store.close()

        pid = _fork_writer(ack, write)
        acked.extend((rnd, i) for i in _kill_after(pid, _delay(rng), ack))
        if not db.exists():
            continue
        store = open_store(db, create=False)
        try:
            report = verify_store(store)
            assert report.ok, report.to_dict()
            for rnd_i in acked[-3:]:
                for node in _batch(*rnd_i):
                    assert store.get(node.hash) == node
            hashes = {row.hash for row in store.rows()}
        finally:
            store.close()
        top = max((i for r, i in acked if r == rnd), default=-1) + 1
        for node_set in (_batch(rnd, top)[1:],):  # the one unacked batch: all or nothing
            present = [n.hash in hashes for n in node_set]
            assert all(present) or not any(present)
    if not db.exists():  # every writer was killed before it made the store (a loaded machine)
        assert acked == []
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith("nodes.db")] == []
        return
    store = open_store(db, create=False)
    try:
        assert verify_store(store).ok
        hashes = {row.hash for row in store.rows()}
        for rnd_i in acked:
            assert {n.hash for n in _batch(*rnd_i)} <= hashes
    finally:
        store.close()


def test_kill_count_is_200() -> None:
    """The CI variant kills 200 writers in total across the four stores."""
    assert sum(KILLS.values()) == 200


@pytest.fixture(autouse=True)
def _reap_children() -> None:
    """Nothing to set up; listed so a failing round's child never outlives its test."""
    return None

"""Group commit (issue 15 item 2): calls from threads sharing one Ledger share one write and
one head; every acknowledged entry is in the file, seqs have no gap and no repeat, and a
failure reaches exactly the calls it concerns."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from merkle_memory.errors import LedgerFormatError, LedgerRollbackError
from merkle_memory.ledger import Entry, Ledger, verify_ledger
from merkle_memory.ledger._entry import GENESIS, build_entries

H = "ab" * 32


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def _wait_for(condition: Callable[[], bool]) -> None:
    """Wait until ``condition()`` holds (at most 30 s: a hang fails, a pass is quick)."""
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "threads never queued"
        time.sleep(0.001)


def _run(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.start()


def _count_flushes(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    counts: dict[str, int] = {}
    real_pwrite, real_sync = os.pwrite, os.fdatasync

    def name(fd: int) -> str:
        return os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))

    def pwrite(fd: int, data: Any, offset: int) -> int:
        key = "pwrite " + name(fd)
        counts[key] = counts.get(key, 0) + 1
        return real_pwrite(fd, data, offset)

    def fdatasync(fd: int) -> None:
        key = "fdatasync " + name(fd)
        counts[key] = counts.get(key, 0) + 1
        real_sync(fd)

    monkeypatch.setattr(os, "pwrite", pwrite)
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    return counts


def test_calls_waiting_for_the_lock_are_committed_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight threads append while the lock is held elsewhere; once it is released all their
    entries go to the file with one write of the lines and one head slot (two flushes for
    eight calls), each call's entries contiguous, and each call returns its own entries."""
    led = Ledger(tmp_path / "ledger.jsonl")
    led.append("first", H)
    results: dict[int, list[Entry]] = {}

    def worker(k: int) -> None:
        results[k] = led.append_many([(f"t{k}-{i}", H) for i in range(k + 1)])

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    with led.locked():
        _run(threads)
        _wait_for(lambda: len(led._queue) == 8)
        counts = _count_flushes(monkeypatch)
    for thread in threads:
        thread.join(30)
    monkeypatch.undo()
    assert counts == {
        "pwrite ledger.jsonl": 1,
        "fdatasync ledger.jsonl": 1,
        "pwrite ledger.head": 1,
        "fdatasync ledger.head": 1,
    }
    seqs = sorted(e.seq for entries in results.values() for e in entries)
    assert seqs == list(range(2, 2 + sum(range(1, 9))))
    lines = _lines(tmp_path / "ledger.jsonl")
    for k, entries in results.items():
        assert [e.memory_id for e in entries] == [f"t{k}-{i}" for i in range(k + 1)]
        assert [e.seq for e in entries] == list(range(entries[0].seq, entries[-1].seq + 1))
        assert [lines[e.seq - 1] for e in entries] == [e.line() for e in entries]
    report = verify_ledger(tmp_path / "ledger.jsonl", {})
    assert (report.chain, report.entries) == ("intact", 37)


def test_many_threads_racing_lose_nothing_and_repeat_nothing(tmp_path: Path) -> None:
    """Six threads each append 40 single entries and 10 batches of 3, racing: every
    acknowledged entry is in the file exactly where its seq says, seqs run 1..N with no gap
    and no repeat, the chain verifies, and the head names the last entry."""
    led = Ledger(tmp_path / "ledger.jsonl")
    acked: list[Entry] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for i in range(40):
                entry = led.append(f"w{k}-{i}", H)
                with lock:
                    acked.append(entry)
                if i % 4 == 0:
                    batch = led.append_many([(f"w{k}-{i}-{j}", H) for j in range(3)])
                    with lock:
                        acked.extend(batch)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    _run(threads)
    for thread in threads:
        thread.join(120)
    assert errors == []
    total = 6 * (40 + 10 * 3)
    assert sorted(e.seq for e in acked) == list(range(1, total + 1))
    lines = _lines(tmp_path / "ledger.jsonl")
    assert len(lines) == total
    assert all(lines[e.seq - 1] == e.line() for e in acked)
    report = verify_ledger(tmp_path / "ledger.jsonl", {})
    assert (report.chain, report.entries) == ("intact", total)
    head = led.store.read_head()
    assert head is not None and (head.seq, head.end) == (
        total,
        (tmp_path / "ledger.jsonl").stat().st_size,
    )


def test_a_bad_call_in_a_group_fails_alone(tmp_path: Path) -> None:
    """A call with a bad argument (an empty memory id) committed in a group gets its
    ``LedgerFormatError``; the other calls of the group are written, contiguous."""
    led = Ledger(tmp_path / "ledger.jsonl")
    outcome: dict[str, Any] = {}

    def call(name: str, items: list[tuple[str, str]]) -> None:
        try:
            outcome[name] = led.append_many(items)
        except LedgerFormatError as exc:
            outcome[name] = exc

    threads = [
        threading.Thread(target=call, args=("a", [("a1", H), ("a2", H)])),
        threading.Thread(target=call, args=("bad", [("ok", H), ("", H)])),
        threading.Thread(target=call, args=("c", [("c1", H)])),
    ]
    with led.locked():
        _run(threads)
        _wait_for(lambda: len(led._queue) == 3)
    for thread in threads:
        thread.join(30)
    assert isinstance(outcome["bad"], LedgerFormatError)
    assert "memory_id must be a non-empty string" in str(outcome["bad"])
    written = [e.memory_id for e in outcome["a"] + outcome["c"]]
    assert sorted(written) == ["a1", "a2", "c1"]
    assert sorted(e.seq for e in outcome["a"] + outcome["c"]) == [1, 2, 3]
    assert [line.count(b'"ok"') for line in _lines(tmp_path / "ledger.jsonl")] == [0, 0, 0]


def test_a_refusal_reaches_every_call_of_the_group(tmp_path: Path) -> None:
    """A rollback found by the group's leader refuses every call of the group (each its own
    ``LedgerRollbackError`` with the seqs), and nothing is written."""
    led = Ledger(tmp_path / "ledger.jsonl")
    led.append_many([("x", H), ("y", H)])
    outcome: dict[int, Any] = {}

    def call(k: int) -> None:
        try:
            outcome[k] = led.append(f"n{k}", H)
        except LedgerRollbackError as exc:
            outcome[k] = exc

    threads = [threading.Thread(target=call, args=(k,)) for k in range(4)]
    with led.locked():
        (tmp_path / "ledger.jsonl").write_bytes(_lines(tmp_path / "ledger.jsonl")[0] + b"\n")
        _run(threads)
        _wait_for(lambda: len(led._queue) == 4)
    for thread in threads:
        thread.join(30)
    assert all(isinstance(outcome[k], LedgerRollbackError) for k in range(4))
    assert {(e.expected_seq, e.found_seq) for e in outcome.values()} == {(2, 1)}
    assert len({id(e) for e in outcome.values()}) == 4
    assert len(_lines(tmp_path / "ledger.jsonl")) == 1


def test_a_hook_error_reaches_the_group_and_its_entries_stay(tmp_path: Path) -> None:
    """The ``on_append`` hook runs once for the group with all its entries; when it raises,
    every call of the group gets the error and its entries stay acknowledged."""
    seen: list[list[int]] = []

    def hook(entries: Any) -> None:
        seen.append([e.seq for e in entries])
        raise RuntimeError("hook failed")

    led = Ledger(tmp_path / "ledger.jsonl", on_append=hook)
    outcome: dict[int, Any] = {}

    def call(k: int) -> None:
        try:
            outcome[k] = led.append(f"n{k}", H)
        except RuntimeError as exc:
            outcome[k] = exc

    threads = [threading.Thread(target=call, args=(k,)) for k in range(3)]
    with led.locked():
        _run(threads)
        _wait_for(lambda: len(led._queue) == 3)
    for thread in threads:
        thread.join(30)
    assert seen == [[1, 2, 3]]
    assert [str(outcome[k]) for k in range(3)] == ["hook failed"] * 3
    assert len(_lines(tmp_path / "ledger.jsonl")) == 3
    assert verify_ledger(tmp_path / "ledger.jsonl", {}).entries == 3


def _naive_entries(
    pairs: list[tuple[str, str]], op: str, ts: float, seq: int, prev: str
) -> list[Entry]:
    out = []
    for mid, digest in pairs:
        seq += 1
        out.append(Entry.create(seq, ts, op, mid, digest, prev))
        prev = out[-1].hash
    return out


@pytest.mark.parametrize(
    "pairs",
    [
        pytest.param([("m1", H), ("m2", "cd" * 32)], id="simple"),
        pytest.param([('quote"id', H), ("back\\slash", H), ("é✓ unicode", H)], id="escapes"),
        pytest.param([("tab\tid", H), ("x" * 1024, H)], id="control-and-longest"),
    ],
)
@pytest.mark.parametrize("ts", [1789851200.0, 1789851200.123457, 5.5e-05, 2**60 + 0.0])
def test_build_entries_is_entry_create_in_a_loop(pairs: list[tuple[str, str]], ts: float) -> None:
    """The batch builder of ``append_many`` gives exactly the entries and line bytes of
    ``Entry.create`` called once per pair (the reference), for ids that need escapes and ts
    values in every number form."""
    prev = "12" * 32
    entries, lines = build_entries(pairs, "adopt", ts, 41, prev)
    assert entries == _naive_entries(pairs, "adopt", ts, 41, prev)
    assert lines == b"".join(e.line() + b"\n" for e in entries)
    assert build_entries(pairs, "save", ts, 0, GENESIS)[0][0].prev == GENESIS


@pytest.mark.parametrize(
    ("pairs", "op", "ts", "message"),
    [
        ([("m", H), ("", H)], "save", 1.0, "memory_id must be a non-empty string"),
        ([("m", "AB" * 32)], "save", 1.0, "content_sha256 is not 64-char lowercase hex"),
        ([("m", H)], "save", float("nan"), "ts must be finite"),
        ([("m", H)], "delete", 1.0, "op is not save, adopt or forget"),
        ([("x" * 1025, H)], "save", 1.0, "longer than 1024"),
        ([("a\0b", H)], "save", 1.0, "memory_id must be a non-empty string"),
    ],
)
def test_build_entries_refuses_what_entry_create_refuses(
    pairs: list[tuple[str, str]], op: str, ts: float, message: str
) -> None:
    """A bad pair, op or ts raises the ``LedgerFormatError`` ``Entry.create`` raises."""
    with pytest.raises(LedgerFormatError, match=message):
        build_entries(pairs, op, ts, 0, GENESIS)
    with pytest.raises(LedgerFormatError, match=message):
        _naive_entries(pairs, op, ts, 0, GENESIS)


class _Interrupt(BaseException):
    """Stands for a KeyboardInterrupt delivered to one waiting thread."""


def test_a_call_interrupted_while_waiting_withdraws_and_nothing_hangs(tmp_path: Path) -> None:
    """A call interrupted while it waits in the queue withdraws (its entry is not written),
    the group goes on without it, and the next call is committed normally."""
    led = Ledger(tmp_path / "ledger.jsonl")
    cond = led._queue_cond
    real_wait = cond.wait
    victims: set[int] = set()

    def wait(timeout: float | None = None) -> bool:
        if threading.get_ident() in victims:
            raise _Interrupt
        return real_wait(timeout)

    outcome: dict[str, Any] = {}

    def call(name: str, victim: bool) -> None:
        if victim:
            victims.add(threading.get_ident())
        try:
            outcome[name] = led.append(name, H)
        except _Interrupt as exc:
            outcome[name] = exc

    cond.wait = wait  # type: ignore[method-assign]
    leader = threading.Thread(target=call, args=("leader", False))
    with led.locked():
        leader.start()
        _wait_for(lambda: len(led._queue) == 1 and led._leading)
        victim = threading.Thread(target=call, args=("victim", True))
        victim.start()
        victim.join(30)
    leader.join(30)
    assert isinstance(outcome["victim"], _Interrupt)
    assert outcome["leader"].seq == 1
    assert led.append("after", H).seq == 2
    assert [e.memory_id for e in led.entries()] == ["leader", "after"]
    assert (led._queue, led._leading) == ([], False)

"""A child forked while other threads of the parent are inside a ``Ledger`` (its lock, a group
commit, the store's descriptor pool) appends through the same object: the locks those threads
held are free in the child, which still waits for the parent's ``flock``; the chain stays one
chain. A block the forking thread itself holds is covered by
``test_head_slots.test_a_forked_child_never_shares_the_parents_lock``."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from support import fork_child, held_by_another_thread

from merkle_memory.ledger import Entry, Ledger, verify_ledger

H = "ab" * 32


def _ids(path: Path) -> list[tuple[int, str]]:
    """``(seq, memory_id)`` of every entry, after ``verify_ledger`` found the chain intact."""
    report = verify_ledger(path, {})
    assert report.chain == "intact"
    return [(entry.seq, entry.memory_id) for entry in Ledger(path).entries(check_hash=True)]


def _wait_for(condition: Callable[[], bool]) -> None:
    """Wait until ``condition()`` holds (at most 30 s: a hang fails, a pass is quick)."""
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.001)


def test_a_child_forked_while_another_thread_holds_the_lock_appends_after_it(
    tmp_path: Path,
) -> None:
    """The reviewer's case: a thread inside ``with led.locked():`` while the main thread
    forks. The child's copy of the object's thread lock was held by a thread the child does
    not have (it waited for it forever); now the child appends once the parent's block ends
    (the ``flock`` is still the parent's until then)."""
    path = tmp_path / "ledger.jsonl"
    led = Ledger(path)
    led.append("a", H)
    inside, leave = threading.Event(), threading.Event()
    lines_when_leaving: list[int] = []

    def hold() -> None:
        with led.locked():
            led.append("b", H)
            inside.set()
            leave.wait(30)
            lines_when_leaving.append(len(path.read_bytes().splitlines()))

    holder = threading.Thread(target=hold)
    holder.start()
    assert inside.wait(30)
    read_end, write_end = os.pipe()

    def child() -> None:
        os.close(read_end)
        os.write(write_end, b"s")
        entry = led.append("child", H)
        assert (entry.seq, entry.memory_id) == (3, "child")

    wait = fork_child(child)
    os.close(write_end)
    assert os.read(read_end, 1) == b"s"  # the child is about to append
    os.close(read_end)
    leave.set()
    holder.join(30)
    wait()
    assert led.append("c", H).seq == 4
    assert lines_when_leaving == [2]  # the child did not append inside the parent's block
    assert _ids(path) == [(1, "a"), (2, "b"), (3, "child"), (4, "c")]


def test_a_child_forked_during_another_threads_group_commit_appends(tmp_path: Path) -> None:
    """A thread leading a group commit (stopped in its ``on_append`` hook, holding the lock)
    and another queued behind it while the main thread forks: in the child the queue, the
    lead and the lock are not theirs; ``append`` and ``append_many`` commit there."""
    path = tmp_path / "ledger.jsonl"
    inside, leave = threading.Event(), threading.Event()

    def hook(entries: Sequence[Entry]) -> None:
        if entries[0].memory_id == "b":
            inside.set()
            leave.wait(30)

    led = Ledger(path, on_append=hook)
    led.append("a", H)
    leader = threading.Thread(target=led.append_many, args=([("b", H)],))
    leader.start()
    assert inside.wait(30)
    queued = threading.Thread(target=led.append, args=("q", H))
    queued.start()
    _wait_for(lambda: len(led._queue) == 1 and led._leading)
    read_end, write_end = os.pipe()

    def child() -> None:
        os.close(write_end)
        assert os.read(read_end, 1) == b"d"  # the parent's threads are done
        assert led.append("child1", H).seq == 4
        made = led.append_many([("child2", H), ("child3", H)])
        assert [(e.seq, e.memory_id) for e in made] == [(5, "child2"), (6, "child3")]

    wait = fork_child(child)
    os.close(read_end)
    leave.set()
    leader.join(30)
    queued.join(30)
    os.write(write_end, b"d")
    os.close(write_end)
    wait()
    assert led.append("c", H).seq == 7
    assert _ids(path) == [
        (1, "a"),
        (2, "b"),
        (3, "q"),
        (4, "child1"),
        (5, "child2"),
        (6, "child3"),
        (7, "c"),
    ]


def test_a_child_forked_while_internal_locks_are_held_appends(tmp_path: Path) -> None:
    """The short internal locks (the group-commit condition, the folder store's descriptor
    pool) held by another thread at the fork are free in the child: the fast path (one
    entry) and the group-commit path (``append_many``) both commit there."""
    path = tmp_path / "ledger.jsonl"
    led = Ledger(path)
    led.append("a", H)
    led.append("b", H)  # now the fast path applies to the next append

    def child() -> None:
        assert led.append("child1", H).seq == 3
        made = led.append_many([("child2", H), ("child3", H)])
        assert [e.seq for e in made] == [4, 5]

    with (
        held_by_another_thread(lambda: led._queue_cond),
        held_by_another_thread(lambda: led._folder()._pool),
    ):
        fork_child(child)()
    assert _ids(path) == [(1, "a"), (2, "b"), (3, "child1"), (4, "child2"), (5, "child3")]
    assert led.append("c", H).seq == 6  # the parent's object noticed the child's appends

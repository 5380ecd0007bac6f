"""The single-entry fast path of ``Ledger.append`` (issue 15 item 1): byte-identical lines and
head slots from its templates (checked against the generic encoders and against the general
append path), taken only when nothing changed since this object's last append, and left for
the general path, which re-reads and decides, whenever another writer touched the ledger or
``ledger.head``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import Crash, Recorder

from merkle_memory.errors import LedgerFormatError, LedgerRollbackError, StoreFileError
from merkle_memory.ledger import Head, Ledger, verify_ledger
from merkle_memory.ledger._chain import _Tip
from merkle_memory.ledger._entry import GENESIS, build_entries, build_one
from merkle_memory.ledger._folder import (
    FolderLedgerStore,
    decode_head,
    encode_head_slot,
    head_slot_page,
)

H = "ab" * 32
SLOT = 4096

hex64 = st.text("0123456789abcdef", min_size=64, max_size=64)
ids = st.one_of(
    st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=30),
    st.text(min_size=0, max_size=12),  # quotes, escapes, controls, surrogates, empty
    st.text(min_size=1020, max_size=1030, alphabet="ab"),  # around the length limit
)
stamps = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=1e9, max_value=3e9),
    st.integers(-5, 5).map(float),
)


@settings(max_examples=100, deadline=None)
@given(
    memory_id=ids,
    digest=st.one_of(hex64, st.text(max_size=70)),
    op=st.sampled_from(["save", "adopt", "forget", "other"]),
    ts=stamps,
    seq=st.one_of(st.integers(0, 10**6), st.just(2**53 - 2), st.just(2**53 - 1)),
    prev=hex64,
)
def test_build_one_is_build_entries_of_one_pair(
    memory_id: str, digest: str, op: str, ts: float, seq: int, prev: str
) -> None:
    """Whenever ``build_one`` builds an entry it is exactly ``build_entries`` of that one pair
    (the entry and the line, byte for byte); it builds every usual one (a printable ASCII id
    without ``"`` or ``\\``, a 64-hex digest, a known op, a finite float, a seq below 2**53 - 1)
    and declines the rest, which ``build_entries`` then builds or refuses."""
    built = build_one(memory_id, digest, op, ts, seq, prev)
    try:
        reference: tuple[Any, bytes] | None = build_entries(
            [(memory_id, digest)], op, ts, seq, prev
        )
    except LedgerFormatError:
        reference = None
    usual = (
        0 < len(memory_id) <= 1024
        and memory_id.isascii()
        and memory_id.isprintable()
        and '"' not in memory_id
        and "\\" not in memory_id
        and len(digest) == 64
        and not digest.strip("0123456789abcdef")
        and op in ("save", "adopt", "forget")
        and ts - ts == 0.0
        and seq < 2**53 - 1
    )
    if usual:
        assert built is not None
    if built is not None:
        assert reference is not None
        entries, lines = reference
        assert [built[0]] == entries
        assert built[1] == lines


@settings(max_examples=150, deadline=None)
@given(
    seq=st.integers(1, 2**53 - 1),
    digest=hex64,
    end=st.integers(1, 2**53 - 1),
    fingerprint=st.text(
        st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters='"\\'),
        min_size=1,
        max_size=128,
    ),
    counter=st.integers(1, 2**53 - 1),
)
def test_head_slot_page_is_encode_head_slot(
    seq: int, digest: str, end: int, fingerprint: str, counter: int
) -> None:
    """The byte template of a head slot gives exactly the checking encoder's slot (and it
    decodes back to the head), for every value an append can record."""
    head = Head(seq, digest, end, fingerprint)
    page = head_slot_page(seq, digest, end, fingerprint, counter)
    assert page == encode_head_slot(head, counter)
    state = decode_head(page + bytes(SLOT))
    assert (state.head, state.slot, state.counter) == (head, 0, counter)


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """What every ``FolderLedgerStore.append_unchanged`` call did: ``True`` when it wrote
    (the fast path), ``False`` when it declined (the general path followed)."""
    seen: list[bool] = []
    real = FolderLedgerStore.append_unchanged

    def spy(self: FolderLedgerStore, *args: Any) -> Head | None:
        head = real(self, *args)
        seen.append(head is not None)
        return head

    monkeypatch.setattr(FolderLedgerStore, "append_unchanged", spy)
    yield seen


@settings(max_examples=25, deadline=None)
@given(
    calls=st.lists(
        st.tuples(ids, st.one_of(hex64, st.just("not hex")), st.sampled_from(["save", "forget"])),
        min_size=1,
        max_size=8,
    ),
    ts=st.lists(st.floats(min_value=0.0, max_value=4e9), min_size=8, max_size=8),
)
def test_fast_and_general_paths_write_identical_ledgers_and_heads(
    tmp_path_factory: pytest.TempPathFactory,
    calls: list[tuple[str, str, str]],
    ts: list[float],
) -> None:
    """The same calls through ``append`` (fast path after the first; every other one inside
    ``locked()``) and through
    ``append_many`` of one pair (the general path: tail, head decoded, rollback checks, the
    generic encoders) leave byte-identical ledgers, the same heads (seq, hash, end, counter,
    slot; the fingerprints name different files) and every head slot as
    ``encode_head_slot`` writes it; a refused call is refused by both, with the same
    message. What the fast path keeps (its head, each open head file's state) is what the
    general decoder reads from the bytes."""
    root = tmp_path_factory.mktemp("paths")
    fast = Ledger(root / "fast" / "ledger.jsonl")
    general = Ledger(root / "general" / "ledger.jsonl")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "fdatasync", lambda fd: None)
        patch.setattr(os, "fsync", lambda fd: None)
        for n, ((memory_id, digest, op), stamp) in enumerate(zip(calls, ts, strict=False)):
            outcomes = []
            for led, one in ((fast, True), (general, False)):
                try:
                    if one and n % 2:  # under a held lock, as Tenant.save appends
                        with led.locked():
                            entry = led.append(memory_id, digest, op=op, ts=stamp)
                    elif one:
                        entry = led.append(memory_id, digest, op=op, ts=stamp)
                    else:
                        entry = led.append_many([(memory_id, digest)], op=op, ts=stamp)[0]
                    outcomes.append(entry)
                except LedgerFormatError as exc:
                    outcomes.append(str(exc))
            assert outcomes[0] == outcomes[1]
            # What the fast path keeps (built without the dataclasses' ``__init__``) is what
            # the general decoder reads: the head from the file, each kept state from its bytes.
            head_path = root / "fast" / "ledger.head"
            if head_path.exists():
                assert fast._last == decode_head(head_path.read_bytes()).head
            assert isinstance(fast.store, FolderLedgerStore)
            for handle in fast.store._idle:
                if handle.head.state is not None and handle.head.data is not None:
                    assert decode_head(handle.head.data) == handle.head.state
    fast.close()
    general.close()
    assert (root / "fast" / "ledger.jsonl").read_bytes() == (
        root / "general" / "ledger.jsonl"
    ).read_bytes()
    heads = []
    for name in ("fast", "general"):
        path = root / name / "ledger.head"
        if not path.exists():
            heads.append(None)
            continue
        data = path.read_bytes()
        state = decode_head(data)
        for slot in (0, 1):
            page = data[slot * SLOT : (slot + 1) * SLOT]
            if any(page):
                other = decode_head(page + bytes(SLOT))
                assert page == encode_head_slot(other.head, other.counter)
        heads.append((state.head.seq, state.head.hash, state.head.end, state.counter, state.slot))
    assert heads[0] == heads[1]


def test_steady_appends_take_the_fast_path_also_under_a_held_lock(
    tmp_path: Path, taken: list[bool]
) -> None:
    """Once an object has written ``ledger.head`` in place, every append takes the fast path:
    plain calls and calls inside ``locked()`` (as ``Tenant.save`` makes them) alike. (The
    first append of a new ledger creates the head whole by a rename, so the second reads it
    back through the general path.)"""
    led = Ledger(tmp_path / "ledger.jsonl")
    for i in range(3):
        led.append(f"a{i}", H)
    with led.locked():
        led.append("b", H)
        led.append("c", H)
    led.append("d", H)
    assert taken == [False, True, True, True, True]
    report = verify_ledger(tmp_path / "ledger.jsonl", {})
    assert (report.chain, report.entries) == ("intact", 6)


def test_another_writers_append_sends_the_next_append_down_the_general_path(
    tmp_path: Path, taken: list[bool]
) -> None:
    """An append by another object (its own descriptors, as another process has) changes the
    ledger's fingerprint and ``ledger.head``: the next append of the first object declines
    the fast path, reads the tail and the head, and continues the chain after the other
    writer's entry; the one after it is fast again."""
    first = Ledger(tmp_path / "ledger.jsonl")
    first.append("a", H)
    first.append("b", H)
    Ledger(tmp_path / "ledger.jsonl").append("other", H)
    taken.clear()
    entry = first.append("c", H)
    assert (taken, entry.seq) == ([False], 4)
    assert first.append("d", H).seq == 5
    assert taken == [False, True]
    report = verify_ledger(tmp_path / "ledger.jsonl", {})
    assert (report.chain, report.entries) == ("intact", 5)


def test_a_head_rewritten_by_another_process_is_read_again(
    tmp_path: Path, taken: list[bool]
) -> None:
    """A child process rewrites ``ledger.head`` in place (same file, same size) to claim a
    later entry than the ledger holds, leaving the ledger untouched: the parent's next
    append notices the head bytes changed, decodes them and refuses the rollback (nothing
    written), exactly as the general path does."""
    led = Ledger(tmp_path / "ledger.jsonl")
    led.append("a", H)
    led.append("b", H)
    head_path = tmp_path / "ledger.head"
    state = decode_head(head_path.read_bytes())
    forged = encode_head_slot(Head(9, H, 9999, "0:0:9999:0:0"), state.counter + 1)
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            fd = os.open(head_path, os.O_WRONLY)
            os.pwrite(fd, forged, (1 - state.slot) * SLOT)
            os.fsync(fd)
            os.close(fd)
        except BaseException:
            code = 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    before = (tmp_path / "ledger.jsonl").read_bytes()
    taken.clear()
    with pytest.raises(LedgerRollbackError, match="records seq 9 but the file ends at seq 2"):
        led.append("c", H)
    assert taken == [False]
    assert (tmp_path / "ledger.jsonl").read_bytes() == before


def test_a_head_restored_from_an_older_copy_is_read_again(
    tmp_path: Path, taken: list[bool]
) -> None:
    """``ledger.head`` put back as it was one append earlier (bytes changed in place): the
    fast path declines, the general path reads a head one entry behind the file (harmless)
    and appends; the chain and the new head are whole."""
    led = Ledger(tmp_path / "ledger.jsonl")
    led.append("a", H)
    led.append("b", H)
    older = (tmp_path / "ledger.head").read_bytes()
    led.append("c", H)
    with open(tmp_path / "ledger.head", "r+b") as fh:
        fh.write(older)
    taken.clear()
    assert led.append("d", H).seq == 4
    assert taken == [False]
    state = decode_head((tmp_path / "ledger.head").read_bytes())
    assert (state.head.seq, state.head.end) == (4, (tmp_path / "ledger.jsonl").stat().st_size)
    report = verify_ledger(tmp_path / "ledger.jsonl", {})
    assert (report.chain, report.entries) == ("intact", 4)


def test_a_truncated_ledger_is_refused_not_appended_to(tmp_path: Path, taken: list[bool]) -> None:
    """The ledger cut back by one entry behind the object's back (a rollback): its
    fingerprint and size no longer match, the fast path declines and the general path
    refuses with ``LedgerRollbackError``; nothing is written."""
    led = Ledger(tmp_path / "ledger.jsonl")
    led.append("a", H)
    size = (tmp_path / "ledger.jsonl").stat().st_size
    led.append("b", H)
    os.truncate(tmp_path / "ledger.jsonl", size)
    taken.clear()
    with pytest.raises(LedgerRollbackError, match="went backwards"):
        led.append("c", H)
    assert taken == [False]
    assert (tmp_path / "ledger.jsonl").stat().st_size == size


def test_a_ledger_replaced_by_a_copy_is_reopened(tmp_path: Path, taken: list[bool]) -> None:
    """``ledger.jsonl`` replaced by a byte-identical copy (another inode): the path no longer
    names the open file, so the fast path declines and the general path opens the new file
    and appends to it (its fingerprint differs from the head's: the chain is walked)."""
    led = Ledger(tmp_path / "ledger.jsonl")
    led.append("a", H)
    led.append("b", H)
    copy = tmp_path / "copy"
    copy.write_bytes((tmp_path / "ledger.jsonl").read_bytes())
    os.replace(copy, tmp_path / "ledger.jsonl")
    taken.clear()
    assert led.append("c", H).seq == 3
    assert taken == [False]
    report = verify_ledger(tmp_path / "ledger.jsonl", {})
    assert (report.chain, report.entries) == ("intact", 3)


@pytest.mark.parametrize("change", ["replaced", "removed", "symlink"])
def test_a_ledger_replaced_inside_a_held_block_is_never_written_through(
    tmp_path: Path, taken: list[bool], change: str
) -> None:
    """Inside ``with ledger.locked():`` another program (ignoring the lock) replaces
    ``ledger.jsonl`` by rename, removes it or turns it into a symlink: the next append (the
    fast path, then the general path) and ``append_many`` refuse with ``StoreFileError``;
    the locked file (now unlinked or renamed) gets no byte and the path's file none."""
    path = tmp_path / "ledger.jsonl"
    led = Ledger(path)
    led.append("a", H)
    led.append("b", H)
    with led.locked():
        led.append("c", H)
        old_fd = os.open(path, os.O_RDONLY)  # the locked file, to look at it afterwards
        try:
            before = path.read_bytes()
            if change == "replaced":
                (tmp_path / "copy").write_bytes(before)
                os.replace(tmp_path / "copy", path)
            elif change == "removed":
                path.unlink()
            else:
                os.rename(path, tmp_path / "moved")
                path.symlink_to(tmp_path / "moved")
            taken.clear()
            message = "replaced or removed while this process held its lock; nothing written"
            with pytest.raises(StoreFileError, match=message):
                led.append("d", H)
            with pytest.raises(StoreFileError, match=message):
                led.append_many([("e", H), ("f", H)])
            assert taken == [False]
            assert os.fstat(old_fd).st_size == len(before)
            assert os.pread(old_fd, len(before) + 1, 0) == before
        finally:
            os.close(old_fd)
    if change == "replaced":
        assert path.read_bytes() == before
        assert led.append("d", H).seq == 4  # after the block: the new file, opened anew
        report = verify_ledger(path, {})
        assert (report.chain, report.entries) == ("intact", 4)


def test_unusual_arguments_take_the_general_path_and_its_errors(
    tmp_path: Path, taken: list[bool]
) -> None:
    """An id that needs escaping is appended by the general path (same entry as
    ``Entry.create``); a bad digest, op or stamp is refused by it with its own message, and
    nothing is written."""
    led = Ledger(tmp_path / "ledger.jsonl")
    led.append("a", H)
    taken.clear()
    entry = led.append('q"uote', H, ts=1.5)
    assert (entry.memory_id, entry.seq, entry.ts) == ('q"uote', 2, 1.5)
    size = (tmp_path / "ledger.jsonl").stat().st_size
    with pytest.raises(LedgerFormatError, match="content_sha256 is not 64-char lowercase hex"):
        led.append("b", "AB" * 32)
    with pytest.raises(LedgerFormatError, match="op must be"):
        led.append("b", H, op="delete")
    with pytest.raises(LedgerFormatError, match="ts must be finite"):
        led.append("b", H, ts=float("nan"))
    assert taken == []
    assert (tmp_path / "ledger.jsonl").stat().st_size == size
    assert led.append("b", H).prev == entry.hash
    assert taken == [True]


def test_an_on_append_hook_runs_under_the_lock_through_the_general_path(
    tmp_path: Path, taken: list[bool]
) -> None:
    """With a hook set, appends take the general path, so the hook runs under the lock
    (``holds_lock``) after the head is durable."""
    led = Ledger(tmp_path / "ledger.jsonl")
    led.append("a", H)
    seen: list[tuple[int, bool]] = []
    led.on_append = lambda entries: seen.append((entries[0].seq, led.holds_lock))
    led.append("b", H)
    assert (seen, taken) == ([(2, True)], [])


def test_the_first_entry_of_a_ledger_takes_the_general_path(
    tmp_path: Path, taken: list[bool]
) -> None:
    """A new object knows nothing of the ledger: its first append reads the tail and the
    head (general path); the genesis entry's prev is 64 zeros."""
    entry = Ledger(tmp_path / "ledger.jsonl").append("a", H)
    assert (entry.seq, entry.prev, taken) == (1, GENESIS, [])


def test_the_same_object_continues_after_a_crash_at_every_step_of_a_fast_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stop a fast append before each of its four file operations (line ``pwrite``, its
    ``fdatasync``, head slot ``pwrite``, its ``fdatasync``) with an error, then append again
    through the same object: it does not trust what it knew (the general path runs), the
    chain stays whole with the interrupted line kept or not, and the head names the last
    entry."""
    for k in range(4):
        folder = tmp_path / str(k)
        folder.mkdir()
        led = Ledger(folder / "ledger.jsonl")
        for name in ("a", "b", "c"):
            led.append(name, H)
        rec = Recorder(monkeypatch, crash_at=k)
        with pytest.raises(Crash):
            led.append("lost", H)
        monkeypatch.undo()
        assert (
            rec.calls[:k]
            == [
                ("pwrite", "ledger.jsonl"),
                ("fdatasync", "ledger.jsonl"),
                ("pwrite", "ledger.head"),
            ][:k]
        )
        written = k >= 1
        entry = led.append("next", H)
        assert entry.seq == 4 + written
        report = verify_ledger(folder / "ledger.jsonl", {})
        assert (report.chain, report.entries) == ("intact", 4 + written)
        state = decode_head((folder / "ledger.head").read_bytes())
        assert (state.head.seq, state.head.hash) == (entry.seq, entry.hash)
        led.close()


def test_what_the_fast_path_keeps_is_what_the_files_hold(tmp_path: Path, taken: list[bool]) -> None:
    """The head, the head file's state and the tip the fast path builds (through the slots'
    descriptors, without the dataclasses' ``__init__``) equal the ones decoded from the files
    as they are after each append: plain calls and calls inside ``locked()`` alike."""
    path = tmp_path / "ledger.jsonl"
    led = Ledger(path)
    store = led.store
    assert isinstance(store, FolderLedgerStore)
    for n in range(6):
        if n % 2:
            with led.locked():
                entry = led.append(f"m{n}", H)
        else:
            entry = led.append(f"m{n}", H)
        data = (tmp_path / "ledger.head").read_bytes()
        state = decode_head(data)
        with store.locked(write=False) as file:
            fingerprint = file.fingerprint()
        end = path.stat().st_size
        assert led._last == state.head == Head(entry.seq, entry.hash, end, fingerprint)
        assert led._tip == _Tip(fingerprint, end, entry)
        if n:  # the first append made the head whole (a rename): reopened by the next
            kept = store._idle[-1].head
            assert (kept.data, kept.state) == (data, state)
    assert taken == [False, True, True, True, True]  # the first entry has no tip yet
    led.close()


def test_short_writes_of_a_fast_append_are_completed(tmp_path: Path, taken: list[bool]) -> None:
    """A ``pwrite`` that takes only part of the line or of the head slot (never seen on a
    regular file, allowed by POSIX) is continued where it stopped: the ledger and the head
    are byte for byte those of appends whose writes were whole."""
    short = Ledger(tmp_path / "short" / "ledger.jsonl")
    whole = Ledger(tmp_path / "whole" / "ledger.jsonl")
    for led in (short, whole):
        for n in range(2):
            led.append(f"m{n}", H, ts=1_700_000_000.0 + n)
    real = os.pwrite

    def halves(fd: int, data: bytes, offset: int) -> int:
        return real(fd, bytes(data[: max(1, len(data) // 2)]), offset)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "pwrite", halves)
        for n in range(2, 4):
            short.append(f"m{n}", H, ts=1_700_000_000.0 + n)
    for n in range(2, 4):
        whole.append(f"m{n}", H, ts=1_700_000_000.0 + n)
    assert taken == [False, False, True, True, True, True]
    lines, heads = [], []
    for name in ("short", "whole"):
        lines.append((tmp_path / name / "ledger.jsonl").read_bytes())
        state = decode_head((tmp_path / name / "ledger.head").read_bytes())
        heads.append((state.head.seq, state.head.hash, state.head.end, state.counter, state.slot))
    assert lines[0] == lines[1]
    assert heads[0] == heads[1]  # the fingerprints name different files
    report = verify_ledger(tmp_path / "short" / "ledger.jsonl", {})
    assert (report.chain, report.entries) == ("intact", 4)
    short.close()
    whole.close()

"""``ledger.head/2`` (issue 15 item 1): two slots written in place, a torn slot at every byte,
both slots bad, the JSON form read and migrated, and the descriptors kept open between appends
re-checked (a file replaced, removed, or turned into a symlink or FIFO; a forked child)."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import Crash, Recorder

from merkle_memory import canonical
from merkle_memory.errors import LedgerFormatError, LedgerRollbackError, StoreFileError
from merkle_memory.ledger import Head, Ledger, read_head, verify_ledger
from merkle_memory.ledger._folder import decode_head, encode_head_slot
from merkle_memory.ledger.tenant import Tenant

SLOT = 4096
H = "ab" * 32


def reference_slot(head: Head, counter: int) -> bytes:
    """A slot written out from FORMAT.md section 4.3 with the canonical encoder: the RFC 8785
    line of the fields plus ``check`` (SHA-256 of the line without it), ``\\n``, zeros."""
    body: dict[str, Any] = {
        "counter": counter,
        "format": "ledger.head/2",
        "hash": head.hash,
        "seq": head.seq,
    }
    if head.end is not None:
        body["end"] = head.end
    if head.fingerprint is not None:
        body["fingerprint"] = head.fingerprint
    line = canonical.dumps(body | {"check": hashlib.sha256(canonical.dumps(body)).hexdigest()})
    return line + b"\n" + bytes(SLOT - len(line) - 1)


def _ledger(tmp_path: Path, appends: int) -> Ledger:
    led = Ledger(tmp_path / "ledger.jsonl")
    for i in range(appends):
        led.append(f"m{i}", H)
    return led


def _head_bytes(tmp_path: Path) -> bytes:
    return (tmp_path / "ledger.head").read_bytes()


def test_the_library_writes_the_reference_slots(tmp_path: Path) -> None:
    """After three appends slot 0 holds counter 3 and slot 1 counter 2, byte for byte as
    FORMAT.md describes them; ``encode_head_slot`` is the reference too."""
    led = _ledger(tmp_path, 2)
    second = read_head(tmp_path / "ledger.head")
    led.append("m2", H)
    third = read_head(tmp_path / "ledger.head")
    assert second is not None and third is not None
    data = _head_bytes(tmp_path)
    assert data == reference_slot(third, 3) + reference_slot(second, 2)
    assert encode_head_slot(third, 3) == reference_slot(third, 3)
    assert decode_head(data).head == third
    assert (decode_head(data).slot, decode_head(data).counter) == (0, 3)
    st_ = (tmp_path / "ledger.jsonl").stat()
    assert (third.seq, third.end) == (3, st_.st_size)


@pytest.mark.parametrize("newest", [0, 1])
def test_a_slot_torn_at_every_byte_offset_reads_the_other_slot(tmp_path: Path, newest: int) -> None:
    """A crash inside the write of a slot leaves its first k bytes new and the rest as they
    were, for every k from 0 to 4,096: the head read is the newest valid one of the other
    slot unless the torn slot is exactly the page that was being written (then the new
    head). Both orders of the slots (the write going into slot 1, then into slot 0)."""
    led = _ledger(tmp_path, 3 + newest)
    data = _head_bytes(tmp_path)
    current = decode_head(data)
    assert current.slot == newest
    target = 1 - newest
    new = Head(current.head.seq + 1, "cd" * 32, (current.head.end or 0) + 300, "1:2:3:4:5")
    page = reference_slot(new, current.counter + 1)
    old = data[target * SLOT : (target + 1) * SLOT]
    outcomes = {}
    for k in range(SLOT + 1):
        torn = page[:k] + old[k:]
        file = bytearray(data)
        file[target * SLOT : (target + 1) * SLOT] = torn
        expected = new if torn == page else current.head
        assert decode_head(bytes(file)).head == expected, k
        outcomes[expected == new] = outcomes.get(expected == new, 0) + 1
    first_whole = next(k for k in range(SLOT + 1) if page[:k] + old[k:] == page)
    assert outcomes == {False: first_whole, True: SLOT + 1 - first_whole}
    assert led.append("next", H).seq == current.head.seq + 1


_TORN_AT = (0, 1, 2, 11, 64, 200, 255, 256, 257, 300, 1000, 4000, 4095)


@pytest.mark.parametrize("written", _TORN_AT)
def test_a_crash_tearing_the_head_write_leaves_the_previous_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, written: int
) -> None:
    """End to end: an append whose ``pwrite`` of ``ledger.head`` stops after ``written``
    bytes (then the process dies) leaves the entry in the file and the previous head (one
    entry behind: harmless), or the new head when the bytes written complete the slot;
    verify is intact, and the next append, by a new object, continues the chain and writes
    the slot that does not hold the head read, with the next counter."""
    led = _ledger(tmp_path, 3)
    before_bytes = _head_bytes(tmp_path)
    before = decode_head(before_bytes)
    real = os.pwrite

    def tearing(fd: int, data: Any, offset: int) -> int:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("ledger.head"):
            real(fd, bytes(data)[:written], offset)
            raise Crash(f"killed after {written} bytes of the head")
        return real(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", tearing)
    with pytest.raises(Crash):
        led.append("lost-head", H)
    monkeypatch.undo()
    target = 1 - before.slot
    data = _head_bytes(tmp_path)
    old = before_bytes[target * SLOT : (target + 1) * SLOT]
    torn = data[target * SLOT : (target + 1) * SLOT]
    assert torn[written:] == old[written:]  # only the first ``written`` bytes changed
    line_end = torn.find(b"\n")
    # The new head is read only when the write reached its newline and nothing of the old
    # line is left after it (the page is then exactly the one being written).
    whole = 0 < line_end < written and not old[written:].strip(b"\0")
    now = decode_head(data)
    if whole:
        assert (now.head.seq, now.slot, now.counter) == (4, target, before.counter + 1)
    else:
        assert now == before
    assert old.index(b"\n") > 257  # every slot line here is 258 to 999 bytes long
    assert whole == (written >= 1000) if written <= 257 or written >= 1000 else True
    report = verify_ledger(tmp_path / "ledger.jsonl", {})
    assert (report.chain, report.entries) == ("intact", 4)
    entry = Ledger(tmp_path / "ledger.jsonl").append("after", H)
    assert entry.seq == 5
    after = decode_head(_head_bytes(tmp_path))
    assert (after.head.seq, after.slot, after.counter) == (5, 1 - now.slot, now.counter + 1)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda d: bytes(2 * SLOT), id="both-zero"),
        pytest.param(lambda d: b"\xff" * (2 * SLOT), id="both-garbage"),
        pytest.param(lambda d: d[:100] + bytes(SLOT - 100) + bytes(SLOT), id="torn-and-zero"),
        pytest.param(lambda d: d[: SLOT - 1] + b"x" + d[SLOT:-1] + b"x", id="both-padding-bad"),
        pytest.param(
            lambda d: (
                d[:SLOT].replace(b'"seq":3', b'"seq":4') + d[SLOT:].replace(b'"seq":2', b'"seq":9')
            ),
            id="both-checks-bad",
        ),
    ],
)
def test_both_slots_bad_is_unreadable_and_refused(tmp_path: Path, damage: Any) -> None:
    """A head with no valid slot is never guessed around: ``read_head`` and an append raise
    ``LedgerFormatError`` (nothing written), verify reports the chain broken after the last
    entry, and a save is refused too."""
    _ledger(tmp_path, 3)
    path = tmp_path / "ledger.head"
    data = damage(path.read_bytes())
    assert len(data) == 2 * SLOT
    path.write_bytes(data)
    ledger_before = (tmp_path / "ledger.jsonl").read_bytes()
    message = "ledger.head is unreadable: neither of its two slots is valid"
    with pytest.raises(LedgerFormatError, match=message):
        read_head(path)
    with pytest.raises(LedgerFormatError, match=message):
        Ledger(tmp_path / "ledger.jsonl").append("x", H)
    with pytest.raises(LedgerFormatError, match=message):
        Tenant(tmp_path).save({"id": "r", "summary": "s"})
    assert (tmp_path / "ledger.jsonl").read_bytes() == ledger_before
    assert path.read_bytes() == data
    report = verify_ledger(tmp_path / "ledger.jsonl", {})
    assert (report.chain, report.broken_at, report.reason) == ("broken", 4, message)


def test_two_valid_slots_with_one_counter_are_unreadable_unless_equal(tmp_path: Path) -> None:
    """Two valid slots under one counter: unreadable when they differ (which head is the
    newer cannot be told), read when they are the same."""
    one, two = Head(1, "1" * 64, 100, "a"), Head(2, "2" * 64, 200, "b")
    with pytest.raises(LedgerFormatError, match="two slots differ under one counter"):
        decode_head(reference_slot(one, 5) + reference_slot(two, 5))
    assert decode_head(reference_slot(two, 5) + reference_slot(two, 5)).head == two
    assert decode_head(reference_slot(one, 6) + reference_slot(two, 5)).head == one
    assert decode_head(reference_slot(one, 6) + reference_slot(two, 7)).head == two


def _line(text: str) -> bytes:
    """A slot holding ``text`` as its line (no check recomputed)."""
    return text.encode() + b"\n" + bytes(SLOT - len(text) - 1)


_GOOD = Head(7, "7" * 64, 700, "1:2:700:4:5")


def _valid_line() -> str:
    return reference_slot(_GOOD, 9).split(b"\n")[0].decode()


@pytest.mark.parametrize(
    "slot",
    [
        pytest.param(lambda: _line(_valid_line().replace(",", ", ")), id="not-canonical"),
        pytest.param(lambda: _line(_valid_line()[:-1] + ',"x":1}'), id="extra-key"),
        pytest.param(lambda: _line(_valid_line().replace("/2", "/3")), id="other-format"),
        pytest.param(lambda: _line(_valid_line().replace('"seq":7', '"seq":8')), id="bad-check"),
        pytest.param(lambda: reference_slot(_GOOD, 9)[:-1] + b"\x01", id="padding-not-zero"),
        pytest.param(lambda: _valid_line().encode().ljust(SLOT, b" "), id="no-newline"),
        pytest.param(lambda: reference_slot(Head(7, "7" * 64, 700, "a b"), 9), id="bad-field"),
        pytest.param(lambda: bytes(SLOT), id="never-written"),
    ],
)
def test_a_slot_is_valid_only_whole_and_canonical(slot: Any) -> None:
    """Each damaged form of the newer slot (counter 9) is not valid, so the older slot
    (counter 8) is the head."""
    older = Head(6, "6" * 64, 600, "1:2:600:4:5")
    assert decode_head(reference_slot(_GOOD, 9) + reference_slot(older, 8)).head == _GOOD
    assert decode_head(slot() + reference_slot(older, 8)).head == older


_NEWER = Head(8, "8" * 64, 800, "1:2:800:4:5")


def _overwrite(page: bytes, at: int, data: bytes) -> bytes:
    return (page[:at] + data + page[at + len(data) :])[:SLOT]


_GARBAGE = st.one_of(
    st.binary(max_size=700).map(lambda b: (b + bytes(SLOT))[:SLOT]),
    st.tuples(st.integers(0, SLOT - 1), st.binary(min_size=1, max_size=16)).map(
        lambda t: _overwrite(reference_slot(_NEWER, 5), *t)
    ),
)


@settings(max_examples=300, deadline=None)
@given(garbage=_GARBAGE, newest=st.sampled_from([0, 1]))
def test_garbage_in_one_slot_leaves_the_other(garbage: bytes, newest: int) -> None:
    """Whatever bytes power loss leaves in the slot being written (random bytes, or a newer
    slot with a few bytes changed anywhere), the other slot is read, unless the slot is
    still exactly the newer one (then it is the head)."""
    good = reference_slot(_GOOD, 4)
    data = good + garbage if newest == 0 else garbage + good
    expected = _NEWER if garbage == reference_slot(_NEWER, 5) else _GOOD
    assert decode_head(data).head == expected


def _json_head(head: Head) -> bytes:
    """``ledger.head/1`` as issue 14 wrote it (canonical encoder, keys present when known)."""
    fields: dict[str, object] = {"hash": head.hash, "seq": head.seq}
    if head.end is not None:
        fields["end"] = head.end
    if head.fingerprint is not None:
        fields["fingerprint"] = head.fingerprint
    return canonical.dumps(fields) + b"\n"


def test_a_json_head_is_read_trusted_and_migrated_in_one_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A head in the JSON form of issue 14 (with ``end`` and ``fingerprint``) is read; an
    append trusts it as before (no walk: only the last 4 KiB of the ledger are read, once),
    then writes the two-slot form as a new file in one rename (temp, fsync, rename, folder
    fsync); the append after that writes a slot in place."""
    _ledger(tmp_path, 3)
    path = tmp_path / "ledger.head"
    current = read_head(path)
    assert current is not None
    path.write_bytes(_json_head(current))
    assert read_head(path) == current
    assert decode_head(path.read_bytes()).version == 1
    reads: list[int] = []
    real = os.pread

    def pread(fd: int, n: int, at: int) -> bytes:
        data = real(fd, n, at)
        if os.readlink(f"/proc/self/fd/{fd}").endswith("ledger.jsonl"):
            reads.append(len(data))
        return data

    led = Ledger(tmp_path / "ledger.jsonl")
    rec = Recorder(monkeypatch)
    monkeypatch.setattr(os, "pread", pread)
    led.append("m3", H)
    monkeypatch.undo()
    assert reads == [current.end]  # the whole (short) file, once; no walk
    assert rec.calls == [
        ("open", "ledger.jsonl"),
        ("open", "ledger.head"),
        ("pwrite", "ledger.jsonl"),
        ("fdatasync", "ledger.jsonl"),
        ("open", "ledger.head~tmp"),
        ("fsync", "ledger.head~tmp"),
        ("replace", "ledger.head~tmp->ledger.head"),
        ("open", tmp_path.name),
        ("fsync", tmp_path.name),
    ]
    migrated = decode_head(path.read_bytes())
    assert (migrated.version, migrated.slot, migrated.counter, migrated.head.seq) == (2, 0, 1, 4)
    assert path.read_bytes()[SLOT:] == bytes(SLOT)
    rec = Recorder(monkeypatch)
    led.append("m4", H)
    monkeypatch.undo()
    assert rec.calls == [
        ("open", "ledger.head"),
        ("pwrite", "ledger.jsonl"),
        ("fdatasync", "ledger.jsonl"),
        ("pwrite", "ledger.head"),
        ("fdatasync", "ledger.head"),
    ]
    assert decode_head(path.read_bytes()).counter == 2


def test_a_json_head_naming_a_later_entry_is_a_rollback_and_stays(tmp_path: Path) -> None:
    """A JSON head naming an entry the file lacks refuses the append; the head is kept as it
    was (not migrated) and verify reports the rollback."""
    _ledger(tmp_path, 2)
    path = tmp_path / "ledger.head"
    data = _json_head(Head(5, "5" * 64, 10_000, "1:2:3:4:5"))
    path.write_bytes(data)
    with pytest.raises(LedgerRollbackError) as info:
        Ledger(tmp_path / "ledger.jsonl").append("x", H)
    assert (info.value.expected_seq, info.value.found_seq) == (5, 2)
    assert path.read_bytes() == data
    report = verify_ledger(tmp_path / "ledger.jsonl", {})
    assert (report.chain, report.broken_at) == ("broken", 3)


# --- descriptors kept open between appends ----------------------------------------------------


def _open_files(folder: Path) -> list[str]:
    """The names of the files of ``folder`` this process has open, sorted."""
    gc.collect()  # stores of earlier tests left for the collector close theirs now
    names = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if os.path.dirname(target) == str(folder):
                names.append(os.path.basename(target))
    return sorted(names)


def test_descriptors_stay_open_between_appends_and_close_releases_them(tmp_path: Path) -> None:
    """A Ledger keeps ``ledger.jsonl`` and ``ledger.head`` open between appends (two
    descriptors, not more after 20 appends); ``close()``, the end of a ``with`` block and
    garbage collection release them, and a closed Ledger still appends."""
    led = _ledger(tmp_path, 2)
    for i in range(20):
        led.append(f"x{i}", H)
    assert _open_files(tmp_path) == ["ledger.head", "ledger.jsonl"]
    led.close()
    assert _open_files(tmp_path) == []
    assert led.append("again", H).seq == 23
    with Ledger(tmp_path / "ledger.jsonl") as other:
        other.append("in-block", H)
        assert _open_files(tmp_path) == ["ledger.head"] * 2 + ["ledger.jsonl"] * 2
    assert _open_files(tmp_path) == ["ledger.head", "ledger.jsonl"]
    del led
    assert _open_files(tmp_path) == []


def test_a_ledger_replaced_by_rename_under_a_live_object_is_refused(tmp_path: Path) -> None:
    """An older copy renamed over ``ledger.jsonl`` while an object keeps the old file open:
    the object sees the new file (the path no longer names its descriptor) and refuses the
    rollback the head shows; nothing is appended to either file."""
    led = _ledger(tmp_path, 2)
    shutil.copy(tmp_path / "ledger.jsonl", tmp_path / "older")
    led.append("m2", H)
    os.replace(tmp_path / "older", tmp_path / "ledger.jsonl")
    size = (tmp_path / "ledger.jsonl").stat().st_size
    with pytest.raises(LedgerRollbackError) as info:
        led.append("m3", H)
    assert (info.value.expected_seq, info.value.found_seq) == (3, 2)
    assert (tmp_path / "ledger.jsonl").stat().st_size == size


def test_a_head_replaced_by_rename_under_a_live_object_is_read(tmp_path: Path) -> None:
    """A head renamed over ``ledger.head`` (here one naming a later entry: the ledger was
    rolled back and its newer head restored) is read by the object that keeps the old head
    open, which then refuses the append."""
    led = _ledger(tmp_path, 3)
    later = reference_slot(Head(9, "9" * 64, 99_999, "1:2:3:4:5"), 1) + bytes(SLOT)
    (tmp_path / "other.head").write_bytes(later)
    os.replace(tmp_path / "other.head", tmp_path / "ledger.head")
    with pytest.raises(LedgerRollbackError, match=r"ledger\.head records seq 9"):
        led.append("m3", H)
    assert (tmp_path / "ledger.head").read_bytes() == later


def test_a_head_restored_in_place_under_a_live_object_is_read(tmp_path: Path) -> None:
    """An older head written back into the same file (same inode) is read too: behind the
    file is harmless, and the append goes on and writes the slot after it."""
    led = _ledger(tmp_path, 2)
    older = _head_bytes(tmp_path)
    led.append("m2", H)
    (tmp_path / "ledger.head").write_bytes(older)
    assert led.append("m3", H).seq == 4
    assert decode_head(_head_bytes(tmp_path)).head.seq == 4


@pytest.mark.parametrize("name", ["ledger.jsonl", "ledger.head"])
@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_file_turned_into_a_symlink_or_fifo_under_a_live_object_is_refused(
    tmp_path: Path, name: str, kind: str
) -> None:
    """A symlink or a FIFO put in place of a file whose descriptor the object keeps open:
    the next append refuses it (``StoreFileError``), never writes through the link nor
    blocks on the FIFO, and the link's target is untouched."""
    folder = tmp_path / "t"
    folder.mkdir()
    led = _ledger(folder, 2)
    outside = tmp_path / "outside"
    outside.write_bytes((folder / name).read_bytes())
    (folder / name).unlink()
    if kind == "symlink":
        (folder / name).symlink_to(outside)
    else:
        os.mkfifo(folder / name)
    before = outside.read_bytes()
    with pytest.raises(StoreFileError, match=name.replace(".", r"\.")):
        led.append("m2", H)  # a FIFO opened for writing would block: O_NONBLOCK, then refused
    assert outside.read_bytes() == before


def test_a_forked_child_never_shares_the_parents_lock(tmp_path: Path) -> None:
    """A child forked while the parent holds the lock through a Ledger (its descriptors kept
    open) appends through the same object only after the parent releases the lock: the
    child opens its own descriptors instead of sharing the parent's ``flock``."""
    led = _ledger(tmp_path, 1)
    done = tmp_path / "child-done"
    read_end, write_end = os.pipe()
    with led.locked():
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 0
            try:
                os.close(read_end)
                os.write(write_end, b"s")
                entry = led.append("child", H)
                done.write_text(str(entry.seq))
            except BaseException:
                code = 3
            finally:
                os._exit(code)
        os.close(write_end)
        assert os.read(read_end, 1) == b"s"
        os.close(read_end)
        time.sleep(0.3)  # every chance to append if it could take the lock
        assert not done.exists()
        parent_entry = led.append("parent", H)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert (parent_entry.seq, done.read_text()) == (2, "3")
    report = verify_ledger(tmp_path / "ledger.jsonl", {})
    assert (report.chain, report.entries) == ("intact", 3)


def test_a_crash_at_every_step_of_an_append_loses_nothing_acknowledged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For every step k of an append in each of its three forms (the first one, which creates
    the files; one onto a JSON head, which migrates it; a steady one, in place), stop the
    append just before its k-th file operation. The ledger then verifies intact with the
    previous entries, the head reads (never unreadable), and a new object appends the next
    entry."""

    def first(folder: Path) -> Ledger:
        folder.mkdir()
        return Ledger(folder / "ledger.jsonl")

    def migrating(folder: Path) -> Ledger:
        led = _ledger(folder, 2)
        head = read_head(folder / "ledger.head")
        assert head is not None
        (folder / "ledger.head").write_bytes(_json_head(head))
        led.close()
        return Ledger(folder / "ledger.jsonl")

    def steady(folder: Path) -> Ledger:
        return _ledger(folder, 3)

    for form, make, steps in (
        ("first", first, 10),
        ("migrating", migrating, 9),
        ("steady", steady, 4),
    ):
        for k in range(steps + 1):
            folder = tmp_path / f"{form}-{k}"
            led = make(folder)
            before = (
                read_head(folder / "ledger.head") if (folder / "ledger.head").exists() else None
            )
            entries_before = before.seq if before is not None else 0
            rec = Recorder(monkeypatch, crash_at=k)
            with contextlib.suppress(Crash):
                led.append("new", H)
            monkeypatch.undo()
            if k == steps:
                assert not rec.crashed and len(rec.calls) == steps, (form, rec.calls)
            written = ("pwrite", "ledger.jsonl") in rec.calls
            report = verify_ledger(folder / "ledger.jsonl", {})
            assert report.chain in ("intact", "empty"), (form, k)
            assert report.entries == entries_before + written, (form, k)
            head = read_head(folder / "ledger.head")
            assert head is None or head.seq in (entries_before, entries_before + 1), (form, k)
            nxt = Ledger(folder / "ledger.jsonl").append("next", H)
            assert nxt.seq == entries_before + written + 1, (form, k)
            del led


@pytest.mark.parametrize("fingerprint", ["1:2:3:4:5", 'a"b', "a\\b", "!~'`{}", None])
@pytest.mark.parametrize("end", [1, 2**53 - 1, None])
def test_every_head_a_store_may_record_round_trips_through_a_slot(
    fingerprint: str | None, end: int | None
) -> None:
    """Any fingerprint of printable ASCII (quotes and backslashes escaped as RFC 8785 does),
    with or without ``end``: the slot is the reference's bytes and reads back the same."""
    head = Head(2**53 - 1, "f" * 64, end, fingerprint)
    page = encode_head_slot(head, 7)
    assert page == reference_slot(head, 7)
    assert decode_head(page + bytes(SLOT)).head == head


@pytest.mark.parametrize(
    ("head", "counter", "message"),
    [
        (Head(0, H), 1, "seq is not a positive integer"),
        (Head(1, "AB" * 32), 1, "hash is not 64-char lowercase hex"),
        (Head(1, H, 0), 1, "end is not a positive byte offset"),
        (Head(1, H, 5, "has space"), 1, "fingerprint is not 1-128 printable ASCII"),
        (Head(1, H, 5, "x" * 129), 1, "fingerprint is not 1-128 printable ASCII"),
        (Head(1, H), 0, "counter is not a positive integer"),
    ],
)
def test_a_head_outside_the_format_is_never_written(head: Head, counter: int, message: str) -> None:
    """``encode_head_slot`` refuses what no reader would accept (``LedgerFormatError``)."""
    with pytest.raises(LedgerFormatError, match=message):
        encode_head_slot(head, counter)

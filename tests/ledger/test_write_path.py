"""The ledger's write path (issue 14): the order of writes, crashes at every step of a re-save,
saves onto a chain broken mid-file, and one Tenant shared by threads."""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support import Crash, Recorder

from merkle_memory import canonical
from merkle_memory.errors import LedgerBrokenError, TenantError
from merkle_memory.ledger import Head, Ledger, VerifyReport, _chain, read_head, records
from merkle_memory.ledger.tenant import Tenant


def _saved(tmp_path: Path, summary: str = "old") -> Tenant:
    tenant = Tenant(tmp_path / "t")
    tenant.save({"id": "x", "summary": summary})
    return tenant


def test_append_writes_the_line_then_one_head_slot_two_flushes_in_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Append order (DESIGN section 4, issue 15): the line is written and ``fdatasync``ed,
    then one slot of ``ledger.head`` is written in place and ``fdatasync``ed: no temp file,
    rename or folder fsync, and no file opened by a Ledger object's later appends (its
    descriptors stay open); a new object opens the ledger and the head once."""
    led = Ledger(tmp_path / "ledger.jsonl")
    led.append("a", "1" * 64)
    led.append("b", "2" * 64)
    steady = [
        ("pwrite", "ledger.jsonl"),
        ("fdatasync", "ledger.jsonl"),
        ("pwrite", "ledger.head"),
        ("fdatasync", "ledger.head"),
    ]
    for name in ("c", "d"):
        rec = Recorder(monkeypatch)
        led.append(name, "3" * 64)
        monkeypatch.undo()
        assert rec.calls == steady
    rec = Recorder(monkeypatch)
    Ledger(tmp_path / "ledger.jsonl").append("e", "4" * 64)
    monkeypatch.undo()
    assert rec.calls == [("open", "ledger.jsonl"), ("open", "ledger.head"), *steady]


def test_the_first_append_creates_the_ledger_then_the_head_atomically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first append creates ``ledger.jsonl`` (the folder fsynced), writes and flushes the
    line, then makes ``ledger.head`` whole in one rename (temp file, fsync, rename, folder
    fsync): a crash never leaves a partial head file."""
    folder = tmp_path / "t"
    folder.mkdir()
    rec = Recorder(monkeypatch)
    Ledger(folder / "ledger.jsonl").append("a", "1" * 64)
    monkeypatch.undo()
    assert rec.calls == [
        ("open", "ledger.jsonl"),
        ("open", "t"),
        ("fsync", "t"),
        ("pwrite", "ledger.jsonl"),
        ("fdatasync", "ledger.jsonl"),
        ("open", "ledger.head~tmp"),
        ("fsync", "ledger.head~tmp"),
        ("replace", "ledger.head~tmp->ledger.head"),
        ("open", "t"),
        ("fsync", "t"),
    ]


def test_quarantine_saves_the_fragment_durably_before_cutting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Quarantine order: ``ledger.torn`` opened, the fragment written and fsynced (the folder
    too, the file being new), and only then the ledger truncated and fsynced."""
    led = Ledger(tmp_path / "ledger.jsonl")
    led.append("a", "1" * 64)
    with open(tmp_path / "ledger.jsonl", "ab") as handle:
        handle.write(b'{"seq":2,"ts":1')
    rec = Recorder(monkeypatch)
    led.recover()
    monkeypatch.undo()
    assert rec.only("ledger.torn", tmp_path.name) + [
        c for c in rec.calls if c[0] == "ftruncate"
    ] == [
        ("open", "ledger.torn"),
        ("write", "ledger.torn"),
        ("fsync", "ledger.torn"),
        ("open", tmp_path.name),
        ("fsync", tmp_path.name),
        ("ftruncate", "ledger.jsonl"),
    ]
    cut = rec.calls.index(("ftruncate", "ledger.jsonl"))
    assert rec.calls.index(("fsync", "ledger.torn")) < cut
    assert rec.calls[cut + 1] == ("fsync", "ledger.jsonl")


def test_resave_keeps_the_sealed_version_until_its_line_is_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Re-save order: the new version is created as ``x.json.pending`` (in place, no temp
    file), fsynced with ``memory/``, the line written and flushed and one head slot written
    and flushed, and only then the pending file renamed over ``x.json`` (not fsynced: a
    crash losing the rename leaves the pending file, which the latest entry names)."""
    tenant = _saved(tmp_path)
    rec = Recorder(monkeypatch)
    tenant.save({"id": "x", "summary": "new"})
    monkeypatch.undo()
    assert rec.calls == [
        ("open", "ledger.jsonl"),  # read once per Tenant: the testimony mode its first line implies
        ("open", "x.json.pending"),
        ("write", "x.json.pending"),
        ("fsync", "x.json.pending"),
        ("open", "memory"),
        ("fsync", "memory"),
        ("open", "ledger.head"),
        ("pwrite", "ledger.jsonl"),
        ("fdatasync", "ledger.jsonl"),
        ("pwrite", "ledger.head"),
        ("fdatasync", "ledger.head"),
        ("replace", "x.json.pending->x.json"),
    ]


def test_first_save_writes_the_record_durably_then_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """First-save order: ``y.json`` made whole by one rename of a temp file created with the
    final mode (no ``chmod``), ``memory/`` fsynced, then the line and one head slot: four
    flushes."""
    tenant = _saved(tmp_path)
    tenant.save({"id": "z", "summary": "z"})
    rec = Recorder(monkeypatch)
    tenant.save({"id": "y", "summary": "new"})
    monkeypatch.undo()
    assert rec.calls == [
        ("open", "y.json~tmp"),
        ("write", "y.json~tmp"),
        ("fsync", "y.json~tmp"),
        ("replace", "y.json~tmp->y.json"),
        ("open", "memory"),
        ("fsync", "memory"),
        ("pwrite", "ledger.jsonl"),
        ("fdatasync", "ledger.jsonl"),
        ("pwrite", "ledger.head"),
        ("fdatasync", "ledger.head"),
    ]
    assert (tenant.memory_dir / "y.json").stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _count_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    tenant = _saved(tmp_path / "count")
    rec = Recorder(monkeypatch)
    tenant.save({"id": "x", "summary": "new"})
    monkeypatch.undo()
    return len(rec.calls)  # 12: see test_resave_keeps_the_sealed_version_until_...


def test_a_crash_at_any_step_of_a_resave_leaves_old_or_new_sealed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Crash property (issue 14 item 1): for every step k of a re-save, stop the save just
    before its k-th file operation. Verify then says ``x`` is sealed (never altered nor
    missing), and ``seal`` leaves it sealed holding the old version when the crash came
    before the line was written, the new one after (a kill keeps written bytes); no pending
    file is left."""
    steps = _count_steps(tmp_path, monkeypatch)
    assert steps == 12
    outcomes = set()
    for k in range(steps + 1):
        tenant = _saved(tmp_path / f"k{k}")
        rec = Recorder(monkeypatch, crash_at=k)
        with contextlib.suppress(Crash):
            tenant.save({"id": "x", "summary": "new"})
        monkeypatch.undo()
        line_written = ("pwrite", "ledger.jsonl") in rec.calls  # a kill keeps written bytes
        report = tenant.verify()
        assert (report.chain, report.sealed, report.altered, report.missing) == (
            "intact",
            1,
            (),
            (),
        ), k
        sealed = tenant.seal()
        assert (sealed.ok, sealed.report.sealed, sealed.sealed_ids) == (True, 1, ()), k
        summary = json.loads((tenant.memory_dir / "x.json").read_text())["summary"]
        if line_written:
            assert summary == "new", k
        elif k < steps:
            assert summary == "old", k
        assert sorted(p.name for p in tenant.memory_dir.iterdir()) == ["x.json"], k
        outcomes.add(summary)
    assert outcomes == {"old", "new"}


def test_a_crash_in_a_resave_after_a_crashed_resave_leaves_no_altered_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two crashes in a row, no ``seal`` between (found by the adversarial trial): a re-save
    stopped at step k1, then another re-save of the same id stopped at step k2. The second
    must first settle what the first left pending, never overwrite a version the ledger
    already names; verify never says altered or missing, and seal leaves the latest version
    whose line was written."""
    steps = _count_steps(tmp_path, monkeypatch)
    outcomes = set()
    for k1 in range(steps + 1):
        for k2 in range(steps + 1):
            tenant = _saved(tmp_path / f"k{k1}-{k2}")
            written = []
            for k, summary in ((k1, "new"), (k2, "newer")):
                rec = Recorder(monkeypatch, crash_at=k)
                with contextlib.suppress(Crash):
                    tenant.save({"id": "x", "summary": summary})
                monkeypatch.undo()
                if ("pwrite", "ledger.jsonl") in rec.calls:
                    written.append(summary)
                report = tenant.verify()
                assert (report.chain, report.altered, report.missing) == ("intact", (), ()), (
                    k1,
                    k2,
                )
            sealed = tenant.seal()
            assert (sealed.ok, sealed.report.sealed) == (True, 1), (k1, k2)
            summary = json.loads((tenant.memory_dir / "x.json").read_text())["summary"]
            assert summary == (written[-1] if written else "old"), (k1, k2)
            outcomes.add(summary)
    assert outcomes == {"old", "new", "newer"}


def test_a_refused_resave_keeps_the_sealed_version(tmp_path: Path) -> None:
    """A re-save whose append is refused (a broken chain) leaves ``x.json`` as it was and no
    pending file."""
    tenant = _saved(tmp_path)
    tenant.save({"id": "y", "summary": "y"})
    lines = (tenant.root / "ledger.jsonl").read_bytes().splitlines(keepends=True)
    (tenant.root / "ledger.jsonl").write_bytes(lines[0] + lines[0] + lines[1])
    with pytest.raises(LedgerBrokenError):
        tenant.save({"id": "x", "summary": "new"})
    assert json.loads((tenant.memory_dir / "x.json").read_text())["summary"] == "old"
    assert sorted(p.name for p in tenant.memory_dir.iterdir()) == ["x.json", "y.json"]


def _resaved(tmp_path: Path) -> Tenant:
    """A tenant whose ``x`` was saved then re-saved (two entries), ``y`` saved once."""
    tenant = _saved(tmp_path)
    tenant.save({"id": "x", "summary": "new"})
    tenant.save({"id": "y", "summary": "y"})
    return tenant


def _target(tmp_path: Path) -> Path:
    """A record file outside the tenant, the target of a pending symbolic link."""
    return tmp_path / "target.json"


def _plant(tenant: Tenant, tmp_path: Path, kind: str, mid: str = "x") -> Path:
    """Leave ``memory/<mid>.json.pending`` as a crash (or a stranger) could: ``kind`` names
    what it is. None of them can ever be settled."""
    pending = tenant.memory_dir / f"{mid}.json.pending"
    if kind == "empty":
        pending.write_bytes(b"")
    elif kind == "torn":
        pending.write_bytes(b'{"id": "' + mid.encode() + b'", "summary"')
    elif kind == "another-id":
        pending.write_text(json.dumps({"id": "z", "summary": "planted"}))
    elif kind == "not-sealable":  # an integer beyond 2**53: outside RFC 8785
        pending.write_text(json.dumps({"id": mid, "summary": 2**60}))
    elif kind == "symlink":
        _target(tmp_path).write_text(json.dumps({"id": mid, "summary": "target"}))
        pending.symlink_to(_target(tmp_path))
    elif kind == "fifo":
        os.mkfifo(pending)
    else:
        raise AssertionError(kind)
    return pending


_LEFTOVERS = ["empty", "torn", "another-id", "not-sealable", "symlink", "fifo"]


def _assert_saved_once_more(tenant: Tenant, record: dict[str, Any]) -> None:
    """``tenant.save(record)`` appends exactly one ``save`` entry naming it, ``<id>.json``
    holds it, no pending file is left, and verify is ok."""
    before = list(tenant.ledger.entries())
    entry = tenant.save(record)
    after = list(tenant.ledger.entries())
    assert after == [*before, entry]
    assert (entry.op, entry.memory_id, entry.content_sha256) == (
        "save",
        record["id"],
        canonical.digest({f: record.get(f) for f in tenant.sealed_fields}),
    )
    assert json.loads((tenant.memory_dir / f"{record['id']}.json").read_text()) == record
    assert not os.path.lexists(tenant.memory_dir / f"{record['id']}.json.pending")
    report = tenant.verify()
    assert (report.ok, report.altered, report.missing) == (True, (), ())


@pytest.mark.parametrize("kind", _LEFTOVERS)
def test_seal_removes_a_pending_file_that_can_never_be_settled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A pending file no entry can name (empty or torn by a crash in re-save step 1,
    carrying another id, not sealable, a symbolic link, a FIFO) is ignored by verify and
    removed by ``seal`` (the folder fsynced after; a link's target untouched); a re-save of
    the id then appends exactly one entry (it failed with ``FileExistsError``)."""
    tenant = _resaved(tmp_path)
    pending = _plant(tenant, tmp_path, kind)
    report = tenant.verify()
    assert (report.ok, report.sealed, report.altered, report.unsealed) == (True, 2, (), ())
    rec = Recorder(monkeypatch)
    sealed = tenant.seal()
    monkeypatch.undo()
    assert rec.index("unlink", "x.json.pending") < rec.index("fsync", "memory", last=True)
    assert (sealed.ok, sealed.report.sealed, sealed.sealed_ids, sealed.skipped) == (
        True,
        2,
        (),
        (),
    )
    assert not os.path.lexists(pending)
    assert sorted(p.name for p in tenant.memory_dir.iterdir()) == ["x.json", "y.json"]
    assert json.loads((tenant.memory_dir / "x.json").read_text())["summary"] == "new"
    if kind == "symlink":
        assert json.loads(_target(tmp_path).read_text()) == {"id": "x", "summary": "target"}
    _assert_saved_once_more(tenant, {"id": "x", "summary": "newer"})


@pytest.mark.parametrize("kind", _LEFTOVERS)
def test_a_resave_removes_its_own_pending_file_that_can_never_be_settled(
    tmp_path: Path, kind: str
) -> None:
    """The same leftovers with no ``seal`` first: the re-save settles its id's leftover
    (removes it) and appends exactly one entry; verify is ok before and after."""
    tenant = _resaved(tmp_path)
    _plant(tenant, tmp_path, kind)
    assert tenant.verify().ok
    _assert_saved_once_more(tenant, {"id": "x", "summary": "newer"})
    assert sorted(p.name for p in tenant.memory_dir.iterdir()) == ["x.json", "y.json"]
    if kind == "symlink":
        assert json.loads(_target(tmp_path).read_text()) == {"id": "x", "summary": "target"}


def test_a_resave_never_touches_the_leftover_of_another_id(tmp_path: Path) -> None:
    """A re-save of ``x`` settles ``x``'s pending file only: ``y``'s empty one and a torn
    one named for ``z`` (no record) stay byte for byte until ``seal`` removes them."""
    tenant = _resaved(tmp_path)
    _plant(tenant, tmp_path, "empty", "x")
    y_pending = _plant(tenant, tmp_path, "empty", "y")
    z_pending = _plant(tenant, tmp_path, "torn", "z")
    _assert_saved_once_more(tenant, {"id": "x", "summary": "newer"})
    assert (y_pending.read_bytes(), z_pending.read_bytes()) == (b"", b'{"id": "z", "summary"')
    assert tenant.seal().ok
    assert sorted(p.name for p in tenant.memory_dir.iterdir()) == ["x.json", "y.json"]


def test_a_pending_folder_is_kept_and_a_resave_of_its_id_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A folder named ``x.json.pending`` is no re-save's file and is never removed: verify
    is ok, ``seal`` leaves it (a warning) and goes on, a re-save of ``x`` raises
    ``TenantError`` naming it with nothing written (was ``FileExistsError``), other ids
    save; once it is removed, ``x`` saves again."""
    tenant = _resaved(tmp_path)
    folder = tenant.memory_dir / "x.json.pending"
    folder.mkdir()
    (folder / "keep").write_text("mine")
    assert tenant.verify().ok
    with caplog.at_level("WARNING", logger="merkle_memory.ledger"):
        assert tenant.seal().ok
    assert "t: memory/x.json.pending is a folder: left in place" in caplog.messages
    ledger = tenant.ledger.path.read_bytes()
    with pytest.raises(TenantError) as caught:
        tenant.save({"id": "x", "summary": "newer"})
    assert (caught.value.reason, caught.value.path) == (
        "memory/x.json.pending is a folder: it is neither settled nor removed; remove it to "
        "save 'x' again",
        str(tenant.root),
    )
    assert tenant.ledger.path.read_bytes() == ledger
    assert json.loads((tenant.memory_dir / "x.json").read_text())["summary"] == "new"
    assert (folder / "keep").read_text() == "mine"
    _assert_saved_once_more(tenant, {"id": "y", "summary": "y2"})
    (folder / "keep").unlink()
    folder.rmdir()
    _assert_saved_once_more(tenant, {"id": "x", "summary": "newer"})


def test_an_unreadable_pending_file_is_kept_and_a_resave_of_its_id_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pending file the system refuses to read (here ``EACCES``) may hold an acknowledged
    version: ``seal`` leaves it and a re-save of its id raises ``TenantError`` saying why,
    with nothing written."""
    tenant = _resaved(tmp_path)
    pending = _plant(tenant, tmp_path, "empty")
    real = records._read_bytes

    def refuse(path: Path) -> bytes:
        if path.name == "x.json.pending":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(records, "_read_bytes", refuse)
    assert tenant.seal().ok
    assert os.path.lexists(pending)
    ledger = tenant.ledger.path.read_bytes()
    with pytest.raises(TenantError) as caught:
        tenant.save({"id": "x", "summary": "newer"})
    assert caught.value.reason == (
        "memory/x.json.pending cannot be read (Permission denied): it is neither settled nor "
        "removed; remove it to save 'x' again"
    )
    assert tenant.ledger.path.read_bytes() == ledger
    monkeypatch.undo()
    _assert_saved_once_more(tenant, {"id": "x", "summary": "newer"})


def test_scan_pending_still_lists_only_what_can_be_settled(tmp_path: Path) -> None:
    """``records.scan_pending`` (public) is unchanged: the leftovers seal removes, a folder
    and a name that is no id are left out; a whole pending version of its id is listed."""
    tenant = _resaved(tmp_path)
    for kind, mid in zip(_LEFTOVERS, "abcdef", strict=True):
        _plant(tenant, tmp_path, kind, mid)
    (tenant.memory_dir / "g.json.pending").mkdir()
    (tenant.memory_dir / "..json.pending").write_text(json.dumps({"id": ".", "summary": 1}))
    whole = records.write_pending(tenant.memory_dir, {"id": "x", "summary": "whole"})
    found = records.scan_pending(tenant.memory_dir)
    assert list(found) == ["x"] and found["x"].path == whole


def _three(tmp_path: Path) -> Tenant:
    tenant = Tenant(tmp_path / "t")
    for rid in ("a", "b", "c"):
        tenant.save({"id": rid, "summary": rid})
    return tenant


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda ls: [ls[0], ls[1], ls[1], ls[2]], id="duplicated-middle-line"),
        pytest.param(lambda ls: [b"\xef\xbb\xbf" + ls[0], ls[1], ls[2]], id="utf8-bom"),
        pytest.param(lambda ls: [ls[0], b"\0" * 40 + b"\n", ls[1], ls[2]], id="nul-line"),
        pytest.param(lambda ls: [ls[0], ls[1][:-1] + b"\n\n", ls[2]], id="line-moved"),
    ],
)
def test_a_save_onto_a_chain_broken_mid_file_is_refused(
    tmp_path: Path, damage: Callable[[list[bytes]], list[bytes]]
) -> None:
    """Issue 14 item 4: a save refuses what seal refuses (a duplicated middle line, a
    byte-order mark, a NUL-filled line): ``LedgerBrokenError``, nothing written; seal
    refuses the same ledger."""
    tenant = _three(tmp_path)
    path = tenant.root / "ledger.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(damage(lines)))
    before = path.read_bytes(), (tenant.root / "ledger.head").read_bytes()
    verdict = tenant.verify()
    if verdict.chain == "intact":  # a blank line moved: verify accepts it, so does save
        assert tenant.save({"id": "d", "summary": "d"}).seq == 4
        return
    with pytest.raises(LedgerBrokenError, match="refusing to append"):
        tenant.save({"id": "d", "summary": "d"})
    assert (path.read_bytes(), (tenant.root / "ledger.head").read_bytes()) == before
    with pytest.raises(LedgerBrokenError, match="refusing to adopt"):
        tenant.seal()


def test_a_ledger_replaced_far_past_the_head_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``ledger.jsonl`` replaced by a different, longer chain (its seq of the head farther
    back than the rollback scan reaches) is refused and ``ledger.head`` is kept."""
    monkeypatch.setattr(_chain, "_SCAN_BACK_LINES", 3)
    tenant = _three(tmp_path)
    other = Ledger(tmp_path / "other" / "ledger.jsonl")
    other.append_many([(f"o{i}", "ab" * 32) for i in range(10)])
    path = tenant.root / "ledger.jsonl"
    path.write_bytes(other.path.read_bytes())
    head = (tenant.root / "ledger.head").read_bytes()
    with pytest.raises(LedgerBrokenError, match=r"ledger\.head records a different entry"):
        tenant.save({"id": "d", "summary": "d"})
    assert (tenant.root / "ledger.head").read_bytes() == head
    assert path.read_bytes() == other.path.read_bytes()


_TS = 1789851200.5


def _fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every entry appended gets ``ts`` ``_TS``: lines of ids of one length have one length."""
    monkeypatch.setattr(_chain, "time", SimpleNamespace(time=lambda: _TS))


def _wait_for_a_later_ctime(path: Path, scratch: Path) -> None:
    """Wait until a file changed now gets a ctime later than ``path``'s (at most 2 s).

    The kernel stamps ctimes from a coarse clock; an edit within the tick of the last append
    would keep the ledger's fingerprint (the documented limit), so a tamper test waits for
    the clock to move on, observed by touching ``scratch`` (outside the tenant).
    """
    last = os.stat(path).st_ctime_ns
    deadline = time.monotonic() + 2.0
    while True:
        scratch.write_bytes(b"tick")
        if os.stat(scratch).st_ctime_ns > last:
            return
        assert time.monotonic() < deadline, "the file system clock did not move in 2 s"
        time.sleep(0.001)


def _four(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Tenant:
    _fixed_clock(monkeypatch)
    tenant = Tenant(tmp_path / "t")
    for rid in ("a", "b", "c", "d"):
        tenant.save({"id": rid, "summary": rid})
    return tenant


@pytest.mark.parametrize("writer", ["Tenant.save", "Ledger.append"])
@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        pytest.param(
            lambda ls: [ls[0], ls[2], ls[1], ls[3]],
            "sequence gap: expected 2, found 3",
            id="equal-length-middle-lines-swapped",
        ),
        pytest.param(
            lambda ls: [ls[0], b"\0" * (len(ls[1]) - 1) + b"\n", ls[2], ls[3]],
            "unparseable line",
            id="line-overwritten-by-as-many-nuls",
        ),
    ],
)
def test_an_edit_in_place_keeping_every_offset_is_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    writer: str,
    damage: Callable[[list[bytes]], list[bytes]],
    reason: str,
) -> None:
    """Issue 14 item 4: an edit before the head's entry that keeps the size and every byte
    offset (written in place, same inode) changes the ledger's fingerprint, so the next
    append walks the chain and refuses the break verify and seal report; nothing written."""
    tenant = _four(tmp_path, monkeypatch)
    path, head = tenant.root / "ledger.jsonl", tenant.root / "ledger.head"
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) == 4 and len(lines[1]) == len(lines[2])
    damaged = b"".join(damage(lines))
    assert len(damaged) == path.stat().st_size and damaged.endswith(lines[3])
    _wait_for_a_later_ctime(path, tmp_path / "scratch")
    with open(path, "r+b") as handle:
        handle.write(damaged)
    before = (path.read_bytes(), head.read_bytes())
    verdict = tenant.verify()
    assert (verdict.chain, verdict.broken_at, verdict.reason) == ("broken", 2, reason)
    refusal = re.escape(f"ledger chain broken at seq 2: {reason}; refusing to append")
    with pytest.raises(LedgerBrokenError, match=refusal):
        if writer == "Tenant.save":
            tenant.save({"id": "e", "summary": "e"})
        else:
            Ledger(path).append("e", "ab" * 32)
    assert (path.read_bytes(), head.read_bytes()) == before
    with pytest.raises(LedgerBrokenError, match="refusing to adopt"):
        tenant.seal()


def _ledger_bytes_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the bytes every ``os.pread`` of ``ledger.jsonl`` returns (the folder store reads
    the ledger so; reads of ``ledger.head`` are not counted)."""
    counts: list[int] = []
    real = os.pread

    def pread(fd: int, length: int, offset: int) -> bytes:
        data = real(fd, length, offset)
        if os.readlink(f"/proc/self/fd/{fd}").endswith("ledger.jsonl"):
            counts.append(len(data))
        return data

    monkeypatch.setattr(os, "pread", pread)
    return counts


@pytest.mark.parametrize("writer", ["Tenant.save", "Ledger.append"])
def test_saves_read_as_many_ledger_bytes_whatever_its_length(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    """A save after this library's own append reads the same few bytes of the ledger at 100
    and at 1,000 entries (the fingerprint stands for the chain checked before): none at all
    through the object that made that append (it knows the tail it wrote), the last 4 KiB
    once through a new one (the fragment check and the tail line from one read). A change
    the library did not make (here a ``chmod``, which changes the ctime) costs exactly one
    walk of the whole chain, then saves are cheap again."""
    _fixed_clock(monkeypatch)
    counts = _ledger_bytes_read(monkeypatch)

    def save(tenant: Tenant, rid: str) -> int:
        del counts[:]
        if writer == "Tenant.save":
            tenant.save({"id": rid, "summary": "s"})
        else:
            Ledger(tenant.root / "ledger.jsonl").append(rid, "cd" * 32)
        return sum(counts)

    per_save: dict[int, list[int]] = {}
    for n in (100, 1000):
        tenant = Tenant(tmp_path / f"t{n}")
        tenant.ledger.append_many([(f"r{i:04d}", "ab" * 32) for i in range(n)])
        per_save[n] = [save(tenant, f"s{i:04d}") for i in range(3)]
    tail = 0 if writer == "Tenant.save" else 4096
    # The first save of a Tenant object also reads the ledger's first KiB, once: the
    # testimony mode a ledger without testimony.json implies (ledger.settings).
    first = 1024 if writer == "Tenant.save" else 0
    assert per_save == {100: [tail + first, tail, tail], 1000: [tail + first, tail, tail]}

    path = tenant.root / "ledger.jsonl"
    _wait_for_a_later_ctime(path, tmp_path / "scratch")
    os.chmod(path, 0o600)
    size = path.stat().st_size
    assert save(tenant, "x0001") == 4096 + size
    assert save(tenant, "x0002") == tail


def _json_head(head: Head) -> bytes:
    """A ``ledger.head`` in the JSON form (``ledger.head/1``) that issue 14 wrote, built
    with the canonical encoder: ``{"end", "fingerprint", "hash", "seq"}`` and a newline."""
    fields: dict[str, object] = {"hash": head.hash, "seq": head.seq}
    if head.end is not None:
        fields["end"] = head.end
    if head.fingerprint is not None:
        fields["fingerprint"] = head.fingerprint
    return canonical.dumps(fields) + b"\n"


def test_old_heads_without_end_are_read_and_upgraded(tmp_path: Path) -> None:
    """A JSON head written before ``end`` was recorded is read; the next append walks the
    chain once and writes a two-slot head with ``end``."""
    tenant = _three(tmp_path)
    path = tenant.root / "ledger.head"
    current = read_head(path)
    assert current is not None
    path.write_bytes(_json_head(Head(current.seq, current.hash)))
    assert tenant.ledger.store.read_head() == Head(current.seq, current.hash)
    tenant.save({"id": "d", "summary": "d"})
    size = (tenant.root / "ledger.jsonl").stat().st_size
    upgraded = read_head(path)
    assert upgraded is not None and (upgraded.seq, upgraded.end) == (4, size)
    assert len(path.read_bytes()) == 8192


def test_holds_lock_is_true_only_in_the_thread_holding_it(tmp_path: Path) -> None:
    """Issue 14 item 5: lock ownership is per thread, so another thread sharing the object
    does not think it holds the lock."""
    led = Ledger(tmp_path / "ledger.jsonl")
    seen: list[bool] = []
    with led.locked():
        worker = threading.Thread(target=lambda: seen.append(led.holds_lock))
        worker.start()
        worker.join(10)
        assert led.holds_lock
    assert (seen, led.holds_lock) == ([False], False)


def test_verify_from_another_thread_waits_for_a_save_in_progress(tmp_path: Path) -> None:
    """One Tenant shared by two threads: while one holds the ledger lock with a record
    rewritten but its line not yet appended, a verify from the other thread waits for the
    lock and then reports the record sealed (before the fix it read ``altered``)."""
    tenant = _saved(tmp_path)
    reports: list[VerifyReport] = []
    with tenant.ledger.locked():
        (tenant.memory_dir / "x.json").write_text(json.dumps({"id": "x", "summary": "new"}))
        worker = threading.Thread(target=lambda: reports.append(tenant.verify()))
        worker.start()
        worker.join(0.2)  # give it every chance to run; it must be waiting for the lock
        tenant.ledger.append("x", tenant.testimony()["x"][0])
    worker.join(30)
    assert not worker.is_alive()
    assert [(r.sealed, r.altered, r.entries) for r in reports] == [(1, (), 2)]


def test_threads_sharing_one_tenant_see_only_true_verdicts(tmp_path: Path) -> None:
    """Two threads re-save records while two verify through the same Tenant object: every
    report is ok with nothing altered (bounded: 60 saves, verifies until they end)."""
    tenant = _saved(tmp_path)
    done = threading.Event()
    bad: list[dict[str, Any]] = []
    counts: list[int] = []

    def saver(k: int) -> None:
        for i in range(30):
            tenant.save({"id": f"r{k}", "summary": f"version {i}"})
            tenant.save({"id": "x", "summary": f"x {k} {i}"})

    def verifier() -> None:
        n = 0
        while not done.is_set() or n == 0:
            report = tenant.verify().to_dict()
            n += 1
            if not report["ok"] or report["altered"] or report["missing"]:
                bad.append(report)
        counts.append(n)

    verifiers = [threading.Thread(target=verifier) for _ in range(2)]
    savers = [threading.Thread(target=saver, args=(k,)) for k in range(2)]
    for t in verifiers + savers:
        t.start()
    for t in savers:
        t.join(120)
    done.set()
    for t in verifiers:
        t.join(120)
    assert bad == [] and len(counts) == 2 and min(counts) >= 1
    final = tenant.verify()
    assert (final.ok, final.sealed, final.entries) == (True, 3, 121)

"""Hostile inputs against the ledger, record files, the bank, the importers and the CLI.

One test per row (issue 7): each row names the hostile input and what it must produce on every
surface it applies to. Nothing may escape but a ``MerkleMemoryError`` subclass (or, for file
system conditions, the ``OSError`` the CLI turns into one ``error:`` line); verify never raises
on bad content, it reports; no row loses data.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from merkle_memory.bank import MemoryBank
from merkle_memory.bank.memory import Memory
from merkle_memory.cli import main
from merkle_memory.errors import (
    BankError,
    LedgerBrokenError,
    LedgerFormatError,
    MemoryNotFoundError,
    RecordError,
    TamperedMemoryError,
    TenantError,
    TranscriptFormatError,
)
from merkle_memory.ledger import Ledger, verify_ledger
from merkle_memory.ledger.records import read_record
from merkle_memory.ledger.tenant import Tenant
from merkle_memory.transcripts import FORMAT_NAMES, import_file

from ._helpers import assert_one_error_line, unreadable

DEEP = 100_000
D = "0" * 64
TS = datetime(2026, 1, 1, tzinfo=UTC)
GOOD = f'"content_sha256":"{D}","hash":"{D}","memory_id":"m2","op":"save","prev":"{D}"'

# Ledger line rows: the hostile line is line 2 of a 3-line ledger; verify must report the
# chain broken at seq 2 (never raise), entries() must raise LedgerFormatError, seal must refuse.
LEDGER_ROWS: list[tuple[str, bytes]] = [
    ("duplicate-key", ("{" + GOOD + ',"seq":2,"seq":2,"ts":1}').encode()),
    ("nan-ts", ("{" + GOOD + ',"seq":2,"ts":NaN}').encode()),
    ("infinity-ts", ("{" + GOOD + ',"seq":2,"ts":-Infinity}').encode()),
    ("1e400-ts", ("{" + GOOD + ',"seq":2,"ts":1e400}').encode()),
    ("lone-surrogate-id", ("{" + GOOD.replace("m2", "\\ud800") + ',"seq":2,"ts":1}').encode()),
    ("seq-beyond-2**53", ("{" + GOOD + ',"seq":9007199254740993,"ts":1}').encode()),
    ("seq-10000-digits", ("{" + GOOD + ',"seq":' + "9" * 10_000 + ',"ts":1}').encode()),
    ("float-seq", ("{" + GOOD + ',"seq":2.0,"ts":1}').encode()),
    ("negative-seq", ("{" + GOOD + ',"seq":-2,"ts":1}').encode()),
    ("bool-seq", ("{" + GOOD + ',"seq":true,"ts":1}').encode()),
    ("missing-key-prev", ("{" + GOOD.replace(f',"prev":"{D}"', "") + ',"seq":2,"ts":1}').encode()),
    ("extra-key", ("{" + GOOD + ',"note":"x","seq":2,"ts":1}').encode()),
    ("nesting-100000", b'{"seq":' + b"[" * DEEP + b"]" * DEEP + b"}"),
    ("invalid-utf8", ("{" + GOOD + ',"seq":2,"ts":1}').encode().replace(b"m2", b"m\xff")),
    ("utf8-bom", b"\xef\xbb\xbf{" + GOOD.encode() + b',"seq":2,"ts":1}'),
    ("not-an-object", b"[2]"),
    ("nul-in-line", ("{" + GOOD + ',"seq":2,"ts":1}').encode().replace(b"m2", b"m\x00")),
]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _tenant_with_bad_line(root: Path, bad: bytes) -> Tenant:
    tenant = Tenant(root)
    for mid in ("m1", "m2", "m3"):
        tenant.save({"id": mid, "summary": mid})
    lines = tenant.ledger.path.read_bytes().split(b"\n")
    lines[1] = bad
    tenant.ledger.path.write_bytes(b"\n".join(lines))
    return tenant


LEDGER_CASES = [pytest.param(bad, id=name) for name, bad in LEDGER_ROWS]


@pytest.mark.parametrize("bad", LEDGER_CASES)
def test_hostile_ledger_line(
    bad: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hostile line 2: verify reports broken at 2 (no raise), entries() raises
    LedgerFormatError naming line 2, seal raises LedgerBrokenError, the CLI exits 1."""
    tenant = _tenant_with_bad_line(tmp_path / "t", bad)
    before = tenant.ledger.path.read_bytes()
    report = tenant.verify()
    assert report.chain == "broken" and report.broken_at == 2 and not report.ok
    assert report.entries == 3
    with pytest.raises(LedgerFormatError, match="line 2"):
        list(tenant.ledger.entries(check_hash=True))
    with pytest.raises(LedgerBrokenError):
        tenant.seal()
    assert main(["ledger", "verify", str(tenant.root), "--json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["t"]["broken_at"] == 2
    assert "Traceback" not in err
    assert main(["ledger", "seal", str(tenant.root)]) == 1
    _, err = capsys.readouterr()
    assert "Traceback" not in err and "error:" in err
    assert tenant.ledger.path.read_bytes() == before  # nothing repaired, nothing lost


@pytest.mark.parametrize("bad", [r[1] for r in LEDGER_ROWS], ids=[r[0] for r in LEDGER_ROWS])
def test_hostile_last_ledger_line_refuses_append(bad: bytes, tmp_path: Path) -> None:
    """The same line as the complete last line: append refuses (LedgerBrokenError), writes
    nothing, and never quarantines a complete line."""
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append("m1", D)
    (tmp_path / "ledger.head").unlink()
    with ledger.path.open("ab") as handle:
        handle.write(bad + b"\n")
    before = ledger.path.read_bytes()
    with pytest.raises(LedgerBrokenError):
        Ledger(ledger.path).append("m3", D)
    assert ledger.path.read_bytes() == before
    assert not (tmp_path / "ledger.torn").exists()


def test_hostile_ledger_empty_file_and_blank_lines(tmp_path: Path) -> None:
    """An empty ledger is ``empty`` and ok; blank lines are skipped, not counted."""
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(b"")
    assert verify_ledger(path, {}).to_dict()["chain"] == "empty"
    entry = Ledger(path).append("m1", D)
    path.write_bytes(b"\n\n" + entry.line() + b"\n\n")
    report = verify_ledger(path, {"m1": D})
    assert report.ok and report.entries == 1 and report.sealed == 1


@pytest.mark.slow
def test_hostile_ledger_100mb_line(tmp_path: Path) -> None:
    """A 100 MB line in the middle: verify reports the break at that seq without raising."""
    tenant = Tenant(tmp_path / "t")
    for mid in ("m1", "m2", "m3"):
        tenant.save({"id": mid, "summary": mid})
    lines = tenant.ledger.path.read_bytes().split(b"\n")
    with tenant.ledger.path.open("wb") as handle:
        handle.write(lines[0] + b"\n" + b'{"memory_id":"')
        chunk = b"a" * (1 << 20)
        for _ in range(100):
            handle.write(chunk)
        handle.write(b'"}\n' + lines[2] + b"\n")
    report = tenant.verify()
    assert report.chain == "broken" and report.broken_at == 2
    assert report.reason is not None and "malformed" in report.reason


# --- record files --------------------------------------------------------------------------

RECORD_ROWS: list[tuple[str, bytes]] = [
    ("duplicate-key", b'{"id":"h","summary":"a","summary":"b"}'),
    ("nan", b'{"id":"h","summary":NaN}'),
    ("infinity", b'{"id":"h","summary":Infinity}'),
    ("1e400", b'{"id":"h","summary":1e400}'),
    ("lone-surrogate", b'{"id":"h","summary":"\\ud800"}'),
    ("int-beyond-2**53", b'{"id":"h","summary":9007199254740993}'),
    ("nesting-100000", b'{"id":"h","summary":' + b"[" * DEEP + b"]" * DEEP + b"}"),
    ("invalid-utf8", b'{"id":"h","summary":"\xff"}'),
    ("utf8-bom", b'\xef\xbb\xbf{"id":"h","summary":"h"}'),
    ("empty-file", b""),
    ("not-an-object", b'["h"]'),
    ("id-dotdot", b'{"id":"../h","summary":"h"}'),
    ("id-slash", b'{"id":"a/h","summary":"h"}'),
    ("id-nul", b'{"id":"h\\u0000","summary":"h"}'),
    ("id-10000-chars", b'{"id":"' + b"h" * 10_000 + b'","summary":"h"}'),
]


@pytest.mark.parametrize("bad", [r[1] for r in RECORD_ROWS], ids=[r[0] for r in RECORD_ROWS])
def test_hostile_record_file(
    bad: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sealed record replaced by hostile bytes reads ``altered`` (never sealed, no raise);
    seal adopts nothing new and keeps the chain; the CLI exits 1 without a traceback."""
    tenant = Tenant(tmp_path / "t")
    tenant.save({"id": "h", "summary": "h"})
    tenant.save({"id": "ok", "summary": "fine"})
    (tenant.memory_dir / "h.json").write_bytes(bad)
    report = tenant.verify()
    assert not report.ok
    assert "h" in report.altered + report.missing
    assert report.sealed == 1
    sealed = tenant.seal()
    assert "h" not in sealed.sealed_ids
    assert tenant.ledger.path.read_bytes().count(b"\n") == 2 + len(sealed.sealed_ids)
    assert main(["ledger", "verify", str(tenant.root)]) == 1
    _, err = capsys.readouterr()
    assert "Traceback" not in err
    assert (tenant.memory_dir / "h.json").read_bytes() == bad  # never rewritten


@pytest.mark.parametrize("bad", [r[1] for r in RECORD_ROWS], ids=[r[0] for r in RECORD_ROWS])
def test_hostile_record_read_record(bad: bytes, tmp_path: Path) -> None:
    """``read_record`` on a hostile file: a dict or RecordError; if a dict, its id is
    validated by ``Tenant.save`` (RecordError) or the testimony is refused (RecordError)."""
    path = tmp_path / "h.json"
    path.write_bytes(bad)
    try:
        record = read_record(path)
    except RecordError:
        return
    with pytest.raises(RecordError):
        Tenant(tmp_path / "t").save(record)


@pytest.mark.parametrize(
    "record_id", ["../x", "a/b", "/abs", "x\x00y", "h" * 10_000, "", ".", "a\\b", "\ud800"]
)
def test_hostile_record_id_on_save(record_id: str, tmp_path: Path) -> None:
    """Tenant.save refuses an id that could leave memory/ or is absurd, writing nothing."""
    tenant = Tenant(tmp_path / "t")
    with pytest.raises(RecordError):
        tenant.save({"id": record_id, "summary": "x"})
    assert not tenant.ledger.path.exists()
    assert not (tmp_path / "x").exists() and list(tmp_path.rglob("*.json")) == []


def test_hostile_record_path_is_a_directory(tmp_path: Path) -> None:
    """``memory/h.json`` is a directory: verify names h missing, read_record refuses it as
    not a regular file (RecordError), seal still works."""
    tenant = Tenant(tmp_path / "t")
    tenant.save({"id": "h", "summary": "h"})
    (tenant.memory_dir / "h.json").unlink()
    (tenant.memory_dir / "h.json").mkdir()
    report = tenant.verify()
    assert report.missing == ("h",) and not report.ok
    with pytest.raises(RecordError, match=r"not a regular file \(never read\)$"):
        read_record(tenant.memory_dir / "h.json")
    assert tenant.seal().sealed_ids == ()


def test_hostile_record_unreadable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An unreadable sealed record reads altered (it cannot testify); verify does not raise.

    As root, ``chmod 000`` does not stop reads, so ``open`` is made to raise EACCES instead.
    """
    tenant = Tenant(tmp_path / "t")
    tenant.save({"id": "h", "summary": "h"})
    with unreadable(tenant.memory_dir / "h.json"):
        report = tenant.verify()
        assert not report.ok and "h" in report.altered
        assert main(["ledger", "verify", str(tenant.root)]) == 1
    _, err = capsys.readouterr()
    assert "Traceback" not in err


def test_hostile_memory_folder_symlink_elsewhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tenant whose memory/ is a symlink to another folder: verify and seal refuse it
    (TenantError; CLI one error line, exit 1) and nothing is written through the link, and a
    bank whose memories/ is a symlink refuses to write there (BankError) and verify fails."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.json").write_text('{"id":"x","summary":"planted"}')
    tenant_root = tmp_path / "t"
    tenant_root.mkdir()
    os.symlink(elsewhere, tenant_root / "memory")
    for action in (Tenant(tenant_root).verify, Tenant(tenant_root).seal):
        with pytest.raises(TenantError, match=r"memory/ is a symbolic link \(never followed\)"):
            action()
    for verb in ("verify", "seal"):
        assert main(["ledger", verb, str(tenant_root)]) == 1
        out, err = capsys.readouterr()
        assert (out, err) == ("", "error: t: memory/ is a symbolic link (never followed)\n")
    assert sorted(p.name for p in tenant_root.iterdir()) == ["memory"]
    bank_root = tmp_path / "bank"
    bank_root.mkdir()
    os.symlink(elsewhere, bank_root / "memories")
    with pytest.raises(BankError):
        MemoryBank(bank_root).save(
            Memory("fact", "p", "c", timestamp=datetime(2026, 1, 1, tzinfo=UTC))
        )
    assert sorted(p.name for p in elsewhere.iterdir()) == ["x.json"]
    assert not MemoryBank(bank_root).verify().ok


# --- memory bank ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [r[1] for r in RECORD_ROWS], ids=[r[0] for r in RECORD_ROWS])
def test_hostile_bank_memory_file(
    bad: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A memory file replaced by hostile bytes: verify names it (not ok), get raises
    TamperedMemoryError, list skips it, re-saving refuses to overwrite, CLI exits 1."""
    bank = MemoryBank(tmp_path / "bank")
    memory = Memory("fact", "project", "the truth", timestamp=datetime(2026, 1, 1, tzinfo=UTC))
    bank.save(memory)
    path = bank.active_dir / memory.file_name
    path.chmod(0o644)
    path.write_bytes(bad)
    report = bank.verify()
    assert not report.ok and report.tampered == (f"memories/{memory.file_name}",)
    with pytest.raises(TamperedMemoryError):
        bank.get(memory.id)
    assert bank.memories() == []
    with pytest.raises(TamperedMemoryError):
        bank.save(memory)
    assert path.read_bytes() == bad
    assert main(["bank", "verify", str(bank.root)]) == 1
    _, err = capsys.readouterr()
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "bad_id", ["../" + "a" * 61, "a/" + "b" * 62, "A" * 64, "a" * 10_000, "a\x00" * 32]
)
def test_hostile_bank_ids(bad_id: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """get/archive/consolidate with a hostile id raise BankError (not found is not reached);
    the CLI refuses one that is not hex as a usage error (exit 2, no traceback), and reads hex
    in capitals as lowercase (then: not found, exit 1)."""
    bank = MemoryBank(tmp_path / "bank")
    bank.save(Memory("fact", "p", "c", timestamp=datetime(2026, 1, 1, tzinfo=UTC)))
    for call in (bank.get, bank.archive):
        with pytest.raises(BankError) as info:
            call(bad_id)
        assert not isinstance(info.value, MemoryNotFoundError)
    if "\x00" not in bad_id:
        code = main(["bank", "archive", str(bank.root), bad_id])
        _, err = capsys.readouterr()
        if bad_id == "A" * 64:
            assert code == 1
            assert_one_error_line(err)
        else:
            assert code == 2 and "Traceback" not in err
            assert err.splitlines()[-1].startswith(
                "merkle-memory bank archive: error: argument ID: not a hash or a hash prefix"
            )


# --- importers -----------------------------------------------------------------------------

ALL_FORMATS = (*FORMAT_NAMES, "auto")
_USER = b'{"type":"user","message":{"role":"user","content":%s}}\n'
_TOOL_USE = (
    b'{"type":"assistant","message":{"id":"x","role":"assistant",'
    b'"content":[{"type":"tool_use","id":"t","name":"n","input":{"v":%s}}]}}\n'
)
# (row id, bytes, formats it applies to). A NaN inside hashed tool input is refused by the
# Claude Code importer; the other importers skip a Claude Code line as "not a message".
IMPORT_ROWS: list[tuple[str, bytes, tuple[str, ...]]] = [
    ("nesting-100000", b'{"a":' + b"[" * DEEP + b"]" * DEEP + b"}\n", ALL_FORMATS),
    ("invalid-utf8", b'{"type":"user","message":{"role":"user","content":"\xff"}}\n', ALL_FORMATS),
    (
        "utf8-bom",
        b'\xef\xbb\xbf{"type":"user","message":{"role":"user","content":"hi"}}\n',
        ALL_FORMATS,
    ),
    ("nan-in-hashed-input", _TOOL_USE % b"NaN", ("claude-code", "auto")),
    ("1e400-in-hashed-input", _TOOL_USE % b"1e400", ("claude-code", "auto")),
    ("not-json", b"this is not json\n", ALL_FORMATS),
]
IMPORT_CASES = [(bad, fmt) for _, bad, fmts in IMPORT_ROWS for fmt in fmts]
IMPORT_IDS = [f"{name}-{fmt}" for name, _, fmts in IMPORT_ROWS for fmt in fmts]


@pytest.mark.parametrize(("bad", "fmt"), IMPORT_CASES, ids=IMPORT_IDS)
def test_hostile_transcript(
    bad: bytes, fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every importer (and auto) raises TranscriptFormatError; ``dag import`` exits 1 with
    one error line."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(bad)
    with pytest.raises(TranscriptFormatError):
        import_file(path, fmt)
    assert main(["dag", "import", str(path), "--format", fmt]) == 1
    _, err = capsys.readouterr()
    assert_one_error_line(err)


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_hostile_transcript_path_is_directory_or_unreadable(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory or an unreadable file: OSError from the API, one error line from the CLI."""
    folder = tmp_path / "d.jsonl"
    folder.mkdir()
    with pytest.raises(OSError):
        import_file(folder, fmt)
    assert main(["dag", "import", str(folder), "--format", fmt]) == 1
    assert_one_error_line(capsys.readouterr().err)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"type":"user","message":{"role":"user","content":"hi"}}\n')
    with unreadable(path):
        assert main(["dag", "import", str(path), "--format", fmt]) == 1
    assert_one_error_line(capsys.readouterr().err)

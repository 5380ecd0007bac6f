"""`merkle-memory ledger save|recover` and what `ledger verify` says about torn tails,
accepted rollbacks and unsealed records (issue 16 items 1, 2, 3 and 7)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from support import run_main

from merkle_memory.ledger import Ledger, read_head, records
from merkle_memory.ledger.tenant import Tenant


def _tenant(tmp_path: Path, n: int = 4) -> Tenant:
    tenant = Tenant(tmp_path / "T")
    for i in range(n):
        tenant.save({"id": f"note-{i}", "summary": f"s{i}"})
    return tenant


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


# --- ledger save ---------------------------------------------------------------------------


def test_save_records_an_honest_edit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An edited record reads altered and seal refuses to re-adopt it; `ledger save` of the
    edited record writes it and seals it (seq 5), and the tenant verifies again."""
    tenant = _tenant(tmp_path)
    edited = {"id": "note-2", "summary": "we chose postgres"}
    (tmp_path / "note-2.json").write_text(json.dumps(edited))
    (tenant.memory_dir / "note-2.json").write_text(json.dumps(edited))
    code, _out, err = run_main(capsys, "ledger", "seal", str(tenant.root))
    assert code == 1 and "1 altered" in err
    code, out, err = run_main(
        capsys, "ledger", "save", str(tenant.root), str(tmp_path / "note-2.json")
    )
    entry = list(tenant.ledger.entries())[-1]
    assert (code, err) == (0, "")
    assert out == f"T: saved note-2 at seq 5 ({entry.hash})\n"
    assert (entry.memory_id, entry.op, entry.content_sha256) == (
        "note-2",
        "save",
        records.testimony(edited),
    )
    assert json.loads((tenant.memory_dir / "note-2.json").read_text()) == edited
    code, out, _err = run_main(capsys, "ledger", "verify", str(tenant.root))
    assert code == 0 and out.startswith("T: ok: chain intact (5 entries) · sealed 4 ·")


def test_save_from_stdin_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`-` reads the record from stdin; --json prints the tenant, the record file and the
    entry's seven keys; a missing tenant folder is created."""
    _stdin(monkeypatch, b'{"id": "m1", "summary": "from a pipe"}')
    code, out, err = run_main(capsys, "ledger", "save", str(tmp_path / "new"), "-", "--json")
    assert (code, err) == (0, "")
    document = json.loads(out)
    entry = Ledger(tmp_path / "new" / "ledger.jsonl").last()
    assert entry is not None
    assert document == {"tenant": "new", "file": "memory/m1.json", "entry": entry.to_dict()}
    assert entry.seq == 1


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"id": "a", "id": "b"}', "error: stdin: not a JSON record (duplicate key"),
        (b"[1, 2]", "error: stdin: a record must be a JSON object, not list\n"),
        (b"\xff{}", "error: stdin: not a JSON record ("),
        (b'{"summary": "no id"}', "error: record id must be a string, not NoneType\n"),
        (b'{"id": "../x"}', "error: record id '../x' is empty or contains '..'\n"),
        (b'{"id": "a", "summary": NaN}', "error: stdin: not a JSON record ("),
    ],
)
def test_save_refuses_a_bad_record_and_writes_nothing(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    data: bytes,
    message: str,
) -> None:
    """Not JSON, duplicate keys, NaN, not an object, no id or a bad id: exit 1, one error
    line, and no tenant folder is created."""
    _stdin(monkeypatch, data)
    code, out, err = run_main(capsys, "ledger", "save", str(tmp_path / "T"), "-")
    assert (code, out) == (1, "")
    assert err.startswith(message) and err.count("\n") == 1
    assert not (tmp_path / "T").exists()


def test_save_of_a_missing_file_says_it_does_not_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A FILE that does not exist: `error: FILE: does not exist`, exit 1."""
    missing = tmp_path / "nope.json"
    code, _out, err = run_main(capsys, "ledger", "save", str(tmp_path / "T"), str(missing))
    assert (code, err) == (1, f"error: {missing}: does not exist\n")


def test_save_onto_a_rollback_names_the_way_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A save refused as a rollback says which command accepts it."""
    tenant = _tenant(tmp_path)
    lines = tenant.ledger.path.read_bytes().splitlines(keepends=True)
    tenant.ledger.path.write_bytes(b"".join(lines[:2]))
    (tmp_path / "r.json").write_text('{"id": "r"}')
    code, _out, err = run_main(capsys, "ledger", "save", str(tenant.root), str(tmp_path / "r.json"))
    assert code == 1
    assert err == (
        f"error: {tenant.ledger.path} went backwards: ledger.head records seq 4 but the file "
        f"ends at seq 2; refusing to append (if the loss is known and accepted: "
        f"merkle-memory ledger recover {tenant.root} --accept-rollback keeps the evidence and "
        "continues from what is on disk)\n"
    )


def test_save_after_a_crash_left_an_empty_pending_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A re-save killed in its first step leaves `memory/<id>.json.pending` empty: `ledger
    save` of the id removes it and exits 0 (it said `error: File exists: ...`); a folder in
    its place is one error line, exit 1, nothing written."""
    tenant = _tenant(tmp_path)
    (tenant.memory_dir / "note-1.json.pending").write_bytes(b"")
    (tmp_path / "n.json").write_text('{"id": "note-1", "summary": "again"}')
    code, out, err = run_main(capsys, "ledger", "save", str(tenant.root), str(tmp_path / "n.json"))
    entry = list(tenant.ledger.entries())[-1]
    assert (code, out, err) == (0, f"T: saved note-1 at seq 5 ({entry.hash})\n", "")
    assert not (tenant.memory_dir / "note-1.json.pending").exists()
    assert json.loads((tenant.memory_dir / "note-1.json").read_text())["summary"] == "again"
    (tenant.memory_dir / "note-1.json.pending").mkdir()
    code, out, err = run_main(capsys, "ledger", "save", str(tenant.root), str(tmp_path / "n.json"))
    assert (code, out) == (1, "")
    assert err == (
        f"error: {tenant.root}: memory/note-1.json.pending is a folder: it is neither settled "
        "nor removed; remove it to save 'note-1' again\n"
    )
    assert [e.seq for e in tenant.ledger.entries()][-1] == 5


# --- ledger recover -----------------------------------------------------------------------


def test_recover_accepts_a_rollback_and_verify_lists_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's walk-through: `head -n 2` makes seal refuse and verify name the way out;
    recover without --accept-rollback is a usage error; with it the evidence is written,
    seal then re-adopts the two records, and verify lists the accepted rollback."""
    tenant = _tenant(tmp_path)
    root = str(tenant.root)
    lines = tenant.ledger.path.read_bytes().splitlines(keepends=True)
    tenant.ledger.path.write_bytes(b"".join(lines[:2]))
    code, _out, err = run_main(capsys, "ledger", "verify", root)
    assert code == 1
    assert err == (
        "error: T: not ok: ledger chain broken at seq 3: ledger.head records a later entry "
        "(seq 4) than the ledger holds (last seq 2); if the loss is known and accepted: "
        f"merkle-memory ledger recover {root} --accept-rollback\n"
    )
    code, _out, err = run_main(capsys, "ledger", "recover", root)
    assert code == 2 and err.endswith("the following arguments are required: --accept-rollback\n")
    code, out, err = run_main(capsys, "ledger", "recover", root, "--accept-rollback")
    record = tenant.root / "ledger.recovery-1.json"
    assert code == 0
    assert out == (
        f"T: accepted the rollback from seq 4 to seq 2 (lacking seqs 3-4); evidence in "
        f"{record}; the next save is seq 3\n"
    )
    assert err.startswith(f"warning: Ledger {tenant.ledger.path}: accepted a rollback")
    code, out, _err = run_main(capsys, "ledger", "seal", root)
    assert code == 0 and "sealed now 2: note-2, note-3" in out
    code, out, _err = run_main(capsys, "ledger", "verify", root)
    assert code == 0
    assert out == (
        "T: ok: chain intact (4 entries) · sealed 4 · altered 0 · missing 0 · unsealed 0 · "
        "disputed 0\n  accepted rollback: ledger.recovery-1.json\n"
    )
    code, out, _err = run_main(capsys, "ledger", "verify", root, "--json")
    assert json.loads(out)["T"]["accepted_rollbacks"] == ["ledger.recovery-1.json"]


def test_recover_json_and_nothing_to_accept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--json prints what was accepted; on a healthy ledger `accepted: false`, exit 0, and
    nothing is written."""
    tenant = _tenant(tmp_path, 3)
    root = str(tenant.root)
    code, out, _err = run_main(capsys, "ledger", "recover", root, "--accept-rollback", "--json")
    assert (code, json.loads(out)) == (0, {"accepted": False})
    code, out, _err = run_main(capsys, "ledger", "recover", root, "--accept-rollback")
    assert (code, out) == (0, "T: nothing to accept: the ledger holds what ledger.head records\n")
    assert not (tenant.root / "ledger.recovery-1.json").exists()
    head = read_head(tenant.root / "ledger.head")
    assert head is not None
    tenant.ledger.path.write_bytes(tenant.ledger.path.read_bytes().splitlines(keepends=True)[0])
    code, out, _err = run_main(
        capsys, "ledger", "recover", root, "--accept-rollback", "--json", "-q"
    )
    assert code == 0
    assert json.loads(out) == {
        "accepted": True,
        "record": str(tenant.root / "ledger.recovery-1.json"),
        "head": {"seq": 3, "hash": head.hash},
        "on_disk_seq": 1,
        "lacking": [2, 3],
        "reused": False,
    }


def test_recover_refuses_a_broken_chain_and_a_missing_tenant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A chain broken on disk is refused (exit 1, nothing written); a missing TENANT does
    not exist."""
    tenant = _tenant(tmp_path, 3)
    lines = tenant.ledger.path.read_bytes().splitlines(keepends=True)
    tenant.ledger.path.write_bytes(lines[0] + lines[2])
    code, _out, err = run_main(capsys, "ledger", "recover", str(tenant.root), "--accept-rollback")
    assert code == 1
    assert err.startswith(
        f"error: {tenant.ledger.path}: ledger chain broken at seq 2: sequence gap"
    )
    assert not (tenant.root / "ledger.recovery-1.json").exists()
    missing = tmp_path / "none"
    code, _out, err = run_main(capsys, "ledger", "recover", str(missing), "--accept-rollback")
    assert (code, err) == (1, f"error: {missing}: does not exist\n")


# --- ledger verify: torn tail, unsealed --------------------------------------------------


def test_verify_reports_a_torn_tail_as_a_torn_tail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's fragment: verify says torn tail (not chain broken), does not count it as
    an entry, says the next seal or save moves it to ledger.torn, and exits 0; seal then
    quarantines it."""
    tenant = _tenant(tmp_path)
    size = tenant.ledger.path.stat().st_size
    with tenant.ledger.path.open("ab") as handle:
        handle.write(b'{"content_sha256":"ab12')
    code, out, err = run_main(capsys, "ledger", "verify", str(tenant.root))
    assert (code, err) == (0, "")
    assert out == (
        "T: ok: chain intact (4 entries) · sealed 4 · altered 0 · missing 0 · unsealed 0 · "
        f"disputed 0\n  torn tail: 23 bytes at byte {size}, left by a crash in the middle of "
        "an append (not an entry); the next save or seal moves it to ledger.torn\n"
    )
    code, out, _err = run_main(capsys, "ledger", "verify", str(tenant.root), "--json")
    report = json.loads(out)["T"]
    assert (report["entries"], report["torn_tail"]) == (4, {"offset": size, "length": 23})
    code, _out, err = run_main(capsys, "ledger", "seal", str(tenant.root))
    assert code == 0 and "quarantining a torn tail (23 bytes" in err
    assert tenant.ledger.path.stat().st_size == size


def test_a_complete_bad_last_line_is_still_a_broken_chain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad last line that ends with a newline is not a torn tail: the chain is broken."""
    tenant = _tenant(tmp_path, 2)
    with tenant.ledger.path.open("ab") as handle:
        handle.write(b'{"content_sha256":"ab12\n')
    code, out, _err = run_main(capsys, "ledger", "verify", str(tenant.root))
    assert code == 1
    assert "NOT OK: chain broken (3 entries)" in out
    assert "broken at seq 3: unparseable line" in out


def test_all_unsealed_records_do_not_read_as_intact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ledger verify T -q && echo intact`: a tenant whose records have no entry exits 1
    (NOT SEALED, with an error line naming `ledger seal`); after a seal it exits 0."""
    memory = tmp_path / "T" / "memory"
    memory.mkdir(parents=True)
    for i in range(3):
        (memory / f"r{i}.json").write_text(json.dumps({"id": f"r{i}"}))
    root = str(tmp_path / "T")
    code, out, err = run_main(capsys, "ledger", "verify", root)
    assert code == 1
    assert out.startswith("T: NOT SEALED: chain empty (0 entries) · sealed 0 ·")
    assert err == (
        "error: T: not sealed: 3 records without a ledger entry (not protected); run: "
        f"merkle-memory ledger seal {root}\n"
    )
    code, out, err = run_main(capsys, "ledger", "verify", root, "-q", "--json")
    assert code == 1 and json.loads(out)["T"]["ok"] is True and err.startswith("error: T:")
    assert run_main(capsys, "ledger", "seal", root, "-q")[0] == 0
    assert run_main(capsys, "ledger", "verify", root, "-q") == (
        0,
        "T: ok: chain intact (3 entries) · sealed 3 · altered 0 · missing 0 · unsealed 0 · "
        "disputed 0\n",
        "",
    )


def test_a_proof_refused_as_a_rollback_names_the_way_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ledger prove` on a ledger cut behind its synced sidecar is refused as a rollback, and
    the error line names `ledger recover`; after it the proof is served."""
    tenant = _tenant(tmp_path)
    root = str(tenant.root)
    assert run_main(capsys, "ledger", "prove", root, "--memory-id", "note-0")[0] == 0
    lines = tenant.ledger.path.read_bytes().splitlines(keepends=True)
    tenant.ledger.path.write_bytes(b"".join(lines[:2]))
    code, _out, err = run_main(capsys, "ledger", "prove", root, "--memory-id", "note-0")
    assert code == 1
    assert err == (
        f"error: {tenant.ledger.path} is shorter than the 4 entries already synced; if the loss "
        f"is known and accepted: merkle-memory ledger recover {root} --accept-rollback\n"
    )
    assert run_main(capsys, "ledger", "recover", root, "--accept-rollback", "-q")[0] == 0
    code, out, _err = run_main(capsys, "ledger", "prove", root, "--memory-id", "note-0", "--json")
    assert (code, json.loads(out)["tree_size"]) == (0, 2)

"""The progress line inside one long job (issue 16 item 6): drawn on a terminal's stderr from
the library's progress callbacks, never with -q, never when stderr is not a terminal."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from support import EXAMPLE_SESSION, T0, legacy_file, run_main

from merkle_memory.bank import MemoryBank
from merkle_memory.cli import _output, main
from merkle_memory.dag import open_store
from merkle_memory.ledger.tenant import Tenant
from merkle_memory.transcripts import import_file


class FakeTTY(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def _tty(monkeypatch: pytest.MonkeyPatch) -> FakeTTY:
    """Make stderr a terminal that draws every update (no rate limit). Called in the test
    body: pytest's capture sets sys.stderr again when the test starts."""
    stream = FakeTTY()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(_output, "MIN_INTERVAL", 0.0)
    monkeypatch.setenv("COLUMNS", "400")  # long temporary paths are not cut
    return stream


def _frames(drawn: str) -> list[str]:
    """The lines drawn, without their padding (the last element is the erasure)."""
    return [frame.rstrip() for frame in drawn.split("\r")[1:]]


def _tenant(folder: Path, n: int) -> Path:
    tenant = Tenant(folder)
    tenant.memory_dir.mkdir(parents=True)
    for i in range(n):
        (tenant.memory_dir / f"r{i:04d}.json").write_text(json.dumps({"id": f"r{i:04d}"}))
    tenant.seal()
    return folder


def test_ledger_verify_draws_records_then_ledger_and_erases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ledger verify of one tenant of 300 records: the tenant, its records (85%, 100%),
    its ledger, the entries compared with the (empty) sidecar, then the line is erased;
    stdout is the report as without a terminal."""
    root = _tenant(tmp_path / "T", 300)
    tty = _tty(monkeypatch)
    assert main(["ledger", "verify", str(root)]) == 0
    frames = _frames(tty.getvalue())
    assert frames[:4] == [
        "ledger verify: 0/1 (0%) T",
        "ledger verify: 0/1 (0%) T: records 85%",
        "ledger verify: 0/1 (0%) T: records 100%",
        "ledger verify: 0/1 (0%) T: ledger 100%",
    ]
    # no proof was made yet, so the sidecar holds no leaf: the entries read are counted
    assert "ledger verify: 0/1 (0%) T: sidecar 300" in frames
    assert frames[-1] == ""  # erased before the report is printed
    assert tty.getvalue().endswith("\r")
    report = capsys.readouterr().out
    assert report.startswith("T: ok: chain intact (300 entries)")


def test_no_progress_with_quiet_or_without_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """-q on a terminal: nothing on stderr; stderr not a terminal: no \\r at all."""
    root = _tenant(tmp_path / "T", 300)
    stream = _tty(monkeypatch)
    assert main(["ledger", "verify", str(root), "-q"]) == 0
    assert stream.getvalue() == ""
    monkeypatch.setattr(sys, "stderr", sys.__stderr__)
    code, _out, err = run_main(capsys, "ledger", "seal", str(root))
    assert (code, err) == (0, "")


def test_each_long_job_draws_its_phase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ledger seal, the first ledger prove (building the sidecar), dag verify, dag import of
    a big file and bank migrate each draw the phase of their library job."""
    root = _tenant(tmp_path / "T", 10)
    store = tmp_path / "dag.db"
    with open_store(store) as opened:
        opened.put_many(import_file(EXAMPLE_SESSION).nodes)
    big = tmp_path / "big.jsonl"
    big.write_bytes(EXAMPLE_SESSION.read_bytes() * 30)
    bank = MemoryBank(tmp_path / "bank")
    bank.add("fact", "p", "new", timestamp=T0)
    legacy_file(bank.active_dir, "old.json", "legacy-1")
    jobs = [
        (["ledger", "seal", str(root)], "ledger seal: 0/1 (0%) T: records 100%"),
        (["ledger", "prove", str(root), "--memory-id", "r0001"], "ledger prove: ledger 100%"),
        (["dag", "verify", "--store", str(store)], "dag verify: nodes 100%"),
        (["dag", "import", str(big)], f"dag import: 0/1 (0%) {big}: reading 100%"),
        (["bank", "migrate", str(bank.root)], "bank migrate: migrating 100%"),
    ]
    tty = _tty(monkeypatch)
    for argv, frame in jobs:
        tty.seek(0)
        tty.truncate()
        assert main(argv) == 0, argv
        assert frame in _frames(tty.getvalue()), (argv, _frames(tty.getvalue()))
    capsys.readouterr()

"""The progress callbacks of the long library jobs (issue 16 item 6; ``merkle_memory._progress``).

Each job calls ``progress(phase, done, total)`` with its documented phases and units: every
``EVERY`` items (or every block of bytes) and once at the end with ``done == total``.
"""

from __future__ import annotations

import json
from pathlib import Path

from support import EXAMPLE_SESSION, T0, legacy_file

from merkle_memory._progress import EVERY
from merkle_memory.bank import MemoryBank
from merkle_memory.dag import open_store
from merkle_memory.dag.store import verify_store
from merkle_memory.ledger import Ledger, verify_ledger
from merkle_memory.ledger.proofs import check, prove_inclusion
from merkle_memory.ledger.records import scan_records
from merkle_memory.ledger.tenant import Tenant
from merkle_memory.transcripts import import_file

Call = tuple[str, int, "int | None"]


class Calls(list[Call]):
    """A progress callback that records its calls."""

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        self.append((phase, done, total))


def _records(folder: Path, n: int) -> Tenant:
    tenant = Tenant(folder)
    tenant.memory_dir.mkdir(parents=True)
    for i in range(n):
        (tenant.memory_dir / f"r{i:04d}.json").write_text(json.dumps({"id": f"r{i:04d}"}))
    return tenant


def test_every_is_a_few_hundred() -> None:
    """Item phases report every 256 items."""
    assert EVERY == 256


def test_scan_records_counts_files(tmp_path: Path) -> None:
    """600 record files: calls at 256, 512 and 600 of 600."""
    tenant = _records(tmp_path / "t", 600)
    calls = Calls()
    scan_records(tenant.memory_dir, progress=calls)
    assert calls == [("records", 256, 600), ("records", 512, 600), ("records", 600, 600)]


def test_verify_ledger_counts_bytes(tmp_path: Path) -> None:
    """A small ledger (one block): the bytes walked, then the end; a torn tail is not
    walked, so the total is the offset where it starts."""
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append_many([(f"m{i}", "0" * 64) for i in range(5)])
    size = ledger.path.stat().st_size
    calls = Calls()
    verify_ledger(ledger.path, {}, progress=calls)
    assert calls == [("ledger", size, size), ("ledger", size, size)]
    with ledger.path.open("ab") as handle:
        handle.write(b'{"seq":6')
    calls = Calls()
    verify_ledger(ledger.path, {}, progress=calls)
    assert calls == [("ledger", size, size), ("ledger", size, size)]


def test_tenant_verify_and_seal_report_records_then_ledger(tmp_path: Path) -> None:
    """Tenant.seal: the records, then the two verifies of the seal (before and after the
    adoption); Tenant.verify: the records, then the ledger."""
    tenant = _records(tmp_path / "t", 300)
    calls = Calls()
    tenant.seal(progress=calls)
    size = tenant.ledger.path.stat().st_size
    assert [c for c in calls if c[0] == "records"] == [
        ("records", 256, 300),
        ("records", 300, 300),
    ]
    assert [c for c in calls if c[0] == "ledger"][-1] == ("ledger", size, size)
    assert calls.index(("records", 300, 300)) < calls.index(("ledger", size, size))
    calls = Calls()
    tenant.verify(progress=calls)
    assert calls == [
        ("records", 256, 300),
        ("records", 300, 300),
        ("ledger", size, size),
        ("ledger", size, size),
    ]


def test_the_first_proof_reports_the_sidecar_build(tmp_path: Path) -> None:
    """The first proof reads the whole ledger (bytes, every 256 lines and at the end); the
    next one, with the sidecar in sync, reads nothing and calls once at the end of no work;
    check() counts entries against the sidecar's leaves."""
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append_many([(f"m{i}", "0" * 64) for i in range(600)])
    size = ledger.path.stat().st_size
    calls = Calls()
    prove_inclusion(ledger, "m7", progress=calls)
    lines = ledger.path.read_bytes().splitlines(keepends=True)
    at = [sum(len(line) for line in lines[: 256 * k]) for k in (1, 2)]
    assert calls == [("ledger", at[0], size), ("ledger", at[1], size), ("ledger", size, size)]
    calls = Calls()
    prove_inclusion(ledger, "m8", progress=calls)
    assert calls == [("ledger", size, size)]
    calls = Calls()
    check(ledger, progress=calls)
    assert calls == [("sidecar", 256, 600), ("sidecar", 512, 600), ("sidecar", 600, 600)]


def test_verify_store_counts_nodes(tmp_path: Path) -> None:
    """dag verify of the example's 10 nodes: one call at the end (fewer than 256)."""
    result = import_file(EXAMPLE_SESSION)
    with open_store(tmp_path / "dag.db") as store:
        store.put_many(result.nodes)
        calls = Calls()
        assert verify_store(store, progress=calls).ok
    assert calls == [("nodes", 10, 10)]


def test_import_file_counts_bytes(tmp_path: Path) -> None:
    """A Claude Code file of 600 lines: bytes read every 256 lines and at the end."""
    lines = EXAMPLE_SESSION.read_bytes().splitlines(keepends=True)
    big = tmp_path / "big.jsonl"
    body = (lines * 60)[:600]
    big.write_bytes(b"".join(body))
    calls = Calls()
    import_file(big, progress=calls)
    at = [sum(len(line) for line in body[: 256 * k]) for k in (1, 2)]
    size = big.stat().st_size
    assert calls == [("reading", at[0], size), ("reading", at[1], size), ("reading", size, size)]


def test_bank_migrate_reports_reading_then_migrating(tmp_path: Path) -> None:
    """Three legacy files: the directory entries read (archive/ included), then each file
    migrated."""
    bank = MemoryBank(tmp_path / "bank")
    bank.add("fact", "p", "new style", timestamp=T0)
    for i in range(3):
        legacy_file(bank.active_dir, f"old-{i}.json", f"legacy-{i}")
    calls = Calls()
    assert bank.migrate(progress=calls).migrated == 3
    assert calls == [
        ("reading", 5, 5),
        ("migrating", 1, 3),
        ("migrating", 2, 3),
        ("migrating", 3, 3),
    ]


def test_bank_verify_reports_files_then_ledger(tmp_path: Path) -> None:
    """bank verify: the directory entries examined, then the ledger's bytes."""
    bank = MemoryBank(tmp_path / "bank")
    for i in range(3):
        bank.add("fact", "p", f"m{i}", timestamp=T0)
    size = bank.ledger_path.stat().st_size
    calls = Calls()
    assert bank.verify(progress=calls).ok
    assert calls == [("files", 4, 4), ("ledger", size, size), ("ledger", size, size)]

"""Many processes sealing one tenant never fork the chain nor seal an id twice (issue 3)."""

from __future__ import annotations

import json
import multiprocessing
from collections import Counter
from pathlib import Path

import pytest

from merkle_memory.ledger.tenant import Tenant

PROCS = 4
PER_PROC = 200
BATCH = 20


def _worker(root: str, k: int) -> None:
    """Write PER_PROC records in batches; after each batch adopt every unsealed record."""
    tenant = Tenant(root)
    tenant.memory_dir.mkdir(parents=True, exist_ok=True)
    for start in range(0, PER_PROC, BATCH):
        for i in range(start, start + BATCH):
            rid = f"p{k}-{i:03d}"
            rec = {"id": rid, "summary": f"record {i} of process {k}"}
            (tenant.memory_dir / f"{rid}.json").write_text(json.dumps(rec), encoding="utf-8")
        tenant.seal()


@pytest.mark.slow
def test_four_processes_seal_800_records_into_one_chain(tmp_path: Path) -> None:
    """4 processes x 200 seals racing adoption: chain intact, seq 1..800 without gap or repeat,
    each id sealed exactly once."""
    root = tmp_path / "t"
    root.mkdir()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_worker, args=(str(root), k)) for k in range(PROCS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    tenant = Tenant(root)
    entries = list(tenant.ledger.entries(check_hash=True))
    assert [e.seq for e in entries] == list(range(1, PROCS * PER_PROC + 1))
    counts = Counter(e.memory_id for e in entries)
    assert len(counts) == PROCS * PER_PROC and set(counts.values()) == {1}
    rep = tenant.verify()
    assert (rep.chain, rep.sealed, rep.ok, rep.unsealed) == ("intact", 800, True, ())

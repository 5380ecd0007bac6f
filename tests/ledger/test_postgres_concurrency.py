"""Many writers on one PostgreSQL tenant: no fork, no gap, nothing acknowledged lost.

* 16 writer processes x 500 saves into one tenant, in two groups standing in for two machines
  with separate connection pools (group A: one thread per process; group B: two threads per
  process sharing the process's pool): the ledger holds seq 1..8000 without gap or repeat,
  every acknowledged save is there with the seq and hash it was acknowledged with, and
  verify reports the chain intact with every record sealed.
* 50 writers SIGKILLed in the middle of their transactions (while the server shows them
  inside one): nothing acknowledged is lost, the chain stays intact and contiguous.

Each writer prints one line per acknowledged save (``id seq hash``) after ``save`` returned.
Needs the test server (tests/servers.py); both are ``slow`` (CI runs them).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import IO

import pytest
from servers import admin
from support import REPO

from merkle_memory.ledger import open_tenant

WRITER = textwrap.dedent(
    """
    import sys, threading
    from merkle_memory.ledger import open_tenant
    url, name, threads, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    tenant = open_tenant(url)          # one store, one pool of connections, for the process
    out = threading.Lock()

    def work(thread):
        for i in range(count):
            rid = f"{name}-{thread}-{i}"
            entry = tenant.save({"id": rid, "summary": f"save {i} of {rid}"})
            with out:
                print(rid, entry.seq, entry.hash, flush=True)

    runners = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join()
    """
)


def _writer(url: str, name: str, threads: int, count: int, out: IO[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, url, name, str(threads), str(count)],
        cwd=REPO, stdout=out, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip


def _acks(paths: list[Path]) -> dict[str, tuple[int, str]]:
    """Every acknowledged save: id -> (seq, hash); a line cut by a kill is not an ack."""
    acked: dict[str, tuple[int, str]] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3 and len(parts[2]) == 64:
                acked[parts[0]] = (int(parts[1]), parts[2])
    return acked


def _check(url: str, acked: dict[str, tuple[int, str]]) -> int:
    """The ledger is contiguous from seq 1, holds every ack as acknowledged, verifies."""
    tenant = open_tenant(url)
    entries = list(tenant.ledger.entries(check_hash=True))
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
    held = {(e.memory_id, e.seq, e.hash) for e in entries}
    lost = [(mid, seq) for mid, (seq, digest) in acked.items() if (mid, seq, digest) not in held]
    assert lost == []
    report = tenant.verify()
    assert (report.chain, report.ok, report.altered, report.missing) == ("intact", True, (), ())
    return len(entries)


@pytest.mark.slow
def test_sixteen_processes_in_two_pools_never_fork_one_tenant(
    postgres_url: str, tmp_path: Path
) -> None:
    """16 processes x 500 saves (two groups, separate pools): seq 1..8000, no gap or repeat,
    every acknowledged save present, verify intact with 8000 records sealed."""
    url = postgres_url + "#fleet"
    open_tenant(url).save({"id": "genesis"})  # schema and tenant row made once, up front
    outputs = [tmp_path / f"w{i}.txt" for i in range(16)]
    procs = []
    for i, path in enumerate(outputs):
        handle = path.open("w")
        group_b = i >= 8
        procs.append((_writer(url, f"{'b' if group_b else 'a'}{i}", 2 if group_b else 1,
                              250 if group_b else 500, handle), handle))  # fmt: skip
    for proc, handle in procs:
        _out, err = proc.communicate(timeout=900)
        handle.close()
        assert proc.returncode == 0, err
    acked = _acks(outputs)
    assert len(acked) == 8000
    assert sorted(seq for seq, _ in acked.values()) == list(range(2, 8002))
    assert _check(url, acked) == 8001
    report = open_tenant(url).verify()
    assert (report.sealed, report.unsealed) == (8001, ())


@pytest.mark.slow
def test_fifty_writers_killed_mid_transaction_lose_nothing_acknowledged(
    postgres_url: str, tmp_path: Path
) -> None:
    """Writers SIGKILLed while the server shows them inside a transaction (50 kills, up to
    four writers at a time, each after at least three acknowledged saves): every save
    acknowledged before a kill is in the ledger with its seq and hash, the chain is contiguous
    and intact, and every record is sealed."""
    url = postgres_url + "#kills"
    open_tenant(url).save({"id": "genesis"})
    rng = random.Random(19)
    outputs: list[Path] = []
    live: dict[str, tuple[subprocess.Popen[str], IO[str]]] = {}
    kills = 0
    spawned = 0
    inside = (
        "SELECT application_name FROM pg_stat_activity WHERE backend_xid IS NOT NULL"
        " AND application_name LIKE 'kill-%%'"
    )
    deadline = time.monotonic() + 240
    with admin(postgres_url) as watch:
        while kills < 50 and time.monotonic() < deadline:
            while len(live) < 4:
                name = f"kill-{spawned}"
                spawned += 1
                path = tmp_path / f"{name}.txt"
                outputs.append(path)
                handle = path.open("w")
                live[name] = (_writer(f"{postgres_url}&application_name={name}#kills", name,
                                      1, 10_000, handle), handle)  # fmt: skip
            busy = [
                row[0]
                for row in watch.execute(inside).fetchall()
                if row[0] in live and (tmp_path / f"{row[0]}.txt").read_text().count("\n") >= 3
            ]  # inside a transaction, after at least three acknowledged saves
            if busy:
                victim = rng.choice(busy)
                time.sleep(rng.random() * 0.002)  # anywhere in the transaction
                proc, handle = live.pop(victim)
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=60)
                handle.close()
                kills += 1
            for name, (proc, handle) in list(live.items()):
                if proc.poll() is not None:
                    handle.close()
                    del live[name]
                    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
            time.sleep(rng.random() * 0.01)
    for proc, handle in live.values():
        proc.kill()
        proc.wait(timeout=60)
        handle.close()
    assert kills == 50
    acked = _acks(outputs)
    assert len(acked) >= 150  # every victim had acknowledged saves before it was killed
    total = _check(url, acked)
    print(f"{kills} kills, {len(acked)} acknowledged saves, {total} entries")

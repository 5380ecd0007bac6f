"""Durable appends per second with 1, 4 and 16 concurrent writers: PostgreSQL, folder, SQLite.

Each case starts N writer processes that append durable entries as fast as they can for a
fixed time, all starting together, and counts the appends acknowledged inside the window
(aggregate entries/s). Cases, interleaved in rounds (the starting case rotates every round,
see ``_timing.py``) so that drifting flush speed hits every case alike:

* ``postgres/one-tenant``: N writers ``Ledger.append`` into one PostgreSQL tenant (each append
  one transaction: head row ``FOR UPDATE``, line, head, ``COMMIT`` with
  ``synchronous_commit = on``);
* ``postgres/N-tenants``: N writers, each into its own tenant of the same database (the fleet
  case: one tenant per agent);
* ``folder``: N writers ``Ledger.append`` into one folder ledger (``flock``, fsyncs);
* ``sqlite``: N writers inserting one row per transaction into one SQLite file (WAL,
  ``synchronous = FULL``), the embedded database's floor for one durable row.

Needs a PostgreSQL server: run it as
``MERKLE_MEMORY_SERVERS_DIR=/tmp bash .ci/with-servers python benchmarks/bench_postgres.py``
(``/tmp`` so the cluster's write-ahead log is on the disk the folder and SQLite cases use:
by default ``.ci/with-servers`` keeps it in memory, where a flush costs nothing, and this
benchmark says so loudly). Without a server it reports itself skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _timing import rotation, spread  # noqa: E402

WRITER = textwrap.dedent(
    """
    import hashlib, sqlite3, sys, time
    kind, target = sys.argv[1], sys.argv[2]
    digest = hashlib.sha256(b"x").hexdigest()
    if kind == "sqlite":
        db = sqlite3.connect(target, timeout=60, isolation_level=None)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = FULL")
        def append(i):
            db.execute("INSERT INTO log (body) VALUES (?)", (digest + str(i),))
    else:
        from merkle_memory.ledger import Ledger
        led = Ledger(target)
        led.append("warm-up", digest)  # connected, tenant and schema made, before the start
        def append(i):
            led.append(f"m{i}", digest)
    print("ready", flush=True)
    start, stop = (float(x) for x in sys.stdin.readline().split())
    while time.time() < start:
        time.sleep(0.001)
    done = 0
    while True:
        append(done)
        if time.time() > stop:
            break
        done += 1
    print(done)
    """
)


def _case(kind: str, targets: list[str], seconds: float) -> float:
    """Run ``len(targets)`` writers for ``seconds``; return aggregate acknowledged appends/s.

    Every writer imports, connects and makes one append first, then says it is ready; only
    when all are ready are they given one start time (0.2 s ahead) and one stop time."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, kind, target],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for target in targets
    ]
    for proc in procs:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{kind} writer failed: {proc.communicate()[1].strip()[-400:]}")
    start = time.time() + 0.2
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(f"{start} {start + seconds}\n")
        proc.stdin.flush()
    total = 0
    for proc in procs:
        out, err = proc.communicate(timeout=seconds + 300)
        if proc.returncode != 0:
            raise RuntimeError(f"{kind} writer failed: {err.strip()[-400:]}")
        total += int(out.strip())
    return total / seconds


def run(writers: list[int], seconds: float, rounds: int) -> dict[str, Any]:
    """Every case for every writer count, interleaved in ``rounds`` rounds."""
    url = os.environ.get("MERKLE_MEMORY_TEST_POSTGRES")
    if not url:
        print(
            "!!! bench_postgres: SKIPPED: no PostgreSQL server (run under"
            " `MERKLE_MEMORY_SERVERS_DIR=/tmp bash .ci/with-servers`)",
            file=sys.stderr,
        )
        return {"suite": "postgres", "skipped": "no PostgreSQL server"}
    data = os.environ.get("MERKLE_MEMORY_TEST_POSTGRES_DATA", "")
    in_memory = data.startswith("/dev/shm")
    if in_memory:
        print(
            "!!! bench_postgres: the PostgreSQL cluster is in memory (/dev/shm): its flushes"
            " cost nothing; set MERKLE_MEMORY_SERVERS_DIR=/tmp for durable figures",
            file=sys.stderr,
        )
    base = Path(data).parent if data and not in_memory else Path(tempfile.gettempdir())
    results: dict[str, Any] = {
        "suite": "postgres",
        "seconds_per_case": seconds,
        "postgres_data": data,
        "postgres_in_memory": in_memory,
        "cases": [],
    }
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        folder = Path(tmp)
        import sqlite3

        for n in writers:
            db = folder / f"floor-{n}.db"
            con = sqlite3.connect(db)
            con.execute("PRAGMA journal_mode = WAL")
            con.execute("CREATE TABLE log (id INTEGER PRIMARY KEY, body TEXT)")
            con.close()
        kinds = ("postgres-one-tenant", "postgres-n-tenants", "folder", "sqlite")
        names = [f"{kind}/{n}" for n in writers for kind in kinds]
        for round_index, order in enumerate(rotation(names, rounds)):
            for name in order:
                kind, count = name.split("/")
                n = int(count)
                tag = f"r{round_index}n{n}"
                if kind == "postgres-one-tenant":
                    targets = [f"{url}#one{tag}"] * n
                    rate = _case("ledger", targets, seconds)
                elif kind == "postgres-n-tenants":
                    rate = _case("ledger", [f"{url}#t{tag}w{i}" for i in range(n)], seconds)
                elif kind == "folder":
                    rate = _case("ledger", [str(folder / tag / "ledger.jsonl")] * n, seconds)
                else:
                    rate = _case("sqlite", [str(folder / f"floor-{n}.db")] * n, seconds)
                samples.setdefault(name, []).append(rate)
                print(f"  {name:26s} round {round_index}: {rate:8,.0f} entries/s", file=sys.stderr)
    for name, rates in samples.items():
        kind, count = name.split("/")
        results["cases"].append(
            {"case": kind, "writers": int(count), "entries_per_second": spread(rates)}
        )

    def over(a: str, b: str) -> float | None:
        low = statistics.median(samples[b])
        return round(statistics.median(samples[a]) / low, 3) if low else None

    for n in writers:
        results[f"writers_{n}"] = {
            "postgres_one_tenant_over_folder": over(f"postgres-one-tenant/{n}", f"folder/{n}"),
            "postgres_one_tenant_over_sqlite": over(f"postgres-one-tenant/{n}", f"sqlite/{n}"),
            "postgres_n_tenants_over_one_tenant": over(
                f"postgres-n-tenants/{n}", f"postgres-one-tenant/{n}"
            ),
        }
    return results


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--quick``, ``--seconds``, ``--rounds``, ``--json OUT``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="1 s per case, one round")
    parser.add_argument("--seconds", type=float, default=None, help="seconds per case")
    parser.add_argument("--rounds", type=int, default=None, help="rounds of every case")
    parser.add_argument("--json", metavar="OUT", default=None, help="write results as JSON")
    args = parser.parse_args(argv)
    seconds = args.seconds if args.seconds is not None else (1.0 if args.quick else 4.0)
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
    result = run([1, 4, 16], seconds, rounds)
    for case in result.get("cases", []):
        rate = case["entries_per_second"]
        print(
            f"{case['case']:22s} {case['writers']:3d} writers: {rate['median']:8,.0f} entries/s"
            f" (min {rate['min']:,.0f}, max {rate['max']:,.0f}, n={rate['n']})"
        )
    if args.json:
        Path(args.json).write_text(json.dumps([result], indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

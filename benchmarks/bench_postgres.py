"""Durable appends per second with 1, 4 and 16 concurrent writers: PostgreSQL, folder, SQLite.

Each case starts N writer processes that append durable entries as fast as they can for a
fixed time, all starting together, and counts the appends acknowledged inside the window
(aggregate entries/s). Cases, interleaved in rounds (the starting case rotates every round,
see ``_timing.py``) so that drifting flush speed hits every case alike:

* ``postgres/one-tenant``: N writers ``Ledger.append`` into one PostgreSQL tenant (each append
  one round trip: queued, then committed by whichever writer holds the tenant's queue lock and
  head row, with every entry queued meanwhile, in one commit with
  ``synchronous_commit = on``; each writer returns once that commit is flushed);
* ``postgres/N-tenants``: N writers, each into its own tenant of the same database (the fleet
  case: one tenant per agent);
* ``folder``: N writers ``Ledger.append`` into one folder ledger (``flock``, fsyncs);
* ``sqlite``: N writers inserting one row per transaction into one SQLite file (WAL,
  ``synchronous = FULL``), the embedded database's floor for one durable row.

Per entry the bench also reports the writers' own CPU (client), for PostgreSQL the CPU of
their server sessions (read from ``/proc``: the server runs on this machine) and the
write-ahead log flushes (``pg_stat_wal.wal_sync``): with flushes well below one per entry
and the CPU of both sides near the cores' time, the CPU is what bounds a case.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

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
    cpu = time.process_time()
    while True:
        append(done)
        if time.time() > stop:
            break
        done += 1
    print(done, time.process_time() - cpu)
    """
)
APP: Final = "mm-bench-writer"  # application_name of the PostgreSQL writers' sessions


def _server_cpu(admin: Any) -> dict[int, float]:
    """CPU seconds used so far by each session of the writers (from ``/proc``: the server
    runs on this machine), keyed by backend pid; ``{}`` where ``/proc`` cannot tell."""
    tick = os.sysconf("SC_CLK_TCK")
    found: dict[int, float] = {}
    rows = admin.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", (APP,))
    for (pid,) in rows.fetchall():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[int(pid)] = (int(fields[11]) + int(fields[12])) / tick
    return found


def _flushes(admin: Any) -> int:
    """Write-ahead log flushes (``fdatasync``) of the server so far (``pg_stat_wal``)."""
    return int(admin.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()[0])


@dataclass(frozen=True, slots=True)
class Sample:
    """One case run once: aggregate acknowledged appends/s, and per append the client CPU,
    the server CPU of the writers' sessions and the write-ahead log flushes (``None`` when
    not measured: the file cases, or a server whose processes ``/proc`` does not show)."""

    rate: float
    client_ms: float
    server_ms: float | None
    flushes: float | None


def _case(kind: str, targets: list[str], seconds: float, admin: Any = None) -> Sample:
    """Run ``len(targets)`` writers for ``seconds``; return what :class:`Sample` holds.

    Every writer imports, connects and makes one append first, then says it is ready; only
    when all are ready are they given one start time (0.2 s ahead) and one stop time.
    ``admin`` (a connection to the server, for the PostgreSQL cases) reads the sessions'
    CPU and the flushes at the start and at the stop time."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, kind, target],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO,  # `python -c` puts its folder first on sys.path: this checkout's library
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
    server: tuple[dict[int, float], dict[int, float]] | None = None
    flushes = (0, 0)
    if admin is not None:
        time.sleep(max(0.0, start - time.time()))
        before, flushed = _server_cpu(admin), _flushes(admin)
        time.sleep(max(0.0, start + seconds - time.time()))
        server, flushes = (before, _server_cpu(admin)), (flushed, _flushes(admin))
    total = 0
    client = 0.0
    for proc in procs:
        out, err = proc.communicate(timeout=seconds + 300)
        if proc.returncode != 0:
            raise RuntimeError(f"{kind} writer failed: {err.strip()[-400:]}")
        done, cpu = out.split()
        total += int(done)
        client += float(cpu)
    per = max(total, 1)
    server_ms = flush = None
    if server is not None and server[0]:
        used = sum(server[1].get(pid, cpu) - cpu for pid, cpu in server[0].items())
        server_ms = used / per * 1e3
        flush = (flushes[1] - flushes[0]) / per
    return Sample(total / seconds, client / per * 1e3, server_ms, flush)


def _median(values: list[float | None]) -> float | None:
    """The median of the measured values, rounded (``None`` when none was measured)."""
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 4) if known else None


def _line(sample: Sample) -> str:
    """One sample as a line of the progress log."""
    text = f"{sample.rate:8,.0f} entries/s, client {sample.client_ms:.3f} ms/entry"
    if sample.server_ms is not None and sample.flushes is not None:
        text += f", server {sample.server_ms:.3f} ms/entry, {sample.flushes:.3f} flushes/entry"
    return text


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
    samples: dict[str, list[Sample]] = {}
    import psycopg

    named = f"{url}{'&' if '?' in url else '?'}application_name={APP}"
    admin = psycopg.connect(url, autocommit=True)
    with tempfile.TemporaryDirectory(dir=base) as tmp, admin:
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
                    sample = _case("ledger", [f"{named}#one{tag}"] * n, seconds, admin)
                elif kind == "postgres-n-tenants":
                    targets = [f"{named}#t{tag}w{i}" for i in range(n)]
                    sample = _case("ledger", targets, seconds, admin)
                elif kind == "folder":
                    sample = _case("ledger", [str(folder / tag / "ledger.jsonl")] * n, seconds)
                else:
                    sample = _case("sqlite", [str(folder / f"floor-{n}.db")] * n, seconds)
                samples.setdefault(name, []).append(sample)
                print(f"  {name:26s} round {round_index}: {_line(sample)}", file=sys.stderr)
    for name, runs in samples.items():
        kind, count = name.split("/")
        case: dict[str, Any] = {
            "case": kind,
            "writers": int(count),
            "entries_per_second": spread([r.rate for r in runs]),
            "client_cpu_ms_per_entry": _median([r.client_ms for r in runs]),
            "server_cpu_ms_per_entry": _median([r.server_ms for r in runs]),
            "wal_flushes_per_entry": _median([r.flushes for r in runs]),
        }
        results["cases"].append(case)

    def over(a: str, b: str) -> float | None:
        low = statistics.median(r.rate for r in samples[b])
        return round(statistics.median(r.rate for r in samples[a]) / low, 3) if low else None

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
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 5)
    result = run([1, 4, 16], seconds, rounds)
    for case in result.get("cases", []):
        rate = case["entries_per_second"]
        cpu = f"client {case['client_cpu_ms_per_entry']:.3f} ms"
        if case["server_cpu_ms_per_entry"] is not None:
            cpu += (
                f", server {case['server_cpu_ms_per_entry']:.3f} ms,"
                f" {case['wal_flushes_per_entry']:.3f} flushes"
            )
        print(
            f"{case['case']:22s} {case['writers']:3d} writers: {rate['median']:8,.0f} entries/s"
            f" (min {rate['min']:,.0f}, max {rate['max']:,.0f}, n={rate['n']}); per entry: {cpu}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps([result], indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

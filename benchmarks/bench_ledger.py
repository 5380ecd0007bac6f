"""Ledger benchmark: append throughput and verify speed beside plain baselines (issue 3).

``python benchmarks/bench_ledger.py [--quick] [--json OUT]``. Each ``bench_*`` function is
importable by a combined runner and returns a dict of figures.

- appends/s with an fsync per append, and with group commit of 1,000 entries per fsync;
- a plain ``write + fsync`` loop of the same bytes (the floor for one fsync per append);
- ``sqlite3`` (WAL, ``synchronous=FULL``) committing the same rows one at a time;
- verify entries/s on a large ledger beside the floor ``json.loads + sha256`` per line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from merkle_memory.ledger import Ledger, verify_ledger


def _items(n: int, offset: int = 0) -> list[tuple[str, str]]:
    return [
        (f"m{offset + i}", hashlib.sha256(str(offset + i).encode()).hexdigest()) for i in range(n)
    ]


def bench_append(n: int, group: int = 1000) -> dict[str, Any]:
    """Appends/s: one fsync per append, group commit, plain write+fsync, sqlite3 WAL FULL."""
    out: dict[str, Any] = {"appends": n, "group": group}
    with tempfile.TemporaryDirectory() as tmp:
        led = Ledger(Path(tmp) / "a" / "ledger.jsonl")
        t = time.perf_counter()
        for mid, cs in _items(n):
            led.append(mid, cs)
        out["ledger_fsync_each_per_s"] = n / (time.perf_counter() - t)
        lines = led.path.read_bytes().splitlines(keepends=True)

        led2 = Ledger(Path(tmp) / "b" / "ledger.jsonl")
        total = max(n * 10, group)
        t = time.perf_counter()
        for start in range(0, total, group):
            led2.append_many(_items(group, start))
        out["ledger_group_commit_per_s"] = total / (time.perf_counter() - t)

        t = time.perf_counter()
        fd = os.open(Path(tmp) / "plain.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for line in lines:
                os.write(fd, line)
                os.fsync(fd)
        finally:
            os.close(fd)
        out["plain_write_fsync_per_s"] = n / (time.perf_counter() - t)

        db = sqlite3.connect(Path(tmp) / "bench.db", isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE e (seq INTEGER PRIMARY KEY, line TEXT)")
        t = time.perf_counter()
        for seq, line in enumerate(lines, 1):
            db.execute("BEGIN")
            db.execute("INSERT INTO e VALUES (?, ?)", (seq, line.decode()))
            db.execute("COMMIT")
        out["sqlite_wal_full_per_s"] = n / (time.perf_counter() - t)
        db.close()
    return out


def bench_verify(n: int) -> dict[str, Any]:
    """Verify entries/s on an n-entry ledger beside json.loads + sha256 per line."""
    out: dict[str, Any] = {"entries": n}
    with tempfile.TemporaryDirectory() as tmp:
        led = Ledger(Path(tmp) / "ledger.jsonl")
        t = time.perf_counter()
        for start in range(0, n, 10_000):
            led.append_many(_items(min(10_000, n - start), start))
        out["generate_s"] = time.perf_counter() - t
        t = time.perf_counter()
        with open(led.path, "rb") as fh:
            for line in fh:
                json.loads(line)
                hashlib.sha256(line).hexdigest()
        floor = time.perf_counter() - t
        t = time.perf_counter()
        report = verify_ledger(led.path, {})
        took = time.perf_counter() - t
        assert report.chain == "intact" and report.entries == n
        out["floor_per_s"] = n / floor
        out["verify_per_s"] = n / took
        out["verify_over_floor"] = took / floor
    return out


def main(argv: list[str] | None = None) -> int:
    """Run both benchmarks and print (or write) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds)")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    appends, entries = (50, 20_000) if args.quick else (300, 1_000_000)
    results = {"append": bench_append(appends), "verify": bench_verify(entries)}
    for name, figures in results.items():
        for key, value in figures.items():
            shown = f"{value:,.1f}" if isinstance(value, float) else f"{value:,}"
            print(f"{name:7} {key:28} {shown}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

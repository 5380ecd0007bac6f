"""Benchmark: verify a memory bank of 10,000 memories (issue 4 acceptance), in memories/s.

Setup builds the bank fast and deterministically: memory files are written directly (no
per-file fsync; the bytes are exactly what ``MemoryBank.save`` writes) and the ledger is sealed
with one group commit (``Ledger.append_many``). Then ``MemoryBank.verify()`` is timed: every
file parsed strictly, every id recomputed and compared with the stored id and the file name,
and the ledger chain verified against the testimony of every memory.

Usage::

    python benchmarks/bench_bank.py                 # 10,000 memories, median of 5
    python benchmarks/bench_bank.py --quick         # 1,000 memories, median of 3 (CI smoke)
    python benchmarks/bench_bank.py --json out.json # also write the results as JSON

Importable by a combined runner: ``build_bank(root, n)``, ``bench_verify(root, repeat)``,
``run(n, repeat)``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

try:
    import merkle_memory  # noqa: F401
except ImportError:  # running from a checkout without installing it
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import Clock, spread
from _timing import repeat as timed_repeat

from merkle_memory.bank import MemoryBank
from merkle_memory.bank.memory import Memory
from merkle_memory.ledger import Ledger

__all__ = ["bench_verify", "build_bank", "main", "run"]

_TYPES = ("fact", "preference", "decision", "insight")


def build_bank(root: Path, n: int) -> list[str]:
    """Write ``n`` deterministic memories (a quarter archived) and seal them; return the ids."""
    bank = MemoryBank(root)
    bank.active_dir.mkdir(parents=True, exist_ok=True)
    bank.archive_dir.mkdir(exist_ok=True)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ids: list[str] = []
    for i in range(n):
        memory = Memory(
            _TYPES[i % 4],
            ("project", "user")[i % 2],
            f"memory {i}: the agent learned thing number {i} | with --- and  spaces ",
            [f"t{i % 7}", "bench"],
            start + timedelta(seconds=i, microseconds=i),
            f"session-{i // 100}" if i % 3 else None,
            [f"mm://memory/{ids[i - 1]}"] if i and i % 5 == 0 else [],
        )
        folder = bank.archive_dir if i % 4 == 3 else bank.active_dir
        (folder / memory.file_name).write_bytes(memory.to_bytes())
        ids.append(memory.id)
    Ledger(bank.ledger_path).append_many([(i, i) for i in ids])
    return ids


def bench_verify(root: Path, repeat: int = 3, clock: Clock = time.perf_counter) -> dict[str, Any]:
    """Time ``MemoryBank(root).verify()`` ``repeat`` times: median and spread (no baseline)."""
    bank = MemoryBank(root)
    reports = []

    def verify() -> None:
        reports.append(bank.verify())

    wall = timed_repeat(verify, repeat, clock)
    report = reports[-1]
    assert report.ok, "the benchmark bank must verify"
    count = report.active + report.archived
    return {
        "name": "bank_verify",
        "memories": count,
        "seconds": spread(wall),
        "memories_per_second": spread([count / x for x in wall]),
        "ledger_entries": report.ledger["entries"] if report.ledger else 0,
    }


def run(n: int = 10_000, repeat: int = 3) -> dict[str, Any]:
    """Build a bank of ``n`` memories in a temp folder and benchmark its verify."""
    with tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        build_bank(Path(tmp), n)
        setup = time.perf_counter() - began
        result = bench_verify(Path(tmp), repeat)
    result["setup_seconds"] = round(setup, 2)
    result["python"] = sys.version.split()[0]
    return result


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--quick``, ``--n``, ``--repeat``, ``--json OUT``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="1,000 memories, one run")
    parser.add_argument("--n", type=int, default=None, help="number of memories")
    parser.add_argument(
        "--repeat", type=int, default=None, help="runs (median and spread reported)"
    )
    parser.add_argument("--json", metavar="OUT", default=None, help="write results as JSON")
    args = parser.parse_args(argv)
    n = args.n if args.n is not None else (1_000 if args.quick else 10_000)
    repeat = args.repeat if args.repeat is not None else (3 if args.quick else 5)
    result = run(n, repeat)
    print(
        f"bank verify: {result['memories']} memories in {result['seconds']['median']} s "
        f"(median of {repeat}) = {result['memories_per_second']['median']:,.0f} memories/s "
        f"(setup {result['setup_seconds']} s)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps([result], indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

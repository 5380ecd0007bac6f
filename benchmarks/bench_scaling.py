"""Benchmark: scaling table, time per item at growing n (issue 8, item 1).

In-memory operations at n = 1k, 10k, 100k, 1M:

* ``canonical_digest``: ``canonical.digest`` of a small chat-turn object (built per item);
* ``node_hash``: ``dag.node_hash`` along a chain of n nodes (each the parent of the next);
* ``compact_range_append``: ``rfc6962.hash_leaf`` + ``CompactRange.append`` of n leaves.

Operations that fsync per item at 1k and 10k, and group commit up to 1M:

* ``ledger_append_fsync``: ``Ledger.append`` per entry (line fsync, then ``ledger.head``
  replaced atomically: temp file, fsync, rename, folder fsync);
* ``ledger_group_commit``: ``Ledger.append_many`` in batches of 1,000 entries (one fsync each).

For each operation the run reports seconds, microseconds per item at every n (the median
over chunks of 1,000 items, robust to noise from other processes), and
``flatness`` = (largest time/n) / (smallest time/n); ``flat`` is true when it is at most 1.5.
A size whose projected time (from the previous size) exceeds the per-operation budget is
skipped and reported as such, so the run stays bounded on slow disks.

Usage::

    python benchmarks/bench_scaling.py [--quick] [--budget SECONDS] [--json OUT]

``--quick``: in-memory up to 50k, fsync at 1k, group commit up to 10k.
Importable: ``run(quick=False, budget=None) -> dict``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # runnable from a checkout without installing
    sys.path.insert(0, str(REPO))

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _timing import Clock  # noqa: E402

from merkle_memory import canonical, dag, rfc6962  # noqa: E402
from merkle_memory.ledger import Ledger  # noqa: E402

__all__ = ["FLAT_LIMIT", "main", "run", "scale"]

FLAT_LIMIT = 1.5
"""Largest accepted ratio between the slowest and the fastest time per item."""

_TESTIMONY = "ab" * 32
_BATCH = 1000


_CHUNK = 1000


def _canonical_digest(n: int) -> Iterator[int]:
    template = {"role": "user", "content": [{"type": "text", "text": "Hey Claude, run ls"}]}
    digest = canonical.digest
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        for i in range(start, stop):
            digest({**template, "seq": i})
        yield stop - start


def _node_hash(n: int) -> Iterator[int]:
    buckets = [
        dag.Bucket.from_dict(
            {
                "type": "message",
                "role": ("user", "assistant")[k % 2],
                "content": [{"type": "text", "text": f"turn text {k}"}],
            }
        )
        for k in range(8)
    ]
    node_hash = dag.node_hash
    parent: str | None = None
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        for i in range(start, stop):
            parent = node_hash(buckets[i % 8], parent)
        yield stop - start


def _compact_range(n: int) -> Iterator[int]:
    compact = rfc6962.CompactRange()
    hash_leaf, append = rfc6962.hash_leaf, compact.append
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        for i in range(start, stop):
            append(hash_leaf(i.to_bytes(8, "big")))
        yield stop - start
    compact.root()


def _ledger_fsync(n: int) -> Iterator[int]:
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(Path(tmp) / "ledger.jsonl")
        ledger.append("setup", _TESTIMONY)  # creates the files: setup, not per-item cost
        yield 0
        step = max(1, min(_CHUNK, n // 10))
        for start in range(0, n, step):
            stop = min(n, start + step)
            for i in range(start, stop):
                ledger.append(f"m{i}", _TESTIMONY)
            yield stop - start


def _ledger_group(n: int) -> Iterator[int]:
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(Path(tmp) / "ledger.jsonl")
        ledger.append("setup", _TESTIMONY)  # creates the files: setup, not per-item cost
        yield 0
        for start in range(0, n, _BATCH):
            stop = min(n, start + _BATCH)
            ledger.append_many([(f"m{i}", _TESTIMONY) for i in range(start, stop)])
            yield stop - start


def scale(
    func: Callable[[int], Iterator[int]],
    sizes: list[int],
    budget: float,
    *,
    repeat_small: bool = False,
    clock: Clock = time.perf_counter,
) -> dict[str, Any]:
    """Time ``func(n)`` for each n; skip a size whose projected time exceeds ``budget`` s.

    ``func(n)`` does n items and yields after each chunk the number of items it did, so the
    time of every chunk is known (a first ``0`` marks the end of its setup, which is not
    timed). The time per item at n is the **median** chunk time per
    item over the whole run: a chunk slowed by another process or a scheduling hiccup does
    not move it, while a cost that grows with n (each item slower as the structure grows)
    raises the later chunks and so the median. With ``repeat_small``, a size below 100,000
    is run ``min(5, 100_000 // n)`` times and the chunk times pooled.

    Returns:
        ``{"points": [{"n", "seconds", "us_per_item"} or {"n", "skipped"}], "flatness",
        "flat"}`` (flatness over the measured points; ``None`` with fewer than two).
    """
    points: list[dict[str, Any]] = []
    per_item: list[float] = []
    for n in sizes:
        if per_item and per_item[-1] * n > budget:
            points.append({"n": n, "skipped": f"projected {per_item[-1] * n:.0f} s > budget"})
            continue
        runs = min(5, max(1, 100_000 // n)) if repeat_small else 1
        seconds = float("inf")
        chunk_costs: list[float] = []
        for _ in range(runs):
            began = last = clock()
            for done in func(n):
                now = clock()
                if done == 0:  # setup finished: start the clock here
                    began = now
                else:
                    chunk_costs.append((now - last) / done)
                last = now
            seconds = min(seconds, last - began)
        cost = statistics.median(chunk_costs)
        per_item.append(cost)
        points.append({"n": n, "seconds": round(seconds, 4), "us_per_item": round(cost * 1e6, 3)})
    flatness = round(max(per_item) / min(per_item), 3) if len(per_item) > 1 else None
    return {
        "points": points,
        "flatness": flatness,
        "flat": None if flatness is None else flatness <= FLAT_LIMIT,
    }


def run(quick: bool = False, budget: float | None = None) -> dict[str, Any]:
    """Run the scaling table.

    Args:
        quick: smaller sizes (see the module docstring).
        budget: seconds allowed per operation and size (default 20 quick, 60 full).

    Returns:
        ``{"budget_seconds", "operations": {name: scale(...) result}}``.
    """
    limit = budget if budget is not None else (20.0 if quick else 60.0)
    memory_sizes = [1_000, 10_000, 50_000] if quick else [1_000, 10_000, 100_000, 1_000_000]
    fsync_sizes = [1_000] if quick else [1_000, 10_000]
    group_sizes = [1_000, 10_000] if quick else memory_sizes
    plan: list[tuple[str, Callable[[int], Iterator[int]], list[int]]] = [
        ("canonical_digest", _canonical_digest, memory_sizes),
        ("node_hash", _node_hash, memory_sizes),
        ("compact_range_append", _compact_range, memory_sizes),
        ("ledger_append_fsync", _ledger_fsync, fsync_sizes),
        ("ledger_group_commit", _ledger_group, group_sizes),
    ]
    operations: dict[str, Any] = {}
    for name, func, sizes in plan:
        in_memory = not name.startswith("ledger_")
        operations[name] = scale(func, sizes, limit, repeat_small=in_memory)
        print(f"scaling {name}: {operations[name]}", file=sys.stderr)
    return {"budget_seconds": limit, "operations": operations}


def print_table(result: dict[str, Any], out: Any = None) -> None:
    """Print the scaling table: µs per item at each n, then the flatness ratio."""
    out = out or sys.stdout
    sizes = sorted({p["n"] for op in result["operations"].values() for p in op["points"]})
    header = f"{'operation':<22}" + "".join(f"{n:>12,}" for n in sizes) + f"{'max/min':>9}"
    print(header + "   (µs per item)", file=out)
    print("-" * len(header), file=out)
    for name, op in result["operations"].items():
        cells = {p["n"]: p for p in op["points"]}
        row = f"{name:<22}"
        for n in sizes:
            point = cells.get(n)
            row += (
                f"{'':>12}"
                if point is None
                else (
                    f"{'skipped':>12}" if "skipped" in point else f"{point['us_per_item']:>12.2f}"
                )
            )
        flat = "" if op["flatness"] is None else f"{op['flatness']:.2f}x"
        print(row + f"{flat:>9}", file=out)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--quick``, ``--budget SECONDS``, ``--json OUT``."""
    parser = argparse.ArgumentParser(description="Scaling table: time per item at growing n.")
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--budget", type=float, default=None, help="seconds per operation/size")
    parser.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    args = parser.parse_args(argv)
    result = run(args.quick, args.budget)
    print_table(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
